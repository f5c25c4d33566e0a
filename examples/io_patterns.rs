//! The I/O patterns production software is made of, made by one process whose own I/O is all
//! there is on the disk, with the kernel's own account of each thread beside them: the ground
//! truth iostack's breakdown is held against (tests/truth.rs, the kernel matrix).
//!
//! `io_patterns PATTERN PATH N [--cgroup DIR] [--threads T] [--depth D]`
//!
//! - `dsync`: N 4 KiB pwrite() of a preallocated file opened O_DSYNC (a write and the cache flush
//!   the kernel sends for it: MySQL's and PostgreSQL's `wal_sync_method = open_datasync`).
//! - `direct-dsync`: the same with O_DIRECT|O_DSYNC (on a disk without FUA, the kernel emulates
//!   it: the write, then a flush it builds).
//! - `overwrite-fdatasync`: N times a 4 KiB pwrite() over allocated blocks and fdatasync():
//!   PostgreSQL's WAL (its segments are preallocated).
//! - `overwrite-fsync`: the same with fsync() (the journal commits the new mtime).
//! - `append-fsync`: N times a 4 KiB write() at the end of an O_APPEND file and fsync() (ext4's
//!   unwritten extents are converted by a kernel worker, which ends the write's page writeback).
//! - `seqread`: one pass of N 128 KiB read() over a file evicted from the page cache first: the
//!   thread's own readahead brings in what its next reads wait for.
//! - `appenders`: T threads (default 8), each N 4 KiB write() to one O_APPEND|O_DIRECT file: ext4
//!   and xfs hold the inode lock across an extending direct write, so the writers queue behind
//!   each other's I/O.
//! - `aio-unaligned`: N times an aligned 4 KiB O_DIRECT write submitted with io_submit(), then a
//!   512-byte O_DIRECT pwrite() inside another block: the filesystem waits for the write in
//!   flight (inode_dio_wait, a sleep the kernel does not call an I/O wait) before it goes on.
//! - `aio-reads`: N O_DIRECT 4 KiB reads of blocks 0, 1, 2... of PATH (a disk) through native
//!   AIO, as a storage engine makes them: one iocb a submission, `--depth D` in flight (default
//!   4), reaped with io_getevents. Its `read` figures are the requests and their time by its own
//!   clock, from before the io_submit of each to the return of the io_getevents that reaped it
//!   (fio's libaio engine's completion latency, as it takes it); a request is no thread's time
//!   off a CPU, so `read_off_ns` is 0. Then one read iocb on a descriptor open only for
//!   writing, which the kernel refuses in its setup (EBADF): nothing follows it in flight to
//!   take over its aio_kiocb, so a tracer that missed its end would hold it in flight for good.
//! - `aio-writes`: the same with N O_DIRECT 4 KiB writes (its `write` figures), then one
//!   IOCB_CMD_FSYNC of PATH, timed the same way (its `sync` figures), then a write iocb on a
//!   descriptor open only for reading (EBADF in its setup).
//! - `uring-worker-queue`: N buffered 4 KiB reads of PATH (a disk), 1 MiB apart (beyond its
//!   readahead, which `POSIX_FADV_RANDOM` turns off as well) and evicted from the page cache
//!   first, through io_uring: each handed to an io-wq worker (`IOSQE_ASYNC`), all N submitted in
//!   one io_uring_enter, the ring's bounded workers capped at one
//!   (`IORING_REGISTER_IOWQ_MAX_WORKERS`). The one worker reads them one at a time, waiting
//!   for each block, so the k-th waits for a worker while the k-1 before it are read. It prints
//!   `submitted N in NS ns`, the time of the io_uring_enter that handed them all over; its
//!   `read` figures are the requests and their time by its own clock, from before the submission
//!   to the reaping of each one's completion entry.
//!
//! Files are made (and preallocated where the pattern overwrites) and flushed before anything
//! is measured. With `--cgroup DIR` the process then moves into that cgroup (e.g. one whose blkio
//! throttle slows PATH's disk). It prints `ready <pid> <tid>...` (the threads that make the
//! calls), waits for SIGUSR1 (so the tracer can attach first), makes the calls, and prints one
//! line per thread:
//!
//!   `thread TID read|write|sync CALLS NS ... read_off_ns|write_off_ns|sync_off_ns OFF ...
//!    blkio_ns B blkio_count C run_delay_ns D cpu_ns X`
//!
//! per operation (iostack's groups) how many calls the thread made and their time by its own
//! clock (CLOCK_MONOTONIC around each), and of that time the part the thread was off a CPU
//! and not waiting for one: per call, its time less its time on a CPU (its own CPU clock,
//! CLOCK_THREAD_CPUTIME_ID, which brings the scheduler's account up to date) and less its wait
//! for one (schedstat's run_delay, which the kernel adds when the thread takes a CPU, read
//! from /proc/thread-self/schedstat), each read just before and after the call. That is a
//! truth of the kernel's clocks that no delay accounting enters: where the I/O wait is not
//! usable (6.12+ counts some from stale starts), a thread that sleeps only for its own I/O
//! spent that time waiting for it. Then from the kernel's delay accounting (taskstats, in ns:
//! `kernel.task_delayacct = 1`) the thread's I/O wait, its count, its wait for a CPU and its
//! time on one over the calls (read by the thread itself just before its first call and just
//! after its last). Then `done`.

use std::ffi::CString;
use std::io::Write;
use std::sync::{Arc, Barrier};
use std::thread;

const BLOCK: usize = 4096;
const READ_CHUNK: usize = 128 << 10;

fn die(msg: String) -> ! {
    eprintln!("io_patterns: {msg}");
    std::process::exit(1)
}

fn check(what: &str, ret: isize) -> isize {
    if ret < 0 {
        die(format!("{what}: {}", std::io::Error::last_os_error()));
    }
    ret
}

fn tid() -> i32 {
    // SAFETY: gettid has no arguments.
    unsafe { libc::gettid() }
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

/// A buffer aligned for O_DIRECT, freed on drop.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(len: usize, fill: u8) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len, BLOCK).unwrap();
        // SAFETY: a non-zero size and a valid alignment; filled before use.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            die("out of memory".into());
        }
        // SAFETY: ptr is valid for len bytes.
        unsafe { std::ptr::write_bytes(ptr, fill, len) };
        Aligned { ptr, layout }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in new with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn open(path: &str, flags: i32) -> i32 {
    let c = CString::new(path).unwrap();
    // SAFETY: a NUL-terminated path; the descriptor is ours.
    check(
        &format!("open {path}"),
        unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o644) } as isize,
    ) as i32
}

/// Writes `blocks` blocks of zeros to `path` (created or truncated) and flushes them, so that
/// later writes overwrite allocated, written blocks.
fn preallocate(path: &str, blocks: usize) {
    let fd = open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
    let buf = Aligned::new(BLOCK, 0);
    for i in 0..blocks {
        // SAFETY: buf holds BLOCK bytes.
        check("prefill", unsafe {
            libc::pwrite(fd, buf.ptr.cast(), BLOCK, (i * BLOCK) as i64)
        });
    }
    // SAFETY: our descriptor.
    check("prefill fsync", unsafe { libc::fsync(fd) } as isize);
    unsafe { libc::close(fd) };
}

/// What the kernel's delay accounting says of one thread (taskstats, struct taskstats v8+).
#[derive(Clone, Copy, Default)]
struct Delays {
    cpu_delay_ns: u64,
    blkio_count: u64,
    blkio_delay_ns: u64,
    cpu_run_ns: u64,
}

/// The taskstats generic-netlink family, asked for one thread's delays (TASKSTATS_CMD_GET
/// by TASKSTATS_CMD_ATTR_PID), as getdelays does.
struct Taskstats {
    sock: i32,
    family: u16,
}

const NLMSG_HDR: usize = 16;
const GENL_HDR: usize = 4;

fn nla(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

/// The attributes in `data`, as (type, payload) pairs.
fn attrs(mut data: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= 4 {
        let len = u16::from_ne_bytes([data[0], data[1]]) as usize;
        let kind = u16::from_ne_bytes([data[2], data[3]]) & 0x3fff;
        if len < 4 || len > data.len() {
            break;
        }
        out.push((kind, &data[4..len]));
        data = &data[((len + 3) & !3).min(data.len())..];
    }
    out
}

impl Taskstats {
    fn open() -> Taskstats {
        // SAFETY: a socket of our own.
        let sock = check("netlink socket", unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_GENERIC)
        } as isize) as i32;
        let mut ts = Taskstats { sock, family: 0x10 };
        // CTRL_CMD_GETFAMILY (3), CTRL_ATTR_FAMILY_NAME (2).
        let reply = ts.ask(3, 2, b"TASKSTATS\0");
        ts.family = attrs(&reply)
            .into_iter()
            .find(|(k, _)| *k == 1)
            .map(|(_, v)| u16::from_ne_bytes([v[0], v[1]]))
            .unwrap_or_else(|| die("no TASKSTATS netlink family (CONFIG_TASKSTATS)".into()));
        ts
    }

    /// Sends one request (command, one attribute) and returns the reply's attributes' bytes.
    fn ask(&self, cmd: u8, attr: u16, value: &[u8]) -> Vec<u8> {
        let mut msg = vec![0u8; NLMSG_HDR];
        msg.extend_from_slice(&[cmd, 1, 0, 0]);
        nla(&mut msg, attr, value);
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        msg[4..6].copy_from_slice(&self.family.to_ne_bytes());
        msg[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
        // SAFETY: sockaddr_nl zeroed: the kernel (pid 0).
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: msg and addr live across the call.
        check("netlink send", unsafe {
            libc::sendto(
                self.sock,
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        });
        let mut buf = vec![0u8; 8192];
        // SAFETY: buf is ours, of its length.
        let n = check("netlink recv", unsafe {
            libc::recv(self.sock, buf.as_mut_ptr().cast(), buf.len(), 0)
        }) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if kind == libc::NLMSG_ERROR as u16 {
            let err = i32::from_ne_bytes(buf[16..20].try_into().unwrap());
            die(format!(
                "taskstats: {}",
                std::io::Error::from_raw_os_error(-err)
            ));
        }
        buf[NLMSG_HDR + GENL_HDR..n].to_vec()
    }

    fn delays(&self, tid: i32) -> Delays {
        // TASKSTATS_CMD_GET (1), TASKSTATS_CMD_ATTR_PID (1); the reply nests
        // TASKSTATS_TYPE_AGGR_PID (4) > TASKSTATS_TYPE_STATS (3).
        let reply = self.ask(1, 1, &(tid as u32).to_ne_bytes());
        let stats = attrs(&reply)
            .into_iter()
            .find(|(k, _)| *k == 4)
            .and_then(|(_, nested)| attrs(nested).into_iter().find(|(k, _)| *k == 3))
            .map(|(_, v)| v.to_vec())
            .unwrap_or_else(|| die(format!("taskstats gave no stats for {tid}")));
        let at = |off: usize| u64::from_ne_bytes(stats[off..off + 8].try_into().unwrap());
        Delays {
            cpu_delay_ns: at(24),
            blkio_count: at(32),
            blkio_delay_ns: at(40),
            cpu_run_ns: at(72),
        }
    }
}

/// One wait for I/O before anything is measured: the kernel's delay accounting on the CI host's
/// 6.18 counted a thread's first I/O wait from boot now and then (blkio_delay_total of 9632 s
/// for 20 reads in 0.8 ms, 2 runs of 6, 2026-11-26; 65 s, the guest's uptime, for one thread
/// under 6.12 in the matrix), as if the wait's start had never been stamped. Each thread takes
/// that first wait in an O_DIRECT read of this file, on the filesystem under test: a real
/// read of a disk (the helper's own file, on the matrix's initramfs, is in memory, where 5.10
/// and 6.1 refuse O_DIRECT). Written and flushed before the process joins its cgroup.
struct WarmUp(String);

impl WarmUp {
    fn beside(path: &str) -> WarmUp {
        let dir = std::path::Path::new(path)
            .parent()
            .map_or(".".into(), |d| d.to_string_lossy().into_owned());
        let file = format!("{dir}/.io_patterns.warm-up.{}", std::process::id());
        preallocate(&file, 1);
        WarmUp(file)
    }

    /// The calling thread's first wait for I/O: an O_DIRECT read of the helper's own file, else
    /// (the matrix's initramfs is in memory: 5.10 and 6.1 refuse O_DIRECT there, 6.12 serves it
    /// without a wait) of this file, else a read of this file dropped from the page cache
    /// first; the first that the kernel counts as a wait.
    fn take(&self, stats: &Taskstats) {
        let waits = || stats.delays(tid()).blkio_count;
        let before = waits();
        let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
        let exe = exe.to_string_lossy().into_owned();
        let buf = Aligned::new(BLOCK, 0);
        for (path, flags) in [
            (exe.as_str(), libc::O_DIRECT),
            (&self.0, libc::O_DIRECT),
            (&self.0, 0),
        ] {
            let Ok(c) = CString::new(path) else { continue };
            // SAFETY: a NUL-terminated path; the descriptor is ours; buf holds BLOCK bytes,
            // aligned. A filesystem without O_DIRECT refuses the open.
            unsafe {
                let fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | flags);
                if fd < 0 {
                    continue;
                }
                if flags == 0 {
                    libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
                }
                libc::pread(fd, buf.ptr.cast(), BLOCK, 0);
                libc::close(fd);
            }
            if waits() > before {
                return;
            }
        }
    }
}

impl Drop for WarmUp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The calling thread's clocks, as the kernel keeps them: its time on a CPU and its wait for
/// one.
struct ThreadClocks {
    /// /proc/thread-self/schedstat, open: `exec_runtime run_delay timeslices`.
    schedstat: i32,
}

impl ThreadClocks {
    fn open() -> ThreadClocks {
        let path = CString::new("/proc/thread-self/schedstat").unwrap();
        // SAFETY: a NUL-terminated path; the descriptor is ours for the thread's life.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        check("open /proc/thread-self/schedstat", fd as isize);
        ThreadClocks { schedstat: fd }
    }

    /// Its time on a CPU, brought up to date (task_sched_runtime).
    fn cpu_ns(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// Its wait for a CPU so far (complete while it runs: added when it takes a CPU).
    fn run_delay_ns(&self) -> u64 {
        let mut buf = [0u8; 96];
        // SAFETY: reads at most the buffer's length into it, from our descriptor.
        let n = unsafe { libc::pread(self.schedstat, buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = check("read /proc/thread-self/schedstat", n) as usize;
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or_else(|| die("an unreadable /proc/thread-self/schedstat".into()))
    }
}

impl Drop for ThreadClocks {
    fn drop(&mut self) {
        // SAFETY: our descriptor.
        unsafe { libc::close(self.schedstat) };
    }
}

/// One thread's calls, by iostack's operation groups: how many, their time by its clock, and
/// of it the time it was off a CPU and not waiting for one.
struct Calls {
    n: [u64; 3],
    ns: [u64; 3],
    off_ns: [u64; 3],
    clocks: ThreadClocks,
}

const READ: usize = 0;
const WRITE: usize = 1;
const SYNC: usize = 2;

impl Calls {
    fn new() -> Calls {
        Calls {
            n: [0; 3],
            ns: [0; 3],
            off_ns: [0; 3],
            clocks: ThreadClocks::open(),
        }
    }

    /// One asynchronous request of `op` that took `ns` by the thread's clock.
    fn request(&mut self, op: usize, ns: u64) {
        self.ns[op] += ns;
        self.n[op] += 1;
    }

    /// Times one call of `op` and checks its result. The thread's clocks are read outside its
    /// own: what they count beyond the call is the clock reads themselves (well under a
    /// microsecond), taken from the time off a CPU.
    fn time(&mut self, op: usize, what: &str, call: impl FnOnce() -> isize) -> isize {
        let run_delay = self.clocks.run_delay_ns();
        let cpu = self.clocks.cpu_ns();
        let t0 = monotonic_ns();
        let ret = call();
        let ns = monotonic_ns() - t0;
        let busy = (self.clocks.cpu_ns() - cpu) + (self.clocks.run_delay_ns() - run_delay);
        self.ns[op] += ns;
        self.off_ns[op] += ns.saturating_sub(busy);
        self.n[op] += 1;
        check(what, ret)
    }
}

/// What one thread does, given its index.
type Work = Box<dyn FnOnce(usize, &mut Calls) + Send>;

fn pattern(
    name: &str,
    path: &str,
    n: usize,
    threads: usize,
    depth: usize,
) -> (usize, Arc<dyn Fn() -> Work + Send + Sync>) {
    let path = path.to_string();
    let one = |w: Arc<dyn Fn() -> Work + Send + Sync>| (1, w);
    match name {
        "dsync" | "direct-dsync" | "overwrite-fdatasync" | "overwrite-fsync" => {
            preallocate(&path, n);
            let name = name.to_string();
            one(Arc::new(move || {
                let (path, name) = (path.clone(), name.clone());
                Box::new(move |_, calls: &mut Calls| {
                    let flags = match name.as_str() {
                        "dsync" => libc::O_WRONLY | libc::O_DSYNC,
                        "direct-dsync" => libc::O_WRONLY | libc::O_DSYNC | libc::O_DIRECT,
                        _ => libc::O_WRONLY,
                    };
                    let fd = open(&path, flags);
                    let buf = Aligned::new(BLOCK, 0x5a);
                    for i in 0..n {
                        // SAFETY: buf holds BLOCK bytes.
                        calls.time(WRITE, "pwrite", || unsafe {
                            libc::pwrite(fd, buf.ptr.cast(), BLOCK, (i * BLOCK) as i64)
                        });
                        match name.as_str() {
                            // SAFETY: our descriptor.
                            "overwrite-fdatasync" => calls.time(SYNC, "fdatasync", || unsafe {
                                libc::fdatasync(fd) as isize
                            }),
                            "overwrite-fsync" => calls.time(SYNC, "fsync", || unsafe {
                                libc::fsync(fd) as isize
                            }),
                            _ => 0,
                        };
                    }
                    unsafe { libc::close(fd) };
                })
            }))
        }
        "append-fsync" => {
            preallocate(&path, 0);
            one(Arc::new(move || {
                let path = path.clone();
                Box::new(move |_, calls: &mut Calls| {
                    let fd = open(&path, libc::O_WRONLY | libc::O_APPEND);
                    let buf = Aligned::new(BLOCK, 0x5a);
                    for _ in 0..n {
                        // SAFETY: buf holds BLOCK bytes; our descriptor.
                        calls.time(WRITE, "write", || unsafe {
                            libc::write(fd, buf.ptr.cast(), BLOCK)
                        });
                        calls.time(SYNC, "fsync", || unsafe { libc::fsync(fd) as isize });
                    }
                    unsafe { libc::close(fd) };
                })
            }))
        }
        "seqread" => {
            let chunks = n;
            let fd = open(&path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
            let buf = Aligned::new(READ_CHUNK, 0x5a);
            for i in 0..chunks {
                // SAFETY: buf holds READ_CHUNK bytes.
                check("fill", unsafe {
                    libc::pwrite(fd, buf.ptr.cast(), READ_CHUNK, (i * READ_CHUNK) as i64)
                });
            }
            // SAFETY: our descriptor; the whole file out of the page cache once written.
            unsafe {
                check("fill fsync", libc::fsync(fd) as isize);
                check(
                    "fadvise",
                    -(libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) as isize),
                );
                libc::close(fd);
            }
            one(Arc::new(move || {
                let path = path.clone();
                Box::new(move |_, calls: &mut Calls| {
                    let fd = open(&path, libc::O_RDONLY);
                    let buf = Aligned::new(READ_CHUNK, 0);
                    for _ in 0..chunks {
                        // SAFETY: buf holds READ_CHUNK bytes.
                        calls.time(READ, "read", || unsafe {
                            libc::read(fd, buf.ptr.cast(), READ_CHUNK)
                        });
                    }
                    unsafe { libc::close(fd) };
                })
            }))
        }
        "appenders" => {
            preallocate(&path, 0);
            (
                threads,
                Arc::new(move || {
                    let path = path.clone();
                    Box::new(move |_, calls: &mut Calls| {
                        let fd = open(&path, libc::O_WRONLY | libc::O_APPEND | libc::O_DIRECT);
                        let buf = Aligned::new(BLOCK, 0x5a);
                        for _ in 0..n {
                            // SAFETY: buf holds BLOCK bytes, aligned.
                            calls.time(WRITE, "write", || unsafe {
                                libc::write(fd, buf.ptr.cast(), BLOCK)
                            });
                        }
                        unsafe { libc::close(fd) };
                    })
                }),
            )
        }
        "aio-unaligned" => {
            preallocate(&path, 2 * n + 2);
            one(Arc::new(move || {
                let path = path.clone();
                Box::new(move |_, calls: &mut Calls| aio_unaligned(&path, n, calls))
            }))
        }
        "aio-reads" => one(Arc::new(move || {
            let path = path.clone();
            Box::new(move |_, calls: &mut Calls| aio_direct(&path, n, depth, READ, calls))
        })),
        "aio-writes" => one(Arc::new(move || {
            let path = path.clone();
            Box::new(move |_, calls: &mut Calls| aio_direct(&path, n, depth, WRITE, calls))
        })),
        "uring-worker-queue" => one(Arc::new(move || {
            let path = path.clone();
            Box::new(move |_, calls: &mut Calls| uring_worker_queue(&path, n, calls))
        })),
        other => die(format!(
            "unknown pattern {other} (dsync, direct-dsync, overwrite-fdatasync, overwrite-fsync, append-fsync, seqread, appenders, aio-unaligned, aio-reads, aio-writes, uring-worker-queue)"
        )),
    }
}

/// The kernel's AIO ABI (linux/aio_abi.h): an iocb and the event io_getevents returns.
#[repr(C)]
#[derive(Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: u32,
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

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_FSYNC: u16 = 2;

/// A native AIO context (io_setup), destroyed on drop. No maintained crate wraps Linux's AIO
/// syscalls: libc has their numbers, and the two structures are a fixed ABI.
struct Aio(u64);

impl Aio {
    fn setup(depth: usize) -> Aio {
        let mut ctx: u64 = 0;
        // SAFETY: io_setup writes the context id into ctx.
        check("io_setup", unsafe {
            libc::syscall(
                libc::SYS_io_setup,
                depth as libc::c_long,
                &mut ctx as *mut u64,
            )
        } as isize);
        Aio(ctx)
    }

    /// Submits one iocb, which (and whose buffer) must live until its event is reaped.
    fn submit(&self, cb: &mut Iocb) {
        match self.try_submit(cb) {
            Ok(1) => {}
            Ok(took) => die(format!("io_submit took {took} iocbs of 1")),
            Err(e) => die(format!("io_submit: {e}")),
        }
    }

    /// io_submit of one iocb: how many it took, or why it refused it.
    fn try_submit(&self, cb: &mut Iocb) -> std::io::Result<isize> {
        let mut list = [cb as *mut Iocb];
        // SAFETY: one valid iocb, alive until its event is reaped (the caller's promise).
        match unsafe {
            libc::syscall(
                libc::SYS_io_submit,
                self.0,
                1 as libc::c_long,
                list.as_mut_ptr(),
            )
        } {
            r if r < 0 => Err(std::io::Error::last_os_error()),
            r => Ok(r as isize),
        }
    }

    /// Waits for at least one event; returns how many it wrote into `events`.
    fn reap(&self, events: &mut [IoEvent]) -> usize {
        // SAFETY: room for events.len() events; no timeout.
        check("io_getevents", unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.0,
                1 as libc::c_long,
                events.len() as libc::c_long,
                events.as_mut_ptr(),
                std::ptr::null::<libc::timespec>(),
            )
        } as isize) as usize
    }
}

impl Drop for Aio {
    fn drop(&mut self) {
        // SAFETY: our context; nothing of ours is in flight when it goes.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.0) };
    }
}

/// N times: an aligned write in flight (io_submit), then an unaligned one (pwrite) in the
/// other block of the pair, which waits for it inside the filesystem; then the first's event.
fn aio_unaligned(path: &str, n: usize, calls: &mut Calls) {
    let fd = open(path, libc::O_WRONLY | libc::O_DIRECT);
    let aligned = Aligned::new(BLOCK, 0x11);
    let small = Aligned::new(512, 0x22);
    let aio = Aio::setup(1);
    for i in 0..n {
        let mut cb = Iocb {
            lio_opcode: IOCB_CMD_PWRITE,
            fildes: fd as u32,
            buf: aligned.ptr as u64,
            nbytes: BLOCK as u64,
            offset: (2 * i * BLOCK) as i64,
            ..Default::default()
        };
        aio.submit(&mut cb);
        // 512 bytes into the next block: not aligned to the filesystem's block.
        // SAFETY: small holds 512 bytes, aligned.
        calls.time(WRITE, "unaligned pwrite", || unsafe {
            libc::pwrite(
                fd,
                small.ptr.cast(),
                512,
                ((2 * i + 1) * BLOCK + 512) as i64,
            )
        });
        let mut ev = [IoEvent::default()];
        aio.reap(&mut ev);
        if ev[0].res != BLOCK as i64 {
            die(format!("the aio write ended with {}", ev[0].res));
        }
    }
    drop(aio);
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
}

/// N reads (op READ) or writes (WRITE) of blocks 0, 1, 2... of `path`, `depth` in flight, each
/// timed from before its io_submit to the return of the io_getevents that reaped it; after the
/// writes, one fsync iocb, timed so. Then an iocb the kernel refuses in its setup (EBADF).
fn aio_direct(path: &str, n: usize, depth: usize, op: usize, calls: &mut Calls) {
    let (flags, opcode, what, other_flags) = match op {
        READ => (libc::O_RDONLY, IOCB_CMD_PREAD, "read", libc::O_WRONLY),
        _ => (libc::O_WRONLY, IOCB_CMD_PWRITE, "write", libc::O_RDONLY),
    };
    let fd = open(path, flags | libc::O_DIRECT);
    let bufs = Aligned::new(BLOCK * depth, 0x33);
    let aio = Aio::setup(depth);
    // One iocb per slot, its address stable until its event names it back.
    let mut iocbs: Vec<Iocb> = (0..depth).map(|_| Iocb::default()).collect();
    let mut started = vec![0u64; depth];
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut events = vec![IoEvent::default(); depth];
    let (mut next, mut done) = (0, 0);
    while done < n {
        while next < n {
            let Some(slot) = free.pop() else { break };
            iocbs[slot] = Iocb {
                data: slot as u64,
                lio_opcode: opcode,
                fildes: fd as u32,
                // SAFETY: slot < depth: inside the allocation.
                buf: unsafe { bufs.ptr.add(slot * BLOCK) } as u64,
                nbytes: BLOCK as u64,
                offset: (next * BLOCK) as i64,
                ..Default::default()
            };
            started[slot] = monotonic_ns();
            aio.submit(&mut iocbs[slot]);
            next += 1;
        }
        let got = aio.reap(&mut events);
        let now = monotonic_ns();
        for e in &events[..got] {
            if e.res != BLOCK as i64 {
                die(format!("an aio {what} ended with {}", e.res));
            }
            let slot = e.data as usize;
            calls.request(op, now - started[slot]);
            free.push(slot);
            done += 1;
        }
    }
    if op == WRITE {
        let mut sync = Iocb {
            lio_opcode: IOCB_CMD_FSYNC,
            fildes: fd as u32,
            ..Default::default()
        };
        let t0 = monotonic_ns();
        aio.submit(&mut sync);
        let mut ev = [IoEvent::default()];
        aio.reap(&mut ev);
        if ev[0].res != 0 {
            die(format!("the aio fsync ended with {}", ev[0].res));
        }
        calls.request(SYNC, monotonic_ns() - t0);
    }
    let other = open(path, other_flags | libc::O_DIRECT);
    let mut refused = Iocb {
        lio_opcode: opcode,
        fildes: other as u32,
        buf: bufs.ptr as u64,
        nbytes: BLOCK as u64,
        ..Default::default()
    };
    match aio.try_submit(&mut refused) {
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => {}
        got => die(format!(
            "a {what} iocb on a descriptor not open for it: {got:?}, not EBADF"
        )),
    }
    drop(aio);
    // SAFETY: our descriptors.
    unsafe {
        libc::close(other);
        libc::close(fd);
    }
}

/// `uring-worker-queue`: N buffered reads of `path`, 1 MiB apart and evicted first, each handed
/// to the ring's one bounded io-wq worker, all submitted at once; each timed from before the
/// submission to the reaping of its completion entry.
fn uring_worker_queue(path: &str, n: usize, calls: &mut Calls) {
    use io_uring::{opcode, squeue, types, IoUring};
    const APART: usize = 1 << 20;
    let fd = open(path, libc::O_RDONLY);
    // SAFETY: our descriptor; advice only.
    unsafe {
        check(
            "posix_fadvise(RANDOM)",
            libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM) as isize,
        );
        check(
            "posix_fadvise(DONTNEED)",
            libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) as isize,
        );
    }
    let mut ring: IoUring = IoUring::new(n.next_power_of_two() as u32)
        .unwrap_or_else(|e| die(format!("io_uring_setup: {e}")));
    // [bounded, unbounded]: a block device's reads are bounded work; 0 leaves a kind as it is.
    let mut max = [1u32, 0u32];
    ring.submitter()
        .register_iowq_max_workers(&mut max)
        .unwrap_or_else(|e| die(format!("IORING_REGISTER_IOWQ_MAX_WORKERS: {e}")));
    let bufs = Aligned::new(BLOCK * n, 0);
    let t0 = monotonic_ns();
    for i in 0..n {
        // SAFETY: i < n: inside the allocation, which outlives the requests.
        let buf = unsafe { bufs.ptr.add(i * BLOCK) };
        let read = opcode::Read::new(types::Fd(fd), buf, BLOCK as u32)
            .offset((i * APART) as u64)
            .build()
            .flags(squeue::Flags::ASYNC)
            .user_data(i as u64);
        // SAFETY: the buffer lives until the entry's completion is reaped below.
        unsafe { ring.submission().push(&read) }
            .unwrap_or_else(|_| die("the submission queue is full".into()));
    }
    // One io_uring_enter hands all N to io-wq; its time bounds how far apart they were handed.
    match ring.submit() {
        Ok(took) if took == n => {}
        got => die(format!("io_uring_enter took {got:?} of {n} entries")),
    }
    println!("submitted {n} in {} ns", monotonic_ns() - t0);
    std::io::stdout().flush().ok();
    let mut done = 0;
    while done < n {
        if let Err(e) = ring.submit_and_wait(1) {
            die(format!("io_uring_enter: {e}"));
        }
        let now = monotonic_ns();
        for cqe in ring.completion() {
            if cqe.result() != BLOCK as i32 {
                die(format!(
                    "read {} ended with {}",
                    cqe.user_data(),
                    cqe.result()
                ));
            }
            calls.request(READ, now - t0);
            done += 1;
        }
    }
    drop(ring);
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        die("usage: io_patterns PATTERN PATH N [--cgroup DIR] [--threads T] [--depth D]".into());
    }
    let (name, path) = (args[1].clone(), args[2].clone());
    let n: usize = args[3]
        .parse()
        .unwrap_or_else(|_| die(format!("bad N {}", args[3])));
    let mut cgroup = None;
    let mut threads = 8;
    let mut depth = 4;
    let mut rest = args[4..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--cgroup" => cgroup = rest.next().cloned(),
            "--threads" => {
                threads = rest
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| die("--threads needs a number".into()))
            }
            "--depth" => {
                depth = rest
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&d| d > 0)
                    .unwrap_or_else(|| die("--depth needs a number above 0".into()))
            }
            other => die(format!("unknown argument {other}")),
        }
    }
    let (count, work) = pattern(&name, &path, n, threads, depth);
    let warm_up = Arc::new(WarmUp::beside(&path));
    if let Some(dir) = cgroup {
        std::fs::write(
            format!("{dir}/cgroup.procs"),
            std::process::id().to_string(),
        )
        .unwrap_or_else(|e| die(format!("{dir}/cgroup.procs: {e}")));
    }

    // SIGUSR1 blocked in every thread; the main thread waits for it.
    // SAFETY: a signal set of our own.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let start = Arc::new(Barrier::new(count + 1));
    let (tx, rx) = std::sync::mpsc::channel();
    let workers: Vec<_> = (0..count)
        .map(|i| {
            let (start, work, tx, warm_up) = (start.clone(), work(), tx.clone(), warm_up.clone());
            thread::spawn(move || {
                let stats = Taskstats::open();
                warm_up.take(&stats);
                drop(warm_up);
                tx.send(tid()).unwrap();
                start.wait();
                let mut calls = Calls::new();
                let before = stats.delays(tid());
                work(i, &mut calls);
                let after = stats.delays(tid());
                (tid(), calls, before, after)
            })
        })
        .collect();
    let tids: Vec<i32> = (0..count).map(|_| rx.recv().unwrap()).collect();
    // Every thread has taken its wait: the file goes before anything is traced.
    drop(warm_up);
    let ids: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
    println!("ready {} {}", std::process::id(), ids.join(" "));
    std::io::stdout().flush().ok();
    let mut sig = 0;
    // SAFETY: set holds SIGUSR1, blocked in this thread.
    unsafe { libc::sigwait(&set, &mut sig) };
    start.wait();
    let mut out = String::new();
    for w in workers {
        let (tid, calls, b, a) = w.join().unwrap_or_else(|_| die("a thread failed".into()));
        let ops = ["read", "write", "sync"]
            .iter()
            .enumerate()
            .map(|(i, op)| format!("{op} {} {}", calls.n[i], calls.ns[i]))
            .chain(
                ["read", "write", "sync"]
                    .iter()
                    .enumerate()
                    .map(|(i, op)| format!("{op}_off_ns {}", calls.off_ns[i])),
            )
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&format!(
            "thread {tid} {ops} blkio_ns {} blkio_count {} run_delay_ns {} cpu_ns {}\n",
            a.blkio_delay_ns - b.blkio_delay_ns,
            a.blkio_count - b.blkio_count,
            a.cpu_delay_ns - b.cpu_delay_ns,
            a.cpu_run_ns - b.cpu_run_ns,
        ));
    }
    println!("{out}done");
}
