//! biolat against the real kernel: I/Os we cause on a loop device must be counted exactly.

mod support;

use serde_json::Value;
use support::*;

const N: u64 = 200;

/// All histograms of all reports, as (labels, count, avg_ns).
fn histograms(stdout: &str) -> Vec<(Value, u64, f64)> {
    json_lines(stdout)
        .iter()
        .flat_map(|r| r["histograms"].as_array().cloned().unwrap_or_default())
        .map(|h| {
            (
                h["labels"].clone(),
                h["count"].as_u64().unwrap(),
                h["avg_ns"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn total(stdout: &str) -> u64 {
    histograms(stdout).iter().map(|(_, n, _)| n).sum()
}

/// `accounted.<disk>.unseen` over all reports.
fn unseen_on(stdout: &str, disk: &str) -> u64 {
    json_lines(stdout)
        .iter()
        .filter_map(|r| r["accounted"][disk]["unseen"].as_u64())
        .sum()
}

#[test]
fn counts_exactly_the_ios_we_cause_and_matches_diskstats() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let tool = Running::start("biolat", &["-d", &dev.name, "-j"]);
    let before = diskstats(&dev.name);
    dd_direct(&dev.path, N, true);
    dd_direct(&dev.path, N, false);
    let after = diskstats(&dev.name);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "stderr: {err}");
    let delta = (after.0 - before.0) + (after.1 - before.1);
    assert_eq!(delta, 2 * N, "diskstats saw {delta} I/Os on {}", dev.name);
    assert_eq!(
        total(&out) + unseen(&out),
        2 * N,
        "shown + unseen = the I/Os we caused: {out}"
    );
}

#[test]
fn flags_split_reads_from_writes() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let tool = Running::start("biolat", &["-F", "-d", &dev.name, "-j"]);
    dd_direct(&dev.path, N, true);
    dd_direct(&dev.path, N, false);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "stderr: {err}");
    let hs = histograms(&out);
    let by_op = |op: &str| -> u64 {
        hs.iter()
            .filter(|(l, _, _)| {
                l["flags"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(&format!("-{op}")) || f == op)
            })
            .map(|(_, n, _)| n)
            .sum()
    };
    let (writes, reads) = (by_op("Write"), by_op("Read"));
    assert!(writes <= N && reads <= N, "{out}");
    assert_eq!(writes + reads + unseen(&out), 2 * N, "{out}");
    assert_eq!(
        hs.len(),
        2,
        "one histogram per op/flags combination seen: {out}"
    );
}

#[test]
fn per_disk_shows_the_loop_device_apart_from_vda() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    // A file on the root disk, written with O_DIRECT, so vda has I/O of ours too.
    let on_root = format!("/var/tmp/iostack-test-{}.dat", std::process::id());
    let tool = Running::start("biolat", &["-D", "-j"]);
    dd_direct(&dev.path, N, true);
    dd_direct(&on_root, 16, true);
    let (code, out, err) = tool.interrupt();
    let _ = std::fs::remove_file(&on_root);
    assert_eq!(code, 0, "stderr: {err}");
    let hs = histograms(&out);
    let count_of = |disk: &str| -> u64 {
        hs.iter()
            .filter(|(l, _, _)| l["disk"] == disk)
            .map(|(_, n, _)| n)
            .sum()
    };
    assert_eq!(count_of(&dev.name) + unseen_on(&out, &dev.name), N, "{out}");
    let root_disk = ["vda", "sda", "nvme0n1", "xvda"]
        .into_iter()
        .find(|d| std::path::Path::new(&format!("/sys/block/{d}")).exists());
    // The root disk's own I/O completes wherever its interrupt lands, and this sandbox's 6.18
    // runs no BPF program while a thread of its PID 1 is current (src/common/block/unseen.rs):
    // CI39 saw 2 of vda's 17 requests and reported 15 unseen, and beside a build 13 of our 16
    // writes completed in softirq over PID 1's tokio-rt-worker (ftrace's block_rq_complete, the
    // current task of each), with `"vda":{"seen":3,"unseen":13}` (2026-11-28). A request biolat
    // did not see is one it reported, from /proc/diskstats, so those count here as on loop0.
    if let Some(root) = root_disk {
        assert!(
            count_of(root) + unseen_on(&out, root) >= 16,
            "{root} should show our 16 direct writes, seen or reported unseen: {out}"
        );
    }
}

#[test]
fn queued_average_is_at_least_the_plain_average() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let plain = Running::start("biolat", &["-d", &dev.name, "-j"]);
    let queued = Running::start("biolat", &["-Q", "-d", &dev.name, "-j"]);
    dd_direct(&dev.path, N, true);
    dd_direct(&dev.path, N, false);
    let (c1, plain_out, e1) = plain.interrupt();
    let (c2, queued_out, e2) = queued.interrupt();
    assert_eq!((c1, c2), (0, 0), "{e1} {e2}");
    let avg = |out: &str| {
        let hs = histograms(out);
        let n: u64 = hs.iter().map(|(_, n, _)| n).sum();
        let sum: f64 = hs.iter().map(|(_, n, a)| *n as f64 * a).sum();
        (n, sum / n as f64)
    };
    let (n_plain, avg_plain) = avg(&plain_out);
    let (n_queued, avg_queued) = avg(&queued_out);
    assert_eq!(
        (n_plain + unseen(&plain_out), n_queued + unseen(&queued_out)),
        (2 * N, 2 * N)
    );
    assert!(
        avg_queued >= avg_plain,
        "-Q avg {avg_queued} ns < plain avg {avg_plain} ns"
    );
}

#[test]
fn text_report_has_bcc_shape_and_summary() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let tool = Running::start("biolat", &["-d", &dev.name, "-T"]);
    dd_direct(&dev.path, 50, true);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "stderr: {err}");
    assert!(
        out.starts_with("Tracing block device I/O... Hit Ctrl-C to end.\n\n"),
        "{out}"
    );
    assert!(
        out.contains("     usecs               : count    distribution\n"),
        "{out}"
    );
    let count: u64 = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("count "))
        .and_then(|l| l.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary line: {out}"));
    assert_eq!(count + unseen(&out), 50, "{out}");
}

#[test]
fn unknown_disk_is_a_one_line_error() {
    let out = run("biolat", &["-d", "nosuchdisk"]);
    let err = assert_one_line_error(&out, "biolat");
    assert!(err.contains("unknown disk 'nosuchdisk'"), "{err}");
}

#[test]
fn bad_interval_is_a_one_line_error() {
    for bad in ["0", "-1", "soon"] {
        let out = run("biolat", &[bad]);
        assert_one_line_error(&out, "biolat");
        assert_eq!(out.status.code(), Some(2));
    }
}

#[test]
fn unprivileged_run_is_a_one_line_error() {
    let out = run_unprivileged("biolat", &[]);
    let err = assert_one_line_error(&out, "biolat");
    assert!(err.contains("lacks CAP_BPF and CAP_PERFMON"), "{err}");
}

#[test]
fn closed_stdout_ends_quietly() {
    let _g = serial();
    require_root();
    assert_closed_stdout_ends_quietly(
        "biolat",
        &["1"],
        "Tracing block device I/O... Hit Ctrl-C to end.\n",
    );
}

#[test]
fn explain_names_the_paths_and_attaches() {
    let _g = serial();
    require_root();
    // Where the stamps come from is always said; with ours, the issue and -Q start hooks.
    let text = explain("biolat", &["-Q"]);
    assert!(text.contains("/block_rq_complete"), "{text}");
    assert!(text.contains("\n  stamps     "), "{text}");
    let ours = explain("biolat", &["-Q", "--stamps", "ours"]);
    assert!(
        ours.contains("issue") && ours.contains("/block_rq_issue"),
        "{ours}"
    );
    assert!(ours.contains("-Q start"), "{ours}");
}

/// This machine's queues stamp their requests (writeback throttling and iostats are on by
/// default), so each mode reads the kernel's stamp with one program, and counts every I/O as
/// the two-program path with our own stamps does.
#[test]
fn kernel_stamps_and_ours_count_the_same_ios() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(64);
    let plain = explain("biolat", &["-d", &dev.name]);
    assert!(
        plain.contains("stamps     the kernel's rq->io_start_time_ns"),
        "{plain}"
    );
    assert!(!plain.contains("/block_rq_issue "), "one program: {plain}");
    let tools: Vec<Running> = [
        &[][..],
        &["-Q"],
        &["--stamps", "ours"],
        &["-Q", "--stamps", "ours"],
    ]
    .iter()
    .map(|mode| Running::start("biolat", &[&["-j", "-d", &dev.name], *mode].concat()))
    .collect();
    dd_direct(&dev.path, N, true);
    dd_direct(&dev.path, N, false);
    for tool in tools {
        let (code, out, err) = tool.interrupt();
        assert_eq!(code, 0, "stderr: {err}");
        assert_eq!(total(&out) + unseen(&out), 2 * N, "{out}");
        let drops = &json_lines(&out)[0]["drops"];
        assert_eq!(drops["no_start"], 0, "every request had a stamp: {out}");
    }
}

/// biolat's start map is sized to every request structure: at least each blk-mq disk's tags.
#[test]
fn start_map_covers_every_request_structure() {
    let mut tags = 0;
    for disk in std::fs::read_dir("/sys/block").unwrap().flatten() {
        for hctx in std::fs::read_dir(disk.path().join("mq"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let n = std::fs::read_to_string(hctx.path().join("nr_tags")).unwrap();
            tags += n.trim().parse::<u64>().unwrap();
        }
    }
    assert!(tags > 0, "no blk-mq disk on this machine");
    let structures = iostack::common::block::request_structures();
    assert!(structures >= tags, "{structures} < {tags} driver tags");
    let entries = iostack::common::block::request_map_entries() as u64;
    assert!(entries >= structures.min(1 << 20) && entries >= 16384);
}

/// 40 writes and 60 reads from cgroup a, 70 reads from b, on the loop device; checked against
/// /proc/diskstats.
fn io_in_two_cgroups(dev: &LoopDevice, a: &Cgroup2, b: &Cgroup2) {
    let before = diskstats(&dev.name);
    a.dd_direct(&dev.path, 40, true);
    a.dd_direct(&dev.path, 60, false);
    b.dd_direct(&dev.path, 70, false);
    let after = diskstats(&dev.name);
    let caused = (after.0 - before.0) + (after.1 - before.1);
    assert_eq!(caused, 170, "diskstats saw {caused} I/Os on {}", dev.name);
}

#[test]
fn a_cgroup_counts_exactly_the_ios_charged_to_it() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(16);
    let (a, b) = (Cgroup2::new("a"), Cgroup2::new("b"));
    // One biolat per cgroup, the same disk, side by side.
    let in_a = Running::start("biolat", &["-d", &dev.name, "--cgroup", &a.path(), "-j"]);
    let in_b = Running::start("biolat", &["-d", &dev.name, "--cgroup", &b.path(), "-j"]);
    io_in_two_cgroups(&dev, &a, &b);
    let (code_a, out_a, err_a) = in_a.interrupt();
    let (code_b, out_b, err_b) = in_b.interrupt();
    assert_eq!((code_a, code_b), (0, 0), "{err_a} {err_b}");
    assert_eq!(total(&out_a), 100, "a's 40 writes and 60 reads: {out_a}");
    assert_eq!(total(&out_b), 70, "b's 70 reads: {out_b}");
}

#[test]
fn explain_says_how_io_is_charged_to_a_cgroup() {
    let _g = serial();
    require_root();
    let a = Cgroup2::new("explain");
    let out = explain("biolat", &["--cgroup", &a.path()]);
    let charged = out
        .lines()
        .find(|l| l.trim_start().starts_with("charged"))
        .unwrap_or_else(|| panic!("no 'charged' line: {out}"));
    // Our cgroup has no io.stat where the io controller is not on v2 (the CI host's is v1).
    if a.dir.join("io.stat").exists() {
        assert!(charged.contains("blkcg"), "{charged}");
    } else {
        assert!(charged.contains("submitting task"), "{charged}");
        assert!(out.contains("block_bio_queue"), "{out}");
    }
}

#[test]
fn a_missing_cgroup_or_a_file_is_a_one_line_error() {
    let _g = serial();
    require_root();
    let a = Cgroup2::new("bad");
    let file = a.dir.join("cgroup.procs");
    for (arg, says) in [
        ("iostack-no-such-cgroup/at-all", "no cgroup"),
        (file.to_str().unwrap(), "is a file, not a cgroup"),
        ("/tmp", "is not in the cgroup v2 hierarchy"),
    ] {
        let out = run("biolat", &["--cgroup", arg]);
        let line = assert_one_line_error(&out, "biolat");
        assert!(line.contains(says), "{arg}: {line}");
    }
}

#[test]
fn per_cgroup_splits_the_ios_exactly_by_the_cgroup_charged() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(16);
    let (a, b) = (Cgroup2::new("a"), Cgroup2::new("b"));
    let tool = Running::start("biolat", &["-d", &dev.name, "--per-cgroup", "-j"]);
    io_in_two_cgroups(&dev, &a, &b);
    let (code, out, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
    let of = |c: &Cgroup2| -> u64 {
        let name = format!("/{}", c.dir.file_name().unwrap().to_string_lossy());
        histograms(&out)
            .iter()
            .filter(|(labels, _, _)| labels["cgroup"] == name.as_str())
            .map(|(_, n, _)| n)
            .sum()
    };
    assert_eq!((of(&a), of(&b)), (100, 70), "{out}");
    assert_eq!(
        total(&out) + unseen(&out),
        170,
        "nothing else, nothing lost: {out}"
    );
}
