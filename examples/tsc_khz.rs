//! The kernel matrix's clock helper: `tsc_khz` prints this machine's TSC frequency in kHz,
//! measured against CLOCK_MONOTONIC over 200 ms. QEMU's TCG hands a guest the host's TSC
//! (rdtsc reads the host's counter), so run-matrix gives the guest this figure
//! (`tsc_early_khz=`) instead of letting it calibrate its TSC against an emulated PIT or HPET
//! while QEMU may be starved of the host's CPU: a 6.12 VM of a CI run (2026-11-27) calibrated
//! it about 2.2 times too slow and its clocks ran ahead (1046 s of uptime in 490 s of QEMU).
//!
//! Each end of the interval is the TSC read between two clock reads; the pair of clock reads
//! closest together (of 1000) brackets it, so a preemption between them cannot skew the figure.

#[cfg(target_arch = "x86_64")]
fn main() {
    use std::time::{Duration, Instant};

    // (TSC, the midpoint of the clock reads around it), from the tightest of many tries.
    fn stamp() -> (u64, Instant) {
        let mut best: Option<(Duration, u64, Instant)> = None;
        for _ in 0..1000 {
            let before = Instant::now();
            // SAFETY: rdtsc has no preconditions on x86_64.
            let tsc = unsafe { core::arch::x86_64::_rdtsc() };
            let after = Instant::now();
            let gap = after - before;
            if best.is_none_or(|(g, _, _)| gap < g) {
                best = Some((gap, tsc, before + gap / 2));
            }
        }
        let (_, tsc, at) = best.expect("a thousand tries");
        (tsc, at)
    }

    let (tsc0, t0) = stamp();
    std::thread::sleep(Duration::from_millis(200));
    let (tsc1, t1) = stamp();
    let ns = (t1 - t0).as_nanos();
    if ns == 0 || tsc1 <= tsc0 {
        eprintln!("tsc_khz: the TSC or the clock did not advance; no figure");
        std::process::exit(1);
    }
    println!("{}", u128::from(tsc1 - tsc0) * 1_000_000 / ns);
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("tsc_khz: x86_64 only (the kernel matrix boots x86_64 guests)");
    std::process::exit(1);
}
