//! Per-event tools: a BPF ring buffer drained until Ctrl-C, output that keeps up with 100k+
//! lines a second and ends quietly when its reader goes away, and loss counters reported in-band
//! as they grow and in a summary at the end.

use std::io::{self, BufWriter, Write};
use std::time::Duration;

use anyhow::{anyhow, Result};
use serde_json::json;

use crate::common::error::StdoutClosed;
use crate::common::runloop::StopSignal;

/// How long a poll waits for events before loss counters and stdout are checked again.
pub const POLL: Duration = Duration::from_millis(100);

/// Buffered standard output for events, flushed once per ring-buffer batch.
pub struct EventOutput {
    out: BufWriter<io::Stdout>,
    failed: Option<anyhow::Error>,
    /// Events written so far.
    pub events: u64,
}

fn write_error(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        anyhow::Error::new(StdoutClosed)
    } else {
        anyhow::Error::new(e).context("writing to standard output")
    }
}

impl EventOutput {
    pub fn new() -> EventOutput {
        EventOutput {
            out: BufWriter::with_capacity(256 << 10, io::stdout()),
            failed: None,
            events: 0,
        }
    }

    /// Writes one event (text ending in a newline). Meant for a ring-buffer callback: returns
    /// the value the callback returns, non-zero (stop polling) once writing failed; the error
    /// surfaces at the next `flush`.
    pub fn event(&mut self, text: &str) -> i32 {
        if self.failed.is_some() {
            return -1;
        }
        match self.out.write_all(text.as_bytes()) {
            Ok(()) => {
                self.events += 1;
                0
            }
            Err(e) => {
                self.failed = Some(write_error(e));
                -1
            }
        }
    }

    /// Writes a line that is not an event (a header, a loss note, the summary).
    pub fn line(&mut self, text: &str) -> Result<()> {
        self.out
            .write_all(text.as_bytes())
            .and_then(|_| self.out.write_all(b"\n"))
            .map_err(write_error)
    }

    /// Flushes, reporting a failure of any write since the last flush.
    pub fn flush(&mut self) -> Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.out.flush().map_err(write_error)
    }
}

impl Default for EventOutput {
    fn default() -> Self {
        Self::new()
    }
}

/// The reader of our stdout went away (`| head`): a pipe whose read end is closed polls as
/// POLLERR. A tool that prints only on events would otherwise not notice until the next event.
pub fn stdout_closed() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n == 1 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// Polls `rb` until a signal arrives, then consumes what is left. `after_batch` runs after
/// every poll (at least every `POLL`) and after the last batch: it flushes output and reports
/// losses. Ends early, with the error, when writing fails or stdout is closed.
pub fn drain_until_stopped(
    stop: &StopSignal,
    rb: &libbpf_rs::RingBuffer,
    mut after_batch: impl FnMut() -> Result<()>,
) -> Result<()> {
    loop {
        let stopping = stop.stopped();
        let ret = if stopping {
            rb.consume_raw()
        } else {
            rb.poll_raw(POLL)
        };
        after_batch()?;
        if stdout_closed() {
            return Err(anyhow::Error::new(StdoutClosed));
        }
        // A callback's -1 was a write failure, reported by after_batch; EINTR is our signal.
        if ret < 0 && ret != -1 && ret != -libc::EINTR {
            return Err(anyhow!(
                "reading the ring buffer failed: {}",
                io::Error::from_raw_os_error(-ret)
            ));
        }
        if stopping {
            return Ok(());
        }
    }
}

/// One kind of loss the kernel side counts.
pub struct LossKind {
    /// JSON name, e.g. `ring_buffer_full`.
    pub name: &'static str,
    /// Text, after "lost N ", e.g. "events: the ring buffer was full (output fell behind)".
    pub text: &'static str,
}

/// Cumulative kernel loss counters turned into in-band reports of what is new, and totals.
pub struct Losses {
    kinds: &'static [LossKind],
    seen: Vec<u64>,
}

impl Losses {
    pub fn new(kinds: &'static [LossKind]) -> Losses {
        Losses {
            kinds,
            seen: vec![0; kinds.len()],
        }
    }

    /// Lines for the counters that grew since the last call: `lost N <text>`, or
    /// `{"lost":N,"reason":"<name>"}` with `json`.
    /// `now` holds the kernel's counters, in the order of the first kinds; kinds past its end
    /// are counted by `add`.
    pub fn new_lines(&mut self, now: &[u64], json: bool) -> Vec<String> {
        let mut lines = Vec::new();
        for (i, (kind, &total)) in self.kinds.iter().zip(now).enumerate() {
            let new = total.wrapping_sub(self.seen[i]);
            if new == 0 {
                continue;
            }
            self.seen[i] = total;
            lines.push(if json {
                json!({"lost": new, "reason": kind.name}).to_string()
            } else {
                format!("lost {new} {}", kind.text)
            });
        }
        lines
    }

    /// Adds `n` losses of the kind called `name`, for losses found in user space that the caller
    /// reports in-band itself (with more detail than one line per kind).
    pub fn add(&mut self, name: &str, n: u64) {
        if let Some(i) = self.kinds.iter().position(|k| k.name == name) {
            self.seen[i] += n;
        }
    }

    /// The closing summary: events shown and every loss counter.
    pub fn summary(&self, events: u64, json: bool) -> String {
        let lost: u64 = self.seen.iter().sum();
        if json {
            let mut fields = serde_json::Map::new();
            fields.insert("events".into(), events.into());
            fields.insert("lost".into(), lost.into());
            for (kind, n) in self.kinds.iter().zip(&self.seen) {
                fields.insert(kind.name.into(), (*n).into());
            }
            return json!({ "summary": fields }).to_string();
        }
        let parts: Vec<String> = self
            .kinds
            .iter()
            .zip(&self.seen)
            .map(|(k, n)| format!("{} {n}", k.name))
            .collect();
        format!("\n{events} events, {lost} lost ({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: &[LossKind] = &[
        LossKind {
            name: "ring_buffer_full",
            text: "events: the ring buffer was full",
        },
        LossKind {
            name: "missed_start",
            text: "I/Os without a recorded start",
        },
    ];

    #[test]
    fn only_growth_is_reported_and_summed() {
        let mut l = Losses::new(KINDS);
        assert!(l.new_lines(&[0, 0], false).is_empty());
        assert_eq!(
            l.new_lines(&[3, 0], false),
            vec!["lost 3 events: the ring buffer was full"]
        );
        assert!(l.new_lines(&[3, 0], true).is_empty());
        assert_eq!(
            l.new_lines(&[5, 1], true),
            vec![
                r#"{"lost":2,"reason":"ring_buffer_full"}"#,
                r#"{"lost":1,"reason":"missed_start"}"#
            ]
        );
        assert_eq!(
            l.summary(7, false),
            "\n7 events, 6 lost (ring_buffer_full 5, missed_start 1)"
        );
        let v: serde_json::Value = serde_json::from_str(&l.summary(7, true)).unwrap();
        assert_eq!(v["summary"]["events"], 7);
        assert_eq!(v["summary"]["lost"], 6);
        assert_eq!(v["summary"]["ring_buffer_full"], 5);
        assert_eq!(v["summary"]["missed_start"], 1);
    }
}
