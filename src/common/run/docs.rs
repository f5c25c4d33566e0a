//! What a package installs beside each tool, rendered from the same clap definition as its command
//! line: the man page (section 8, with the tool's examples as an EXAMPLES section) and the shell
//! completions. `tool --generate-man` and `tool --generate-completion SHELL` print them;
//! `scripts/gen-docs` runs every tool so to fill one folder. Both speak with the name the tool was
//! run as, so a distribution that installs `bpf-biolat` gets `bpf-biolat.8` about `bpf-biolat`.

use std::io::{self, Write};

use clap_complete::Shell;
use roff::{bold, roman, Roff};

/// `tool --generate-man` prints the man page and exits. Hidden from `--help`: for packagers.
pub const MAN_FLAG: &str = "--generate-man";
/// `tool --generate-completion bash|zsh|fish` prints that shell's completion script and exits.
pub const COMPLETION_FLAG: &str = "--generate-completion";

/// Every tool of the package, for the SEE ALSO section (the aliases are in `dist/aliases`).
const TOOLS: &[&str] = &[
    "iostack",
    "biolat",
    "bioslower",
    "syslat",
    "vfslat",
    "fslat",
    "rastat",
];

/// Handles `--generate-man` and `--generate-completion SHELL` as the first argument: prints the
/// document for `command` under the name the program was run as, and exits. Returns otherwise.
pub fn generate_if_asked(tool: &str, command: &clap::Command) {
    let mut args = std::env::args_os().skip(1);
    let Some(first) = args.next() else { return };
    // Leaked once: the process exits right after.
    let name: &'static str = String::leak(run_as(tool));
    let command = command.clone().name(name).bin_name(name);
    let written = if first == MAN_FLAG {
        write_man_page(command, &mut io::stdout().lock())
    } else if first == COMPLETION_FLAG {
        let shell = args.next().and_then(|s| s.to_str()?.parse::<Shell>().ok());
        let Some(shell) = shell else {
            eprintln!("{tool}: {COMPLETION_FLAG} needs a shell: bash, zsh or fish");
            std::process::exit(2);
        };
        write_completion(command, shell, &mut io::stdout().lock())
    } else {
        return;
    };
    match written {
        Ok(()) => std::process::exit(0),
        // `--generate-man | head`: the reader has what it wanted.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("{tool}: writing the document failed: {e}");
            std::process::exit(1);
        }
    }
}

/// The name the program was run as (`bpf-biolat`, `xfslat`), or `tool` if it cannot be told.
fn run_as(tool: &str) -> String {
    std::env::args_os()
        .next()
        .and_then(|p| {
            std::path::Path::new(&p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| tool.to_string())
}

/// The man page: NAME, SYNOPSIS, DESCRIPTION, OPTIONS from clap; EXAMPLES from the examples
/// `--help` prints after the options; SEE ALSO; VERSION (ours alone: the page must not depend on
/// the libbpf a build links, so two builds of one commit write the same page).
pub fn write_man_page(command: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let examples = command
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    let name = command.get_name().to_string();
    let command = command.version(env!("CARGO_PKG_VERSION"));
    let man = clap_mangen::Man::new(command)
        .section("8")
        .manual("iostack")
        .source(concat!("iostack ", env!("CARGO_PKG_VERSION")));
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    let mut roff = Roff::new();
    let examples = parse_examples(&examples);
    if !examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]);
        for (invocation, what) in examples {
            roff.control("TP", []);
            roff.text([bold(invocation)]);
            roff.text([roman(what)]);
        }
    }
    roff.control("SH", ["SEE ALSO"]);
    // `bpf-xfslat`: the distribution's prefix is `bpf-`, and its tools are named with it.
    let base = name.rsplit('-').next().unwrap_or(&name);
    let prefix = &name[..name.len() - base.len()];
    let mut see_also: Vec<String> = TOOLS
        .iter()
        .filter(|t| **t != base)
        .map(|t| format!("{prefix}{t}(8)"))
        .collect();
    see_also.extend(["biolatency(8)", "bpftool(8)"].map(String::from));
    roff.text([roman(see_also.join(", "))]);
    roff.to_writer(out)?;
    man.render_version_section(out)?;
    out.flush()
}

/// One shell's completion script for `command`.
pub fn write_completion(
    mut command: clap::Command,
    shell: Shell,
    out: &mut dyn Write,
) -> io::Result<()> {
    let name = command.get_name().to_string();
    clap_complete::generate(shell, &mut command, name, out);
    out.flush()
}

/// The `(invocation, what it does)` pairs of a tool's examples text: after an `Examples:` line,
/// each indented line is an invocation, two or more spaces, then what it does.
fn parse_examples(text: &str) -> Vec<(String, String)> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("Examples"))
        .skip(1)
        .filter_map(|line| {
            let line = line.trim();
            let (invocation, what) = line.split_once("  ")?;
            Some((invocation.trim().to_string(), what.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_split_into_invocation_and_purpose() {
        let text =
            "Examples:\n  biolat 1 10            a histogram every second\n  biolat -Q    queued";
        assert_eq!(
            parse_examples(text),
            vec![
                ("biolat 1 10".into(), "a histogram every second".into()),
                ("biolat -Q".into(), "queued".into())
            ]
        );
    }
}
