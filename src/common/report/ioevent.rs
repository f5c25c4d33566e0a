//! One slow block I/O (or bio submission) as the per-event tools print it: bcc biosnoop's
//! columns, or one JSON object per line with stable field names (see the README).

use std::fmt::Write as _;

use serde::Serialize;

/// A decoded event, ready to print.
#[derive(Clone, Debug, Serialize)]
pub struct IoEvent {
    /// Seconds since tracing began, at completion (or at the end of the submission).
    pub time_s: f64,
    /// `block` (request latency) or `submit` (bio submission latency).
    pub stage: &'static str,
    pub comm: String,
    pub pid: u32,
    pub tid: u32,
    pub disk: String,
    /// blktrace letters, the `T` column (e.g. `WS`).
    pub rwbs: String,
    /// Op and flags in words (e.g. `Sync-Write`).
    pub flags: String,
    pub sector: u64,
    pub bytes: u32,
    /// `-Q`: OS queue time, from the start of accounting to issue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_ns: Option<u64>,
    pub lat_ms: f64,
    pub lat_ns: u64,
    /// `-K`: the longest sleep inside the submission (0: it never slept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slept_ms: Option<f64>,
    /// `-K`: kernel stack, innermost frame first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<Vec<String>>,
    /// `--per-cgroup`: the cgroup the I/O is charged to, cut at the depth asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

pub fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The column header; QUE(ms) only with `-Q`, CGROUP only with `--per-cgroup`.
pub fn text_header(queued: bool, per_cgroup: bool) -> String {
    let mut s = format!(
        "{:<11} {:<15} {:<7} {:<9} {:<4} {:<12} {:<7} ",
        "TIME(s)", "COMM", "PID", "DISK", "T", "SECTOR", "BYTES"
    );
    if queued {
        s.push_str(&format!("{:>8} ", "QUE(ms)"));
    }
    s.push_str(&format!("{:>8}", "LAT(ms)"));
    if per_cgroup {
        s.push_str(" CGROUP");
    }
    s
}

impl IoEvent {
    /// One line (plus the stack below it with `-K`), newline-terminated.
    pub fn text(&self) -> String {
        let mut s = String::with_capacity(128);
        let _ = write!(
            s,
            "{:<11.6} {:<15} {:<7} {:<9} {:<4} {:<12} {:<7} ",
            self.time_s, self.comm, self.pid, self.disk, self.rwbs, self.sector, self.bytes
        );
        if let Some(q) = self.queue_ms {
            let _ = write!(s, "{q:>8.3} ");
        }
        let _ = write!(s, "{:>8.3}", self.lat_ms);
        if let Some(cgroup) = &self.cgroup {
            let _ = write!(s, " {cgroup}");
        }
        s.push('\n');
        if let Some(stack) = &self.stack {
            match self.slept_ms {
                Some(ms) if ms > 0.0 => {
                    let _ = writeln!(s, "    stack of its longest sleep ({ms:.3} ms):");
                }
                _ => s.push_str("    stack (it did not sleep):\n"),
            }
            for frame in stack {
                let _ = writeln!(s, "        {frame}");
            }
        }
        s
    }

    /// One JSON object, newline-terminated.
    pub fn json(&self) -> String {
        let mut line = serde_json::to_string(self).unwrap_or_else(|e| {
            serde_json::json!({ "error": format!("cannot encode an event: {e}") }).to_string()
        });
        line.push('\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> IoEvent {
        IoEvent {
            time_s: 1.5,
            stage: "block",
            comm: "dd".into(),
            pid: 4242,
            tid: 4242,
            disk: "loop0".into(),
            rwbs: "WS".into(),
            flags: "Sync-Write".into(),
            sector: 2048,
            bytes: 4096,
            queue_ms: None,
            queue_ns: None,
            lat_ms: ns_to_ms(12_345_678),
            lat_ns: 12_345_678,
            slept_ms: None,
            stack: None,
            cgroup: None,
        }
    }

    #[test]
    fn text_has_biosnoops_columns_with_sub_ms_precision() {
        let header = text_header(false, false);
        let cols: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(
            cols,
            ["TIME(s)", "COMM", "PID", "DISK", "T", "SECTOR", "BYTES", "LAT(ms)"]
        );
        let line = sample().text();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            fields,
            ["1.500000", "dd", "4242", "loop0", "WS", "2048", "4096", "12.346"]
        );
        let mut q = sample();
        q.queue_ms = Some(0.25);
        q.queue_ns = Some(250_000);
        assert!(text_header(true, false).contains(" QUE(ms)  LAT(ms)"));
        assert!(q.text().ends_with("   0.250   12.346\n"), "{}", q.text());
    }

    #[test]
    fn per_cgroup_adds_a_last_column_and_a_json_field() {
        assert!(text_header(false, true).ends_with(" LAT(ms) CGROUP"));
        let mut e = sample();
        e.cgroup = Some("/system.slice/db.service".into());
        assert!(
            e.text().ends_with("  12.346 /system.slice/db.service\n"),
            "{}",
            e.text()
        );
        assert!(e.json().ends_with(
            r#""cgroup":"/system.slice/db.service"}
"#
        ));
    }

    #[test]
    fn json_fields_are_stable() {
        // The order is part of the format too: shell tools read these lines without a parser.
        assert_eq!(
            sample().json(),
            concat!(
                r#"{"time_s":1.5,"stage":"block","comm":"dd","pid":4242,"tid":4242,"disk":"loop0","#,
                r#""rwbs":"WS","flags":"Sync-Write","sector":2048,"bytes":4096,"#,
                r#""lat_ms":12.345678,"lat_ns":12345678}"#,
                "\n"
            )
        );
    }

    #[test]
    fn stacks_follow_their_event() {
        let mut e = sample();
        e.stage = "submit";
        e.slept_ms = Some(180.5);
        e.stack = Some(vec!["schedule+0x5e".into(), "blk_queue_enter+0x113".into()]);
        let text = e.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1], "    stack of its longest sleep (180.500 ms):");
        assert_eq!(lines[3], "        blk_queue_enter+0x113");
        let v: serde_json::Value = serde_json::from_str(&e.json()).unwrap();
        assert_eq!(v["stack"][1], "blk_queue_enter+0x113");
        assert_eq!(v["slept_ms"], 180.5);
    }
}
