//! libbpf's own messages: silent by default (failures become our one-line errors), everything
//! with `-v`; and quiet while we try things that are expected to fail on some kernels.

use libbpf_rs::PrintLevel;

fn print_to_stderr(level: PrintLevel, msg: String) {
    eprint!("{level:?}: {msg}");
}

/// `-v` shows libbpf's debug messages (and the verifier's log on a failed load).
pub fn init_libbpf_logging(verbose: bool) {
    if verbose {
        libbpf_rs::set_print(Some((PrintLevel::Debug, print_to_stderr)));
    } else {
        libbpf_rs::set_print(None);
    }
}

/// Silences libbpf until dropped (trial loads are expected to fail on some kernels).
pub struct QuietLibbpf(Option<(PrintLevel, libbpf_rs::PrintCallback)>);

pub fn quiet_libbpf() -> QuietLibbpf {
    QuietLibbpf(libbpf_rs::set_print(None))
}

impl Drop for QuietLibbpf {
    fn drop(&mut self) {
        libbpf_rs::set_print(self.0.take());
    }
}

/// Which libbpf this build runs on, for `--version`: the version of the library actually in use
/// (the system's libbpf.so can be newer than the headers we were built against) and where it
/// comes from (the `vendored-libbpf` feature links libbpf-sys' copy statically).
pub fn libbpf_in_use() -> String {
    // SAFETY: both functions only return constants compiled into libbpf.
    let (major, minor) = unsafe {
        (
            libbpf_sys::libbpf_major_version(),
            libbpf_sys::libbpf_minor_version(),
        )
    };
    let origin = if cfg!(feature = "vendored-libbpf") {
        "vendored, static"
    } else {
        "system, shared"
    };
    format!("libbpf {major}.{minor}, {origin}")
}
