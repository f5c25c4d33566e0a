//! Per-event tools: records copied out of a BPF ring buffer, and output that keeps up with 100k+
//! lines a second and ends quietly when its reader goes away.

use std::cell::RefCell;
use std::io::{self, BufWriter, Write};
use std::rc::Rc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};

use crate::common::run::error::StdoutClosed;

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

/// A BPF ring buffer whose records (a plain `repr(C)` type) are copied out at each poll, for the
/// tool to decode afterwards (decoding may need its maps, which the callback cannot borrow).
pub struct EventQueue<T: 'static> {
    ring: RingBuffer<'static>,
    pending: Rc<RefCell<Vec<T>>>,
}

impl<T: plain::Plain + Default + Copy + 'static> EventQueue<T> {
    /// Records of one layout.
    pub fn new(map: &dyn MapCore) -> Result<EventQueue<T>> {
        EventQueue::decoded(map, |data| {
            let mut record = T::default();
            // A short record cannot come from our programs (never seen); skip it.
            plain::copy_from_bytes(&mut record, data)
                .ok()
                .map(|()| record)
        })
    }
}

impl<T: 'static> EventQueue<T> {
    /// Records `decode` makes sense of (a ring carrying several layouts); those it cannot are
    /// skipped.
    pub fn decoded(
        map: &dyn MapCore,
        decode: impl Fn(&[u8]) -> Option<T> + 'static,
    ) -> Result<EventQueue<T>> {
        let pending: Rc<RefCell<Vec<T>>> = Rc::default();
        let sink = pending.clone();
        let mut builder = RingBufferBuilder::new();
        builder.add(map, move |data: &[u8]| {
            if let Some(record) = decode(data) {
                sink.borrow_mut().push(record);
            }
            0
        })?;
        let ring = builder.build().context("setting up the ring buffer")?;
        Ok(EventQueue { ring, pending })
    }

    /// Waits up to `timeout` for records (none: takes what is there without waiting) and
    /// returns them. A signal interrupting the wait is not an error.
    pub fn take(&self, timeout: Option<Duration>) -> Result<Vec<T>> {
        let ret = match timeout {
            Some(t) => self.ring.poll_raw(t),
            None => self.ring.consume_raw(),
        };
        if ret < 0 && ret != -libc::EINTR {
            return Err(anyhow!(
                "reading the ring buffer failed: {}",
                io::Error::from_raw_os_error(-ret)
            ));
        }
        Ok(std::mem::take(&mut *self.pending.borrow_mut()))
    }
}
