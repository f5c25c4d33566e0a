//! fnlat: time spent in kernel functions, per operation, the engine of vfslat (the VFS layer) and
//! fslat (one filesystem's file operations). A layer is a table: for each operation, the
//! functions that perform it; every function this kernel has gets a slot of
//! `src/bpf/fnlat.bpf.c`, hooked through the function planner (fentry/fexit where they load,
//! kprobe/kretprobe where they do not), and `--explain` says for every operation which hook
//! times it or why none does.

use std::time::Duration;

use anyhow::{anyhow, Context, Result};

use crate::common::cgroup::{fill_task_cgroup_map, names::OTHER, per_cgroup_entries, CgroupNames};
use crate::common::kernel::plan::{AttachPlan, Flavor};
use crate::common::kernel::prober::Prober;
use crate::common::load::events::EventQueue;
use crate::common::load::maps::{drain_array_generation, drain_generation, HistogramCollector};
use crate::common::load::{c_str, copy_struct, load_planned, mapped, Loaded};
use crate::common::losses::{
    event_losses, read_kernel_losses, Loss, LossEvent, LossTally, Noun, SkippedRuns, CALLS,
};
use crate::common::report::hist::{LatencyHistogram, Unit};
use crate::common::report::{local_hms, HistogramReport, LabeledHistogram};
use crate::common::run::filter::{PerCgroupArgs, TaskArgs, TaskFilter};
use crate::common::run::{EventTool, HistogramTool, Tool};
use slots::{plan_slot, FnSlot, SLOTS};

pub mod slots;

crate::bpf_skeleton!("fnlat", fnlat_key, fnlat_event, task_filter, fn_slot);
use skel::{types, FnlatSkel, FnlatSkelBuilder};

/// Must match FNLAT_OPS in src/bpf/fnlat.h (FNLAT_SLOTS is `slots::SLOTS`).
const OPS: usize = 16;

/// A kernel function that performs an operation.
#[derive(Clone, Copy, Debug)]
pub struct Function {
    pub name: &'static str,
    /// The argument that points to the file position (`loff_t *`), for `--min`; functions
    /// taking a kiocb have it there.
    pub pos_arg: Option<u32>,
}

/// `f("vfs_read", 3)`: a function whose `loff_t *pos` is argument 3.
pub const fn f(name: &'static str, pos_arg: u32) -> Function {
    Function {
        name,
        pos_arg: Some(pos_arg),
    }
}

/// A function without a position argument.
pub const fn g(name: &'static str) -> Function {
    Function {
        name,
        pos_arg: None,
    }
}

/// An operation: its name (the histogram label), the letter of `--min`'s T column, and the
/// functions that perform it (all of those this kernel has are timed).
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub name: &'static str,
    pub letter: char,
    pub functions: &'static [Function],
}

/// What a layer times: `VFS`, or one filesystem (`ext4`, built in or in module `ext4`).
#[derive(Clone, Copy, Debug)]
pub struct Layer {
    /// For the banner: "VFS", "ext4"...
    pub what: &'static str,
    /// The module the functions live in where the filesystem is built as one.
    pub module: Option<&'static str>,
    pub ops: &'static [Op],
}

/// What a function-latency tool is asked for.
#[derive(Clone, Debug)]
pub struct FnlatOptions {
    /// The tool's name as invoked (`vfslat`, `ext4lat`, `fslat`...), for messages.
    pub name: &'static str,
    pub layer: Layer,
    pub tasks: TaskFilter,
    pub unit: Unit,
    /// `--per-fs`: a histogram per filesystem type.
    pub per_fs: bool,
    /// `--min`: print each operation slower than this (ns) instead of histograms.
    pub min_ns: Option<u64>,
    /// `--per-cgroup DEPTH`: a histogram per cgroup v2 at that depth (a CGROUP column with
    /// `--min`).
    pub per_cgroup: Option<u32>,
}

/// fnlat's plan: the attach plan and what each slot counts.
pub struct FnlatPlan {
    plan: AttachPlan,
    slots: Vec<FnSlot>,
}

impl AsRef<AttachPlan> for FnlatPlan {
    fn as_ref(&self) -> &AttachPlan {
        &self.plan
    }
}

/// A function-latency tool, loaded and attached.
pub struct Fnlat {
    loaded: Loaded<FnlatSkel<'static>>,
    opts: FnlatOptions,
    collector: HistogramCollector,
    async_seen: [u64; OPS],
    queue: Option<EventQueue<types::fnlat_event>>,
    losses: LossTally,
    /// What each slot counts for (its op), as planned.
    slots: Vec<FnSlot>,
    /// The runs of its exit programs (fexit, kretprobe) the kernel skipped are calls lost; a
    /// skipped entry shows at the exit as `no_start`.
    skipped: SkippedRuns,
    cgroups: Option<CgroupNames>,
}

const HISTOGRAM_LOSSES: [Loss; 4] = [Loss::NoStart, Loss::StartFull, Loss::HistFull, Loss::Clock];

impl Tool for Fnlat {
    const NAME: &'static str = "fnlat";
    type Options = FnlatOptions;
    type Plan = FnlatPlan;

    fn plan(prober: &Prober, opts: &FnlatOptions) -> Result<FnlatPlan> {
        let layer = &opts.layer;
        if let Some(m) = layer.module {
            let first = layer.ops.iter().flat_map(|o| o.functions).next();
            if first.is_some_and(|f| prober.signature(f.name).is_none())
                && !std::path::Path::new("/sys/module").join(m).exists()
            {
                return Err(anyhow!(
                    "{} lives in the kernel module {m}, which is not loaded: modprobe {m} (or mount a {} filesystem), then run it again",
                    layer.what,
                    layer.what
                ));
            }
            // Its functions are the module's, not vmlinux's (on the running kernel).
            if prober.is_live() && first.is_some_and(|f| !prober.has_function(f.name)) {
                crate::common::run::error::require_module_access(opts.name, m)?;
            }
        }
        let mut plan = AttachPlan::new(opts.name);
        let mut slots = Vec::new();
        let mut refused = Vec::new();
        for (i, op) in layer.ops.iter().enumerate().take(OPS) {
            let mut why_not = Vec::new();
            for func in op.functions {
                if slots.len() == SLOTS {
                    why_not.push(format!("{}: no free slot", func.name));
                    continue;
                }
                match plan_slot(
                    prober,
                    &mut plan,
                    layer.module,
                    (i, op.name),
                    func,
                    slots.len(),
                ) {
                    Ok(slot) => slots.push(slot),
                    Err(e) => why_not.push(e),
                }
            }
            if !why_not.is_empty() {
                plan.decide(op.name, format!("not timed: {}", why_not.join("; ")));
                refused.extend(why_not);
            }
        }
        if slots.is_empty() {
            let first = refused.first().cloned().unwrap_or_default();
            return Err(anyhow!(
                "no {} function can be timed on this kernel: {first}. syslat and biolat work here: they need only tracepoints",
                layer.what
            ));
        }
        plan.decide(
            "starts",
            "per thread and function (nested calls, such as an O_SYNC write's fsync, are both timed)",
        );
        Ok(FnlatPlan { plan, slots })
    }

    fn open(_prober: &Prober, plan: &mut FnlatPlan, opts: &FnlatOptions) -> Result<Fnlat> {
        let events = opts.min_ns.is_some();
        // Starts in task-local storage where the kernel offers it to tracing programs (5.11+),
        // else the hash map by thread and slot.
        let (loaded, store) = match load(plan, opts, true) {
            Ok(loaded) => (
                loaded,
                "task-local storage (bpf_task_storage_get)".to_string(),
            ),
            Err(e) => (
                load(plan, opts, false)?,
                format!("hash map by thread and function (with task-local storage: {e:#})"),
            ),
        };
        plan.plan.decide("start store", store);
        let queue = match events {
            true => Some(EventQueue::new(&loaded.skel.maps.events)?),
            false => None,
        };
        Ok(Fnlat {
            loaded,
            opts: opts.clone(),
            collector: HistogramCollector::default(),
            async_seen: [0; OPS],
            queue,
            losses: LossTally::default(),
            slots: plan.slots.clone(),
            skipped: SkippedRuns::new(
                plan.plan
                    .programs
                    .iter()
                    .filter(|p| matches!(p.flavor, Flavor::Fexit | Flavor::Kretprobe))
                    .map(|p| p.program)
                    .collect(),
            ),
            cgroups: opts.per_cgroup.map(CgroupNames::new),
        })
    }
}

/// Loads and attaches the planned programs, starts in task storage (`per_task`) or a hash map.
fn load(
    plan: &FnlatPlan,
    opts: &FnlatOptions,
    per_task: bool,
) -> Result<Loaded<FnlatSkel<'static>>> {
    let events = opts.min_ns.is_some();
    load_planned(FnlatSkelBuilder::default(), &plan.plan, |open| {
        // The map type of the path not taken must not even be created (5.10 has none).
        open.maps.task_starts.set_autocreate(per_task)?;
        if per_task {
            open.maps.starts.set_max_entries(1)?;
        }
        if !opts.per_fs {
            open.maps.hists.set_max_entries(1)?;
        }
        let rodata = mapped(open.maps.rodata_data.as_deref_mut(), "fnlat's .rodata")?;
        rodata.per_task = per_task;
        rodata.unit_ns = opts.unit.ns();
        rodata.unit_lg = opts.unit.lg();
        rodata.per_fs = opts.per_fs;
        rodata.want_events = events;
        rodata.min_ns = opts.min_ns.unwrap_or(0);
        rodata.per_cgroup_depth = opts.per_cgroup.unwrap_or(0);
        if opts.per_cgroup.is_some() && !events {
            // A cgroup's histograms: one per slot, or a few filesystems' each with --per-fs.
            let per_cgroup = plan.slots.len() as u32 * if opts.per_fs { 4 } else { 1 };
            open.maps
                .cgroup_hists
                .set_max_entries(per_cgroup_entries(per_cgroup))?;
        }
        copy_struct("task_filter", &mut rodata.task_filter, &opts.tasks.to_bpf())?;
        fill_task_cgroup_map(&mut open.maps.task_cgroup, opts.tasks.cgroup.as_ref())?;
        for (dst, src) in rodata.slots.iter_mut().zip(&plan.slots) {
            copy_struct("fn_slot", dst, src)?;
        }
        // A ring buffer is a power of two of pages; one page when no events are wanted.
        let ring = if events { 4 << 20 } else { 4096 };
        open.maps.events.set_max_entries(ring)?;
        Ok(())
    })
}

impl Fnlat {
    /// Calls whose exit program the kernel skipped since the last call.
    fn new_skipped(&mut self) -> u64 {
        use libbpf_rs::skel::Skel as _;
        self.skipped.take(self.loaded.skel.object())
    }

    /// Calls per op that returned -EIOCBQUEUED since the last report.
    fn new_async(&mut self) -> Result<Vec<(String, u64)>> {
        let bss = mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "fnlat's .bss",
        )?;
        let mut out = Vec::new();
        for (i, op) in self.opts.layer.ops.iter().enumerate().take(OPS) {
            // SAFETY: .bss is mapped for the skeleton's life; the kernel updates it concurrently.
            let now = unsafe { std::ptr::read_volatile(&bss.async_calls[i]) };
            out.push((op.name.to_string(), now - self.async_seen[i]));
            self.async_seen[i] = now;
        }
        Ok(out)
    }
}

impl HistogramTool for Fnlat {
    const BANNER: &'static str = "Tracing kernel functions... Hit Ctrl-C to end.";

    fn banner(&self) -> String {
        format!(
            "Tracing {} operations... Hit Ctrl-C to end.",
            self.opts.layer.what
        )
    }

    fn collect(&mut self) -> Result<HistogramReport> {
        let bss = mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "fnlat's .bss",
        )?;
        let layer = self.opts.layer;
        // The kernel keeps a histogram per slot (function); an op's are added together.
        let slots = &self.slots;
        let op_name = |slot: u32| {
            let op = slots.get(slot as usize).map_or(u32::MAX, |s| s.op);
            layer
                .ops
                .get(op as usize)
                .map_or("?", |o| o.name)
                .to_string()
        };
        let mut histograms: Vec<LabeledHistogram> = Vec::new();
        let mut add = |labels: Vec<(&'static str, String)>, hist: LatencyHistogram| match histograms
            .iter_mut()
            .find(|h| h.labels == labels)
        {
            Some(h) => h.hist.merge(&hist),
            None => histograms.push(LabeledHistogram { labels, hist }),
        };
        let gen = self.collector.flip(&mut bss.hist_gen);
        let mut losses = self.collector.losses(&bss.losses, &HISTOGRAM_LOSSES);
        let maps = &self.loaded.skel.maps;
        // With --per-cgroup, the plain histograms are the calls no cgroup's had room for.
        let other = self.cgroups.as_ref().map(|_| OTHER.to_string());
        let fs_label = |key: &types::fnlat_key| match self.opts.per_fs {
            true => vec![("fs", c_str(&key.fs))],
            false => vec![],
        };
        if self.opts.per_fs {
            for (key_bytes, hist) in drain_generation(&maps.hists, gen)? {
                let key = histogram_key(&key_bytes)?;
                let cgroup = other.iter().map(|o| ("cgroup", o.clone()));
                let labels = cgroup
                    .chain([("op", op_name(key.slot))])
                    .chain(fs_label(&key));
                add(labels.collect(), hist);
            }
        } else {
            for (slot, hist) in drain_array_generation(&maps.slot_hists, gen, SLOTS as u32)? {
                let cgroup = other.iter().map(|o| ("cgroup", o.clone()));
                add(cgroup.chain([("op", op_name(slot))]).collect(), hist);
            }
        }
        if let Some(names) = &mut self.cgroups {
            for (key_bytes, hist) in drain_generation(&maps.cgroup_hists, gen)? {
                let key = histogram_key(&key_bytes)?;
                let labels = [
                    ("cgroup", names.name(key.cgroup)),
                    ("op", op_name(key.slot)),
                ];
                add(labels.into_iter().chain(fs_label(&key)).collect(), hist);
            }
        }
        losses.push((Loss::Skipped, self.new_skipped()));
        // By cgroup, then in the table's order of operations, then by filesystem.
        let order = |h: &LabeledHistogram| {
            let label = |name| h.labels.iter().find(|l| l.0 == name).map(|l| l.1.clone());
            let op = label("op");
            let op = self
                .opts
                .layer
                .ops
                .iter()
                .position(|o| Some(o.name) == op.as_deref());
            (label("cgroup"), op, label("fs"))
        };
        histograms.sort_by_key(order);
        Ok(HistogramReport {
            tool: self.opts.name,
            time: crate::common::report::local_hms(),
            unit: self.opts.unit,
            noun: CALLS,
            histograms,
            losses,
            accounted: None,
            async_calls: Some(self.new_async()?),
            totals: true,
        })
    }
}

/// A histogram's key as the kernel wrote it.
fn histogram_key(bytes: &[u8]) -> Result<types::fnlat_key> {
    let mut key = types::fnlat_key::default();
    plain::copy_from_bytes(&mut key, bytes).map_err(|e| anyhow!("bad histogram key: {e:?}"))?;
    Ok(key)
}

/// One operation slower than `--min`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SlowCall {
    pub time: String,
    pub comm: String,
    pub pid: u32,
    pub tid: u32,
    pub op: &'static str,
    /// What the function returned: bytes for reads and writes.
    pub ret: i64,
    /// File position at entry, -1 if unknown.
    pub offset: i64,
    pub lat_ms: f64,
    pub lat_ns: u64,
    pub fs: String,
    pub file: String,
    /// `--per-cgroup`: the caller's cgroup, cut at its depth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(skip)]
    letter: char,
}

/// The width of `--min`'s CGROUP column (longer paths push the file name right).
const CGROUP_WIDTH: usize = 24;

impl EventTool for Fnlat {
    type Event = SlowCall;
    const NOUN: Noun = CALLS;
    const LOSSES: &'static [Loss] = &event_losses(Loss::Skipped);

    fn banner(&self) -> String {
        format!(
            "Tracing {} operations slower than {}... Hit Ctrl-C to end.",
            self.opts.layer.what,
            crate::common::run::threshold::describe_threshold(self.opts.min_ns.unwrap_or(0))
        )
    }

    fn header(&self) -> String {
        let cgroup = match self.cgroups {
            Some(_) => format!("{:<CGROUP_WIDTH$} ", "CGROUP"),
            None => String::new(),
        };
        format!(
            "{:<8} {:<15} {:<7} {} {:>7} {:>8} {:>9} {:<6} {cgroup}FILENAME",
            "TIME", "COMM", "PID", "T", "BYTES", "OFF_KB", "LAT(ms)", "FS"
        )
    }

    fn poll(&mut self, timeout: Option<Duration>) -> Result<(Vec<SlowCall>, Vec<LossEvent>)> {
        let queue = self
            .queue
            .as_ref()
            .context("fnlat: no event queue without --min")?;
        let raw = queue.take(timeout)?;
        let time = local_hms();
        let names = &mut self.cgroups;
        let events = raw
            .iter()
            .map(|e| {
                let op = self.opts.layer.ops.get(e.op as usize);
                SlowCall {
                    time: time.clone(),
                    comm: c_str(&e.comm),
                    pid: e.pid,
                    tid: e.tid,
                    op: op.map_or("?", |o| o.name),
                    letter: op.map_or('?', |o| o.letter),
                    ret: e.ret,
                    offset: e.pos,
                    lat_ms: e.lat_ns as f64 / 1e6,
                    lat_ns: e.lat_ns,
                    fs: c_str(&e.fs),
                    file: c_str(&e.file),
                    cgroup: names.as_mut().map(|n| n.name(e.cgroup)),
                }
            })
            .collect();
        let bss = mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "fnlat's .bss",
        )?;
        let mut losses = self
            .losses
            .delta(&read_kernel_losses(&bss.losses), Self::LOSSES);
        losses.push((Loss::Skipped, self.new_skipped()));
        let losses = losses
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(kind, n)| LossEvent {
                kind,
                n,
                disk: None,
            })
            .collect();
        Ok((events, losses))
    }

    fn text(&self, e: &SlowCall) -> String {
        let bytes = if e.ret >= 0 {
            e.ret.to_string()
        } else {
            format!("E{}", -e.ret)
        };
        let off_kb = if e.offset >= 0 {
            (e.offset / 1024).to_string()
        } else {
            "-".into()
        };
        let cgroup = match &e.cgroup {
            Some(c) => format!("{c:<CGROUP_WIDTH$} "),
            None => String::new(),
        };
        format!(
            "{:<8} {:<15} {:<7} {} {:>7} {:>8} {:>9.3} {:<6} {cgroup}{}\n",
            e.time, e.comm, e.pid, e.letter, bytes, off_kb, e.lat_ms, e.fs, e.file
        )
    }

    fn json(&self, e: &SlowCall) -> String {
        let mut line =
            serde_json::to_string(e).unwrap_or_else(|err| format!("{{\"error\":\"{err}\"}}"));
        line.push('\n');
        line
    }
}

/// The arguments every function-latency tool shares (the runner adds -T -m -j --explain -v
/// --heatmap and `[interval [count]]`).
#[derive(clap::Args, Debug)]
pub struct FnlatArgs {
    #[command(flatten)]
    pub tasks: TaskArgs,

    /// Print each operation slower than this as it ends, instead of histograms: milliseconds
    /// (10, 0.5) or with a unit (500us, 2s); 0 prints every operation
    #[arg(long, value_name = "MIN", value_parser = crate::common::run::threshold::parse_threshold,
          conflicts_with = "heatmap")]
    pub min: Option<u64>,

    #[command(flatten)]
    pub per_cgroup: PerCgroupArgs,
}

impl FnlatArgs {
    /// The options for `layer`, checking pids and names now, before any privilege is needed.
    pub fn options(
        &self,
        name: &'static str,
        layer: Layer,
        per_fs: bool,
        common: &crate::common::run::cli::CommonArgs,
    ) -> Result<FnlatOptions> {
        Ok(FnlatOptions {
            name,
            layer,
            tasks: self.tasks.filter()?,
            unit: Unit::from_millis_flag(common.milliseconds),
            per_fs,
            min_ns: self.min,
            per_cgroup: self.per_cgroup.per_cgroup_depth()?,
        })
    }
}

/// A function-latency tool's whole `main`: parses its arguments `A` and the common ones,
/// builds its options, and runs it as histograms, or as events with `--min`.
pub fn fnlat_main<A: clap::Args>(
    name: &'static str,
    about: &'static str,
    examples: &'static str,
    options: impl FnOnce(&A, &crate::common::run::cli::CommonArgs) -> Result<FnlatOptions>,
) -> std::process::ExitCode {
    use crate::common::run::{self, cli};
    let command = cli::histogram_command::<A>(name, about, examples);
    let cli: cli::HistogramCommand<A> = cli::parse_command(name, command);
    crate::common::run::error::run_main(name, || {
        let opts = options(&cli.tool, &cli.common)?;
        if opts.min_ns.is_some() {
            let c = &cli.common;
            let style = run::Style {
                json: c.json,
                explain: c.explain,
                verbose: c.verbose,
            };
            return run::events::<Fnlat>(name, style, opts);
        }
        run::histograms::<Fnlat>(name, &cli.common, opts)
    })
}
