//! The pictures' known run: `timed_reads PATH SECONDS` makes O_DIRECT 4 KiB pread()s of PATH (a
//! disk), one after the other, by one thread, for SECONDS.
//!
//! It prints `ready <pid> <reader tid>` and waits for SIGUSR1 (so that the tracer can attach
//! and the test can put the process in a throttled cgroup first). Then the main thread reads
//! one block itself: blk-throttle lets the first read of a slice through at once, so the
//! reader's first read waits like the others. The reader reads blocks 0, 1, 2... (wrapping at
//! 16 MiB) until SECONDS have passed, and the helper prints `reads N`.

use std::ffi::CString;
use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn die(msg: String) -> ! {
    eprintln!("timed_reads: {msg}");
    std::process::exit(1)
}

/// An O_DIRECT descriptor of `path`.
fn open_direct(path: &CString) -> i32 {
    // SAFETY: open on a C string we own.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECT) };
    if fd < 0 {
        die(format!("open: {}", std::io::Error::last_os_error()));
    }
    fd
}

/// One O_DIRECT 4 KiB read of block `block` of `fd`.
fn read_block(fd: i32, buf: *mut u8, block: u64) {
    // SAFETY: reads at most 4096 bytes into a 4096-byte aligned buffer of the caller's.
    if unsafe { libc::pread(fd, buf.cast(), 4096, (block * 4096) as i64) } < 0 {
        die(format!("read: {}", std::io::Error::last_os_error()));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || die("usage: timed_reads PATH SECONDS".into());
    let (Some(path), Some(seconds)) = (args.get(1), args.get(2)) else {
        usage()
    };
    let seconds: u64 = seconds.parse().unwrap_or_else(|_| usage());
    let path = CString::new(path.as_bytes()).unwrap_or_else(|_| usage());
    // SIGUSR1 is waited for with sigwaitinfo, blocked in every thread.
    // SAFETY: sigset manipulation on a zeroed sigset_t we own.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
    let start = Arc::new(Barrier::new(2));
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let (start, path) = (start.clone(), path.clone());
        std::thread::spawn(move || {
            // SAFETY: gettid has no arguments.
            tx.send(unsafe { libc::gettid() }).ok();
            let fd = open_direct(&path);
            // SAFETY: a non-zero layout, freed below.
            let buf = unsafe { std::alloc::alloc(layout) };
            start.wait();
            let until = Instant::now() + Duration::from_secs(seconds);
            let mut reads = 0u64;
            while Instant::now() < until {
                read_block(fd, buf, reads % 4096);
                reads += 1;
            }
            // SAFETY: allocated above with this layout.
            unsafe { std::alloc::dealloc(buf, layout) };
            reads
        })
    };
    let tid = rx.recv().unwrap_or_else(|_| die("the reader died".into()));
    println!("ready {} {tid}", std::process::id());
    std::io::stdout().flush().ok();
    // SAFETY: waits for the signal blocked above.
    unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
    let fd = open_direct(&path);
    // SAFETY: a non-zero layout, freed at once.
    unsafe {
        let buf = std::alloc::alloc(layout);
        read_block(fd, buf, 8191);
        std::alloc::dealloc(buf, layout);
        libc::close(fd);
    }
    start.wait();
    let reads = reader
        .join()
        .unwrap_or_else(|_| die("the reader died".into()));
    println!("reads {reads}");
}
