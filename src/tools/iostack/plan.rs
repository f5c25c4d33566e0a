//! What iostack attaches on this kernel, every choice with its reason: the syscall hooks, the
//! scheduler's switch and wakeup, the block layer (completion, the submitter of each bio, our
//! issue stamps where the kernel keeps none), and the VFS and filesystem functions inside the
//! calls where fentry or kprobes work. A layer that cannot be traced here is left out with its
//! reason; the rest works.

use anyhow::{anyhow, Result};

use crate::common::block::reqflags::RequestFlags;
use crate::common::block::{
    plan_bio_links, plan_bio_owner, plan_block_hooks, BioLinks, LaterAddress, RequestBits,
    StampChoice, Stamps,
};
use crate::common::kernel::hooks::{
    plan_function, tracepoint_flavor, twin, FunctionHook, FunctionPrograms,
};
use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::Prober;
use crate::common::kernel::syscalls::{plan_syscall_hooks, Attach};
use crate::tools::fnlat::slots::{plan_slot, FnSlot, SLOTS};
use crate::tools::fnlat::{Function, Layer};
use crate::tools::iostack::report::MissingLayer;
use crate::tools::iostack::{IostackOptions, NAME};
use crate::tools::{fslat, vfslat};

/// `enum layer` of src/bpf/iostack.h, as function slots carry it.
const LAYER_VFS: u32 = 1;
const LAYER_FS: u32 = 2;

/// The plan and what loading needs to know besides it.
pub struct IostackPlan {
    pub plan: AttachPlan,
    pub slots: Vec<FnSlot>,
    pub missing: Vec<MissingLayer>,
    pub rq_single_arg: bool,
    pub stamps: Stamps,
    pub bio_with_queue: bool,
    pub accounted: RequestBits,
    pub flags: RequestFlags,
    pub switch_has_state: bool,
    /// What links the kernel's I/O on a thread's behalf back to it (throttle, clones, flushes).
    pub links: BioLinks,
    /// REQ_RAHEAD, REQ_OP_WRITE and REQ_OP_DISCARD from BTF, to tell requests apart by kind.
    pub req_rahead: u32,
    pub req_op_write: u32,
    pub req_op_discard: u32,
    /// io_uring requests: how the tracepoints pass their arguments here, and which opcodes
    /// each operation claims.
    pub uring: UringPlan,
    /// Native AIO's iocbs, where function hooks work.
    pub aio: AioPlan,
    /// The end_io functions whose direct-I/O bios lead to their kiocb (DIO_END_IO), read from
    /// kallsyms beside the verifier's work: an io_uring request's or an iocb's block I/O.
    pub dio_end_io: Vec<LaterAddress>,
    /// The interfaces whose requests are not followed here, and why: a line of the report.
    pub unfollowed: Vec<(&'static str, String)>,
}

/// `enum uring_abi` of src/bpf/iostack.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum UringAbi {
    None = 0,
    /// Debian's 5.10 carries 5.15's io_uring: its completion names no request.
    V5_15 = 1,
    V6_1 = 2,
    V6_13 = 3,
}

/// What the io_uring programs need to know.
#[derive(Clone, Debug)]
pub struct UringPlan {
    pub abi: UringAbi,
    /// An opcode's operation slot (1 + the index of the operation; 0: not followed).
    pub ops: [u8; 64],
    /// REQ_F_CQE_SKIP (5.17+): requests that post no completion entry on success.
    pub cqe_skip: u64,
    /// The opcodes followed, by number, and their names.
    pub names: Vec<(u32, &'static str)>,
    /// Why a punted request's wait for an io-wq worker is not told apart here (it stays in
    /// "to the device"); None where io_wq_submit_work is hooked.
    pub worker_wait_unsplit: Option<String>,
}

/// What the native AIO programs need to know.
#[derive(Clone, Debug, Default)]
pub struct AioPlan {
    /// Its hooks are planned: setup and completion.
    pub followed: bool,
    /// An IOCB_CMD_*'s operation slot (1 + the index of the operation; 0: not traced).
    pub ops: [u8; 16],
    /// aio_complete_rw and aio_fsync_work, from kallsyms: where a read's or write's kiocb and
    /// a sync's work go at their end (an iocb whose setup was not seen is a loss if it is one).
    pub rw_done: LaterAddress,
    pub sync_work: LaterAddress,
}

/// The iocb commands of each operation (IOCB_CMD_*: uapi linux/aio_abi.h, whose numbers do not
/// change).
pub const AIO_COMMANDS: [(&str, &[(&str, u8)]); 3] = [
    ("read", &[("PREAD", 0), ("PREADV", 7)]),
    ("write", &[("PWRITE", 1), ("PWRITEV", 8)]),
    ("sync", &[("FSYNC", 2), ("FDSYNC", 3)]),
];

/// Direct I/O's end_io functions whose bios lead to the kiocb they were made for, in the order
/// of src/bpf/iostack.bpf.c's dio_end_io_*: iomap's (ext4, xfs, btrfs), the block device's, and
/// its single-bio asynchronous path (5.17+).
pub const DIO_END_IO: [&str; 3] = [
    "iomap_dio_bio_end_io",
    "blkdev_bio_end_io",
    "blkdev_bio_end_io_async",
];

/// The io_uring opcodes of each operation, as syslat groups the calls: read(2)'s family, and
/// so on. Names of `enum io_uring_op`; numbers from the kernel's BTF.
pub const URING_OPCODES: [(&str, &[&str]); 4] = [
    (
        "read",
        &["IORING_OP_READV", "IORING_OP_READ_FIXED", "IORING_OP_READ"],
    ),
    (
        "write",
        &[
            "IORING_OP_WRITEV",
            "IORING_OP_WRITE_FIXED",
            "IORING_OP_WRITE",
        ],
    ),
    ("sync", &["IORING_OP_FSYNC", "IORING_OP_SYNC_FILE_RANGE"]),
    ("open", &["IORING_OP_OPENAT", "IORING_OP_OPENAT2"]),
];

impl AsRef<AttachPlan> for IostackPlan {
    fn as_ref(&self) -> &AttachPlan {
        &self.plan
    }
}

/// The VFS layer's operation for one of ours (`sync` is its `fsync`), and a filesystem's.
fn layer_op(op: &str) -> &str {
    match op {
        "sync" => "fsync",
        other => other,
    }
}

pub fn plan(prober: &Prober, opts: &IostackOptions) -> Result<IostackPlan> {
    let flags = RequestFlags::from_btf(prober).ok_or_else(|| {
        anyhow!(
            "this kernel's BTF has no req_op/req_flag_bits enums, needed to tell requests apart"
        )
    })?;
    // The block layer first: its planner names the plan.
    let disk = opts.disk.as_ref().map(|d| d.name.as_str());
    let mut hooks = plan_block_hooks(prober, NAME, false, false, disk, StampChoice::Auto)?;
    let bio_with_queue = plan_bio_owner(prober, &mut hooks.plan)?;
    let links = plan_bio_links(prober, &mut hooks.plan, opts.disk.as_ref());
    let accounted = RequestBits::from_btf(prober);
    hooks.plan.decide("counted", accounted.describe());
    let mut plan = hooks.plan;

    plan_syscall_hooks(prober, &mut plan, Attach::Auto, &opts.ops)?;

    let (flavor, why) = tracepoint_flavor(prober, "sched_switch");
    let switch_has_state = prober.tracepoint_arity("sched_switch") == Some(4);
    if let Some(ttl) = opts.mark_ttl_ns {
        plan.decide(
            "marks",
            format!("the tests' knob: a wakeup is a completion's doing up to {ttl} ns after it (--mark-ttl-ns; 10 ms by default)"),
        );
    }
    if opts.shadow_switches {
        plan_switch_shadow(&mut plan, flavor, &why, switch_has_state);
    } else {
        plan.decide(
            "time",
            "the scheduler's own accounting of each call's thread, read at its entry and exit: time off a CPU (sum_exec_runtime - exec_start, in rq->clock), of which waiting for a CPU (sched_info.run_delay); no switch counted (nvcsw, nivcsw): all on a CPU; no program on the machine's context switches",
        );
        plan.add(
            "waking",
            twin(flavor, "waking_btf", "waking_raw"),
            flavor,
            "sched_waking",
            format!("runs in the waker's context: what ended a call's sleep, and its length (the wakeup less when the thread left its CPU); leaves at once for a wakee in no traced call and no I/O wait; {why}"),
        );
    }
    plan.decide(
        "wakers",
        "a wakeup on a task's own stack is that task's doing (what it waited for meanwhile, along the chain of wakers), one on the interrupt stack a completion's",
    );
    // Completions a kernel worker finishes: the work a completion queues carries its mark.
    for (role, tp, btf, raw, why) in [
        ("deferred", "workqueue_queue_work", "queue_work_btf", "queue_work_raw", "work queued by a completion (ext4's and XFS's unwritten-extent conversion, btrfs's checksums, dm-crypt) carries it to the worker"),
        ("deferred", "workqueue_execute_start", "execute_start_btf", "execute_start_raw", "a worker running such work wakes the completion's waiters: its wakeups are the completion's"),
        ("deferred", "workqueue_execute_end", "execute_end_btf", "execute_end_raw", "the work is done"),
    ] {
        if prober.has_tracepoint("workqueue", tp) {
            let (flavor, how) = tracepoint_flavor(prober, tp);
            plan.add(role, twin(flavor, btf, raw), flavor, tp, format!("{why}; {how}"));
        } else {
            plan.decide(
                "deferred",
                format!("no {tp} tracepoint: a completion a worker finishes is matched by the thread's own I/O ended in its sleep"),
            );
            break;
        }
    }

    let mut unfollowed = Vec::new();
    let uring = plan_uring(prober, &mut plan, opts, flavor, &why, &mut unfollowed);
    let aio = plan_aio(prober, &mut plan, opts, &mut unfollowed);
    let dio_end_io = plan_request_io(
        prober,
        &mut plan,
        uring.abi != UringAbi::None || aio.followed,
    );

    let mut slots = Vec::new();
    let mut missing = Vec::new();
    plan_vfs(prober, &mut plan, opts, &mut slots, &mut missing);
    plan_filesystems(prober, &mut plan, opts, &mut slots, &mut missing)?;

    let bit = |name: &str, default: u32| {
        prober
            .enumerator(name)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(default)
    };
    Ok(IostackPlan {
        plan,
        slots,
        missing,
        rq_single_arg: hooks.single_arg,
        stamps: hooks.stamps,
        bio_with_queue,
        accounted,
        flags,
        switch_has_state,
        links,
        req_rahead: 1u32.checked_shl(bit("__REQ_RAHEAD", 19)).unwrap_or(0),
        req_op_write: bit("REQ_OP_WRITE", 1),
        req_op_discard: bit("REQ_OP_DISCARD", 3),
        uring,
        aio,
        dio_end_io,
        unfollowed,
    })
}

/// io_uring requests, from the SQE consumed to the CQE posted, by the io_uring tracepoints,
/// whose arguments changed in 5.15 (Debian's 5.10), 6.1, 6.4 and 6.13: the layout is read from
/// their BTF, and one we do not know is said, not guessed.
fn plan_uring(
    prober: &Prober,
    plan: &mut AttachPlan,
    opts: &IostackOptions,
    flavor: crate::common::kernel::plan::Flavor,
    why: &str,
    unfollowed: &mut Vec<(&'static str, String)>,
) -> UringPlan {
    let mut uring = UringPlan {
        abi: UringAbi::None,
        ops: [0; 64],
        cqe_skip: 0,
        names: Vec::new(),
        worker_wait_unsplit: None,
    };
    let submit_req = prober.tracepoint_arity("io_uring_submit_req");
    let submit_sqe = prober.tracepoint_arity("io_uring_submit_sqe");
    let punt = prober.tracepoint_arity("io_uring_queue_async_work");
    let complete = prober.tracepoint_arity("io_uring_complete");
    let (abi, submit) = match (submit_req, submit_sqe, punt, complete) {
        (Some(1), _, Some(2), Some(3)) => (UringAbi::V6_13, "io_uring_submit_req"),
        (Some(1), _, Some(2), Some(7)) => (UringAbi::V6_1, "io_uring_submit_req"),
        (None, Some(2), Some(2), Some(7)) => (UringAbi::V6_1, "io_uring_submit_sqe"),
        (None, Some(7), Some(5), Some(4)) => (UringAbi::V5_15, "io_uring_submit_sqe"),
        (None, None, _, None) => {
            let why = "no io_uring tracepoints in this kernel's BTF".to_string();
            plan.decide(
                "io_uring",
                format!("{why}: io_uring requests are not followed"),
            );
            unfollowed.push(("io_uring", why));
            return uring;
        }
        other => {
            let why = format!("io_uring's tracepoints take arguments iostack does not know here (submit_req, submit_sqe, queue_async_work, complete: {other:?})");
            plan.decide("io_uring", format!("{why}: requests are not followed"));
            unfollowed.push(("io_uring", why));
            return uring;
        }
    };
    // Named `io_uring_op` since 5.17 (uapi's anonymous enum before).
    let opcodes = prober
        .enum_values(&["io_uring_op"])
        .or_else(|| prober.enum_holding("IORING_OP_READV"))
        .unwrap_or_default();
    let mut claimed = Vec::new();
    for (slot, op) in opts.ops.iter().enumerate() {
        let Some((_, names)) = URING_OPCODES.iter().find(|(label, _)| *label == op.label) else {
            continue;
        };
        for name in *names {
            let Some((_, v)) = opcodes.iter().find(|(n, _)| n == name) else {
                continue;
            };
            if let Some(dst) = usize::try_from(*v).ok().and_then(|i| uring.ops.get_mut(i)) {
                *dst = slot as u8 + 1;
                uring.names.push((*v as u32, *name));
                claimed.push(format!(
                    "{} {}",
                    op.label,
                    name.trim_start_matches("IORING_OP_")
                ));
            }
        }
    }
    if claimed.is_empty() {
        plan.decide(
            "io_uring",
            "none of the traced operations has an io_uring opcode in this kernel's BTF: requests are not followed",
        );
        return uring;
    }
    uring.abi = abi;
    uring.cqe_skip = prober
        .enumerator("REQ_F_CQE_SKIP_BIT")
        .and_then(|b| u32::try_from(b).ok())
        .and_then(|b| 1u64.checked_shl(b))
        .unwrap_or(0);
    let (submit_prog, layout) = match abi {
        UringAbi::V5_15 => (
            twin(flavor, "uring_submit_sqe_btf", "uring_submit_sqe_raw"),
            "5.15's io_uring (Debian's 5.10 carries it): its completion names no request, so a request is known by its ring and user_data",
        ),
        UringAbi::V6_1 if submit == "io_uring_submit_sqe" => (
            twin(flavor, "uring_submit_sqe_btf", "uring_submit_sqe_raw"),
            "6.1's io_uring: a request is known by its io_kiocb from submission to completion",
        ),
        _ => (
            twin(flavor, "uring_submit_btf", "uring_submit_raw"),
            "a request is known by its io_kiocb from submission to completion",
        ),
    };
    plan.decide(
        "io_uring",
        format!("requests followed from the SQE consumed to the CQE posted, as their calls' operations: {}; {layout}; a request that asks for no completion entry (IOSQE_CQE_SKIP_SUCCESS) is not followed", claimed.join(", ")),
    );
    plan.add(
        "uring-submit",
        submit_prog,
        flavor,
        submit,
        format!("the SQE consumed: the request starts, in its submitter (inline, the SQPOLL thread); {why}"),
    );
    plan.add(
        "uring-punt",
        twin(flavor, "uring_punt_btf", "uring_punt_raw"),
        flavor,
        "io_uring_queue_async_work",
        format!("the request is handed to an io-wq worker; {why}"),
    );
    plan.add(
        "uring-complete",
        twin(flavor, "uring_complete_btf", "uring_complete_raw"),
        flavor,
        "io_uring_complete",
        format!("the CQE posted: the request ends; {why}"),
    );
    uring.worker_wait_unsplit = plan_uring_taken(prober, plan);
    uring
}

/// An io-wq worker taking a request it was handed: no tracepoint marks it, so
/// io_wq_submit_work is hooked where fentry or kprobes work. Where neither does, the request's
/// wait for a worker stays in "to the device" (or "with no block I/O"): the reason is returned.
fn plan_uring_taken(prober: &Prober, plan: &mut AttachPlan) -> Option<String> {
    let hook = FunctionHook {
        entry_role: "uring-taken",
        exit_role: "",
        function: "io_wq_submit_work",
        module: None,
        programs: FunctionPrograms {
            fentry: "uring_taken_fentry",
            kprobe: "uring_taken_kprobe",
            exit: None,
        },
    };
    let mut planned = AttachPlan::new(plan.tool);
    match plan_function(prober, &mut planned, &hook) {
        Ok(_) => {
            for p in planned.programs {
                let why = format!(
                    "an io-wq worker takes a request it was handed: its wait for a worker ends (no tracepoint marks it); {}",
                    p.why
                );
                plan.add(&p.role, p.program, p.flavor, &p.target, why);
            }
            plan.decide(
                "io-wq",
                "a punted request's wait for an io-wq worker is a part of its own, from io_uring_queue_async_work to io_wq_submit_work",
            );
            None
        }
        Err(e) => {
            let why = format!("no tracepoint marks an io-wq worker taking a request, and io_wq_submit_work cannot be hooked here ({e})");
            plan.decide(
                "io-wq",
                format!("a punted request's wait for an io-wq worker is counted in \"to the device\": {why}"),
            );
            Some(why)
        }
    }
}

/// The block I/O of requests (io_uring's, AIO's): a direct-I/O bio leads to its kiocb through
/// its end_io, whose addresses are read from kallsyms beside the verifier's work.
fn plan_request_io(prober: &Prober, plan: &mut AttachPlan, followed: bool) -> Vec<LaterAddress> {
    if !followed {
        return Vec::new();
    }
    let dio: Vec<&str> = DIO_END_IO
        .iter()
        .copied()
        .filter(|f| prober.has_function(f))
        .collect();
    plan.decide(
        "request-io",
        match dio.is_empty() {
            true => "none of the direct-I/O completion functions is here: a request's block I/O is not linked to it".to_string(),
            false => format!("a direct-I/O bio leads to its request, with no map: its end_io ({}, addresses from kallsyms) says where its kiocb is, and the kiocb is the request's start (an io_uring request's, an iocb's); the block request's completion counts it, its device time and its end for the request", dio.join(", ")),
        },
    );
    DIO_END_IO
        .iter()
        .map(|f| match dio.contains(f) {
            true => LaterAddress::new(prober.symbol_address_later(f)),
            false => LaterAddress::default(),
        })
        .collect()
}

/// Native AIO's iocbs, from their setup in io_submit to their completion event. fs/aio.c has
/// no tracepoints: its functions are hooked where fentry or kprobes work (aio_read, aio_write
/// and aio_fsync for the setup, and their return for a setup that fails; aio_complete for the
/// event), all or none (a setup whose end is never seen would stay in the map of requests in
/// flight).
fn plan_aio(
    prober: &Prober,
    plan: &mut AttachPlan,
    opts: &IostackOptions,
    unfollowed: &mut Vec<(&'static str, String)>,
) -> AioPlan {
    let mut aio = AioPlan::default();
    let mut claimed = Vec::new();
    for (slot, op) in opts.ops.iter().enumerate() {
        let Some((_, cmds)) = AIO_COMMANDS.iter().find(|(label, _)| *label == op.label) else {
            continue;
        };
        for (name, cmd) in *cmds {
            aio.ops[usize::from(*cmd)] = slot as u8 + 1;
            claimed.push(format!("{} {name}", op.label));
        }
    }
    if claimed.is_empty() {
        plan.decide(
            "aio",
            "none of the traced operations is an AIO command: native AIO is not followed",
        );
        return aio;
    }
    // (role, function, fentry, kprobe, the failed setup's fexit and kretprobe and the
    // function's arity)
    let hooks = [
        (
            "aio-setup",
            "aio_read",
            "aio_read_setup_fentry",
            "aio_read_setup_kprobe",
            Some(("aio_read_setup_fexit", "aio_read_setup_kretprobe", 4)),
        ),
        (
            "aio-setup",
            "aio_write",
            "aio_write_setup_fentry",
            "aio_write_setup_kprobe",
            Some(("aio_write_setup_fexit", "aio_write_setup_kretprobe", 4)),
        ),
        (
            "aio-setup",
            "aio_fsync",
            "aio_sync_setup_fentry",
            "aio_sync_setup_kprobe",
            Some(("aio_sync_setup_fexit", "aio_sync_setup_kretprobe", 3)),
        ),
        (
            "aio-complete",
            "aio_complete",
            "aio_done_fentry",
            "aio_done_kprobe",
            None,
        ),
    ];
    let mut planned = AttachPlan::new(plan.tool);
    for (role, function, fentry, kprobe, exit) in hooks {
        let hook = FunctionHook {
            entry_role: role,
            exit_role: "aio-setup-failed",
            function,
            module: None,
            programs: FunctionPrograms {
                fentry,
                kprobe,
                exit,
            },
        };
        if let Err(e) = plan_function(prober, &mut planned, &hook) {
            let why = format!(
                "fs/aio.c has no tracepoints, and its functions cannot be hooked here ({e})"
            );
            plan.decide(
                "aio",
                format!("native AIO (io_submit) is not followed: {why}"),
            );
            unfollowed.push(("aio", why));
            return aio;
        }
    }
    for p in planned.programs {
        let why = format!(
            "{}: {}",
            match (p.role.as_str(), p.target.as_str()) {
                ("aio-setup-failed", _) =>
                    "an error from the setup: io_submit destroys the iocb, no event comes, the request ends",
                (_, "aio_read") => "a read iocb is set up in io_submit: the request starts",
                (_, "aio_write") => "a write iocb is set up in io_submit: the request starts",
                (_, "aio_fsync") =>
                    "an fsync or fdatasync iocb is set up (a worker runs it): the request starts",
                _ => "its completion event is written to the ring: the request ends",
            },
            p.why
        );
        plan.add(&p.role, p.program, p.flavor, &p.target, why);
    }
    plan.decide(
        "aio",
        format!(
            "native AIO's iocbs followed from their setup in io_submit to their completion event, as their calls' operations: {}; every submitter's (its completion runs where its I/O ends, not in the submitter)",
            claimed.join(", ")
        ),
    );
    aio.followed = true;
    aio.rw_done = LaterAddress::new(prober.symbol_address_later("aio_complete_rw"));
    aio.sync_work = LaterAddress::new(prober.symbol_address_later("aio_fsync_work"));
    aio
}

/// The validator (tests): the same parts from every context switch and wakeup of the machine.
fn plan_switch_shadow(
    plan: &mut AttachPlan,
    flavor: crate::common::kernel::plan::Flavor,
    why: &str,
    switch_has_state: bool,
) {
    plan.add(
        "switch",
        twin(flavor, "switch_btf", "switch_raw"),
        flavor,
        "sched_switch",
        format!(
            "validator: a call's thread leaves or takes a CPU: on CPU, run queue, sleep; {why}"
        ),
    );
    plan.add(
        "waking",
        twin(flavor, "waking_btf", "waking_raw"),
        flavor,
        "sched_waking",
        format!("validator: runs in the waker's context: what ended a call's sleep; {why}"),
    );
    plan.add(
        "wakeup",
        twin(flavor, "wakeup_btf", "wakeup_raw"),
        flavor,
        "sched_wakeup",
        format!("validator: a woken call's thread is on a run queue: its wait for a CPU starts, as schedstat's run_delay counts it; {why}"),
    );
    plan.decide(
        "switch",
        match switch_has_state {
            true => "sched_switch passes prev_state (4 arguments in BTF)",
            false => "sched_switch has no prev_state argument here: read from the task",
        },
    );
}

/// One function of a layer's operation into the next free slot, or why not.
fn plan_function_slot(
    prober: &Prober,
    plan: &mut AttachPlan,
    module: Option<&str>,
    role: &str,
    layer: u32,
    func: &Function,
    slots: &mut Vec<FnSlot>,
) -> Result<(), String> {
    if slots.len() == SLOTS {
        return Err(format!("{}: no free slot", func.name));
    }
    let slot = plan_slot(
        prober,
        plan,
        module,
        (layer as usize, role),
        func,
        slots.len(),
    )?;
    slots.push(slot);
    Ok(())
}

/// The functions of `layer` for our operations; Ok(planned), or the reasons nothing was.
fn plan_layer(
    prober: &Prober,
    plan: &mut AttachPlan,
    opts: &IostackOptions,
    layer: &Layer,
    kind: u32,
    slots: &mut Vec<FnSlot>,
) -> Result<usize, Vec<String>> {
    let before = slots.len();
    // Why each function could not be timed, grouped by reason (on a kernel without function
    // hooks, one reason for all of them).
    let mut refused: Vec<(String, Vec<&str>)> = Vec::new();
    for ours in &opts.ops {
        let Some(op) = layer.ops.iter().find(|o| o.name == layer_op(&ours.label)) else {
            continue;
        };
        // One word, as --explain's first column: vfs-read, ext4-sync.
        let role = format!("{}-{}", layer.what.to_lowercase(), ours.label);
        for func in op.functions {
            if let Err(e) = plan_function_slot(prober, plan, layer.module, &role, kind, func, slots)
            {
                match refused.iter_mut().find(|(why, _)| *why == e) {
                    Some((_, names)) => names.push(func.name),
                    None => refused.push((e, vec![func.name])),
                }
            }
        }
    }
    let reasons: Vec<String> = refused
        .iter()
        .map(|(why, names)| format!("{}: {why}", names.join(", ")))
        .collect();
    if !reasons.is_empty() {
        plan.decide(layer.what, format!("not timed: {}", reasons.join("; ")));
    }
    match slots.len() - before {
        0 => Err(refused.into_iter().map(|(why, _)| why).collect()),
        n => Ok(n),
    }
}

fn plan_vfs(
    prober: &Prober,
    plan: &mut AttachPlan,
    opts: &IostackOptions,
    slots: &mut Vec<FnSlot>,
    missing: &mut Vec<MissingLayer>,
) {
    if let Err(refused) = plan_layer(prober, plan, opts, &vfslat::VFS, LAYER_VFS, slots) {
        missing.push(MissingLayer {
            layer: "vfs",
            why: refused.into_iter().next().unwrap_or_default(),
        });
    }
}

/// The filesystems mounted here that fslat knows (or `--fs`), each with its functions while
/// slots remain.
fn plan_filesystems(
    prober: &Prober,
    plan: &mut AttachPlan,
    opts: &IostackOptions,
    slots: &mut Vec<FnSlot>,
    missing: &mut Vec<MissingLayer>,
) -> Result<()> {
    let wanted: Vec<String> = match &opts.fs {
        Some(fs) => vec![fs.clone()],
        None => fslat::mounted(),
    };
    if wanted.is_empty() {
        missing.push(MissingLayer {
            layer: "filesystem",
            why: format!(
                "none of the filesystems it knows is mounted ({})",
                fslat::names().join(", ")
            ),
        });
        return Ok(());
    }
    let mut reasons = Vec::new();
    let mut planned = 0;
    for fs in &wanted {
        let layer = fslat::layer(fs)?;
        match plan_layer(prober, plan, opts, &layer, LAYER_FS, slots) {
            Ok(n) => planned += n,
            Err(refused) => reasons.extend(refused.into_iter().take(1)),
        }
    }
    if planned == 0 {
        missing.push(MissingLayer {
            layer: "filesystem",
            why: reasons.into_iter().next().unwrap_or_default(),
        });
    }
    Ok(())
}
