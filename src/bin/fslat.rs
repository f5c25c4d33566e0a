// fslat: how long a filesystem's file operations take (`fslat --fs xfs`); installed as
// `ext4lat`, `xfslat`... its name chooses the filesystem. The tool is `iostack::tools::fslat`
// on the `fnlat` engine.

use std::process::ExitCode;

use clap::Args;

use iostack::tools::fnlat::{fnlat_main, FnlatArgs};
use iostack::tools::fslat;

const ABOUT: &str = "Summarize the latency of a filesystem's file operations as histograms";

const EXAMPLES: &str = "Examples:
  ext4lat                ext4's read, write, open, fsync, getattr latency, printed at Ctrl-C
  fslat --fs xfs 1 5     xfs, every second, five times
  ext4lat -p 1234 -j     one process, as JSON
  ext4lat --heatmap ext4.svg 1   every second, also a latency heat map per operation in ext4.svg
  ext4lat --min 10       every ext4 operation slower than 10 ms (like ext4slower)
  xfslat --explain       which kernel hooks would be used, and why";

/// fslat's own arguments.
#[derive(Args, Debug)]
struct FslatArgs {
    #[command(flatten)]
    fnlat: FnlatArgs,

    /// The filesystem: ext4, xfs, btrfs, nfs, f2fs (default: from the program's name, e.g.
    /// ext4lat)
    #[arg(long = "fs", value_name = "FS")]
    fs: Option<String>,
}

fn main() -> ExitCode {
    let program = std::env::args().next().unwrap_or_default();
    let named = fslat::from_program_name(&program);
    // Messages speak with the name the tool was run as.
    let name: &'static str = named.map_or("fslat", |fs| String::leak(format!("{fs}lat")));
    fnlat_main::<FslatArgs>(name, ABOUT, EXAMPLES, |args, common| {
        let fs = args.fs.as_deref().or(named).ok_or_else(|| {
            anyhow::anyhow!(
                "which filesystem? use --fs {} (or run it as ext4lat, xfslat...)",
                fslat::names().join("|")
            )
        })?;
        args.fnlat.options(name, fslat::layer(fs)?, false, common)
    })
}
