//! Flags every histogram tool shares, with bcc's letters, and one-line parse errors.

use clap::{Args, CommandFactory, Parser};

/// `[-T] [-m] [-j] [--explain] [-v] [--heatmap FILE.svg] [interval [count]]`
#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// Print a timestamp (HH:MM:SS) before each report
    #[arg(short = 'T', long)]
    pub timestamp: bool,

    /// Histograms in milliseconds (default: microseconds)
    #[arg(short = 'm', long)]
    pub milliseconds: bool,

    /// One JSON object per report instead of text (fields: see the README)
    #[arg(short = 'j', long)]
    pub json: bool,

    /// Show which kernel hooks were chosen and why, prove they load and attach, then exit
    #[arg(long)]
    pub explain: bool,

    /// Print libbpf's debug messages
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Seconds between reports (default: a single report at Ctrl-C)
    #[arg(value_parser = parse_interval)]
    pub interval: Option<u64>,

    /// Number of reports before exiting (default: until Ctrl-C)
    #[arg(value_parser = parse_count, requires = "interval")]
    pub count: Option<u64>,

    /// Also draw the reports as a latency heat map (a column per interval) into FILE.svg,
    /// rewritten after every interval; needs an interval
    #[arg(long, value_name = "FILE.svg")]
    pub heatmap: Option<std::path::PathBuf>,
}

fn parse_positive(s: &str, what: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err(format!("{what} must be at least 1")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{what} must be a whole positive number, got '{s}'")),
    }
}

fn parse_interval(s: &str) -> Result<u64, String> {
    parse_positive(s, "interval (seconds)")
}

fn parse_count(s: &str) -> Result<u64, String> {
    parse_positive(s, "count")
}

/// A histogram tool's whole command line: its own arguments `A`, then the ones every histogram
/// tool shares. Named, described and versioned by `histogram_command`.
#[derive(Parser, Debug)]
pub struct HistogramCommand<A: Args> {
    #[command(flatten)]
    pub tool: A,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The clap command of a histogram tool with arguments `A`: its name, one-line description and
/// examples (what `#[command(...)]` gives a tool's own `Parser`).
pub fn histogram_command<A: Args>(
    tool: &'static str,
    about: &'static str,
    examples: &'static str,
) -> clap::Command {
    HistogramCommand::<A>::command()
        .name(tool)
        .bin_name(tool)
        .about(about)
        .after_help(examples)
}

/// `--version`: ours, and the libbpf in use, e.g. `0.1.0 (libbpf 1.7, vendored, static)`.
fn version_line() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        format!(
            "{} ({})",
            env!("CARGO_PKG_VERSION"),
            crate::common::load::libbpf::libbpf_in_use()
        )
    })
}

/// Parses the command line; a bad one is reported in one line and exits with status 2
/// (`--help` and `--version` print normally).
pub fn parse<T: Parser>(tool: &str) -> T {
    parse_command(tool, T::command())
}

/// The same for a command built at run time (`histogram_command`).
pub fn parse_command<T: clap::FromArgMatches>(tool: &str, command: clap::Command) -> T {
    let command = command.version(version_line());
    crate::common::run::docs::generate_if_asked(tool, &command);
    match command
        .try_get_matches()
        .and_then(|m| T::from_arg_matches(&m))
    {
        Ok(args) => args,
        Err(err) => {
            use clap::error::ErrorKind;
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                let _ = err.print();
                std::process::exit(0);
            }
            eprintln!("{}", one_line_clap_error(tool, &err.to_string()));
            std::process::exit(2);
        }
    }
}

/// A command line that parses but does not make sense (e.g. two flags that exclude each other):
/// one line on stderr and status 2, as for a parse error.
pub fn usage_error(tool: &str, msg: &str) -> ! {
    eprintln!("{tool}: {msg} (see {tool} --help)");
    std::process::exit(2);
}

/// clap's rendered error, folded to its first line, e.g.
/// `biolat: invalid value 'x' for '[INTERVAL]': ... (see biolat --help)`.
pub fn one_line_clap_error(tool: &str, rendered: &str) -> String {
    let first = rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments");
    let first = first.trim().trim_start_matches("error: ");
    format!("{tool}: {first} (see {tool} --help)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn positional_interval_and_count() {
        let t = T::try_parse_from(["x", "-T", "-m", "2", "5"]).unwrap();
        assert_eq!(t.common.interval, Some(2));
        assert_eq!(t.common.count, Some(5));
        assert!(t.common.timestamp && t.common.milliseconds);
    }

    #[test]
    fn bad_interval_is_refused_in_one_line() {
        for bad in [["x", "0"], ["x", "-3"], ["x", "abc"]] {
            let err = T::try_parse_from(bad).unwrap_err().to_string();
            let line = one_line_clap_error("x", &err);
            assert!(!line.contains('\n'));
            assert!(line.starts_with("x: "), "{line}");
        }
        let err = T::try_parse_from(["x", "0"]).unwrap_err().to_string();
        assert!(
            err.contains("interval (seconds) must be at least 1"),
            "{err}"
        );
    }
}
