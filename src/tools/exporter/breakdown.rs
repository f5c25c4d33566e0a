//! The breakdown layer: an iostack report as counters (each operation's calls, the block I/Os
//! they waited for, and their time by part), and the same calls' latency as the syscall family,
//! from one drain: an operation's parts add up to its `iostack_syscall_latency_seconds_sum` at
//! every scrape. Its asynchronous requests (io_uring's, native AIO's) likewise, beside the
//! calls, labelled with their interface: their count, block I/O, time by part and latency.

use crate::common::losses::CALLS;
use crate::common::report::hist::LatencyHistogram;
use crate::common::report::{HistogramReport, LabeledHistogram};
use crate::tools::iostack::breakdown::{Breakdown, PART_NAMES};
use crate::tools::iostack::report::{IostackReport, Layer, RequestReport, RequestSplit};

use super::layers::UNIT;
use super::series::{CounterUnit, Labels, Metrics};

pub const CALL_SECONDS: (&str, &str) = (
    "iostack_call_seconds",
    "Time of the I/O calls that ended, by operation and part: on_cpu, run_queue (waiting for a CPU), os_queue and device (its own block I/O), others_io (I/O someone else submitted), other_sleep; an operation's parts add up to its iostack_syscall_latency_seconds_sum",
);
pub const VIA_WAKER_SECONDS: (&str, &str) = (
    "iostack_call_others_io_via_waker_seconds",
    "Of iostack_call_seconds_total{part=\"others_io\"}: the time charged through the I/O waits of the thread that woke the call (an fsync's journal commit, through jbd2)",
);
pub const CALLS_TOTAL: (&str, &str) = (
    "iostack_calls",
    "I/O calls that ended, by operation (the breakdown's calls)",
);
pub const CALL_IOS: (&str, &str) = (
    "iostack_call_ios",
    "Block I/Os the calls that ended waited for, by operation (their own and others')",
);

pub const REQUESTS_TOTAL: (&str, &str) = (
    "iostack_requests",
    "Asynchronous I/O requests that posted their completion (io_uring's entry, an AIO iocb's event), by operation and interface (io_uring, aio)",
);
pub const REQUESTS_PUNTED: (&str, &str) = (
    "iostack_requests_punted",
    "Of iostack_requests_total: those handed to an io-wq worker",
);
pub const REQUEST_IOS: (&str, &str) = (
    "iostack_request_ios",
    "Block I/Os made for the requests that posted their completion (their direct I/O), by operation and interface",
);
pub const REQUEST_SECONDS: (&str, &str) = (
    "iostack_request_seconds",
    "Time of the requests that posted their completion, by operation, interface and part along each request's time line: worker_wait (handed to an io-wq worker until one took it, where the kernel lets it be seen), to_device (the rest of submission to its first block I/O's issue), device, between_io (none of its block I/Os on the device), after_io (its last block I/O's end to its completion), no_io (a request with no block I/O of its own); an operation's parts add up to its iostack_request_latency_seconds_sum",
);
pub const REQUEST_LATENCY: (&str, &str) = (
    "iostack_request_latency_seconds",
    "Asynchronous I/O requests' latency, submission to completion, by operation and interface",
);

/// A row of the report: its labels (cgroup first, as the histograms'), calls, I/Os and parts.
struct Row<'a> {
    labels: Labels,
    calls: u64,
    ios: u64,
    breakdown: &'a Breakdown,
}

/// Creates every operation's series at 0, for the first scrape (a counter that appears with
/// its first value hides that value from `increase()`), for the calls and each interface whose
/// requests are followed here; a cgroup's appear with its first call.
pub fn seed(m: &mut Metrics, ops: &[String], interfaces: &[&'static str]) {
    let zero = Breakdown::default();
    for op in ops {
        add_row(
            m,
            Row {
                labels: vec![("op", op.clone())],
                calls: 0,
                ios: 0,
                breakdown: &zero,
            },
        );
        for interface in interfaces {
            add_requests(
                m,
                &RequestReport {
                    op: op.clone(),
                    interface,
                    requests: 0,
                    punted: 0,
                    max_ns: 0,
                    ios: 0,
                    split: RequestSplit::default(),
                    latency: LatencyHistogram::default(),
                },
            );
        }
    }
}

/// Adds one interval's report to the breakdown's counters: per operation, or per cgroup and
/// operation.
pub fn add_counters(m: &mut Metrics, report: &IostackReport) {
    let rows: Vec<Row> = match &report.cgroups {
        Some(rows) => rows
            .iter()
            .map(|r| Row {
                labels: vec![("cgroup", r.cgroup.clone()), ("op", r.op.clone())],
                calls: r.calls,
                ios: r.ios,
                breakdown: &r.breakdown,
            })
            .collect(),
        None => report
            .ops
            .iter()
            .map(|o| Row {
                labels: vec![("op", o.op.clone())],
                calls: o.calls,
                ios: o.ios,
                breakdown: &o.breakdown,
            })
            .collect(),
    };
    for row in rows {
        add_row(m, row);
    }
    for r in &report.requests {
        add_requests(m, r);
    }
}

/// One operation's requests of one interface: per operation, whatever `--per-cgroup` says (a
/// request's cgroup is not followed yet).
fn add_requests(m: &mut Metrics, r: &RequestReport) {
    let labels: Labels = vec![("interface", r.interface.to_string()), ("op", r.op.clone())];
    let seconds = m.counter(
        REQUEST_SECONDS.0,
        REQUEST_SECONDS.1,
        CounterUnit::Nanoseconds,
    );
    for (key, _, ns) in r.split.parts() {
        let mut labels = labels.clone();
        labels.push(("part", key.trim_end_matches("_ns").to_string()));
        seconds.add(labels, ns);
    }
    m.counter(REQUESTS_TOTAL.0, REQUESTS_TOTAL.1, CounterUnit::Count)
        .add(labels.clone(), r.requests);
    m.counter(REQUESTS_PUNTED.0, REQUESTS_PUNTED.1, CounterUnit::Count)
        .add(labels.clone(), r.punted);
    m.counter(REQUEST_IOS.0, REQUEST_IOS.1, CounterUnit::Count)
        .add(labels.clone(), r.ios);
    m.family(REQUEST_LATENCY.0, REQUEST_LATENCY.1, UNIT)
        .add(labels, &r.latency);
}

fn add_row(m: &mut Metrics, row: Row) {
    let seconds = m.counter(CALL_SECONDS.0, CALL_SECONDS.1, CounterUnit::Nanoseconds);
    for (part, ns) in PART_NAMES.iter().zip(row.breakdown.parts) {
        let mut labels = row.labels.clone();
        labels.push(("part", part.metric.to_string()));
        seconds.add(labels, ns);
    }
    m.counter(
        VIA_WAKER_SECONDS.0,
        VIA_WAKER_SECONDS.1,
        CounterUnit::Nanoseconds,
    )
    .add(row.labels.clone(), row.breakdown.via_waker_ns);
    m.counter(CALLS_TOTAL.0, CALLS_TOTAL.1, CounterUnit::Count)
        .add(row.labels.clone(), row.calls);
    m.counter(CALL_IOS.0, CALL_IOS.1, CounterUnit::Count)
        .add(row.labels, row.ios);
}

/// The calls' latency as a histogram report: per operation, or per cgroup and operation
/// (`other`: the calls whose cgroup found no room), from the same drain as the counters.
pub fn syscall_latency(report: IostackReport) -> HistogramReport {
    let histograms = match report.cgroups {
        Some(rows) => rows
            .into_iter()
            .map(|r| LabeledHistogram {
                labels: vec![("cgroup", r.cgroup), ("op", r.op)],
                hist: r.latency,
            })
            .collect(),
        None => report
            .ops
            .into_iter()
            .filter_map(|o| {
                let op = o.op;
                o.layers
                    .into_iter()
                    .find(|(l, _)| *l == Layer::Syscall)
                    .map(|(_, hist)| LabeledHistogram {
                        labels: vec![("op", op)],
                        hist,
                    })
            })
            .collect(),
    };
    HistogramReport {
        tool: crate::tools::iostack::NAME,
        time: report.time,
        unit: report.unit,
        noun: CALLS,
        histograms,
        losses: report.losses,
        accounted: None,
        async_calls: None,
        totals: false,
    }
}
