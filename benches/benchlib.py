"""What the benchmark scripts share: starting a tracer and knowing when it is attached, its BPF
programs' in-kernel time (bpf_stats), the peers' packages, tracefs for the peers, loop devices
on tmpfs. Benchmarks print figures; nothing here asserts."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
STATS = "/proc/sys/kernel/bpf_stats_enabled"


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def require_root(name):
    if os.geteuid() != 0:
        sys.exit(f"{name}: run as root (tracing and bpf_stats need it)")


def install_peers(wanted):
    """wanted: {executable: Debian package}. Benchmark-only dependencies: install what is
    missing, skip what fails."""
    missing = sorted({pkg for exe, pkg in wanted.items() if not shutil.which(exe)})
    if missing:
        print(f"installing {' '.join(missing)} for the comparison", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                       stdout=subprocess.DEVNULL)


def build_release():
    subprocess.run(["cargo", "build", "--release", "--bins", "--examples", "-q"], cwd=ROOT,
                   check=True)


def prog_stats():
    """prog id -> (run_time_ns, run_cnt) of every loaded BPF program."""
    if not shutil.which("bpftool"):
        # Attach detection and in-kernel figures both need it.
        sys.exit("benchmark: bpftool is missing (apt-get install bpftool)")
    out = json.loads(sh("bpftool", "prog", "show", "-j"))
    return {p["id"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in out}


def set_bpf_stats(on):
    """bpf_stats adds two clock reads per program run: wall times are taken with it off."""
    with open(STATS, "w") as f:
        f.write("1" if on else "0")


@contextlib.contextmanager
def bench_environment():
    """tracefs mounted for the peers' perf tracepoints (if it was not), bpf_stats restored."""
    tracefs = "/sys/kernel/tracing"
    mounted = False
    if not os.path.isdir(os.path.join(tracefs, "events")):
        mounted = subprocess.run(["mount", "-t", "tracefs", "nodev", tracefs]).returncode == 0
    with open(STATS) as f:
        old = f.read().strip()
    try:
        yield
    finally:
        with open(STATS, "w") as f:
            f.write(old)
        if mounted:
            subprocess.run(["umount", tracefs])


@contextlib.contextmanager
def tmpfs_loop(size):
    """A loop device over a sparse file in /dev/shm: block I/O with no real disk in the way."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        img = os.path.join(shm, "bench.img")
        with open(img, "wb") as f:
            f.truncate(size)
        dev = sh("losetup", "-f", "--show", img).strip()
        try:
            yield dev
        finally:
            subprocess.run(["losetup", "-d", dev], check=False)


class Tracer:
    """A tracer command (None: no tracing), started per measurement. `Tracers` runs several
    at once as one."""

    def __init__(self, name, cmd):
        self.name, self.cmd = name, cmd

    def available(self):
        return self.cmd is None or bool(shutil.which(self.cmd[0]) or os.path.exists(self.cmd[0]))

    def start(self):
        """Starts the tracer and returns once its probes are attached, or raises."""
        if self.cmd is None:
            return None
        before = set(prog_stats())
        # Its output goes to a file: tools buffer stdout on a pipe, so a "ready" line may never
        # arrive. Ready means: its BPF programs are loaded and their number is stable.
        log = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        deadline = time.time() + 60
        last, stable_since = set(), time.time()
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"{self.name} exited before attaching: {log.read()[-300:]}")
            progs = set(prog_stats()) - before
            if progs != last:
                last, stable_since = progs, time.time()
            elif progs and time.time() - stable_since > 1.0:
                break
            if time.time() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise RuntimeError(f"{self.name} did not attach within 60 s")
            time.sleep(0.2)
        proc.iostack_progs = progs
        return proc

    @staticmethod
    def stop(proc):
        if proc is None:
            return
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def measure(tracers, rounds, workload, events, progress):
    """Interleaved rounds (A B C ... A B C ...): per tracer, the wall result of `workload()` with
    bpf_stats off, then in-kernel ns per event over a second `workload()` with bpf_stats on.
    Returns (wall lists, in-kernel lists, errors)."""
    wall = {t.name: [] for t in tracers}
    kern = {t.name: [] for t in tracers}
    errors = {}
    for r in range(rounds):
        for t in tracers:
            if t.name in errors:
                continue
            try:
                proc = t.start()
            except RuntimeError as e:
                errors[t.name] = str(e).strip().splitlines()[-1][:110]
                continue
            set_bpf_stats(False)
            wall[t.name].append(workload())
            if proc is not None:
                set_bpf_stats(True)
                before = prog_stats()
                workload()
                after = prog_stats()
                set_bpf_stats(False)
                total = sum(after.get(p, (0, 0))[0] - before.get(p, (0, 0))[0]
                            for p in proc.iostack_progs)
                kern[t.name].append(total / events)
            t.stop(proc)
        print(f"round {r + 1}/{rounds}: " +
              ", ".join(f"{n} {progress(v[-1])}" for n, v in wall.items() if v),
              file=sys.stderr)
    return wall, kern, errors


class Tracers(Tracer):
    """Several tracers at the same time (e.g. syslat and biolat), measured as one: their
    programs' in-kernel time is added up."""

    def __init__(self, name, cmds):
        super().__init__(name, cmds[0])
        self.parts = [Tracer(f"{name} ({c[0]})", c) for c in cmds]

    def available(self):
        return all(p.available() for p in self.parts)

    def start(self):
        procs = []
        try:
            for p in self.parts:
                procs.append(p.start())
        except RuntimeError:
            for proc in procs:
                Tracer.stop(proc)
            raise
        group = _ProcGroup(procs)
        return group

    def stop(self, proc):
        if proc is not None:
            for p in proc.procs:
                Tracer.stop(p)


class _ProcGroup:
    """The processes of a Tracers run, with the union of their programs."""

    def __init__(self, procs):
        self.procs = procs
        self.iostack_progs = set().union(*(p.iostack_progs for p in procs))
