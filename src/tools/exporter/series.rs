//! What the exporter keeps between scrapes: every series' histogram since the start, the losses
//! and which layers are up. The collector thread adds each interval's drained histograms in
//! (`Metrics::add`); a scrape encodes a copy (`encode`), so neither waits on the kernel and two
//! scrapers between two intervals see the same numbers.

use std::collections::BTreeMap;

use crate::common::report::hist::{LatencyHistogram, Unit, LOG2_SLOTS};

/// A series' labels, in the family's order (`disk`, `op`...).
pub type Labels = Vec<(&'static str, String)>;

/// A latency histogram since the exporter started: the kernel's log2 slots of `unit`, and the
/// sum of the latencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CumulativeHistogram {
    pub slots: [u64; LOG2_SLOTS],
    pub sum_ns: u64,
}

impl Default for CumulativeHistogram {
    fn default() -> Self {
        CumulativeHistogram {
            slots: [0; LOG2_SLOTS],
            sum_ns: 0,
        }
    }
}

impl CumulativeHistogram {
    pub fn add(&mut self, h: &LatencyHistogram) {
        for (sum, n) in self.slots.iter_mut().zip(h.slots) {
            *sum += n;
        }
        self.sum_ns += h.sum_ns;
    }

    /// `_count`: what the buckets hold, so that it always equals the `+Inf` bucket.
    pub fn count(&self) -> u64 {
        self.slots.iter().sum()
    }

    /// `_sum`, in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns as f64 / 1e9
    }

    /// The buckets as prometheus-client takes them: (upper bound in seconds, count in that
    /// bucket alone; the encoder makes them cumulative). Slot k holds latencies in
    /// [2^k, 2^(k+1)) units (slot 0 everything below 2 units), so its `le` is 2^(k+1) units:
    /// no latency is counted under a bound below it (ebpf_exporter's issue #488 was the
    /// floor). The kernel puts anything longer than the last slot in it: that one is `+Inf`.
    pub fn buckets(&self, unit: Unit) -> Vec<(f64, u64)> {
        self.slots
            .iter()
            .enumerate()
            .map(|(k, &n)| match k {
                k if k == LOG2_SLOTS - 1 => (f64::INFINITY, n),
                // Integer ns over 1e9: the double nearest the decimal bound (0.000128, not
                // 0.00012799999999999998), so `le` reads as written.
                k => (((1u64 << (k + 1)) * unit.ns()) as f64 / 1e9, n),
            })
            .collect()
    }
}

/// One histogram metric and its series.
#[derive(Clone, Debug)]
pub struct HistogramFamily {
    /// `iostack_block_latency_seconds`.
    pub name: &'static str,
    pub help: &'static str,
    /// The unit of the kernel's slots.
    pub unit: Unit,
    pub series: BTreeMap<Labels, CumulativeHistogram>,
}

impl HistogramFamily {
    pub fn new(name: &'static str, help: &'static str, unit: Unit) -> HistogramFamily {
        HistogramFamily {
            name,
            help,
            unit,
            series: BTreeMap::new(),
        }
    }

    pub fn add(&mut self, labels: Labels, h: &LatencyHistogram) {
        self.series.entry(labels).or_default().add(h);
    }

    /// Drops the series whose `label` no longer names something that exists (a removed disk):
    /// their last values stay in Prometheus, and they stop.
    pub fn retain_label(&mut self, label: &str, exists: impl Fn(&str) -> bool) {
        self.series
            .retain(|labels, _| labels.iter().all(|(k, v)| *k != label || exists(v)));
    }
}

/// What a counter's integer is: nanoseconds, shown in seconds, or a count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterUnit {
    Nanoseconds,
    Count,
}

/// One counter metric and its series, since the exporter started.
#[derive(Clone, Debug)]
pub struct CounterFamily {
    /// Without `_total`, which the encoder adds: `iostack_call_seconds`.
    pub name: &'static str,
    pub help: &'static str,
    pub unit: CounterUnit,
    pub series: BTreeMap<Labels, u64>,
}

impl CounterFamily {
    pub fn add(&mut self, labels: Labels, n: u64) {
        *self.series.entry(labels).or_default() += n;
    }

    /// A series' value as exported: seconds for nanoseconds (exact to the nanosecond below
    /// 2^53 ns, 104 days of one series' time), else the count.
    pub fn value(&self, n: u64) -> f64 {
        match self.unit {
            CounterUnit::Nanoseconds => n as f64 / 1e9,
            CounterUnit::Count => n as f64,
        }
    }
}

/// A layer as `/`, `iostack_layer_up` and `iostack_layer_supported` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerState {
    pub up: bool,
    /// This kernel has what the layer needs (its plan was made): a layer that is not up while
    /// supported failed to load or attach (an outage); one this kernel cannot trace (no
    /// function hooks for `fs` on a kernel without kprobes and fentry) is not an outage, and
    /// an alert on it would fire on every such host of a fleet for ever.
    pub supported: bool,
    /// The hooks it runs on (the `--explain` facts), or why it cannot run here.
    pub detail: String,
}

impl LayerState {
    /// How `/` and `--explain` say it.
    pub fn status(&self) -> &'static str {
        match (self.up, self.supported) {
            (true, _) => "traced",
            (false, false) => "not traceable on this kernel (not an outage)",
            (false, true) => "DOWN: it could be traced here, but failed to load or attach",
        }
    }
}

/// Everything a scrape shows.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub histograms: Vec<HistogramFamily>,
    /// The breakdown's and readahead's counters, in the order first added.
    pub counters: Vec<CounterFamily>,
    /// `iostack_lost_events_total{layer, reason}`: the shared loss vocabulary.
    pub lost: BTreeMap<(String, String), u64>,
    /// By layer name, in the order of `--layers`.
    pub layers: Vec<(String, LayerState)>,
}

impl Metrics {
    /// The family named `name`, created on first use.
    pub fn family(
        &mut self,
        name: &'static str,
        help: &'static str,
        unit: Unit,
    ) -> &mut HistogramFamily {
        let i = match self.histograms.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.histograms.push(HistogramFamily::new(name, help, unit));
                self.histograms.len() - 1
            }
        };
        &mut self.histograms[i]
    }

    /// The counter family named `name`, created on first use.
    pub fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        unit: CounterUnit,
    ) -> &mut CounterFamily {
        let i = match self.counters.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.counters.push(CounterFamily {
                    name,
                    help,
                    unit,
                    series: BTreeMap::new(),
                });
                self.counters.len() - 1
            }
        };
        &mut self.counters[i]
    }

    pub fn add_lost(&mut self, layer: &str, reason: &str, n: u64) {
        *self
            .lost
            .entry((layer.to_string(), reason.to_string()))
            .or_default() += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(slots: &[(usize, u64)], sum_ns: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::default();
        for &(k, n) in slots {
            h.slots[k] = n;
            h.count += n;
        }
        h.sum_ns = sum_ns;
        h
    }

    #[test]
    fn a_slot_is_counted_under_the_bound_above_every_latency_it_holds() {
        let mut c = CumulativeHistogram::default();
        // 100 us lies in slot 6 ([64, 128) us): its bucket is le = 128 us.
        c.add(&hist(&[(6, 1)], 100_000));
        let b = c.buckets(Unit::Usecs);
        assert_eq!(b[6], (128e-6, 1));
        assert_eq!(b[0].0, 2e-6, "slot 0 holds everything below 2 units");
        assert_eq!(
            b[LOG2_SLOTS - 1].0,
            f64::INFINITY,
            "the clamped last slot is +Inf"
        );
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 1);
    }

    #[test]
    fn intervals_add_up_and_the_sum_is_in_seconds() {
        let mut c = CumulativeHistogram::default();
        c.add(&hist(&[(3, 1_280_000)], 1_500_000_000));
        c.add(&hist(&[(3, 2), (10, 5)], 500_000_000));
        assert_eq!(c.count(), 1_280_007);
        assert_eq!(c.slots[3], 1_280_002);
        assert_eq!(c.sum_seconds(), 2.0);
    }

    #[test]
    fn a_removed_disks_series_stop() {
        let mut f = HistogramFamily::new("x_seconds", "x", Unit::Usecs);
        let h = hist(&[(1, 1)], 3_000);
        f.add(vec![("disk", "loop0".into()), ("op", "read".into())], &h);
        f.add(vec![("disk", "loop1".into()), ("op", "read".into())], &h);
        f.retain_label("disk", |d| d == "loop1");
        let disks: Vec<&String> = f.series.keys().map(|l| &l[0].1).collect();
        assert_eq!(disks, ["loop1"]);
    }
}
