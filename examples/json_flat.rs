//! The kernel-matrix checks' JSON reader (busybox has none): `json_flat FILE` prints every leaf
//! of every JSON line of FILE as `LINE.PATH VALUE`, e.g. `0.ops.1.breakdown.total_ns 123` or
//! `0.missing.vfs "fentry unavailable ..."` (strings quoted as JSON), one per line.

use serde_json::Value;

fn flatten(prefix: &str, v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), v, out);
            }
        }
        leaf => {
            out.push_str(&format!("{prefix} {leaf}\n"));
        }
    }
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: json_flat FILE");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("json_flat: {path}: {e}");
        std::process::exit(1)
    });
    let mut out = String::new();
    for (n, line) in text.lines().filter(|l| l.starts_with('{')).enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => flatten(&n.to_string(), &v, &mut out),
            Err(e) => {
                eprintln!("json_flat: {path}: line {n} is not JSON: {e}");
                std::process::exit(1)
            }
        }
    }
    print!("{out}");
}
