//! The context-switch benchmark's workload: `pingpong ROUNDS [pipe|futex]` forks a child; parent
//! and child pass a turn back and forth ROUNDS times (run it on one CPU, e.g. with taskset, so
//! that every pass is a context switch): one byte over two pipes (read and write: I/O system
//! calls a syscall tracer's hooks run on), or a word in shared memory with FUTEX_WAIT and
//! FUTEX_WAKE (no I/O system call). Then it prints `switches N ns_per_switch T`: the context
//! switches both made (their voluntary_ctxt_switches) and the wall time per switch.

use std::time::Instant;

fn die(msg: &str) -> ! {
    eprintln!("pingpong: {msg}: {}", std::io::Error::last_os_error());
    std::process::exit(1)
}

fn voluntary_switches(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until the word is `want`.
fn futex_wait_for(word: &std::sync::atomic::AtomicU32, want: u32) {
    use std::sync::atomic::Ordering;
    loop {
        let now = word.load(Ordering::Acquire);
        if now == want {
            return;
        }
        // SAFETY: the word lives in a shared mapping for the life of both processes.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                now,
                std::ptr::null::<libc::timespec>(),
            )
        };
    }
}

fn futex_hand(word: &std::sync::atomic::AtomicU32, to: u32) {
    word.store(to, std::sync::atomic::Ordering::Release);
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
}

/// The futex ping-pong: the word says whose turn it is (0: the parent's, 1: the child's).
fn futex_pingpong(rounds: u64) {
    // SAFETY: an anonymous shared mapping of one page, for both processes after the fork.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        die("mmap");
    }
    // SAFETY: the mapping is page-aligned and zeroed: a valid AtomicU32 for its whole life.
    let word: &std::sync::atomic::AtomicU32 = unsafe { &*(page as *const _) };
    // SAFETY: the child only passes turns, then exits.
    let child = unsafe { libc::fork() };
    if child < 0 {
        die("fork");
    }
    if child == 0 {
        for _ in 0..rounds {
            futex_wait_for(word, 1);
            futex_hand(word, 0);
        }
        std::process::exit(0);
    }
    let me = std::process::id() as i32;
    let before = voluntary_switches(me) + voluntary_switches(child);
    let t0 = Instant::now();
    for _ in 0..rounds {
        futex_hand(word, 1);
        futex_wait_for(word, 0);
    }
    let ns = t0.elapsed().as_nanos() as u64;
    // The child has passed its last turn back: its count is final (an exited child's stays
    // readable until it is reaped).
    let switches = voluntary_switches(me) + voluntary_switches(child) - before;
    // SAFETY: reaps the child.
    unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    println!("switches {switches} ns_per_switch {}", ns / switches.max(1));
}

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            eprintln!("usage: pingpong ROUNDS [pipe|futex]");
            std::process::exit(2)
        });
    match std::env::args().nth(2).as_deref() {
        None | Some("pipe") => {}
        Some("futex") => return futex_pingpong(rounds),
        Some(other) => {
            eprintln!("pingpong: unknown mode '{other}': pipe or futex");
            std::process::exit(2)
        }
    }
    let (mut there, mut back) = ([0i32; 2], [0i32; 2]);
    // SAFETY: pipe() fills the arrays we own; fork() in a single-threaded process.
    unsafe {
        if libc::pipe(there.as_mut_ptr()) != 0 || libc::pipe(back.as_mut_ptr()) != 0 {
            die("pipe");
        }
    }
    let mut byte = [0u8; 1];
    // SAFETY: the child only reads and writes its pipes, then exits.
    let child = unsafe { libc::fork() };
    if child < 0 {
        die("fork");
    }
    if child == 0 {
        for _ in 0..rounds {
            // SAFETY: one byte from and to our pipes.
            unsafe {
                if libc::read(there[0], byte.as_mut_ptr().cast(), 1) != 1
                    || libc::write(back[1], byte.as_ptr().cast(), 1) != 1
                {
                    die("child");
                }
            }
        }
        // The parent reads our switch count before we exit.
        // SAFETY: waits for the parent's last byte (or its end).
        unsafe { libc::read(there[0], byte.as_mut_ptr().cast(), 1) };
        std::process::exit(0);
    }
    let me = std::process::id() as i32;
    let before = voluntary_switches(me) + voluntary_switches(child);
    let t0 = Instant::now();
    for _ in 0..rounds {
        // SAFETY: one byte to and from our pipes.
        unsafe {
            if libc::write(there[1], byte.as_ptr().cast(), 1) != 1
                || libc::read(back[0], byte.as_mut_ptr().cast(), 1) != 1
            {
                die("parent");
            }
        }
    }
    let ns = t0.elapsed().as_nanos() as u64;
    let switches = voluntary_switches(me) + voluntary_switches(child) - before;
    // SAFETY: releases the child, then reaps it.
    unsafe {
        libc::write(there[1], byte.as_ptr().cast(), 1);
        libc::waitpid(child, std::ptr::null_mut(), 0);
    }
    println!("switches {switches} ns_per_switch {}", ns / switches.max(1));
}
