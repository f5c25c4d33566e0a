//! Glue between libbpf-rs objects and the rest of `common`: logging, double-buffered histogram
//! maps and drop counters.

use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, PrintLevel};

use crate::common::hist::{LatencyHistogram, RawHist};

fn print_to_stderr(level: PrintLevel, msg: String) {
    eprint!("{level:?}: {msg}");
}

/// libbpf's own messages: silent by default (failures become our one-line errors), everything
/// with `-v`.
pub fn init_libbpf_logging(verbose: bool) {
    if verbose {
        libbpf_rs::set_print(Some((PrintLevel::Debug, print_to_stderr)));
    } else {
        libbpf_rs::set_print(None);
    }
}

/// Silences libbpf until dropped (trial loads are expected to fail on some kernels).
pub struct QuietLibbpf(Option<(PrintLevel, libbpf_rs::PrintCallback)>);

pub fn quiet_libbpf() -> QuietLibbpf {
    QuietLibbpf(libbpf_rs::set_print(None))
}

impl Drop for QuietLibbpf {
    fn drop(&mut self) {
        libbpf_rs::set_print(self.0.take());
    }
}

/// The writer side of a double-buffered histogram map (see `src/bpf/hist.bpf.h`): every key
/// starts with a `__u32 gen`, and programs write into generation `hist_gen & 1`.
pub struct HistogramDrain {
    generation: u32,
}

/// How long in-flight programs get to finish writing into the generation we are about to read.
/// BPF programs run for microseconds; this only matters for one preempted mid-update.
const SETTLE: Duration = Duration::from_millis(10);

impl HistogramDrain {
    pub fn new() -> HistogramDrain {
        HistogramDrain { generation: 0 }
    }

    /// Switches writers to the other generation (through `hist_gen`, a pointer into the
    /// object's mmap-ed .bss), then reads and deletes every key of the old one.
    pub fn swap_and_drain<M: MapCore>(
        &mut self,
        hist_gen: &mut u32,
        map: &M,
    ) -> Result<Vec<(Vec<u8>, LatencyHistogram)>> {
        let old = self.swap(hist_gen);
        drain_generation(map, old)
    }

    /// The same for a per-CPU array of `2 * slots` histograms indexed `gen * slots + slot`
    /// (cheaper in the kernel than a hash when the keys are small numbers). Returns
    /// `(slot, histogram)` for every slot that saw events.
    pub fn swap_and_drain_array<M: MapCore>(
        &mut self,
        hist_gen: &mut u32,
        map: &M,
        slots: u32,
    ) -> Result<Vec<(u32, LatencyHistogram)>> {
        let old = self.swap(hist_gen);
        drain_array_generation(map, old, slots)
    }

    /// Flips writers to the other generation and returns the one to drain.
    fn swap(&mut self, hist_gen: &mut u32) -> u32 {
        let old = self.generation;
        self.generation = self.generation.wrapping_add(1);
        // SAFETY: hist_gen points into the live .bss mapping; volatile so the store happens now.
        unsafe { std::ptr::write_volatile(hist_gen, self.generation) };
        thread::sleep(SETTLE);
        old & 1
    }
}

/// Sums one per-CPU histogram value over CPUs.
fn sum_per_cpu(per_cpu: &[Vec<u8>]) -> Result<LatencyHistogram> {
    let mut hist = LatencyHistogram::default();
    let mut raw = RawHist::zeroed();
    for bytes in per_cpu {
        plain::copy_from_bytes(&mut raw, bytes)
            .map_err(|e| anyhow::anyhow!("histogram value has the wrong size: {e:?}"))?;
        hist.add_raw(&raw);
    }
    Ok(hist)
}

/// Reads, sums over CPUs and zeroes the histograms `gen * slots .. (gen + 1) * slots` of a
/// per-CPU array.
pub fn drain_array_generation<M: MapCore>(
    map: &M,
    gen: u32,
    slots: u32,
) -> Result<Vec<(u32, LatencyHistogram)>> {
    let zero = vec![vec![0u8; std::mem::size_of::<RawHist>()]; libbpf_rs::num_possible_cpus()?];
    let mut out = Vec::new();
    for slot in 0..slots {
        let key = (gen * slots + slot).to_ne_bytes();
        let Some(per_cpu) = map
            .lookup_percpu(&key, MapFlags::ANY)
            .context("reading a histogram")?
        else {
            continue;
        };
        let hist = sum_per_cpu(&per_cpu)?;
        if hist.count > 0 {
            map.update_percpu(&key, &zero, MapFlags::ANY)
                .context("clearing a histogram")?;
            out.push((slot, hist));
        }
    }
    Ok(out)
}

impl Default for HistogramDrain {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads, sums over CPUs and deletes every histogram of one generation.
pub fn drain_generation<M: MapCore>(map: &M, gen: u32) -> Result<Vec<(Vec<u8>, LatencyHistogram)>> {
    let keys: Vec<Vec<u8>> = map
        .keys()
        .filter(|k| k.len() >= 4 && u32::from_ne_bytes([k[0], k[1], k[2], k[3]]) & 1 == gen)
        .collect();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let per_cpu = map
            .lookup_percpu(&key, MapFlags::ANY)
            .context("reading a histogram")?;
        map.delete(&key).context("clearing a histogram")?;
        if let Some(per_cpu) = per_cpu {
            let hist = sum_per_cpu(&per_cpu)?;
            if hist.count > 0 {
                out.push((key, hist));
            }
        }
    }
    Ok(out)
}

/// A per-CPU hash of `__u32` keys and `__u64` counters, summed over CPUs (e.g. `io_seen`).
pub fn per_cpu_counts<M: MapCore>(map: &M) -> Result<std::collections::HashMap<u32, u64>> {
    let mut out = std::collections::HashMap::new();
    for key in map.keys() {
        let Some(per_cpu) = map
            .lookup_percpu(&key, MapFlags::ANY)
            .context("reading a per-CPU counter")?
        else {
            continue;
        };
        let k = u32::from_ne_bytes(
            key[..4]
                .try_into()
                .context("a counter key is not 4 bytes")?,
        );
        let sum = per_cpu
            .iter()
            .filter_map(|v| v.get(..8).and_then(|b| b.try_into().ok()))
            .map(u64::from_ne_bytes)
            .sum();
        out.insert(k, sum);
    }
    Ok(out)
}

/// Names of the `enum drop_reason` counters in `src/bpf/hist.h`, in order.
pub const DROP_NAMES: [&str; 4] = ["no_start", "hist_full", "clock", "start_full"];

/// What `n` of a drop counter mean, for the text report ("1 completion ...", "2 completions ...").
pub fn describe_drop(name: &str, n: u64) -> String {
    let (one, many, rest) = match name {
        "no_start" => (
            "completion",
            "completions",
            "without a recorded start (in flight when tracing began, or evicted)",
        ),
        "hist_full" => ("event", "events", "lost because the histogram map was full"),
        "clock" => ("event", "events", "with start time after end time"),
        "start_full" => ("start", "starts", "that could not be stored"),
        _ => ("other drop", "other drops", ""),
    };
    let noun = if n == 1 { one } else { many };
    format!("{n} {noun} {rest}").trim_end().to_string()
}

/// Turns the cumulative `drops[]` of .bss into per-report deltas.
#[derive(Default)]
pub struct DropCounter {
    last: [u64; 4],
}

impl DropCounter {
    pub fn delta(&mut self, now: &[u64; 4]) -> Vec<(&'static str, u64)> {
        let d = DROP_NAMES
            .iter()
            .enumerate()
            .map(|(i, name)| (*name, now[i].wrapping_sub(self.last[i])))
            .collect();
        self.last = *now;
        d
    }
}

/// Opens a skeleton, lets the tool set its rodata, enables exactly the planned programs, loads
/// and attaches. Returns the skeleton and the links of manually attached programs.
pub fn load_planned<'obj, B>(
    builder: B,
    storage: &'obj mut std::mem::MaybeUninit<libbpf_rs::OpenObject>,
    plan: &crate::common::probe::AttachPlan,
    configure: impl FnOnce(&mut B::Output) -> Result<()>,
) -> Result<(
    <B::Output as libbpf_rs::skel::OpenSkel<'obj>>::Output,
    Vec<libbpf_rs::Link>,
)>
where
    B: libbpf_rs::skel::SkelBuilder<'obj>,
{
    use libbpf_rs::skel::{OpenSkel as _, Skel as _};

    let mut open = builder.open(storage).context("opening the BPF object")?;
    configure(&mut open)?;
    plan.apply(open.open_object_mut())?;
    let mut skel = open.load().map_err(|e| load_advice(plan, e))?;
    skel.attach().map_err(|e| {
        anyhow::anyhow!(
            "attaching {}'s programs failed ({e}); try --explain",
            plan.tool
        )
    })?;
    let links = plan.attach_manual(skel.object())?;
    Ok((skel, links))
}

fn load_advice(plan: &crate::common::probe::AttachPlan, err: libbpf_rs::Error) -> anyhow::Error {
    let hint = match err.kind() {
        // As root, EACCES/EPERM at load is the verifier (or lockdown), not a missing privilege.
        libbpf_rs::ErrorKind::PermissionDenied if nix::unistd::geteuid().is_root() => {
            "the kernel's verifier rejected a program: run with -v to see its log, and please report it as a bug"
        }
        libbpf_rs::ErrorKind::PermissionDenied => {
            "the kernel refused the BPF programs: run as root, and check kernel.unprivileged_bpf_disabled and lockdown"
        }
        _ => "run with -v to see the verifier's log, and --explain for the chosen hooks",
    };
    anyhow::anyhow!(
        "loading {}'s BPF programs failed ({err}): {hint}",
        plan.tool
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_notes_agree_with_their_count() {
        assert_eq!(
            describe_drop("no_start", 1),
            "1 completion without a recorded start (in flight when tracing began, or evicted)"
        );
        assert_eq!(
            describe_drop("start_full", 3),
            "3 starts that could not be stored"
        );
        for name in DROP_NAMES {
            assert!(!describe_drop(name, 2).contains("other"), "{name}");
        }
    }
}
