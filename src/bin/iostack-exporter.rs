//! iostack-exporter: every layer's latency in Prometheus. The component is
//! `iostack::tools::exporter`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use iostack::common::block::disk::DiskFilter;
use iostack::tools::exporter::layers::{LayerName, LayerOptions};
use iostack::tools::exporter::{self, ExporterOptions, DEFAULT_LAYERS, NAME};

const EXAMPLES: &str = "Examples:
  iostack-exporter                        block and filesystem latency on :9709/metrics
  iostack-exporter --layers block,fs,vfs,syscall   every layer (the syscall layer runs on every system call)
  iostack-exporter --layers block,fs,breakdown   also where each I/O call's time went (iostack's parts)
  iostack-exporter --layers block,readahead   also readahead's pages: brought in, used, wasted
  iostack-exporter -d nvme0n1 --per-cgroup   one disk, split by service or container (cgroup v2)
  iostack-exporter --cgroup system.slice/postgresql.service   one service's I/O only
  iostack-exporter --listen 127.0.0.1:9709   only for scrapers on this host
  iostack-exporter --explain              which kernel hooks each layer would use, and why";

/// Export block, filesystem, VFS and system call latency histograms, where I/O calls' time went and readahead's waste, to Prometheus
#[derive(Parser, Debug)]
#[command(name = NAME, version, after_help = EXAMPLES)]
struct Args {
    /// Address and port to serve /metrics on
    #[arg(long, value_name = "ADDR:PORT", default_value = exporter::DEFAULT_LISTEN)]
    listen: String,

    /// Layers to export, comma-separated [default: block,fs]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LAYERS")]
    layers: Vec<LayerName>,

    /// Only this disk's I/O (repeatable)
    #[arg(short = 'd', long = "disk", value_name = "DISK")]
    disks: Vec<String>,

    /// Only these filesystem types (repeatable) [default: those mounted that fslat knows]
    #[arg(long = "fs", value_name = "FS")]
    filesystems: Vec<String>,

    #[command(flatten)]
    cgroup: iostack::common::run::filter::CgroupArgs,

    #[command(flatten)]
    per_cgroup: iostack::common::run::filter::PerCgroupArgs,

    /// Print libbpf's messages
    #[arg(short, long)]
    verbose: bool,

    /// Print which kernel hooks each layer uses (or why it cannot be traced here), and exit
    #[arg(long)]
    explain: bool,
}

fn main() -> ExitCode {
    let args: Args = iostack::common::run::cli::parse(NAME);
    iostack::common::run::error::run_main(NAME, || {
        for fs in &args.filesystems {
            iostack::tools::fslat::layer(fs)?;
        }
        let opts = ExporterOptions {
            listen: args.listen.clone(),
            layers: match args.layers.is_empty() {
                true => DEFAULT_LAYERS.to_vec(),
                false => args.layers.clone(),
            },
            layer_options: LayerOptions {
                disks: args
                    .disks
                    .iter()
                    .map(|d| DiskFilter::parse(d))
                    .collect::<anyhow::Result<_>>()?,
                filesystems: match args.filesystems.is_empty() {
                    true => iostack::tools::fslat::mounted(),
                    false => args.filesystems.clone(),
                },
                cgroup: args.cgroup.resolve()?,
                per_cgroup: args.per_cgroup.per_cgroup_depth()?,
            },
            interval: Duration::from_secs(1),
            verbose: args.verbose,
            explain: args.explain,
        };
        exporter::run(opts)
    })
}
