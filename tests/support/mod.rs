//! Shared fixtures for tests that run the tools against the real kernel (as root).
#![allow(dead_code)]

pub mod breakdown;
pub mod browser;
pub mod ftrace;
pub mod prometheus;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Kernel tests share loop devices, disks and CPU: one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests trace the real kernel and must run as root (sudo cargo test)"
    );
}

/// A loop device over a temporary file (or over another device); detached, and its file
/// deleted, on drop, even when a test fails.
pub struct LoopDevice {
    pub path: String,
    pub name: String,
    file: Option<PathBuf>,
}

impl LoopDevice {
    pub fn new(size_mib: u64) -> LoopDevice {
        let file = std::env::temp_dir().join(format!(
            "iostack-test-{}-{}.img",
            std::process::id(),
            rand_suffix()
        ));
        let f = fs::File::create(&file).expect("create backing file");
        f.set_len(size_mib << 20).expect("size backing file");
        drop(f);
        let mut dev = LoopDevice::attach(&file, &[]);
        dev.file = Some(file);
        dev
    }

    /// A loop device over another device, with direct I/O: its requests become the lower
    /// device's, submitted by loop's workers in the cgroup of the I/O above.
    pub fn over(lower: &str) -> LoopDevice {
        LoopDevice::attach(std::path::Path::new(lower), &["--direct-io=on"])
    }

    fn attach(backing: &std::path::Path, options: &[&str]) -> LoopDevice {
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .args(options)
            .arg(backing)
            .output()
            .expect("run losetup");
        if !out.status.success() {
            panic!("losetup failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let name = path.trim_start_matches("/dev/").to_string();
        // let any probe of the new device settle before tests count its I/O
        thread::sleep(Duration::from_millis(200));
        LoopDevice {
            path,
            name,
            file: None,
        }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.path]).status();
        if let Some(file) = &self.file {
            let _ = fs::remove_file(file);
        }
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0)
}

/// A filesystem made on a loop device of its own and mounted in a temporary directory;
/// unmounted, detached and deleted on drop.
pub struct Mounted {
    pub dev: LoopDevice,
    pub dir: PathBuf,
}

impl Mounted {
    /// `fs`: ext4, xfs or btrfs (their mkfs from e2fsprogs, xfsprogs, btrfs-progs).
    pub fn new(fs: &str, size_mib: u64) -> Mounted {
        Mounted::on(fs, LoopDevice::new(size_mib))
    }

    /// The filesystem made on `dev`, which it keeps until it is unmounted.
    pub fn on(fs: &str, dev: LoopDevice) -> Mounted {
        let mkfs = match fs {
            "ext4" => vec![
                "mkfs.ext4",
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
            ],
            "xfs" => vec!["mkfs.xfs", "-q", "-f"],
            "btrfs" => vec!["mkfs.btrfs", "-q", "-f"],
            other => panic!("no mkfs for {other}"),
        };
        let out = Command::new(mkfs[0])
            .args(&mkfs[1..])
            .arg(&dev.path)
            .output()
            .unwrap_or_else(|e| panic!("{} (install-deps installs it): {e}", mkfs[0]));
        assert!(
            out.status.success(),
            "{}: {}",
            mkfs[0],
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = std::env::temp_dir().join(format!("iostack-mnt-{}-{}", dev.name, rand_suffix()));
        fs::create_dir_all(&dir).expect("mount point");
        let ok = Command::new("mount")
            .args(["-t", fs, &dev.path])
            .arg(&dir)
            .status()
            .expect("run mount")
            .success();
        assert!(ok, "mounting {fs} on {}", dir.display());
        Mounted { dev, dir }
    }

    pub fn file(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = fs::remove_dir(&self.dir);
    }
}

/// A disk's line of /proc/diskstats: its fields after the name (reads completed, reads merged,
/// sectors read, ms reading, writes completed, ...).
fn diskstats_fields(name: &str) -> Vec<u64> {
    let text = fs::read_to_string("/proc/diskstats").expect("read /proc/diskstats");
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 7 && f[2] == name {
            return f[3..].iter().map(|v| v.parse().unwrap()).collect();
        }
    }
    panic!("{name} not in /proc/diskstats");
}

/// Completed reads and writes of a disk, from /proc/diskstats.
pub fn diskstats(name: &str) -> (u64, u64) {
    let f = diskstats_fields(name);
    (f[0], f[4])
}

/// The time a disk's reads took so far by its own account (/proc/diskstats' ms reading: each
/// from its request's start to its completion, summed in ns and shown truncated to the ms).
pub fn diskstats_read_ms(name: &str) -> u64 {
    diskstats_fields(name)[3]
}

/// The 4 KiB pages read from a disk so far (its sectors read, from /proc/diskstats, / 8): what
/// the page cache brought in from it, counted as it was read, so a page reclaimed since still
/// counts (fincore, afterwards, misses it).
pub fn disk_read_pages(name: &str) -> u64 {
    diskstats_fields(name)[2] / 8
}

/// `count` O_DIRECT 4 KiB writes (or reads) on a path, with dd; returns dd's pid.
pub fn dd_direct(path: &str, count: u64, write: bool) -> u32 {
    let mut cmd = Command::new("dd");
    if write {
        cmd.args([
            "if=/dev/zero",
            &format!("of={path}"),
            "oflag=direct",
            "conv=notrunc",
        ]);
    } else {
        cmd.args([&format!("if={path}"), "of=/dev/null", "iflag=direct"]);
    }
    cmd.args(["bs=4096", &format!("count={count}")]);
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dd");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait dd");
    assert!(
        out.status.success(),
        "dd failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    pid
}

/// A tool's binary: this build's, or with IOSTACK_TEST_BIN_DIR set, that directory's (to hold
/// another build to the same tests: the build before a change, which its new tests must fail).
pub fn bin(tool: &str) -> String {
    if let Ok(dir) = std::env::var("IOSTACK_TEST_BIN_DIR") {
        return format!("{dir}/{tool}");
    }
    match tool {
        "biolat" => env!("CARGO_BIN_EXE_biolat").to_string(),
        "syslat" => env!("CARGO_BIN_EXE_syslat").to_string(),
        "bioslower" => env!("CARGO_BIN_EXE_bioslower").to_string(),
        "vfslat" => env!("CARGO_BIN_EXE_vfslat").to_string(),
        "fslat" => env!("CARGO_BIN_EXE_fslat").to_string(),
        "iostack" => env!("CARGO_BIN_EXE_iostack").to_string(),
        "iostack-exporter" => env!("CARGO_BIN_EXE_iostack-exporter").to_string(),
        "rastat" => env!("CARGO_BIN_EXE_rastat").to_string(),
        alias => alias_of_fslat(alias),
    }
}

/// `ext4lat`, `xfslat`...: installed as links to fslat (scripts/aliases), so here too: a link
/// with the alias' name, since the name is what chooses the filesystem.
fn alias_of_fslat(alias: &str) -> String {
    assert!(
        alias.ends_with("lat") && alias != "fslat",
        "unknown tool {alias}"
    );
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("aliases");
    std::fs::create_dir_all(&dir).expect("alias directory");
    let link = dir.join(alias);
    let fslat = std::path::Path::new(env!("CARGO_BIN_EXE_fslat"));
    if std::fs::read_link(&link).ok().as_deref() != Some(fslat) {
        // A link left by a build elsewhere (a clone since removed) goes; several tests may race
        // to make it: whoever loses finds it made.
        let _ = std::fs::remove_file(&link);
        let _ = std::os::unix::fs::symlink(fslat, &link);
    }
    link.to_string_lossy().into_owned()
}

/// A tool running in the background, its output collected as it comes.
pub struct Running {
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<thread::JoinHandle<()>>,
}

fn collect(stream: impl Read + Send + 'static, into: Arc<Mutex<String>>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            into.lock().unwrap().push_str(&line);
            line.clear();
        }
    })
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts the tool and waits until it says it is tracing (on stdout, or stderr with -j).
    pub fn start(tool: &str, args: &[&str]) -> Running {
        let mut command = Command::new(bin(tool));
        command.args(args);
        Running::spawn(command, &format!("{tool} {args:?}"))
    }

    /// As `start`, as nobody with only these capabilities, ambient (as a systemd unit's
    /// AmbientCapabilities= gives them).
    pub fn start_with_caps(tool: &str, caps: &[&str], args: &[&str]) -> Running {
        let mut command = with_caps(caps);
        command.arg(bin(tool)).args(args);
        Running::spawn(command, &format!("{tool} {args:?} with {caps:?}"))
    }

    fn spawn(mut command: Command, what: &str) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tool");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), stdout.clone()),
            collect(child.stderr.take().unwrap(), stderr.clone()),
        ];
        let running = Running {
            child,
            stdout,
            stderr,
            readers,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let both = format!(
                "{}{}",
                running.stdout.lock().unwrap(),
                running.stderr.lock().unwrap()
            );
            if both.contains("Hit Ctrl-C to end") {
                return running;
            }
            if Instant::now() > deadline {
                panic!("{what} did not start tracing within 30 s; output so far: {both}");
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `within` until the tool has printed `n` lines on stdout; returns them.
    pub fn wait_for_lines(&self, n: usize, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let out = self.stdout.lock().unwrap().clone();
            if out.lines().count() >= n {
                return out;
            }
            if Instant::now() > deadline {
                panic!("{n} lines not printed within {within:?}; so far: {out}");
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends `signal` and returns at once (e.g. SIGSTOP/SIGCONT to stall the tool's reader).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal)
            .expect("send signal");
    }

    /// SIGINT (Ctrl-C), then waits for the final report.
    pub fn interrupt(self) -> (i32, String, String) {
        self.stop_with(nix::sys::signal::Signal::SIGINT)
    }

    /// Sends `signal`, then waits for the tool to exit; (status, stdout, stderr).
    pub fn stop_with(mut self, signal: nix::sys::signal::Signal) -> (i32, String, String) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal)
            .expect("send signal");
        let status = self.child.wait().expect("wait tool");
        for r in self.readers.drain(..) {
            r.join().unwrap();
        }
        let out = self.stdout.lock().unwrap().clone();
        let err = self.stderr.lock().unwrap().clone();
        (status.code().unwrap_or(-1), out, err)
    }
}

impl Drop for Running {
    /// A test that fails before it stops its tool must not leave it running, tracing on into
    /// the next test.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn run(tool: &str, args: &[&str]) -> Output {
    Command::new(bin(tool))
        .args(args)
        .output()
        .expect("run tool")
}

/// `TOOL --explain ARGS`: must succeed and prove the plan loaded and attached; returns stdout.
pub fn explain(tool: &str, args: &[&str]) -> String {
    let out = run(tool, &[&["--explain"], args].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("loaded and attached: ok"), "{text}");
    text
}

/// Runs the tool as user nobody (no capabilities).
pub fn run_unprivileged(tool: &str, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(bin(tool))
        .args(args)
        .output()
        .expect("run setpriv")
}

/// The tool run as nobody with only these capabilities (e.g. ["bpf", "perfmon"]), ambient, as
/// a systemd unit's AmbientCapabilities= gives them.
pub fn run_with_caps(tool: &str, caps: &[&str], args: &[&str]) -> Output {
    with_caps(caps)
        .arg(bin(tool))
        .args(args)
        .output()
        .expect("run setpriv")
}

/// setpriv, ready to run a command as nobody with only `caps`, ambient.
fn with_caps(caps: &[&str]) -> Command {
    let set: String = caps.iter().map(|c| format!(",+{c}")).collect();
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps=-all{set}"))
        .arg(format!("--ambient-caps=-all{set}"));
    command
}

/// An error exit: non-zero, exactly one line on stderr, no panic or backtrace.
pub fn assert_one_line_error(out: &Output, tool: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{tool} should fail; stderr: {err}");
    assert_eq!(
        err.lines().count(),
        1,
        "one line of error expected, got: {err:?}"
    );
    assert!(err.starts_with(&format!("{tool}: ")), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    err
}

/// Parses every stdout line as one JSON object.
pub fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// `TOOL ARGS | head -1`: the first line is `first_line`, then the reader goes away and the tool
/// must end by itself with status 0 and nothing on stderr.
pub fn assert_closed_stdout_ends_quietly(tool: &str, args: &[&str], first_line: &str) {
    let mut child = Command::new(bin(tool))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tool");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, first_line);
    // the reader is dropped here: stdout is closed, as when head exits
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "{tool} kept running after its stdout closed"
        );
        thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "exit {status:?}, stderr {err}");
    assert_eq!(err, "", "nothing on stderr");
}

/// I/Os a block tool reported as `unseen`: completed per /proc/diskstats but never shown to its
/// BPF programs (the kernel skips BPF programs in some contexts; see the README). Read from its
/// own report: JSON `drops.unseen` (biolat) and `{"lost":N,"reason":"unseen"}` lines
/// (bioslower), or the text notes `N I/O(s) completed on DISK (per /proc/diskstats) never
/// reached the BPF programs` (both). Exact counts in tests are `shown + unseen == caused`.
pub fn unseen(stdout: &str) -> u64 {
    stdout
        .lines()
        .map(|line| {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                if v.get("tool").is_some() {
                    return v["drops"]["unseen"].as_u64().unwrap_or(0);
                }
                if v["reason"] == "unseen" {
                    return v["lost"].as_u64().unwrap_or(0);
                }
                return 0;
            }
            let rest = line
                .strip_prefix("note: ")
                .or_else(|| line.strip_prefix("lost "));
            match rest {
                Some(r) if r.contains("(per /proc/diskstats) never reached the BPF programs") => r
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
                _ => 0,
            }
        })
        .sum()
}

/// Runs a program to its end; a failure fails the test with its standard error.
/// fio's `ios` random 4 KiB O_DIRECT reads of `dev` (its first 32 MiB), its process first moved
/// into `cgroup` (a directory with a cgroup.procs), with `options` (the engine, its depth, its
/// logs): fio's JSON report. fio is Debian's (scripts/install-deps installs it).
pub fn fio_reads(cgroup: &str, dev: &str, ios: u64, options: &str) -> serde_json::Value {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ >{cgroup}/cgroup.procs && exec fio --name=reads --filename={dev} --direct=1 --rw=randread --bs=4k {options} --size=32M --number_ios={ios} --output-format=json"
        ))
        .stderr(Stdio::inherit())
        .output()
        .expect("run fio (install-deps installs it)");
    assert!(out.status.success(), "fio failed");
    serde_json::from_slice(&out.stdout).expect("fio's JSON")
}

pub fn run_ok(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A helper from `examples/`, built beside the test binaries by `cargo test` (which builds the
/// examples when no targets are named) or `cargo build --examples` (scripts/test).
pub fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing: build the examples (cargo build --release --examples)",
        bin.display()
    );
    bin
}

/// A workload helper (`examples/syscall_workload`, `breakdown_workload`...) that prints
/// `ready <pid> [more]` and waits for SIGUSR1 before it makes its calls, so that a tracer can
/// attach first.
pub struct Helper {
    child: Child,
    stdout: BufReader<std::process::ChildStdout>,
    pub pid: u32,
    /// The rest of its `ready` line (e.g. the reader thread's id).
    pub ready: Vec<String>,
}

impl Helper {
    pub fn start(example: &str, args: &[&str]) -> Helper {
        let mut child = Command::new(example_bin(example))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {example}: {e}"));
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("ready"), "{example} said {line:?}");
        let pid = words
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{example} said {line:?}"));
        Helper {
            child,
            stdout,
            pid,
            ready: words.map(String::from).collect(),
        }
    }

    /// Lets it make its calls, waits until it has exited, and returns the rest of its output.
    pub fn run(mut self) -> String {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid as i32),
            nix::sys::signal::Signal::SIGUSR1,
        )
        .expect("signal the helper");
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().expect("wait for the helper");
        assert!(status.success(), "the helper failed: {status:?}");
        rest
    }
}

/// A blkio (cgroup v1) or io (v2) cgroup whose processes' I/O on one disk blk-throttle holds to
/// so many operations a second; removed on drop.
pub struct Throttle {
    pub dir: PathBuf,
    /// The disk's MAJ:MIN, and whether the throttle is cgroup v1's.
    dev: String,
    v1: bool,
}

impl Throttle {
    /// Reads of `disk` held to `iops` a second (writes free).
    pub fn reads(disk: &str, iops: u32) -> Throttle {
        Throttle::new(disk, Some(iops), None)
    }

    /// Writes of `disk` held to `iops` a second (flushes count as writes; reads free).
    pub fn writes(disk: &str, iops: u32) -> Throttle {
        Throttle::new(disk, None, Some(iops))
    }

    pub fn new(disk: &str, read_iops: Option<u32>, write_iops: Option<u32>) -> Throttle {
        let dev = fs::read_to_string(format!("/sys/block/{disk}/dev")).expect("disk's dev");
        let dev = dev.trim();
        let mounts = fs::read_to_string("/proc/mounts").expect("/proc/mounts");
        let v1 = mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "blkio"))
                .then(|| PathBuf::from(f[1]))
        });
        let name = format!("iostack-test-{}-{}", std::process::id(), rand_suffix());
        if let Some(root) = v1 {
            let dir = root.join(name);
            fs::create_dir(&dir).expect("create a blkio cgroup");
            for (file, iops) in [
                ("blkio.throttle.read_iops_device", read_iops),
                ("blkio.throttle.write_iops_device", write_iops),
            ] {
                if let Some(iops) = iops {
                    fs::write(dir.join(file), format!("{dev} {iops}")).expect("set the throttle");
                }
            }
            return Throttle {
                dir,
                dev: dev.to_string(),
                v1: true,
            };
        }
        let root = mounts
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
            })
            .expect("no blkio cgroup (v1) and no cgroup2 mount: cannot throttle a disk");
        let _ = fs::write(root.join("cgroup.subtree_control"), "+io");
        let dir = root.join(name);
        fs::create_dir(&dir).expect("create a cgroup");
        let mut max = dev.to_string();
        if let Some(r) = read_iops {
            max.push_str(&format!(" riops={r}"));
        }
        if let Some(w) = write_iops {
            max.push_str(&format!(" wiops={w}"));
        }
        fs::write(dir.join("io.max"), max).expect("set io.max");
        Throttle {
            dir,
            dev: dev.to_string(),
            v1: false,
        }
    }

    /// Holds writes to `iops` a second from now on (a throttle made with none).
    pub fn limit_writes(&self, iops: u32) {
        let dev = &self.dev;
        let (file, value) = match self.v1 {
            true => ("blkio.throttle.write_iops_device", format!("{dev} {iops}")),
            false => ("io.max", format!("{dev} wiops={iops}")),
        };
        fs::write(self.dir.join(file), value).expect("set the write throttle");
    }

    /// The throttle's cgroup when it is a cgroup v2 (a host without blkio v1): a process moved
    /// into another v2 cgroup would leave the throttle.
    pub fn cgroup2(&self) -> Option<&std::path::Path> {
        (!self.v1).then_some(self.dir.as_path())
    }

    /// Moves process `pid` into the throttled cgroup.
    pub fn adopt(&self, pid: u32) {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("join the cgroup");
    }

    /// Lifts the throttle: the disk's reads are free from now on (throttled reads waiting go
    /// at once).
    pub fn lift(&self) {
        let dev = &self.dev;
        let (file, value) = match self.v1 {
            true => ("blkio.throttle.read_iops_device", format!("{dev} 0")),
            false => ("io.max", format!("{dev} riops=max")),
        };
        fs::write(self.dir.join(file), value).expect("lift the read throttle");
    }

    pub fn path(&self) -> String {
        self.dir.to_string_lossy().into_owned()
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Sets a sysctl for the life of the guard, then puts the old value back.
pub struct Sysctl {
    path: PathBuf,
    old: Option<String>,
}

impl Sysctl {
    /// None where this kernel has no such knob.
    pub fn set(name: &str, value: &str) -> Option<Sysctl> {
        let path = PathBuf::from("/proc/sys").join(name.replace('.', "/"));
        let old = fs::read_to_string(&path).ok()?;
        fs::write(&path, value).ok()?;
        Some(Sysctl {
            path,
            old: Some(old),
        })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        if let Some(old) = self.old.take() {
            let _ = fs::write(&self.path, old.trim());
        }
    }
}

/// The kernel's unbound work (loop's workers among it) confined to the CPUs but one, the
/// mask put back on drop (`/sys/devices/virtual/workqueue/cpumask`). None where the kernel has
/// no such file, or one CPU, or more than 32.
pub struct UnboundWorkOff {
    old: String,
}

impl UnboundWorkOff {
    const MASK: &'static str = "/sys/devices/virtual/workqueue/cpumask";

    pub fn cpu(cpu: usize) -> Option<UnboundWorkOff> {
        let old = fs::read_to_string(Self::MASK).ok()?.trim().to_string();
        // SAFETY: sysconf has no side effects.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        // One 32-bit group of the mask's hex, as the kernel parses it without commas.
        if !(2..=32).contains(&cpus) {
            return None;
        }
        let rest = (u32::MAX >> (32 - cpus)) & !(1u32 << cpu);
        fs::write(Self::MASK, format!("{rest:x}")).ok()?;
        Some(UnboundWorkOff { old })
    }
}

impl Drop for UnboundWorkOff {
    fn drop(&mut self) {
        let _ = fs::write(Self::MASK, &self.old);
    }
}

/// A cgroup of our own under the cgroup v2 mount (on the host, beside the v1 controllers:
/// /sys/fs/cgroup/unified), removed on drop.
pub struct Cgroup2 {
    pub dir: PathBuf,
}

impl Cgroup2 {
    pub fn new(name: &str) -> Cgroup2 {
        let mounts = fs::read_to_string("/proc/mounts").expect("/proc/mounts");
        let root = mounts
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
            })
            .expect("no cgroup2 mount");
        let dir = root.join(format!(
            "iostack-test-{}-{}-{name}",
            std::process::id(),
            rand_suffix()
        ));
        fs::create_dir(&dir).expect("create a cgroup v2");
        Cgroup2 { dir }
    }

    pub fn path(&self) -> String {
        self.dir.to_string_lossy().into_owned()
    }

    /// A cgroup below this one (removed before it, when dropped first).
    pub fn child(&self, name: &str) -> Cgroup2 {
        let dir = self.dir.join(name);
        fs::create_dir(&dir).expect("create a child cgroup");
        Cgroup2 { dir }
    }

    /// Moves a process (all its threads) into it.
    pub fn adopt(&self, pid: u32) {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("move into the cgroup");
    }

    /// `dd_direct` run from inside it.
    pub fn dd_direct(&self, path: &str, count: u64, write: bool) {
        let io = if write {
            format!("if=/dev/zero of={path} oflag=direct conv=notrunc")
        } else {
            format!("if={path} of=/dev/null iflag=direct")
        };
        let procs = self.dir.join("cgroup.procs");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > {} && exec dd {io} bs=4096 count={count} 2>&1",
                procs.display()
            ))
            .output()
            .expect("spawn dd");
        assert!(
            out.status.success(),
            "dd in {} failed: {}",
            self.path(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

impl Drop for Cgroup2 {
    fn drop(&mut self) {
        // Its processes have exited; the kernel may take a moment to let the directory go.
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A free port on 127.0.0.1 (bound and released: the exporter binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The exporter serving on a free port of 127.0.0.1, with `args`; and that port. With `caps`,
/// as nobody with only those capabilities (as its systemd unit runs it).
pub fn exporter(caps: Option<&[&str]>, args: &[&str]) -> (Running, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let args = [&["--listen", listen.as_str()], args].concat();
    let tool = match caps {
        Some(caps) => Running::start_with_caps("iostack-exporter", caps, &args),
        None => Running::start("iostack-exporter", &args),
    };
    (tool, port)
}

/// The body of GET `path` (HTTP/1.0: the server closes when done).
pub fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the exporter");
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or(reply)
}
