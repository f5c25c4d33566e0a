//! What rastat reports each interval: as text (bcc's histogram shape, then tables) or one JSON
//! object.

use std::fmt::Write;

use serde::Serialize;
use serde_json::{json, Value};

use crate::common::report::hist::{format_log2_slots, LatencyHistogram, Unit};
use crate::common::report::{Heat, LabeledHistogram};
use crate::common::run::Render;

/// Kinds of window, in the order of `enum ra_kind` (src/bpf/rastat.h).
pub const KINDS: usize = 4;
pub const KIND_NAMES: [&str; KINDS] = ["sync", "async", "around", "hint"];
/// Ages at first use: a read, or a mapping (fault and fault-around).
pub const USE_NAMES: [&str; 2] = ["read", "mapped"];

/// Cumulative counts from the kernel, with what the page map holds now.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cumulative {
    pub windows: [u64; KINDS],
    pub wasted: u64,
    pub evicted_used: u64,
    /// First uses recorded (an age each; totals only).
    pub first_uses: u64,
    pub resident_used: u64,
    pub resident_unused: u64,
}

impl Cumulative {
    /// Every page used so far: those evicted after use and those resident, used.
    fn used(&self) -> u64 {
        self.evicted_used + self.resident_used
    }

    /// Every page brought in so far: each is resident or was evicted, used or not.
    fn brought(&self) -> u64 {
        self.resident_used + self.resident_unused + self.wasted + self.evicted_used
    }

    /// One interval's counts, from the cumulative ones at its start. The chunks are walked after
    /// the eviction counters are read, so a page evicted between the two is in neither for a
    /// moment: a total can dip by it, and is then held at its highest (see `max`) rather than
    /// wrapped.
    pub fn since(&self, last: &Cumulative) -> Counts {
        Counts {
            windows: std::array::from_fn(|k| self.windows[k].saturating_sub(last.windows[k])),
            brought: self.brought().saturating_sub(last.brought()),
            used: self.used().saturating_sub(last.used()),
            wasted: self.wasted.saturating_sub(last.wasted),
            resident_unused: self.resident_unused,
            twice: self
                .first_uses
                .saturating_sub(self.used())
                .saturating_sub(last.first_uses.saturating_sub(last.used())),
        }
    }

    /// One interval's counts since `last`, and `last` moved on to now, each total held at its
    /// highest: the report's totals, each process's row and each file's row all go through here
    /// (a file's row once took `now` as is, and a page evicted between the counters and the walk
    /// counted again the next interval).
    pub fn advance(&self, last: &mut Cumulative) -> Counts {
        let counts = self.since(last);
        *last = self.max(last);
        counts
    }

    /// What the next interval is counted from: each total at its highest so far.
    pub fn max(&self, last: &Cumulative) -> Cumulative {
        let m = |a: u64, b: u64| a.max(b);
        let (used, brought) = (
            self.used().max(last.used()),
            self.brought().max(last.brought()),
        );
        let mut c = Cumulative {
            windows: std::array::from_fn(|k| m(self.windows[k], last.windows[k])),
            wasted: m(self.wasted, last.wasted),
            evicted_used: m(self.evicted_used, last.evicted_used),
            first_uses: m(self.first_uses, last.first_uses),
            resident_used: self.resident_used,
            resident_unused: self.resident_unused,
        };
        // Hold used and brought at their highest through the resident counts.
        c.resident_used = used - c.evicted_used.min(used);
        let unused = brought.saturating_sub(c.resident_used + c.wasted + c.evicted_used);
        c.resident_unused = unused;
        c
    }
}

/// One interval, in pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub windows: [u64; KINDS],
    pub brought: u64,
    pub used: u64,
    /// Evicted never used.
    pub wasted: u64,
    /// At the end of the interval: brought in by readahead, not used yet.
    pub resident_unused: u64,
    /// First uses recorded twice (two threads using one page at the same instant on kernels
    /// where the programs cannot compare-and-swap): their ages count twice.
    pub twice: u64,
}

impl Counts {
    pub fn windows_total(&self) -> u64 {
        self.windows.iter().sum()
    }

    /// What is left of these counts once `part`'s are taken out (saturating).
    pub fn less(&self, part: &Counts) -> Counts {
        Counts {
            windows: std::array::from_fn(|k| self.windows[k].saturating_sub(part.windows[k])),
            brought: self.brought.saturating_sub(part.brought),
            used: self.used.saturating_sub(part.used),
            wasted: self.wasted.saturating_sub(part.wasted),
            resident_unused: self.resident_unused.saturating_sub(part.resident_unused),
            twice: self.twice.saturating_sub(part.twice),
        }
    }

    /// Worth a row: something happened, or pages are still waiting.
    pub fn active(&self) -> bool {
        self.windows_total() + self.brought + self.used + self.wasted + self.resident_unused > 0
    }

    /// Most waste first, then most unused, then most brought in.
    pub fn rank(&self) -> (u64, u64, u64) {
        (self.wasted, self.resident_unused, self.brought)
    }

    fn json(&self, page_size: u64) -> JsonCounts {
        JsonCounts {
            windows: JsonWindows {
                sync: self.windows[0],
                r#async: self.windows[1],
                around: self.windows[2],
                hint: self.windows[3],
                total: self.windows_total(),
            },
            pages: JsonPages {
                brought_in: self.brought,
                used: self.used,
                wasted: self.wasted,
                resident_unused: self.resident_unused,
            },
            bytes: JsonPages {
                brought_in: self.brought * page_size,
                used: self.used * page_size,
                wasted: self.wasted * page_size,
                resident_unused: self.resident_unused * page_size,
            },
        }
    }
}

#[derive(Serialize)]
struct JsonWindows {
    sync: u64,
    r#async: u64,
    around: u64,
    hint: u64,
    total: u64,
}

#[derive(Serialize)]
struct JsonPages {
    brought_in: u64,
    used: u64,
    wasted: u64,
    resident_unused: u64,
}

/// A report's or a row's counts, in this order (the totals' `windows` and `pages` come first in
/// a report, so a line-oriented reader finds them before any row's).
#[derive(Serialize)]
struct JsonCounts {
    windows: JsonWindows,
    pages: JsonPages,
    bytes: JsonPages,
}

#[derive(Serialize)]
struct JsonProcess<'a> {
    pid: u32,
    comm: &'a str,
    #[serde(flatten)]
    counts: JsonCounts,
}

#[derive(Serialize)]
struct JsonCgroup<'a> {
    cgroup: &'a str,
    #[serde(flatten)]
    counts: JsonCounts,
}

#[derive(Serialize)]
struct JsonFile<'a> {
    path: &'a str,
    dev: String,
    ino: u64,
    #[serde(flatten)]
    counts: JsonCounts,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    tool: &'static str,
    time: &'a str,
    unix_time_ms: u128,
    unit: &'static str,
    page_size: u64,
    #[serde(flatten)]
    counts: JsonCounts,
    window_pages: serde_json::Map<String, Value>,
    age_at_first_use: serde_json::Map<String, Value>,
    processes: Vec<JsonProcess<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroups: Option<Vec<JsonCgroup<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<Vec<JsonFile<'a>>>,
    drops: serde_json::Map<String, Value>,
}

pub struct ProcessRow {
    pub pid: u32,
    pub comm: String,
    pub counts: Counts,
}

/// --per-cgroup: one cgroup's windows and pages (`other`: those of cgroups the map had no room
/// for, the totals less the rows).
pub struct CgroupRow {
    pub cgroup: String,
    pub counts: Counts,
}

pub struct FileRow {
    pub path: String,
    pub dev: u32,
    pub ino: u64,
    pub counts: Counts,
}

pub struct RastatReport {
    pub time: String,
    pub unit: Unit,
    pub page_size: u64,
    pub total: Counts,
    /// Window sizes in pages, log2 slots per kind.
    pub window_sizes: [[u64; 32]; KINDS],
    /// Age at first use: read, mapped.
    pub ages: [LatencyHistogram; 2],
    pub processes: Vec<ProcessRow>,
    /// With --per-cgroup: every cgroup with something to show, by path.
    pub cgroups: Option<Vec<CgroupRow>>,
    /// With --per-file.
    pub files: Option<Vec<FileRow>>,
    /// New since the last report: windows whose thread state could not be stored, pages not
    /// tracked (the page map was full), processes and files not counted apart (maps full).
    pub losses: [u64; 4],
}

/// `12.5 MiB`
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A table of counts, each row ending with its name (a cgroup, a file).
fn named_rows<'a>(what: &str, rows: impl Iterator<Item = (&'a Counts, &'a str)>) -> String {
    let mut out = format!(
        "\n{:>8} {:>10} {:>10} {:>10} {:>10}  {what}\n",
        "WINDOWS", "BROUGHT", "USED", "WASTED", "UNUSED"
    );
    for (c, name) in rows {
        let _ = writeln!(
            out,
            "{:>8} {:>10} {:>10} {:>10} {:>10}  {name}",
            c.windows_total(),
            c.brought,
            c.used,
            c.wasted,
            c.resident_unused
        );
    }
    out
}

pub const LOSS_TEXTS: [(&str, &str); 4] = [
    (
        "thread_full",
        "readahead decisions not followed: no room for another thread's state",
    ),
    (
        "untracked",
        "pages brought in not tracked: the page map was full (counted in neither used nor waste)",
    ),
    (
        "process_full",
        "windows of processes the process map had no room for (in the totals only)",
    ),
    (
        "file_full",
        "windows of files the file map had no room for (in the totals only)",
    ),
];

impl RastatReport {
    fn pages(&self, n: u64) -> String {
        format!("{n} ({})", human_bytes(n * self.page_size))
    }

    pub fn text(&self, timestamp: bool) -> String {
        let mut out = String::new();
        if timestamp {
            let _ = writeln!(out, "{}", self.time);
        }
        let t = &self.total;
        let _ = writeln!(
            out,
            "Readahead windows: {} (sync {}, async {}, around {}, hint {})",
            t.windows_total(),
            t.windows[0],
            t.windows[1],
            t.windows[2],
            t.windows[3]
        );
        for (k, name) in KIND_NAMES.iter().enumerate() {
            if self.window_sizes[k].iter().any(|&n| n > 0) {
                let _ = writeln!(out, "\n{name} window size:");
                out.push_str(&format_log2_slots(&self.window_sizes[k], "pages"));
            }
        }
        let _ = writeln!(
            out,
            "\nPages brought in by readahead: {}",
            self.pages(t.brought)
        );
        let _ = writeln!(out, "  used:             {}", self.pages(t.used));
        let _ = writeln!(out, "  evicted unused:   {}  (waste)", self.pages(t.wasted));
        let _ = writeln!(out, "  resident unused:  {}", self.pages(t.resident_unused));
        for (i, name) in USE_NAMES.iter().enumerate() {
            let h = &self.ages[i];
            if h.count == 0 {
                continue;
            }
            let _ = writeln!(out, "\nAge at first use, {name}:");
            out.push_str(&h.format_log2(self.unit));
            let _ = writeln!(out, "{}", h.format_summary(self.unit));
        }
        if !self.processes.is_empty() {
            let _ = writeln!(
                out,
                "\n{:<8} {:<16} {:>8} {:>10} {:>10} {:>10} {:>10}",
                "PID", "COMM", "WINDOWS", "BROUGHT", "USED", "WASTED", "UNUSED"
            );
            for p in &self.processes {
                let c = &p.counts;
                let _ = writeln!(
                    out,
                    "{:<8} {:<16} {:>8} {:>10} {:>10} {:>10} {:>10}",
                    p.pid,
                    p.comm,
                    c.windows_total(),
                    c.brought,
                    c.used,
                    c.wasted,
                    c.resident_unused
                );
            }
        }
        if let Some(cgroups) = &self.cgroups {
            let rows = cgroups.iter().map(|g| (&g.counts, g.cgroup.as_str()));
            out.push_str(&named_rows("CGROUP", rows));
        }
        if let Some(files) = &self.files {
            out.push_str(&named_rows(
                "FILE",
                files.iter().map(|f| (&f.counts, f.path.as_str())),
            ));
        }
        for (i, (_, why)) in LOSS_TEXTS.iter().enumerate() {
            if self.losses[i] > 0 {
                let _ = writeln!(out, "\nLost: {} {why}", self.losses[i]);
            }
        }
        if t.twice > 0 {
            let _ = writeln!(
                out,
                "\nNote: {} first uses were seen twice (two threads used one page at the same instant): their ages count twice",
                t.twice
            );
        }
        out.push('\n');
        out
    }

    pub fn json(&self) -> String {
        let mut window_pages = serde_json::Map::new();
        for (k, name) in KIND_NAMES.iter().enumerate() {
            let last = self.window_sizes[k].iter().rposition(|&n| n > 0);
            let slots: Vec<Value> = (0..last.map_or(0, |l| l + 1))
                .map(|i| {
                    let high = (1u64 << (i + 1)) - 1;
                    let low = if i == 0 { 0 } else { 1u64 << i };
                    json!({"low": low, "high": high, "count": self.window_sizes[k][i]})
                })
                .collect();
            window_pages.insert((*name).into(), Value::Array(slots));
        }
        let mut age_at_first_use = serde_json::Map::new();
        for (i, name) in USE_NAMES.iter().enumerate() {
            let h = &self.ages[i];
            let mut a = serde_json::to_value(h.summary()).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut a {
                m.insert("log2".into(), json!(h.log2_json()));
            }
            age_at_first_use.insert((*name).into(), a);
        }
        let mut drops = serde_json::Map::new();
        for (i, (name, _)) in LOSS_TEXTS.iter().enumerate() {
            drops.insert((*name).into(), json!(self.losses[i]));
        }
        drops.insert("ages_twice".into(), json!(self.total.twice));
        let report = JsonReport {
            tool: "rastat",
            time: &self.time,
            unix_time_ms: crate::common::report::unix_time_ms(),
            unit: self.unit.name(),
            page_size: self.page_size,
            counts: self.total.json(self.page_size),
            window_pages,
            age_at_first_use,
            processes: self
                .processes
                .iter()
                .map(|p| JsonProcess {
                    pid: p.pid,
                    comm: &p.comm,
                    counts: p.counts.json(self.page_size),
                })
                .collect(),
            cgroups: self.cgroups.as_ref().map(|rows| {
                rows.iter()
                    .map(|g| JsonCgroup {
                        cgroup: &g.cgroup,
                        counts: g.counts.json(self.page_size),
                    })
                    .collect()
            }),
            files: self.files.as_ref().map(|files| {
                files
                    .iter()
                    .map(|f| JsonFile {
                        path: &f.path,
                        dev: format!("{}:{}", f.dev >> 20, f.dev & 0xfffff),
                        ino: f.ino,
                        counts: f.counts.json(self.page_size),
                    })
                    .collect()
            }),
            drops,
        };
        serde_json::to_string(&report).unwrap_or_default()
    }
}

impl Render for RastatReport {
    fn text(&self, timestamp: bool) -> String {
        RastatReport::text(self, timestamp)
    }

    fn json(&self) -> String {
        RastatReport::json(self)
    }

    /// The heat map of the age at first use: how soon readahead pages are used.
    fn heat(&self) -> Option<Heat> {
        Some(Heat {
            time: self.time.clone(),
            unit: self.unit,
            histograms: USE_NAMES
                .iter()
                .zip(&self.ages)
                .map(|(name, hist)| LabeledHistogram {
                    labels: vec![("use", (*name).to_string())],
                    hist: hist.clone(),
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_counts_pages_used_whether_still_resident_or_evicted_since() {
        let start = Cumulative {
            resident_used: 40,
            resident_unused: 60,
            first_uses: 40,
            ..Default::default()
        };
        // 20 more used; 30 of the used ones evicted; 10 unused evicted.
        let end = Cumulative {
            evicted_used: 30,
            resident_used: 30,
            wasted: 10,
            resident_unused: 30,
            first_uses: 60,
            ..Default::default()
        };
        let c = end.since(&start);
        assert_eq!(
            (c.brought, c.used, c.wasted, c.resident_unused, c.twice),
            (0, 20, 10, 30, 0)
        );
    }

    #[test]
    fn a_page_evicted_between_the_counters_and_the_walk_neither_wraps_nor_counts_twice() {
        let start = Cumulative {
            resident_used: 10,
            ..Default::default()
        };
        // The eviction came after the counters were read, before the walk: in neither.
        let dip = Cumulative {
            resident_used: 9,
            ..Default::default()
        };
        let mut last = start;
        let c = dip.advance(&mut last);
        assert_eq!((c.brought, c.used), (0, 0));
        // Next interval: the eviction is counted, the page is not used again.
        let next = Cumulative {
            resident_used: 9,
            evicted_used: 1,
            ..Default::default()
        };
        let c = next.advance(&mut last);
        assert_eq!((c.brought, c.used, c.wasted), (0, 0, 0));
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
    }
}
