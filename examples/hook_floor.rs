//! Holds empty BPF programs until SIGINT/SIGTERM: the floors the cost benchmarks compare
//! against (benches/syscall-cost, benches/iostack-switch-cost).
//!
//! `hook_floor syscalls|switch|iostack`
//! - `syscalls`: raw_tp sys_enter and sys_exit (what any syscall tracer pays);
//! - `switch`: tp_btf sched_switch (what any tracer of context switches pays: offcputime's one);
//! - `iostack`: the hooks iostack runs on a switch between tasks it does not trace and their
//!   syscalls: sched_switch, sched_waking, sched_wakeup, sys_enter, sys_exit.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel as _, Skel as _, SkelBuilder as _};

iostack::bpf_skeleton!("hook_floor");

fn die(msg: String) -> ! {
    eprintln!("hook_floor: {msg}");
    std::process::exit(1)
}

fn main() {
    let set = std::env::args().nth(1).unwrap_or_else(|| "syscalls".into());
    let (syscalls, switch, wakeups) = match set.as_str() {
        "syscalls" => (true, false, false),
        "switch" => (false, true, false),
        "iostack" => (true, true, true),
        other => die(format!(
            "unknown set '{other}': syscalls, switch or iostack"
        )),
    };
    let mut storage = MaybeUninit::uninit();
    let result = skel::HookFloorSkelBuilder::default()
        .open(&mut storage)
        .and_then(|mut open| {
            let p = &mut open.progs;
            p.floor_enter.set_autoload(syscalls);
            p.floor_exit.set_autoload(syscalls);
            p.floor_switch.set_autoload(switch);
            p.floor_waking.set_autoload(wakeups);
            p.floor_wakeup.set_autoload(wakeups);
            open.load()
        })
        .and_then(|mut skel| skel.attach().map(|_| skel));
    let _skel = result.unwrap_or_else(|e| die(format!("loading empty {set} programs failed: {e}")));
    let stop = iostack::common::run::StopSignal::install().unwrap_or_else(|e| die(e.to_string()));
    eprintln!("Attached empty {set} programs. Hit Ctrl-C to end.");
    stop.wait(None);
}
