//! Every loaded BPF program's in-kernel cost counters, one line each:
//! `id run_time_ns run_cnt recursion_misses name` (run_time_ns and run_cnt grow only while
//! kernel.bpf_stats_enabled is 1). For benchmarks where bpftool is not at hand (the kernel-matrix
//! VMs); root.
//!
//! Plain `bpf_obj_get_info_by_fd` per id (`iostack::common::losses::prog_info`), not libbpf-rs's ProgInfoIter: that iterator ends the
//! whole walk at the first program whose info it cannot load. A program we cannot read is named
//! on stderr and skipped.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};

fn main() {
    let mut id = 0u32;
    // SAFETY: plain bpf(2) wrappers; the info struct is sized for the kernel by `len`.
    while unsafe { libbpf_sys::bpf_prog_get_next_id(id, &mut id) } == 0 {
        let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            // Unloaded between the two calls, or not ours to open.
            eprintln!(
                "bpf_prog_stats: program {id}: {}",
                std::io::Error::last_os_error()
            );
            continue;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let info = match iostack::common::losses::prog_info(fd.as_fd()) {
            Ok(info) => info,
            Err(errno) => {
                eprintln!(
                    "bpf_prog_stats: program {id}: {}",
                    std::io::Error::from_raw_os_error(errno)
                );
                continue;
            }
        };
        let name: Vec<u8> = info
            .name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        println!(
            "{id} {} {} {} {}",
            info.run_time_ns,
            info.run_cnt,
            info.recursion_misses,
            String::from_utf8_lossy(&name)
        );
    }
}
