//! biolat: block device I/O latency as histograms (bcc's biolatency, with percentiles, JSON, a
//! correct `-Q` on every scheduler, per-disk reconciliation with /proc/diskstats, and
//! `--explain`).

use anyhow::{Context, Result};

use crate::common::block::charge::{plan_io_charge, IoCharge};
use crate::common::block::disk::{DiskFilter, DiskNames};
use crate::common::block::reqflags::RequestFlags;
use crate::common::block::unseen::{DiskTally, UnseenIos};
use crate::common::block::{
    plan_block_hooks, request_map_entries, BlockHooks, RequestBits, StampChoice, Stamps,
};
use crate::common::cgroup::CgroupOptions;
use crate::common::cgroup::{fill_task_cgroup_map, names::OTHER, per_cgroup_entries, CgroupNames};
use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::{KernelStamp, Prober};
use crate::common::load::maps::{drain_generation, per_cpu_counts, HistogramCollector};
use crate::common::load::{copy_struct, load_planned, mapped, Loaded};
use crate::common::losses::{Loss, IOS};
use crate::common::report::hist::Unit;
use crate::common::report::{HistogramReport, LabeledHistogram};
use crate::common::run::filter::TaskFilter;
use crate::common::run::{HistogramTool, Tool};

crate::bpf_skeleton!("biolat", biolat_key, rq_bits, task_filter);
use skel::{types, BiolatSkel, BiolatSkelBuilder};

/// What biolat is asked for.
#[derive(Clone, Debug, Default)]
pub struct BiolatOptions {
    /// `-Q`: from when the OS starts accounting the request.
    pub queued: bool,
    /// `-D`: a histogram per disk.
    pub per_disk: bool,
    /// `-F`: a histogram per operation and flags.
    pub per_flags: bool,
    /// A histogram per operation alone (`op`: read, write, flush, discard...; the exporter's
    /// label), where `-F` adds the flags.
    pub per_op: bool,
    /// Both latencies in one program where the kernel stamps both (the exporter's two block
    /// families): issue to completion, and from the OS's accounting start, labelled
    /// `start=issue` and `start=queued`. Where it cannot, only the first, and the plan says why.
    pub also_queued: bool,
    /// `-d`: one disk only.
    pub disk: Option<DiskFilter>,
    pub unit: Unit,
    /// `--explain`: also describe the `-Q` start that would be used.
    pub explain: bool,
    /// `--stamps`: where request starts come from.
    pub stamps: StampChoice,
    /// `--cgroup`, `--per-cgroup`: by the cgroup I/O is charged to (src/common/block/charge.rs).
    pub cgroups: CgroupOptions,
}

/// biolat's plan: the block hooks, and how to read requests on this kernel.
pub struct BiolatPlan {
    hooks: BlockHooks,
    flags: Option<RequestFlags>,
    accounted: RequestBits,
    charge: Option<IoCharge>,
    /// `also_queued`, where this kernel and these queues allow it.
    pub also_queued: bool,
}

impl AsRef<AttachPlan> for BiolatPlan {
    fn as_ref(&self) -> &AttachPlan {
        &self.hooks.plan
    }
}

/// biolat, loaded and attached.
pub struct Biolat {
    loaded: Loaded<BiolatSkel<'static>>,
    opts: BiolatOptions,
    flags: Option<RequestFlags>,
    also_queued: bool,
    collector: HistogramCollector,
    unseen: UnseenIos,
    disk_names: DiskNames,
    cgroups: Option<CgroupNames>,
}

/// Every kind of loss biolat can report.
const LOSSES: [Loss; 5] = [
    Loss::NoStart,
    Loss::StartFull,
    Loss::HistFull,
    Loss::Clock,
    Loss::Unseen,
];

impl Tool for Biolat {
    const NAME: &'static str = "biolat";
    type Options = BiolatOptions;
    type Plan = BiolatPlan;

    fn plan(prober: &Prober, opts: &BiolatOptions) -> Result<BiolatPlan> {
        let disk = opts.disk.as_ref().map(|d| d.name.as_str());
        let mut hooks = plan_block_hooks(
            prober,
            Self::NAME,
            opts.queued,
            opts.explain,
            disk,
            opts.stamps,
        )?;
        let accounted = RequestBits::from_btf(prober);
        hooks.plan.decide("counted", accounted.describe());
        let flags = match opts.per_flags || opts.per_op {
            true => Some(
                RequestFlags::from_btf(prober)
                    .context("this kernel's BTF has no req_op/req_flag_bits enums, needed by -F")?,
            ),
            false => None,
        };
        let charge = plan_io_charge(prober, &mut hooks.plan, &opts.cgroups)?;
        let mut also_queued = false;
        if opts.also_queued {
            let setup = prober.kernel_stamp(KernelStamp::Setup, disk);
            let why = match (&setup, hooks.stamps, opts.queued) {
                (_, _, true) => "-Q asks for the queued latency alone".to_string(),
                (_, Stamps::Ours, _) => "the issue stamps are ours here, not the kernel's".into(),
                (Err(why), _, _) => format!("the kernel's rq->start_time_ns is not kept ({why})"),
                (Ok(why), Stamps::Kernel, false) => {
                    also_queued = true;
                    format!("from the kernel's rq->start_time_ns too, in the same program ({why})")
                }
            };
            hooks.plan.decide("queued", why);
        }
        Ok(BiolatPlan {
            hooks,
            flags,
            accounted,
            charge,
            also_queued,
        })
    }

    fn open(_prober: &Prober, plan: &mut BiolatPlan, opts: &BiolatOptions) -> Result<Biolat> {
        let (hooks, flags) = (&plan.hooks, &plan.flags);
        let loaded = load_planned(BiolatSkelBuilder::default(), &hooks.plan, |open| {
            let rodata = mapped(open.maps.rodata_data.as_deref_mut(), "biolat's .rodata")?;
            rodata.unit_ns = opts.unit.ns();
            rodata.unit_lg = opts.unit.lg();
            rodata.rq_tp_single_arg = hooks.single_arg;
            rodata.q_start = hooks.queue_start as u32;
            rodata.stamps = hooks.stamps as u32;
            rodata.filter_dev = opts.disk.as_ref().map_or(0, |f| f.dev);
            rodata.per_disk = opts.per_disk;
            rodata.also_queued = plan.also_queued;
            rodata.flags_mask = flags.as_ref().map_or(0, |f| match opts.per_flags {
                true => f.mask(),
                false => f.op_mask(),
            });
            copy_struct("rq_bits", &mut rodata.rq_bits, &plan.accounted)?;
            let cgroup_only = TaskFilter::default().in_cgroup(opts.cgroups.filter.clone());
            copy_struct(
                "task_filter",
                &mut rodata.task_filter,
                &cgroup_only.to_bpf(),
            )?;
            fill_task_cgroup_map(&mut open.maps.task_cgroup, opts.cgroups.filter.as_ref())?;
            rodata.charge_by_blkcg = plan.charge.is_some_and(IoCharge::by_blkcg);
            rodata.bio_tp_with_queue = plan.charge.is_some_and(IoCharge::bio_with_queue);
            rodata.per_cgroup_depth = opts.cgroups.per_cgroup.unwrap_or(0);
            if opts.cgroups.per_cgroup.is_some() {
                // A cgroup's histograms: one, or a few disks' and operations' with -D and -F.
                let per_cgroup = [opts.per_disk, opts.per_flags || opts.per_op]
                    .iter()
                    .map(|&split| if split { 8 } else { 1 })
                    .product();
                open.maps
                    .cgroup_hists
                    .set_max_entries(per_cgroup_entries(per_cgroup))?;
            }
            open.maps.starts.set_max_entries(request_map_entries())?;
            Ok(())
        })?;
        Ok(Biolat {
            loaded,
            unseen: UnseenIos::start(opts.disk.as_ref().map(|f| f.dev))?,
            opts: opts.clone(),
            flags: flags.clone(),
            also_queued: plan.also_queued,
            collector: HistogramCollector::default(),
            disk_names: DiskNames::load(),
            cgroups: opts.cgroups.per_cgroup.map(CgroupNames::new),
        })
    }
}

impl Biolat {
    /// Whether its reports hold both latencies (`also_queued`, where the kernel allows it).
    pub fn also_queued(&self) -> bool {
        self.also_queued
    }
}

impl HistogramTool for Biolat {
    const BANNER: &'static str = "Tracing block device I/O... Hit Ctrl-C to end.";

    fn collect(&mut self) -> Result<HistogramReport> {
        let bss = mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "biolat's .bss",
        )?;
        let gen = self.collector.flip(&mut bss.hist_gen);
        let mut drained = drain_generation(&self.loaded.skel.maps.hists, gen)?;
        if self.cgroups.is_some() {
            drained.extend(drain_generation(&self.loaded.skel.maps.cgroup_hists, gen)?);
        }
        let mut losses = self.collector.losses(&bss.losses, &LOSSES);
        let accounted: Vec<(String, DiskTally)> = self
            .unseen
            .update(|| per_cpu_counts(&self.loaded.skel.maps.io_seen))?
            .into_iter()
            .map(|t| (self.disk_names.name_or_reload(t.dev), t))
            .collect();
        losses.push((Loss::Unseen, accounted.iter().map(|(_, t)| t.unseen).sum()));
        let mut histograms = Vec::with_capacity(drained.len());
        for (key_bytes, hist) in drained {
            let mut key = types::biolat_key::default();
            plain::copy_from_bytes(&mut key, &key_bytes)
                .map_err(|e| anyhow::anyhow!("bad histogram key: {e:?}"))?;
            let mut labels = Vec::new();
            if let Some(names) = &mut self.cgroups {
                let name = match key.cgroup {
                    0 => OTHER.to_string(),
                    id => names.name(id),
                };
                labels.push(("cgroup", name));
            }
            if self.opts.per_disk {
                labels.push(("disk", self.disk_names.name_or_reload(key.dev)));
            }
            if self.also_queued {
                let start = if key.queued != 0 { "queued" } else { "issue" };
                labels.push(("start", start.to_string()));
            }
            match &self.flags {
                Some(flags) if self.opts.per_flags => {
                    labels.push(("flags", flags.describe(key.flags)))
                }
                Some(flags) => labels.push(("op", flags.op_name(key.flags).to_lowercase())),
                None => {}
            }
            histograms.push(LabeledHistogram { labels, hist });
        }
        histograms.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(HistogramReport {
            tool: Self::NAME,
            time: crate::common::report::local_hms(),
            unit: self.opts.unit,
            noun: IOS,
            histograms,
            losses,
            accounted: Some(accounted),
            async_calls: None,
            totals: false,
        })
    }
}
