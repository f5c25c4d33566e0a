//! iostack: the same I/O calls through every layer this kernel lets us trace, in one run, and
//! each call's time split into parts that add up to it: on CPU, waiting for a CPU, waiting for
//! block I/O it submitted (in the OS and on the device), waiting for I/O someone else submitted,
//! other sleep. Per operation (read, write, sync, open, as syslat groups them), per process
//! (`-P`), or call by call (`--slow`). The kernel side is `src/bpf/iostack.bpf.c`, on the shared
//! correlation pieces `src/bpf/lib/breakdown.bpf.h` and `lib/wake_cause.bpf.h`.

pub mod breakdown;
pub mod journey;
pub mod picture;
pub mod plan;
pub mod report;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use libbpf_rs::MapCore as _;

use crate::common::block::disk::{DiskFilter, DiskNames};
use crate::common::block::unseen::{DiskTally, UnseenIos};
use crate::common::block::{request_map_entries, LaterAddress};
use crate::common::cgroup::{fill_task_cgroup_map, names::OTHER, per_cgroup_entries, CgroupNames};
use crate::common::kernel::prober::Prober;
use crate::common::kernel::syscalls::{
    self, fill_syscall_slots, remember_other_processes, TracedOp,
};
use crate::common::load::events::EventQueue;
use crate::common::load::maps::{
    drain_generation, drain_percpu_array, drain_percpu_hash, per_cpu_counts, HistogramCollector,
};
use crate::common::load::{
    c_str, comm_or_unknown, copy_struct, load_planned_then, load_with_thread_state, mapped,
    thread_state_maps, Loaded,
};
use crate::common::losses::{
    read_kernel_losses, Loss, LossEvent, LossTally, Noun, SkippedRuns, CALLS,
};
use crate::common::report::hist::{LatencyHistogram, RawHist, Unit};
use crate::common::report::local_hms;
use crate::common::run::filter::TaskFilter;
use crate::common::run::threshold::describe_threshold;
use crate::common::run::{EventTool, IntervalTool, Tool};
use breakdown::{Breakdown, PARTS};
use journey::{Journey, JourneyIo, RequestJourney, SlowEvent};
use plan::IostackPlan;
use report::{
    CgroupRow, GroupRequestRow, IostackReport, Layer, OpReport, ProcessRow, RequestGroup,
    RequestLosses, RequestReport, RequestSplit,
};

crate::bpf_skeleton!(
    "iostack",
    task_filter,
    rq_bits,
    fn_slot,
    op_totals,
    layer_key,
    group_key,
    group_totals,
    cgroup_totals,
    uring_totals,
    journey,
    request_journey
);
use skel::{types, IostackSkel, IostackSkelBuilder};

pub const NAME: &str = "iostack";

/// Must match IOSTACK_OPS and IOSTACK_DISK_DEVS in src/bpf/iostack.h.
const OPS: u32 = 8;
const DISK_DEVS: usize = 16;
/// Must match LAYERS in src/bpf/iostack.h: syscall, VFS, filesystem, block.
const LAYERS: u32 = 4;
/// Journeys are big (a few hundred bytes): 4 MiB holds thousands, seconds of slack.
const RINGBUF_BYTES: u32 = 4 << 20;
const PROC_ENTRIES: u32 = 8192;
/// `-P` shows this many processes, the most time in I/O calls first.
const TOP_PROCESSES: usize = 10;

/// What iostack is asked for.
#[derive(Clone, Debug)]
pub struct IostackOptions {
    /// The operations to follow: syslat's groups (read, write, sync, open).
    pub ops: Vec<TracedOp>,
    pub tasks: TaskFilter,
    /// `-d`: only calls on files of this disk, and its block I/O.
    pub disk: Option<DiskFilter>,
    /// `--fs`: only calls on files of this filesystem type, and its functions.
    pub fs: Option<String>,
    /// `-P`: per process.
    pub per_process: bool,
    /// `--per-cgroup DEPTH`: per cgroup v2 at that depth (a row each, and a journey's cgroup).
    pub per_cgroup: Option<u32>,
    /// `--slow`: each call at least this slow (ns), as its journey, instead of reports.
    pub slow_ns: Option<u64>,
    pub unit: Unit,
    /// `--svg`: the breakdown picture's file, rewritten every interval.
    pub svg: Option<std::path::PathBuf>,
    /// The validator (tests): the parts from every context switch and wakeup of the machine
    /// (sched_switch, sched_wakeup) instead of the scheduler's own accounting.
    pub shadow_switches: bool,
    /// The tests' knob (`--mark-ttl-ns`): how long a completion's mark lives (wake_cause.bpf.h's
    /// mark_ttl_ns), when not its default.
    pub mark_ttl_ns: Option<u64>,
}

impl IostackOptions {
    /// Checks what can be checked before tracing: the filesystem's name, and that -P and
    /// --slow are not asked together.
    pub fn new(
        tasks: TaskFilter,
        disk: Option<DiskFilter>,
        fs: Option<String>,
        per_process: bool,
        per_cgroup: Option<u32>,
        slow_ns: Option<u64>,
        unit: Unit,
    ) -> Result<IostackOptions> {
        if let Some(fs) = &fs {
            crate::tools::fslat::layer(fs)?;
        }
        if per_process && slow_ns.is_some() {
            return Err(anyhow!(
                "-P reports per process every interval, --slow prints calls as they end: choose one"
            ));
        }
        if per_process && per_cgroup.is_some() {
            return Err(anyhow!(
                "-P splits the calls by process, --per-cgroup by cgroup: choose one (with -P, --cgroup limits it to one cgroup)"
            ));
        }
        Ok(IostackOptions {
            ops: syscalls::select(&[], false)?,
            tasks,
            disk,
            fs,
            per_process,
            per_cgroup,
            slow_ns,
            unit,
            svg: None,
            shadow_switches: false,
            mark_ttl_ns: None,
        })
    }

    /// `--svg FILE.svg`: draws the breakdown per interval into FILE.svg. Checked before any
    /// tracing: it needs an interval (a column each), and a place it can write.
    pub fn with_svg(
        mut self,
        path: Option<std::path::PathBuf>,
        common: &crate::common::run::cli::CommonArgs,
    ) -> Result<IostackOptions> {
        if let Some(path) = &path {
            crate::common::report::heatmap::check_picture_arg("--svg", path, common)?;
        }
        self.svg = path;
        Ok(self)
    }

    /// 1 + the index of the operation whose return value is a file descriptor, 0 if none.
    fn open_op(&self) -> u8 {
        self.ops
            .iter()
            .position(|o| o.label == "open")
            .map_or(0, |i| i as u8 + 1)
    }

    fn op_name(&self, slot: u32) -> String {
        (slot as usize)
            .checked_sub(1)
            .and_then(|i| self.ops.get(i))
            .map_or_else(|| format!("op{slot}"), |o| o.label.clone())
    }
}

/// iostack, loaded and attached.
pub struct Iostack {
    loaded: Loaded<IostackSkel<'static>>,
    opts: IostackOptions,
    /// The layers this kernel cannot trace, and why.
    missing: Vec<report::MissingLayer>,
    /// The interfaces whose requests this kernel does not let us follow, and why.
    unfollowed: Vec<(&'static str, String)>,
    /// Why a punted request's wait for an io-wq worker is not told apart here.
    worker_wait_unsplit: Option<String>,
    /// To decode the requests of journeys.
    flags: crate::common::block::reqflags::RequestFlags,
    collector: HistogramCollector,
    unseen: UnseenIos,
    disks: DiskNames,
    skipped: SkippedRuns,
    /// Requests no traced call waited for, cumulative, as reported so far.
    unwaited_shown: [u64; 6],
    /// Requests not followed, cumulative, as reported so far.
    request_losses_shown: [u64; 2],
    queue: Option<EventQueue<RawSlow>>,
    /// io_uring's opcodes followed here, by number (a request journey's opcode).
    uring_opcodes: Vec<(u32, &'static str)>,
    /// io_uring's or native AIO's requests are followed here.
    requests_followed: bool,
    losses: LossTally,
    /// `--per-cgroup`: cgroup ids back to paths.
    cgroups: Option<CgroupNames>,
    /// `--svg`: the picture so far.
    picture: Option<(std::path::PathBuf, picture::BreakdownPicture)>,
}

/// Every kind of loss iostack can report.
const LOSSES: [Loss; 10] = [
    Loss::NoStart,
    Loss::StartFull,
    Loss::HistFull,
    Loss::Clock,
    Loss::NoWake,
    Loss::NoSwitch,
    Loss::Unlinked,
    Loss::ChainCut,
    Loss::Unseen,
    Loss::Skipped,
];
const JOURNEY_LOSSES: [Loss; 10] = [
    Loss::RingBufferFull,
    Loss::NoStart,
    Loss::StartFull,
    Loss::Clock,
    Loss::NoWake,
    Loss::NoSwitch,
    Loss::Unlinked,
    Loss::ChainCut,
    Loss::Unseen,
    Loss::Skipped,
];

/// A --slow record as the ring carries it: its first field says which (enum journey_kind).
enum RawSlow {
    Call(Box<types::journey>),
    Request(Box<types::request_journey>),
}

impl RawSlow {
    fn decode(data: &[u8]) -> Option<RawSlow> {
        fn copy<T: plain::Plain + Default>(data: &[u8]) -> Option<Box<T>> {
            let mut record = Box::<T>::default();
            plain::copy_from_bytes(&mut *record, data).ok()?;
            Some(record)
        }
        match u32::from_ne_bytes(data.get(..4)?.try_into().ok()?) {
            0 => copy(data).map(RawSlow::Call),
            1 => copy(data).map(RawSlow::Request),
            _ => None,
        }
    }
}

/// Requests in flight whose journey --slow keeps (a request_trail each, 400 bytes): more are
/// shown without their submitter and block I/Os, and say so.
const TRAIL_ENTRIES: u32 = 4096;

/// ORIGIN_F_CLONE of src/bpf/lib/bio_origin.bpf.h: a stacked device's clone.
const ORIGIN_F_CLONE: u32 = 0x8;

impl Tool for Iostack {
    const NAME: &'static str = NAME;
    type Options = IostackOptions;
    type Plan = IostackPlan;

    fn plan(prober: &Prober, opts: &IostackOptions) -> Result<IostackPlan> {
        plan::plan(prober, opts)
    }

    fn open(_prober: &Prober, plan: &mut IostackPlan, opts: &IostackOptions) -> Result<Iostack> {
        let (loaded, store) = load_with_thread_state(|per_task| load(plan, opts, per_task))?;
        plan.plan.decide("calls", store);
        for m in &plan.missing {
            plan.plan
                .decide(m.layer, format!("not traced here: {}", m.why));
        }
        let queue = match opts.slow_ns {
            Some(_) => Some(EventQueue::decoded(
                &loaded.skel.maps.events,
                RawSlow::decode,
            )?),
            None => None,
        };
        let skipped = SkippedRuns::new(plan.plan.programs.iter().map(|p| p.program).collect());
        Ok(Iostack {
            loaded,
            unseen: UnseenIos::start(opts.disk.as_ref().map(|d| d.dev))?,
            opts: opts.clone(),
            missing: plan.missing.clone(),
            unfollowed: plan.unfollowed.clone(),
            worker_wait_unsplit: plan.uring.worker_wait_unsplit.clone(),
            flags: plan.flags.clone(),
            collector: HistogramCollector::default(),
            disks: DiskNames::load(),
            skipped,
            unwaited_shown: [0; 6],
            request_losses_shown: [0; 2],
            queue,
            uring_opcodes: plan.uring.names.clone(),
            requests_followed: plan.uring.abi != plan::UringAbi::None || plan.aio.followed,
            losses: LossTally::default(),
            cgroups: opts.per_cgroup.map(CgroupNames::new),
            picture: opts.svg.as_deref().map(|path| {
                let title = crate::common::report::heatmap::command_line();
                (
                    path.to_path_buf(),
                    picture::BreakdownPicture::for_run(title, opts.unit),
                )
            }),
        })
    }
}

fn load(
    plan: &IostackPlan,
    opts: &IostackOptions,
    per_task: bool,
) -> Result<Loaded<IostackSkel<'static>>> {
    let set_dispatcher = |skel: &mut IostackSkel<'static>| -> Result<()> {
        // Read beside the verifier's work (the kallsyms thread), set before any program runs.
        let bss = mapped(skel.maps.bss_data.as_deref_mut(), "iostack's .bss")?;
        bss.throttle_dispatch_fn = plan.links.throttle_dispatch.get();
        let end_io = |i: usize| plan.dio_end_io.get(i).map_or(0, LaterAddress::get);
        bss.dio_end_io_iomap = end_io(0);
        bss.dio_end_io_blkdev = end_io(1);
        bss.dio_end_io_blkdev_async = end_io(2);
        if plan.aio.followed {
            bss.aio_rw_done_fn = plan.aio.rw_done.get();
            bss.aio_sync_work_fn = plan.aio.sync_work.get();
        }
        Ok(())
    };
    load_planned_then(
        IostackSkelBuilder::default(),
        &plan.plan,
        |open| {
            thread_state_maps(
                &mut open.maps.calls_by_task,
                &mut open.maps.calls_by_tid,
                per_task,
            )?;
            let ring = if opts.slow_ns.is_some() {
                RINGBUF_BYTES
            } else {
                4096
            };
            open.maps.events.set_max_entries(ring)?;
            let trails = match opts.slow_ns {
                Some(_) => TRAIL_ENTRIES,
                None => 1,
            };
            open.maps.request_trails.set_max_entries(trails)?;
            let reports = opts.slow_ns.is_none();
            let processes = match reports && opts.per_process {
                true => PROC_ENTRIES,
                false => 1,
            };
            open.maps.group_totals.set_max_entries(processes)?;
            let cgroups = match (reports && !opts.per_process, opts.per_cgroup) {
                (true, Some(_)) => per_cgroup_entries(opts.ops.len() as u32),
                _ => 1,
            };
            open.maps.cgroup_totals.set_max_entries(cgroups)?;
            // A process's or cgroup's requests of one operation and interface: room for as
            // many as their calls have, for each interface.
            open.maps
                .group_requests
                .set_max_entries(2 * processes.max(cgroups))?;
            if plan.stamps == crate::common::block::Stamps::Ours {
                open.maps.starts.set_max_entries(request_map_entries())?;
            } else {
                open.maps.starts.set_max_entries(1)?;
            }
            let rodata = mapped(open.maps.rodata_data.as_deref_mut(), "iostack's .rodata")?;
            rodata.per_task = per_task;
            rodata.unit_ns = opts.unit.ns();
            rodata.unit_lg = opts.unit.lg();
            fill_syscall_slots(&mut rodata.sys_slot, &opts.ops)?;
            rodata.remember_others =
                remember_other_processes(&plan.plan, opts.tasks.tgid, per_task);
            copy_struct("task_filter", &mut rodata.task_filter, &opts.tasks.to_bpf())?;
            fill_task_cgroup_map(&mut open.maps.task_cgroup, opts.tasks.cgroup.as_ref())?;
            copy_struct("rq_bits", &mut rodata.rq_bits, &plan.accounted)?;
            for (dst, src) in rodata.slots.iter_mut().zip(&plan.slots) {
                copy_struct("fn_slot", dst, src)?;
            }
            rodata.rq_tp_single_arg = plan.rq_single_arg;
            rodata.bio_tp_with_queue = plan.bio_with_queue;
            rodata.stamps = plan.stamps as u32;
            rodata.filter_dev = opts.disk.as_ref().map_or(0, |d| d.dev);
            rodata.switch_has_state = plan.switch_has_state;
            rodata.shadow_switches = opts.shadow_switches;
            if let Some(ttl) = opts.mark_ttl_ns {
                rodata.mark_ttl_ns = ttl;
            }
            rodata.req_preflush = plan.links.req_preflush;
            rodata.req_fua = plan.links.req_fua;
            for (dst, dev) in rodata.stacked_devs.iter_mut().zip(&plan.links.stacked) {
                *dst = *dev;
            }
            for (dst, dev) in rodata.filter_stack.iter_mut().zip(&plan.links.stack) {
                *dst = *dev;
            }
            rodata.req_rahead = plan.req_rahead;
            rodata.req_op_write = plan.req_op_write;
            rodata.req_op_discard = plan.req_op_discard;
            rodata.per_process = opts.per_process;
            rodata.per_cgroup_depth = opts.per_cgroup.unwrap_or(0);
            rodata.want_journeys = opts.slow_ns.is_some();
            // The submitter's name goes with each bio only for the journeys that show it.
            rodata.origin_comm = opts.slow_ns.is_some();
            rodata.origin_task_btf = per_task;
            rodata.keep_requests = opts.slow_ns.is_some();
            rodata.slow_ns = opts.slow_ns.unwrap_or(0);
            rodata.open_op = opts.open_op();
            rodata.uring_abi = plan.uring.abi as u8;
            rodata.uring_ops = plan.uring.ops;
            rodata.uring_cqe_skip = plan.uring.cqe_skip;
            rodata.aio_followed = plan.aio.followed;
            rodata.aio_ops = plan.aio.ops;
            if let Some(fs) = &opts.fs {
                rodata.filter_fs = true;
                for (dst, b) in rodata.fs_filter.iter_mut().zip(fs.bytes()) {
                    *dst = b as _;
                }
            }
            if let Some(d) = &opts.disk {
                // The calls on files of the disk, and of the devices stacked over it.
                let devs = std::iter::once(d)
                    .chain(&plan.links.above)
                    .flat_map(|d| d.file_devices());
                for (dst, dev) in rodata.disk_devs.iter_mut().zip(devs.take(DISK_DEVS)) {
                    *dst = dev;
                }
            }
            Ok(())
        },
        set_dispatcher,
    )
}

fn add_op_totals(sum: &mut types::op_totals, one: &types::op_totals) {
    sum.calls += one.calls;
    for i in 0..PARTS {
        sum.parts[i] += one.parts[i];
    }
    sum.via_waker_ns += one.via_waker_ns;
    sum.ios += one.ios;
    sum.others_ios += one.others_ios;
}

/// A request's split as the kernel summed it.
fn request_split(t: &types::uring_totals) -> RequestSplit {
    RequestSplit {
        worker_wait_ns: t.worker_wait_ns,
        to_device_ns: t.to_device_ns,
        device_ns: t.device_ns,
        between_io_ns: t.between_io_ns,
        after_io_ns: t.after_io_ns,
        no_io_ns: t.no_io_ns,
    }
}

/// One CPU's request totals into the sum.
fn add_uring_totals(sum: &mut types::uring_totals, one: &types::uring_totals) {
    sum.requests += one.requests;
    sum.total_ns += one.total_ns;
    sum.max_ns = sum.max_ns.max(one.max_ns);
    sum.punted += one.punted;
    sum.ios += one.ios;
    sum.to_device_ns += one.to_device_ns;
    sum.device_ns += one.device_ns;
    sum.between_io_ns += one.between_io_ns;
    sum.after_io_ns += one.after_io_ns;
    sum.no_io_ns += one.no_io_ns;
    sum.worker_wait_ns += one.worker_wait_ns;
}

/// A -P or --per-cgroup row's key as the kernel wrote it.
fn group_key(bytes: &[u8]) -> Result<types::group_key> {
    let mut key = types::group_key::default();
    plain::copy_from_bytes(&mut key, bytes).map_err(|e| anyhow!("bad group key: {e:?}"))?;
    Ok(key)
}

fn add_group_totals(sum: &mut types::group_totals, one: &types::group_totals) {
    sum.calls += one.calls;
    sum.total_ns += one.total_ns;
    sum.max_ns = sum.max_ns.max(one.max_ns);
    for i in 0..PARTS {
        sum.parts[i] += one.parts[i];
    }
    sum.via_waker_ns += one.via_waker_ns;
    sum.ios += one.ios;
    if sum.comm[0] == 0 {
        sum.comm = one.comm;
    }
}

fn add_cgroup_totals(sum: &mut types::cgroup_totals, one: &types::cgroup_totals) {
    add_group_totals(&mut sum.t, &one.t);
    let mut raw = raw_hist(&sum.latency);
    raw.add(&raw_hist(&one.latency));
    sum.latency = types::hist {
        count: raw.count,
        sum_ns: raw.sum_ns,
        max_ns: raw.max_ns,
        slots: raw.slots,
        fine: raw.fine,
    };
}

fn raw_hist(h: &types::hist) -> RawHist {
    RawHist {
        count: h.count,
        sum_ns: h.sum_ns,
        max_ns: h.max_ns,
        slots: h.slots,
        fine: h.fine,
    }
}

impl Iostack {
    fn bss(&mut self) -> Result<&mut types::bss> {
        mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "iostack's .bss",
        )
    }

    /// Requests no traced call waited for since the last report, by kind. `ended` is read
    /// before `waited`, so a request whose wait is counted between the two reads is never
    /// taken for unwaited; the figure only grows, and is exact once the disks are idle.
    fn new_unwaited(&mut self) -> Result<[u64; 6]> {
        let bss = self.bss()?;
        // SAFETY: .bss is mapped for the skeleton's life; the kernel updates it concurrently.
        let ended: [u64; 6] =
            std::array::from_fn(|i| unsafe { std::ptr::read_volatile(&bss.ended[i]) });
        let waited: [u64; 6] =
            std::array::from_fn(|i| unsafe { std::ptr::read_volatile(&bss.waited[i]) });
        let mut new = [0; 6];
        for i in 0..6 {
            let unwaited = ended[i].saturating_sub(waited[i]);
            new[i] = unwaited.saturating_sub(self.unwaited_shown[i]);
            self.unwaited_shown[i] += new[i];
        }
        Ok(new)
    }

    fn accounted(&mut self) -> Result<Vec<(String, DiskTally)>> {
        let tallies = self
            .unseen
            .update(|| per_cpu_counts(&self.loaded.skel.maps.io_seen))?;
        Ok(tallies
            .into_iter()
            .map(|t| (self.disks.name_or_reload(t.dev), t))
            .collect())
    }

    /// `--per-cgroup`: a row per cgroup and operation, and per operation an `other` row for
    /// its calls whose cgroup found no room in the kernel's map (the operation's totals less
    /// its cgroups' rows: nothing is lost). By cgroup, then in the table's order of operations.
    fn cgroup_rows(
        &mut self,
        drained: Vec<(Vec<u8>, types::cgroup_totals)>,
        ops: &[OpReport],
    ) -> Result<Vec<CgroupRow>> {
        let names = self
            .cgroups
            .as_mut()
            .context("internal: --per-cgroup without cgroup names")?;
        let mut rows = Vec::new();
        for (key_bytes, c) in drained {
            let key = group_key(&key_bytes)?;
            let t = c.t;
            rows.push(CgroupRow {
                cgroup: names.name(key.id),
                op: self.opts.op_name(key.op),
                calls: t.calls,
                max_ns: Some(t.max_ns),
                ios: t.ios,
                breakdown: Breakdown {
                    parts: t.parts,
                    via_waker_ns: t.via_waker_ns,
                },
                latency: raw_hist(&c.latency).into(),
            });
        }
        for op in ops {
            let latency = op
                .layers
                .iter()
                .find(|(l, _)| *l == Layer::Syscall)
                .map(|(_, h)| h.clone())
                .unwrap_or_default();
            let mut other = CgroupRow {
                cgroup: OTHER.to_string(),
                op: op.op.clone(),
                calls: op.calls,
                max_ns: None,
                ios: op.ios,
                breakdown: op.breakdown,
                latency,
            };
            for r in rows.iter().filter(|r| r.op == op.op) {
                other.calls = other.calls.saturating_sub(r.calls);
                other.ios = other.ios.saturating_sub(r.ios);
                for (o, p) in other.breakdown.parts.iter_mut().zip(r.breakdown.parts) {
                    *o = o.saturating_sub(p);
                }
                other.breakdown.via_waker_ns = other
                    .breakdown
                    .via_waker_ns
                    .saturating_sub(r.breakdown.via_waker_ns);
                other.latency.remove(&r.latency);
            }
            if other.calls > 0 {
                rows.push(other);
            }
        }
        let order = |r: &CgroupRow| self.opts.ops.iter().position(|x| x.label == r.op);
        rows.sort_by(|a, b| a.cgroup.cmp(&b.cgroup).then(order(a).cmp(&order(b))));
        Ok(rows)
    }

    /// The interfaces whose requests are followed here: `io_uring`, `aio`.
    pub fn interfaces(&self) -> Vec<&'static str> {
        ["io_uring", "aio"]
            .into_iter()
            .filter(|i| !self.unfollowed.iter().any(|(u, _)| u == i))
            .collect()
    }

    /// The requests of generation `gen`, per interface (io_uring, then native AIO) and
    /// operation, in the operations' order.
    fn requests(&self, gen: u32) -> Result<Vec<RequestReport>> {
        let maps = &self.loaded.skel.maps;
        let mut rows = Vec::new();
        // The kernel's slot of each interface (enum request_iface).
        for (slot, interface) in [(0, "io_uring"), (1, "aio")] {
            let totals = drain_percpu_array(
                &maps.uring_totals,
                slot * 2 + gen,
                OPS,
                types::uring_totals::default(),
                add_uring_totals,
                |t| t.requests > 0,
            )?;
            let mut hists = drain_percpu_array(
                &maps.uring_hists,
                slot * 2 + gen,
                OPS,
                RawHist::zeroed(),
                RawHist::add,
                |h| h.count > 0,
            )?;
            let mut these: Vec<(u32, RequestReport)> = totals
                .into_iter()
                .map(|(op, t)| {
                    let latency = hists
                        .iter()
                        .position(|(i, _)| *i == op)
                        .map(|at| LatencyHistogram::from(hists.swap_remove(at).1))
                        .unwrap_or_default();
                    let row = RequestReport {
                        op: self.opts.op_name(op),
                        interface,
                        requests: t.requests,
                        punted: t.punted,
                        max_ns: t.max_ns,
                        ios: t.ios,
                        split: request_split(&t),
                        latency,
                    };
                    (op, row)
                })
                .collect();
            these.sort_by_key(|(op, _)| *op);
            rows.extend(these.into_iter().map(|(_, r)| r));
        }
        Ok(rows)
    }

    /// `-P` or `--per-cgroup`: the requests of generation `gen` per submitter's process (named
    /// as its calls' row names it, else as /proc says, else `?`) or cgroup, operation and
    /// interface; the most time first (-P), by cgroup (--per-cgroup).
    fn group_requests(
        &mut self,
        gen: u32,
        processes: Option<&[ProcessRow]>,
    ) -> Result<Option<Vec<GroupRequestRow>>> {
        if !self.opts.per_process && self.opts.per_cgroup.is_none() {
            return Ok(None);
        }
        let drained = drain_percpu_hash(
            &self.loaded.skel.maps.group_requests,
            gen,
            types::uring_totals::default(),
            add_uring_totals,
        )?;
        let mut rows = Vec::new();
        for (key_bytes, t) in drained {
            let key = group_key(&key_bytes)?;
            let (slot, op) = (key.op / OPS, key.op % OPS);
            let group = match self.opts.per_process {
                true => {
                    let pid = key.id as u32;
                    let comm = processes
                        .and_then(|p| p.iter().find(|r| r.pid == pid))
                        .map(|r| r.comm.clone())
                        .or_else(|| {
                            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                                .ok()
                                .map(|c| c.trim_end().to_string())
                        })
                        .unwrap_or_else(|| "?".into());
                    RequestGroup::Process { pid, comm }
                }
                false => RequestGroup::Cgroup(
                    self.cgroups
                        .as_mut()
                        .context("internal: --per-cgroup without cgroup names")?
                        .name(key.id),
                ),
            };
            rows.push(GroupRequestRow {
                group,
                op: self.opts.op_name(op),
                interface: if slot == 0 { "io_uring" } else { "aio" },
                requests: t.requests,
                punted: t.punted,
                total_ns: t.total_ns,
                max_ns: t.max_ns,
                ios: t.ios,
                split: request_split(&t),
            });
        }
        rows.sort_by(|a, b| match (&a.group, &b.group) {
            (RequestGroup::Cgroup(x), RequestGroup::Cgroup(y)) => x.cmp(y).then(a.op.cmp(&b.op)),
            _ => b.total_ns.cmp(&a.total_ns),
        });
        if self.opts.per_process {
            rows.truncate(TOP_PROCESSES);
        }
        Ok(Some(rows))
    }

    /// The requests not followed since the last report (the kernel's counts are cumulative).
    fn new_request_losses(&mut self) -> Result<RequestLosses> {
        let now = self.bss()?.uring_losses;
        let shown = std::mem::replace(&mut self.request_losses_shown, now);
        Ok(RequestLosses {
            no_start: now[0].saturating_sub(shown[0]),
            start_full: now[1].saturating_sub(shown[1]),
        })
    }

    fn new_skipped(&mut self) -> u64 {
        use libbpf_rs::skel::Skel as _;
        self.skipped.take(self.loaded.skel.object())
    }

    fn processes(&self, drained: Vec<(Vec<u8>, types::group_totals)>) -> Result<Vec<ProcessRow>> {
        let mut rows = Vec::new();
        for (key_bytes, t) in drained {
            let key = group_key(&key_bytes)?;
            rows.push(ProcessRow {
                pid: key.id as u32,
                comm: c_str(&t.comm),
                op: self.opts.op_name(key.op),
                calls: t.calls,
                total_ns: t.total_ns,
                max_ns: t.max_ns,
                ios: t.ios,
                breakdown: Breakdown {
                    parts: t.parts,
                    via_waker_ns: t.via_waker_ns,
                },
            });
        }
        // The processes with the most time in calls, each with its operations.
        let mut per_pid: HashMap<u32, u64> = HashMap::new();
        for r in &rows {
            *per_pid.entry(r.pid).or_default() += r.total_ns;
        }
        let mut pids: Vec<(u32, u64)> = per_pid.into_iter().collect();
        pids.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        pids.truncate(TOP_PROCESSES);
        let rank = |pid: u32| pids.iter().position(|&(p, _)| p == pid);
        rows.retain(|r| rank(r.pid).is_some());
        rows.sort_by(|a, b| {
            rank(a.pid)
                .cmp(&rank(b.pid))
                .then(b.total_ns.cmp(&a.total_ns))
        });
        Ok(rows)
    }
}

impl IntervalTool for Iostack {
    type Report = IostackReport;

    fn banner(&self) -> String {
        "Tracing I/O calls through every layer... Hit Ctrl-C to end.".to_string()
    }

    fn collect(&mut self) -> Result<IostackReport> {
        let gen = {
            let bss = mapped(
                self.loaded.skel.maps.bss_data.as_deref_mut(),
                "iostack's .bss",
            )?;
            self.collector.flip(&mut bss.hist_gen)
        };
        let maps = &self.loaded.skel.maps;
        let totals = drain_percpu_array(
            &maps.op_totals,
            gen,
            OPS,
            types::op_totals::default(),
            add_op_totals,
            |t| t.calls > 0,
        )?;
        let layer_hists = drain_percpu_array(
            &maps.op_layer_hists,
            gen,
            OPS * LAYERS,
            RawHist::zeroed(),
            RawHist::add,
            |h| h.count > 0,
        )?;
        let fs_hists = drain_generation(&maps.fs_hists, gen)?;
        let processes = match self.opts.per_process {
            true => Some(drain_percpu_hash(
                &maps.group_totals,
                gen,
                types::group_totals::default(),
                add_group_totals,
            )?),
            false => None,
        };
        let cgroups = match !self.opts.per_process && self.opts.per_cgroup.is_some() {
            true => Some(drain_percpu_hash(
                &maps.cgroup_totals,
                gen,
                types::cgroup_totals::default(),
                add_cgroup_totals,
            )?),
            false => None,
        };
        let mut ops: Vec<OpReport> = totals
            .into_iter()
            .map(|(op, t)| OpReport {
                op: self.opts.op_name(op),
                calls: t.calls,
                ios: t.ios,
                others_ios: t.others_ios,
                breakdown: Breakdown {
                    parts: t.parts,
                    via_waker_ns: t.via_waker_ns,
                },
                layers: Vec::new(),
            })
            .collect();
        let mut hists = Vec::with_capacity(layer_hists.len() + fs_hists.len());
        for (i, raw) in layer_hists {
            let layer = match i % LAYERS {
                0 => Layer::Syscall,
                1 => Layer::Vfs,
                3 => Layer::Block,
                _ => continue, // the filesystem layer lives in fs_hists
            };
            hists.push((i / LAYERS, layer, LatencyHistogram::from(raw)));
        }
        for (key_bytes, hist) in fs_hists {
            let mut key = types::layer_key::default();
            plain::copy_from_bytes(&mut key, &key_bytes)
                .map_err(|e| anyhow!("bad layer key: {e:?}"))?;
            hists.push((key.op, Layer::Fs(c_str(&key.fs)), hist));
        }
        for (op, layer, hist) in hists {
            let name = self.opts.op_name(op);
            if let Some(op) = ops.iter_mut().find(|o| o.op == name) {
                op.layers.push((layer, hist));
            }
        }
        for op in &mut ops {
            op.layers.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let order = |o: &OpReport| self.opts.ops.iter().position(|x| x.label == o.op);
        ops.sort_by_key(order);
        let processes = match processes {
            Some(g) => Some(self.processes(g)?),
            None => None,
        };
        let cgroups = match cgroups {
            Some(g) => Some(self.cgroup_rows(g, &ops)?),
            None => None,
        };
        let requests = self.requests(gen)?;
        let group_requests = self.group_requests(gen, processes.as_deref())?;
        let request_losses = self.new_request_losses()?;
        let unwaited = self.new_unwaited()?;
        let accounted = self.accounted()?;
        let kernel = read_kernel_losses(&self.bss()?.losses);
        let mut losses = self.collector.losses(&kernel, &LOSSES);
        losses.push((Loss::Unseen, accounted.iter().map(|(_, t)| t.unseen).sum()));
        losses.push((Loss::Skipped, self.new_skipped()));
        let report = IostackReport {
            time: local_hms(),
            unit: self.opts.unit,
            ops,
            requests,
            request_losses,
            requests_in_flight: self.loaded.skel.maps.uring_reqs.keys().count() as u64,
            missing: self.missing.clone(),
            unfollowed: self.unfollowed.clone(),
            worker_wait_unsplit: self.worker_wait_unsplit.clone(),
            unwaited,
            processes,
            cgroups,
            group_requests,
            losses,
            accounted,
        };
        if let Some((path, picture)) = &mut self.picture {
            picture.push(&report);
            let written = picture.write(path);
            crate::common::report::heatmap::warn_unwritten(NAME, "--svg", path, written);
        }
        Ok(report)
    }
}

impl Iostack {
    fn decode(&mut self, e: &types::journey) -> Journey {
        let syscall = syscalls::GROUPS
            .iter()
            .flat_map(|g| g.members.iter())
            .find(|s| s.nr == e.nr as i64)
            .map_or_else(|| format!("syscall {}", e.nr), |s| s.name.to_string());
        let mut layers = serde_json::Map::new();
        layers.insert("syscall".into(), e.lat_ns.into());
        if e.layer_ns[0] > 0 {
            layers.insert("vfs".into(), e.layer_ns[0].into());
        }
        if e.layer_ns[1] > 0 {
            let fs = c_str(&e.fs);
            let name = if fs.is_empty() {
                "filesystem".into()
            } else {
                fs
            };
            layers.insert(name, e.layer_ns[1].into());
        }
        let breakdown = Breakdown {
            parts: e.parts,
            via_waker_ns: e.via_waker_ns,
        };
        if breakdown.io_wait() > 0 || e.ios > 0 {
            layers.insert("block".into(), breakdown.io_wait().into());
        }
        let io = e
            .reqs
            .iter()
            .take(e.nreq as usize)
            .map(|r| self.journey_io(r))
            .collect();
        Journey {
            time: local_hms(),
            comm: c_str(&e.comm),
            pid: e.pid,
            tid: e.tid,
            op: self.opts.op_name(e.op),
            interface: "syscall",
            syscall,
            fd: e.fd,
            file: c_str(&e.file),
            ret: e.ret,
            lat_ns: e.lat_ns,
            layers,
            breakdown,
            via: (e.via_pid != 0).then(|| format!("{} (pid {})", c_str(&e.via_comm), e.via_pid)),
            ios: e.ios,
            io,
            cgroup: self.cgroups.as_mut().map(|n| n.name(e.cgroup)),
        }
    }

    fn decode_request(&mut self, e: &types::request_journey) -> RequestJourney {
        let t = &e.trail;
        let (interface, opcode) = match e.iface {
            0 => (
                "io_uring",
                self.uring_opcodes
                    .iter()
                    .find(|(n, _)| *n == t.opcode)
                    .map_or_else(
                        || format!("opcode {}", t.opcode),
                        |(_, name)| name.to_string(),
                    ),
            ),
            _ => (
                "aio",
                plan::AIO_COMMANDS
                    .iter()
                    .flat_map(|(_, cmds)| cmds.iter())
                    .find(|(_, n)| u32::from(*n) == t.opcode)
                    .map_or_else(
                        || format!("IOCB_CMD {}", t.opcode),
                        |(name, _)| format!("IOCB_CMD_{name}"),
                    ),
            ),
        };
        let [to_device_ns, device_ns, between_io_ns, after_io_ns, no_io_ns, worker_wait_ns] =
            e.parts;
        let io = t
            .reqs
            .iter()
            .take(t.nreq as usize)
            .map(|r| self.journey_io(r))
            .collect();
        RequestJourney {
            time: local_hms(),
            comm: comm_or_unknown(&t.comm),
            pid: t.pid,
            tid: t.tid,
            op: self.opts.op_name(e.op),
            interface,
            opcode,
            user_data: t.user_data,
            file: c_str(&e.file),
            res: e.res,
            lat_ns: e.lat_ns,
            punted: e.punted != 0,
            split: RequestSplit {
                worker_wait_ns,
                to_device_ns,
                device_ns,
                between_io_ns,
                after_io_ns,
                no_io_ns,
            },
            ios: e.ios,
            io,
            cgroup: self.cgroups.as_mut().map(|n| n.name(t.cgroup)),
        }
    }

    /// A block I/O a journey lists, as the kernel described it.
    fn journey_io(&mut self, r: &types::req_seen) -> JourneyIo {
        JourneyIo {
            disk: self.disks.name_or_reload(r.dev),
            // A flush the machinery served ends with its PREFLUSH taken off: shown as the
            // bio asked for it (blktrace's F before the op).
            rwbs: match (r.bytes, r.flushes) {
                (0, 1..) => format!("F{}", self.flags.rwbs(r.cmd_flags)),
                _ => self.flags.rwbs(r.cmd_flags),
            },
            sector: r.sector,
            bytes: r.bytes,
            held_ns: r.held_ns,
            queue_ns: r.queue_ns,
            device_ns: r.device_ns,
            how: match r.how {
                1 => "own",
                2 => "held",
                _ => "others",
            },
            flushes: r.flushes,
            submitters: r.owners,
            stacked_on: (r.origin & ORIGIN_F_CLONE != 0 && r.upper_dev != 0)
                .then(|| self.disks.name_or_reload(r.upper_dev)),
            pid: r.pid,
            tid: r.tid,
            comm: comm_or_unknown(&r.comm),
        }
    }
}

impl EventTool for Iostack {
    type Event = SlowEvent;
    const NOUN: Noun = CALLS;
    const LOSSES: &'static [Loss] = &JOURNEY_LOSSES;

    fn banner(&self) -> String {
        format!(
            "Tracing I/O calls slower than {} through every layer... Hit Ctrl-C to end.",
            describe_threshold(self.opts.slow_ns.unwrap_or(0))
        )
    }

    fn header(&self) -> String {
        let requests = match self.requests_followed {
            true => "\na request: TIME COMM PID/TID OP(INTERFACE OPCODE) user_data FILE RESULT LATENCY, then its time and its block I/O",
            false => "",
        };
        format!(
            "TIME COMM PID/TID OP(SYSCALL) FILE RESULT LATENCY, then its layers, its time and its block I/O{requests}\n{}",
            breakdown::legend()
        )
    }

    fn poll(&mut self, timeout: Option<Duration>) -> Result<(Vec<SlowEvent>, Vec<LossEvent>)> {
        let queue = self
            .queue
            .as_ref()
            .context("iostack: no journeys without --slow")?;
        let raw = queue.take(timeout)?;
        let events = raw
            .iter()
            .map(|e| match e {
                RawSlow::Call(c) => SlowEvent::Call(self.decode(c)),
                RawSlow::Request(r) => SlowEvent::Request(self.decode_request(r)),
            })
            .collect();
        let accounted = self.accounted()?;
        let skipped = self.new_skipped();
        let bss = self.bss()?;
        let now = read_kernel_losses(&bss.losses);
        let mut losses: Vec<LossEvent> = self
            .losses
            .delta(&now, &JOURNEY_LOSSES)
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(kind, n)| LossEvent {
                kind,
                n,
                disk: None,
            })
            .collect();
        if skipped > 0 {
            losses.push(LossEvent {
                kind: Loss::Skipped,
                n: skipped,
                disk: None,
            });
        }
        for (disk, t) in accounted {
            if t.unseen > 0 {
                losses.push(LossEvent {
                    kind: Loss::Unseen,
                    n: t.unseen,
                    disk: Some(disk),
                });
            }
        }
        Ok((events, losses))
    }

    fn text(&self, e: &SlowEvent) -> String {
        e.text()
    }

    fn json(&self, e: &SlowEvent) -> String {
        e.json()
    }
}
