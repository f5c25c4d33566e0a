//! Holds empty BPF programs until SIGINT/SIGTERM: the floors the cost benchmarks compare
//! against (benches/syscall-cost, benches/iostack-switch-cost).
//!
//! `hook_floor SET`, SET one of:
//! - `syscalls`: raw_tp sys_enter and sys_exit (what any syscall tracer pays);
//! - `switch`: tp_btf sched_switch (what any tracer of context switches pays: offcputime's one);
//! - `iostack`: the hooks iostack ran on a switch between tasks it does not trace and their
//!   syscalls until it read the scheduler's own accounting: sched_switch, sched_waking,
//!   sched_wakeup, sys_enter, sys_exit;
//! - `iostack-kept`: the ones it keeps: sched_waking, and the syscall hooks the shared plan
//!   picks (the traced syscalls' own tracepoints where tracefs is mounted, else sys_enter and
//!   sys_exit);
//! - `iostack-hooks`: every hook iostack runs a program on for an O_DIRECT read: those, and
//!   block_bio_queue, block_rq_complete and the workqueue's queue_work, execute_start and
//!   execute_end (a loop device's worker);
//! - `iostack-essential`: the same hooks, with the least a per-call breakdown does there
//!   (examples/hook_floor.bpf.c, `essential_*`): the workqueue's programs stay empty;
//! - `uring-hooks`: every hook iostack runs a program on for an O_DIRECT io_uring read of a
//!   block device: `iostack-hooks`' and io_uring_submit_req and io_uring_complete (6.13+'s);
//! - `uring-essential`: the same hooks, with the least a per-request breakdown does there
//!   (`essential_uring_*`: a request's start, its block I/O linked to it at completion with no
//!   map, its time at its completion entry) beside `iostack-essential`'s for the calls;
//! - `syscall-tracepoints`: those syscall hooks alone (syslat's);
//! - `syscall-essential`: the same, with the least a syscall latency tool does there (a call's
//!   start in its thread's task storage, its latency summed at exit: `essential_enter/exit`);
//! - `block`: tp_btf block_rq_complete (the one hook of a block latency histogram);
//! - `block-submit`: block_bio_queue and block_rq_complete (what charging an I/O to the cgroup
//!   of its submitter needs: a program in the submitter's context, and one at completion);
//! - `rastat`: tp_btf mm_filemap_add_to_page_cache and fentry folio_mark_accessed
//!   (mark_page_accessed before 5.16): the two programs per page that knowing whether a page
//!   read ahead is used takes (tests/vm/guest/rastat.sh runs it beside rastat and readahead).

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel as _, Skel as _, SkelBuilder as _};

iostack::bpf_skeleton!("hook_floor");

fn die(msg: String) -> ! {
    eprintln!("hook_floor: {msg}");
    std::process::exit(1)
}

/// A kernel symbol's address from /proc/kallsyms (root reads real addresses).
fn ksym(name: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/kallsyms")
        .ok()?
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(name))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .filter(|&a| a != 0)
}

fn main() {
    let set = std::env::args().nth(1).unwrap_or_else(|| "syscalls".into());
    let (syscalls, switch, wakeups, complete, submit) = match set.as_str() {
        "syscalls" => (true, false, false, false, false),
        "switch" => (false, true, false, false, false),
        "iostack" => (true, true, true, false, false),
        "iostack-kept" => (true, false, true, false, false),
        "iostack-hooks" | "iostack-essential" | "uring-hooks" | "uring-essential" => {
            (true, false, true, true, true)
        }
        "syscall-tracepoints" | "syscall-essential" => (true, false, false, false, false),
        "block" => (false, false, false, true, false),
        "block-submit" => (false, false, false, true, true),
        "rastat" => (false, false, false, false, false),
        other => die(format!(
            "unknown set '{other}': syscalls, switch, iostack, iostack-kept, iostack-hooks, iostack-essential, uring-hooks, uring-essential, syscall-tracepoints, syscall-essential, block, block-submit or rastat"
        )),
    };
    let pages = set == "rastat";
    let uring = matches!(set.as_str(), "uring-hooks" | "uring-essential");
    let essential = matches!(
        set.as_str(),
        "iostack-essential" | "syscall-essential" | "uring-essential"
    );
    let workqueue = matches!(
        set.as_str(),
        "iostack-hooks" | "iostack-essential" | "uring-hooks" | "uring-essential"
    );
    // Where a block device's single-bio direct I/O ends: its bio leads to its request.
    let blkdev_async_end_io = match uring && essential {
        true => ksym("blkdev_bio_end_io_async")
            .unwrap_or_else(|| die("no blkdev_bio_end_io_async in /proc/kallsyms".into())),
        false => 0,
    };
    // The per-syscall tracepoints where the tools would use them (tracefs mounted).
    let tracefs = std::path::Path::new("/sys/kernel/tracing/events/syscalls").is_dir();
    if essential && !tracefs {
        die("the essential work is measured on the per-syscall tracepoints: mount tracefs (mount -t tracefs tracefs /sys/kernel/tracing)".into());
    }
    let per_syscall = matches!(
        set.as_str(),
        "iostack-kept"
            | "iostack-hooks"
            | "iostack-essential"
            | "uring-hooks"
            | "uring-essential"
            | "syscall-tracepoints"
            | "syscall-essential"
    ) && tracefs;
    let syscalls = syscalls && !per_syscall;
    // Before 5.16 a read marks a page, not a folio.
    let accessed = if pages
        && !std::fs::read_to_string("/proc/kallsyms")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("folio_mark_accessed"))
    {
        "mark_page_accessed"
    } else {
        "folio_mark_accessed"
    };
    let mut storage = MaybeUninit::uninit();
    let result = skel::HookFloorSkelBuilder::default()
        .open(&mut storage)
        .and_then(|mut open| {
            let p = &mut open.progs;
            p.floor_enter.set_autoload(syscalls);
            p.floor_exit.set_autoload(syscalls);
            p.floor_switch.set_autoload(switch);
            p.floor_waking.set_autoload(wakeups && !essential);
            p.floor_wakeup.set_autoload(wakeups && switch);
            p.floor_rq_complete.set_autoload(complete && !essential);
            p.floor_bio_queue.set_autoload(submit && !essential);
            p.floor_page_added.set_autoload(pages);
            p.floor_page_accessed.set_autoload(pages);
            p.floor_syscall_tp.set_autoload(per_syscall && !essential);
            p.floor_queue_work.set_autoload(workqueue);
            p.floor_execute_start.set_autoload(workqueue);
            p.floor_execute_end.set_autoload(workqueue);
            p.essential_enter.set_autoload(essential);
            p.essential_exit.set_autoload(essential);
            p.essential_waking.set_autoload(essential && wakeups);
            p.essential_bio_queue.set_autoload(essential && submit);
            p.essential_rq_complete
                .set_autoload(essential && complete && !uring);
            p.essential_uring_rq_complete
                .set_autoload(essential && uring);
            p.essential_uring_submit.set_autoload(essential && uring);
            p.essential_uring_complete.set_autoload(essential && uring);
            p.floor_uring_submit.set_autoload(uring && !essential);
            p.floor_uring_complete.set_autoload(uring && !essential);
            open.maps
                .essential_reqs
                .set_autocreate(essential && uring)?;
            open.maps
                .essential_req_sums
                .set_autocreate(essential && uring)?;
            if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
                rodata.blkdev_async_end_io = blkdev_async_end_io;
            }
            // Task storage for tracing programs is 5.11+: the essential set's maps are made only
            // for it (5.10's matrix guest loads the rastat set from the same object).
            open.maps.essential_calls.set_autocreate(essential)?;
            open.maps
                .essential_bios
                .set_autocreate(essential && submit)?;
            open.maps.essential_sums.set_autocreate(essential)?;
            if pages {
                p.floor_page_accessed
                    .set_attach_target(0, Some(accessed.to_string()))?;
            }
            open.load()
        })
        .and_then(|mut skel| skel.attach().map(|_| skel));
    let skel = result.unwrap_or_else(|e| die(format!("loading empty {set} programs failed: {e}")));
    let mut links = Vec::new();
    if per_syscall {
        let ops = iostack::common::kernel::syscalls::select(&[], false)
            .unwrap_or_else(|e| die(e.to_string()));
        for s in ops.iter().flat_map(|o| o.members.iter()) {
            for side in ["enter", "exit"] {
                let event = format!("sys_{side}_{}", s.name);
                let syscalls = libbpf_rs::TracepointCategory::Custom("syscalls".into());
                let prog = match (essential, side) {
                    (false, _) => &skel.progs.floor_syscall_tp,
                    (true, "enter") => &skel.progs.essential_enter,
                    (true, _) => &skel.progs.essential_exit,
                };
                match prog.attach_tracepoint(syscalls, &event) {
                    Ok(link) => links.push(link),
                    Err(e) => die(format!("attaching syscalls:{event}: {e}")),
                }
            }
        }
    }
    let stop = iostack::common::run::StopSignal::install().unwrap_or_else(|e| die(e.to_string()));
    eprintln!("Attached empty {set} programs. Hit Ctrl-C to end.");
    stop.wait(None);
}
