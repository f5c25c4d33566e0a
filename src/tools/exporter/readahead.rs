//! The readahead layer: a rastat report as counters: the pages readahead brought into the page
//! cache, those used (read or mapped) and those evicted never used (the waste), and the
//! windows it started, by kind.

use crate::tools::rastat::report::{Counts, RastatReport, KIND_NAMES, LOSS_TEXTS};

use super::series::{CounterUnit, Metrics};

pub const PAGES: (&str, &str) = (
    "iostack_readahead_pages",
    "Pages readahead brought into the page cache (state=brought_in), of them those read or mapped since (used) and those evicted never used (evicted_unused: the waste)",
);
pub const WINDOWS: (&str, &str) = (
    "iostack_readahead_windows",
    "Readahead windows started, by kind: sync (a read missed the cache), async (a read reached the lookahead mark), around (a page fault), hint (fadvise, madvise, readahead(2))",
);

/// The losses that make the totals short (rastat's others are about its per-process and
/// per-file rows, which the exporter does not show).
const TOTAL_LOSSES: [usize; 2] = [0, 1];

/// Creates every series at 0, for the first scrape: a counter that appears with its first
/// value hides that value from `increase()`.
pub fn seed(m: &mut Metrics) {
    add(m, &[], &Counts::default());
    for i in TOTAL_LOSSES {
        m.add_lost("readahead", LOSS_TEXTS[i].0, 0);
    }
}

/// Adds one interval's report: its totals, or with --per-cgroup its cgroups' rows (`other`
/// among them), which add up to them.
pub fn add_counters(m: &mut Metrics, report: &RastatReport) {
    match &report.cgroups {
        Some(rows) => {
            for row in rows {
                add(m, &[("cgroup", row.cgroup.clone())], &row.counts);
            }
        }
        None => add(m, &[], &report.total),
    }
    for i in TOTAL_LOSSES {
        m.add_lost("readahead", LOSS_TEXTS[i].0, report.losses[i]);
    }
}

fn add(m: &mut Metrics, labels: &[(&'static str, String)], t: &Counts) {
    let with = |k: &'static str, v: &str| {
        let mut l = labels.to_vec();
        l.push((k, v.to_string()));
        l
    };
    let pages = m.counter(PAGES.0, PAGES.1, CounterUnit::Count);
    for (state, n) in [
        ("brought_in", t.brought),
        ("used", t.used),
        ("evicted_unused", t.wasted),
    ] {
        pages.add(with("state", state), n);
    }
    let windows = m.counter(WINDOWS.0, WINDOWS.1, CounterUnit::Count);
    for (kind, n) in KIND_NAMES.iter().zip(t.windows) {
        windows.add(with("kind", kind), n);
    }
}
