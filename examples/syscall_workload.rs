//! A process that makes an exact, known set of system calls, for syslat's tests (host and VM).
//!
//! `syscall_workload READS WRITES FSYNCS OPENS [BAD_READS [PIPE_READS PIPE_SLEEP_MS [THREADS
//! [timed]]]]`
//!
//! It prints `ready <pid>`, then waits for SIGUSR1 (in sigwaitinfo, which no syslat group
//! traces) so the tracer can attach first. Then it makes exactly PIPE_READS read() on a pipe
//! first, then READS read() on /dev/zero, WRITES write() on /dev/null, FSYNCS fsync() on a
//! temporary file, OPENS openat() of /dev/null, BAD_READS read() on a closed descriptor (EBADF).
//! The pipe's writer thread writes each byte PIPE_SLEEP_MS after the reader has said it is going
//! into that read (its PIPE_READS write() calls are in the process too: count them with WRITES
//! when filtering by PID). With `timed`, the latency checks' mode, the writer starts its sleep
//! only once it sees the reader blocked in the read (by reading /proc/thread-self/syscall of the
//! reader: read calls of the writer's thread, so trace the reader's, --tid PID), and after the
//! pipe reads the reader prints `pipe reads ns N...`, each read's time by its own clock around
//! it (one more write). Last, THREADS threads, each started once the one before has ended, make
//! one read() on /dev/zero each. Then it exits without writing anything else.
//! Files are opened before the signal, descriptors closed with close(), which syslat ignores.

use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

fn arg(args: &[String], i: usize) -> u64 {
    args.get(i).map_or(0, |s| {
        s.parse().unwrap_or_else(|_| {
            eprintln!("syscall_workload: '{s}' is not a count");
            std::process::exit(2)
        })
    })
}

fn check(ret: isize, what: &str) {
    if ret < 0 {
        eprintln!(
            "syscall_workload: {what} failed: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(1);
    }
}

/// The thread whose /proc/.../syscall `file` is is blocked in the system call `call` starts
/// (its number and first argument, as the file prints them).
fn reader_blocked_in(file: &std::fs::File, buf: &mut [u8], call: &str) -> bool {
    use std::os::unix::fs::FileExt;
    match file.read_at(buf, 0) {
        Ok(n) => buf[..n].starts_with(call.as_bytes()),
        Err(e) => {
            eprintln!("syscall_workload: reading the reader's system call: {e}");
            std::process::exit(1)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: syscall_workload READS WRITES FSYNCS OPENS [BAD_READS [PIPE_READS PIPE_SLEEP_MS [THREADS]]]");
        std::process::exit(2);
    }
    let (reads, writes, fsyncs, opens) =
        (arg(&args, 1), arg(&args, 2), arg(&args, 3), arg(&args, 4));
    let (bad_reads, pipe_reads, pipe_sleep_ms) = (arg(&args, 5), arg(&args, 6), arg(&args, 7));
    let threads = arg(&args, 8);
    let timed = match args.get(9).map(String::as_str) {
        None => false,
        Some("timed") => true,
        Some(other) => {
            eprintln!("syscall_workload: '{other}' is not `timed`");
            std::process::exit(2)
        }
    };

    let zero = CString::new("/dev/zero").unwrap();
    let null = CString::new("/dev/null").unwrap();
    let tmp = std::env::temp_dir().join(format!("syscall_workload.{}", std::process::id()));
    let tmp_c = CString::new(tmp.to_string_lossy().as_bytes()).unwrap();
    // SAFETY: plain libc calls on C strings we own.
    let (zero_fd, null_fd, tmp_fd) = unsafe {
        (
            libc::open(zero.as_ptr(), libc::O_RDONLY),
            libc::open(null.as_ptr(), libc::O_WRONLY),
            libc::open(tmp_c.as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o600),
        )
    };
    for (fd, what) in [
        (zero_fd, "open /dev/zero"),
        (null_fd, "open /dev/null"),
        (tmp_fd, "open temp file"),
    ] {
        check(fd as isize, what);
    }
    let mut pipe_fds = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array we pass.
    check(
        unsafe { libc::pipe(pipe_fds.as_mut_ptr()) } as isize,
        "pipe",
    );

    // Block SIGUSR1 so that it waits for sigwaitinfo, then say we are ready.
    // SAFETY: sigset manipulation on a zeroed sigset_t we own.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    // Which pipe read the reader is going into (1, 2...), for the writer.
    let entering = Arc::new(AtomicU64::new(0));
    // The reader (this thread) as the kernel sees it: the system call it is blocked in, opened
    // before the signal (the writer's reads of it are read(2) calls of the writer's thread:
    // the checks of the pipe reads trace the reader's thread alone, --tid).
    let reader_syscall = (pipe_reads > 0 && timed).then(|| {
        std::fs::File::open("/proc/thread-self/syscall").unwrap_or_else(|e| {
            eprintln!("syscall_workload: /proc/thread-self/syscall: {e}");
            std::process::exit(1)
        })
    });
    // What it reads while the reader is blocked in read(2) on the pipe: "0 0x<fd> ..." (x86-64's
    // read is system call 0; the arguments in hex).
    let blocked_in_read = format!("{} {:#x} ", libc::SYS_read, pipe_fds[0]);
    // The writer starts with the reads (futex waits are not traced).
    let go = Arc::new(Barrier::new(if pipe_reads > 0 { 2 } else { 1 }));
    let writer = (pipe_reads > 0).then(|| {
        let fd = pipe_fds[1];
        let go = go.clone();
        let entering = entering.clone();
        thread::spawn(move || {
            go.wait();
            let mut state = [0u8; 128];
            for i in 1..=pipe_reads {
                // Its clock starts once the reader is blocked in read i: so each read sleeps
                // at least PIPE_SLEEP_MS. A clock started beside the reader's let a reader
                // woken late sleep less (15.7 ms of 20, on a loaded 2-CPU host, 2026-11-26);
                // one started when the reader said it was going into the read let a reader held
                // between saying so and its read sleep less (a read of 18375 us by the kernel's
                // trace in CI56's 6.1 guest, whose vCPUs the host runs beside CI's builds).
                // Polled with nanosleep, which no syslat group traces.
                // (Without `timed`, the old clock: the checks of exact counts need no more.)
                while entering.load(Ordering::Acquire) < i
                    || reader_syscall
                        .as_ref()
                        .is_some_and(|f| !reader_blocked_in(f, &mut state, &blocked_in_read))
                {
                    thread::sleep(Duration::from_micros(50));
                }
                thread::sleep(Duration::from_millis(pipe_sleep_ms));
                // SAFETY: writing one byte from a local to our pipe.
                check(
                    unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) },
                    "pipe write",
                );
            }
        })
    });
    println!("ready {}", std::process::id());
    std::io::stdout().flush().ok();
    // SAFETY: waits for the signal blocked above.
    unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
    go.wait();

    let mut byte = [0u8; 1];
    // Pipe reads first, each sleeping at least the writer's PIPE_SLEEP_MS, each timed by the
    // reader's own clock around it (the vDSO's, no system call): a tracer's two stamps of a
    // read lie within it, however late the kernel runs the tracer's programs.
    let mut pipe_read_ns = Vec::with_capacity(pipe_reads as usize);
    for i in 1..=pipe_reads {
        entering.store(i, Ordering::Release);
        let before = std::time::Instant::now();
        check(
            unsafe { libc::read(pipe_fds[0], byte.as_mut_ptr().cast(), 1) },
            "pipe read",
        );
        pipe_read_ns.push(before.elapsed().as_nanos());
    }
    for _ in 0..reads {
        // SAFETY: reads one byte into a local buffer.
        check(
            unsafe { libc::read(zero_fd, byte.as_mut_ptr().cast(), 1) },
            "read",
        );
    }
    for _ in 0..writes {
        check(
            unsafe { libc::write(null_fd, byte.as_ptr().cast(), 1) },
            "write",
        );
    }
    for _ in 0..fsyncs {
        check(unsafe { libc::fsync(tmp_fd) } as isize, "fsync");
    }
    for _ in 0..opens {
        let fd = unsafe { libc::openat(libc::AT_FDCWD, null.as_ptr(), libc::O_RDONLY) };
        check(fd as isize, "openat");
        unsafe { libc::close(fd) };
    }
    for _ in 0..bad_reads {
        // fd -1 is never open: EBADF, the failure -x counts.
        let ret = unsafe { libc::read(-1, byte.as_mut_ptr().cast(), 1) };
        assert!(ret < 0);
    }
    if let Some(w) = writer {
        let _ = w.join();
    }
    if pipe_reads > 0 && timed {
        // One write(2), after every traced call but the threads' reads below.
        let times: Vec<String> = pipe_read_ns.iter().map(|ns| ns.to_string()).collect();
        println!("pipe reads ns {}", times.join(" "));
    }
    for _ in 0..threads {
        let reader = thread::spawn(move || {
            let mut byte = [0u8; 1];
            // SAFETY: reads one byte into a local buffer.
            check(
                unsafe { libc::read(zero_fd, byte.as_mut_ptr().cast(), 1) },
                "read in a thread",
            );
        });
        let _ = reader.join();
    }
    unsafe { libc::unlink(tmp_c.as_ptr()) };
}
