//! iostack-exporter: every layer's latency for Prometheus, from the same components as the
//! tools. `layers` opens the tools and drains them every interval; `series` keeps what a scrape
//! shows (cumulative histograms, losses, layers); `encode` writes the Prometheus text format;
//! `http` serves it.

pub mod breakdown;
pub mod encode;
pub mod http;
pub mod layers;
pub mod readahead;
pub mod series;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use crate::common::run::StopSignal;
use layers::{LayerName, LayerOptions, Layers};

pub const NAME: &str = "iostack-exporter";

/// The default port: 9709, free in Prometheus' list of default port allocations when it was
/// read (its 9100-9999 range fills up; the README says to check and how to change it).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9709";

/// What the exporter is asked for.
#[derive(Clone, Debug)]
pub struct ExporterOptions {
    pub listen: String,
    pub layers: Vec<LayerName>,
    pub layer_options: LayerOptions,
    /// How often the kernel's histograms are drained into the exported ones.
    pub interval: Duration,
    pub verbose: bool,
    /// `--explain`: print each layer's hooks (or why it cannot be traced here) and exit.
    pub explain: bool,
}

/// The layers on by default: block (one program per I/O) and, where function hooks work, fs;
/// the syscall layer runs on every system call of the machine, so only when asked.
pub const DEFAULT_LAYERS: [LayerName; 2] = [LayerName::Block, LayerName::Fs];

/// Runs until SIGINT/SIGTERM: binds, opens the layers, then drains them every interval while
/// the HTTP thread serves copies of what has been gathered.
pub fn run(opts: ExporterOptions) -> Result<()> {
    if opts.explain {
        let prober = crate::common::run::prepare(NAME, opts.verbose)?;
        let layers = Layers::open(&prober, &opts.layers, &opts.layer_options);
        let states = layers.states();
        for (layer, state) in &states {
            println!("{layer}: {}\n{}\n", state.status(), state.detail);
        }
        // "ok" only if every layer asked for loaded and attached: the tests and the matrix
        // read this line.
        let names = |up: bool| -> Vec<&str> {
            states
                .iter()
                .filter(|(_, s)| s.up == up)
                .map(|(l, _)| l.as_str())
                .collect()
        };
        match names(false).as_slice() {
            [] => println!("loaded and attached: ok"),
            down => println!(
                "loaded and attached: {}; not traced here: {}",
                names(true).join(", "),
                down.join(", ")
            ),
        }
        return Ok(());
    }
    // Bound first: a port in use is the most likely mistake, and says so before any tracing.
    let server = http::bind(&opts.listen)?;
    let prober = crate::common::run::prepare(NAME, opts.verbose)?;
    let mut layers = Layers::open(&prober, &opts.layers, &opts.layer_options);
    let metrics = Arc::new(Mutex::new(layers.first_metrics()));
    let stop = StopSignal::install()?;
    let address = server.address();
    let serving = http::serve(server, metrics.clone(), layers.pictures());
    eprintln!("{NAME}: serving http://{address}/metrics... Hit Ctrl-C to end.");
    let mut next = Instant::now() + opts.interval;
    loop {
        let stopping = stop.wait(Some(next.saturating_duration_since(Instant::now())));
        let mut fresh = metrics
            .lock()
            .map_err(|_| anyhow!("internal: the metrics lock is poisoned"))?
            .clone();
        layers.collect_into(&mut fresh)?;
        *metrics
            .lock()
            .map_err(|_| anyhow!("internal: the metrics lock is poisoned"))? = fresh;
        if stopping {
            break;
        }
        next += opts.interval;
    }
    serving.stop();
    Ok(())
}
