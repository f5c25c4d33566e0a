//! Every tool that attaches on this kernel traces as an unprivileged user with only CAP_BPF and
//! CAP_PERFMON, as the README documents; with one of them fewer it refuses in one line naming
//! the one it lacks.

mod support;

use support::*;

/// The tools that load and attach on every kernel, with what they are asked (vfslat and fslat
/// need function hooks: the kernel matrix runs them; so does the exporter's fs layer).
/// iostack-exporter's unit gives it these two capabilities, as a dynamic user.
const TOOLS: [(&str, &[&str]); 5] = [
    ("syslat", &[]),
    ("biolat", &[]),
    ("bioslower", &[]),
    ("iostack", &[]),
    ("iostack-exporter", &["--layers", "block,syscall"]),
];

#[test]
fn every_tool_traces_with_only_cap_bpf_and_cap_perfmon() {
    let _g = serial();
    require_root();
    for (tool, args) in TOOLS {
        let out = run_with_caps(tool, &["bpf", "perfmon"], &[&["--explain"], args].concat());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("loaded and attached: ok"),
            "{tool}: {} {stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn with_one_capability_fewer_the_refusal_names_it() {
    let _g = serial();
    require_root();
    for (tool, args) in TOOLS {
        for (caps, lacks) in [(["bpf"], "CAP_PERFMON"), (["perfmon"], "CAP_BPF")] {
            let out = run_with_caps(tool, &caps, &[&["--explain"], args].concat());
            let line = assert_one_line_error(&out, tool);
            assert!(line.contains(&format!("lacks {lacks}:")), "{tool}: {line}");
        }
    }
}
