//! bioslower: every block I/O slower than a threshold, as it completes (bcc's biosnoop columns,
//! with the threshold compared in the kernel), or every slow bio submission (`--stage submit`),
//! with the kernel stack where it waited (`-K`).

use std::time::Duration;

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::common::block::charge::{plan_io_charge, IoCharge};
use crate::common::block::disk::{DiskFilter, DiskNames};
use crate::common::block::reqflags::RequestFlags;
use crate::common::block::unseen::UnseenIos;
use crate::common::block::{
    plan_bio_owner, plan_block_hooks, plan_submit_hooks, QueueStart, RequestBits, StampChoice,
    Stamps,
};
use crate::common::cgroup::{fill_task_cgroup_map, CgroupNames, CgroupOptions};
use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::Prober;
use crate::common::load::events::EventQueue;
use crate::common::load::maps::per_cpu_counts;
use crate::common::load::{copy_struct, load_planned, mapped, Loaded};
use crate::common::losses::{
    event_losses, read_kernel_losses, Loss, LossEvent, LossTally, Noun, IOS,
};
use crate::common::report::ioevent::{ns_to_ms, text_header, IoEvent};
use crate::common::report::stacks::KernelStacks;
use crate::common::run::filter::TaskFilter;
use crate::common::run::threshold::describe_threshold;
use crate::common::run::{EventTool, Tool};

crate::bpf_skeleton!("bioslower", slow_event, task_filter, rq_bits);
use skel::{types, BioslowerSkel, BioslowerSkelBuilder};

/// Ring buffer for slow events: 8 MiB holds ~100k events, a second of slack at 100k/s.
const RINGBUF_BYTES: u32 = 8 << 20;
const STACK_ENTRIES: u32 = 4096;

/// What bioslower times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Stage {
    /// A request's latency: issue (or OS accounting start, with -Q) to completion
    #[default]
    Block,
    /// A bio's submission: the time submit_bio_noacct takes, before the request exists
    Submit,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Block => "block",
            Stage::Submit => "submit",
        }
    }
}

/// What bioslower is asked for.
#[derive(Clone, Debug, Default)]
pub struct BioslowerOptions {
    /// Show I/O slower than this (ns; 0 shows every I/O).
    pub min_ns: u64,
    /// `-Q`: include OS queue time, shown in a QUE(ms) column.
    pub queued: bool,
    pub disk: Option<DiskFilter>,
    /// `-p` and `-c`: the submitter.
    pub tasks: TaskFilter,
    pub stage: Stage,
    /// `-K` (submit stage): the kernel stack where each slow submission waited longest.
    pub stacks: bool,
    /// `--explain`: also describe the `-Q` start that would be used.
    pub explain: bool,
    /// `--stamps`: where request starts come from.
    pub stamps: StampChoice,
    /// `--cgroup`, `--per-cgroup` (a CGROUP column): by the cgroup I/O is charged to
    /// (src/common/block/charge.rs).
    pub cgroups: CgroupOptions,
}

/// bioslower's plan and the settings that go with it.
pub struct BioslowerPlan {
    plan: AttachPlan,
    queue_start: QueueStart,
    stamps: Stamps,
    rq_single_arg: bool,
    bio_with_queue: bool,
    accounted: RequestBits,
    flags: RequestFlags,
    charge: Option<IoCharge>,
}

impl AsRef<AttachPlan> for BioslowerPlan {
    fn as_ref(&self) -> &AttachPlan {
        &self.plan
    }
}

/// bioslower, loaded and attached.
pub struct Bioslower {
    loaded: Loaded<BioslowerSkel<'static>>,
    queue: EventQueue<types::slow_event>,
    opts: BioslowerOptions,
    flags: RequestFlags,
    disks: DiskNames,
    stacks: Option<KernelStacks>,
    losses: LossTally,
    /// Block requests are what /proc/diskstats counts; bio submissions are not.
    unseen: Option<UnseenIos>,
    start_ns: u64,
    cgroups: Option<CgroupNames>,
}

/// The CGROUP of an I/O whose owner nobody knows (a flush, a bio queued before tracing).
const UNKNOWN_CGROUP: &str = "-";

const KERNEL_LOSSES: [Loss; 4] = [
    Loss::RingBufferFull,
    Loss::NoStart,
    Loss::StartFull,
    Loss::Clock,
];

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Tool for Bioslower {
    const NAME: &'static str = "bioslower";
    type Options = BioslowerOptions;
    type Plan = BioslowerPlan;

    fn plan(prober: &Prober, opts: &BioslowerOptions) -> Result<BioslowerPlan> {
        let accounted = RequestBits::from_btf(prober);
        let flags = RequestFlags::from_btf(prober).context(
            "this kernel's BTF has no req_op/req_flag_bits enums, needed to decode the T column",
        )?;
        Ok(match opts.stage {
            Stage::Block => {
                let disk = opts.disk.as_ref().map(|d| d.name.as_str());
                let mut hooks = plan_block_hooks(
                    prober,
                    Self::NAME,
                    opts.queued,
                    opts.explain,
                    disk,
                    opts.stamps,
                )?;
                let bio_with_queue = plan_bio_owner(prober, &mut hooks.plan)?;
                hooks.plan.decide("counted", accounted.describe());
                // The submitter's hooks are planned already; this adds the reason.
                let charge = plan_io_charge(prober, &mut hooks.plan, &opts.cgroups)?;
                BioslowerPlan {
                    plan: hooks.plan,
                    queue_start: hooks.queue_start,
                    stamps: hooks.stamps,
                    rq_single_arg: hooks.single_arg,
                    bio_with_queue,
                    accounted,
                    flags,
                    charge,
                }
            }
            Stage::Submit => BioslowerPlan {
                plan: plan_submit_hooks(prober, Self::NAME, opts.stacks)?.plan,
                queue_start: QueueStart::Off,
                stamps: Stamps::Ours,
                rq_single_arg: true,
                bio_with_queue: false,
                accounted,
                flags,
                // A submission runs in the submitter: its cgroup is the task's.
                charge: None,
            },
        })
    }

    fn open(_prober: &Prober, p: &mut BioslowerPlan, opts: &BioslowerOptions) -> Result<Bioslower> {
        let loaded = load_planned(BioslowerSkelBuilder::default(), &p.plan, |open| {
            let rodata = mapped(open.maps.rodata_data.as_deref_mut(), "bioslower's .rodata")?;
            rodata.min_ns = opts.min_ns;
            rodata.q_start = p.queue_start as u32;
            rodata.stamps = p.stamps as u32;
            rodata.rq_tp_single_arg = p.rq_single_arg;
            rodata.bio_tp_with_queue = p.bio_with_queue;
            rodata.filter_dev = opts.disk.as_ref().map_or(0, |d| d.dev);
            copy_struct("task_filter", &mut rodata.task_filter, &opts.tasks.to_bpf())?;
            fill_task_cgroup_map(&mut open.maps.task_cgroup, opts.tasks.cgroup.as_ref())?;
            copy_struct("rq_bits", &mut rodata.rq_bits, &p.accounted)?;
            rodata.want_stack = opts.stacks;
            rodata.charge_by_blkcg = p.charge.is_some_and(IoCharge::by_blkcg);
            rodata.per_cgroup_depth = opts.cgroups.per_cgroup.unwrap_or(0);
            open.maps.events.set_max_entries(RINGBUF_BYTES)?;
            let stack_entries = if opts.stacks { STACK_ENTRIES } else { 1 };
            open.maps.stacks.set_max_entries(stack_entries)?;
            Ok(())
        })?;
        let queue = EventQueue::new(&loaded.skel.maps.events)?;
        let unseen = match opts.stage {
            Stage::Block => Some(UnseenIos::start(opts.disk.as_ref().map(|d| d.dev))?),
            Stage::Submit => None,
        };
        Ok(Bioslower {
            loaded,
            queue,
            opts: opts.clone(),
            flags: p.flags.clone(),
            disks: DiskNames::load(),
            stacks: opts.stacks.then(KernelStacks::new),
            losses: LossTally::default(),
            unseen,
            start_ns: monotonic_ns(),
            cgroups: opts.cgroups.per_cgroup.map(CgroupNames::new),
        })
    }
}

impl Bioslower {
    fn decode(&mut self, raw: &types::slow_event) -> IoEvent {
        let stack = self.stacks.as_ref().map(|s| {
            match KernelStacks::addresses(&self.loaded.skel.maps.stacks, raw.stack_id) {
                Ok(Some(addrs)) => s
                    .symbolize(&addrs)
                    .unwrap_or_else(|e| vec![format!("(not symbolized: {e:#})")]),
                Ok(None) => vec![format!("(not captured: error {})", raw.stack_id)],
                Err(e) => vec![format!("(not readable: {e:#})")],
            }
        });
        let len = raw
            .comm
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(raw.comm.len());
        let comm: Vec<u8> = raw.comm[..len].iter().map(|&c| c as u8).collect();
        let queued = self.opts.queued;
        IoEvent {
            time_s: (raw.ts_ns as i64 - self.start_ns as i64) as f64 / 1e9,
            stage: self.opts.stage.name(),
            comm: String::from_utf8_lossy(&comm).into_owned(),
            pid: raw.pid,
            tid: raw.tid,
            disk: self.disks.name_or_reload(raw.dev),
            rwbs: self.flags.rwbs(raw.cmd_flags),
            flags: self.flags.describe(raw.cmd_flags),
            sector: raw.sector,
            bytes: raw.bytes,
            queue_ms: queued.then(|| ns_to_ms(raw.queue_ns)),
            queue_ns: queued.then_some(raw.queue_ns),
            lat_ms: ns_to_ms(raw.lat_ns),
            lat_ns: raw.lat_ns,
            slept_ms: self.opts.stacks.then(|| ns_to_ms(raw.slept_ns)),
            stack,
            cgroup: self.cgroups.as_mut().map(|names| match raw.cgroup {
                0 => UNKNOWN_CGROUP.to_string(),
                id => names.name(id),
            }),
        }
    }
}

impl EventTool for Bioslower {
    type Event = IoEvent;
    const NOUN: Noun = IOS;
    const LOSSES: &'static [Loss] = &event_losses(Loss::Unseen);

    fn banner(&self) -> String {
        let what = match self.opts.stage {
            Stage::Block => "block device I/O",
            Stage::Submit => "bio submissions",
        };
        match self.opts.min_ns {
            0 => format!("Tracing all {what}... Hit Ctrl-C to end."),
            ns => format!(
                "Tracing {what} slower than {}... Hit Ctrl-C to end.",
                describe_threshold(ns)
            ),
        }
    }

    fn header(&self) -> String {
        text_header(self.opts.queued, self.opts.cgroups.per_cgroup.is_some())
    }

    fn poll(&mut self, timeout: Option<Duration>) -> Result<(Vec<IoEvent>, Vec<LossEvent>)> {
        let raw = self.queue.take(timeout)?;
        let events = raw.iter().map(|r| self.decode(r)).collect();
        let bss = mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "bioslower's .bss",
        )?;
        let now = read_kernel_losses(&bss.losses);
        let mut losses: Vec<LossEvent> = self
            .losses
            .delta(&now, &KERNEL_LOSSES)
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(kind, n)| LossEvent {
                kind,
                n,
                disk: None,
            })
            .collect();
        if let Some(unseen) = self.unseen.as_mut() {
            for t in unseen.update(|| per_cpu_counts(&self.loaded.skel.maps.io_seen))? {
                if t.unseen > 0 {
                    losses.push(LossEvent {
                        kind: Loss::Unseen,
                        n: t.unseen,
                        disk: Some(self.disks.name_or_reload(t.dev)),
                    });
                }
            }
        }
        Ok((events, losses))
    }

    fn text(&self, event: &IoEvent) -> String {
        event.text()
    }

    fn json(&self, event: &IoEvent) -> String {
        event.json()
    }
}
