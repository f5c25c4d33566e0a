//! bioslower against the real kernel: the I/Os we cause on a loop device must each show up once,
//! attributed to the dd that submitted them, and only when slower than the threshold.

mod support;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::*;

const N: u64 = 200;

/// Text event lines for `disk`: the columns TIME COMM PID DISK T SECTOR BYTES [QUE] LAT.
fn text_events<'a>(stdout: &'a str, disk: &str) -> Vec<Vec<&'a str>> {
    stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() >= 8 && f[3] == disk)
        .collect()
}

/// JSON events (objects with a comm) and the summary object.
fn json_events(stdout: &str) -> (Vec<Value>, Value) {
    let all = json_lines(stdout);
    let summary = all
        .iter()
        .find(|v| v.get("summary").is_some())
        .cloned()
        .unwrap_or_else(|| panic!("no summary line: {stdout}"));
    let events = all
        .into_iter()
        .filter(|v| v.get("comm").is_some())
        .collect();
    (events, summary)
}

#[test]
fn threshold_zero_shows_every_io_with_the_submitting_dd() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let tool = Running::start("bioslower", &["0", "-d", &dev.name]);
    let before = diskstats(&dev.name);
    let dd = dd_direct(&dev.path, N, true);
    let after = diskstats(&dev.name);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(after.1 - before.1, N, "diskstats saw other writes");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "Tracing all block device I/O... Hit Ctrl-C to end."
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["TIME(s)", "COMM", "PID", "DISK", "T", "SECTOR", "BYTES", "LAT(ms)"]
    );
    let events = text_events(&out, &dev.name);
    let lost = unseen(&out);
    assert_eq!(events.len() as u64 + lost, N, "shown + unseen: {out}");
    let pid = dd.to_string();
    let mut sectors: Vec<u64> = Vec::new();
    for f in &events {
        assert_eq!((f[1], f[2]), ("dd", pid.as_str()), "{f:?}");
        assert!(f[4].starts_with('W'), "a write: {f:?}");
        assert_eq!(f[6], "4096");
        let lat: f64 = f[7].parse().unwrap();
        assert!(lat >= 0.0 && f[7].contains('.'), "{f:?}");
        sectors.push(f[5].parse().unwrap());
    }
    sectors.sort_unstable();
    sectors.dedup();
    assert_eq!(sectors.len(), events.len(), "each 4 KiB block at most once");
    assert!(
        sectors.iter().all(|s| s % 8 == 0 && *s < N * 8),
        "{sectors:?}"
    );
    let shown = events.len();
    assert!(
        out.ends_with(&format!(
            "\n{shown} events, {lost} lost (ring_buffer_full 0, no_start 0, start_full 0, clock 0, unseen {lost})\n"
        )),
        "{out}"
    );
}

#[test]
fn a_high_threshold_shows_none_of_the_same_ios() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let tool = Running::start("bioslower", &["1000", "-d", &dev.name]);
    dd_direct(&dev.path, N, true);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "stderr: {err}");
    assert!(out.starts_with("Tracing block device I/O slower than 1 s..."));
    assert_eq!(text_events(&out, &dev.name).len(), 0, "{out}");
    assert!(out.contains("\n0 events, 0 lost"), "{out}");
}

#[test]
fn json_events_have_the_documented_fields() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let tool = Running::start("bioslower", &["-j", "0", "-d", &dev.name]);
    let writer = dd_direct(&dev.path, N, true);
    let reader = dd_direct(&dev.path, N, false);
    // SIGTERM ends a run as Ctrl-C does: the summary, status 0.
    let (code, out, err) = tool.stop_with(Signal::SIGTERM);
    assert_eq!(code, 0, "stderr: {err}");
    assert!(
        err.contains("Hit Ctrl-C to end"),
        "the banner goes to stderr: {err}"
    );
    let (events, summary) = json_events(&out);
    let lost = unseen(&out);
    assert_eq!(events.len() as u64 + lost, 2 * N, "{out}");
    for e in &events {
        for field in [
            "time_s", "stage", "comm", "pid", "tid", "disk", "rwbs", "flags", "sector", "bytes",
            "lat_ms", "lat_ns",
        ] {
            assert!(e.get(field).is_some(), "{field} missing: {e}");
        }
        assert!(e.get("queue_ms").is_none(), "no queue time without -Q: {e}");
        assert_eq!(e["stage"], "block");
        assert_eq!(e["disk"], dev.name.as_str());
        assert_eq!(e["comm"], "dd");
        assert_eq!(e["bytes"], 4096);
        let lat_ns = e["lat_ns"].as_u64().unwrap();
        let lat_ms = e["lat_ms"].as_f64().unwrap();
        assert!((lat_ms * 1e6 - lat_ns as f64).abs() < 1.0, "{e}");
        assert!(e["time_s"].as_f64().unwrap() > 0.0, "{e}");
    }
    let by = |pid: u32, op: char| {
        events
            .iter()
            .filter(|e| e["pid"] == pid && e["rwbs"].as_str().unwrap().starts_with(op))
            .count() as u64
    };
    let (writes, reads) = (by(writer, 'W'), by(reader, 'R'));
    assert!(writes <= N && reads <= N, "{out}");
    assert_eq!(writes + reads + lost, 2 * N, "{out}");
    assert!(events
        .iter()
        .all(|e| e["flags"].as_str().unwrap().ends_with("Write")
            || e["flags"].as_str().unwrap().ends_with("Read")));
    assert_eq!(summary["summary"]["events"], events.len());
    assert_eq!(summary["summary"]["lost"], lost);
    assert_eq!(summary["summary"]["unseen"], lost);
    assert_eq!(summary["summary"]["ring_buffer_full"], 0);
    assert_eq!(summary["summary"]["no_start"], 0);
}

#[test]
fn queued_time_is_shown_and_part_of_the_latency() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let text = Running::start("bioslower", &["-Q", "0", "-d", &dev.name]);
    let json = Running::start("bioslower", &["-Q", "-j", "0", "-d", &dev.name]);
    dd_direct(&dev.path, N, true);
    let (c1, text_out, e1) = text.interrupt();
    let (c2, json_out, e2) = json.interrupt();
    assert_eq!((c1, c2), (0, 0), "{e1} {e2}");
    assert!(text_out.contains(" QUE(ms)  LAT(ms)\n"), "{text_out}");
    assert_eq!(
        text_events(&text_out, &dev.name).len() as u64 + unseen(&text_out),
        N
    );
    let (events, _) = json_events(&json_out);
    assert_eq!(events.len() as u64 + unseen(&json_out), N, "{json_out}");
    for e in &events {
        let q = e["queue_ns"].as_u64().unwrap();
        let lat = e["lat_ns"].as_u64().unwrap();
        assert!(q <= lat, "queue time is part of -Q latency: {e}");
        assert!(e["queue_ms"].is_f64(), "{e}");
    }
}

#[test]
fn task_filters_select_by_the_submitter() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let me = std::process::id().to_string();
    let by_comm = Running::start("bioslower", &["-j", "-c", "dd", "0", "-d", &dev.name]);
    let other_comm = Running::start("bioslower", &["-j", "-c", "notdd", "0", "-d", &dev.name]);
    let other_pid = Running::start("bioslower", &["-j", "-p", &me, "0", "-d", &dev.name]);
    dd_direct(&dev.path, N, true);
    let counts: Vec<u64> = [by_comm, other_comm, other_pid]
        .into_iter()
        .map(|t| {
            let (code, out, err) = t.interrupt();
            assert_eq!(code, 0, "{err}");
            // An unseen I/O cannot be attributed to a task: it counts for the filter that
            // selects dd.
            json_events(&out).0.len() as u64 + unseen(&out)
        })
        .collect();
    assert_eq!(counts[0], N);
    assert_eq!(counts[1..], [0, 0]);
}

/// A reader that stalls (SIGSTOP) while more I/O completes than the ring buffer holds: the
/// kernel side counts every event it could not hand over, so shown + lost = I/Os done, and the
/// loss is printed in-band when the reader resumes.
#[test]
fn a_stalled_reader_loses_events_and_counts_every_one() {
    let _g = serial();
    require_root();
    // 640 MiB of 4 KiB reads: 163840 events, well past the 8 MiB ring buffer (~95k events).
    let dev = LoopDevice::new(640);
    let tool = Running::start("bioslower", &["0", "-d", &dev.name]);
    tool.signal(Signal::SIGSTOP);
    let before = diskstats(&dev.name);
    dd_direct(&dev.path, 640 * 256, false);
    let after = diskstats(&dev.name);
    tool.signal(Signal::SIGCONT);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "stderr: {err}");
    let done = after.0 - before.0;
    assert_eq!(done, 640 * 256, "diskstats saw other reads");
    let shown = text_events(&out, &dev.name).len() as u64;
    let in_band: u64 = out
        .lines()
        .filter_map(|l| l.strip_prefix("lost "))
        .filter(|l| l.contains("the ring buffer was full"))
        .map(|l| l.split_whitespace().next().unwrap().parse::<u64>().unwrap())
        .sum();
    let never_seen = unseen(&out);
    assert!(
        in_band > 0 && shown > 0,
        "shown {shown}, lost in-band {in_band}"
    );
    assert_eq!(
        shown + in_band + never_seen,
        done,
        "every I/O shown or counted as lost"
    );
    let lost = in_band + never_seen;
    assert!(
        out.ends_with(&format!(
            "\n{shown} events, {lost} lost (ring_buffer_full {in_band}, no_start 0, start_full 0, clock 0, unseen {never_seen})\n"
        )),
        "{}",
        &out[out.len().saturating_sub(300)..]
    );
}

#[test]
fn closed_stdout_ends_quietly() {
    let _g = serial();
    require_root();
    assert_closed_stdout_ends_quietly(
        "bioslower",
        &["0"],
        "Tracing all block device I/O... Hit Ctrl-C to end.\n",
    );
}

#[test]
fn bad_threshold_is_a_one_line_error() {
    for bad in ["abc", "-5", "1e3", "10xs", "ms"] {
        let out = run("bioslower", &[bad]);
        let err = assert_one_line_error(&out, "bioslower");
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
    }
    let out = run("bioslower", &["abc"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("'abc' is not a latency"));
}

#[test]
fn contradictory_flags_are_one_line_errors() {
    for args in [&["-K"][..], &["-Q", "--stage", "submit"][..]] {
        let out = run("bioslower", args);
        assert_one_line_error(&out, "bioslower");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn unknown_disk_is_a_one_line_error() {
    let out = run("bioslower", &["-d", "nosuchdisk"]);
    let err = assert_one_line_error(&out, "bioslower");
    assert!(err.contains("unknown disk 'nosuchdisk'"), "{err}");
}

#[test]
fn unprivileged_run_is_a_one_line_error() {
    let out = run_unprivileged("bioslower", &[]);
    let err = assert_one_line_error(&out, "bioslower");
    assert!(err.contains("lacks CAP_BPF and CAP_PERFMON"), "{err}");
}

/// Submission timing needs fentry/fexit or kprobes; this kernel's answer decides what to expect.
#[test]
fn submit_stage_runs_or_says_why_not() {
    let _g = serial();
    require_root();
    let prober = iostack::common::kernel::prober::Prober::new().expect("kernel BTF");
    let fentry = prober.fentry_works("submit_bio_noacct");
    let kprobe = prober.kprobe_works("submit_bio_noacct");
    let out = run("bioslower", &["--stage", "submit", "-K", "--explain"]);
    if fentry.is_err() && kprobe.is_err() {
        let err = assert_one_line_error(&out, "bioslower");
        assert!(
            err.contains("needs fentry/fexit or kprobe/kretprobe")
                && err.contains("fentry unavailable")
                && err.contains("kprobes unavailable"),
            "{err}"
        );
    } else {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("submit_bio_noacct") && text.contains("sched_switch"),
            "{text}"
        );
    }
}

#[test]
fn explain_names_the_submitter_hooks_and_attaches() {
    let _g = serial();
    require_root();
    let text = explain("bioslower", &["-Q"]);
    assert!(text.contains("/block_bio_queue"), "{text}");
    assert!(text.contains("\n  stamps     "), "{text}");
    let ours = explain("bioslower", &["-Q", "--stamps", "ours"]);
    assert!(ours.contains("-Q start"), "{ours}");
}

/// With our own stamps (the two-program path), every I/O still shows once, from the dd.
#[test]
fn our_stamps_show_the_same_ios() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let tool = Running::start(
        "bioslower",
        &["-j", "--stamps", "ours", "0", "-d", &dev.name],
    );
    let dd = dd_direct(&dev.path, N, true);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "stderr: {err}");
    let (events, _) = json_events(&out);
    assert_eq!(events.len() as u64 + unseen(&out), N, "{out}");
    assert!(
        events.iter().all(|e| e["pid"] == dd && e["comm"] == "dd"),
        "{out}"
    );
}

#[test]
fn a_cgroup_shows_its_ios_and_per_cgroup_names_the_cgroup_charged() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(16);
    let (a, b) = (Cgroup2::new("a"), Cgroup2::new("b"));
    let only_a = Running::start(
        "bioslower",
        &["0", "-d", &dev.name, "--cgroup", &a.path(), "-j"],
    );
    let split = Running::start("bioslower", &["0", "-d", &dev.name, "--per-cgroup", "-j"]);
    let before = diskstats(&dev.name);
    a.dd_direct(&dev.path, 40, true);
    b.dd_direct(&dev.path, 70, false);
    let after = diskstats(&dev.name);
    assert_eq!((after.1 - before.1, after.0 - before.0), (40, 70));
    let (code_a, out_a, err_a) = only_a.interrupt();
    let (code_s, out_s, err_s) = split.interrupt();
    assert_eq!((code_a, code_s), (0, 0), "{err_a} {err_s}");
    // Every one of a's I/Os is shown, or counted unseen (unseen counts the disk's, whosever
    // they were), and none of b's is shown.
    let (events_a, _) = json_events(&out_a);
    let shown_a = events_a.len() as u64;
    assert!(events_a.iter().all(|e| e["comm"] == "dd"), "{out_a}");
    assert!(shown_a <= 40 && shown_a + unseen(&out_a) >= 40, "{out_a}");
    let (events, _) = json_events(&out_s);
    let in_cgroup = |c: &Cgroup2| {
        let name = format!("/{}", c.dir.file_name().unwrap().to_string_lossy());
        events
            .iter()
            .filter(|e| e["cgroup"] == name.as_str())
            .count() as u64
    };
    let (na, nb, lost) = (in_cgroup(&a), in_cgroup(&b), unseen(&out_s));
    assert!(na <= 40 && nb <= 70, "{out_s}");
    assert_eq!(
        na + nb + lost,
        110,
        "each I/O under its cgroup, or unseen: {out_s}"
    );
}
