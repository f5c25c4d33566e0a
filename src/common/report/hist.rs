//! Latency histograms: the user-space half of `src/bpf/hist.h`.
//!
//! The kernel keeps two views of every latency: log2 slots in the display unit (printed in bcc's
//! `print_log2_hist` shape) and log-linear nanosecond buckets (8 per power of two) from which
//! percentiles are read with at most 12.5% relative error.

use serde::Serialize;

/// Must match `HIST_LOG2_SLOTS` in `src/bpf/hist.h`.
pub const LOG2_SLOTS: usize = 32;
/// Must match `HIST_SUB_BITS` in `src/bpf/hist.h`.
pub const SUB_BITS: u32 = 3;
/// Must match `HIST_FINE_BUCKETS` in `src/bpf/hist.h`.
pub const FINE_BUCKETS: usize = 320;

/// `struct hist` exactly as the BPF side lays it out (one per CPU in per-CPU maps).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawHist {
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
    pub slots: [u64; LOG2_SLOTS],
    pub fine: [u64; FINE_BUCKETS],
}

// SAFETY: plain old data made only of u64s; any bit pattern is valid.
unsafe impl plain::Plain for RawHist {}

impl RawHist {
    /// Adds another CPU's (or key's) counters.
    pub fn add(&mut self, other: &RawHist) {
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        for (a, b) in self.slots.iter_mut().zip(other.slots.iter()) {
            *a += b;
        }
        for (a, b) in self.fine.iter_mut().zip(other.fine.iter()) {
            *a += b;
        }
    }

    pub fn zeroed() -> RawHist {
        RawHist {
            count: 0,
            sum_ns: 0,
            max_ns: 0,
            slots: [0; LOG2_SLOTS],
            fine: [0; FINE_BUCKETS],
        }
    }
}

/// Display unit of the log2 slots (`-m` selects milliseconds, as in bcc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    #[default]
    Usecs,
    Msecs,
}

impl Unit {
    pub fn from_millis_flag(millis: bool) -> Unit {
        if millis {
            Unit::Msecs
        } else {
            Unit::Usecs
        }
    }
    /// floor(log2(ns())): the BPF side's `unit_lg`, so that it need not compute it per event.
    pub fn lg(self) -> u32 {
        63 - self.ns().leading_zeros()
    }
    pub fn ns(self) -> u64 {
        match self {
            Unit::Usecs => 1_000,
            Unit::Msecs => 1_000_000,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Unit::Usecs => "usecs",
            Unit::Msecs => "msecs",
        }
    }
    /// For column headers: `us`, `ms`.
    pub fn short_name(self) -> &'static str {
        match self {
            Unit::Usecs => "us",
            Unit::Msecs => "ms",
        }
    }
}

/// `[low, high)` in nanoseconds of log-linear bucket `idx`; mirrors `fine_bucket()` in
/// `src/bpf/hist.bpf.h`.
pub fn fine_bucket_bounds(idx: usize) -> (u64, u64) {
    let sub = 1u64 << SUB_BITS;
    let idx = idx as u64;
    if idx < sub {
        return (idx, idx + 1);
    }
    let group = idx >> SUB_BITS; // >= 1
    let offset = idx & (sub - 1);
    let width = 1u64 << (group - 1);
    let low = (sub + offset) << (group - 1);
    (low, low.saturating_add(width))
}

/// The bucket index a value falls in (the same function as the BPF side, for tests).
pub fn fine_bucket(v: u64) -> usize {
    let sub = 1u64 << SUB_BITS;
    if v < sub {
        return v as usize;
    }
    let h = 63 - v.leading_zeros() as u64;
    let idx = ((h - SUB_BITS as u64 + 1) << SUB_BITS) + ((v >> (h - SUB_BITS as u64)) & (sub - 1));
    (idx as usize).min(FINE_BUCKETS - 1)
}

/// One latency distribution, summed over CPUs.
#[derive(Clone)]
pub struct LatencyHistogram {
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
    pub slots: [u64; LOG2_SLOTS],
    pub fine: [u64; FINE_BUCKETS],
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            count: 0,
            sum_ns: 0,
            max_ns: 0,
            slots: [0; LOG2_SLOTS],
            fine: [0; FINE_BUCKETS],
        }
    }
}

/// Count, mean, percentiles and maximum of one histogram, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub sum_ns: u64,
    pub avg_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: u64,
}

impl From<RawHist> for LatencyHistogram {
    fn from(raw: RawHist) -> LatencyHistogram {
        LatencyHistogram {
            count: raw.count,
            sum_ns: raw.sum_ns,
            max_ns: raw.max_ns,
            slots: raw.slots,
            fine: raw.fine,
        }
    }
}

impl LatencyHistogram {
    /// Adds one CPU's (or one key's) raw counters.
    pub fn add_raw(&mut self, raw: &RawHist) {
        self.count += raw.count;
        self.sum_ns += raw.sum_ns;
        self.max_ns = self.max_ns.max(raw.max_ns);
        for (a, b) in self.slots.iter_mut().zip(raw.slots.iter()) {
            *a += b;
        }
        for (a, b) in self.fine.iter_mut().zip(raw.fine.iter()) {
            *a += b;
        }
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        for (a, b) in self.slots.iter_mut().zip(other.slots.iter()) {
            *a += b;
        }
        for (a, b) in self.fine.iter_mut().zip(other.fine.iter()) {
            *a += b;
        }
    }

    /// Takes out what `other` holds, counted here too (an operation's calls less its cgroups'
    /// rows): what is left is exact but for the maximum, which stays an upper bound.
    pub fn remove(&mut self, other: &LatencyHistogram) {
        self.count = self.count.saturating_sub(other.count);
        self.sum_ns = self.sum_ns.saturating_sub(other.sum_ns);
        for (a, b) in self.slots.iter_mut().zip(other.slots.iter()) {
            *a = a.saturating_sub(*b);
        }
        for (a, b) in self.fine.iter_mut().zip(other.fine.iter()) {
            *a = a.saturating_sub(*b);
        }
    }

    /// Records one value in user space (tests and synthetic data); the kernel does the same.
    pub fn record(&mut self, ns: u64, unit: Unit) {
        let slot = (63u32.saturating_sub((ns / unit.ns()).max(1).leading_zeros())) as usize;
        self.slots[slot.min(LOG2_SLOTS - 1)] += 1;
        self.fine[fine_bucket(ns)] += 1;
        self.count += 1;
        self.sum_ns += ns;
        self.max_ns = self.max_ns.max(ns);
    }

    /// The value below which a fraction `q` (0..=1) of samples fall: the midpoint of the
    /// log-linear bucket holding that rank, capped at the observed maximum.
    pub fn percentile_ns(&self, q: f64) -> f64 {
        let total: u64 = self.fine.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (idx, &n) in self.fine.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, high) = fine_bucket_bounds(idx);
                let mid = (low as f64 + high as f64) / 2.0;
                let mid = if high - low == 1 { low as f64 } else { mid };
                return mid.min(self.max_ns as f64).max(low as f64);
            }
        }
        self.max_ns as f64
    }

    pub fn summary(&self) -> Summary {
        let avg = if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        };
        Summary {
            count: self.count,
            sum_ns: self.sum_ns,
            avg_ns: avg,
            p50_ns: self.percentile_ns(0.50),
            p90_ns: self.percentile_ns(0.90),
            p99_ns: self.percentile_ns(0.99),
            p999_ns: self.percentile_ns(0.999),
            max_ns: self.max_ns,
        }
    }

    /// The log2 slots in bcc's text shape: `low -> high : count |stars|`, cut after the
    /// highest non-empty slot; prints nothing for an empty histogram.
    pub fn format_log2(&self, unit: Unit) -> String {
        format_log2_slots(&self.slots, unit.name())
    }

    /// The summary line printed under each histogram.
    pub fn format_summary(&self, unit: Unit) -> String {
        let s = self.summary();
        let u = unit.ns() as f64;
        format!(
            "count {}, total {}, avg {}, p50 {}, p90 {}, p99 {}, p99.9 {}, max {} ({})",
            s.count,
            fmt_value(s.sum_ns as f64 / u),
            fmt_value(s.avg_ns / u),
            fmt_value(s.p50_ns / u),
            fmt_value(s.p90_ns / u),
            fmt_value(s.p99_ns / u),
            fmt_value(s.p999_ns / u),
            fmt_value(s.max_ns as f64 / u),
            unit.name()
        )
    }

    /// log2 slots as JSON objects `{low, high, count}` up to the highest non-empty one.
    pub fn log2_json(&self) -> Vec<Log2Slot> {
        let last = self.slots.iter().rposition(|&n| n > 0);
        match last {
            None => Vec::new(),
            Some(last) => (0..=last)
                .map(|i| {
                    let (low, high) = slot_bounds(i);
                    Log2Slot {
                        low,
                        high,
                        count: self.slots[i],
                    }
                })
                .collect(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Log2Slot {
    pub low: u64,
    pub high: u64,
    pub count: u64,
}

/// Inclusive bounds of log2 slot `i` as bcc prints them: 0 -> 1, 2 -> 3, 4 -> 7, ...
fn slot_bounds(i: usize) -> (u64, u64) {
    let high = (1u64 << (i + 1)) - 1;
    let low = if i == 0 { 0 } else { 1u64 << i };
    (low, high)
}

pub fn fmt_value(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

pub fn format_log2_slots(slots: &[u64], unit_name: &str) -> String {
    let Some(idx_max) = slots.iter().rposition(|&n| n > 0) else {
        return String::new();
    };
    let val_max = slots.iter().copied().max().unwrap_or(0);
    let narrow = idx_max <= 32;
    let (pad, name_width, width, stars) = if narrow {
        (5, 19, 10, 40)
    } else {
        (15, 29, 20, 20)
    };
    let mut out = format!(
        "{:pad$}{:<name_width$} : count    distribution\n",
        "", unit_name
    );
    for (i, &val) in slots.iter().enumerate().take(idx_max + 1) {
        let (low, high) = slot_bounds(i);
        let n_stars = (val.min(val_max) * stars as u64)
            .checked_div(val_max)
            .unwrap_or(0) as usize;
        out.push_str(&format!(
            "{low:>width$} -> {high:<width$} : {val:<8} |{}{}|\n",
            "*".repeat(n_stars),
            " ".repeat(stars - n_stars)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_lg_is_the_floor_of_log2() {
        for unit in [Unit::Usecs, Unit::Msecs] {
            let lg = unit.lg();
            assert!(1u64 << lg <= unit.ns() && unit.ns() < 1u64 << (lg + 1));
        }
        assert_eq!((Unit::Usecs.lg(), Unit::Msecs.lg()), (9, 19));
    }

    #[test]
    fn fine_buckets_are_contiguous_and_bounded() {
        let mut prev_high = 0;
        for idx in 0..FINE_BUCKETS {
            let (low, high) = fine_bucket_bounds(idx);
            assert_eq!(
                low,
                prev_high,
                "bucket {idx} starts where {} ended",
                idx.saturating_sub(1)
            );
            assert!(high > low);
            // relative width is at most 1/8 of the lower bound (12.5%)
            if low >= 8 {
                assert!(
                    (high - low) * 8 <= low,
                    "bucket {idx} [{low},{high}) too wide"
                );
            }
            assert_eq!(fine_bucket(low), idx);
            assert_eq!(fine_bucket(high - 1), idx);
            prev_high = high;
        }
    }

    #[test]
    fn fine_bucket_known_values() {
        assert_eq!(fine_bucket(0), 0);
        assert_eq!(fine_bucket(7), 7);
        assert_eq!(fine_bucket(8), 8);
        assert_eq!(fine_bucket(15), 15);
        assert_eq!(fine_bucket(16), 16);
        assert_eq!(fine_bucket(17), 16);
        assert_eq!(fine_bucket(18), 17);
        assert_eq!(fine_bucket(u64::MAX), FINE_BUCKETS - 1);
    }

    #[test]
    fn log2_slot_boundaries_match_bcc() {
        let mut h = LatencyHistogram::default();
        for us in [0u64, 1, 2, 3, 4, 7, 8, 1023, 1024] {
            h.record(us * 1000, Unit::Usecs);
        }
        // 0,1 -> slot 0; 2,3 -> 1; 4,7 -> 2; 8 -> 3; 1023 -> 9; 1024 -> 10
        assert_eq!(h.slots[0], 2);
        assert_eq!(h.slots[1], 2);
        assert_eq!(h.slots[2], 2);
        assert_eq!(h.slots[3], 1);
        assert_eq!(h.slots[9], 1);
        assert_eq!(h.slots[10], 1);
    }

    fn check_percentiles(values: &mut [u64]) {
        let mut h = LatencyHistogram::default();
        for &v in values.iter() {
            h.record(v, Unit::Usecs);
        }
        values.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
            let exact = values[rank - 1] as f64;
            let got = h.percentile_ns(q);
            let err = (got - exact).abs() / exact;
            assert!(
                err <= 0.125,
                "q={q}: got {got}, exact {exact}, error {err:.3}"
            );
        }
    }

    #[test]
    fn percentile_error_bound_uniform() {
        let mut v: Vec<u64> = (1..=100_000u64).map(|i| 1_000 + i * 97).collect();
        check_percentiles(&mut v);
    }

    #[test]
    fn percentile_error_bound_exponential() {
        // deterministic pseudo-random exponential-ish spread over 6 decades
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut v: Vec<u64> = (0..50_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let e = (x % 20) as u32; // 2^0 .. 2^19 times a mantissa
                (1u64 << e) * 1000 + (x >> 40) % 1000
            })
            .collect();
        check_percentiles(&mut v);
    }

    #[test]
    fn percentile_constant_is_exact_enough() {
        let mut v = vec![20_000_000u64; 1000];
        check_percentiles(&mut v);
        // a bucket midpoint is within half a bucket (6.25%) of any value in it
        let mut h = LatencyHistogram::default();
        h.record(20_000_000, Unit::Msecs);
        let p50 = h.percentile_ns(0.5);
        assert!((p50 - 20e6).abs() / 20e6 <= 0.0625, "p50 {p50}");
        // a single value in a 1-ns-wide bucket is exact
        let mut h = LatencyHistogram::default();
        h.record(5, Unit::Usecs);
        assert_eq!(h.percentile_ns(0.5), 5.0);
    }

    #[test]
    fn text_shape_is_bccs() {
        let mut h = LatencyHistogram::default();
        for _ in 0..3 {
            h.record(2_500, Unit::Usecs);
        }
        h.record(40_000, Unit::Usecs);
        let golden = "     usecs               : count    distribution\n\
\x20        0 -> 1          : 0        |                                        |\n\
\x20        2 -> 3          : 3        |****************************************|\n\
\x20        4 -> 7          : 0        |                                        |\n\
\x20        8 -> 15         : 0        |                                        |\n\
\x20       16 -> 31         : 0        |                                        |\n\
\x20       32 -> 63         : 1        |*************                           |\n";
        assert_eq!(h.format_log2(Unit::Usecs), golden);
        assert_eq!(
            h.format_summary(Unit::Usecs),
            "count 4, total 47.5, avg 11.9, p50 2.43, p90 38.9, p99 38.9, p99.9 38.9, max 40.0 (usecs)"
        );
    }

    #[test]
    fn empty_histogram_prints_nothing() {
        assert_eq!(LatencyHistogram::default().format_log2(Unit::Usecs), "");
    }
}
