//! A tool run inside a pid namespace of its own (a container, a debug pod) takes `-p` in that
//! namespace and shows that namespace's pids: run under `unshare --pid --fork --mount-proc`.

mod support;

use std::process::Command;

use serde_json::Value;
use support::*;

/// Runs `script` (sh) inside a new pid namespace with its own /proc; its stdout.
fn in_pid_namespace(script: &str) -> String {
    // Bounded: a tool that never starts tracing must fail the test, not hang it.
    let out = Command::new("timeout")
        .args([
            "120",
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            script,
        ])
        .output()
        .expect("run unshare");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Shell lines that start TOOL ARGS in the background (output in $dir/NAME.out/.err) and wait
/// until it traces.
fn start(name: &str, tool: &str, args: &str) -> String {
    format!(
        "{tool} {args} >\"$dir/{name}.out\" 2>\"$dir/{name}.err\" & {name}=$!
         until grep -qs 'Hit Ctrl-C' \"$dir/{name}.out\" \"$dir/{name}.err\"; do sleep 0.02; done
        ",
        tool = bin(tool)
    )
}

fn scratch() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("iostack-pidns.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn syslat_in_a_pid_namespace_traces_a_pid_of_that_namespace_exactly() {
    let _g = serial();
    require_root();
    let dir = scratch();
    let workload = example_bin("syscall_workload");
    let script = format!(
        "set -e; dir={dir}
         {w} 30 20 2 5 >\"$dir/wl\" & wl=$!
         until grep -qs '^ready' \"$dir/wl\"; do sleep 0.01; done
         {start}
         kill -USR1 $wl; wait $wl
         kill -INT $tool; wait $tool
         echo \"pid $wl\"",
        dir = dir.display(),
        w = workload.display(),
        start = start("tool", "syslat", "-p $wl -j")
    );
    let said = in_pid_namespace(&script);
    let ns_pid: u32 = said.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    assert!(ns_pid < 100, "a pid of the new namespace: {said}");
    let out = std::fs::read_to_string(dir.join("tool.out")).unwrap();
    let mut counts = std::collections::BTreeMap::new();
    for report in json_lines(&out) {
        for h in report["histograms"].as_array().unwrap() {
            *counts
                .entry(h["labels"]["op"].as_str().unwrap().to_string())
                .or_insert(0) += h["count"].as_u64().unwrap();
        }
    }
    let want: std::collections::BTreeMap<String, u64> =
        [("open", 5), ("read", 30), ("sync", 2), ("write", 20)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
    assert_eq!(counts, want, "pid {ns_pid} in its namespace: {out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bioslower_in_a_pid_namespace_shows_that_namespaces_pids() {
    let _g = serial();
    require_root();
    let dir = scratch();
    let dev = LoopDevice::new(16);
    let script = format!(
        "set -e; dir={dir}
         {start}
         dd if=/dev/zero of={path} bs=4096 count=20 oflag=direct conv=notrunc 2>/dev/null & dd=$!
         wait $dd
         kill -INT $tool; wait $tool
         echo \"pid $dd\"",
        dir = dir.display(),
        path = dev.path,
        start = start("tool", "bioslower", &format!("0 -d {} -j", dev.name))
    );
    let said = in_pid_namespace(&script);
    let ns_pid: u64 = said.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    assert!(ns_pid < 100, "a pid of the new namespace: {said}");
    let out = std::fs::read_to_string(dir.join("tool.out")).unwrap();
    let events: Vec<Value> = json_lines(&out)
        .into_iter()
        .filter(|v| v.get("comm").is_some())
        .collect();
    assert!(events.len() as u64 + unseen(&out) == 20, "{out}");
    for e in &events {
        assert_eq!(e["comm"], "dd", "{out}");
        assert_eq!(e["pid"], ns_pid, "dd's pid in the namespace: {out}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn iostack_in_a_pid_namespace_follows_a_pid_of_that_namespace_through_the_scheduler() {
    let _g = serial();
    require_root();
    let dir = scratch();
    let m = Mounted::new("ext4", 64);
    let throttle = Throttle::writes(&m.dev.name, 10);
    // 5 O_DSYNC writes, each waiting for its throttled write and the flush for it: its own I/O.
    let script = format!(
        "set -e; dir={dir}
         {w} dsync {file} 5 --cgroup {cg} >\"$dir/wl\" & wl=$!
         until grep -qs '^ready' \"$dir/wl\"; do sleep 0.01; done
         {start}
         kill -USR1 $wl; wait $wl
         kill -INT $tool; wait $tool
         echo \"pid $wl\"",
        dir = dir.display(),
        w = example_bin("io_patterns").display(),
        file = m.file("log"),
        cg = throttle.path(),
        start = start("tool", "iostack", &format!("-p $wl -d {} -j", m.dev.name))
    );
    let said = in_pid_namespace(&script);
    let ns_pid: u32 = said.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    assert!(ns_pid < 100, "a pid of the new namespace: {said}");
    let out = std::fs::read_to_string(dir.join("tool.out")).unwrap();
    let r = support::breakdown::report(&out);
    let w = support::breakdown::ops(&r)
        .remove("write")
        .expect("its writes");
    assert_eq!(w["calls"], 5, "exactly its 5 writes: {w}");
    let total = w["breakdown"]["total_ns"].as_u64().unwrap();
    let own =
        support::breakdown::part(&w, "io_queue_ns") + support::breakdown::part(&w, "io_device_ns");
    // The scheduler's hooks compare its pid in the tool's namespace: its sleeps are seen, and
    // they are its own I/O (a namespace's pid compared with the initial one's found none, and
    // every call was on a CPU).
    assert!(
        own * 100 >= total * 95,
        "its own I/O, not time on a CPU: {w}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
