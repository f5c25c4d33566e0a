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
