//! The layers the exporter can export, each one of the tools' components, opened once and
//! drained every interval into the exporter's `Metrics`.

use anyhow::Result;

use crate::common::block::disk::DiskFilter;
use crate::common::cgroup::{CgroupFilter, CgroupOptions};
use crate::common::kernel::prober::Prober;
use crate::common::report::heatmap::HeatMap;
use crate::common::report::hist::Unit;
use crate::common::report::{HistogramReport, LabeledHistogram};
use crate::common::run::filter::TaskFilter;
use crate::common::run::{HistogramTool, IntervalTool, Tool};
use crate::tools::biolat::{Biolat, BiolatOptions};
use crate::tools::fnlat::{Fnlat, FnlatOptions};
use crate::tools::iostack::picture::BreakdownPicture;
use crate::tools::iostack::{Iostack, IostackOptions};
use crate::tools::rastat::{Rastat, RastatOptions};
use crate::tools::syslat::{Syslat, SyslatOptions};

use super::series::{Labels, LayerState, Metrics};
use super::{breakdown, readahead};

/// The layers, as `--layers` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LayerName {
    Block,
    Fs,
    Vfs,
    Syscall,
    /// iostack's split of each I/O call's time, and the syscall latency of the same calls.
    Breakdown,
    /// rastat's readahead pages: brought in, used, evicted unused.
    Readahead,
}

impl LayerName {
    pub fn name(self) -> &'static str {
        match self {
            LayerName::Block => "block",
            LayerName::Fs => "fs",
            LayerName::Vfs => "vfs",
            LayerName::Syscall => "syscall",
            LayerName::Breakdown => "breakdown",
            LayerName::Readahead => "readahead",
        }
    }
}

/// The block layer's operations: the kernel's request ops, the rare ones as `other`.
const BLOCK_OPS: [&str; 4] = ["read", "write", "flush", "discard"];

/// The unit of the kernel's log2 slots: bounds 2 us to 2^31 us (36 minutes), then +Inf.
pub(super) const UNIT: Unit = Unit::Usecs;

/// One opened layer: a tool and how its histograms become series.
enum Source {
    /// Issue to completion (`iostack_block_latency_seconds`) or, `queued`, from the OS's
    /// accounting start (`iostack_block_queue_latency_seconds`).
    Block {
        tool: Biolat,
        queued: bool,
    },
    Fs {
        tool: Fnlat,
    },
    Vfs {
        tool: Fnlat,
    },
    Syscall {
        tool: Syslat,
    },
    /// The iostack component: the breakdown's counters, and the syscall family of the same
    /// calls from the same drain (so that an op's parts add up to its `_sum` at every scrape).
    Breakdown {
        tool: Box<Iostack>,
        /// Its operations, each of whose series is there from the first scrape.
        ops: Vec<String>,
        per_cgroup: bool,
    },
    Readahead {
        tool: Box<Rastat>,
        per_cgroup: bool,
    },
}

/// What the exporter was asked for, per layer.
#[derive(Clone, Debug, Default)]
pub struct LayerOptions {
    /// `-d`: only these disks' I/O (one is filtered in the kernel, several in user space).
    pub disks: Vec<DiskFilter>,
    /// `--fs`: these filesystem types (default: every type fslat knows that is mounted).
    pub filesystems: Vec<String>,
    /// `--cgroup`: only this cgroup v2's tasks (and, for the block layer, the I/O charged to it).
    pub cgroup: Option<CgroupFilter>,
    pub per_cgroup: Option<u32>,
}

/// The opened layers, and the state of every layer asked for.
pub struct Layers {
    sources: Vec<(LayerName, Source)>,
    states: Vec<(String, LayerState)>,
    disks: Vec<String>,
    /// What the `/` page draws, shared with it (it copies them when it is asked for, not
    /// every interval).
    pictures: Pictures,
}

/// What the `/` page draws of the last intervals.
#[derive(Clone, Default)]
pub struct Drawings {
    /// Per family (by name), its heat map.
    pub heatmaps: Vec<(&'static str, HeatMap)>,
    /// The breakdown layer's: per operation, where the calls' time went, beside the calls'
    /// heat map (iostack --svg's drawing).
    pub breakdown: Option<BreakdownPicture>,
}

pub type Pictures = std::sync::Arc<std::sync::Mutex<Drawings>>;

fn drawings(pictures: &Pictures) -> Result<std::sync::MutexGuard<'_, Drawings>> {
    pictures
        .lock()
        .map_err(|_| anyhow::anyhow!("internal: the pictures' lock is poisoned"))
}

/// How many intervals (seconds) the `/` page's heat maps show.
pub const HEATMAP_COLUMNS: usize = 300;

/// Why a layer's tool did not open: `planned` false where this kernel cannot trace it (no plan:
/// the hooks it needs are not here), true where what was planned failed to load or attach, or
/// the options were refused (an outage: something to mend on the host).
struct NotOpened {
    planned: bool,
    why: anyhow::Error,
}

impl From<anyhow::Error> for NotOpened {
    /// Options refused before any plan: the operator's to mend, so counted as an outage.
    fn from(why: anyhow::Error) -> NotOpened {
        NotOpened { planned: true, why }
    }
}

impl std::fmt::Display for NotOpened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.why)
    }
}

fn open_tool<T: Tool>(
    prober: &Prober,
    opts: &T::Options,
) -> std::result::Result<(T, String), NotOpened> {
    let mut plan = T::plan(prober, opts).map_err(|why| NotOpened {
        planned: false,
        why,
    })?;
    let tool = T::open(prober, &mut plan, opts).map_err(|why| NotOpened { planned: true, why })?;
    Ok((tool, plan.as_ref().to_string()))
}

impl Layers {
    /// Opens every layer asked for; one this kernel cannot trace is down, with the reason.
    pub fn open(prober: &Prober, asked: &[LayerName], opts: &LayerOptions) -> Layers {
        let mut layers = Layers {
            sources: Vec::new(),
            states: Vec::new(),
            disks: opts.disks.iter().map(|d| d.name.clone()).collect(),
            pictures: Pictures::default(),
        };
        let cgroups = CgroupOptions {
            filter: opts.cgroup.clone(),
            per_cgroup: opts.per_cgroup,
        };
        let tasks = TaskFilter::default().in_cgroup(opts.cgroup.clone());
        for &layer in asked {
            let mut details = Vec::new();
            let mut opened = Vec::new();
            let mut failed: Vec<String> = Vec::new();
            // Whether any of its tools found what it needs on this kernel.
            let mut planned = false;
            match layer {
                LayerName::Block => {
                    // Both families from one program where the kernel stamps both; else a
                    // second instance for the queued latency (two programs per I/O).
                    let o = BiolatOptions {
                        per_disk: true,
                        per_op: true,
                        also_queued: true,
                        disk: match opts.disks.as_slice() {
                            [one] => Some(one.clone()),
                            _ => None,
                        },
                        unit: UNIT,
                        cgroups: cgroups.clone(),
                        ..Default::default()
                    };
                    match open_tool::<Biolat>(prober, &o) {
                        Ok((tool, d)) => {
                            details.push(d);
                            let both = tool.also_queued();
                            opened.push(Source::Block {
                                tool,
                                queued: false,
                            });
                            if !both {
                                let q = BiolatOptions {
                                    queued: true,
                                    also_queued: false,
                                    ..o.clone()
                                };
                                match open_tool::<Biolat>(prober, &q) {
                                    Ok((tool, d)) => {
                                        details.push(d);
                                        opened.push(Source::Block { tool, queued: true });
                                    }
                                    Err(e) => {
                                        planned |= e.planned;
                                        failed.push(format!("-Q: {e}"))
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            planned |= e.planned;
                            failed.push(format!("{e}"))
                        }
                    }
                }
                LayerName::Fs => {
                    for fs in &opts.filesystems {
                        let o =
                            fnlat_options("fslat", crate::tools::fslat::layer(fs), &tasks, opts);
                        match o
                            .map_err(NotOpened::from)
                            .and_then(|o| open_tool::<Fnlat>(prober, &o))
                        {
                            Ok((tool, d)) => {
                                details.push(format!("{fs}: {d}"));
                                opened.push(Source::Fs { tool });
                            }
                            Err(e) => {
                                planned |= e.planned;
                                failed.push(format!("{fs}: {e}"))
                            }
                        }
                    }
                }
                LayerName::Vfs => {
                    let o = fnlat_options("vfslat", Ok(crate::tools::vfslat::VFS), &tasks, opts);
                    match o
                        .map_err(NotOpened::from)
                        .and_then(|o| open_tool::<Fnlat>(prober, &o))
                    {
                        Ok((tool, d)) => {
                            details.push(d);
                            opened.push(Source::Vfs { tool });
                        }
                        Err(e) => {
                            planned |= e.planned;
                            failed.push(format!("{e}"))
                        }
                    }
                }
                // The breakdown's programs time the same calls: one drain gives both.
                // Its state is the breakdown's, filled in below.
                LayerName::Syscall if asked.contains(&LayerName::Breakdown) => {
                    let state = LayerState {
                        up: false,
                        supported: false,
                        detail: String::new(),
                    };
                    layers.states.push((layer.name().to_string(), state));
                    continue;
                }
                LayerName::Breakdown => {
                    let o = IostackOptions::new(
                        tasks.clone(),
                        match opts.disks.as_slice() {
                            [one] => Some(one.clone()),
                            _ => None,
                        },
                        None,
                        false,
                        opts.per_cgroup,
                        None,
                        UNIT,
                    );
                    match o.map_err(NotOpened::from).and_then(|o| {
                        let ops = o.ops.iter().map(|op| op.label.clone()).collect();
                        open_tool::<Iostack>(prober, &o).map(|t| (t, ops))
                    }) {
                        Ok(((tool, d), ops)) => {
                            details.push(d);
                            opened.push(Source::Breakdown {
                                tool: Box::new(tool),
                                ops,
                                per_cgroup: opts.per_cgroup.is_some(),
                            });
                        }
                        Err(e) => {
                            planned |= e.planned;
                            failed.push(format!("{e}"))
                        }
                    }
                }
                LayerName::Readahead => {
                    let o = RastatOptions {
                        tasks: tasks.clone(),
                        disk: match opts.disks.as_slice() {
                            [one] => Some(one.clone()),
                            _ => None,
                        },
                        per_file: None,
                        per_cgroup: opts.per_cgroup,
                        unit: UNIT,
                    };
                    match open_tool::<Rastat>(prober, &o) {
                        Ok((tool, d)) => {
                            details.push(d);
                            opened.push(Source::Readahead {
                                tool: Box::new(tool),
                                per_cgroup: opts.per_cgroup.is_some(),
                            });
                        }
                        Err(e) => {
                            planned |= e.planned;
                            failed.push(format!("{e}"))
                        }
                    }
                }
                LayerName::Syscall => {
                    let o = crate::common::kernel::syscalls::select(&[], false).map(|ops| {
                        SyslatOptions {
                            ops,
                            tasks: tasks.clone(),
                            unit: UNIT,
                            per_cgroup: opts.per_cgroup,
                            ..Default::default()
                        }
                    });
                    match o
                        .map_err(NotOpened::from)
                        .and_then(|o| open_tool::<Syslat>(prober, &o))
                    {
                        Ok((tool, d)) => {
                            details.push(d);
                            opened.push(Source::Syscall { tool });
                        }
                        Err(e) => {
                            planned |= e.planned;
                            failed.push(format!("{e}"))
                        }
                    }
                }
            }
            let up = !opened.is_empty();
            let detail = match up {
                true => details.join("\n"),
                false => failed.join("; "),
            };
            let supported = up || planned;
            layers.states.push((
                layer.name().to_string(),
                LayerState {
                    up,
                    supported,
                    detail,
                },
            ));
            layers
                .sources
                .extend(opened.into_iter().map(|s| (layer, s)));
        }
        // The syscall layer, where the breakdown's programs serve it: up as the breakdown is.
        let breakdown = layers
            .states
            .iter()
            .find(|(l, _)| l == LayerName::Breakdown.name())
            .map(|(_, s)| s.clone());
        let syscall = layers
            .states
            .iter_mut()
            .find(|(l, _)| l == LayerName::Syscall.name());
        if let (Some(b), Some((_, state))) = (breakdown, syscall) {
            *state = LayerState {
                up: b.up,
                supported: b.supported,
                detail: match b.up {
                    true => "the breakdown's programs (iostack) time these calls: \
                             iostack_syscall_latency_seconds comes from them, in the same \
                             drain as iostack_call_seconds_total"
                        .to_string(),
                    false => format!("as the breakdown: {}", b.detail),
                },
            };
        }
        layers
    }

    /// What the first scrape shows, before the first drain: the layers' states, and the
    /// counters every series of which exists from the start at 0.
    pub fn first_metrics(&self) -> Metrics {
        let mut m = Metrics {
            layers: self.states(),
            ..Default::default()
        };
        for (_, source) in &self.sources {
            match source {
                Source::Breakdown {
                    tool,
                    ops,
                    per_cgroup: false,
                } => breakdown::seed(&mut m, ops, &tool.interfaces()),
                Source::Readahead {
                    per_cgroup: false, ..
                } => readahead::seed(&mut m),
                _ => {}
            }
        }
        m
    }

    pub fn states(&self) -> Vec<(String, LayerState)> {
        self.states.clone()
    }

    /// What the `/` page draws, over the last intervals.
    pub fn pictures(&self) -> Pictures {
        self.pictures.clone()
    }

    /// Drains every layer into `m`: its histograms added to their series, its losses to the
    /// loss counters; the series of disks that are gone stop.
    pub fn collect_into(&mut self, m: &mut Metrics) -> Result<()> {
        // This interval's column of each family's heat map.
        let mut columns: Vec<(Family, Vec<LabeledHistogram>)> = Vec::new();
        for (layer, source) in &mut self.sources {
            // A block source that also stamps the queued start feeds the queue family too: its
            // heat map gets a column every interval, events or not.
            let also_queued =
                matches!(source, Source::Block { tool, queued: false } if tool.also_queued());
            let (name, help, report) = match source {
                Source::Block {
                    tool,
                    queued: false,
                } => (
                    "iostack_block_latency_seconds",
                    "Block I/O latency, issue to completion, by disk and operation",
                    tool.collect()?,
                ),
                Source::Block { tool, queued: true } => {
                    (QUEUE_FAMILY.0, QUEUE_FAMILY.1, tool.collect()?)
                }
                Source::Fs { tool } => (
                    "iostack_fs_latency_seconds",
                    "Filesystem operation latency, by filesystem type and operation",
                    tool.collect()?,
                ),
                Source::Vfs { tool } => (
                    "iostack_vfs_latency_seconds",
                    "VFS operation latency, by operation",
                    tool.collect()?,
                ),
                Source::Syscall { tool } => (SYSCALL_FAMILY.0, SYSCALL_FAMILY.1, tool.collect()?),
                // Counters only: no histogram family, no heat map.
                Source::Readahead { tool, .. } => {
                    readahead::add_counters(m, &tool.collect()?);
                    continue;
                }
                Source::Breakdown { tool, .. } => {
                    let report = tool.collect()?;
                    breakdown::add_counters(m, &report);
                    drawings(&self.pictures)?
                        .breakdown
                        .get_or_insert_with(|| {
                            BreakdownPicture::new(
                                "I/O calls: where their time went, and their latency",
                                UNIT,
                                HEATMAP_COLUMNS,
                            )
                        })
                        .push(&report);
                    (
                        SYSCALL_FAMILY.0,
                        SYSCALL_FAMILY.1,
                        breakdown::syscall_latency(report),
                    )
                }
            };
            // Every family fed gets a column every interval, events or not; a family fed by
            // several sources (fs: one per filesystem type) one column of all of them.
            for family in std::iter::once((name, help)).chain(also_queued.then_some(QUEUE_FAMILY)) {
                if !columns.iter().any(|(f, _)| f.0 == family.0) {
                    columns.push((family, Vec::new()));
                }
            }
            for h in &report.histograms {
                if let Some((family, labels)) = route(layer.name(), (name, help), h, &self.disks) {
                    let i = columns
                        .iter()
                        .position(|(f, _)| f.0 == family.0)
                        .unwrap_or(0);
                    let hist = h.hist.clone();
                    columns[i].1.push(LabeledHistogram { labels, hist });
                }
            }
            add_report(m, layer.name(), (name, help), report, &self.disks);
        }
        let time = crate::common::report::local_hms();
        let mut drawings = drawings(&self.pictures)?;
        let maps = &mut drawings.heatmaps;
        for ((family, help), histograms) in columns {
            let i = match maps.iter().position(|(f, _)| *f == family) {
                Some(i) => i,
                None => {
                    let map = HeatMap::new(format!("{family}: {help}"), UNIT)
                        .with_max_columns(HEATMAP_COLUMNS);
                    maps.push((family, map));
                    maps.len() - 1
                }
            };
            maps[i].1.push(time.clone(), &histograms);
        }
        drop(drawings);
        // A disk that is gone has no /sys/block entry; a detached loop device keeps its
        // entry, with no size. Each disk named by a series is looked up once.
        let named: std::collections::BTreeSet<String> = m
            .histograms
            .iter()
            .flat_map(|f| f.series.keys())
            .flat_map(|labels| labels.iter())
            .filter(|(k, _)| *k == "disk")
            .map(|(_, v)| v.clone())
            .collect();
        let present: std::collections::BTreeSet<String> = named
            .into_iter()
            .filter(|d| {
                std::fs::read_to_string(format!("/sys/block/{d}/size"))
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .is_some_and(|sectors| sectors > 0)
            })
            .collect();
        for family in &mut m.histograms {
            family.retain_label("disk", |d| present.contains(d));
        }
        Ok(())
    }
}

/// A metric family: its name and help (the heat map's title).
type Family = (&'static str, &'static str);

fn fnlat_options(
    name: &'static str,
    layer: Result<crate::tools::fnlat::Layer>,
    tasks: &TaskFilter,
    opts: &LayerOptions,
) -> Result<FnlatOptions> {
    Ok(FnlatOptions {
        name,
        layer: layer?,
        tasks: tasks.clone(),
        unit: UNIT,
        per_fs: name == "fslat",
        min_ns: None,
        per_cgroup: opts.per_cgroup,
    })
}

/// The syscall family: syslat's, or the breakdown's programs' for the same calls.
const SYSCALL_FAMILY: (&str, &str) = (
    "iostack_syscall_latency_seconds",
    "I/O system call latency, by operation",
);

/// The family of the queued block latency (a biolat report with both has `start=queued`).
const QUEUE_FAMILY: (&str, &str) = (
    "iostack_block_queue_latency_seconds",
    "Block I/O latency including the OS queue (from the kernel's accounting start), by disk and operation",
);

/// A report's histograms into their family, labelled as the family says (the block layer's
/// `op` mapped to its fixed list; `start=queued` to the queue family); its losses into the
/// loss counters.
fn add_report(
    m: &mut Metrics,
    layer: &str,
    family: (&'static str, &'static str),
    report: HistogramReport,
    disks: &[String],
) {
    // Every kind the layer can incur, from the first scrape on (a counter that appears only
    // when it first counts hides the increase to it).
    for (loss, n) in &report.losses {
        m.add_lost(layer, loss.name(), *n);
    }
    for h in &report.histograms {
        if let Some((into, labels)) = route(layer, family, h, disks) {
            m.family(into.0, into.1, UNIT).add(labels, &h.hist);
        }
    }
}

/// Where a histogram goes, and with which labels, in /metrics and on the page alike: the block
/// layer's `op` mapped to its fixed list, `start=queued` to the queue family (the `start` label
/// dropped), a disk outside `-d` (several disks: filtered here) nowhere.
fn route(
    layer: &str,
    family: Family,
    h: &LabeledHistogram,
    disks: &[String],
) -> Option<(Family, Labels)> {
    let mut labels: Labels = Vec::new();
    let mut into = family;
    for (k, v) in &h.labels {
        match (*k, layer, v.as_str()) {
            ("start", _, "queued") => into = QUEUE_FAMILY,
            ("start", _, _) => {}
            ("op", "block", op) if !BLOCK_OPS.contains(&op) => labels.push((k, "other".into())),
            _ => labels.push((k, v.clone())),
        }
    }
    let disk = labels.iter().find(|(k, _)| *k == "disk");
    if disk.is_some_and(|(_, d)| !disks.is_empty() && !disks.contains(d)) {
        return None;
    }
    Some((into, labels))
}
