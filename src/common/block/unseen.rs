//! The loss no BPF counter can see: I/Os the kernel completed whose completion never reached our
//! programs. On some kernels a BPF program is simply not run for some tracepoint hits, with no
//! recursion miss counted (the CI host's 6.18 skips every BPF program while a thread of the
//! sandbox's PID 1 is current, so a completion softirq that interrupts one is invisible). The
//! kernel's own per-disk counters still know how many I/Os ended: each report compares
//! /proc/diskstats with what the programs counted per disk (`src/bpf/lib/io_seen.bpf.h`) and reports
//! the difference as `unseen`.
//!
//! Exactness at the edges: a completion's tracepoint fires just before diskstats counts it, in
//! the same call chain. /proc/diskstats is read before the programs' counts, so an I/O that
//! diskstats already counted is always in the programs' count too (unless unseen); an I/O that
//! the programs counted but diskstats not yet only makes the difference smaller, for that
//! report. So the cumulative difference never exceeds the true number of unseen I/Os, and it is
//! reported as a counter that never goes down: exact once the disk is idle, a lower bound while
//! I/O is in flight.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::common::block::disk::kernel_dev;

/// Completed requests per whole request-based disk (dev_t → reads + writes + discards + flushes),
/// from /proc/diskstats. Bio-based disks (zram, device-mapper, md) emit no request events and
/// are left out; so are partitions (a request belongs to the whole disk).
pub fn completed_requests() -> Result<HashMap<u32, u64>> {
    let text = fs::read_to_string("/proc/diskstats").context("reading /proc/diskstats")?;
    Ok(parse_diskstats(&text, |name| {
        Path::new("/sys/block").join(name).join("mq").is_dir()
    }))
}

/// Fields (1-based, after major, minor, name, as Documentation/admin-guide/iostats.rst numbers
/// them): 1 reads, 5 writes, 12 discards (4.18+), 16 flushes (5.5+) completed.
fn parse_diskstats(text: &str, request_based: impl Fn(&str) -> bool) -> HashMap<u32, u64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 14 {
            continue;
        }
        let (Ok(major), Ok(minor)) = (f[0].parse::<u32>(), f[1].parse::<u32>()) else {
            continue;
        };
        if !request_based(f[2]) {
            continue;
        }
        let field = |i: usize| {
            f.get(2 + i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.insert(
            kernel_dev(major, minor),
            field(1) + field(5) + field(12) + field(16),
        );
    }
    out
}

/// How long after attaching before the diskstats baseline is taken: a completion whose
/// tracepoint fired just before the attach has been counted by diskstats well before then
/// (the two are microseconds apart in one call chain).
const SETTLE: Duration = Duration::from_millis(10);

/// One disk in one report: completions /proc/diskstats counts that the programs saw, and those
/// newly found unseen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskTally {
    pub dev: u32,
    pub seen: u64,
    pub unseen: u64,
}

/// Per-disk reconciliation of /proc/diskstats with the programs' own counts.
pub struct UnseenIos {
    /// Only this disk (`-d`); every request-based disk otherwise.
    only: Option<u32>,
    /// diskstats when the disk was first looked at, and the programs' count then.
    base: HashMap<u32, (u64, u64)>,
    /// The programs' count at the last report, per disk.
    last_seen: HashMap<u32, u64>,
    /// Unseen I/Os reported so far, per disk.
    reported: HashMap<u32, u64>,
}

impl UnseenIos {
    /// Takes the baseline. Call once the programs are attached.
    pub fn start(only: Option<u32>) -> Result<UnseenIos> {
        thread::sleep(SETTLE);
        let mut base = HashMap::new();
        for (dev, n) in completed_requests()? {
            if only.is_none_or(|d| d == dev) {
                base.insert(dev, (n, 0));
            }
        }
        Ok(UnseenIos {
            only,
            base,
            last_seen: HashMap::new(),
            reported: HashMap::new(),
        })
    }

    /// Reads /proc/diskstats, then `seen` (the programs' cumulative count per disk: it must be
    /// read after diskstats), and returns, for every disk with news since the last call, what
    /// the programs saw and what they newly missed.
    pub fn update(
        &mut self,
        seen: impl FnOnce() -> Result<HashMap<u32, u64>>,
    ) -> Result<Vec<DiskTally>> {
        let diskstats = completed_requests()?;
        let seen = seen()?;
        Ok(self.reconcile(&diskstats, &seen))
    }

    fn reconcile(
        &mut self,
        diskstats: &HashMap<u32, u64>,
        seen: &HashMap<u32, u64>,
    ) -> Vec<DiskTally> {
        let mut out = Vec::new();
        let mut devs: Vec<&u32> = diskstats.keys().collect();
        devs.sort();
        for &dev in devs {
            if self.only.is_some_and(|d| d != dev) {
                continue;
            }
            let completed = diskstats[&dev];
            let seen_now = seen.get(&dev).copied().unwrap_or(0);
            // A disk that appeared since the start counts from now on; one whose counters went
            // backwards (removed and created again) starts over.
            let base = self.base.entry(dev).or_insert((completed, seen_now));
            if completed < base.0 || seen_now < base.1 {
                *base = (completed, seen_now);
                self.reported.remove(&dev);
                self.last_seen.remove(&dev);
            }
            let unseen = (completed - base.0).saturating_sub(seen_now - base.1);
            let reported = self.reported.entry(dev).or_insert(0);
            let new_unseen = unseen.saturating_sub(*reported);
            *reported += new_unseen;
            let last = self.last_seen.entry(dev).or_insert(base.1);
            let new_seen = seen_now - *last;
            *last = seen_now;
            if new_seen > 0 || new_unseen > 0 {
                out.push(DiskTally {
                    dev,
                    seen: new_seen,
                    unseen: new_unseen,
                });
            }
        }
        out
    }

    /// Unseen I/Os reported since the start, all disks.
    pub fn total(&self) -> u64 {
        self.reported.values().sum()
    }
}

/// The text of an unseen-I/O report: `1 I/O completed on loop0 (per /proc/diskstats) never
/// reached the BPF programs`.
pub fn describe_unseen(n: u64, disk: &str) -> String {
    let noun = if n == 1 { "I/O" } else { "I/Os" };
    format!("{n} {noun} completed on {disk} (per /proc/diskstats) never reached the BPF programs")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
   7       0 loop0 10 0 80 1 5 0 40 2 0 3 3 2 0 16 0 4 1
   7       1 loop1 1 0 8 0 0 0 0 0 0 0 0
 254       0 vda 100 1 800 9 50 2 400 8 0 20 17 0 0 0 0 7 0
 254       1 vda1 90 1 700 9 50 2 400 8 0 20 17 0 0 0 0 0 0
 251       0 zram0 5 0 40 0 5 0 40 0 0 0 0 0 0 0 0 0 0";

    fn sample() -> HashMap<u32, u64> {
        parse_diskstats(SAMPLE, |n| ["loop0", "loop1", "vda"].contains(&n))
    }

    #[test]
    fn diskstats_counts_reads_writes_discards_and_flushes_of_whole_request_disks() {
        let c = sample();
        assert_eq!(c[&kernel_dev(7, 0)], 10 + 5 + 2 + 4);
        assert_eq!(c[&kernel_dev(7, 1)], 1, "an old kernel's short line");
        assert_eq!(c[&kernel_dev(254, 0)], 100 + 50 + 7);
        assert!(
            !c.contains_key(&kernel_dev(254, 1)),
            "partitions are left out"
        );
        assert!(
            !c.contains_key(&kernel_dev(251, 0)),
            "bio-based disks are left out"
        );
    }

    fn ios(pairs: &[(u32, u64)]) -> HashMap<u32, u64> {
        pairs.iter().copied().collect()
    }

    fn tally(dev: u32, seen: u64, unseen: u64) -> DiskTally {
        DiskTally { dev, seen, unseen }
    }

    fn from(only: Option<u32>, base: &[(u32, (u64, u64))]) -> UnseenIos {
        UnseenIos {
            only,
            base: base.iter().copied().collect(),
            last_seen: HashMap::new(),
            reported: HashMap::new(),
        }
    }

    #[test]
    fn what_diskstats_counted_and_the_programs_did_not_is_reported_once() {
        let d = kernel_dev(7, 0);
        let mut u = from(None, &[(d, (100, 0))]);
        // 50 completed, all seen.
        assert_eq!(
            u.reconcile(&ios(&[(d, 150)]), &ios(&[(d, 50)])),
            vec![tally(d, 50, 0)]
        );
        // 50 more, 49 seen: one unseen.
        assert_eq!(
            u.reconcile(&ios(&[(d, 200)]), &ios(&[(d, 99)])),
            vec![tally(d, 49, 1)]
        );
        // The programs ran ahead of diskstats (an I/O between the two reads): no negative loss,
        // and the one already reported is not reported again.
        assert_eq!(
            u.reconcile(&ios(&[(d, 200)]), &ios(&[(d, 100)])),
            vec![tally(d, 1, 0)]
        );
        assert!(u.reconcile(&ios(&[(d, 201)]), &ios(&[(d, 100)])).is_empty());
        assert_eq!(u.total(), 1);
    }

    #[test]
    fn a_disk_filter_ignores_other_disks_and_new_disks_start_from_now() {
        let (a, b) = (kernel_dev(7, 0), kernel_dev(7, 1));
        let mut only = from(Some(a), &[(a, (0, 0))]);
        assert_eq!(
            only.reconcile(&ios(&[(a, 5), (b, 9)]), &ios(&[(a, 5)])),
            vec![tally(a, 5, 0)]
        );
        let mut all = from(None, &[]);
        assert!(all.reconcile(&ios(&[(b, 9)]), &ios(&[])).is_empty());
        assert_eq!(
            all.reconcile(&ios(&[(b, 12)]), &ios(&[(b, 2)])),
            vec![tally(b, 2, 1)]
        );
    }

    #[test]
    fn unseen_text_agrees_with_its_count() {
        assert_eq!(
            describe_unseen(1, "loop0"),
            "1 I/O completed on loop0 (per /proc/diskstats) never reached the BPF programs"
        );
        assert!(describe_unseen(2, "vda").starts_with("2 I/Os completed on vda"));
    }
}
