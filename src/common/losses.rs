//! One vocabulary of losses for every tool: what a tool could not account is named the same way
//! in its text, its JSON and the README, whether it prints histograms or events. The kernel side
//! counts its kinds in `losses[]` (`src/bpf/lib/losses.bpf.h`, the same order as
//! `Loss::KERNEL`); `unseen` is found in user space (`common::block::unseen`).

use serde_json::json;

/// A kind of loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loss {
    /// An end (completion, syscall exit) without a recorded start.
    NoStart,
    /// A start that could not be stored (the start map refused it).
    StartFull,
    /// A latency that could not be recorded: no room for another histogram.
    HistFull,
    /// A start time after the end time.
    Clock,
    /// An event the ring buffer had no room for: user space fell behind.
    RingBufferFull,
    /// Completed per /proc/diskstats, never seen by the BPF programs.
    Unseen,
    /// A sleep whose wakeup no program saw (the kernel did not run it): its cause is unknown,
    /// and the sleep is charged by the kernel's in_iowait flag alone (the validator), or the
    /// call's sleeps by those seen (iostack: fewer wakeups seen than voluntary switches).
    NoWake,
    /// An end the kernel did not run our program for: it would have run nested in itself on
    /// one CPU (the program's `recursion_misses`, read from the kernel).
    Skipped,
    /// A stacked device's request whose bio above could not be found: its I/O is not linked
    /// to the call that waited for it.
    Unlinked,
    /// A wait followed through a waker whose record of its own waits was cut: it no longer
    /// reached back to the wait's start, or there was no room to keep it.
    ChainCut,
    /// iostack's validator: a switch onto a CPU no program saw (the kernel did not run it):
    /// how long the thread waited for that CPU is unknown.
    NoSwitch,
}

/// How many of what: the noun a tool counts in (`I/O`, `call`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Noun {
    pub one: &'static str,
    pub many: &'static str,
}

pub const IOS: Noun = Noun {
    one: "I/O",
    many: "I/Os",
};
pub const CALLS: Noun = Noun {
    one: "call",
    many: "calls",
};

impl Loss {
    /// The kernel's counters, in the order of `enum loss_kind`.
    pub const KERNEL: [Loss; 9] = [
        Loss::NoStart,
        Loss::StartFull,
        Loss::HistFull,
        Loss::Clock,
        Loss::RingBufferFull,
        Loss::NoWake,
        Loss::Unlinked,
        Loss::ChainCut,
        Loss::NoSwitch,
    ];

    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Loss::NoStart => "no_start",
            Loss::StartFull => "start_full",
            Loss::HistFull => "hist_full",
            Loss::Clock => "clock",
            Loss::RingBufferFull => "ring_buffer_full",
            Loss::Unseen => "unseen",
            Loss::Skipped => "skipped",
            Loss::NoWake => "no_wake",
            Loss::Unlinked => "unlinked",
            Loss::ChainCut => "chain_cut",
            Loss::NoSwitch => "no_switch",
        }
    }

    fn why(self) -> &'static str {
        match self {
            Loss::NoStart => {
                "ended without a recorded start (in flight when tracing began, or evicted)"
            }
            Loss::StartFull => "whose start could not be stored (start map full)",
            Loss::HistFull => "not recorded: the histogram map was full",
            Loss::Clock => "with a start time after their end",
            Loss::RingBufferFull => {
                "not shown: the ring buffer was full (output could not keep up)"
            }
            Loss::Unseen => "completed (per /proc/diskstats) that never reached the BPF programs",
            Loss::Skipped => {
                "not timed: the kernel skipped the program at their end (it would have run nested in itself on one CPU)"
            }
            Loss::NoWake => {
                "with a sleep whose wakeup no program saw (the kernel did not run it): charged by the kernel's in_iowait flag alone"
            }
            Loss::Unlinked => {
                "of a stacked device whose bio above was not found: not linked to the call that waited"
            }
            Loss::ChainCut => {
                "followed through a waker whose record of its waits did not reach back (or found no room): the rest of that sleep is other sleep"
            }
            Loss::NoSwitch => {
                "whose switch onto a CPU no program saw (the kernel did not run it): that wait for a CPU is charged to the CPU"
            }
        }
    }

    /// `1 I/O ended without a recorded start (...)`, `2 calls whose start could not be stored ...`.
    pub fn describe(self, n: u64, noun: Noun) -> String {
        let noun = if n == 1 { noun.one } else { noun.many };
        format!("{n} {noun} {}", self.why())
    }
}

/// What an event tool can lose, in the order of its summary: the ring buffer, a missing or
/// unstorable start, the clock, then the kind only it has (`unseen`, `skipped`).
pub const fn event_losses(own: Loss) -> [Loss; 5] {
    [
        Loss::RingBufferFull,
        Loss::NoStart,
        Loss::StartFull,
        Loss::Clock,
        own,
    ]
}

/// Turns the kernel's cumulative `losses[]` into what is new since the last call.
#[derive(Default)]
pub struct LossTally {
    last: [u64; Loss::KERNEL.len()],
}

impl LossTally {
    /// New losses of the kinds in `kinds` (in that order; `Unseen` is not a kernel counter and
    /// is left out).
    pub fn delta(&mut self, now: &[u64; Loss::KERNEL.len()], kinds: &[Loss]) -> Vec<(Loss, u64)> {
        let mut out = Vec::with_capacity(kinds.len());
        for &kind in kinds {
            if let Some(i) = Loss::KERNEL.iter().position(|&k| k == kind) {
                out.push((kind, now[i].wrapping_sub(self.last[i])));
            }
        }
        self.last = *now;
        out
    }
}

/// Reads the kernel's `losses[]` from a mapped .bss, which the programs update concurrently.
pub fn read_kernel_losses(losses: &[u64; Loss::KERNEL.len()]) -> [u64; Loss::KERNEL.len()] {
    // SAFETY: the array lives in the object's mmap-ed .bss for the skeleton's life; volatile
    // reads, as the kernel writes it concurrently.
    std::array::from_fn(|i| unsafe { std::ptr::read_volatile(&losses[i]) })
}

/// How many times the kernel skipped these programs rather than run one nested in itself on a
/// CPU (`bpf_prog_info.recursion_misses`, 5.12+; 0 where the kernel does not count them).
pub fn recursion_misses<'a>(progs: impl Iterator<Item = std::os::fd::BorrowedFd<'a>>) -> u64 {
    progs
        .map(|fd| prog_info(fd).map_or(0, |info| info.recursion_misses))
        .sum()
}

/// The runs the kernel skipped of some of an object's programs (their `recursion_misses`), new
/// since the last call: the loss `skipped`.
pub struct SkippedRuns {
    programs: Vec<&'static str>,
    seen: u64,
}

impl SkippedRuns {
    pub fn new(programs: Vec<&'static str>) -> SkippedRuns {
        SkippedRuns { programs, seen: 0 }
    }

    pub fn take(&mut self, object: &libbpf_rs::Object) -> u64 {
        use std::os::fd::AsFd as _;
        let progs: Vec<_> = object
            .progs()
            .filter(|p| self.programs.iter().any(|n| p.name() == *n))
            .collect();
        let now = recursion_misses(progs.iter().map(|p| p.as_fd()));
        let new = now.saturating_sub(self.seen);
        self.seen = now;
        new
    }
}

/// A loaded program's `bpf_prog_info` (run counters, name...), or the errno bpf(2) returned.
pub fn prog_info(fd: std::os::fd::BorrowedFd<'_>) -> Result<libbpf_sys::bpf_prog_info, i32> {
    use std::os::fd::AsRawFd;
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // bpf_obj_get_info_by_fd, not bpf_prog_get_info_by_fd: the latter is libbpf 1.2+, and
    // distributions build us against their libbpf (Debian 12 has 1.1).
    // SAFETY: bpf(2) fills at most `len` bytes of the info we own.
    let rc = unsafe {
        libbpf_sys::bpf_obj_get_info_by_fd(
            fd.as_raw_fd(),
            (&mut info as *mut libbpf_sys::bpf_prog_info).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(info)
    } else {
        Err(-rc)
    }
}

/// A loss reported in-band by an event tool, as it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LossEvent {
    pub kind: Loss,
    pub n: u64,
    /// The disk, for `unseen`.
    pub disk: Option<String>,
}

impl LossEvent {
    /// `lost N ...` or `{"lost":N,"reason":"..."}` (with `"disk"` when known).
    pub fn line(&self, noun: Noun, json: bool) -> String {
        if json {
            let mut v = json!({"lost": self.n, "reason": self.kind.name()});
            if let Some(d) = &self.disk {
                v["disk"] = d.as_str().into();
            }
            return v.to_string();
        }
        match (&self.disk, self.kind) {
            (Some(d), Loss::Unseen) => {
                format!(
                    "lost {}",
                    crate::common::block::unseen::describe_unseen(self.n, d)
                )
            }
            _ => format!("lost {}", self.kind.describe(self.n, noun)),
        }
    }
}

/// Totals of an event tool's losses, for its closing summary.
pub struct LossTotals {
    kinds: &'static [Loss],
    totals: Vec<u64>,
}

impl LossTotals {
    pub fn new(kinds: &'static [Loss]) -> LossTotals {
        LossTotals {
            kinds,
            totals: vec![0; kinds.len()],
        }
    }

    pub fn add(&mut self, kind: Loss, n: u64) {
        if let Some(i) = self.kinds.iter().position(|&k| k == kind) {
            self.totals[i] += n;
        }
    }

    /// `\n200 events, 0 lost (ring_buffer_full 0, ...)`, or `{"summary":{...}}`.
    pub fn summary(&self, events: u64, json: bool) -> String {
        let lost: u64 = self.totals.iter().sum();
        if json {
            let mut fields = serde_json::Map::new();
            fields.insert("events".into(), events.into());
            fields.insert("lost".into(), lost.into());
            for (kind, n) in self.kinds.iter().zip(&self.totals) {
                fields.insert(kind.name().into(), (*n).into());
            }
            return json!({ "summary": fields }).to_string();
        }
        let parts: Vec<String> = self
            .kinds
            .iter()
            .zip(&self.totals)
            .map(|(k, n)| format!("{} {n}", k.name()))
            .collect();
        format!("\n{events} events, {lost} lost ({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_agree_with_their_count() {
        assert_eq!(
            Loss::NoStart.describe(1, IOS),
            "1 I/O ended without a recorded start (in flight when tracing began, or evicted)"
        );
        assert_eq!(
            Loss::StartFull.describe(3, CALLS),
            "3 calls whose start could not be stored (start map full)"
        );
    }

    #[test]
    fn only_growth_is_reported_for_the_tools_kinds() {
        let mut t = LossTally::default();
        let kinds = [Loss::RingBufferFull, Loss::NoStart];
        assert_eq!(
            t.delta(&[1, 0, 0, 0, 3, 0, 0, 0, 0], &kinds),
            vec![(Loss::RingBufferFull, 3), (Loss::NoStart, 1)]
        );
        assert_eq!(
            t.delta(&[1, 0, 0, 0, 5, 0, 0, 0, 0], &kinds),
            vec![(Loss::RingBufferFull, 2), (Loss::NoStart, 0)]
        );
    }

    #[test]
    fn in_band_lines_and_summary() {
        let e = LossEvent {
            kind: Loss::RingBufferFull,
            n: 2,
            disk: None,
        };
        assert_eq!(
            e.line(IOS, false),
            "lost 2 I/Os not shown: the ring buffer was full (output could not keep up)"
        );
        assert_eq!(
            e.line(IOS, true),
            r#"{"lost":2,"reason":"ring_buffer_full"}"#
        );
        let u = LossEvent {
            kind: Loss::Unseen,
            n: 1,
            disk: Some("loop0".into()),
        };
        assert_eq!(
            u.line(IOS, true),
            r#"{"disk":"loop0","lost":1,"reason":"unseen"}"#
        );
        assert!(u
            .line(IOS, false)
            .starts_with("lost 1 I/O completed on loop0"));
        static KINDS: [Loss; 2] = [Loss::RingBufferFull, Loss::Unseen];
        let mut totals = LossTotals::new(&KINDS);
        totals.add(Loss::RingBufferFull, 5);
        totals.add(Loss::Unseen, 1);
        assert_eq!(
            totals.summary(7, false),
            "\n7 events, 6 lost (ring_buffer_full 5, unseen 1)"
        );
        let v: serde_json::Value = serde_json::from_str(&totals.summary(7, true)).unwrap();
        assert_eq!(v["summary"]["lost"], 6);
        assert_eq!(v["summary"]["unseen"], 1);
    }
}
