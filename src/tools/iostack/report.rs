//! What iostack shows every interval: per operation, the latency of each layer for the same
//! calls and where their time went; the I/O no traced call waited for; with `-P`, the
//! processes with the most time in I/O calls. Text or one JSON object.

use serde_json::{json, Map, Value};

use crate::common::block::unseen::{describe_unseen, DiskTally};
use crate::common::losses::{Loss, CALLS};
use crate::common::report::hist::{fmt_value, LatencyHistogram, Unit};
use crate::common::report::{unix_time_ms, Heat, LabeledHistogram};
use crate::common::run::Render;
use crate::tools::iostack::breakdown::{legend, Breakdown};

/// Requests by kind, in the order of `enum req_kind`.
pub const KINDS: [&str; 6] = ["read", "readahead", "write", "flush", "discard", "other"];

/// A layer of the stack, as a row of an operation's table.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    Syscall,
    Vfs,
    /// A filesystem, by type.
    Fs(String),
    /// The calls' time waiting for I/O.
    Block,
}

impl Layer {
    pub fn name(&self) -> &str {
        match self {
            Layer::Syscall => "syscall",
            Layer::Vfs => "vfs",
            Layer::Fs(fs) => fs,
            Layer::Block => "block",
        }
    }
}

/// One operation's calls that ended in the interval.
pub struct OpReport {
    pub op: String,
    pub calls: u64,
    /// Block I/Os the calls waited for.
    pub ios: u64,
    /// Of them, those someone else submitted (a page another reader brought in, a journal
    /// buffer being written): the rest are the calls' own.
    pub others_ios: u64,
    pub breakdown: Breakdown,
    pub layers: Vec<(Layer, LatencyHistogram)>,
}

/// `-P`: one process's calls of one operation.
pub struct ProcessRow {
    pub pid: u32,
    pub comm: String,
    pub op: String,
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub ios: u64,
    pub breakdown: Breakdown,
}

/// `--per-cgroup`: one cgroup's calls of one operation (`other`: the calls whose cgroup found
/// no room; their longest call is not known).
pub struct CgroupRow {
    pub cgroup: String,
    pub op: String,
    pub calls: u64,
    pub max_ns: Option<u64>,
    pub ios: u64,
    pub breakdown: Breakdown,
    /// The calls' latency (the exporter's per-cgroup syscall family): its sum is the
    /// breakdown's total.
    pub latency: LatencyHistogram,
}

/// Whose requests a `-P` or `--per-cgroup` row counts: their submitter's process or cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestGroup {
    Process { pid: u32, comm: String },
    Cgroup(String),
}

/// `-P` or `--per-cgroup`: one process's or cgroup's requests of one operation and interface
/// that posted their completion in the interval (the process or cgroup that submitted them).
pub struct GroupRequestRow {
    pub group: RequestGroup,
    pub op: String,
    pub interface: &'static str,
    pub requests: u64,
    pub punted: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub ios: u64,
    pub split: RequestSplit,
}

/// One operation's requests of one interface that posted their completion in the interval.
pub struct RequestReport {
    pub op: String,
    /// How the requests reached the kernel: `io_uring`, or `aio` (native AIO's io_submit).
    pub interface: &'static str,
    pub requests: u64,
    /// Of them, those handed to an io-wq worker (io_uring).
    pub punted: u64,
    pub max_ns: u64,
    /// Block requests made for them (their direct I/O).
    pub ios: u64,
    pub split: RequestSplit,
    /// From the SQE consumed to the CQE posted; from an iocb's setup to its event.
    pub latency: LatencyHistogram,
}

/// The requests' time, each request's split along its own time line: the parts add up to the
/// latency's sum to the nanosecond.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestSplit {
    /// Handed to an io-wq worker, until one took it (where io_wq_submit_work can be hooked;
    /// elsewhere it stays in the part it fell in).
    pub worker_wait_ns: u64,
    /// From submission to its first block request's issue to the device, but its wait for a
    /// worker: its issue, blk-throttle's hold, the OS queue, not yet told apart.
    pub to_device_ns: u64,
    /// While one of its block requests was on the device.
    pub device_ns: u64,
    /// From its first block request's issue to its last one's end, none of them on the device.
    pub between_io_ns: u64,
    /// From its last block request's end to its completion posted (io_uring: the completion's
    /// task work).
    pub after_io_ns: u64,
    /// Requests with no block request of their own (a cached read, a buffered write, and for
    /// now a buffered read's readahead): their whole time.
    pub no_io_ns: u64,
}

impl RequestSplit {
    /// Each part's JSON key, its text, and its value.
    pub fn parts(&self) -> [(&'static str, &'static str, u64); 6] {
        [
            (
                "worker_wait_ns",
                "waiting for an io-wq worker",
                self.worker_wait_ns,
            ),
            ("to_device_ns", "to the device", self.to_device_ns),
            ("device_ns", "on the device", self.device_ns),
            (
                "between_io_ns",
                "between their block I/Os",
                self.between_io_ns,
            ),
            (
                "after_io_ns",
                "after their last block I/O",
                self.after_io_ns,
            ),
            ("no_io_ns", "with no block I/O", self.no_io_ns),
        ]
    }
}

/// Requests iostack could not follow, since the last report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestLosses {
    /// Completion entries of followed opcodes whose submission was not seen: in flight when
    /// tracing began.
    pub no_start: u64,
    /// Submissions the map of requests in flight had no room for.
    pub start_full: u64,
}

/// A layer this kernel cannot trace, and why.
#[derive(Clone, Debug)]
pub struct MissingLayer {
    pub layer: &'static str,
    pub why: String,
}

pub struct IostackReport {
    /// When the interval ended (HH:MM:SS): `-T`, JSON's `time` and the pictures' columns.
    pub time: String,
    pub unit: Unit,
    pub ops: Vec<OpReport>,
    /// Requests (io_uring's, native AIO's), per interface and operation.
    pub requests: Vec<RequestReport>,
    pub request_losses: RequestLosses,
    /// Requests (io_uring's, native AIO's) in flight as the report is made: submitted, their
    /// completion not yet posted (JSON only).
    pub requests_in_flight: u64,
    pub missing: Vec<MissingLayer>,
    /// The interfaces whose requests this kernel does not let us follow, and why.
    pub unfollowed: Vec<(&'static str, String)>,
    /// Why a punted io_uring request's wait for a worker is not told apart on this kernel.
    pub worker_wait_unsplit: Option<String>,
    /// Requests that ended on the traced disks that no traced call waited for, by kind.
    pub unwaited: [u64; 6],
    /// `-P`: the processes with the most time in calls, theirs first, up to ten.
    pub processes: Option<Vec<ProcessRow>>,
    /// `--per-cgroup`: a row per cgroup and operation.
    pub cgroups: Option<Vec<CgroupRow>>,
    /// `-P` or `--per-cgroup`: the requests, a row per process (or cgroup), operation and
    /// interface.
    pub group_requests: Option<Vec<GroupRequestRow>>,
    pub losses: Vec<(Loss, u64)>,
    pub accounted: Vec<(String, DiskTally)>,
}

const BAR: usize = 50;

impl IostackReport {
    pub fn text(&self, timestamp: bool) -> String {
        let u = self.unit.ns() as f64;
        let unit = self.unit.short_name();
        let mut s = String::from("\n");
        if timestamp {
            s.push_str(&format!("{}\n", self.time));
        }
        if self.ops.is_empty() && self.requests.is_empty() {
            s.push_str("(no calls)\n");
        } else if !self.ops.is_empty() {
            s.push_str(&format!("{}\n", legend()));
        }
        for op in &self.ops {
            s.push_str(&format!(
                "\n{}: {} {}, {} {unit} in calls, {} block I/O{} waited for ({} per call)\n",
                op.op,
                op.calls,
                if op.calls == 1 { "call" } else { "calls" },
                fmt_value(op.breakdown.total() as f64 / u),
                op.ios,
                if op.ios == 1 { "" } else { "s" },
                fmt_value(per_call(op.ios, op.calls)),
            ));
            s.push_str(&format!(
                "  {:<12} {:>8} {:>12} {:>12} {:>12} {:>14}\n",
                "LAYER",
                "COUNT",
                format!("AVG({unit})"),
                format!("P50({unit})"),
                format!("P99({unit})"),
                format!("TOTAL({unit})"),
            ));
            for (layer, h) in &op.layers {
                let m = h.summary();
                s.push_str(&format!(
                    "  {:<12} {:>8} {:>12} {:>12} {:>12} {:>14}\n",
                    layer.name(),
                    m.count,
                    fmt_value(m.avg_ns / u),
                    fmt_value(m.p50_ns / u),
                    fmt_value(m.p99_ns / u),
                    fmt_value(m.sum_ns as f64 / u),
                ));
            }
            for m in &self.missing {
                s.push_str(&format!(
                    "  {:<12} {:>8}  (not traced here)\n",
                    m.layer, "-"
                ));
            }
            s.push_str(&format!("  |{}|\n", op.breakdown.bar(BAR)));
            s.push_str(&format!("  {}\n", op.breakdown.shares()));
        }
        for r in &self.requests {
            s.push_str(&requests_text(r, self.unit));
        }
        if let Some(rows) = &self.processes {
            s.push_str(&processes_text(rows, self.unit));
        }
        if let Some(rows) = &self.cgroups {
            s.push_str(&cgroups_text(rows, self.unit));
        }
        if let Some(rows) = &self.group_requests {
            s.push_str(&group_requests_text(rows, self.unit));
        }
        let unwaited: Vec<String> = KINDS
            .iter()
            .zip(self.unwaited)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        if !unwaited.is_empty() {
            s.push_str(&format!(
                "\nblock I/O no traced call waited for: {}\n",
                unwaited.join(", ")
            ));
        }
        for m in &self.missing {
            s.push_str(&format!(
                "note: {} not traced on this kernel: {}\n",
                m.layer, m.why
            ));
        }
        for (loss, n) in &self.losses {
            if *n > 0 && *loss != Loss::Unseen {
                s.push_str(&format!("note: {}\n", loss.describe(*n, CALLS)));
            }
        }
        for (interface, why) in &self.unfollowed {
            s.push_str(&format!(
                "note: {} requests not followed on this kernel: {why}\n",
                interface_name(interface)
            ));
        }
        if let Some(why) = &self.worker_wait_unsplit {
            if self.requests.iter().any(|r| r.punted > 0) {
                s.push_str(&format!(
                    "note: a punted request's wait for an io-wq worker is counted in \"to the device\" on this kernel: {why}\n"
                ));
            }
        }
        let l = self.request_losses;
        if l.no_start > 0 {
            s.push_str(&format!(
                "note: {} request{} in flight when tracing began, not timed\n",
                l.no_start,
                if l.no_start == 1 { "" } else { "s" }
            ));
        }
        if l.start_full > 0 {
            s.push_str(&format!(
                "note: {} request{} not followed: no room to keep {} in flight\n",
                l.start_full,
                if l.start_full == 1 { "" } else { "s" },
                if l.start_full == 1 { "it" } else { "them" }
            ));
        }
        for (disk, t) in &self.accounted {
            if t.unseen > 0 {
                s.push_str(&format!("note: {}\n", describe_unseen(t.unseen, disk)));
            }
        }
        s
    }

    pub fn json(&self) -> String {
        let ops: Vec<Value> = self
            .ops
            .iter()
            .map(|op| {
                let mut layers = Map::new();
                let mut fs = Map::new();
                for (layer, h) in &op.layers {
                    let summary = serde_json::to_value(h.summary()).unwrap_or(Value::Null);
                    match layer {
                        Layer::Fs(name) => {
                            fs.insert(name.clone(), summary);
                        }
                        other => {
                            layers.insert(other.name().to_string(), summary);
                        }
                    }
                }
                if !fs.is_empty() {
                    layers.insert("fs".into(), Value::Object(fs));
                }
                json!({
                    "op": op.op,
                    "calls": op.calls,
                    "ios": op.ios,
                    "others_ios": op.others_ios,
                    "ios_per_call": per_call(op.ios, op.calls),
                    "layers": layers,
                    "breakdown": op.breakdown.json(),
                })
            })
            .collect();
        let mut v = json!({
            "tool": "iostack",
            "time": self.time,
            "unix_time_ms": unix_time_ms(),
            "unit": self.unit.name(),
            "ops": ops,
            "missing": self.missing.iter().map(|m| (m.layer.to_string(), json!(m.why))).collect::<Map<_, _>>(),
            "unwaited": KINDS.iter().zip(self.unwaited).map(|(k, n)| (k.to_string(), json!(n))).collect::<Map<_, _>>(),
            "drops": self.losses.iter().map(|(k, n)| (k.name().to_string(), json!(n))).collect::<Map<_, _>>(),
            "accounted": self.accounted.iter().map(|(d, t)| (d.clone(), json!({"seen": t.seen, "unseen": t.unseen}))).collect::<Map<_, _>>(),
        });
        v["requests"] = self
            .requests
            .iter()
            .map(|r| {
                let mut row = json!({
                    "op": r.op,
                    "interface": r.interface,
                    "requests": r.requests,
                    "punted": r.punted,
                    "max_ns": r.max_ns,
                    "ios": r.ios,
                    "latency": serde_json::to_value(r.latency.summary()).unwrap_or(Value::Null),
                });
                for (key, _, ns) in r.split.parts() {
                    row[key] = json!(ns);
                }
                row
            })
            .collect();
        v["requests_not_followed"] = self
            .unfollowed
            .iter()
            .map(|(i, why)| (i.to_string(), json!(why)))
            .collect::<Map<_, _>>()
            .into();
        v["worker_wait_not_split"] = json!(self.worker_wait_unsplit);
        v["requests_in_flight"] = json!(self.requests_in_flight);
        v["request_drops"] = json!({
            "no_start": self.request_losses.no_start,
            "start_full": self.request_losses.start_full,
        });
        if let Some(rows) = &self.processes {
            v["processes"] = rows
                .iter()
                .map(|r| {
                    json!({
                        "pid": r.pid,
                        "comm": r.comm,
                        "op": r.op,
                        "calls": r.calls,
                        "total_ns": r.total_ns,
                        "max_ns": r.max_ns,
                        "ios": r.ios,
                        "breakdown": r.breakdown.json(),
                    })
                })
                .collect();
        }
        if let Some(rows) = &self.cgroups {
            v["cgroups"] = rows
                .iter()
                .map(|r| {
                    json!({
                        "cgroup": r.cgroup,
                        "op": r.op,
                        "calls": r.calls,
                        "total_ns": r.breakdown.total(),
                        "max_ns": r.max_ns,
                        "ios": r.ios,
                        "breakdown": r.breakdown.json(),
                    })
                })
                .collect();
        }
        if let Some(rows) = &self.group_requests {
            let (key, rows): (&str, Vec<Value>) = group_requests_json(rows);
            v[key] = rows.into();
        }
        let mut line = v.to_string();
        line.push('\n');
        line
    }
}

/// `process_requests` (-P) or `cgroup_requests` (--per-cgroup): a row per group, operation and
/// interface.
fn group_requests_json(rows: &[GroupRequestRow]) -> (&'static str, Vec<Value>) {
    let key = match rows.first().map(|r| &r.group) {
        Some(RequestGroup::Cgroup(_)) => "cgroup_requests",
        _ => "process_requests",
    };
    let rows = rows
        .iter()
        .map(|r| {
            let mut o = match &r.group {
                RequestGroup::Process { pid, comm } => json!({"pid": pid, "comm": comm}),
                RequestGroup::Cgroup(c) => json!({"cgroup": c}),
            };
            o["op"] = r.op.clone().into();
            o["interface"] = r.interface.into();
            o["requests"] = r.requests.into();
            o["punted"] = r.punted.into();
            o["total_ns"] = r.total_ns.into();
            o["max_ns"] = r.max_ns.into();
            o["ios"] = r.ios.into();
            for (k, _, ns) in r.split.parts() {
                o[k] = ns.into();
            }
            o
        })
        .collect();
    (key, rows)
}

impl Render for IostackReport {
    fn text(&self, timestamp: bool) -> String {
        IostackReport::text(self, timestamp)
    }

    fn json(&self) -> String {
        IostackReport::json(self)
    }

    /// The calls' latency (their syscall layer), a panel per operation.
    fn heat(&self) -> Option<Heat> {
        let calls = self.ops.iter().filter_map(|op| {
            let (_, hist) = op.layers.iter().find(|(l, _)| *l == Layer::Syscall)?;
            Some(LabeledHistogram {
                labels: vec![("op", op.op.clone())],
                hist: hist.clone(),
            })
        });
        Some(Heat {
            time: self.time.clone(),
            unit: self.unit,
            histograms: calls.collect(),
        })
    }
}

/// How a report names an interface in its notes.
fn interface_name(interface: &str) -> &str {
    match interface {
        "aio" => "native AIO (io_submit)",
        other => other,
    }
}

/// One operation's requests: how many, their time from submission to completion (io_uring's
/// entry, an iocb's event), and its latency as a layer row.
fn requests_text(r: &RequestReport, unit: Unit) -> String {
    let u = unit.ns() as f64;
    let short = unit.short_name();
    let m = r.latency.summary();
    let path = match r.interface {
        "io_uring" => format!("completion entry, {} handed to an io-wq worker", r.punted),
        _ => "completion event".to_string(),
    };
    format!(
        "\n{} via {}: {} request{}, {} {short} from submission to {path}, {} block I/O{} made for them\n  of their time: {}\n  {:<12} {:>8} {:>12} {:>12} {:>12} {:>14}\n  {:<12} {:>8} {:>12} {:>12} {:>12} {:>14}\n",
        r.op,
        r.interface,
        r.requests,
        if r.requests == 1 { "" } else { "s" },
        fmt_value(m.sum_ns as f64 / u),
        r.ios,
        if r.ios == 1 { "" } else { "s" },
        r.split
            .parts()
            .iter()
            .map(|(_, text, ns)| format!("{text} {}", share(*ns, m.sum_ns)))
            .collect::<Vec<_>>()
            .join(", "),
        "LAYER",
        "COUNT",
        format!("AVG({short})"),
        format!("P50({short})"),
        format!("P99({short})"),
        format!("TOTAL({short})"),
        r.interface,
        m.count,
        fmt_value(m.avg_ns / u),
        fmt_value(m.p50_ns / u),
        fmt_value(m.p99_ns / u),
        fmt_value(m.sum_ns as f64 / u),
    )
}

/// `part` of `total` as a percentage, as the breakdown's shares read.
fn share(part: u64, total: u64) -> String {
    match total {
        0 => "0%".into(),
        t => format!("{:.1}%", part as f64 * 100.0 / t as f64),
    }
}

fn per_call(n: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        n as f64 / calls as f64
    }
}

/// The columns a -P and a --per-cgroup row share, after who: the header, and a row's figures.
fn group_header(unit: Unit) -> String {
    let name = unit.short_name();
    format!(
        "{:<6} {:>8} {:>12} {:>10} {:>10} {:>6}  TIME",
        "OP",
        "CALLS",
        format!("TOTAL({name})"),
        format!("AVG({name})"),
        format!("MAX({name})"),
        "I/Os",
    )
}

fn group_figures(
    op: &str,
    calls: u64,
    total: u64,
    max: Option<u64>,
    ios: u64,
    b: &Breakdown,
    unit: Unit,
) -> String {
    let u = unit.ns() as f64;
    let max = max.map_or_else(|| "-".to_string(), |m| fmt_value(m as f64 / u));
    format!(
        "{op:<6} {calls:>8} {:>12} {:>10} {max:>10} {ios:>6}  |{}|",
        fmt_value(total as f64 / u),
        fmt_value(per_call(total, calls) / u),
        b.bar(20)
    )
}

/// iotop by latency: a row per process and operation, the processes with the most time in
/// calls first.
fn processes_text(rows: &[ProcessRow], unit: Unit) -> String {
    let mut s = format!("\n{:<8} {:<16} {}\n", "PID", "COMM", group_header(unit));
    for r in rows {
        let figures = group_figures(
            &r.op,
            r.calls,
            r.total_ns,
            Some(r.max_ns),
            r.ios,
            &r.breakdown,
            unit,
        );
        s.push_str(&format!("{:<8} {:<16} {figures}\n", r.pid, r.comm));
    }
    s
}

/// A row per process (or cgroup), operation and interface of the requests: how many, their
/// time, and its shares along their time line.
fn group_requests_text(rows: &[GroupRequestRow], unit: Unit) -> String {
    let u = unit.ns() as f64;
    let short = unit.short_name();
    let mut s = String::new();
    for (i, r) in rows.iter().enumerate() {
        let who = match &r.group {
            RequestGroup::Process { pid, comm } => format!("{pid:<8} {comm:<16}"),
            RequestGroup::Cgroup(c) => format!("{c:<CGROUP_WIDTH$}"),
        };
        if i == 0 {
            let head = match &r.group {
                RequestGroup::Process { .. } => format!("{:<8} {:<16}", "PID", "COMM"),
                RequestGroup::Cgroup(_) => format!("{:<CGROUP_WIDTH$}", "CGROUP"),
            };
            s.push_str(&format!(
                "\n{head} {:<16} {:>9} {:>12} {:>12} {:>6}  OF THEIR TIME\n",
                "REQUESTS",
                "COUNT",
                format!("AVG({short})"),
                format!("MAX({short})"),
                "IOS"
            ));
        }
        let parts: Vec<String> = r
            .split
            .parts()
            .iter()
            .filter(|(_, _, ns)| *ns > 0)
            .map(|(_, text, ns)| format!("{text} {}", share(*ns, r.total_ns)))
            .collect();
        s.push_str(&format!(
            "{who} {:<16} {:>9} {:>12} {:>12} {:>6}  {}\n",
            format!("{} {}", r.op, r.interface),
            r.requests,
            fmt_value(r.total_ns as f64 / r.requests.max(1) as f64 / u),
            fmt_value(r.max_ns as f64 / u),
            r.ios,
            parts.join(", ")
        ));
    }
    s
}

/// The width of the CGROUP column (longer paths push the row right).
const CGROUP_WIDTH: usize = 24;

/// A row per cgroup and operation.
fn cgroups_text(rows: &[CgroupRow], unit: Unit) -> String {
    let mut s = format!("\n{:<CGROUP_WIDTH$} {}\n", "CGROUP", group_header(unit));
    for r in rows {
        let total = r.breakdown.total();
        let figures = group_figures(&r.op, r.calls, total, r.max_ns, r.ios, &r.breakdown, unit);
        s.push_str(&format!("{:<CGROUP_WIDTH$} {figures}\n", r.cgroup));
    }
    s
}
