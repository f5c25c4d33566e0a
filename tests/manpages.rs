//! Each tool's man page is generated from the same definition as its command line: every option
//! `--help` lists is documented, under the tool's name, in section 8, with the tool's examples;
//! its completions too; and `--version` says which libbpf the tool runs on.

mod support;

use support::*;

/// Every tool, and one alias (a link to fslat).
const TOOLS: [&str; 8] = [
    "iostack",
    "iostack-exporter",
    "biolat",
    "bioslower",
    "syslat",
    "vfslat",
    "fslat",
    "ext4lat",
];

#[test]
fn every_tool_has_a_man_page_listing_its_options() {
    for tool in TOOLS {
        let man = run(tool, &["--generate-man"]);
        assert!(man.status.success(), "{tool}: {man:?}");
        let page = String::from_utf8(man.stdout).expect("roff is text");
        assert!(
            page.contains(&format!(".TH {tool} 8")),
            "{tool}: no .TH line"
        );
        assert!(page.contains(".SH EXAMPLES"), "{tool}: no EXAMPLES section");
        let help = String::from_utf8(run(tool, &["--help"]).stdout).unwrap();
        let longs: Vec<&str> = help
            .split_whitespace()
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.trim_end_matches([',', '.']))
            // An optional value: `--per-cgroup[=<DEPTH>]`.
            .map(|w| w.split(['[', '=']).next().unwrap_or(w))
            .collect();
        assert!(longs.len() >= 5, "{tool}: options in --help: {longs:?}");
        for long in longs {
            // roff escapes each '-' as "\-".
            let escaped = long.replace('-', "\\-");
            assert!(
                page.contains(&escaped),
                "{tool}: {long} missing from the man page"
            );
        }
    }
}

#[test]
fn every_tool_completes_in_bash_zsh_and_fish_under_its_own_name() {
    for tool in TOOLS {
        // bash: `complete -F _FUNCTION ... TOOL` (clap spells a '-' of the name as "__" in the
        // function's name).
        let bash = |script: &str| {
            script.lines().any(|l| {
                l.trim_start().starts_with("complete -F _")
                    && l.trim_end().ends_with(&format!(" {tool}"))
            })
        };
        for (shell, mark) in [
            ("bash", "complete -F _... TOOL".to_string()),
            ("zsh", format!("#compdef {tool}")),
            ("fish", format!("complete -c {tool} ")),
        ] {
            let out = run(tool, &["--generate-completion", shell]);
            assert!(out.status.success(), "{tool} {shell}: {out:?}");
            let script = String::from_utf8(out.stdout).unwrap();
            let found = match shell {
                "bash" => bash(&script),
                _ => script.contains(&mark),
            };
            assert!(found, "{tool} {shell}: no '{mark}'");
        }
    }
}

#[test]
fn version_names_the_libbpf_in_use_and_where_it_comes_from() {
    let out = run("biolat", &["--version"]);
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let origin = if cfg!(feature = "vendored-libbpf") {
        "vendored, static"
    } else {
        "system, shared"
    };
    assert!(
        line.starts_with(&format!("biolat {} (libbpf 1.", env!("CARGO_PKG_VERSION")))
            && line.trim_end().ends_with(&format!("{origin})")),
        "{line}"
    );
}
