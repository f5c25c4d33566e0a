//! `--slow`: a call slower than the threshold as its journey through the stack, printed when it
//! ends: the call, its time per layer, where its time went, and each block I/O it waited for;
//! and an io_uring or AIO request as slow, as its completion is posted: who submitted it, what,
//! its time along its own time line, and the block I/O made for it.

use serde::Serialize;
use serde_json::Value;

use crate::common::report::ioevent::ns_to_ms;
use crate::tools::iostack::breakdown::{Breakdown, PART_NAMES};
use crate::tools::iostack::report::RequestSplit;

/// One block I/O a call waited for.
#[derive(Clone, Debug, Serialize)]
pub struct JourneyIo {
    pub disk: String,
    /// blktrace's letters (`R`, `WS`, `FWFS`...): flushes and FUA shown as what they are.
    pub rwbs: String,
    pub sector: u64,
    pub bytes: u32,
    /// Held by blk-throttle before it entered the block layer (0 if it was not).
    pub held_ns: u64,
    /// From entering the block layer to the device (0 if unknown).
    pub queue_ns: u64,
    /// On the device: issue to completion, or its data step and the flushes made for it.
    pub device_ns: u64,
    /// `own` (its thread submitted it, or the kernel made it for it), `held` (blk-throttle's
    /// dispatcher queued it with its submitter unseen, and its completion ended the call's I/O
    /// wait: taken for its own), or `others` (its completion woke the call; someone else
    /// submitted it).
    pub how: &'static str,
    /// Cache flushes the kernel made for it (a write asking for FUA or a flush, on a disk with
    /// a volatile cache and no FUA): part of its device time.
    pub flushes: u32,
    /// Its bios' submitters: more than one where bios of several threads were merged into it.
    pub submitters: u32,
    /// The stacked device (dm, md) whose bio it carries, if any: `dm-0 → vda`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacked_on: Option<String>,
    /// Who submitted it (its first bio), 0 and "?" if unknown.
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

impl JourneyIo {
    /// One I/O line: the disk (and the stacked device above it), the request, and each span of
    /// its time the breakdown charged: held, queued, on the device, and how it reached the call.
    fn text(&self, n: usize) -> String {
        let disk = match &self.stacked_on {
            Some(upper) => format!("{upper} → {}", self.disk),
            None => self.disk.clone(),
        };
        let mut spans = Vec::new();
        if self.held_ns > 0 || self.how == "held" {
            spans.push(format!("held by blk-throttle {} ms", ms(self.held_ns)));
        }
        spans.push(format!("queue {} ms", ms(self.queue_ns)));
        let flushes = match self.flushes {
            0 => String::new(),
            1 => " (with the cache flush the kernel made for it)".to_string(),
            n => format!(" (with the {n} cache flushes the kernel made for it)"),
        };
        spans.push(format!("device {} ms{flushes}", ms(self.device_ns)));
        let merged = match self.submitters {
            0 | 1 => String::new(),
            n => format!(", bios of {n} threads merged"),
        };
        let who = format!("{}/{}", self.comm, self.pid);
        let how = match self.how {
            // A request's direct I/O leads to it by its bio, whoever queued that bio.
            "own" if self.pid == 0 => format!("its own (who queued its bio was not seen){merged}"),
            "own" => format!("its own, submitted by {who}{merged}"),
            "held" => format!(
                "its own: blk-throttle's dispatcher queued it and its completion ended the call's I/O wait (its submitter was not seen: no function hooks here){merged}"
            ),
            _ => format!("someone else's, submitted by {who}{merged}: its completion woke the call"),
        };
        format!(
            "  I/O {n}: {disk} {} sector {} {} bytes, {}; {how}\n",
            self.rwbs,
            self.sector,
            self.bytes,
            spans.join(", ")
        )
    }
}

/// One call slower than the threshold.
#[derive(Clone, Debug, Serialize)]
pub struct Journey {
    pub time: String,
    pub comm: String,
    pub pid: u32,
    pub tid: u32,
    pub op: String,
    /// `syscall`: what tells a call's journey from a request's (`io_uring`, `aio`).
    pub interface: &'static str,
    pub syscall: String,
    /// The file descriptor it used, -1 if none; the file's name where it is at hand.
    pub fd: i64,
    pub file: String,
    /// Bytes for reads and writes, else the return value.
    pub ret: i64,
    pub lat_ns: u64,
    /// Time in each layer it went through (absent where it did not, or cannot be traced).
    pub layers: serde_json::Map<String, Value>,
    #[serde(serialize_with = "breakdown_json")]
    pub breakdown: Breakdown,
    /// The waker its others' I/O went through (one hop), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Block I/Os it waited for; `ios` counts them all, `io` lists the first ones.
    pub ios: u32,
    pub io: Vec<JourneyIo>,
    /// `--per-cgroup`: the caller's cgroup, cut at its depth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

fn breakdown_json<S: serde::Serializer>(b: &Breakdown, s: S) -> Result<S::Ok, S::Error> {
    b.json().serialize(s)
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns_to_ms(ns))
}

impl Journey {
    pub fn text(&self) -> String {
        let ret = if self.ret >= 0 {
            format!("{} bytes", self.ret)
        } else {
            format!("error {}", -self.ret)
        };
        let file = match (self.fd, self.file.is_empty()) {
            (fd, _) if fd < 0 => String::new(),
            (fd, true) => format!(" fd {fd}"),
            (fd, false) => format!(" fd {fd} {}", self.file),
        };
        let cgroup = match &self.cgroup {
            Some(c) => format!(" in {c}"),
            None => String::new(),
        };
        let mut s = format!(
            "{} {} {}/{}{cgroup} {}({}){file} {ret} {} ms\n",
            self.time,
            self.comm,
            self.pid,
            self.tid,
            self.op,
            self.syscall,
            ms(self.lat_ns)
        );
        let layers: Vec<String> = self
            .layers
            .iter()
            .map(|(k, v)| format!("{k} {}", ms(v.as_u64().unwrap_or(0))))
            .collect();
        s.push_str(&format!("  layers: {} ms\n", layers.join(", ")));
        let parts: Vec<String> = PART_NAMES
            .iter()
            .zip(self.breakdown.parts)
            .filter(|(_, v)| *v > 0)
            .map(|(p, v)| format!("{} {}", p.text, ms(v)))
            .collect();
        s.push_str(&format!("  time:   {} ms\n", parts.join(", ")));
        if let Some(via) = &self.via {
            s.push_str(&format!(
                "  waited {} ms for the I/O of {via}, which woke it (or for what it waited for in turn)\n",
                ms(self.breakdown.via_waker_ns)
            ));
        }
        s.push_str(&io_lines(&self.io, self.ios));
        s
    }

    pub fn json(&self) -> String {
        json_line(self)
    }
}

/// The block I/Os a journey lists, one a line, and how many more it made.
fn io_lines(io: &[JourneyIo], ios: u32) -> String {
    let mut s: String = io
        .iter()
        .enumerate()
        .map(|(i, io)| io.text(i + 1))
        .collect();
    if ios as usize > io.len() {
        s.push_str(&format!("  ... {} more I/Os\n", ios as usize - io.len()));
    }
    s
}

/// One JSON line.
fn json_line<T: Serialize>(v: &T) -> String {
    let mut line = serde_json::to_string(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    line.push('\n');
    line
}

/// One io_uring or native AIO request slower than the threshold, as its completion is posted.
#[derive(Clone, Debug, Serialize)]
pub struct RequestJourney {
    pub time: String,
    /// Its submitter (`?` and 0 where there was no room to keep it: more requests in flight
    /// than `--slow` keeps).
    pub comm: String,
    pub pid: u32,
    pub tid: u32,
    pub op: String,
    /// `io_uring`, or `aio` (native AIO's io_submit).
    pub interface: &'static str,
    /// The SQE's opcode (`IORING_OP_READ`), the iocb's command (`IOCB_CMD_PREAD`).
    pub opcode: String,
    /// io_uring's user_data; the iocb's aio_data.
    pub user_data: u64,
    pub file: String,
    /// Bytes, or -errno.
    pub res: i64,
    /// From its submission (the SQE consumed, the iocb set up) to its completion posted.
    pub lat_ns: u64,
    /// Handed to an io-wq worker.
    pub punted: bool,
    /// Its time along its own time line: the parts add up to `lat_ns`.
    #[serde(rename = "parts", serialize_with = "split_json")]
    pub split: RequestSplit,
    /// Block I/Os made for it; `io` lists the first ones.
    pub ios: u32,
    pub io: Vec<JourneyIo>,
    /// `--per-cgroup`: its submitter's cgroup, cut at its depth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

fn split_json<S: serde::Serializer>(split: &RequestSplit, s: S) -> Result<S::Ok, S::Error> {
    let parts: serde_json::Map<String, Value> = split
        .parts()
        .iter()
        .map(|(key, _, v)| (key.to_string(), (*v).into()))
        .collect();
    parts.serialize(s)
}

/// A request's part as one request's journey says it (the report's words are plural).
fn one_request(key: &str) -> &'static str {
    match key {
        "worker_wait_ns" => "waiting for an io-wq worker",
        "to_device_ns" => "to the device",
        "device_ns" => "on the device",
        "between_io_ns" => "between its block I/Os",
        "after_io_ns" => "after its last block I/O",
        _ => "with no block I/O",
    }
}

impl RequestJourney {
    pub fn text(&self) -> String {
        let res = if self.res >= 0 {
            format!("{} bytes", self.res)
        } else {
            format!("error {}", -self.res)
        };
        let cgroup = match &self.cgroup {
            Some(c) => format!(" in {c}"),
            None => String::new(),
        };
        let file = match self.file.is_empty() {
            true => String::new(),
            false => format!(" {}", self.file),
        };
        let mut s = format!(
            "{} {} {}/{}{cgroup} {}({} {}) user_data {:#x}{file} {res} {} ms\n",
            self.time,
            self.comm,
            self.pid,
            self.tid,
            self.op,
            self.interface,
            self.opcode,
            self.user_data,
            ms(self.lat_ns)
        );
        let parts: Vec<String> = self
            .split
            .parts()
            .iter()
            .filter(|(_, _, v)| *v > 0)
            .map(|(key, _, v)| format!("{} {}", one_request(key), ms(*v)))
            .collect();
        s.push_str(&format!("  time:   {} ms\n", parts.join(", ")));
        if self.punted {
            s.push_str("  handed to an io-wq worker\n");
        }
        if self.pid == 0 {
            s.push_str(
                "  (its submitter and block I/Os were not kept: more requests in flight than --slow keeps)\n",
            );
        }
        s.push_str(&io_lines(&self.io, self.ios));
        s
    }
}

/// What `--slow` prints: a call's journey, or a request's.
#[derive(Clone, Debug)]
pub enum SlowEvent {
    Call(Journey),
    Request(RequestJourney),
}

impl SlowEvent {
    pub fn text(&self) -> String {
        match self {
            SlowEvent::Call(j) => j.text(),
            SlowEvent::Request(r) => r.text(),
        }
    }

    pub fn json(&self) -> String {
        match self {
            SlowEvent::Call(j) => j.json(),
            SlowEvent::Request(r) => json_line(r),
        }
    }
}
