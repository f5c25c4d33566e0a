//! A reader whose calls iostack's tests know: how many, of what kind, and what the kernel's own
//! per-thread accounting says about them.
//!
//! `breakdown_workload direct|cached|buffered PATH N [--cgroup DIR] [--spin] [--whole]`
//! `breakdown_workload pipe MS N`
//!
//! - `direct`: N O_DIRECT 4 KiB pread() of PATH (a disk or a file), at blocks 0, 1, 2...
//! - `cached`: PATH is read through once first (so it is cached), then N 4 KiB pread() at 0.
//! - `buffered`: one read() of N bytes of PATH through the page cache, dropped from it first
//!   (POSIX_FADV_DONTNEED): with readahead off (the disk's `queue/read_ahead_kb` 0), one call
//!   that waits for one 4 KiB request after another, with nothing outside it in between.
//! - `pipe`: N read() of one byte of a pipe, each written by the main thread MS milliseconds
//!   after the reader has gone to sleep in that read (seen in its /proc/.../syscall), so that
//!   every read sleeps at least MS: a writer that starts its clock when the reads start lets
//!   each read sleep MS less the reader's own way into it (149.5 ms for 3 x 50 ms, seen under
//!   TCG on 6.12, 2026-11-25).
//! - `--cgroup DIR`: the process moves into that cgroup (its `cgroup.procs`) first, e.g. one
//!   whose blkio throttle slows PATH's disk.
//! - `--spin`: a thread spins on the reader's CPU (both pinned to it) at nice 0, and while it
//!   spins the reader is a batch thread at nice -10 (see `set_waking`): after each wakeup it
//!   waits for the tick that ends the spinner's turn rather than preempt it (62.9-67.0 ms over
//!   the 18-19 wakeups of an 80 KiB read, idle; 27.9-63.4 ms beside two CPU hogs at nice 10;
//!   the host, 2026-11-27). Beside a spinner at nice -10, a reader at nice 0 of the usual
//!   policy left it to the scheduler: 92-114 us in all, three runs running, on a fresh CI host.
//!
//! The reads are made by one thread. It prints `ready <pid> <reader tid>`, waits for SIGUSR1 (so
//! the tracer can attach first), then lets the reader make its N reads, and prints the kernel's
//! own account of the reader over its reads, from its /proc/<pid>/task/<tid>/schedstat
//! (run_delay, timeslices) and stat (delayacct_blkio_ticks), read by the main thread (whose own
//! reads are not the reader's), with the time that passed meanwhile and the reader's time on a
//! CPU: `reads N elapsed_ns E exec_ns X run_delay_ns D timeslices S blkio_ticks T requests_missed M`
//! (M, with --spin: the reader's requests the disk had done when the first figures were read, 0
//! where they were read in the wait for its first).
//!
//! The first figures are read while the reader sleeps in its first read (`direct`, `buffered`:
//! the main thread first reads a block of PATH itself, which spends a throttle's allowance, so
//! that the reader's first read waits), and the spinner starts only then; the last figures once
//! it has made its last read, the spinner stopped while it waits for its last request (the
//! disk's count of reads done tells which it waits for). So the count starts inside its calls,
//! and no wait for a CPU outside them is in the kernel's figures and not in a tracer's: not
//! after the wakeup that starts the reader, and not on its way out of its last read (where a
//! spinner's turn would be counted by the kernel and not by a tracer of the call: 42 ms of it
//! seen under TCG on 6.1 and 5.10, 2026-11-25, when the reader stopped the spinner itself after
//! its last read).
//!
//! `--whole`: the first figures are read before the reader's first call instead, as for reads
//! that never wait, so that they hold every call whole (and the loop between them): for a bound
//! on the calls' time on a CPU and waiting for one. Read inside the first call, they miss its
//! way to its first wait: 4 reads through dm-delay on 6.1 under TCG beside a CI run were on a
//! CPU or waiting for one 76 ms by iostack, 61 ms by those figures (2026-11-28).
//!
//! Those first figures are read once the reader is awake and on a CPU (its time there from its
//! CPU clock), not while it sleeps before its calls: the kernel's figures once counted such a
//! sleep as waiting for a CPU. 4 reads through dm-linear in 445 ms were, by figures read while
//! the reader slept (~10 s, while three tracers started), on a CPU or waiting for one 9495 ms
//! (6.12 under TCG, CI, 2026-11-28; the check took as long as its neighbours, so no 9 s went by
//! unseen). run_delay grows only when the thread is put on a CPU or taken off a run queue, by
//! the time since the scheduler last queued it (sched_info.last_queued): a clock left running
//! over a sleep is paid in at the thread's first run after it, so figures read after that run
//! hold none of it. Which path left it running is not known: 6.12's delayed dequeue keeps a
//! sleeper queued, and broke sched_info's pairing when it came (lkml, "[REGRESSION] ...
//! Implement delayed dequeue", 2024-10); 30 sleepers moved to another CPU while asleep under
//! the same guest kept run_delay below 5 ms.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

fn die(msg: String) -> ! {
    eprintln!("breakdown_workload: {msg}");
    std::process::exit(1)
}

fn tid() -> i32 {
    // SAFETY: gettid has no arguments.
    unsafe { libc::gettid() }
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t we own, with one CPU set, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
            die(format!(
                "sched_setaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
}

/// A thread at nice -10 that wakes without preempting (SCHED_BATCH: the scheduler checks for
/// wakeup preemption by SCHED_NORMAL threads only, on every kernel since 2.6), or again one that
/// preempts (SCHED_NORMAL). Beside a spinner at nice 0, a batch thread waits after each wakeup
/// for the tick that ends the spinner's turn, and is then the one picked (before anything at
/// nice 0 or above); outside the spinner's span it preempts, so that it waits for no other
/// thread of the machine where the kernel's figures do not see it.
fn set_waking(tid: libc::pid_t, preempts: bool) {
    let policy = if preempts {
        libc::SCHED_OTHER
    } else {
        libc::SCHED_BATCH
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler and setpriority on one of our threads with valid parameters.
    let set = unsafe {
        libc::sched_setscheduler(tid, policy, &param) == 0
            && libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -10) == 0
    };
    if !set {
        die(format!(
            "sched_setscheduler/setpriority of thread {tid}: {} (run as root)",
            std::io::Error::last_os_error()
        ));
    }
}

/// The calling thread runs on any CPU but `cpu`, where there is another.
fn keep_off(cpu: usize) {
    // SAFETY: a cpu_set_t we own, read and written for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return;
        }
        libc::CPU_CLR(cpu, &mut set);
        if libc::CPU_COUNT(&set) > 0 {
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
        }
    }
}

/// What the kernel says of one thread at one moment.
struct Accounting {
    /// CLOCK_MONOTONIC when read.
    at_ns: u64,
    /// schedstat: time on a CPU, waiting for one, and times put on one.
    exec_ns: u64,
    run_delay_ns: u64,
    timeslices: u64,
    /// delayacct_blkio_ticks (clock ticks).
    blkio_ticks: u64,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn accounting(pid: u32, tid: i32) -> Accounting {
    let dir = format!("/proc/{pid}/task/{tid}");
    let schedstat = std::fs::read_to_string(format!("{dir}/schedstat"))
        .unwrap_or_else(|e| die(format!("{dir}/schedstat: {e}")));
    let field = |i: usize| -> u64 {
        schedstat
            .split_whitespace()
            .nth(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| die(format!("{dir}/schedstat: {schedstat}")))
    };
    let (exec_ns, run_delay_ns, timeslices) = (field(0), field(1), field(2));
    let stat = std::fs::read_to_string(format!("{dir}/stat"))
        .unwrap_or_else(|e| die(format!("{dir}/stat: {e}")));
    // Fields after the command name (which may hold spaces), counted from field 3 (state).
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let ticks = after
        .split_whitespace()
        .nth(42 - 3)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| die(format!("{dir}/stat: {stat}")));
    Accounting {
        at_ns: monotonic_ns(),
        exec_ns,
        run_delay_ns,
        timeslices,
        blkio_ticks: ticks,
    }
}

/// The kernel's figures for a thread that is awake (running, or about to): its time on a CPU
/// from its CPU clock, which adds the time since the scheduler last charged it (schedstat's
/// figure lags by that while it runs); run_delay and the rest as `accounting` reads them.
fn accounting_awake(pid: u32, tid: i32, thread: libc::pthread_t) -> Accounting {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the thread is alive (it waits for us to read this); writes the clock id we own.
    let err = unsafe { libc::pthread_getcpuclockid(thread, &mut clock) };
    if err != 0 {
        die(format!(
            "pthread_getcpuclockid: {}",
            std::io::Error::from_raw_os_error(err)
        ));
    }
    let mut figures = accounting(pid, tid);
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        die(format!(
            "the reader's CPU clock: {}",
            std::io::Error::last_os_error()
        ));
    }
    figures.exec_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    figures
}

/// One O_DIRECT read of block `block` (past the reader's), by the main thread.
fn spend_allowance(path: &CString, block: u64) {
    let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
    // SAFETY: a descriptor of our own and a 4 KiB aligned buffer, used and freed here.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECT);
        let buf = std::alloc::alloc(layout);
        if fd < 0 || libc::pread(fd, buf.cast(), 4096, (block * 4096) as i64) < 0 {
            die(format!(
                "spending the allowance: {}",
                std::io::Error::last_os_error()
            ));
        }
        std::alloc::dealloc(buf, layout);
        libc::close(fd);
    }
}

/// The thread's state letter and how many times it has gone to sleep (voluntary context
/// switches), from one read of its /proc status.
fn sleep_state(pid: u32, tid: i32) -> (char, u64) {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let state = field("State:").and_then(|v| v.chars().next());
    let sleeps = field("voluntary_ctxt_switches:").and_then(|v| v.parse().ok());
    (state.unwrap_or('?'), sleeps.unwrap_or(0))
}

/// Polls `ready` every 100 us for up to 10 s; its value once it has one.
fn poll<T>(what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    for _ in 0..100_000 {
        if let Some(v) = ready() {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    die(format!("waited 10 s for {what}"))
}

/// The kernel's figures for the thread, read once `late_enough` and while it sleeps
/// uninterruptibly (in a wait for I/O) with the same count of sleeps just before and just
/// after: so no wait for a CPU is counted in part.
/// Also returns `beside()`, read in the same sleep.
fn accounting_asleep<T>(
    pid: u32,
    tid: i32,
    late_enough: impl Fn() -> bool,
    beside: impl Fn() -> T,
) -> (Accounting, T) {
    poll(&format!("thread {tid} to sleep for I/O"), || {
        let (state, sleeps) = sleep_state(pid, tid);
        if state != 'D' || !late_enough() {
            return None;
        }
        let figures = accounting(pid, tid);
        let also = beside();
        (sleep_state(pid, tid) == (state, sleeps)).then_some((figures, also))
    })
}

/// Reads completed by the disk at `path` (its /sys/dev/block/MAJ:MIN/stat).
fn disk_reads(path: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(path)
        .unwrap_or_else(|e| die(format!("{path}: {e}")))
        .rdev();
    let stat = format!(
        "/sys/dev/block/{}:{}/stat",
        libc::major(rdev),
        libc::minor(rdev)
    );
    std::fs::read_to_string(&stat)
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| die(format!("{path} is no disk (--spin needs one): no {stat}")))
}

/// Waits until the thread sleeps in a read() of `fd`, having gone to sleep more than `after`
/// times (a thread being woken still names its call, so the read it slept in then is not taken
/// for the next); returns how many times it has.
fn wait_in_read(pid: u32, tid: i32, fd: i32, after: u64) -> u64 {
    // Only a sleeping thread's call is named there ("NR 0xARG0 ..."); else "running".
    let syscall = format!("/proc/{pid}/task/{tid}/syscall");
    let reading = format!("{} {:#x} ", libc::SYS_read, fd);
    poll(&format!("thread {tid} to sleep in its read"), || {
        let now = std::fs::read_to_string(&syscall).unwrap_or_default();
        let (_, n) = sleep_state(pid, tid);
        (now.starts_with(&reading) && n > after).then_some(n)
    })
}

/// A pipe's two ends.
fn pipe() -> (i32, i32) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array we pass.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        die(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    (fds[0], fds[1])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || {
        die("usage: breakdown_workload direct|cached|buffered PATH N [--cgroup DIR] [--spin] [--whole]\n       breakdown_workload pipe MS N".into())
    };
    let (Some(mode), Some(path), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        usage()
    };
    let n: u64 = n.parse().unwrap_or_else(|_| usage());
    let (direct, buffered, piped) = match mode.as_str() {
        "direct" => (true, false, false),
        "cached" => (false, false, false),
        "buffered" => (false, true, false),
        "pipe" => (false, false, true),
        _ => usage(),
    };
    // Modes whose reads wait for the disk: the first figures are read in the first wait.
    let waits = direct || buffered;
    // How many times the reader waits for the disk: once a read, or once a 4 KiB request of the
    // one buffered read (readahead off).
    let io_waits = if buffered { n.div_ceil(4096) } else { n };
    let (mut spin, mut whole) = (false, false);
    let mut rest = args[4..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--spin" => spin = true,
            "--whole" => whole = true,
            "--cgroup" if !piped => {
                let dir = rest.next().unwrap_or_else(|| usage());
                std::fs::write(
                    format!("{dir}/cgroup.procs"),
                    std::process::id().to_string(),
                )
                .unwrap_or_else(|e| die(format!("joining {dir}: {e}")));
            }
            _ => usage(),
        }
    }
    let c_path = CString::new(path.as_bytes()).unwrap_or_else(|_| usage());
    if piped {
        // No I/O anywhere in the process, by construction: its pages locked in, so that no
        // thread waits for a page fault's read (the writer did, 344 us while the reader slept,
        // on a CI host under two builds' page cache churn, 2026-11-26: the reader's sleep was
        // then rightly the writer's I/O through a waker).
        // SAFETY: no pointers; locks the process's pages now and later.
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            die(format!("mlockall: {}", std::io::Error::last_os_error()));
        }
    }
    let (fd, pipe_in, pipe_ms) = if piped {
        let (r, w) = pipe();
        (r, w, path.parse::<u64>().unwrap_or_else(|_| usage()))
    } else {
        let flags = libc::O_RDONLY | if direct { libc::O_DIRECT } else { 0 };
        // SAFETY: open on a C string we own.
        let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
        if fd < 0 {
            die(format!("open {path}: {}", std::io::Error::last_os_error()));
        }
        (fd, -1, 0)
    };
    if !waits && !piped {
        let _ = std::fs::read(path);
    }
    if buffered {
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(fd, 0, n as i64, libc::POSIX_FADV_DONTNEED) };
    }
    // SIGUSR1 is waited for with sigwaitinfo, in every thread blocked.
    // SAFETY: sigset manipulation on a zeroed sigset_t we own.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let stop = Arc::new(AtomicBool::new(false));
    // The spinner starts once the first figures are read (see above): until then the reader has
    // its CPU to itself, so it waits for none inside its first read before it sleeps.
    let spin_start = Arc::new(Barrier::new(2));
    if spin {
        // The main thread polls every 100 us while it waits to read the first figures: on the
        // reader's CPU it would make the reader wait where the kernel's figures do not see it
        // (1.15 ms more run queue by iostack than by them, a CI host with both CPUs busy,
        // 2026-11-27). Its own threads start after this and pin themselves.
        keep_off(0);
    }
    let spinner = spin.then(|| {
        let (stop, spin_start) = (stop.clone(), spin_start.clone());
        thread::spawn(move || {
            pin_to(0);
            spin_start.wait();
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    });
    let start = Arc::new(Barrier::new(2));
    let done = Arc::new(Barrier::new(2));
    // The reader has made its reads (fewer requests than planned reach the disk when someone
    // else, e.g. udev's blkid on a new loop device, brought some of its pages in first).
    let finished = Arc::new(AtomicBool::new(false));
    // The reader lives until its accounting has been read.
    let read = Arc::new(Barrier::new(2));
    // CLOCK_MONOTONIC just before the reader's first read: the first figures are read inside
    // it, so what the reader waited for a CPU between the two is in a tracer's account of the
    // call and not in the figures (`lead_ns`).
    let entered = Arc::new(AtomicU64::new(0));
    // CLOCK_MONOTONIC just after its last read returned: the last figures are read after it, so
    // what the reader waited for a CPU between the two is in the figures and not in a tracer's
    // account of the call (`tail_ns`).
    let left = Arc::new(AtomicU64::new(0));
    // Figures read before the reader's first call (reads that never wait, or --whole) are read
    // while it is awake (see above): it says it is (`awake`) and spins, yielding, until they
    // are (`go`).
    let early = !waits || whole;
    let (awake, go) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let (start, done, read) = (start.clone(), done.clone(), read.clone());
        let finished = finished.clone();
        let (entered, left) = (entered.clone(), left.clone());
        let (awake, go) = (awake.clone(), go.clone());
        let prime_path = c_path.clone();
        thread::spawn(move || {
            if spin {
                pin_to(0);
                set_waking(0, true);
            }
            // With --spin (the agreement with the kernel's accounting), one wait for I/O before
            // the tracer starts: the kernel's delay accounting of a thread's very first I/O
            // wait can be garbage (6.12+: seen as the whole uptime on the CI host's 6.18), so
            // the counted waits are never the first.
            if spin && waits {
                spend_allowance(&prime_path, 32);
            }
            tx.send(tid()).ok();
            // A buffer aligned for O_DIRECT: 4 KiB, or N bytes for the one buffered read.
            let size = if buffered { n as usize } else { 4096 };
            let layout = std::alloc::Layout::from_size_align(size.max(4096), 4096).unwrap();
            // SAFETY: a non-zero layout; freed below.
            let buf = unsafe { std::alloc::alloc(layout) };
            start.wait();
            if early {
                awake.store(true, Ordering::Release);
                while !go.load(Ordering::Acquire) {
                    thread::yield_now();
                }
            }
            entered.store(monotonic_ns(), Ordering::Relaxed);
            if buffered {
                // SAFETY: reads at most `size` bytes into the buffer we allocated.
                if unsafe { libc::read(fd, buf.cast(), size) } < 0 {
                    die(format!("read: {}", std::io::Error::last_os_error()));
                }
            }
            for i in 0..if buffered { 0 } else { n } {
                let off = if direct { (i * 4096) as i64 } else { 0 };
                // SAFETY: reads at most 4096 bytes into the buffer we allocated.
                let got = if piped {
                    unsafe { libc::read(fd, buf.cast(), 1) }
                } else {
                    unsafe { libc::pread(fd, buf.cast(), 4096, off) }
                };
                if got < 0 {
                    die(format!("read: {}", std::io::Error::last_os_error()));
                }
            }
            left.store(monotonic_ns(), Ordering::Relaxed);
            finished.store(true, Ordering::Relaxed);
            done.wait();
            read.wait();
            // SAFETY: allocated above with this layout.
            unsafe { std::alloc::dealloc(buf, layout) };
        })
    };
    let reader_tid = rx
        .recv()
        .unwrap_or_else(|_| die("reader thread died".into()));
    let pid = std::process::id();
    println!("ready {pid} {reader_tid}");
    std::io::stdout().flush().ok();
    // SAFETY: waits for the signal blocked above.
    unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
    if waits {
        spend_allowance(&c_path, n.max(1 << 20) / 4096 + 64);
    }
    // The disk's count before any of the reader's requests.
    let reads_before = if spin && waits { disk_reads(path) } else { 0 };
    start.wait();
    // Reads that never wait (`cached`, `pipe`), or --whole: the figures are read before the
    // reader's first call, so that they hold all of its calls, and once it is awake.
    let early = early.then(|| {
        poll("the reader to wake", || {
            awake.load(Ordering::Acquire).then_some(())
        });
        let figures = accounting_awake(pid, reader_tid, reader.as_pthread_t());
        go.store(true, Ordering::Release);
        figures
    });
    // `late`: how many of the reader's requests the disk had done when the first figures were
    // read (0: read in the wait for its first, as they should be; --spin, which names a disk).
    // Under TCG they were once read about ten requests late (5.10, 2026-11-26: 10 timeslices
    // for 20 requests), and held against the whole call they are wrong.
    let (before, late) = if waits && !whole {
        accounting_asleep(
            pid,
            reader_tid,
            || true,
            || match spin {
                true => disk_reads(path).saturating_sub(reads_before),
                false => 0,
            },
        )
    } else {
        (
            early.expect("read when the reads do not wait, or --whole"),
            0,
        )
    };
    if spin {
        set_waking(reader_tid as libc::pid_t, false);
        spin_start.wait();
    }
    let mut slept = 0;
    for _ in 0..if piped { n } else { 0 } {
        slept = wait_in_read(pid, reader_tid, fd, slept);
        thread::sleep(std::time::Duration::from_millis(pipe_ms));
        // SAFETY: writing one byte from a static to our pipe.
        if unsafe { libc::write(pipe_in, b"x".as_ptr().cast(), 1) } != 1 {
            die(format!("write: {}", std::io::Error::last_os_error()));
        }
    }
    if spin && waits {
        // The spinner stops once the disk has done all but the reader's last request: so its
        // last wakeup, and its way out of its last read, wait for no spinner (see above).
        let last = reads_before + io_waits - 1;
        poll("the disk to do all but the last request", || {
            (disk_reads(path) >= last || finished.load(Ordering::Relaxed)).then_some(())
        });
        // The reader preempts again before the spinner stops: no wakeup of it finds it a batch
        // thread once the spinner's span is over.
        set_waking(reader_tid as libc::pid_t, true);
        stop.store(true, Ordering::Relaxed);
    }
    done.wait();
    let after = accounting(pid, reader_tid);
    read.wait();
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    if let Some(s) = spinner {
        let _ = s.join();
    }
    println!(
        "reads {} elapsed_ns {} exec_ns {} run_delay_ns {} timeslices {} blkio_ticks {} requests_missed {} lead_ns {} tail_ns {}",
        if buffered { 1 } else { n },
        after.at_ns - before.at_ns,
        after.exec_ns - before.exec_ns,
        after.run_delay_ns - before.run_delay_ns,
        after.timeslices - before.timeslices,
        after.blkio_ticks - before.blkio_ticks,
        late,
        before
            .at_ns
            .saturating_sub(entered.load(Ordering::Relaxed)),
        after.at_ns.saturating_sub(left.load(Ordering::Relaxed))
    );
}
