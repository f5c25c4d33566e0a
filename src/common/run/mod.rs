//! The shared runner: what every tool's binary hands its options to. It owns the life of a run
//! (privileges, probing, plan, load, `--explain`, the banner, `[interval [count]]` or the event
//! stream, SIGINT/SIGTERM with a final report, output and its errors); a tool only provides the
//! steps of `Tool` and `HistogramTool` or `EventTool`.

pub mod cli;
pub mod docs;
pub mod error;
pub mod filter;
pub mod threshold;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::Prober;
use crate::common::load::events::{stdout_closed, EventOutput, POLL};
use crate::common::load::libbpf::init_libbpf_logging;
use crate::common::losses::{Loss, LossEvent, LossTotals, Noun};
use crate::common::report::{announce, HistogramReport, Out};
use crate::common::run::cli::CommonArgs;
use crate::common::run::error::{require_memlock, require_privileges, run_main, StdoutClosed};

/// What every tool provides: a plan from what the kernel has, and an open (loaded, attached)
/// instance. A tool is a library component; its binary parses the command line into `Options`
/// and calls `histograms` or `events` below.
pub trait Tool: Sized {
    /// For messages: `biolat: ...`.
    const NAME: &'static str;
    /// Everything the tool was asked for, checked (disk names, pids) before any privilege.
    type Options;
    /// The attach plan and the settings that go with it.
    type Plan: AsRef<AttachPlan>;
    /// What to attach on this kernel, with the reasons: pure, so it can be tested from BTF
    /// files without root (tests/plans.rs).
    fn plan(prober: &Prober, opts: &Self::Options) -> Result<Self::Plan>;
    /// Loads and attaches the planned programs (and records in the plan what loading decided,
    /// e.g. where starts are kept).
    fn open(prober: &Prober, plan: &mut Self::Plan, opts: &Self::Options) -> Result<Self>;
}

/// What an interval tool reports: rendered as text (`-T` adds the time) or one JSON object.
pub trait Render {
    /// The text report, with the time first if `timestamp`.
    fn text(&self, timestamp: bool) -> String;
    /// One JSON object, on one line.
    fn json(&self) -> String;

    fn render(&self, timestamp: bool, json: bool) -> String {
        if json {
            self.json()
        } else {
            self.text(timestamp)
        }
    }

    /// The latency histograms a `--heatmap` draws of this report (a column); None for a report
    /// that has none.
    fn heat(&self) -> Option<crate::common::report::Heat> {
        None
    }
}

/// A tool that reports every interval (or once at Ctrl-C) a report of its own shape.
pub trait IntervalTool: Tool {
    type Report: Render;
    /// `Tracing ... Hit Ctrl-C to end.`
    fn banner(&self) -> String;
    /// Drains what the kernel gathered since the last call.
    fn collect(&mut self) -> Result<Self::Report>;
}

/// A tool that reports histograms per interval.
pub trait HistogramTool: Tool {
    /// `Tracing block device I/O... Hit Ctrl-C to end.`
    const BANNER: &'static str;
    /// The banner, where it depends on the options.
    fn banner(&self) -> String {
        Self::BANNER.to_string()
    }
    /// Drains what the kernel gathered since the last call.
    fn collect(&mut self) -> Result<HistogramReport>;
}

/// A tool that reports one event per line as they happen.
pub trait EventTool: Tool {
    type Event;
    /// What the tool counts, for loss lines.
    const NOUN: Noun;
    /// Every kind of loss the tool can incur, in the order of its summary.
    const LOSSES: &'static [Loss];
    /// `Tracing all block device I/O... Hit Ctrl-C to end.`
    fn banner(&self) -> String;
    /// The column header of the text output.
    fn header(&self) -> String;
    /// Events and losses since the last call, waiting up to `timeout` for events (none: only
    /// what is there).
    fn poll(&mut self, timeout: Option<Duration>) -> Result<(Vec<Self::Event>, Vec<LossEvent>)>;
    fn text(&self, event: &Self::Event) -> String;
    fn json(&self, event: &Self::Event) -> String;
}

/// How a run is shown, common to every tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    pub json: bool,
    pub explain: bool,
    pub verbose: bool,
}

/// What every run needs before it plans anything: libbpf's logging, the privileges, the
/// kernel's BTF, a locked-memory limit that fits, and pids it can name. The prober of this
/// kernel, for `Tool::plan`.
pub fn prepare(name: &str, verbose: bool) -> Result<Prober> {
    init_libbpf_logging(verbose);
    require_privileges(name)?;
    let prober = Prober::new()?;
    require_memlock(|| prober.enumerator("BPF_FUNC_ktime_get_coarse_ns").is_some())?;
    if filter::own_pid_namespace().is_some()
        && prober
            .enumerator("BPF_FUNC_get_ns_current_pid_tgid")
            .is_none()
    {
        anyhow::bail!(
            "this runs in a pid namespace of its own, and this kernel cannot tell a task's pid there (no bpf_get_ns_current_pid_tgid, 5.7+): run it in the host's pid namespace (docker run --pid=host, or hostPID: true)"
        );
    }
    Ok(prober)
}

/// Privileges, probe, plan, load; `--explain` prints the proof and returns None.
fn open<T: Tool>(name: &str, style: Style, opts: &T::Options, out: &mut Out) -> Result<Option<T>> {
    let prober = prepare(name, style.verbose)?;
    let mut plan = T::plan(&prober, opts)?;
    let tool = T::open(&prober, &mut plan, opts)?;
    if style.explain {
        out.write(&plan.as_ref().explain(&prober))?;
        return Ok(None);
    }
    Ok(Some(tool))
}

/// A histogram tool's whole `main`: parses its arguments `A` and the common ones, builds the
/// tool's options from them (a bad disk name or pid is a one-line error), runs, and turns the
/// outcome into an exit status.
pub fn histogram_main<T: HistogramTool, A: clap::Args>(
    about: &'static str,
    examples: &'static str,
    options: impl FnOnce(&A, &CommonArgs) -> Result<T::Options>,
) -> ExitCode {
    let command = cli::histogram_command::<A>(T::NAME, about, examples);
    let cli: cli::HistogramCommand<A> = cli::parse_command(T::NAME, command);
    run_main(T::NAME, || {
        histograms::<T>(T::NAME, &cli.common, options(&cli.tool, &cli.common)?)
    })
}

/// Runs a histogram tool, named `name` in messages: a report every interval, `count` times, or
/// one at Ctrl-C.
pub fn histograms<T: HistogramTool>(
    name: &str,
    common: &CommonArgs,
    opts: T::Options,
) -> Result<()> {
    report_intervals::<T, HistogramReport>(name, common, opts, T::banner, T::collect)
}

/// Runs an interval tool, named `name` in messages, as `histograms` runs a histogram tool.
pub fn intervals<T: IntervalTool>(name: &str, common: &CommonArgs, opts: T::Options) -> Result<()> {
    report_intervals::<T, T::Report>(name, common, opts, T::banner, T::collect)
}

fn report_intervals<T: Tool, R: Render>(
    name: &str,
    common: &CommonArgs,
    opts: T::Options,
    banner: impl Fn(&T) -> String,
    mut collect: impl FnMut(&mut T) -> Result<R>,
) -> Result<()> {
    let style = Style {
        json: common.json,
        explain: common.explain,
        verbose: common.verbose,
    };
    let mut out = Out::new();
    // A picture that cannot be drawn is refused before anything is traced.
    if let Some(path) = &common.heatmap {
        crate::common::report::heatmap::check_picture_arg("--heatmap", path, common)?;
    }
    let Some(mut tool) = open::<T>(name, style, &opts, &mut out)? else {
        return Ok(());
    };
    let stop = StopSignal::install()?;
    announce(&mut out, common.json, &banner(&tool))?;
    let mut heatmap: Option<crate::common::report::heatmap::HeatMap> = None;
    run_intervals(&stop, common.interval, common.count, || {
        let report = collect(&mut tool)?;
        // The report first: a picture that cannot be written (a full disk) loses no report.
        out.write(&report.render(common.timestamp, common.json))?;
        if let (Some(path), Some(heat)) = (&common.heatmap, report.heat()) {
            use crate::common::report::heatmap::{
                command_line, warn_unwritten, HeatMap, RUN_COLUMNS,
            };
            let map = heatmap.get_or_insert_with(|| {
                HeatMap::new(command_line(), heat.unit).with_max_columns(RUN_COLUMNS)
            });
            map.push(heat.time, &heat.histograms);
            warn_unwritten(name, "--heatmap", path, map.write(path));
        }
        Ok(())
    })
}

/// Runs an event tool, named `name` in messages, until Ctrl-C: events as they come, losses
/// in-band, a summary at the end.
pub fn events<T: EventTool>(name: &str, style: Style, opts: T::Options) -> Result<()> {
    let mut out = Out::new();
    let Some(mut tool) = open::<T>(name, style, &opts, &mut out)? else {
        return Ok(());
    };
    let stop = StopSignal::install()?;
    announce(&mut out, style.json, &tool.banner())?;
    let mut sink = EventOutput::new();
    if !style.json {
        sink.line(&tool.header())?;
        sink.flush()?;
    }
    let mut totals = LossTotals::new(T::LOSSES);
    loop {
        let stopping = stop.stopped();
        let (events, losses) = tool.poll((!stopping).then_some(POLL))?;
        for e in &events {
            let line = if style.json {
                tool.json(e)
            } else {
                tool.text(e)
            };
            if sink.event(&line) != 0 {
                break;
            }
        }
        for loss in losses {
            totals.add(loss.kind, loss.n);
            sink.line(&loss.line(T::NOUN, style.json))?;
        }
        sink.flush()?;
        if stdout_closed() {
            return Err(anyhow::Error::new(StdoutClosed));
        }
        if stopping {
            break;
        }
    }
    let summary = totals.summary(sink.events, style.json);
    sink.line(&summary)?;
    sink.flush()
}

/// Delivers SIGINT/SIGTERM to the run loop (installed once per process).
pub struct StopSignal {
    rx: mpsc::Receiver<()>,
    stopped: Arc<AtomicBool>,
}

impl StopSignal {
    pub fn install() -> Result<StopSignal> {
        let (tx, rx) = mpsc::channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = stopped.clone();
        ctrlc::set_handler(move || {
            flag.store(true, Ordering::SeqCst);
            let _ = tx.send(());
        })
        .context("installing the SIGINT/SIGTERM handler")?;
        Ok(StopSignal { rx, stopped })
    }

    /// Waits up to `timeout` (forever with None); true if a signal arrived.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        if self.stopped.load(Ordering::SeqCst) {
            return true;
        }
        match timeout {
            None => self.rx.recv().is_ok() || self.stopped.load(Ordering::SeqCst),
            Some(t) => match self.rx.recv_timeout(t) {
                Ok(()) => true,
                Err(RecvTimeoutError::Timeout) => self.stopped.load(Ordering::SeqCst),
                Err(RecvTimeoutError::Disconnected) => true,
            },
        }
    }

    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

/// Calls `report` every `interval` seconds, `count` times (or until a signal); without an
/// interval, once when a signal arrives.
pub fn run_intervals(
    stop: &StopSignal,
    interval: Option<u64>,
    count: Option<u64>,
    mut report: impl FnMut() -> Result<()>,
) -> Result<()> {
    let Some(secs) = interval else {
        stop.wait(None);
        return report();
    };
    let period = Duration::from_secs(secs);
    let mut next = Instant::now() + period;
    let mut done = 0u64;
    loop {
        let signaled = stop.wait(Some(next.saturating_duration_since(Instant::now())));
        report()?;
        done += 1;
        if signaled || count.is_some_and(|c| done >= c) {
            return Ok(());
        }
        next += period;
    }
}
