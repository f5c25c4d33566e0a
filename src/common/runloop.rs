//! `[interval [count]]`: report every interval, or once at Ctrl-C; SIGINT and SIGTERM end the
//! run with a final report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Delivers SIGINT/SIGTERM to the run loop (installed once per process).
pub struct StopSignal {
    rx: mpsc::Receiver<()>,
    stopped: Arc<AtomicBool>,
}

impl StopSignal {
    pub fn install() -> Result<StopSignal> {
        let (tx, rx) = mpsc::channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = stopped.clone();
        ctrlc::set_handler(move || {
            flag.store(true, Ordering::SeqCst);
            let _ = tx.send(());
        })
        .context("installing the SIGINT/SIGTERM handler")?;
        Ok(StopSignal { rx, stopped })
    }

    /// Waits up to `timeout` (forever with None); true if a signal arrived.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        if self.stopped.load(Ordering::SeqCst) {
            return true;
        }
        match timeout {
            None => self.rx.recv().is_ok() || self.stopped.load(Ordering::SeqCst),
            Some(t) => match self.rx.recv_timeout(t) {
                Ok(()) => true,
                Err(RecvTimeoutError::Timeout) => self.stopped.load(Ordering::SeqCst),
                Err(RecvTimeoutError::Disconnected) => true,
            },
        }
    }

    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

/// Calls `report` every `interval` seconds, `count` times (or until a signal); without an
/// interval, once when a signal arrives.
pub fn run_intervals(
    stop: &StopSignal,
    interval: Option<u64>,
    count: Option<u64>,
    mut report: impl FnMut() -> Result<()>,
) -> Result<()> {
    let Some(secs) = interval else {
        stop.wait(None);
        return report();
    };
    let period = Duration::from_secs(secs);
    let mut next = Instant::now() + period;
    let mut done = 0u64;
    loop {
        let signaled = stop.wait(Some(next.saturating_duration_since(Instant::now())));
        report()?;
        done += 1;
        if signaled || count.is_some_and(|c| done >= c) {
            return Ok(());
        }
        next += period;
    }
}
