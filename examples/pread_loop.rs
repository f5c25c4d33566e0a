//! The syscall-cost benchmark's workload: `pread_loop FILE CALLS` reads 1 byte at offset 0 of a
//! cached file CALLS times and prints the mean wall time per call in nanoseconds;
//! `pread_loop --getpid CALLS` makes CALLS getpid() calls instead (a syscall no I/O tool
//! traces).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(calls)) = (args.get(1), args.get(2).and_then(|n| n.parse::<u64>().ok()))
    else {
        eprintln!("usage: pread_loop FILE CALLS");
        std::process::exit(2);
    };
    if path == "--getpid" {
        return getpid_loop(calls);
    }
    let file = File::open(path).unwrap_or_else(|e| {
        eprintln!("pread_loop: {path}: {e}");
        std::process::exit(1)
    });
    let mut byte = [0u8; 1];
    // Warm the page cache and the code path.
    for _ in 0..1000 {
        let _ = file.read_at(&mut byte, 0);
    }
    let start = Instant::now();
    for _ in 0..calls {
        if file.read_at(&mut byte, 0).is_err() {
            eprintln!("pread_loop: pread failed");
            std::process::exit(1);
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / calls as f64;
    println!("{ns:.1}");
}

fn getpid_loop(calls: u64) {
    let start = Instant::now();
    for _ in 0..calls {
        // SAFETY: getpid has no side effects; the raw syscall, so that no libc cache answers.
        unsafe { libc::syscall(libc::SYS_getpid) };
    }
    let ns = start.elapsed().as_nanos() as f64 / calls as f64;
    println!("{ns:.1}");
}
