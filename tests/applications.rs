//! iostack against applications' own clocks: fio's count and latencies of the reads it makes,
//! and a real PostgreSQL's count and time of its WAL syncs (`pg_stat_wal`, with
//! `track_wal_io_timing`, whose timer wraps the syscall), under pgbench on a disk whose writes
//! blk-throttle holds: the syncs are the backends' own I/O, every one of them counted.

mod support;

use std::process::Command;

use serde_json::Value;
use support::breakdown::*;
use support::*;

/// fio's `ios` random 4 KiB O_DIRECT reads through `engine` (its options), from a loop device
/// whose reads a cgroup throttles to 40 a second, under `iostack -c fio -d DISK -j`: fio's JSON
/// and iostack's report.
fn fio_throttled_reads(ios: u64, engine: &str) -> (Value, Value) {
    let (fio, r, _) = fio_reads_waiting(ios, engine, Wait::Queue);
    (fio, r)
}

/// Where fio's reads wait, 40 a second either way: held by blk-throttle before they reach the
/// disk (`Queue`), or on the disk itself (`Device`: a loop device, direct I/O, over another
/// whose reads blk-throttle holds; loop's workers submit the lower device's reads in the cgroup
/// of the reads above, fio's).
#[derive(Clone, Copy, Debug)]
enum Wait {
    Queue,
    Device,
}

/// fio's reads as fio_throttled_reads, waiting where `wait` says: fio's JSON, iostack's report,
/// and the traced disk's own account of its reads' time (/proc/diskstats' ms reading, over
/// fio's run).
fn fio_reads_waiting(ios: u64, engine: &str, wait: Wait) -> (Value, Value, u64) {
    let lower = LoopDevice::new(64);
    let throttle = Throttle::reads(&lower.name, 40);
    let upper = match wait {
        Wait::Queue => None,
        Wait::Device => Some(LoopDevice::over(&lower.path)),
    };
    let dev = upper.as_ref().unwrap_or(&lower);
    let tool = Running::start("iostack", &["-c", "fio", "-d", &dev.name, "-j"]);
    let ms_before = diskstats_read_ms(&dev.name);
    let fio = fio_reads(&throttle.path(), &dev.path, ios, engine);
    let ms = diskstats_read_ms(&dev.name) - ms_before;
    let (code, stdout, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
    (fio, report(&stdout), ms)
}

#[test]
fn fios_reads_are_counted_and_timed_as_fio_counts_and_times_them() {
    let _g = serial();
    require_root();
    let ios = 60;
    let (fio, r) = fio_throttled_reads(ios, "--ioengine=psync");
    let read = &fio["jobs"][0]["read"];
    let ours = ops(&r).remove("read").expect("fio's reads");
    assert_eq!(
        ours["calls"], read["total_ios"],
        "exactly fio's reads: {ours} / {read}"
    );
    assert_eq!(read["total_ios"], ios, "{read}");
    let mean = ours["layers"]["syscall"]["avg_ns"].as_f64().unwrap();
    let fio_mean = read["clat_ns"]["mean"].as_f64().unwrap();
    let ratio = mean / fio_mean;
    eprintln!("fio: {ios} reads, clat mean {fio_mean:.0} ns; iostack {mean:.0} ns ({ratio:.3})");
    assert!(
        (0.97..=1.03).contains(&ratio),
        "the calls' mean {mean} ns against fio's completion latency {fio_mean} ns: {ratio}"
    );
    for (ours_p, fio_p) in [("p50_ns", "50.000000"), ("p99_ns", "99.000000")] {
        let a = ours["layers"]["syscall"][ours_p].as_f64().unwrap();
        let b = read["clat_ns"]["percentile"][fio_p].as_f64().unwrap();
        // Both are estimates of the same reads' percentile: ours the midpoint of its log-linear
        // bucket (8 a power of two: within 6.25% of any value in it), fio's of its own (64 a
        // power of two: 0.8%); and fio's clock runs outside the call, by its way in and out and
        // its own bookkeeping: 5 us a call, as tests/truth.rs allows the helper's clock (fio's
        // median 36096 ns against ours 31744 for reads of about 33 us, a CI run of 2026-11-27,
        // where the old check of one bucket either side of a power of two failed).
        let resolution = (0.0625 + 0.008) * b.max(a);
        assert!(
            a <= b + resolution && b <= a + resolution + 5_000.0,
            "{ours_p}: {a} ns against fio's {fio_p}th percentile {b} ns (allowed: {resolution:.0} ns of buckets, and 5 us of fio's clock)"
        );
    }
    // Each read waits for its own read, held by blk-throttle.
    let total = ours["breakdown"]["total_ns"].as_u64().unwrap();
    let own = part(&ours, "io_queue_ns") + part(&ours, "io_device_ns");
    assert!(own * 100 >= total * 95, "its own I/O: {ours}");
}

/// fio's io_uring reads, O_DIRECT on a disk whose reads blk-throttle holds, at queue depths 1, 4
/// and 32: iostack follows every request fio issued (fio's own `total_ios`) from its submission
/// to its completion entry, and links each to its block I/O. fio takes a request's issue time
/// after io_uring_enter returns and its completion when it reaps the entry (fio >= 3.31;
/// research note io-interfaces.md): at depths 1 and 4 the two clocks differ by the inline issue
/// and the reap, microseconds against the throttle's 25 ms a read, and the means agree. At 32,
/// fio reaps late at the job's end: once it has issued its last I/O it waits for all the rest,
/// and entries posted meanwhile wait in the ring (on the CI host, 2026-11-29: per I/O, fio's
/// write_lat_log against the kernel's io_uring_submit_req/io_uring_complete trace, 57 of 60
/// within 14 us of the kernel's submission-to-entry time, 3 posted at 702.8 ms and reaped at
/// 1402.6 ms; fio's mean 736.5 ms, the kernel's 701.4, iostack's 701.7): there fio's mean
/// bounds ours from above.
#[test]
fn fios_io_uring_requests_are_counted_and_timed_as_fio_counts_and_times_them() {
    let _g = serial();
    require_root();
    for depth in [1, 4, 32] {
        let ios = 60;
        let UringReads {
            read,
            ours,
            report: r,
            disk_ms,
            total,
        } = fio_io_uring_reads(ios, depth, Wait::Queue);
        assert_eq!(r["request_drops"]["no_start"], 0, "{r}");
        assert_eq!(r["request_drops"]["start_full"], 0, "{r}");
        // Not a read(2) among them: the requests are not calls.
        assert!(!ops(&r).contains_key("read"), "{r}");
        assert_eq!(
            unwaited(&r),
            0,
            "iodepth {depth}: I/O no request waited for: {r}"
        );
        // The throttle holds each read before the disk: the disk's own account of its reads'
        // time bounds their time on the device from above (ours from each one's issue, the
        // disk's from its request's start, truncated to the ms).
        assert!(
            ours["device_ns"].as_u64().unwrap() <= (disk_ms + 1) * 1_000_000,
            "iodepth {depth}: on the device, by the disk's own account {disk_ms} ms: {ours}"
        );
        eprintln!("fio io_uring iodepth {depth}, reads held before the disk: {ours}, the disk's {disk_ms} ms, {total} ns in all");
        let mean = ours["latency"]["avg_ns"].as_f64().unwrap();
        let fio_mean = read["clat_ns"]["mean"].as_f64().unwrap();
        let ratio = mean / fio_mean;
        eprintln!(
            "fio io_uring iodepth {depth}: {ios} reads, clat mean {fio_mean:.0} ns; iostack {mean:.0} ns ({ratio:.4})"
        );
        match depth {
            // Ours starts inside io_uring_enter, fio's after it returns: per I/O, ours was
            // at most 9 us the longer in the run above.
            32 => assert!(
                mean <= fio_mean + 50_000.0,
                "iodepth {depth}: the requests' mean {mean} ns, fio's reaped {fio_mean} ns: {ratio}"
            ),
            _ => assert!(
                (0.97..=1.03).contains(&ratio),
                "iodepth {depth}: the requests' mean {mean} ns against fio's completion latency {fio_mean} ns: {ratio}"
            ),
        }
    }
}

/// fio's io_uring reads (fio_io_uring_reads): fio's figures, iostack's row of them, its whole
/// report, the disk's own ms, and the requests' time.
struct UringReads {
    read: Value,
    ours: Value,
    report: Value,
    disk_ms: u64,
    total: u64,
}

/// fio's `ios` random 4 KiB O_DIRECT reads through io_uring at queue depth `depth`, waiting
/// where `wait` says, under iostack. Every request fio made is in iostack's row of io_uring
/// reads, and each 4 KiB read is one bio and one block request, which leads to its request (the
/// kiocb its direct I/O was made for): as many block I/Os as requests, and their parts add up.
fn fio_io_uring_reads(ios: u64, depth: u32, wait: Wait) -> UringReads {
    let engine = format!("--ioengine=io_uring --iodepth={depth}");
    let (fio, report, disk_ms) = fio_reads_waiting(ios, &engine, wait);
    let read = fio["jobs"][0]["read"].clone();
    assert_eq!(read["total_ios"], ios, "{read}");
    let ours = report["requests"]
        .as_array()
        .and_then(|rows| rows.iter().find(|q| q["op"] == "read"))
        .cloned()
        .unwrap_or_else(|| panic!("no io_uring reads in {report}"));
    assert_eq!(ours["interface"], "io_uring", "{ours}");
    assert_eq!(
        ours["requests"], read["total_ios"],
        "iodepth {depth}: exactly fio's requests: {ours} / {read}"
    );
    // The whole report if not: its `accounted` says whether the disk completed requests no
    // program saw (CI68, 2026-11-29: 56 block I/Os for 60 requests at depth 32, 4 of them with
    // none; not reproduced in 89 runs beside the kernel matrix since).
    assert_eq!(
        ours["ios"], read["total_ios"],
        "iodepth {depth}: {ours}; the report: {report}"
    );
    let total = split_adds_up(&ours, depth);
    UringReads {
        read,
        ours,
        report,
        disk_ms,
        total,
    }
}

/// The six parts of a row of requests (`requests[]`, `process_requests[]`...), summed.
fn request_parts(row: &Value) -> u64 {
    [
        "worker_wait_ns",
        "to_device_ns",
        "device_ns",
        "between_io_ns",
        "after_io_ns",
        "no_io_ns",
    ]
    .iter()
    .map(|k| row[k].as_u64().unwrap_or_else(|| panic!("no {k}: {row}")))
    .sum()
}

/// fio's `ios` O_DIRECT random reads of `dev` from cgroup `cg` with `options`, under `iostack
/// ARGS -j`: iostack's report, its text and fio's reads' figures, once fio counted all of them
/// itself.
fn fio_under_iostack(
    args: &[&str],
    cg: &Cgroup2,
    dev: &LoopDevice,
    ios: u64,
    options: &str,
) -> (Value, String, Value) {
    let mut all = args.to_vec();
    all.push("-j");
    let tool = Running::start("iostack", &all);
    let fio = fio_reads(&cg.path(), &dev.path, ios, options);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fio["jobs"][0]["read"]["total_ios"], ios,
        "fio's own count: {fio}"
    );
    (report(&out), out, fio["jobs"][0]["read"].clone())
}

/// The six parts of `ours` (a `requests[]` row) add up to the requests' time, every request
/// had block I/O of its own, and one block request each (4 KiB, O_DIRECT): none of their time
/// lies between two of theirs. Returns the requests' time.
fn split_adds_up(ours: &Value, depth: u32) -> u64 {
    let ns = |key: &str| {
        ours[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key}: {ours}"))
    };
    let total = ours["latency"]["sum_ns"].as_u64().unwrap();
    assert_eq!(
        request_parts(ours),
        total,
        "iodepth {depth}: the parts add up to the requests' time: {ours}"
    );
    assert_eq!(ns("no_io_ns"), 0, "iodepth {depth}: {ours}");
    assert_eq!(ns("between_io_ns"), 0, "iodepth {depth}: {ours}");
    total
}

/// fio's io_uring reads of a disk that is itself slow (Wait::Device): each request's wait is
/// its block request's time on that disk, which the disk counts itself (/proc/diskstats): the
/// requests' time on the device agrees with it, and little of their time comes before it.
#[test]
fn an_io_uring_reads_time_on_a_slow_disk_is_its_time_on_the_device() {
    let _g = serial();
    require_root();
    for depth in [1, 32] {
        let ios = 60;
        let UringReads {
            ours,
            disk_ms,
            total,
            ..
        } = fio_io_uring_reads(ios, depth, Wait::Device);
        let device = ours["device_ns"].as_u64().unwrap();
        eprintln!("fio io_uring iodepth {depth}, reads slow on the disk: {ours}, the disk's {disk_ms} ms, {total} ns in all");
        // The disk's account starts at each block request's start, ours at its issue: 1.70 ms
        // apart over 60 reads at depth 1 (28-45 us a read, the disk's ms truncated), -0.23 to
        // 0.77 ms at depth 32 (the CI host, 2026-11-29); 100 us a read allowed.
        assert!(
            device <= (disk_ms + 1) * 1_000_000 && device + ios * 100_000 >= disk_ms * 1_000_000,
            "iodepth {depth}: on the device {device} ns, by the disk's own account {disk_ms} ms: {ours}"
        );
    }
}

/// `--slow` with fio's io_uring reads of a disk whose reads blk-throttle holds (40 a second, depth
/// 1: every read but the first waits about 25 ms): each request that slow is a journey of its
/// own, and the journeys are exactly the reads fio's own per-I/O log (write_lat_log with
/// log_offset: each read's completion latency and offset) shows that slow, matched by offset to
/// their block I/O's sector, each one's time fio's for that read within its way in and out.
#[test]
fn each_slow_io_uring_read_is_a_journey_of_the_read_fio_logged() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let throttle = Throttle::reads(&dev.name, 40);
    let log = std::env::temp_dir().join(format!("iostack-fio-lat-{}", std::process::id()));
    let prefix = log.display().to_string();
    let ios = 20;
    let slow_ms = 5;
    let tool = Running::start(
        "iostack",
        &[
            "-c",
            "fio",
            "-d",
            &dev.name,
            "--slow",
            &slow_ms.to_string(),
            "-j",
        ],
    );
    fio_reads(
        &throttle.path(),
        &dev.path,
        ios,
        &format!("--ioengine=io_uring --iodepth=1 --write_lat_log={prefix} --log_offset=1"),
    );
    let (code, stdout, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
    // fio's completion latency per read (ns), by its offset: `msec, value, dir, bs, offset, ...`.
    let clat_log = format!("{prefix}_clat.1.log");
    let fio_clat: std::collections::BTreeMap<u64, u64> = std::fs::read_to_string(&clat_log)
        .unwrap_or_else(|e| panic!("{clat_log}: {e}"))
        .lines()
        .map(|l| {
            let f: Vec<u64> = l.split(',').map(|v| v.trim().parse().unwrap()).collect();
            (f[4], f[1])
        })
        .collect();
    for suffix in ["clat", "lat", "slat"] {
        let _ = std::fs::remove_file(format!("{prefix}_{suffix}.1.log"));
    }
    assert_eq!(fio_clat.len() as u64, ios, "one line a read: {fio_clat:?}");
    let lines = json_lines(&stdout);
    let (summary, events) = lines.split_last().expect("a summary");
    let journeys: Vec<&Value> = events.iter().filter(|e| e.get("lost").is_none()).collect();
    assert_eq!(summary["summary"]["events"], journeys.len(), "{stdout}");
    let mut ours = std::collections::BTreeMap::new();
    for j in &journeys {
        assert_eq!(j["interface"], "io_uring", "{j}");
        assert_eq!(j["op"], "read", "{j}");
        assert!(
            j["opcode"] == "IORING_OP_READ" || j["opcode"] == "IORING_OP_READV",
            "fio's io_uring engine reads with READ (or READV): {j}"
        );
        assert_eq!(j["comm"], "fio", "{j}");
        assert_eq!(j["file"], dev.name, "{j}");
        assert_eq!(j["res"], 4096, "{j}");
        assert_ne!(j["user_data"], 0, "fio's user_data is its io_u: {j}");
        let lat = j["lat_ns"].as_u64().unwrap();
        let parts: u64 = j["parts"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(parts, lat, "its parts add up to it: {j}");
        assert_eq!(j["ios"], 1, "one block I/O, its own: {j}");
        let io = &j["io"][0];
        assert_eq!(io["disk"], dev.name, "{j}");
        assert_eq!(io["bytes"], 4096, "{j}");
        assert_eq!(io["how"], "own", "{j}");
        let offset = io["sector"].as_u64().unwrap() * 512;
        assert!(
            ours.insert(offset, lat).is_none(),
            "one journey a read: {stdout}"
        );
    }
    let fio_slow: std::collections::BTreeMap<u64, u64> = fio_clat
        .iter()
        .filter(|(_, &ns)| ns >= slow_ms * 1_000_000)
        .map(|(&o, &ns)| (o, ns))
        .collect();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        fio_slow.keys().collect::<Vec<_>>(),
        "the journeys are the reads fio logged as slower than {slow_ms} ms (by offset): ours {ours:?}, fio's {fio_clat:?}"
    );
    // fio's clock starts after io_uring_enter returns (ours at the SQE consumed, before it)
    // and stops when it reaps the entry (ours when it is posted): fio's 25-414 us longer a read
    // on this host (2026-11-29, reads of about 100 ms). Its reap waits for fio to get a CPU:
    // 3% of the read allowed for that, as the means' check above allows.
    for (offset, &lat) in &ours {
        let theirs = fio_slow[offset];
        eprintln!("offset {offset}: ours {lat} ns, fio's {theirs} ns");
        assert!(
            lat <= theirs + 1_000_000 && theirs <= lat + lat * 3 / 100,
            "the read at {offset}: ours {lat} ns, fio's {theirs} ns"
        );
    }
}

/// A PostgreSQL instance of its own: its data and WAL on one filesystem (whose writes a throttle
/// can hold), a private port and socket; stopped at once on drop.
struct Postgres {
    bin: std::path::PathBuf,
    /// The postmaster's cgroup (removed once the server has stopped: fields drop after drop()).
    throttle: Throttle,
    /// The cgroup v2 every postgres process is in (`cpu_busy_ns`).
    cpu_cgroup: String,
    _accounted: Option<Cgroup2>,
    data: Mounted,
    socket: std::path::PathBuf,
    port: u16,
}

impl Postgres {
    /// Every postgres process's time on a CPU (cpu.stat's usage_usec) and the time one of them
    /// at least was waiting for one (cpu.pressure's `some` total), so far, in ns: the kernel's
    /// own, more than any one process's time on a CPU or waiting for one.
    fn cpu_busy_ns(&self) -> u64 {
        let read = |file: &str| {
            std::fs::read_to_string(format!("{}/{file}", self.cpu_cgroup))
                .unwrap_or_else(|e| panic!("{}/{file}: {e}", self.cpu_cgroup))
        };
        let usage: u64 = read("cpu.stat")
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec ")?.parse().ok())
            .expect("cpu.stat's usage_usec");
        let waiting: u64 = read("cpu.pressure")
            .lines()
            .find(|l| l.starts_with("some "))
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("total=")?.parse().ok())
            })
            .expect("cpu.pressure's some total (CONFIG_PSI)");
        (usage + waiting) * 1000
    }

    fn run_as_postgres(&self, prog: &str, args: &[&str]) -> std::process::Output {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(prog))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {prog}: {e}"))
    }

    /// Initialised and started with the postmaster (and so every backend, the WAL writer and
    /// the checkpointer) in a cgroup whose writes to the WAL's disk a throttle can hold later.
    fn start() -> Postgres {
        let bin = std::path::PathBuf::from("/usr/lib/postgresql/15/bin");
        assert!(
            bin.join("postgres").exists(),
            "PostgreSQL 15 is not installed (install-deps installs it)"
        );
        let data = Mounted::new("ext4", 256);
        let throttle = Throttle::new(&data.dev.name, None, None);
        let cgroup = throttle.path();
        // A cgroup v2 of its own as well (the throttle's, where it is v2): its cpu.stat and
        // cpu.pressure count every postgres process's time on a CPU and waiting for one, the
        // backends that exit too.
        let accounted = match throttle.cgroup2() {
            Some(_) => None,
            None => Some(Cgroup2::new("postgres")),
        };
        let cpu_cgroup = accounted
            .as_ref()
            .map_or_else(|| cgroup.clone(), |c| c.path());
        let socket = std::env::temp_dir().join(format!("iostack-pg-{}", std::process::id()));
        std::fs::create_dir_all(&socket).unwrap();
        for dir in [&data.dir, &socket] {
            assert!(Command::new("chown")
                .args(["postgres:postgres"])
                .arg(dir)
                .status()
                .unwrap()
                .success());
        }
        let pg = Postgres {
            bin,
            throttle,
            cpu_cgroup: cpu_cgroup.clone(),
            _accounted: accounted,
            port: free_port(),
            data,
            socket,
        };
        let pgdata = pg.data.file("pgdata");
        let init = pg.run_as_postgres("initdb", &["-D", &pgdata, "-A", "trust", "-U", "postgres"]);
        assert!(
            init.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let opts = format!(
            "-c port={} -c listen_addresses= -c unix_socket_directories={} -c track_wal_io_timing=on -c wal_sync_method=fdatasync -c checkpoint_timeout=1h -c max_wal_size=4GB -c fsync=on -c synchronous_commit=on -c shared_buffers=16MB",
            pg.port,
            pg.socket.display()
        );
        // The postmaster in the cgroup: every backend, the WAL writer and the checkpointer too.
        let log = pg.data.file("log");
        let started = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ >{cgroup}/cgroup.procs && echo $$ >{cpu_cgroup}/cgroup.procs && exec runuser -u postgres -- {} -D {pgdata} -o '{opts}' -l {log} -w start",
                pg.bin.join("pg_ctl").display()
            ))
            .output()
            .unwrap();
        assert!(
            started.status.success(),
            "pg_ctl start: {} {}",
            String::from_utf8_lossy(&started.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        pg
    }

    fn sql(&self, query: &str) -> String {
        let out = Command::new("psql")
            .args(["-h"])
            .arg(&self.socket)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-At",
                "-c",
                query,
            ])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "{query}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn pgbench(&self, args: &[&str]) {
        let out = Command::new("pgbench")
            .args(["-h"])
            .arg(&self.socket)
            .args(["-p", &self.port.to_string(), "-U", "postgres"])
            .args(args)
            .arg("postgres")
            .output()
            .expect("pgbench");
        assert!(
            out.status.success(),
            "pgbench {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.run_as_postgres(
            "pg_ctl",
            &["-D", &self.data.file("pgdata"), "-m", "immediate", "stop"],
        );
        let _ = std::fs::remove_dir_all(&self.socket);
    }
}

#[test]
fn postgresqls_wal_syncs_are_counted_and_timed_as_postgresql_times_them_and_are_its_own_io() {
    let _g = serial();
    require_root();
    let pg = Postgres::start();
    pg.pgbench(&["-i", "-s", "1", "-q"]);
    // A fresh WAL segment (no new one is made during the run: its fsyncs are not wal_sync's)
    // and no checkpoint to come; the counters from zero.
    pg.sql("CHECKPOINT");
    pg.sql("SELECT pg_switch_wal()");
    pg.sql("SELECT pg_stat_reset_shared('wal')");
    // 10 writes a second, 4 commits a second: each fdatasync's write finds the throttle's
    // allowance and goes at once; the cache flush after it waits 100 ms (the case where the
    // flush, the kernel's own request with no bio, was shown as someone else's I/O).
    pg.throttle.limit_writes(10);
    let busy_before = pg.cpu_busy_ns();
    let tool = Running::start(
        "iostack",
        &["-c", "postgres", "-d", &pg.data.dev.name, "-j"],
    );
    pg.pgbench(&["-n", "-c", "1", "-R", "4", "-t", "12"]);
    let busy = pg.cpu_busy_ns() - busy_before;
    let (code, stdout, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
    let theirs = pg.sql("SELECT wal_sync || ' ' || wal_sync_time FROM pg_stat_wal");
    let (syncs, ms) = theirs.split_once(' ').expect("wal_sync and wal_sync_time");
    let (syncs, ms): (u64, f64) = (syncs.parse().unwrap(), ms.parse().unwrap());
    let r = report(&stdout);
    let sync = ops(&r).remove("sync").expect("the WAL's syncs");
    let ours_ms = sync["breakdown"]["total_ns"].as_u64().unwrap() as f64 / 1e6;
    eprintln!("PostgreSQL: {syncs} WAL syncs in {ms:.1} ms by its own count; iostack {} in {ours_ms:.1} ms: {}", sync["calls"], sync["breakdown"]);
    assert!(syncs >= 12, "pgbench's 12 commits were synced: {theirs}");
    assert_eq!(
        sync["calls"], syncs,
        "every WAL sync PostgreSQL counted, no other: {sync}"
    );
    assert!(
        ours_ms <= ms && ours_ms >= ms * 0.97,
        "the syncs' time by PostgreSQL's timer around the call, {ms} ms, and ours, {ours_ms} ms: {sync}"
    );
    // One process flushes the WAL at a time, and its fdatasync writes the WAL and flushes the
    // disk's cache: its own I/O, every millisecond not on a CPU. Held against PostgreSQL's
    // clock and the kernel's: of the syncs' time by PostgreSQL's timer, what no postgres
    // process spent on a CPU or waiting for one (cgroup's cpu.stat and cpu.pressure over the
    // run: more than the syncs spent so) was off a CPU, waiting for its own I/O.
    let total = sync["breakdown"]["total_ns"].as_u64().unwrap();
    let own = part(&sync, "io_queue_ns") + part(&sync, "io_device_ns");
    let off_at_least = ((ms * 1e6) as u64).saturating_sub(busy);
    eprintln!("PostgreSQL: its processes on a CPU or waiting for one {busy} ns over the run; own I/O {own} ns, at least {off_at_least} ns of the syncs off a CPU");
    assert!(
        off_at_least > 0 && own * 100 >= off_at_least * 95,
        "the WAL syncs are the backends' own I/O: {own} ns, of at least {off_at_least} ns off a CPU: {sync}"
    );
    assert!(
        part(&sync, "others_io_ns") * 100 <= total * 5,
        "no one else's I/O: {sync}"
    );
}

/// -P and --per-cgroup: fio's io_uring reads are its process's requests, and its cgroup's, to
/// the request (fio's own `total_ios`), each row's parts adding up to its time.
#[test]
fn per_process_and_per_cgroup_hold_exactly_the_io_uring_requests_fio_made() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let cg = Cgroup2::new("fio");
    let name = format!("/{}", cg.dir.file_name().unwrap().to_string_lossy());
    for (flag, key) in [
        ("-P", "process_requests"),
        ("--per-cgroup", "cgroup_requests"),
    ] {
        let ios = 40;
        let (r, out, _) = fio_under_iostack(
            &[flag, "-d", &dev.name],
            &cg,
            &dev,
            ios,
            "--ioengine=io_uring --iodepth=4",
        );
        let rows: Vec<&Value> = r[key]
            .as_array()
            .unwrap_or_else(|| panic!("{flag}: no {key} in {out}"))
            .iter()
            .filter(|row| row["interface"] == "io_uring" && row["op"] == "read")
            .collect();
        eprintln!("{flag}: {rows:?}");
        assert!(!rows.is_empty(), "{flag}: no row of io_uring reads: {out}");
        for row in &rows {
            match flag {
                "-P" => assert_eq!(row["comm"], "fio", "{flag}: not fio's: {row}"),
                _ => assert_eq!(
                    row["cgroup"],
                    name.as_str(),
                    "{flag}: not fio's cgroup: {row}"
                ),
            }
            assert_eq!(
                request_parts(row),
                row["total_ns"].as_u64().unwrap(),
                "{flag}: {row}"
            );
        }
        let sum = |k: &str| -> u64 { rows.iter().map(|row| row[k].as_u64().unwrap()).sum() };
        assert_eq!(sum("requests"), ios, "{flag}: fio's {ios} reads: {out}");
        assert_eq!(sum("ios"), ios, "{flag}: one block I/O each: {out}");
        // The same requests as the interface's row (nothing of fio's lost from the rows).
        let all: u64 = r["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row["interface"] == "io_uring" && row["op"] == "read")
            .map(|row| row["requests"].as_u64().unwrap())
            .sum();
        assert_eq!(all, ios, "{flag}: {out}");
    }
}

/// fio's io_uring reads with IOSQE_ASYNC on each (`force_async=1`): the kernel hands every one
/// to an io-wq worker (io_uring_queue_async_work), which issues it; iostack follows each from
/// its submission in fio's thread through the worker to its completion entry, counted as fio
/// counts them, each one punted, its block I/O leading back to it.
/// fio's `ios` 4 KiB random io_uring reads (iodepth 4, and `options`) of a loop device of its
/// own, from a cgroup of its own, under `iostack -c fio -d DEV -j`: every request fio counted
/// is followed from its submission to its completion entry, none was in flight unseen, each
/// has one block I/O of its own, and the parts add up. iostack's report, its row of io_uring
/// reads, and fio's reads' figures.
fn fio_io_uring_row(what: &str, ios: u64, options: &str) -> (Value, Value, Value) {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let cg = Cgroup2::new("fio");
    let (r, out, fio) = fio_under_iostack(
        &["-c", "fio", "-d", &dev.name],
        &cg,
        &dev,
        ios,
        &format!("--ioengine=io_uring --iodepth=4 {options}"),
    );
    assert_eq!(r["request_drops"]["no_start"], 0, "{what}: {out}");
    let row = r["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["interface"] == "io_uring" && row["op"] == "read")
        .unwrap_or_else(|| panic!("{what}: no io_uring reads: {out}"))
        .clone();
    eprintln!("{what}: {row}");
    assert_eq!(row["requests"], ios, "{what}: fio's reads: {row}");
    assert_eq!(
        row["ios"], ios,
        "{what}: each one block I/O of its own: {row}"
    );
    assert_eq!(
        request_parts(&row),
        row["latency"]["sum_ns"].as_u64().unwrap(),
        "{what}: {row}"
    );
    (r, row, fio)
}

/// fio's buffered io_uring reads of a disk it evicted first, each handed to an io-wq worker
/// (`force_async=1`), readahead off (`fadvise_hint=random`: a read brings in its one page):
/// the worker reads each page itself, in one block I/O it submits for the request it runs.
/// iostack's requests and their block I/Os are fio's reads, exactly, and the parts add up.
#[test]
fn buffered_io_uring_reads_a_worker_makes_count_their_block_io() {
    let ios = 30;
    let (_, row, _) = fio_io_uring_row(
        "buffered, force_async=1",
        ios,
        "--force_async=1 --direct=0 --fadvise_hint=random --invalidate=1",
    );
    assert_eq!(row["punted"], ios, "each handed to a worker: {row}");
}

/// fio's io_uring reads with `sqthread_poll=1`: the kernel's SQPOLL thread (`iou-sqp-PID`, a
/// thread of fio's, not named fio) consumes every SQE, and `-c fio` still follows each one to
/// its completion, with its block I/O, as fio counted them.
#[test]
fn io_uring_requests_the_sqpoll_thread_submits_are_its_applications() {
    let (_, row, fio) = fio_io_uring_row("sqthread_poll=1", 30, "--sqthread_poll=1");
    // fio stamps a request's issue once it has committed its SQE and reaps its entry later
    // than the kernel posts it; the SQPOLL thread may take the SQE before fio's stamp (as at
    // iodepth 32 in fios_io_uring_requests_are_counted...: 50 us).
    let mean = row["latency"]["avg_ns"].as_f64().unwrap();
    let fio_mean = fio["clat_ns"]["mean"].as_f64().unwrap();
    eprintln!("sqthread_poll=1: iostack's mean {mean:.0} ns, fio's clat mean {fio_mean:.0} ns");
    assert!(
        mean <= fio_mean + 50_000.0,
        "the requests' mean {mean} ns, fio's {fio_mean} ns: {row}"
    );
}

/// fio's O_DIRECT io_uring reads with `force_async=1` (IOSQE_ASYNC on each): the kernel hands
/// every one to an io-wq worker, which issues it; each is followed through the worker, its
/// block I/O leading to it as an inline one's does.
#[test]
fn io_uring_requests_a_worker_issues_are_followed_through_the_worker() {
    let ios = 30;
    let (r, row, _) = fio_io_uring_row("force_async=1", ios, "--force_async=1");
    assert_eq!(row["punted"], ios, "each handed to a worker: {row}");
    // A worker's taking of a request is seen only where io_wq_submit_work can be hooked (the
    // matrix's uring-worker-wait holds that part to a queue built for it); elsewhere (this
    // host: no kprobes, fentry refused) the report says why, and the wait stays in the part
    // it falls in.
    let waited = row["worker_wait_ns"].as_u64().unwrap();
    match r["worker_wait_not_split"].as_str() {
        Some(why) => {
            assert!(why.contains("io_wq_submit_work"), "{why}");
            assert_eq!(waited, 0, "not split, yet {waited} ns: {row}");
        }
        None => assert!(
            waited > 0,
            "30 punted requests, no wait for a worker: {row}"
        ),
    }
}
