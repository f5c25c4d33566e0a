//! rastat against the real kernel, beside its kernel-matrix checks (tests/vm/guest/rastat.sh,
//! which count pages exactly against the pages the disk read, per /proc/diskstats, on every
//! kernel and on this host): what a user meets first, the hooks it explains, bad input, a
//! closed stdout.

mod support;

use support::*;

#[test]
fn explain_names_a_hook_for_every_part_and_attaches() {
    let _g = serial();
    require_root();
    let text = explain("rastat", &[]);
    for role in [
        "window", "sync", "async", "added", "evicted", "read", "fault", "mapped",
    ] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{role} "))),
            "no {role} hook in:\n{text}"
        );
    }
    assert!(text.contains("page_cache_ra_unbounded"), "{text}");
    assert!(text.contains("mm_filemap_delete_from_page_cache"), "{text}");
}

#[test]
fn bad_input_is_a_one_line_error() {
    let err = assert_one_line_error(&run("rastat", &["-p", "999999999"]), "rastat");
    assert!(err.contains("no process with ID 999999999"), "{err}");
    let err = assert_one_line_error(&run("rastat", &["-d", "nosuchdisk"]), "rastat");
    assert!(err.contains("unknown disk 'nosuchdisk'"), "{err}");
    let out = run("rastat", &["0"]);
    assert_one_line_error(&out, "rastat");
    assert_eq!(out.status.code(), Some(2));
    let out = run("rastat", &["--per-file", "0"]);
    assert_one_line_error(&out, "rastat");
    assert_eq!(out.status.code(), Some(2));
    let err = assert_one_line_error(&run_unprivileged("rastat", &[]), "rastat");
    assert!(err.contains("lacks CAP_BPF and CAP_PERFMON"), "{err}");
}

#[test]
fn closed_stdout_ends_quietly() {
    let _g = serial();
    require_root();
    assert_closed_stdout_ends_quietly(
        "rastat",
        &["1"],
        "Tracing readahead... Hit Ctrl-C to end.\n",
    );
}
