//! rastat: is readahead helping or wasting? Per interval, the readahead windows the kernel
//! started (by kind, with their sizes), the pages they brought into the page cache, which of
//! those were used (read or mapped) and how soon, which were evicted never used (the waste), and
//! which are still resident unused; per process, and per file with `--per-file`.

pub mod paths;
pub mod plan;
pub mod report;

use std::collections::HashMap;

use anyhow::{anyhow, Result};
use libbpf_rs::MapCore;

use crate::common::block::disk::DiskFilter;
use crate::common::cgroup::names::{CgroupNames, OTHER, PER_CGROUP_ROOM};
use crate::common::kernel::prober::Prober;
use crate::common::load::maps::{
    drain_array_generation, for_each_hash_entry, hash_entries, HistogramCollector,
};
use crate::common::load::{
    c_str, copy_struct, load_planned, load_with_thread_state, mapped, thread_state_maps, Loaded,
};
use crate::common::losses::{read_kernel_losses, Loss};
use crate::common::report::hist::{LatencyHistogram, Unit};
use crate::common::report::local_hms;
use crate::common::run::filter::process_exists;
use crate::common::run::filter::TaskFilter;
use crate::common::run::{IntervalTool, Tool};
use plan::RastatPlan;
use report::{CgroupRow, Counts, Cumulative, FileRow, ProcessRow, RastatReport, KINDS};

pub const NAME: &str = "rastat";

crate::bpf_skeleton!(
    "rastat",
    task_filter,
    ra_chunk,
    ra_chunk_key,
    ra_proc,
    ra_file,
    ra_file_key,
    ra_counts
);
use skel::{types, RastatSkel, RastatSkelBuilder};

/// Must match RA_CHUNK_PAGES, RA_USES and RA_MAX_DEVS in src/bpf/rastat{.h,.bpf.c}.
const CHUNK_PAGES: usize = 32;
const USES: u32 = 4;
const MAX_DEVS: usize = 16;
const NAME_LEN: usize = 64;
/// Rows of the per-process table.
const TOP_PROCESSES: usize = 10;
/// --per-cgroup: cgroups counted apart (cumulative: a cgroup keeps its entry while the
/// tool runs); the windows and pages of others are shown as `other`.
const CGROUP_ENTRIES: u32 = 16 * PER_CGROUP_ROOM;

/// What rastat is asked for.
#[derive(Clone, Debug, Default)]
pub struct RastatOptions {
    pub tasks: TaskFilter,
    /// `-d DISK`: files on this disk (its partitions included).
    pub disk: Option<DiskFilter>,
    /// `--per-file N`: the N files with the most waste.
    pub per_file: Option<usize>,
    /// `--per-cgroup DEPTH`: per cgroup v2 at that depth (of the thread that started each
    /// window).
    pub per_cgroup: Option<u32>,
    pub unit: Unit,
}

/// rastat, loaded and attached.
pub struct Rastat {
    loaded: Loaded<RastatSkel<'static>>,
    opts: RastatOptions,
    collector: HistogramCollector,
    /// Cumulative counts at the last report, to report differences.
    last_total: Cumulative,
    last_sizes: [[u64; 32]; KINDS],
    last_procs: HashMap<u32, Cumulative>,
    last_files: HashMap<(u32, u64), Cumulative>,
    last_cgroups: HashMap<u64, Cumulative>,
    /// --per-cgroup: cgroup ids back to paths.
    cgroup_names: Option<CgroupNames>,
    last_losses: [u64; 4],
    /// First uses recorded so far (the age histograms' counts).
    first_uses: u64,
    page_size: u64,
    /// The chunk map's size, and the chunks it held at the last pass.
    chunk_entries: u32,
    chunks_held: usize,
}

/// Chunks the page map holds: one per 32 pages of memory, between 2^12 and 2^16: a chunk is
/// about 370 bytes of preallocated kernel memory (a 304-byte value, its key and the hash's own),
/// so at most 24 MB, for 8 GiB of readahead pages tracked at once; pages beyond are counted as
/// untracked.
fn chunk_entries() -> u32 {
    let mem_pages = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb / 4)
        .unwrap_or(1 << 22);
    (mem_pages / CHUNK_PAGES as u64).clamp(1 << 12, 1 << 16) as u32
}

impl Tool for Rastat {
    const NAME: &'static str = NAME;
    type Options = RastatOptions;
    type Plan = RastatPlan;

    fn plan(prober: &Prober, _opts: &RastatOptions) -> Result<RastatPlan> {
        plan::plan(prober)
    }

    fn open(_prober: &Prober, plan: &mut RastatPlan, opts: &RastatOptions) -> Result<Rastat> {
        let (loaded, threads) = load_with_thread_state(|per_task| load(plan, opts, per_task))?;
        plan.plan.decide("threads", threads);
        plan.plan.decide(
            "pages",
            format!(
                "room for {} chunks of {CHUNK_PAGES} pages (from the memory size); pages beyond are counted as untracked",
                chunk_entries()
            ),
        );
        Ok(Rastat {
            loaded,
            opts: opts.clone(),
            collector: HistogramCollector::default(),
            last_total: Cumulative::default(),
            last_sizes: [[0; 32]; KINDS],
            last_procs: HashMap::new(),
            last_files: HashMap::new(),
            last_cgroups: HashMap::new(),
            cgroup_names: opts.per_cgroup.map(CgroupNames::new),
            last_losses: [0; 4],
            first_uses: 0,
            page_size: page_size(),
            chunk_entries: chunk_entries(),
            chunks_held: 0,
        })
    }
}

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096) as u64
}

fn load(
    plan: &RastatPlan,
    opts: &RastatOptions,
    per_task: bool,
) -> Result<Loaded<RastatSkel<'static>>> {
    load_planned(RastatSkelBuilder::default(), &plan.plan, |open| {
        thread_state_maps(
            &mut open.maps.threads_by_task,
            &mut open.maps.threads_by_tid,
            per_task,
        )?;
        open.maps.chunks.set_max_entries(chunk_entries())?;
        if opts.per_file.is_some() {
            open.maps.files.set_max_entries(16384)?;
        }
        if opts.per_cgroup.is_some() {
            open.maps.cgroups.set_max_entries(CGROUP_ENTRIES)?;
        }
        let rodata = mapped(open.maps.rodata_data.as_deref_mut(), "rastat's .rodata")?;
        rodata.unit_ns = opts.unit.ns();
        rodata.unit_lg = opts.unit.lg();
        rodata.per_task = per_task;
        rodata.per_file = opts.per_file.is_some();
        rodata.per_cgroup_depth = opts.per_cgroup.unwrap_or(0);
        rodata.sync_req_arg = plan.sync_req_arg;
        rodata.page_shift = page_size().trailing_zeros();
        rodata.read_calls = [
            libc::SYS_read,
            libc::SYS_readv,
            libc::SYS_pread64,
            libc::SYS_preadv,
            libc::SYS_preadv2,
            libc::SYS_sendfile,
            libc::SYS_splice,
            libc::SYS_copy_file_range,
            libc::SYS_io_uring_enter,
        ];
        copy_struct("task_filter", &mut rodata.task_filter, &opts.tasks.to_bpf())?;
        crate::common::cgroup::fill_task_cgroup_map(
            &mut open.maps.task_cgroup,
            opts.tasks.cgroup.as_ref(),
        )?;
        if let Some(disk) = &opts.disk {
            let devs = disk.file_devices();
            if devs.len() > MAX_DEVS {
                return Err(anyhow!(
                    "{} has {} partitions and filesystems; rastat -d follows at most {}",
                    disk.name,
                    devs.len() - 1,
                    MAX_DEVS - 1
                ));
            }
            for (slot, dev) in rodata.disk_devs.iter_mut().zip(&devs) {
                *slot = *dev;
            }
            rodata.n_disk_devs = devs.len() as u32;
        }
        Ok(())
    })
}

fn counts_of(c: &types::ra_counts) -> Cumulative {
    Cumulative {
        windows: c.windows,
        wasted: c.wasted,
        evicted_used: c.evicted_used,
        first_uses: 0,
        resident_used: 0,
        resident_unused: 0,
    }
}

/// What the page map holds now, per process, cgroup and file: pages used and not yet used.
#[derive(Default)]
struct Resident {
    total: (u64, u64),
    procs: HashMap<u32, (u64, u64)>,
    cgroups: HashMap<u64, (u64, u64)>,
    files: HashMap<(u32, u64), (u64, u64)>,
}

fn add_pair(to: &mut (u64, u64), used: u64, unused: u64) {
    to.0 += used;
    to.1 += unused;
}

impl Rastat {
    /// What the chunks hold now. Chunks whose pages have all left the page cache stay in the map
    /// (the kernel side never deletes one: see evict_chunk); once the map was three quarters
    /// full at the last pass, this pass removes them as it meets them, with no list of them
    /// kept (it collected their keys on every pass before), and no allocation per chunk.
    fn resident(&mut self) -> Result<Resident> {
        let mut r = Resident::default();
        let chunks = &self.loaded.skel.maps.chunks;
        let clean = self.chunks_held * 4 >= self.chunk_entries as usize * 3;
        let (per_cgroup, per_file) = (self.opts.per_cgroup.is_some(), self.opts.per_file.is_some());
        let mut held = 0usize;
        let mut ch = types::ra_chunk::default();
        for_each_hash_entry(chunks, 1024, |key, bytes| {
            plain::copy_from_bytes(&mut ch, bytes)
                .map_err(|e| anyhow!("bad chunk value: {e:?}"))?;
            let used = ch.state.iter().filter(|&&s| s == 2).count() as u64;
            let unused = ch.state.iter().filter(|&&s| s == 1).count() as u64;
            if used + unused == 0 {
                // A page added to the chunk in the instant it is removed is lost (and can land
                // in the chunk that reuses the element): rare, and only with the map three
                // quarters full. An error is a chunk gone already.
                if !clean || chunks.delete(key).is_err() {
                    held += 1;
                }
                return Ok(());
            }
            held += 1;
            add_pair(&mut r.total, used, unused);
            add_pair(r.procs.entry(ch.tgid).or_default(), used, unused);
            if per_cgroup {
                add_pair(r.cgroups.entry(ch.cgroup).or_default(), used, unused);
            }
            if per_file {
                add_pair(r.files.entry((ch.dev, ch.ino)).or_default(), used, unused);
            }
            Ok(())
        })?;
        self.chunks_held = held;
        Ok(r)
    }
}

impl Rastat {
    /// Processes that have exited, once their last interval is reported: out of the kernel's
    /// map (else it fills with the dead, 16384 of them, and every process after is uncounted)
    /// and of ours. The waste of their pages evicted later counts in the totals and their
    /// cgroup's only (a process's row ends with it). The exporter's soak kept 767 dead
    /// processes there after 16 minutes (2026-11-27). BPF's ids are the initial pid
    /// namespace's: in another one a live process may look gone, and its row then restarts
    /// from zero each interval, its deltas the same.
    fn forget_processes(&mut self, gone: &[Vec<u8>]) {
        for key in gone {
            // An error is an entry gone already.
            let _ = self.loaded.skel.maps.procs.delete(key);
            if let Ok(tgid) = key[..4].try_into().map(u32::from_ne_bytes) {
                self.last_procs.remove(&tgid);
            }
        }
    }
}

impl IntervalTool for Rastat {
    type Report = RastatReport;

    fn banner(&self) -> String {
        "Tracing readahead... Hit Ctrl-C to end.".to_string()
    }

    fn collect(&mut self) -> Result<RastatReport> {
        let bss = mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "rastat's .bss",
        )?;
        let gen = self.collector.flip(&mut bss.hist_gen);
        let kernel_losses = read_kernel_losses(&bss.losses);
        // SAFETY: these live in the mmap-ed .bss; volatile reads as the kernel updates them.
        let (total, sizes, untracked, procs_lost, files_lost) = unsafe {
            (
                std::ptr::read_volatile(&bss.total),
                std::ptr::read_volatile(&bss.window_sizes),
                std::ptr::read_volatile(&bss.untracked_pages),
                std::ptr::read_volatile(&bss.uncounted_procs),
                std::ptr::read_volatile(&bss.uncounted_files),
            )
        };
        let resident = self.resident()?;
        let maps = &self.loaded.skel.maps;

        let mut ages: [LatencyHistogram; 2] = Default::default();
        for (use_, hist) in drain_array_generation(&maps.ages, gen, USES)? {
            self.first_uses += hist.count;
            ages[usize::from(use_ != 0)].merge(&hist);
        }

        let mut now_total = counts_of(&total);
        (now_total.resident_used, now_total.resident_unused) = resident.total;
        now_total.first_uses = self.first_uses;
        let interval: Counts = now_total.advance(&mut self.last_total);

        let mut window_sizes = [[0u64; 32]; KINDS];
        for k in 0..KINDS {
            for s in 0..32 {
                window_sizes[k][s] = sizes[k][s].wrapping_sub(self.last_sizes[k][s]);
            }
        }
        self.last_sizes = sizes;

        let mut processes = Vec::new();
        let mut gone = Vec::new();
        for (key, bytes) in hash_entries(&maps.procs)? {
            let tgid = u32::from_ne_bytes(key[..4].try_into()?);
            if !process_exists(tgid) {
                gone.push(key.clone());
            }
            let mut p = types::ra_proc::default();
            plain::copy_from_bytes(&mut p, &bytes)
                .map_err(|e| anyhow!("bad process value: {e:?}"))?;
            let mut now = counts_of(&p.counts);
            (now.resident_used, now.resident_unused) =
                resident.procs.get(&tgid).copied().unwrap_or_default();
            let delta = now.advance(self.last_procs.entry(tgid).or_default());
            if delta.active() {
                processes.push(ProcessRow {
                    pid: tgid,
                    comm: c_str(&p.comm),
                    counts: delta,
                });
            }
        }
        processes.sort_by(|a, b| {
            b.counts
                .rank()
                .cmp(&a.counts.rank())
                .then(a.pid.cmp(&b.pid))
        });
        processes.truncate(TOP_PROCESSES);

        let mut files = Vec::new();
        if let Some(top) = self.opts.per_file {
            let mounts = paths::Mounts::load();
            for (key, bytes) in hash_entries(&maps.files)? {
                let mut k = types::ra_file_key::default();
                plain::copy_from_bytes(&mut k, &key).map_err(|e| anyhow!("bad file key: {e:?}"))?;
                let mut f = types::ra_file::default();
                plain::copy_from_bytes(&mut f, &bytes)
                    .map_err(|e| anyhow!("bad file value: {e:?}"))?;
                let mut now = counts_of(&f.counts);
                (now.resident_used, now.resident_unused) = resident
                    .files
                    .get(&(k.dev, k.ino))
                    .copied()
                    .unwrap_or_default();
                let delta = now.advance(self.last_files.entry((k.dev, k.ino)).or_default());
                if delta.active() {
                    let names: Vec<String> = f.names.chunks(NAME_LEN).map(c_str).collect();
                    files.push(FileRow {
                        path: mounts.path(k.dev, &names),
                        dev: k.dev,
                        ino: k.ino,
                        counts: delta,
                    });
                }
            }
            files.sort_by(|a, b| {
                b.counts
                    .rank()
                    .cmp(&a.counts.rank())
                    .then(a.path.cmp(&b.path))
            });
            files.truncate(top);
        }

        let cgroups = match self.opts.per_cgroup {
            Some(_) => Some(self.cgroup_rows(&resident, &interval)?),
            None => None,
        };

        let now_losses = [
            kernel_losses[Loss::KERNEL
                .iter()
                .position(|&k| k == Loss::StartFull)
                .unwrap_or(1)],
            untracked,
            procs_lost,
            files_lost,
        ];
        let losses = std::array::from_fn(|i| now_losses[i].wrapping_sub(self.last_losses[i]));
        self.last_losses = now_losses;
        self.forget_processes(&gone);

        Ok(RastatReport {
            time: local_hms(),
            unit: self.opts.unit,
            page_size: self.page_size,
            total: interval,
            window_sizes,
            ages,
            processes,
            cgroups,
            files: self.opts.per_file.map(|_| files),
            losses,
        })
    }
}

impl Rastat {
    /// --per-cgroup: each cgroup's counts this interval, by path, and `other` for those of
    /// cgroups the map had no room for (the totals less the rows: nothing is lost).
    fn cgroup_rows(&mut self, resident: &Resident, total: &Counts) -> Result<Vec<CgroupRow>> {
        let names = self
            .cgroup_names
            .as_mut()
            .ok_or_else(|| anyhow!("internal: --per-cgroup without cgroup names"))?;
        let mut rows = Vec::new();
        for (key, bytes) in hash_entries(&self.loaded.skel.maps.cgroups)? {
            let id = u64::from_ne_bytes(key[..8].try_into()?);
            let mut c = types::ra_counts::default();
            plain::copy_from_bytes(&mut c, &bytes)
                .map_err(|e| anyhow!("bad cgroup value: {e:?}"))?;
            let mut now = counts_of(&c);
            (now.resident_used, now.resident_unused) =
                resident.cgroups.get(&id).copied().unwrap_or_default();
            let delta = now.advance(self.last_cgroups.entry(id).or_default());
            if delta.active() {
                rows.push(CgroupRow {
                    cgroup: names.name(id),
                    counts: delta,
                });
            }
        }
        let mut other = *total;
        for r in &rows {
            other = other.less(&r.counts);
        }
        if other.active() {
            rows.push(CgroupRow {
                cgroup: OTHER.to_string(),
                counts: other,
            });
        }
        rows.sort_by(|a, b| a.cgroup.cmp(&b.cgroup));
        Ok(rows)
    }
}
