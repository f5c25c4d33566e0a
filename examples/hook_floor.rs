//! Holds empty BPF programs until SIGINT/SIGTERM: the floors the cost benchmarks compare
//! against (benches/syscall-cost, benches/iostack-switch-cost).
//!
//! `hook_floor syscalls|switch|iostack|block|block-submit`
//! - `syscalls`: raw_tp sys_enter and sys_exit (what any syscall tracer pays);
//! - `switch`: tp_btf sched_switch (what any tracer of context switches pays: offcputime's one);
//! - `iostack`: the hooks iostack runs on a switch between tasks it does not trace and their
//!   syscalls: sched_switch, sched_waking, sched_wakeup, sys_enter, sys_exit;
//! - `block`: tp_btf block_rq_complete (the one hook of a block latency histogram);
//! - `block-submit`: block_bio_queue and block_rq_complete (what charging an I/O to the cgroup
//!   of its submitter needs: a program in the submitter's context, and one at completion).

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel as _, Skel as _, SkelBuilder as _};

iostack::bpf_skeleton!("hook_floor");

fn die(msg: String) -> ! {
    eprintln!("hook_floor: {msg}");
    std::process::exit(1)
}

fn main() {
    let set = std::env::args().nth(1).unwrap_or_else(|| "syscalls".into());
    let (syscalls, switch, wakeups, complete, submit) = match set.as_str() {
        "syscalls" => (true, false, false, false, false),
        "switch" => (false, true, false, false, false),
        "iostack" => (true, true, true, false, false),
        "block" => (false, false, false, true, false),
        "block-submit" => (false, false, false, true, true),
        other => die(format!(
            "unknown set '{other}': syscalls, switch, iostack, block or block-submit"
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
            p.floor_rq_complete.set_autoload(complete);
            p.floor_bio_queue.set_autoload(submit);
            open.load()
        })
        .and_then(|mut skel| skel.attach().map(|_| skel));
    let _skel = result.unwrap_or_else(|e| die(format!("loading empty {set} programs failed: {e}")));
    let stop = iostack::common::run::StopSignal::install().unwrap_or_else(|e| die(e.to_string()));
    eprintln!("Attached empty {set} programs. Hit Ctrl-C to end.");
    stop.wait(None);
}
