//! iostack-exporter on the real kernel: what /metrics says is what we caused, disks that come
//! and go come and go in it, and bad input is one line.

mod support;

use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

use support::prometheus::{prometheus_bin, Prometheus};
use support::*;

/// `iostack_block_latency_seconds_count` of a disk's reads.
fn reads_series(disk: &str) -> String {
    format!("iostack_block_latency_seconds_count{{disk=\"{disk}\",op=\"read\"}}")
}

/// The value of the sample `series` (`name{labels}`), if /metrics has it.
fn sample(metrics: &str, series: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Waits past two collection intervals (one a second), so that what was done is drained.
fn two_intervals() {
    std::thread::sleep(Duration::from_millis(2500));
}

#[test]
fn metrics_count_exactly_the_ios_we_made_in_both_block_families() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(16);
    let (tool, port) = exporter(None, &["-d", &dev.name]);
    let before = diskstats(&dev.name);
    dd_direct(&dev.path, 300, false);
    dd_direct(&dev.path, 40, true);
    let after = diskstats(&dev.name);
    assert_eq!((after.0 - before.0, after.1 - before.1), (300, 40));
    two_intervals();
    let m = http_get(port, "/metrics");
    for family in [
        "iostack_block_latency_seconds",
        "iostack_block_queue_latency_seconds",
    ] {
        for (op, n) in [("read", 300), ("write", 40)] {
            let labels = format!("{{disk=\"{}\",op=\"{op}\"}}", dev.name);
            assert_eq!(
                sample(&m, &format!("{family}_count{labels}")),
                Some(n),
                "{m}"
            );
            let inf = format!(
                "{family}_bucket{{disk=\"{}\",op=\"{op}\",le=\"+Inf\"}}",
                dev.name
            );
            assert_eq!(sample(&m, &inf), Some(n), "{m}");
        }
    }
    let unseen = "iostack_lost_events_total{layer=\"block\",reason=\"unseen\"}";
    assert_eq!(sample(&m, unseen), Some(0), "{m}");
    assert_eq!(
        sample(&m, "iostack_layer_up{layer=\"block\"}"),
        Some(1),
        "{m}"
    );
    let (code, _, err) = tool.stop_with(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, 0, "SIGTERM ends it cleanly: {err}");
}

#[test]
fn as_its_unit_runs_it_nobody_with_cap_bpf_and_cap_perfmon_it_counts_exactly() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(16);
    let (tool, port) = exporter(Some(&["bpf", "perfmon"]), &["-d", &dev.name]);
    dd_direct(&dev.path, 60, false);
    two_intervals();
    let m = http_get(port, "/metrics");
    assert_eq!(sample(&m, &reads_series(&dev.name)), Some(60), "{m}");
    let (code, _, err) = tool.stop_with(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, 0, "SIGTERM, as systemctl stop sends it: {err}");
}

#[test]
fn per_cgroup_labels_split_the_ios_by_cgroup_cut_at_the_depth_asked() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(16);
    let (a, b) = (Cgroup2::new("a"), Cgroup2::new("b"));
    let deep = a.child("deep");
    let (tool, port) = exporter(
        None,
        &["--layers", "block", "-d", &dev.name, "--per-cgroup=1"],
    );
    a.dd_direct(&dev.path, 100, false);
    deep.dd_direct(&dev.path, 30, false);
    b.dd_direct(&dev.path, 70, false);
    two_intervals();
    let m = http_get(port, "/metrics");
    let count = |c: &Cgroup2| {
        let name = format!("/{}", c.dir.file_name().unwrap().to_string_lossy());
        let series = format!(
            "iostack_block_latency_seconds_count{{cgroup=\"{name}\",disk=\"{}\",op=\"read\"}}",
            dev.name
        );
        sample(&m, &series)
    };
    assert_eq!(
        (count(&a), count(&b)),
        (Some(130), Some(70)),
        "a's child is counted as a, at depth 1: {m}"
    );
    drop(deep);
    tool.interrupt();
}

#[test]
fn a_loop_device_attached_mid_run_appears_and_its_series_stop_when_it_goes() {
    let _g = serial();
    require_root();
    let (tool, port) = exporter(None, &["--layers", "block"]);
    let dev = LoopDevice::new(16);
    dd_direct(&dev.path, 25, false);
    two_intervals();
    let series = reads_series(&dev.name);
    let m = http_get(port, "/metrics");
    assert_eq!(sample(&m, &series), Some(25), "{m}");
    let name = dev.name.clone();
    drop(dev);
    two_intervals();
    let m = http_get(port, "/metrics");
    assert!(
        !m.contains(&format!("disk=\"{name}\"")),
        "{name} is gone, its series too: {m}"
    );
    let (code, _, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
}

#[test]
fn the_index_page_names_each_layer_and_links_to_metrics() {
    let _g = serial();
    require_root();
    let (tool, port) = exporter(None, &["--layers", "block,vfs"]);
    let page = http_get(port, "/");
    assert!(page.contains("<a href=\"/metrics\">"), "{page}");
    assert!(page.contains("block &mdash; traced"), "{page}");
    assert!(
        page.contains("tp_btf/block_rq_complete"),
        "the hooks, as --explain says: {page}"
    );
    // The CI host has neither fentry nor kprobes; where it has, the VFS layer is traced.
    assert!(page.contains("<h3>vfs &mdash; "), "{page}");
    tool.interrupt();
}

#[test]
fn bad_input_is_a_one_line_error() {
    let _g = serial();
    require_root();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    for (args, says) in [
        (
            vec!["--listen".to_string(), format!("127.0.0.1:{port}")],
            "in use".to_string(),
        ),
        (
            vec!["--listen".into(), "nowhere".into()],
            "not an address and port".into(),
        ),
        (vec!["--layers".into(), "nosuch".into()], "nosuch".into()),
        (vec!["-d".into(), "nosuchdisk".into()], "nosuchdisk".into()),
        (
            vec!["--fs".into(), "nosuchfs".into()],
            "unknown filesystem".into(),
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run("iostack-exporter", &args);
        let err = assert_one_line_error(&out, "iostack-exporter");
        assert!(err.contains(&says), "{args:?}: {err}");
    }
}

#[test]
fn explain_shows_each_layers_hooks_or_why_it_cannot_be_traced() {
    let _g = serial();
    require_root();
    let out = run("iostack-exporter", &["--explain", "--layers", "block,vfs"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("block: traced"), "{text}");
    assert!(
        text.contains("block_rq_complete"),
        "the block layer's hook: {text}"
    );
    // The CI host has neither fentry nor kprobes: the VFS layer says why; elsewhere its hooks.
    let last = match text.contains("vfs: traced") {
        true => "loaded and attached: ok\n",
        false => "loaded and attached: block; not traced here: vfs\n",
    };
    assert!(text.ends_with(last), "{text}");
}

#[test]
fn a_real_prometheus_counts_exactly_the_ios_we_made_and_reads_biolats_median() {
    let _g = serial();
    require_root();
    const N: u64 = 500;
    let dev = LoopDevice::new(16);
    // Our disk only: the CI host's 6.18 runs no BPF program while a thread of the sandbox's PID 1
    // is current, so now and then a completion on the machine's own disk (vda, busy with CI's
    // builds) is unseen, rightly counted as such (2 in one CI run of 2026-11-26): a fact about
    // that disk, not about the I/Os this test makes.
    let (tool, port) = exporter(None, &["--layers", "block", "-d", &dev.name]);
    let biolat = Running::start("biolat", &["-d", &dev.name, "-j"]);
    let prometheus = Prometheus::start(port);
    let before = diskstats(&dev.name);
    dd_direct(&dev.path, N, false);
    let after = diskstats(&dev.name);
    assert_eq!(after.0 - before.0, N, "diskstats saw the reads we made");
    let (code, out, err) = biolat.interrupt();
    assert_eq!(code, 0, "{err}");
    // One drain of the exporter, then two scrapes.
    two_intervals();
    std::thread::sleep(Duration::from_millis(2500));

    let series = format!("{{disk=\"{}\",op=\"read\"}}", dev.name);
    assert_eq!(
        prometheus.value(&format!("iostack_block_latency_seconds_count{series}")),
        Some(N as f64),
        "Prometheus holds exactly the reads we made"
    );
    assert_eq!(
        prometheus.value("iostack_lost_events_total{layer=\"block\",reason=\"unseen\"}"),
        Some(0.0)
    );
    // The same reads' median: Prometheus interpolates in the bucket [2^k, 2^(k+1)) us that
    // holds the middle read, biolat reads its finer bucket in it: the same log2 bucket.
    let hists: Vec<serde_json::Value> = json_lines(&out)
        .iter()
        .flat_map(|r| r["histograms"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(hists.len(), 1, "biolat saw one disk's reads: {out}");
    assert_eq!(hists[0]["count"].as_u64(), Some(N), "{out}");
    let biolat_us = hists[0]["p50_ns"].as_f64().unwrap() / 1e3;
    let prometheus_us = prometheus
        .value(&format!(
            "histogram_quantile(0.5, iostack_block_latency_seconds_bucket{series}) * 1e6"
        ))
        .expect("a median from Prometheus");
    // biolat and the exporter read the clock at the same completions one after the other, so a
    // median within a microsecond above a bucket's bound can be below it for the other (biolat
    // 8.7 us, the midpoint of its 8.19-9.22 us bucket, against Prometheus' 7.3 us in [4, 8],
    // once in a run on the CI host, 2026-11-27): then the bucket below is the same median.
    let bucket = |us: f64| us.max(1.0).log2().floor();
    let low = 2f64.powf(bucket(biolat_us));
    let lowest = match biolat_us - low < 1.0 {
        true => low / 2.0,
        false => low,
    };
    assert!(
        (lowest..=2.0 * low).contains(&prometheus_us),
        "Prometheus' median {prometheus_us:.1} us is in biolat's median's bucket [{lowest}, {}] us (biolat: {biolat_us:.1} us)",
        2.0 * low
    );

    // promtool lints what Prometheus scraped, as the text format.
    let metrics = http_get(port, "/metrics");
    let mut promtool = std::process::Command::new(prometheus_bin("promtool"))
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start promtool");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let lint = promtool.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    assert!(
        lint.status.success() && said.is_empty(),
        "promtool check metrics: {said}"
    );
    drop(prometheus);
    let (code, _, err) = tool.stop_with(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, 0, "{err}");
}

/// The series of `family` in a scrape's text, by their labels (`{cgroup="/a",op="read"}`
/// without the braces), with their values.
fn series_of(metrics: &str, family: &str) -> Vec<(String, f64)> {
    metrics
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(family)?.strip_prefix('{')?;
            let (labels, value) = rest.rsplit_once("} ")?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Two tools' programs on the same hooks run one after the other: what lies between their
/// clock reads, at most, per call (1.3 to 2.2 us a call, part by part, on the CI host's 6.18,
/// 2026-11-27: 25 throttled reads and 10 fsyncs).
const PER_CALL_NS: u64 = 10_000;

/// Seconds as exported, back to the nanoseconds they were (exact below 2^53 ns).
fn ns(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}

#[test]
fn prometheus_holds_each_cgroups_breakdown_as_iostack_reports_it_and_its_parts_add_up_to_the_latency_sum(
) {
    let _g = serial();
    require_root();
    const READS: u64 = 20;
    const FSYNCS: u64 = 10;
    let dev = LoopDevice::new(16);
    let fs = Mounted::new("ext4", 64);
    // The reader's reads wait in blk-throttle, 20 a second; the writer's fsyncs wait for ext4's
    // journal.
    let throttle = Throttle::reads(&dev.name, 20);
    let (a, b) = (Cgroup2::new("reader"), Cgroup2::new("writer"));
    // Where the host throttles with cgroup v2, the throttle's cgroup is the reader's.
    let reader_cgroup = match throttle.cgroup2() {
        Some(dir) => dir.to_path_buf(),
        None => a.dir.clone(),
    };
    let label = |dir: &std::path::Path| format!("/{}", dir.file_name().unwrap().to_string_lossy());
    let (reader, writer) = (label(&reader_cgroup), label(&b.dir));
    let writes = Helper::start(
        "io_patterns",
        &[
            "overwrite-fsync",
            &fs.file("wal"),
            &FSYNCS.to_string(),
            "--cgroup",
            &b.path(),
        ],
    );
    // dd's own binary and libraries are read before it is traced, so that its reads that wait
    // for the disk are those of the device.
    run_ok("dd", &["--version"]);
    let (tool, port) = exporter(None, &["--layers", "breakdown", "--per-cgroup=1"]);
    let iostack = Running::start("iostack", &["--per-cgroup=1", "-j"]);
    let prometheus = Prometheus::start(port);
    let before = diskstats(&dev.name);
    let joins = std::iter::once(&reader_cgroup)
        .chain(throttle.cgroup2().is_none().then_some(&throttle.dir))
        .map(|dir| format!("echo $$ > {}/cgroup.procs && ", dir.display()))
        .collect::<String>();
    run_ok(
        "sh",
        &[
            "-c",
            &format!(
                "{joins}exec dd if={} of=/dev/null iflag=direct bs=4096 count={READS} 2>/dev/null",
                dev.path
            ),
        ],
    );
    writes.run();
    let after = diskstats(&dev.name);
    assert_eq!(after.0 - before.0, READS, "diskstats saw the reads we made");
    let (code, out, err) = iostack.interrupt();
    assert_eq!(code, 0, "{err}");
    // One drain of the exporter, then two scrapes.
    two_intervals();
    std::thread::sleep(Duration::from_millis(2500));

    // iostack's own rows for the same calls.
    let r = json_lines(&out).pop().expect("iostack's report");
    let row = |cgroup: &str, op: &str| -> serde_json::Value {
        r["cgroups"]
            .as_array()
            .and_then(|rows| {
                rows.iter()
                    .find(|x| x["cgroup"] == cgroup && x["op"] == op)
                    .cloned()
            })
            .unwrap_or_else(|| panic!("iostack has no row for {cgroup} {op}: {out}"))
    };
    let m = http_get(port, "/metrics");
    for (cgroup, op, calls, ios) in [
        (&reader, "read", None, Some(READS)),
        (&writer, "sync", Some(FSYNCS), None),
    ] {
        let mine = row(cgroup, op);
        let series = format!("cgroup=\"{cgroup}\",op=\"{op}\"");
        let calls_in_prometheus = prometheus.value(&format!("iostack_calls_total{{{series}}}"));
        assert_eq!(
            calls_in_prometheus,
            mine["calls"].as_f64(),
            "{cgroup} {op}: Prometheus and iostack count the same calls: {mine}"
        );
        if let Some(n) = calls {
            assert_eq!(
                calls_in_prometheus,
                Some(n as f64),
                "the {op} calls we made"
            );
        }
        let ios_in_prometheus = prometheus.value(&format!("iostack_call_ios_total{{{series}}}"));
        assert_eq!(ios_in_prometheus, mine["ios"].as_f64(), "{mine}");
        if let Some(n) = ios {
            assert_eq!(ios_in_prometheus, Some(n as f64), "the I/Os we made");
        }
        // Part by part, two programs on the same hooks one after the other: what lies between
        // their clock reads, per call.
        let parts = prometheus.by(
            &format!("sum by (part) (iostack_call_seconds_total{{{series}}})"),
            "part",
        );
        let calls = mine["calls"].as_u64().unwrap();
        for (part, json) in [
            ("on_cpu", "on_cpu_ns"),
            ("run_queue", "run_queue_ns"),
            ("os_queue", "io_queue_ns"),
            ("device", "io_device_ns"),
            ("others_io", "others_io_ns"),
            ("other_sleep", "other_sleep_ns"),
        ] {
            let theirs = ns(parts[part]);
            let ours = mine["breakdown"][json].as_u64().unwrap();
            assert!(
                theirs.abs_diff(ours) <= calls * PER_CALL_NS,
                "{cgroup} {op} {part}: Prometheus {theirs} ns, iostack {ours} ns: {mine}"
            );
        }
    }
    // In the exporter, every series' parts add up to its latency's sum, to the nanosecond.
    let sums = series_of(&m, "iostack_syscall_latency_seconds_sum");
    assert!(!sums.is_empty(), "{m}");
    for (labels, sum) in sums {
        let parts: u64 = series_of(&m, "iostack_call_seconds_total")
            .into_iter()
            .filter(|(l, _)| l.starts_with(&format!("{labels},part=")))
            .map(|(_, v)| ns(v))
            .sum();
        assert_eq!(parts, ns(sum), "{labels}: parts vs the latency's sum: {m}");
        let count = series_of(&m, "iostack_syscall_latency_seconds_count")
            .into_iter()
            .find(|(l, _)| *l == labels)
            .map(|(_, v)| v);
        let calls = series_of(&m, "iostack_calls_total")
            .into_iter()
            .find(|(l, _)| *l == labels)
            .map(|(_, v)| v);
        assert_eq!(count, calls, "{labels}: {m}");
    }
    drop(prometheus);
    drop(a);
    let (code, _, err) = tool.stop_with(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, 0, "{err}");
}

/// fio's io_uring reads (O_DIRECT, depth 4) of a disk whose reads blk-throttle holds: the
/// exporter counts the requests fio made and their block I/O exactly, labelled with their
/// interface, and their parts add up to their latency's sum to the nanosecond.
#[test]
fn io_uring_requests_are_counted_exactly_and_their_parts_add_up_to_their_latency_sum() {
    let _g = serial();
    require_root();
    const READS: u64 = 40;
    let dev = LoopDevice::new(64);
    let throttle = Throttle::reads(&dev.name, 40);
    let (tool, port) = exporter(None, &["--layers", "breakdown"]);
    two_intervals();
    let labels = "interface=\"io_uring\",op=\"read\"";
    let m = http_get(port, "/metrics");
    let before = |name: &str| sample(&m, &format!("{name}{{{labels}}}"));
    // Seeded at 0 for the first scrape, as the calls' series are.
    assert_eq!(before("iostack_requests_total"), Some(0), "{m}");
    let fio = fio_reads(
        &throttle.path(),
        &dev.path,
        READS,
        "--ioengine=io_uring --iodepth=4",
    );
    assert_eq!(
        fio["jobs"][0]["read"]["total_ios"], READS,
        "fio's own count"
    );
    two_intervals();
    let m = http_get(port, "/metrics");
    let value = |name: &str| sample(&m, &format!("{name}{{{labels}}}"));
    assert_eq!(value("iostack_requests_total"), Some(READS), "{m}");
    assert_eq!(value("iostack_request_ios_total"), Some(READS), "{m}");
    assert_eq!(
        value("iostack_request_latency_seconds_count"),
        Some(READS),
        "{m}"
    );
    let sum = series_of(&m, "iostack_request_latency_seconds_sum")
        .into_iter()
        .find(|(l, _)| l == labels)
        .map(|(_, v)| ns(v))
        .unwrap_or_else(|| panic!("no latency sum: {m}"));
    let parts: Vec<(String, u64)> = series_of(&m, "iostack_request_seconds_total")
        .into_iter()
        .filter(|(l, _)| l.starts_with(&format!("{labels},part=")))
        .map(|(l, v)| (l, ns(v)))
        .collect();
    assert_eq!(parts.len(), 6, "six parts: {m}");
    assert_eq!(
        parts.iter().map(|(_, v)| v).sum::<u64>(),
        sum,
        "the parts vs the latency's sum: {parts:?}"
    );
    // Each read waited about 100 ms in blk-throttle (40 a second, 4 at a time), before the disk.
    let to_device = parts
        .iter()
        .find(|(l, _)| l.ends_with("part=\"to_device\""))
        .map_or(0, |(_, v)| *v);
    assert!(to_device * 10 >= sum * 9, "{parts:?}");
    // The page shows them as a person reads them: their row, fio's count, one block I/O each,
    // none handed to a worker, their mean time (the latency's sum over the count).
    let page = http_get(port, "/");
    let row = format!(
        "<tr><td>io_uring</td><td>read</td><td>{READS}</td><td>0</td><td>{READS}</td><td>{:.3} ms</td><td>to the device ",
        sum as f64 / READS as f64 / 1e6
    );
    assert!(page.contains(&row), "no row {row} on the page: {page}");
    let (code, _, err) = tool.stop_with(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, 0, "{err}");
}

/// Readahead's pages of one state in a scrape (no cgroup label).
fn readahead_pages(metrics: &str, state: &str) -> u64 {
    count_of(
        metrics,
        &format!("iostack_readahead_pages_total{{state=\"{state}\"}}"),
    )
}

/// A counter's value in a scrape (`name{labels}`), exactly: counts are written as integers.
fn count_of(metrics: &str, series: &str) -> u64 {
    sample(metrics, series).unwrap_or_else(|| panic!("no {series} in:\n{metrics}"))
}

/// A file's clean pages out of the page cache (POSIX_FADV_DONTNEED).
fn evict(path: &str) {
    run_ok(example_bin("ra_reader").to_str().unwrap(), &[path, "drop"]);
}

/// A 16 MiB file of random bytes (4096 pages) at `path`, out of the page cache.
fn evicted_file(path: &str) {
    evicted_file_of(path, 16);
}

/// A file of `mib` MiB of random bytes at `path`, out of the page cache.
fn evicted_file_of(path: &str, mib: u64) {
    run_ok(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={path}"),
            "bs=1M",
            &format!("count={mib}"),
            "conv=fsync",
            "status=none",
        ],
    );
    evict(path);
}

/// 200 4 KiB reads at random places of `path` on `disk` (by a reader moved into `cgroup` first,
/// if any): the pages it read, and the pages the disk read meanwhile (/proc/diskstats). Not the
/// file's pages resident after (fincore): a busy host reclaims pages readahead brought in and
/// nobody read before fincore looks (the matrix's rastat check saw 496 of 497 on the CI host).
fn random_reads(path: &str, disk: &str, cgroup: Option<&Cgroup2>) -> (u64, u64) {
    let reader = Helper::start("ra_reader", &[path, "random", "200", "7"]);
    if let Some(c) = cgroup {
        c.adopt(reader.pid);
    }
    let before = disk_read_pages(disk);
    let read: u64 = reader
        .run()
        .lines()
        .find_map(|l| l.strip_prefix("pages ")?.parse().ok())
        .expect("the pages the reader read");
    (read, disk_read_pages(disk) - before)
}

#[test]
fn readahead_pages_are_counted_exactly_brought_in_used_and_wasted() {
    let _g = serial();
    require_root();
    let fs = Mounted::new("ext4", 64);
    let file = fs.file("data");
    // Out of the page cache before each reader.
    evicted_file(&file);
    let (tool, port) = exporter(None, &["--layers", "readahead", "-d", &fs.dev.name]);
    let m = http_get(port, "/metrics");
    let start = ["brought_in", "used", "evicted_unused"].map(|s| readahead_pages(&m, s));
    assert_eq!(
        start,
        [0, 0, 0],
        "every series from the first scrape on: {m}"
    );

    // Read through once, sequentially: readahead brings in every page, and every one is used.
    Helper::start("ra_reader", &[&file, "seq"]).run();
    two_intervals();
    let m = http_get(port, "/metrics");
    assert_eq!(
        ["brought_in", "used", "evicted_unused"].map(|s| readahead_pages(&m, s)),
        [4096, 4096, 0],
        "{m}"
    );
    assert!(
        count_of(&m, "iostack_readahead_windows_total{kind=\"sync\"}") > 0,
        "{m}"
    );

    // Random 4 KiB reads: what readahead brought in around them and nobody read is wasted once
    // the file leaves the page cache.
    evict(&file);
    let (read, from_disk) = random_reads(&file, &fs.dev.name, None);
    evict(&file);
    two_intervals();
    let m = http_get(port, "/metrics");
    let (brought, used, wasted) = (
        readahead_pages(&m, "brought_in") - 4096,
        readahead_pages(&m, "used") - 4096,
        readahead_pages(&m, "evicted_unused"),
    );
    assert_eq!(
        (brought - used, wasted),
        (from_disk - read, from_disk - read),
        "{from_disk} pages read from the disk, {read} by the reader: the rest wasted ({brought} brought in, {used} used): {m}"
    );
    assert!(wasted > 0, "{m}");
    assert_eq!(
        count_of(
            &m,
            "iostack_lost_events_total{layer=\"readahead\",reason=\"untracked\"}"
        ),
        0,
        "{m}"
    );
    let (code, _, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_file_read_through_whose_pages_fill_more_than_one_batch_of_the_page_map_is_counted_whole() {
    let _g = serial();
    require_root();
    // 192 MiB: 49152 pages in 1536 chunks of 32, more than the 1024 a batch of the chunk map
    // reads at once: every batch of the walk is counted. (A walk that stops at the first short
    // batch fails here only where a batch's edge meets a crowded bucket, rare at this map's
    // load: tests/maps.rs is the deterministic test of that.)
    let fs = Mounted::new("ext4", 256);
    let file = fs.file("data");
    evicted_file_of(&file, 192);
    let (tool, port) = exporter(None, &["--layers", "readahead", "-d", &fs.dev.name]);
    Helper::start("ra_reader", &[&file, "seq"]).run();
    two_intervals();
    let m = http_get(port, "/metrics");
    assert_eq!(
        ["brought_in", "used", "evicted_unused"].map(|state| readahead_pages(&m, state)),
        [49152, 49152, 0],
        "{m}"
    );
    let (code, _, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
}

#[test]
fn per_cgroup_readahead_pages_are_the_readers_cgroups_exactly() {
    let _g = serial();
    require_root();
    let fs = Mounted::new("ext4", 64);
    let (seq_file, rnd_file) = (fs.file("seq"), fs.file("rnd"));
    evicted_file(&seq_file);
    evicted_file(&rnd_file);
    let (a, b) = (Cgroup2::new("seq"), Cgroup2::new("rnd"));
    let name = |c: &Cgroup2| format!("/{}", c.dir.file_name().unwrap().to_string_lossy());
    let (tool, port) = exporter(
        None,
        &[
            "--layers",
            "readahead",
            "-d",
            &fs.dev.name,
            "--per-cgroup=1",
        ],
    );
    // One cgroup reads a file through, the other reads at random places of another.
    let seq = Helper::start("ra_reader", &[&seq_file, "seq"]);
    a.adopt(seq.pid);
    seq.run();
    let (read, from_disk) = random_reads(&rnd_file, &fs.dev.name, Some(&b));
    evict(&seq_file);
    evict(&rnd_file);
    two_intervals();
    let m = http_get(port, "/metrics");
    let pages = |c: &Cgroup2, state: &str| {
        count_of(
            &m,
            &format!(
                "iostack_readahead_pages_total{{cgroup=\"{}\",state=\"{state}\"}}",
                name(c)
            ),
        )
    };
    let states = ["brought_in", "used", "evicted_unused"];
    assert_eq!(states.map(|s| pages(&a, s)), [4096, 4096, 0], "{m}");
    let [brought, used, wasted] = states.map(|s| pages(&b, s));
    assert_eq!(
        (brought - used, wasted),
        (from_disk - read, from_disk - read),
        "{from_disk} pages read from the disk, {read} by the reader: {m}"
    );
    assert!(wasted > 0, "{m}");
    let (code, _, err) = tool.interrupt();
    assert_eq!(code, 0, "{err}");
}
