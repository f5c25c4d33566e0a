//! iostack's JSON report as tests read it: one report at Ctrl-C, its operations, their parts.

use std::collections::BTreeMap;

use serde_json::Value;

use super::json_lines;

pub const PARTS: [&str; 6] = [
    "on_cpu_ns",
    "run_queue_ns",
    "io_queue_ns",
    "io_device_ns",
    "others_io_ns",
    "other_sleep_ns",
];

/// The one JSON report iostack prints at Ctrl-C (no interval).
pub fn report(stdout: &str) -> Value {
    let reports = json_lines(stdout);
    assert_eq!(reports.len(), 1, "one report at Ctrl-C: {stdout}");
    let r = reports.into_iter().next().unwrap();
    assert_eq!(r["tool"], "iostack");
    assert_parts_add_up(&r);
    r
}

/// Every op's parts add up to its calls' total, to the nanosecond, and that total is the
/// syscall layer's.
pub fn assert_parts_add_up(r: &Value) {
    for op in r["ops"].as_array().unwrap() {
        let b = &op["breakdown"];
        let sum: u64 = PARTS.iter().map(|p| b[p].as_u64().unwrap()).sum();
        assert_eq!(sum, b["total_ns"].as_u64().unwrap(), "{op}");
        assert_eq!(
            b["total_ns"], op["layers"]["syscall"]["sum_ns"],
            "the breakdown is of the syscall layer's calls: {op}"
        );
        assert_eq!(op["calls"], op["layers"]["syscall"]["count"], "{op}");
    }
}

/// op -> its object in the report.
pub fn ops(r: &Value) -> BTreeMap<String, Value> {
    r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["op"].as_str().unwrap().to_string(), o.clone()))
        .collect()
}

pub fn part(op: &Value, name: &str) -> u64 {
    op["breakdown"][name].as_u64().unwrap()
}

pub fn io_wait(op: &Value) -> u64 {
    part(op, "io_queue_ns") + part(op, "io_device_ns") + part(op, "others_io_ns")
}

pub fn unwaited(r: &Value) -> u64 {
    r["unwaited"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}
