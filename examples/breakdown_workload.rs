//! A reader whose calls iostack's tests know: how many, of what kind, and what the kernel's own
//! per-thread accounting says about them.
//!
//! `breakdown_workload direct|cached PATH N [--cgroup DIR] [--spin]`
//!
//! - `direct`: N O_DIRECT 4 KiB pread() of PATH (a disk or a file), at blocks 0, 1, 2...
//! - `cached`: PATH is read through once first (so it is cached), then N 4 KiB pread() at 0.
//! - `--cgroup DIR`: the process moves into that cgroup (its `cgroup.procs`) first, e.g. one
//!   whose blkio throttle slows PATH's disk.
//! - `--spin`: a thread spins on the reader's CPU (both pinned to it), and the reader runs at
//!   nice 10, so that after each wakeup it waits for the spinner's turn to end rather than
//!   preempt it.
//!
//! The reads are made by one thread. It prints `ready <pid> <reader tid>`, waits for SIGUSR1 (so
//! the tracer can attach first), then the main thread reads the reader's
//! /proc/<pid>/task/<tid>/schedstat (run_delay) and stat (delayacct_blkio_ticks), lets the
//! reader make its N reads, reads them again, and prints the kernel's own account of the reader
//! over exactly its reads (the main thread's own reads are not the reader's), with the number of times it
//! was put on a CPU: `reads N run_delay_ns D timeslices S blkio_ticks T`.

use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// (run_delay ns, timeslices run, delayacct_blkio_ticks) of one thread.
fn accounting(pid: u32, tid: i32) -> (u64, u64, u64) {
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
    let (run_delay, timeslices) = (field(1), field(2));
    let stat = std::fs::read_to_string(format!("{dir}/stat"))
        .unwrap_or_else(|e| die(format!("{dir}/stat: {e}")));
    // Fields after the command name (which may hold spaces), counted from field 3 (state).
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let ticks = after
        .split_whitespace()
        .nth(42 - 3)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| die(format!("{dir}/stat: {stat}")));
    (run_delay, timeslices, ticks)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        || die("usage: breakdown_workload direct|cached PATH N [--cgroup DIR] [--spin]".into());
    let (Some(mode), Some(path), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        usage()
    };
    let n: u64 = n.parse().unwrap_or_else(|_| usage());
    let direct = match mode.as_str() {
        "direct" => true,
        "cached" => false,
        _ => usage(),
    };
    let mut spin = false;
    let mut rest = args[4..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--spin" => spin = true,
            "--cgroup" => {
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
    let flags = libc::O_RDONLY | if direct { libc::O_DIRECT } else { 0 };
    // SAFETY: open on a C string we own.
    let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
    if fd < 0 {
        die(format!("open {path}: {}", std::io::Error::last_os_error()));
    }
    if !direct {
        let _ = std::fs::read(path);
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
    let spinner = spin.then(|| {
        let stop = stop.clone();
        thread::spawn(move || {
            pin_to(0);
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    });
    let start = Arc::new(Barrier::new(2));
    // The reader is running (not waiting for a CPU after its wakeup), and may begin: the first
    // snapshot is taken in between, so that its wait for a CPU after the barrier, outside any
    // of its reads, is not counted.
    let running = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Barrier::new(2));
    // The reader lives until its accounting has been read.
    let read = Arc::new(Barrier::new(2));
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let (start, done, read) = (start.clone(), done.clone(), read.clone());
        let (running, go) = (running.clone(), go.clone());
        thread::spawn(move || {
            if spin {
                pin_to(0);
                // SAFETY: setpriority on the calling thread (who 0).
                unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
            }
            tx.send(tid()).ok();
            // A 4 KiB buffer aligned for O_DIRECT.
            let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
            // SAFETY: a non-zero layout; freed below.
            let buf = unsafe { std::alloc::alloc(layout) };
            start.wait();
            running.store(true, Ordering::SeqCst);
            while !go.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            for i in 0..n {
                let off = if direct { (i * 4096) as i64 } else { 0 };
                // SAFETY: reads at most 4096 bytes into the buffer we allocated.
                if unsafe { libc::pread(fd, buf.cast(), 4096, off) } < 0 {
                    die(format!("pread: {}", std::io::Error::last_os_error()));
                }
            }
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
    start.wait();
    while !running.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    let before = accounting(pid, reader_tid);
    go.store(true, Ordering::SeqCst);
    done.wait();
    let after = accounting(pid, reader_tid);
    read.wait();
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    if let Some(s) = spinner {
        let _ = s.join();
    }
    println!(
        "reads {n} run_delay_ns {} timeslices {} blkio_ticks {}",
        after.0 - before.0,
        after.1 - before.1,
        after.2 - before.2
    );
}
