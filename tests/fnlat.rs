//! vfslat and ext4lat (fslat) on this machine's kernel. They time kernel functions, which needs
//! fentry or kprobes; the kernel matrix proves their counts on kernels that have them. Here we
//! check what a user of a kernel without either sees: one line that says why, and what still
//! works. Bad input gets one line of advice too.

mod support;

use std::path::Path;

use support::*;

/// The kernel registers a kprobe PMU when it was built with CONFIG_KPROBES.
fn kernel_has_kprobes() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe").exists()
}

#[test]
fn without_kprobes_they_time_through_fentry_or_refuse_in_one_line() {
    require_root();
    if kernel_has_kprobes() {
        eprintln!("this kernel has kprobes: the kernel matrix covers the hooked paths");
        return;
    }
    for (tool, args) in [
        ("vfslat", vec![]),
        ("ext4lat", vec![]),
        ("fslat", vec!["--fs", "ext4"]),
    ] {
        let out = run(tool, &[&["--explain"], args.as_slice()].concat());
        if out.status.success() {
            // fentry loads here: every planned function must use it (there is nothing else).
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(text.contains("loaded and attached: ok"), "{text}");
            assert!(text.contains("fentry/"), "{tool}: {text}");
            assert!(!text.contains("kprobe/"), "{tool}: {text}");
        } else {
            let err = assert_one_line_error(&out, tool);
            assert!(err.contains("can be timed on this kernel"), "{err}");
            assert!(err.contains("fentry unavailable"), "{err}");
            assert!(err.contains("kprobes unavailable"), "{err}");
            assert!(
                err.contains("syslat and biolat work here"),
                "{tool} must say what still works: {err}"
            );
            // The same refusal without --explain: never an empty histogram.
            let plain = run(tool, &[args.as_slice(), &["-j", "1", "1"]].concat());
            assert_eq!(assert_one_line_error(&plain, tool), err);
            assert!(plain.stdout.is_empty(), "{tool} printed {:?}", plain.stdout);
        }
    }
}

#[test]
fn an_unknown_filesystem_is_a_one_line_error_listing_the_known_ones() {
    let err = assert_one_line_error(&run("fslat", &["--fs", "zfs"]), "fslat");
    assert!(err.contains("unknown filesystem 'zfs'"), "{err}");
    for fs in ["ext4", "xfs", "btrfs", "nfs", "f2fs"] {
        assert!(err.contains(fs), "{err}");
    }
}

#[test]
fn fslat_without_a_filesystem_asks_which() {
    let err = assert_one_line_error(&run("fslat", &[]), "fslat");
    assert!(err.contains("--fs ext4|xfs|btrfs|nfs|f2fs"), "{err}");
}

#[test]
fn a_pid_that_is_not_running_is_a_one_line_error() {
    require_root();
    let out = run("vfslat", &["-p", "999999999"]);
    let err = assert_one_line_error(&out, "vfslat");
    assert!(err.contains("no process with ID 999999999"), "{err}");
}

#[test]
fn a_bad_interval_is_a_one_line_error() {
    for tool in ["vfslat", "ext4lat"] {
        let err = assert_one_line_error(&run(tool, &["0"]), tool);
        assert!(err.contains("must be at least 1"), "{err}");
    }
}

#[test]
fn unprivileged_runs_are_one_line_errors() {
    for tool in ["vfslat", "ext4lat"] {
        let err = assert_one_line_error(&run_unprivileged(tool, &[]), tool);
        assert!(err.contains("lacks CAP_BPF and CAP_PERFMON"), "{err}");
    }
}
