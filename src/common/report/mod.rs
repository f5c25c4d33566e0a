//! Report formatting: bcc-shaped text or one JSON object per report, written so that a closed
//! stdout ends the tool quietly. A histogram tool's `collect()` returns a `HistogramReport`;
//! this module only renders it.

pub mod heatmap;
pub mod hist;
pub mod ioevent;
pub mod stacks;

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use serde::Serialize;

use crate::common::block::unseen::{describe_unseen, DiskTally};
use crate::common::losses::{Loss, Noun};
use crate::common::report::hist::{fmt_value, LatencyHistogram, Log2Slot, Summary, Unit};
use crate::common::run::error::StdoutClosed;

/// Writes to stdout, flushing after each block so pipes see reports as they happen.
pub struct Out {
    stdout: io::Stdout,
}

impl Out {
    pub fn new() -> Out {
        Out {
            stdout: io::stdout(),
        }
    }

    pub fn write(&mut self, text: &str) -> Result<()> {
        let mut lock = self.stdout.lock();
        lock.write_all(text.as_bytes())
            .and_then(|_| lock.flush())
            .map_err(|e| {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    anyhow::Error::new(StdoutClosed)
                } else {
                    anyhow::Error::new(e).context("writing to standard output")
                }
            })
    }
}

impl Default for Out {
    fn default() -> Self {
        Self::new()
    }
}

/// The "Tracing... Hit Ctrl-C to end." line: on stdout as bcc prints it, on stderr with `-j`
/// so that stdout stays pure JSON. Printed once the programs are attached.
pub fn announce(out: &mut Out, json: bool, line: &str) -> Result<()> {
    if json {
        eprintln!("{line}");
        Ok(())
    } else {
        out.write(&format!("{line}\n"))
    }
}

/// Local wall-clock time as HH:MM:SS (bcc's `-T`).
pub fn local_hms() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as libc::time_t;
    // SAFETY: localtime_r writes into the tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&now, &mut tm).is_null() };
    if !ok {
        return "??:??:??".into();
    }
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// Milliseconds since the epoch, for JSON reports.
pub fn unix_time_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// What a heat map draws of one report: a column ending at `time`, its histograms in `unit`.
pub struct Heat {
    pub time: String,
    pub unit: Unit,
    pub histograms: Vec<LabeledHistogram>,
}

/// A histogram with the labels that identify it (e.g. disk and flags).
#[derive(Clone)]
pub struct LabeledHistogram {
    pub labels: Vec<(&'static str, String)>,
    pub hist: LatencyHistogram,
}

/// One interval's worth of histograms: what a histogram tool's `collect()` returns.
pub struct HistogramReport {
    pub tool: &'static str,
    /// When the interval ended (HH:MM:SS): the text's `-T` line, the JSON's `time` and the
    /// heat map's column label, all one.
    pub time: String,
    pub unit: Unit,
    /// What the tool counts, for loss notes (`I/O`, `call`).
    pub noun: Noun,
    pub histograms: Vec<LabeledHistogram>,
    /// New losses since the last report, for every kind the tool can incur (JSON lists them
    /// all, text only those that happened).
    pub losses: Vec<(Loss, u64)>,
    /// Block tools: per disk name, the completions /proc/diskstats counts that the programs saw
    /// and those found unseen in this report (see `common::block::unseen`; the unseen total is also
    /// the `unseen` entry of `losses`). None for tools without the reconciliation.
    pub accounted: Option<Vec<(String, DiskTally)>>,
    /// Function tools: per operation, calls that returned -EIOCBQUEUED (queued for io_uring or
    /// aio, not done) since the last report: counted apart, not timed. None for other tools.
    pub async_calls: Option<Vec<(String, u64)>>,
    /// Close the text report with a table of the histograms sorted by total time.
    pub totals: bool,
}

#[derive(Serialize)]
struct JsonHistogram<'a> {
    labels: serde_json::Map<String, serde_json::Value>,
    #[serde(flatten)]
    summary: Summary,
    log2: Vec<Log2Slot>,
    #[serde(skip)]
    _p: std::marker::PhantomData<&'a ()>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    tool: &'a str,
    time: String,
    unix_time_ms: u128,
    unit: &'a str,
    histograms: Vec<JsonHistogram<'a>>,
    drops: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    accounted: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "async", skip_serializing_if = "Option::is_none")]
    async_calls: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Where the time went: one row per histogram, the largest total first.
pub fn totals_table(histograms: &[LabeledHistogram], unit: Unit) -> String {
    let mut rows: Vec<&LabeledHistogram> = histograms.iter().collect();
    rows.sort_by_key(|h| std::cmp::Reverse(h.hist.sum_ns));
    let u = unit.ns() as f64;
    let name = unit.short_name();
    let mut s = format!(
        "\n{:<16} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10}\n",
        "",
        "COUNT",
        format!("TOTAL({name})"),
        format!("AVG({name})"),
        format!("P50({name})"),
        format!("P99({name})"),
        format!("MAX({name})"),
    );
    for h in rows {
        let label: Vec<&str> = h.labels.iter().map(|(_, v)| v.as_str()).collect();
        let m = h.hist.summary();
        s.push_str(&format!(
            "{:<16} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10}\n",
            label.join(" "),
            m.count,
            fmt_value(m.sum_ns as f64 / u),
            fmt_value(m.avg_ns / u),
            fmt_value(m.p50_ns / u),
            fmt_value(m.p99_ns / u),
            fmt_value(m.max_ns as f64 / u),
        ));
    }
    s
}

impl HistogramReport {
    /// bcc's layout: a blank line, the optional time, then per histogram its labels
    /// (`disk = vda\tflags = Write`), the log2 table and our summary line.
    pub fn text(&self, timestamp: bool) -> String {
        let mut s = String::from("\n");
        if timestamp {
            s.push_str(&format!("{:<8}\n", self.time));
        }
        for (i, h) in self.histograms.iter().enumerate() {
            if i > 0 {
                s.push('\n');
            }
            if !h.labels.is_empty() {
                let labels: Vec<String> =
                    h.labels.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                s.push_str(&labels.join("\t"));
                s.push('\n');
            }
            s.push_str(&h.hist.format_log2(self.unit));
            s.push_str(&format!("     {}\n", h.hist.format_summary(self.unit)));
        }
        if self.histograms.is_empty() {
            s.push_str("(no events)\n");
        } else if self.totals {
            s.push_str(&totals_table(&self.histograms, self.unit));
        }
        for (loss, n) in &self.losses {
            // Unseen I/Os are told per disk below.
            if *n > 0 && *loss != Loss::Unseen {
                s.push_str(&format!("note: {}\n", loss.describe(*n, self.noun)));
            }
        }
        for (op, n) in self.async_calls.iter().flatten() {
            if *n > 0 {
                s.push_str(&format!(
                    "note: {n} {op} {} returned -EIOCBQUEUED (queued for io_uring or aio): not timed\n",
                    if *n == 1 { "call" } else { "calls" }
                ));
            }
        }
        for (disk, t) in self.accounted.iter().flatten() {
            if t.unseen > 0 {
                s.push_str(&format!("note: {}\n", describe_unseen(t.unseen, disk)));
            }
        }
        s
    }

    pub fn json(&self) -> String {
        let histograms = self
            .histograms
            .iter()
            .map(|h| JsonHistogram {
                labels: h
                    .labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), serde_json::Value::from(v.clone())))
                    .collect(),
                summary: h.hist.summary(),
                log2: h.hist.log2_json(),
                _p: std::marker::PhantomData,
            })
            .collect();
        let report = JsonReport {
            tool: self.tool,
            time: self.time.clone(),
            unix_time_ms: unix_time_ms(),
            unit: self.unit.name(),
            histograms,
            drops: self
                .losses
                .iter()
                .map(|(k, v)| (k.name().to_string(), serde_json::Value::from(*v)))
                .collect(),
            async_calls: self.async_calls.as_ref().map(|a| {
                a.iter()
                    .map(|(op, n)| (op.clone(), serde_json::Value::from(*n)))
                    .collect()
            }),
            accounted: self.accounted.as_ref().map(|a| {
                a.iter()
                    .map(|(d, t)| {
                        let v = serde_json::json!({"seen": t.seen, "unseen": t.unseen});
                        (d.clone(), v)
                    })
                    .collect()
            }),
        };
        let mut line =
            serde_json::to_string(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        line.push('\n');
        line
    }
}

impl crate::common::run::Render for HistogramReport {
    fn text(&self, timestamp: bool) -> String {
        HistogramReport::text(self, timestamp)
    }

    fn json(&self) -> String {
        HistogramReport::json(self)
    }

    fn heat(&self) -> Option<Heat> {
        Some(Heat {
            time: self.time.clone(),
            unit: self.unit,
            histograms: self.histograms.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<LabeledHistogram> {
        let mut hist = LatencyHistogram::default();
        for us in [3u64, 5, 9, 700] {
            hist.record(us * 1000, Unit::Usecs);
        }
        vec![LabeledHistogram {
            labels: vec![("disk", "vda".into()), ("flags", "Sync-Write".into())],
            hist,
        }]
    }

    fn report(losses: Vec<(Loss, u64)>) -> HistogramReport {
        HistogramReport {
            tool: "biolat",
            time: local_hms(),
            unit: Unit::Usecs,
            noun: crate::common::losses::IOS,
            histograms: sample(),
            losses,
            accounted: None,
            async_calls: None,
            totals: false,
        }
    }

    #[test]
    fn json_schema_is_stable() {
        let report = report(vec![(Loss::NoStart, 2), (Loss::HistFull, 0)]);
        let line = report.json();
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "one line per report"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["tool"], "biolat");
        assert_eq!(v["unit"], "usecs");
        assert!(v["time"].is_string() && v["unix_time_ms"].is_u64());
        assert_eq!(v["drops"]["no_start"], 2);
        let h = &v["histograms"][0];
        assert_eq!(h["labels"]["disk"], "vda");
        assert_eq!(h["labels"]["flags"], "Sync-Write");
        assert_eq!(h["count"], 4);
        assert_eq!(h["sum_ns"], 717_000);
        assert_eq!(h["max_ns"], 700_000);
        for f in ["avg_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns"] {
            assert!(h[f].is_f64(), "{f}");
        }
        let log2 = h["log2"].as_array().unwrap();
        assert_eq!(log2.len(), 10); // up to the 512 -> 1023 slot
        assert_eq!(
            log2[1],
            serde_json::json!({"low": 2, "high": 3, "count": 1})
        );
        assert_eq!(log2[9]["count"], 1);
    }

    #[test]
    fn text_has_labels_histogram_summary_and_losses() {
        let text = report(vec![(Loss::NoStart, 2)]).text(false);
        assert!(text.starts_with(
            "\ndisk = vda\tflags = Sync-Write\n     usecs               : count    distribution\n"
        ));
        assert!(text.contains("\n     count 4, total 717, avg 179, "));
        assert!(!text.contains("COUNT"), "no totals table unless asked");
        assert!(text.ends_with("note: 2 I/Os ended without a recorded start (in flight when tracing began, or evicted)\n"));
    }

    #[test]
    fn totals_table_sorts_by_total_time() {
        let mut small = LatencyHistogram::default();
        small.record(1_000, Unit::Usecs);
        let mut big = LatencyHistogram::default();
        big.record(2_000_000, Unit::Usecs);
        big.record(2_000_000, Unit::Usecs);
        let hists = vec![
            LabeledHistogram {
                labels: vec![("op", "open".into())],
                hist: small,
            },
            LabeledHistogram {
                labels: vec![("op", "sync".into())],
                hist: big,
            },
        ];
        let table = totals_table(&hists, Unit::Usecs);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "");
        assert!(lines[1].contains("COUNT") && lines[1].contains("TOTAL(us)"));
        assert!(
            lines[2].starts_with("sync ") && lines[2].contains(" 4000 "),
            "{table}"
        );
        assert!(
            lines[3].starts_with("open ") && lines[3].contains(" 1.00 "),
            "{table}"
        );
    }
}
