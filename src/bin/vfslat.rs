//! vfslat: how long each VFS operation takes. The tool is `iostack::tools::vfslat` on the
//! `fnlat` engine.

use std::process::ExitCode;

use clap::Args;

use iostack::tools::fnlat::{fnlat_main, FnlatArgs};
use iostack::tools::vfslat::VFS;

const ABOUT: &str = "Summarize the latency of VFS operations as histograms";

const EXAMPLES: &str = "Examples:
  vfslat                 read, write, fsync, open... latency, printed at Ctrl-C
  vfslat --per-fs 1 5    per filesystem type (ext4, xfs, tmpfs, proc...), every second
  vfslat -p 1234 -j      one process, as JSON
  vfslat --heatmap vfs.svg 1   every second, also a latency heat map per operation in vfs.svg
  vfslat --min 10        every VFS operation slower than 10 ms, as it ends
  vfslat --explain       which kernel hooks would be used, and why";

/// vfslat's own arguments.
#[derive(Args, Debug)]
struct VfslatArgs {
    #[command(flatten)]
    fnlat: FnlatArgs,

    /// A histogram per operation and filesystem type (from the file's superblock)
    #[arg(long)]
    per_fs: bool,
}

fn main() -> ExitCode {
    fnlat_main::<VfslatArgs>("vfslat", ABOUT, EXAMPLES, |args, common| {
        args.fnlat.options("vfslat", VFS, args.per_fs, common)
    })
}
