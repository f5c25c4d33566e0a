//! Block-layer attach points shared by biolat and bioslower: which tracepoint flavor, the
//! argument shape of block_rq_insert/issue, and where `-Q` starts the clock.
//!
//! Both tools' BPF objects use the same program names (`issue_btf`, `issue_raw`, ...), so one
//! plan serves both.

pub mod charge;
pub mod disk;
pub mod reqflags;
pub mod unseen;

use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, Result};

use crate::common::kernel::hooks::{
    plan_function, tracepoint_flavor, twin, FunctionHook, FunctionPrograms,
};
use crate::common::kernel::plan::{AttachPlan, Flavor};
use crate::common::kernel::prober::{KernelStamp, Prober};

/// Where `-Q` starts the clock; values match `enum q_start` in `src/bpf/lib/blk.bpf.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QueueStart {
    /// Plain mode: issue to completion.
    Off = 0,
    /// The block_io_start tracepoint or a (__)blk_account_io_start probe.
    Event = 1,
    /// `rq->start_time_ns` read at completion, block_rq_insert/issue where it is 0.
    RqField = 2,
}

/// Where a request's start comes from; values match `enum stamps` in `src/bpf/lib/blk.bpf.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Stamps {
    /// Ours, taken at a tracepoint (block_rq_issue, or the -Q start) and kept in a map: two
    /// programs per I/O.
    Ours = 0,
    /// The kernel's own, read from the request at completion: one program per I/O.
    Kernel = 1,
}

/// `--stamps`: let the planner choose per the traced queues, or force a source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StampChoice {
    /// The kernel's stamps where every traced queue keeps them, ours otherwise
    #[default]
    Auto,
    /// Read rq->io_start_time_ns (rq->start_time_ns with -Q) at completion
    Kernel,
    /// Stamp at block_rq_issue (or the -Q start) and keep the stamps in a map
    Ours,
}

pub struct BlockHooks {
    pub plan: AttachPlan,
    /// block_rq_insert/issue take only the request (5.11+, and 5.10.137+ by backport).
    pub single_arg: bool,
    pub queue_start: QueueStart,
    pub stamps: Stamps,
}

/// Which stamps to read, and why: the kernel's where the traced queues keep them.
fn choose_stamps(
    prober: &Prober,
    queued: bool,
    disk: Option<&str>,
    choice: StampChoice,
) -> (Stamps, String) {
    let stamp = if queued {
        KernelStamp::Setup
    } else {
        KernelStamp::Issue
    };
    let field = format!("rq->{}", stamp.field());
    match (choice, prober.kernel_stamp(stamp, disk)) {
        (StampChoice::Ours, _) => (Stamps::Ours, "ours, as --stamps ours asks".into()),
        (StampChoice::Kernel, Ok(why)) | (StampChoice::Auto, Ok(why)) => (
            Stamps::Kernel,
            format!("the kernel's {field}, read at completion ({why}): one program per I/O"),
        ),
        (StampChoice::Kernel, Err(why)) => (
            Stamps::Kernel,
            format!("the kernel's {field}, as --stamps kernel asks ({why}: requests without it are counted as no_start)"),
        ),
        (StampChoice::Auto, Err(why)) => (
            Stamps::Ours,
            format!("ours, kept in a map: the kernel's {field} is not kept ({why})"),
        ),
    }
}

/// Plans the block tracepoints; with `queued` the `-Q` start is planned and loaded, with only
/// `describe_queued` it is worked out for `--explain` but not loaded. Where the kernel stamps
/// the traced queues' requests itself, only the completion is hooked.
pub fn plan_block_hooks(
    prober: &Prober,
    tool: &'static str,
    queued: bool,
    describe_queued: bool,
    disk: Option<&str>,
    choice: StampChoice,
) -> Result<BlockHooks> {
    for tp in ["block_rq_issue", "block_rq_complete"] {
        if !prober.has_tracepoint("block", tp) {
            return Err(anyhow!("this kernel has no block:{tp} tracepoint, which {tool} needs (CONFIG_BLOCK and tracepoints)"));
        }
    }
    let mut plan = AttachPlan::new(tool);
    let (flavor, why) = tracepoint_flavor(prober, "block_rq_issue");
    let (stamps, stamps_why) = choose_stamps(prober, queued, disk, choice);
    if stamps == Stamps::Ours {
        plan.add(
            "issue",
            twin(flavor, "issue_btf", "issue_raw"),
            flavor,
            "block_rq_issue",
            why.clone(),
        );
    }
    plan.add(
        "complete",
        twin(flavor, "complete_btf", "complete_raw"),
        flavor,
        "block_rq_complete",
        why.clone(),
    );

    let arity = prober.tracepoint_arity("block_rq_issue");
    let single_arg = arity != Some(2);
    plan.decide(
        "rq args",
        match arity {
            Some(n) => format!(
                "block_rq_insert/issue pass {n} argument(s) (btf_trace_block_rq_issue in BTF)"
            ),
            None => "block_rq_issue prototype not in BTF: assuming (rq)".into(),
        },
    );
    plan.decide(
        "disk",
        if prober.struct_has_field("request", "rq_disk") {
            "rq->rq_disk (struct request has rq_disk)"
        } else {
            "rq->q->disk (struct request has no rq_disk)"
        },
    );

    plan.decide("stamps", stamps_why);

    let mut queue_start = QueueStart::Off;
    if queued && stamps == Stamps::Kernel {
        queue_start = QueueStart::RqField;
    } else if queued || describe_queued {
        let mut q_plan = AttachPlan::new(tool);
        let start = plan_queue_start(prober, flavor, &mut q_plan);
        if queued {
            queue_start = start;
            plan.programs.extend(q_plan.programs);
        } else {
            for p in q_plan.programs {
                plan.decide(
                    "-Q start",
                    format!("{} would be used with -Q: {}", p.attach_point(), p.why),
                );
            }
        }
    }
    Ok(BlockHooks {
        plan,
        single_arg,
        queue_start,
        stamps,
    })
}

/// The first start point that exists and attaches, best first.
fn plan_queue_start(prober: &Prober, flavor: Flavor, plan: &mut AttachPlan) -> QueueStart {
    if prober.has_tracepoint("block", "block_io_start") {
        plan.add(
            "-Q start",
            twin(flavor, "io_start_btf", "io_start_raw"),
            flavor,
            "block_io_start",
            "tracepoint fired when the OS starts accounting the request",
        );
        return QueueStart::Event;
    }
    let mut refused = Vec::new();
    for function in ["__blk_account_io_start", "blk_account_io_start"] {
        let hook = FunctionHook {
            entry_role: "-Q start",
            exit_role: "",
            function,
            module: None,
            programs: FunctionPrograms {
                fentry: "account_start_fentry",
                kprobe: "account_start_kprobe",
                exit: None,
            },
        };
        match plan_function(prober, plan, &hook) {
            Ok(_) => return QueueStart::Event,
            Err(e) => refused.push(format!("{function}: {e}")),
        }
    }
    plan.add(
        "-Q start",
        twin(flavor, "insert_btf", "insert_raw"),
        flavor,
        "block_rq_insert",
        format!(
            "rq->start_time_ns at completion (the stamp iostat's await uses), block_rq_insert where it is 0; no block_io_start, {}",
            refused.join("; ")
        ),
    );
    QueueStart::RqField
}

/// Who submitted each request, for tools that report per-I/O events: `block_bio_queue` and
/// `block_split` run in the submitter's context on every kernel (`block_io_start` is 6.5+, and
/// `blk_account_io_start` is inlined on 6.1; issue and insert may run in a kworker). Adds the
/// programs `bio_queue_*` and `split_*` in the flavor the block tracepoints of `plan` use, and
/// returns whether these tracepoints still pass the request queue first (before 5.11), read from
/// their BTF prototypes.
pub fn plan_bio_owner(prober: &Prober, plan: &mut AttachPlan) -> Result<bool> {
    // Planned already (bioslower, and then its --cgroup charge): the same answer, once.
    if plan.uses("bio_queue_btf") || plan.uses("bio_queue_raw") {
        return Ok(prober.tracepoint_arity("block_bio_queue") == Some(2));
    }
    if !prober.has_tracepoint("block", "block_bio_queue") {
        return Err(anyhow!(
            "this kernel has no block:block_bio_queue tracepoint, which {} needs to know who submitted each I/O",
            plan.tool
        ));
    }
    let flavor = if plan.uses("complete_btf") {
        Flavor::TpBtf
    } else {
        Flavor::RawTp
    };
    let arity = prober.tracepoint_arity("block_bio_queue");
    let with_queue = arity == Some(2);
    plan.add(
        "submitter",
        twin(flavor, "bio_queue_btf", "bio_queue_raw"),
        flavor,
        "block_bio_queue",
        "runs in the submitting task: its pid/comm, looked up by the request's first bio",
    );
    plan.decide(
        "bio args",
        match arity {
            Some(n) => {
                format!("block_bio_queue passes {n} argument(s) (btf_trace_block_bio_queue in BTF)")
            }
            None => "block_bio_queue prototype not in BTF: assuming (bio)".into(),
        },
    );
    // block_split loses its queue argument in the same release; a kernel where the two disagree
    // (a partial backport) keeps block_bio_queue only.
    let split_arity = prober.tracepoint_arity("block_split");
    if prober.has_tracepoint("block", "block_split")
        && split_arity.map(|n| n == 3) == arity.map(|n| n == 2)
    {
        plan.add(
            "submitter",
            twin(flavor, "split_btf", "split_raw"),
            flavor,
            "block_split",
            "the front part of a split bio, never passed to block_bio_queue",
        );
    } else {
        plan.decide(
            "split",
            "block_split not used (absent, or its arguments differ from block_bio_queue's)",
        );
    }
    Ok(with_queue)
}

/// How many devices can be traced with a -d disk (IOSTACK_FILTER_STACK in
/// src/bpf/lib/disk_filter.bpf.h).
const FILTER_STACK: usize = 7;

/// What links an I/O to the thread it was done for, besides its submitter's context (the
/// programs of `src/bpf/lib/bio_origin.bpf.h`), for the loaders' rodata.
#[derive(Clone, Debug, Default)]
pub struct BioLinks {
    /// REQ_PREFLUSH and REQ_FUA: a bio asking for a flush goes through the flush machinery.
    pub req_preflush: u32,
    pub req_fua: u32,
    /// blk_throtl_dispatch_work_fn's address (0: none here, or addresses hidden), read from
    /// kallsyms in a thread of its own: ask for it as late as possible.
    pub throttle_dispatch: LaterAddress,
    /// The stacked devices whose clones are linked to the bios above (at most 8).
    pub stacked: Vec<u32>,
    /// With -d: the disks under it, whose requests carry its I/O, and the stacked devices over
    /// it, whose I/O its requests carry (at most FILTER_STACK: filter_stack in
    /// src/bpf/lib/disk_filter.bpf.h).
    pub stack: Vec<u32>,
    /// With -d: the stacked devices over it, whose files' calls are the disk's too.
    pub above: Vec<disk::DiskFilter>,
}

/// What gives the address once the read is done (joins its thread).
type AddressRead = Box<dyn FnOnce() -> Option<u64> + Send>;

/// An address being read from /proc/kallsyms in a thread of its own (the kernel takes 40-120 ms
/// to write it), asked for where it is needed: planning and loading go on meanwhile.
#[derive(Clone, Default)]
pub struct LaterAddress {
    read: Arc<Mutex<Option<AddressRead>>>,
    value: Arc<OnceLock<u64>>,
}

impl LaterAddress {
    pub fn new(read: impl FnOnce() -> Option<u64> + Send + 'static) -> LaterAddress {
        LaterAddress {
            read: Arc::new(Mutex::new(Some(Box::new(read)))),
            value: Arc::new(OnceLock::new()),
        }
    }

    /// The address (0: none, or hidden), waiting for the read if it is not done.
    pub fn get(&self) -> u64 {
        *self.value.get_or_init(|| {
            let read = self.read.lock().ok().and_then(|mut r| r.take());
            read.and_then(|f| f()).unwrap_or(0)
        })
    }
}

impl std::fmt::Debug for LaterAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaterAddress")
    }
}

/// Plans what links the kernel's work on a submitter's behalf back to it (after
/// plan_bio_owner): where function hooks work, the submitter of a bio blk-throttle holds, seen
/// as the throttle takes it; a stacked device's clones, linked to its bios above by
/// block_bio_remap (with -d, of that device; else of every stacked device here); the flush
/// machinery's flags from BTF. Each choice with its reason in the plan.
pub fn plan_bio_links(
    prober: &Prober,
    plan: &mut AttachPlan,
    disk: Option<&disk::DiskFilter>,
) -> BioLinks {
    let dispatch_fn = prober.symbol_address_later("blk_throtl_dispatch_work_fn");
    let bit = |name: &str, default: u32| {
        prober
            .enumerator(name)
            .and_then(|v| u32::try_from(v).ok())
            .and_then(|b| 1u32.checked_shl(b))
            .unwrap_or(default)
    };
    let mut links = BioLinks {
        req_preflush: bit("__REQ_PREFLUSH", 1 << 18),
        req_fua: bit("__REQ_FUA", 1 << 17),
        ..Default::default()
    };
    plan.decide(
        "flushes",
        "the flush machinery's flush request has no bio: it is for the requests waiting in the machinery, each of which counts the flushes made while it waited as its own device time",
    );

    // blk-throttle: the function it holds bios in, where a hook can see the submitter.
    // In BTF, where every function a hook can take is (a kallsyms scan for the one that is not
    // here took 185 ms of a start on the CI host, 2026-11-26).
    let held = ["__blk_throtl_bio", "blk_throtl_bio"]
        .into_iter()
        .filter(|f| prober.has_function(f))
        .find_map(|f| {
            let hook = FunctionHook {
                entry_role: "held",
                exit_role: "held",
                function: f,
                module: None,
                programs: FunctionPrograms {
                    fentry: "throttle_fentry",
                    kprobe: "throttle_kprobe",
                    exit: None,
                },
            };
            plan_function(prober, plan, &hook).ok().map(|_| f)
        });
    links.throttle_dispatch = LaterAddress::new(dispatch_fn);
    let dispatcher = "blk_throtl_dispatch_work_fn";
    plan.decide(
        "throttle",
        match (held, prober.has_function(dispatcher)) {
            (_, false) => format!("no {dispatcher} (no blk-throttle here): a bio it held counts as its dispatcher's"),
            (Some(f), true) => format!("a bio blk-throttle holds is its submitter's, seen as {f} takes it; its dispatcher ({dispatcher}, its address from kallsyms) queues it later, and the time it was held is shown"),
            (None, true) => format!("no function hooks here to see blk-throttle take a bio: a bio its dispatcher ({dispatcher}, its address from kallsyms) queues is taken for the submitter of the thread its completion wakes from an I/O wait (a direct or synchronous writer's own; a page's first waiter)"),
        },
    );

    // Stacked devices: their clones, linked to the bios above. With -d, the devices under it
    // (whose requests carry its I/O) and over it (whose I/O its requests carry) are traced
    // with it.
    let stacked: Vec<disk::DiskFilter> = match disk {
        Some(d) => {
            let below = disk::disks_below(&d.name);
            let above = disk::disks_above(&d.name);
            let names = |v: &[disk::DiskFilter]| {
                v.iter()
                    .map(|b| b.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            links.stack = below
                .iter()
                .chain(&above)
                .map(|b| b.dev)
                .take(FILTER_STACK)
                .collect();
            links.above = above.clone();
            if !below.is_empty() {
                plan.decide(
                    "disk",
                    format!(
                        "{} is stacked on {}: its bios are traced, and the requests of the disks under it that carry them (linked by block_bio_remap)",
                        d.name,
                        names(&below)
                    ),
                );
            }
            if !above.is_empty() {
                plan.decide(
                    "disk above",
                    format!(
                        "{} is stacked on {}: the calls on its files are {}'s too, and its bios are traced down to {}'s requests (linked by block_bio_remap)",
                        names(&above),
                        d.name,
                        d.name,
                        d.name
                    ),
                );
            }
            let mut stacked = if below.is_empty() {
                Vec::new()
            } else {
                vec![d.clone()]
            };
            stacked.extend(above);
            stacked
        }
        None => disk::stacked_devices(),
    };
    if stacked.is_empty() {
        plan.decide(
            "clones",
            "no stacked devices (dm, md) here: no clones to link",
        );
        return links;
    }
    let arity = prober.tracepoint_arity("block_bio_remap");
    if !prober.has_tracepoint("block", "block_bio_remap")
        || arity.map(|n| n == 4) != prober.tracepoint_arity("block_bio_queue").map(|n| n == 2)
    {
        plan.decide(
            "clones",
            "block_bio_remap absent, or its arguments differ from block_bio_queue's: a stacked device's clones are their worker's I/O",
        );
        return links;
    }
    let flavor = if plan.uses("bio_queue_btf") {
        Flavor::TpBtf
    } else {
        Flavor::RawTp
    };
    links.stacked = stacked.iter().map(|d| d.dev).take(8).collect();
    plan.add(
        "clones",
        twin(flavor, "bio_remap_btf", "bio_remap_raw"),
        flavor,
        "block_bio_remap",
        format!(
            "a stacked device's clone is its bio's (dm-linear queues it in the submitter, dm-crypt and dm-delay from a worker): {}",
            stacked
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    // Before 5.16 the dm core traces a remap only for a clone its target hands back at once;
    // a clone the target submits later itself (dm-delay from kdelayd, dm-crypt's writes from
    // its kcryptd workers) goes down untraced: 5.10's dm-delay reads showed 0 own I/O and no
    // link, 2026-11-26. 5.16 added dm_submit_bio_remap, which traces those too.
    if stacked.iter().any(|d| d.name.starts_with("dm-"))
        && !prober.has_symbol("dm_submit_bio_remap")
    {
        plan.decide(
            "late clones",
            "no dm_submit_bio_remap in this kernel (before 5.16): a clone a dm target submits later from its worker (dm-delay, dm-crypt's writes) is not seen as a remap, and counts as that worker's I/O",
        );
    }
    links
}

/// The `--stage submit` hooks: entry and return of the function every bio goes through.
pub struct SubmitHooks {
    pub plan: AttachPlan,
    /// `submit_bio_noacct` (5.9+), `generic_make_request` before it, or `submit_bio`.
    pub function: &'static str,
}

/// Plans bio submission timing: fentry/fexit where they attach, else kprobe/kretprobe, on the
/// first of `submit_bio_noacct`, `generic_make_request`, `submit_bio` this kernel has (BTF or
/// kallsyms); with `stacks`, also `sched_switch`, to see where a slow submission slept.
pub fn plan_submit_hooks(prober: &Prober, tool: &'static str, stacks: bool) -> Result<SubmitHooks> {
    let function = ["submit_bio_noacct", "generic_make_request", "submit_bio"]
        .into_iter()
        .find(|f| prober.has_symbol(f))
        .ok_or_else(|| {
            anyhow!("this kernel has none of submit_bio_noacct, generic_make_request, submit_bio (BTF, kallsyms): {tool} --stage submit cannot time bio submission")
        })?;
    let mut plan = AttachPlan::new(tool);
    let hook = FunctionHook {
        entry_role: "submit",
        exit_role: "submitted",
        function,
        module: None,
        programs: FunctionPrograms {
            fentry: "submit_fentry",
            kprobe: "submit_kprobe",
            exit: Some(("submit_fexit", "submit_kretprobe", 1)),
        },
    };
    plan_function(prober, &mut plan, &hook).map_err(|e| {
        anyhow!("--stage submit needs fentry/fexit or kprobe/kretprobe on {function}, and this kernel allows neither: {e}")
    })?;
    if stacks {
        let (flavor, why) = tracepoint_flavor(prober, "sched_switch");
        plan.add(
            "-K sleeps",
            twin(flavor, "switch_btf", "switch_raw"),
            flavor,
            "sched_switch",
            format!("where a slow submission slept; {why}"),
        );
    }
    Ok(SubmitHooks { plan, function })
}

/// How many request structures the block devices have: each hardware queue's driver tags plus,
/// under an I/O scheduler, its scheduler requests. A map keyed by request structure and kept
/// across I/Os (biolat's `starts`) needs an entry for each, or it evicts on every I/O.
pub fn request_structures() -> u64 {
    let Ok(disks) = std::fs::read_dir("/sys/block") else {
        return 0;
    };
    let read_u64 = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let mut total = 0;
    for disk in disks.flatten() {
        let dir = disk.path();
        let Ok(hctxs) = std::fs::read_dir(dir.join("mq")) else {
            continue; // bio-based (zram, dm): no requests
        };
        let scheduled = std::fs::read_to_string(dir.join("queue/scheduler"))
            .is_ok_and(|s| !s.contains("[none]") && s.contains('['));
        let per_queue = read_u64(&dir.join("queue/nr_requests")).unwrap_or(0);
        for hctx in hctxs.flatten() {
            total += read_u64(&hctx.path().join("nr_tags")).unwrap_or(0);
            if scheduled {
                total += per_queue;
            }
        }
    }
    total
}

/// Entries for a map holding one start per request structure: all of them with room to spare,
/// at least 16384, at most 1M (a few tens of MiB of preallocated LRU entries).
pub fn request_map_entries() -> u32 {
    (request_structures() * 5 / 4).clamp(16384, 1 << 20) as u32
}

/// Which completed requests /proc/diskstats counts (`src/bpf/lib/io_seen.bpf.h`):
/// - a request when it ends, with `RQF_IO_STAT` set and `RQF_FLUSH_SEQ` clear
///   (blk_account_io_done);
/// - the flush machinery's own flush request (`RQF_FLUSH_SEQ`, op `REQ_OP_FLUSH`) when it ends:
///   that is where the `flushes` column is counted (blk_account_io_flush), not on the requests
///   that asked for the flush.
///
/// The same bits tell whether the kernel's own stamps on a request are fresh: `RQF_STATS` is set
/// with `io_start_time_ns`, `RQF_IO_STAT` with `start_time_ns` (a request without the flag may
/// carry a stale stamp from an earlier life: seen on 6.18 with iostats off).
///
/// The bits come from this kernel's BTF (an enum since 6.10, anonymous before `enum rqf_flags`);
/// older kernels #define them (RQF_FLUSH_SEQ 1 << 4, RQF_IO_STAT 1 << 13, RQF_STATS 1 << 17,
/// unchanged from 4.x to 6.9) and also set RQF_IO_STAT on passthrough requests, which they leave
/// out of the statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestBits {
    pub io_stat: u32,
    pub flush_seq: u32,
    /// RQF_STATS: set with `io_start_time_ns` when the kernel stamps the issue.
    pub stats: u32,
    pub flush_op: u32,
    pub skip_passthrough: u32,
}

// SAFETY: u32s; any bit pattern is valid. Mirrors `struct rq_bits`
// (src/bpf/lib/io_seen.bpf.h).
unsafe impl plain::Plain for RequestBits {}

impl RequestBits {
    pub fn from_btf(prober: &Prober) -> RequestBits {
        let bit = |name: &str| prober.enumerator(name).and_then(|v| u32::try_from(v).ok());
        let flush_op = prober
            .enumerator("REQ_OP_FLUSH")
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(2);
        match (
            bit("__RQF_IO_STAT"),
            bit("__RQF_FLUSH_SEQ"),
            bit("__RQF_STATS"),
        ) {
            (Some(io_stat), Some(flush_seq), Some(stats))
                if io_stat < 32 && flush_seq < 32 && stats < 32 =>
            {
                RequestBits {
                    io_stat: 1 << io_stat,
                    flush_seq: 1 << flush_seq,
                    stats: 1 << stats,
                    flush_op,
                    skip_passthrough: 0,
                }
            }
            _ => RequestBits {
                io_stat: 1 << 13,
                flush_seq: 1 << 4,
                stats: 1 << 17,
                flush_op,
                skip_passthrough: 1,
            },
        }
    }

    /// For `--explain`.
    pub fn describe(&self) -> String {
        format!(
            "what /proc/diskstats counts: requests ending with rq_flags IO_STAT {:#x} and not FLUSH_SEQ {:#x}{}, and flush requests (FLUSH_SEQ, op {}) (bits from {})",
            self.io_stat,
            self.flush_seq,
            if self.skip_passthrough != 0 {
                ", not passthrough"
            } else {
                ""
            },
            self.flush_op,
            if self.skip_passthrough != 0 {
                "the #defines of kernels without __RQF_* in BTF"
            } else {
                "BTF"
            }
        )
    }
}
