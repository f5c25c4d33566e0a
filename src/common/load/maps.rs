//! Reading what the programs gathered: double-buffered histogram maps (see
//! `src/bpf/lib/hist.bpf.h`) and per-CPU counters.

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use crate::common::losses::{read_kernel_losses, Loss, LossTally};
use crate::common::report::hist::{LatencyHistogram, RawHist};

/// What a histogram tool keeps between reports: the generation of its histogram map to drain
/// next, and the kernel's loss counters as last reported.
#[derive(Default)]
pub struct HistogramCollector {
    drain: HistogramDrain,
    losses: LossTally,
}

impl HistogramCollector {
    /// Flips writers to the other generation of a hash map keyed `{gen, ...}` and drains the old.
    pub fn drain<M: MapCore>(
        &mut self,
        hist_gen: &mut u32,
        map: &M,
    ) -> Result<Vec<(Vec<u8>, LatencyHistogram)>> {
        self.drain.swap_and_drain(hist_gen, map)
    }

    /// The same for a per-CPU array of `2 * slots` histograms.
    pub fn drain_array<M: MapCore>(
        &mut self,
        hist_gen: &mut u32,
        map: &M,
        slots: u32,
    ) -> Result<Vec<(u32, LatencyHistogram)>> {
        self.drain.swap_and_drain_array(hist_gen, map, slots)
    }

    /// Flips writers to the other generation and returns the one to drain, for a tool that
    /// drains several maps of one generation (`drain_percpu_array`, `drain_percpu_hash`,
    /// `drain_generation`).
    pub fn flip(&mut self, hist_gen: &mut u32) -> u32 {
        self.drain.swap(hist_gen)
    }

    /// New losses of `kinds` since the last report, from the object's `.bss` `losses[]`.
    pub fn losses(
        &mut self,
        losses: &[u64; Loss::KERNEL.len()],
        kinds: &[Loss],
    ) -> Vec<(Loss, u64)> {
        self.losses.delta(&read_kernel_losses(losses), kinds)
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

/// Sums one per-CPU value over CPUs with `add`.
fn sum_per_cpu<V: plain::Plain + Copy>(
    per_cpu: &[Vec<u8>],
    mut sum: V,
    add: &impl Fn(&mut V, &V),
) -> Result<V> {
    let mut one = sum;
    for bytes in per_cpu {
        plain::copy_from_bytes(&mut one, bytes)
            .map_err(|e| anyhow::anyhow!("a per-CPU value has the wrong size: {e:?}"))?;
        add(&mut sum, &one);
    }
    Ok(sum)
}

/// Reads, sums over CPUs (with `add`, from `zero`) and zeroes the entries
/// `gen * n .. (gen + 1) * n` of a per-CPU array; returns `(index - gen * n, sum)` for those
/// `keep` accepts.
pub fn drain_percpu_array<M: MapCore, V: plain::Plain + Copy>(
    map: &M,
    gen: u32,
    n: u32,
    zero: V,
    add: impl Fn(&mut V, &V),
    keep: impl Fn(&V) -> bool,
) -> Result<Vec<(u32, V)>> {
    let cleared = vec![vec![0u8; std::mem::size_of::<V>()]; libbpf_rs::num_possible_cpus()?];
    let mut out = Vec::new();
    for i in 0..n {
        let key = (gen * n + i).to_ne_bytes();
        let Some(per_cpu) = map
            .lookup_percpu(&key, MapFlags::ANY)
            .context("reading a per-CPU array")?
        else {
            continue;
        };
        let sum = sum_per_cpu(&per_cpu, zero, &add)?;
        if keep(&sum) {
            map.update_percpu(&key, &cleared, MapFlags::ANY)
                .context("clearing a per-CPU array entry")?;
            out.push((i, sum));
        }
    }
    Ok(out)
}

/// Reads, sums over CPUs and deletes every entry of one generation of a per-CPU hash whose keys
/// start with a `__u32 gen`.
pub fn drain_percpu_hash<M: MapCore, V: plain::Plain + Copy>(
    map: &M,
    gen: u32,
    zero: V,
    add: impl Fn(&mut V, &V),
) -> Result<Vec<(Vec<u8>, V)>> {
    let keys: Vec<Vec<u8>> = map
        .keys()
        .filter(|k| k.len() >= 4 && u32::from_ne_bytes([k[0], k[1], k[2], k[3]]) & 1 == gen)
        .collect();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let per_cpu = map
            .lookup_percpu(&key, MapFlags::ANY)
            .context("reading a per-CPU hash")?;
        map.delete(&key).context("clearing a per-CPU hash")?;
        if let Some(per_cpu) = per_cpu {
            out.push((key, sum_per_cpu(&per_cpu, zero, &add)?));
        }
    }
    Ok(out)
}

/// Reads, sums over CPUs and zeroes the histograms `gen * slots .. (gen + 1) * slots` of a
/// per-CPU array.
pub fn drain_array_generation<M: MapCore>(
    map: &M,
    gen: u32,
    slots: u32,
) -> Result<Vec<(u32, LatencyHistogram)>> {
    let drained = drain_percpu_array(map, gen, slots, RawHist::zeroed(), add_raw, |h| h.count > 0)?;
    Ok(drained
        .into_iter()
        .map(|(i, raw)| (i, raw.into()))
        .collect())
}

fn add_raw(sum: &mut RawHist, one: &RawHist) {
    sum.add(one);
}

impl Default for HistogramDrain {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads, sums over CPUs and deletes every histogram of one generation.
pub fn drain_generation<M: MapCore>(map: &M, gen: u32) -> Result<Vec<(Vec<u8>, LatencyHistogram)>> {
    let drained = drain_percpu_hash(map, gen, RawHist::zeroed(), add_raw)?;
    Ok(drained
        .into_iter()
        .map(|(k, raw)| (k, LatencyHistogram::from(raw)))
        .filter(|(_, h)| h.count > 0)
        .collect())
}

/// Every entry of a hash map (not per-CPU), read `batch` at a time (one system call each) and
/// handed to `f` as key and value bytes, in the kernel's bucket order; `f` may delete what it
/// was handed (the walk's cursor is a bucket index, already past it). libbpf-rs's
/// `lookup_batch` iterator ends at the first batch shorter than asked for, and the kernel
/// returns one wherever the next bucket does not fit in what is left of it, not only at the end
/// of the map: rastat's walk of its chunks read the first thousand or so and no more. The walk
/// here ends when the kernel says the map has no more (ENOENT).
pub fn for_each_hash_entry<M: MapCore>(
    map: &M,
    batch: u32,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    use std::os::fd::AsRawFd;
    let (key_size, value_size) = (map.key_size() as usize, map.value_size() as usize);
    let mut batch = batch.max(1);
    let mut keys = vec![0u8; key_size * batch as usize];
    let mut values = vec![0u8; value_size * batch as usize];
    // The kernel's cursor for a hash map: a u32 bucket index.
    let (mut cursor, mut next) = (0u64, 0u64);
    let mut started = false;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        elem_flags: 0,
        flags: 0,
    };
    loop {
        let mut count = batch;
        let in_batch: *mut u64 = if started {
            &mut cursor
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: the buffers hold `batch` keys and values of the map's sizes, and the cursors
        // 8 bytes, more than the kernel's 4.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                in_batch.cast(),
                (&mut next as *mut u64).cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let last = match -ret {
            0 => false,
            libc::ENOENT => true,
            libc::EINTR => continue,
            // A bucket with more entries than a batch holds: a larger batch.
            libc::ENOSPC if count == 0 => {
                batch *= 2;
                keys.resize(key_size * batch as usize, 0);
                values.resize(value_size * batch as usize, 0);
                continue;
            }
            e => {
                return Err(std::io::Error::from_raw_os_error(e)).with_context(|| {
                    format!(
                        "reading the map {} in batches",
                        map.name().to_string_lossy()
                    )
                })
            }
        };
        for i in 0..count as usize {
            f(
                &keys[i * key_size..(i + 1) * key_size],
                &values[i * value_size..(i + 1) * value_size],
            )?;
        }
        if last {
            return Ok(());
        }
        cursor = next;
        started = true;
    }
}

/// Every entry of a hash map (not per-CPU), as owned key and value bytes (see
/// `for_each_hash_entry`).
pub fn hash_entries<M: MapCore>(map: &M) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for_each_hash_entry(map, 1024, |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        Ok(())
    })?;
    Ok(out)
}

/// A per-CPU hash of `__u32` keys and `__u64` counters, summed over CPUs (e.g. `io_seen`).
pub fn per_cpu_counts<M: MapCore>(map: &M) -> Result<HashMap<u32, u64>> {
    let mut out = HashMap::new();
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
