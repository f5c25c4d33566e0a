//! Each tool's man page is generated from the same definition as its command line: every option
//! `--help` lists is documented, under the tool's name, in section 8.

mod support;

use support::*;

#[test]
fn every_tool_has_a_man_page_listing_its_options() {
    for tool in [
        "biolat",
        "bioslower",
        "syslat",
        "vfslat",
        "fslat",
        "ext4lat",
    ] {
        let man = run(tool, &["--generate-man"]);
        assert!(man.status.success(), "{tool}: {man:?}");
        let page = String::from_utf8(man.stdout).expect("roff is text");
        assert!(
            page.contains(&format!(".TH {tool} 8")),
            "{tool}: no .TH line"
        );
        let help = String::from_utf8(run(tool, &["--help"]).stdout).unwrap();
        let longs: Vec<&str> = help
            .split_whitespace()
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.trim_end_matches([',', '.']))
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
