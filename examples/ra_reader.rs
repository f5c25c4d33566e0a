//! rastat's workload: `ra_reader FILE MODE [READS [SEED]]` opens FILE, prints `ready <pid>`,
//! waits for SIGUSR1 (so that a tracer can attach first), then reads it one way and prints the
//! distinct page indexes it read (`pages N`, then one per line, sorted). MODE:
//!
//!   seq           the whole file, 1 MiB read() at a time
//!   random        READS 4 KiB pread()s at page offsets from a seeded generator, the first at
//!                 offset 0 (a file's header: where the kernel starts its first window)
//!   fadv-random   the same after POSIX_FADV_RANDOM (readahead off for this file)
//!   mmap-random   READS pages touched through a shared mapping, at the same offsets
//!   madv-random   the same after MADV_RANDOM (read-around off for this mapping)
//!   drop          at once (no `ready`, no signal): POSIX_FADV_DONTNEED on the whole file, so
//!                 that its clean pages leave the page cache

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

const PAGE: u64 = 4096;

/// xorshift64*: the same offsets for the same seed, on every machine.
struct Offsets(u64);

impl Offsets {
    fn next_page(&mut self, pages: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % pages
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("ra_reader: {what}: {e}");
    std::process::exit(1)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(mode)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: ra_reader FILE seq|random|fadv-random|mmap-random|madv-random|drop [READS [SEED]]");
        std::process::exit(2);
    };
    let reads: u64 = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(256);
    let seed: u64 = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(1);
    let mut file = File::open(path).unwrap_or_else(|e| fail(path, e));
    let pages = file.metadata().map(|m| m.len()).unwrap_or(0) / PAGE;
    if pages == 0 {
        fail(path, "empty file");
    }

    let fd = file.as_raw_fd();
    if mode == "drop" {
        // SAFETY: plain syscall on our open descriptor.
        let r = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        if r != 0 {
            fail("posix_fadvise", std::io::Error::from_raw_os_error(r));
        }
        return;
    }

    // SAFETY: sigset manipulation on a zeroed sigset_t we own; waits for the signal blocked.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    println!("ready {}", std::process::id());
    std::io::stdout().flush().ok();
    unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };

    let mut read = BTreeSet::new();
    let mut offsets = Offsets(seed.max(1));
    let random_pages = |offsets: &mut Offsets| -> Vec<u64> {
        let mut v = vec![0];
        v.extend((1..reads).map(|_| offsets.next_page(pages)));
        v
    };
    match mode.as_str() {
        "seq" => {
            let mut buf = vec![0u8; 1 << 20];
            let mut at = 0u64;
            loop {
                let n = file.read(&mut buf).unwrap_or_else(|e| fail("read", e)) as u64;
                if n == 0 {
                    break;
                }
                read.extend(at / PAGE..(at + n).div_ceil(PAGE));
                at += n;
            }
        }
        "random" | "fadv-random" => {
            if mode == "fadv-random" {
                // SAFETY: plain syscall on our open descriptor.
                let r = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM) };
                if r != 0 {
                    fail("posix_fadvise", std::io::Error::from_raw_os_error(r));
                }
            }
            let mut buf = [0u8; PAGE as usize];
            for page in random_pages(&mut offsets) {
                file.read_exact_at(&mut buf, page * PAGE)
                    .unwrap_or_else(|e| fail("pread", e));
                read.insert(page);
            }
        }
        "mmap-random" | "madv-random" => {
            let len = (pages * PAGE) as usize;
            // SAFETY: a shared read-only mapping of our open file, unmapped below.
            let map = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if map == libc::MAP_FAILED {
                fail("mmap", std::io::Error::last_os_error());
            }
            if mode == "madv-random" {
                // SAFETY: advice on the mapping just made.
                if unsafe { libc::madvise(map, len, libc::MADV_RANDOM) } != 0 {
                    fail("madvise", std::io::Error::last_os_error());
                }
            }
            let mut sum = 0u64;
            for page in random_pages(&mut offsets) {
                // SAFETY: page < pages, inside the mapping.
                sum += unsafe {
                    std::ptr::read_volatile((map as *const u8).add((page * PAGE) as usize))
                } as u64;
                read.insert(page);
            }
            std::hint::black_box(sum);
            // SAFETY: the mapping made above.
            unsafe { libc::munmap(map, len) };
        }
        other => fail("mode", format!("unknown mode {other}")),
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "pages {}", read.len());
    for p in &read {
        let _ = writeln!(out, "{p}");
    }
}
