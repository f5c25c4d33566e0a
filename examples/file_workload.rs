//! A process that makes an exact, known set of file operations on one file, for the VFS and
//! filesystem tools' checks (vfslat, ext4lat, fslat).
//!
//! `file_workload DIR READS WRITES FSYNCS OPENS [plain|osync|direct]`
//!
//! It creates DIR/file_workload.<pid> with 64 KiB of data and syncs it, prints `ready <pid>`,
//! then waits for SIGUSR1 (so the tracer can attach first). Then it makes exactly READS pread()
//! of 4 KiB, WRITES pwrite() of 4 KiB, FSYNCS fsync() and OPENS openat()+close() of that file,
//! and exits without touching anything else (the file stays: the caller removes it).
//! - `osync`: the writes go through a descriptor opened with O_SYNC, so each one also syncs
//!   (ext4_file_write_iter calls ext4_sync_file).
//! - `direct`: the reads go through an O_DIRECT descriptor, to the disk every time.
//! - `FILE_WORKLOAD_ROUNDS=N` in the environment: the whole set N times, each round on its own
//!   SIGUSR1, printing `done R` after round R (a write to stdout, which a VFS tracer sees).
//! - `aio`: the reads are O_DIRECT and asynchronous (io_submit, then io_getevents for each): the
//!   filesystem's read_iter returns -EIOCBQUEUED, and vfs_read is not called at all.

use std::ffi::CString;
use std::io::Write;

fn arg(args: &[String], i: usize) -> u64 {
    args.get(i).map_or(0, |s| {
        s.parse().unwrap_or_else(|_| {
            eprintln!("file_workload: '{s}' is not a count");
            std::process::exit(2)
        })
    })
}

fn check(ret: isize, what: &str) {
    if ret < 0 {
        eprintln!(
            "file_workload: {what} failed: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(1);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: file_workload DIR READS WRITES FSYNCS OPENS [plain|osync|direct|aio]");
        std::process::exit(2);
    }
    let (reads, writes, fsyncs, opens) =
        (arg(&args, 2), arg(&args, 3), arg(&args, 4), arg(&args, 5));
    let mode = args.get(6).map_or("plain", String::as_str);
    let path = format!("{}/file_workload.{}", args[1], std::process::id());
    let c_path = CString::new(path.clone()).unwrap();

    // A 4 KiB-aligned buffer, as O_DIRECT wants.
    let mut buf: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: posix_memalign writes a pointer to 4096 aligned bytes we own (never freed: the
    // process exits).
    if unsafe { libc::posix_memalign(&mut buf, 4096, 4096) } != 0 {
        eprintln!("file_workload: no memory for a 4 KiB buffer");
        std::process::exit(1);
    }
    // SAFETY: plain libc calls on a path and a buffer we own.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_CREAT | libc::O_RDWR | libc::O_TRUNC,
            0o600,
        )
    };
    check(fd as isize, "create");
    for i in 0..16 {
        check(
            unsafe { libc::pwrite(fd, buf, 4096, i * 4096) },
            "filling the file",
        );
    }
    check(unsafe { libc::fsync(fd) } as isize, "fsync before start");
    let write_flags = if mode == "osync" {
        libc::O_WRONLY | libc::O_SYNC
    } else {
        libc::O_WRONLY
    };
    let read_flags = if mode == "direct" || mode == "aio" {
        libc::O_RDONLY | libc::O_DIRECT
    } else {
        libc::O_RDONLY
    };
    let (wfd, rfd) = unsafe {
        (
            libc::open(c_path.as_ptr(), write_flags),
            libc::open(c_path.as_ptr(), read_flags),
        )
    };
    check(wfd as isize, "open for writing");
    check(rfd as isize, "open for reading");

    // Block SIGUSR1 so that it waits for sigwaitinfo, then say we are ready.
    // SAFETY: sigset manipulation on a zeroed sigset_t we own.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    println!("ready {}", std::process::id());
    std::io::stdout().flush().ok();
    // FILE_WORKLOAD_ROUNDS=N: the whole set N times, each on its own SIGUSR1, saying `done R`
    // after round R (a benchmark warms up on round 1 and measures round 2).
    let rounds: u64 = std::env::var("FILE_WORKLOAD_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    for round in 1..=rounds {
        // SAFETY: waits for the signal blocked above.
        unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        operations(
            mode,
            (reads, writes, fsyncs, opens),
            (fd, rfd, wfd),
            buf,
            &c_path,
        );
        // Only when asked for rounds: the line is a write(2) the VFS checks would count.
        if rounds > 1 {
            println!("done {round}");
            std::io::stdout().flush().ok();
        }
    }
}

/// One round: READS preads, WRITES pwrites, FSYNCS fsyncs, OPENS openat+close, in that order.
fn operations(
    mode: &str,
    (reads, writes, fsyncs, opens): (u64, u64, u64, u64),
    (fd, rfd, wfd): (i32, i32, i32),
    buf: *mut libc::c_void,
    c_path: &CString,
) {
    for i in 0..reads {
        let offset = ((i % 16) * 4096) as i64;
        if mode == "aio" {
            aio_read(rfd, buf, offset);
            continue;
        }
        // SAFETY: reads 4 KiB into our aligned buffer.
        check(unsafe { libc::pread(rfd, buf, 4096, offset) }, "pread");
    }
    for i in 0..writes {
        check(
            unsafe { libc::pwrite(wfd, buf, 4096, ((i % 16) * 4096) as i64) },
            "pwrite",
        );
    }
    for _ in 0..fsyncs {
        check(unsafe { libc::fsync(fd) } as isize, "fsync");
    }
    for _ in 0..opens {
        let o = unsafe { libc::openat(libc::AT_FDCWD, c_path.as_ptr(), libc::O_RDONLY) };
        check(o as isize, "openat");
        unsafe { libc::close(o) };
    }
}

/// `struct iocb` of linux/aio_abi.h (little-endian layout).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    aio_data: u64,
    aio_key: u32,
    aio_rw_flags: i32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

/// One 4 KiB read submitted with io_submit and reaped with io_getevents.
fn aio_read(fd: i32, buf: *mut libc::c_void, offset: i64) {
    const IOCB_CMD_PREAD: u16 = 0;
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: raw aio syscalls on structs we own; the context is destroyed before returning.
    unsafe {
        check(
            libc::syscall(libc::SYS_io_setup, 1, &mut ctx) as isize,
            "io_setup",
        );
        let mut cb = Iocb {
            aio_lio_opcode: IOCB_CMD_PREAD,
            aio_fildes: fd as u32,
            aio_buf: buf as u64,
            aio_nbytes: 4096,
            aio_offset: offset,
            ..Default::default()
        };
        let mut cbs = [&mut cb as *mut Iocb];
        check(
            libc::syscall(libc::SYS_io_submit, ctx, 1, cbs.as_mut_ptr()) as isize,
            "io_submit",
        );
        let mut ev = IoEvent::default();
        check(
            libc::syscall(
                libc::SYS_io_getevents,
                ctx,
                1,
                1,
                &mut ev,
                std::ptr::null::<libc::timespec>(),
            ) as isize,
            "io_getevents",
        );
        if ev.res != 4096 {
            eprintln!("file_workload: an aio read returned {}", ev.res);
            std::process::exit(1);
        }
        libc::syscall(libc::SYS_io_destroy, ctx);
    }
}
