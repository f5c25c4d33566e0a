//! Reports: bcc-shaped text or one JSON object per report, written so that a closed stdout
//! ends the tool quietly.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use serde::Serialize;

use crate::common::error::StdoutClosed;
use crate::common::hist::{LatencyHistogram, Log2Slot, Summary, Unit};

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

/// A histogram with the labels that identify it (e.g. disk and flags).
pub struct LabeledHistogram {
    pub labels: Vec<(&'static str, String)>,
    pub hist: LatencyHistogram,
}

/// One interval's worth of histograms.
pub struct HistogramReport<'a> {
    pub tool: &'static str,
    pub unit: Unit,
    pub timestamp: bool,
    pub histograms: &'a [LabeledHistogram],
    pub drops: &'a [(&'static str, u64)],
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
}

impl HistogramReport<'_> {
    /// bcc's layout: a blank line, the optional time, then per histogram its labels
    /// (`disk = vda\tflags = Write`), the log2 table and our summary line.
    pub fn text(&self) -> String {
        let mut s = String::from("\n");
        if self.timestamp {
            s.push_str(&format!("{:<8}\n", local_hms()));
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
        }
        for (name, n) in self.drops {
            if *n > 0 {
                s.push_str(&format!(
                    "note: {n} {}\n",
                    crate::common::bpf::describe_drop(name)
                ));
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
            time: local_hms(),
            unix_time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
            unit: self.unit.name(),
            histograms,
            drops: self
                .drops
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect(),
        };
        let mut line =
            serde_json::to_string(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        line.push('\n');
        line
    }

    pub fn render(&self, json: bool) -> String {
        if json {
            self.json()
        } else {
            self.text()
        }
    }
}
