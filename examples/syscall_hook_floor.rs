//! Holds empty raw_tp programs on sys_enter/sys_exit until SIGINT/SIGTERM: the floor that the
//! syscall-cost benchmark (benches/syscall-cost) compares syslat against.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel as _, Skel as _, SkelBuilder as _};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/syscall_hook_floor.skel.rs"));
}

fn main() {
    let mut storage = MaybeUninit::uninit();
    let result = skel::SyscallHookFloorSkelBuilder::default()
        .open(&mut storage)
        .and_then(|open| open.load())
        .and_then(|mut skel| skel.attach().map(|_| skel));
    let _skel = match result {
        Ok(skel) => skel,
        Err(e) => {
            eprintln!("syscall_hook_floor: loading empty raw_tp programs failed: {e}");
            std::process::exit(1);
        }
    };
    let stop = iostack::common::run::StopSignal::install().unwrap_or_else(|e| {
        eprintln!("syscall_hook_floor: {e}");
        std::process::exit(1)
    });
    eprintln!("Attached empty sys_enter/sys_exit programs. Hit Ctrl-C to end.");
    stop.wait(None);
}
