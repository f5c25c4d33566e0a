//! Native AIO's reads, as a storage engine makes them: `aio_reads PATH N DEPTH` makes N O_DIRECT
//! 4 KiB reads of blocks 0, 1, 2... of PATH (a disk) through io_submit, one iocb a submission
//! and DEPTH in flight, reaps them with io_getevents, and prints
//! `aio_reads N sum_ns S max_ns M`: each read's time by its own clock, from before the io_submit
//! of its iocb to the return of the io_getevents that reaped its event (fio's libaio engine's
//! completion latency, as it takes it).
//!
//! No maintained crate wraps Linux's AIO syscalls: libc has their numbers, and the two
//! structures are linux/aio_abi.h's (a fixed ABI).

use std::ffi::CString;
use std::time::Instant;

fn die(msg: String) -> ! {
    eprintln!("aio_reads: {msg}");
    std::process::exit(1)
}

/// struct iocb (linux/aio_abi.h), little-endian: aio_key before aio_rw_flags.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: i32,
    lio_opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// struct io_event.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PREAD: u16 = 0;
const BLOCK: usize = 4096;

fn check(what: &str, r: libc::c_long) -> libc::c_long {
    if r < 0 {
        die(format!("{what}: {}", std::io::Error::last_os_error()));
    }
    r
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || die("usage: aio_reads PATH N DEPTH".into());
    let (Some(path), Some(n), Some(depth)) = (args.get(1), args.get(2), args.get(3)) else {
        usage()
    };
    let n: u64 = n.parse().unwrap_or_else(|_| usage());
    let depth: usize = depth.parse().unwrap_or_else(|_| usage());
    if depth == 0 {
        usage();
    }
    let path = CString::new(path.as_bytes()).unwrap_or_else(|_| usage());
    // SAFETY: open on a C string we own.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECT) };
    if fd < 0 {
        die(format!("open: {}", std::io::Error::last_os_error()));
    }
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: io_setup writes the context id into ctx.
    check("io_setup", unsafe {
        libc::syscall(libc::SYS_io_setup, depth as libc::c_long, &mut ctx)
    });
    let layout = std::alloc::Layout::from_size_align(BLOCK * depth, BLOCK).unwrap();
    // SAFETY: a non-zero size; freed at the end.
    let bufs = unsafe { std::alloc::alloc(layout) };
    if bufs.is_null() {
        die("out of memory".into());
    }
    // One iocb per slot, its address stable (the kernel's event names it back).
    let mut iocbs = vec![Iocb::default(); depth];
    let mut started = vec![Instant::now(); depth];
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut events = vec![IoEvent::default(); depth];
    let (mut next, mut done, mut sum_ns, mut max_ns) = (0u64, 0u64, 0u128, 0u128);
    while done < n {
        while next < n {
            let Some(slot) = free.pop() else { break };
            iocbs[slot] = Iocb {
                data: slot as u64,
                lio_opcode: IOCB_CMD_PREAD,
                fildes: fd as u32,
                // SAFETY: slot < depth: inside the allocation.
                buf: unsafe { bufs.add(slot * BLOCK) } as u64,
                nbytes: BLOCK as u64,
                offset: (next * BLOCK as u64) as i64,
                ..Default::default()
            };
            let mut one = [&mut iocbs[slot] as *mut Iocb];
            started[slot] = Instant::now();
            // SAFETY: one valid iocb, whose buffer lives until its event is reaped.
            let r = check("io_submit", unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    ctx,
                    1 as libc::c_long,
                    one.as_mut_ptr(),
                )
            });
            if r != 1 {
                die(format!("io_submit took {r} iocbs of 1"));
            }
            next += 1;
        }
        // SAFETY: room for depth events; no timeout.
        let got = check("io_getevents", unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                ctx,
                1 as libc::c_long,
                depth as libc::c_long,
                events.as_mut_ptr(),
                std::ptr::null_mut::<libc::timespec>(),
            )
        });
        let now = Instant::now();
        for e in &events[..got as usize] {
            if e.res != BLOCK as i64 {
                die(format!("a read returned {}", e.res));
            }
            let slot = e.data as usize;
            let ns = now.duration_since(started[slot]).as_nanos();
            sum_ns += ns;
            max_ns = max_ns.max(ns);
            free.push(slot);
            done += 1;
        }
    }
    // SAFETY: the context and allocation are ours, nothing in flight.
    unsafe {
        libc::syscall(libc::SYS_io_destroy, ctx);
        std::alloc::dealloc(bufs, layout);
        libc::close(fd);
    }
    println!("aio_reads {done} sum_ns {sum_ns} max_ns {max_ns}");
}
