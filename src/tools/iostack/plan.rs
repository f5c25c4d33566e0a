//! What iostack attaches on this kernel, every choice with its reason: the syscall hooks, the
//! scheduler's switch and wakeup, the block layer (completion, the submitter of each bio, our
//! issue stamps where the kernel keeps none), and the VFS and filesystem functions inside the
//! calls where fentry or kprobes work. A layer that cannot be traced here is left out with its
//! reason; the rest works.

use anyhow::{anyhow, Result};

use crate::common::block::reqflags::RequestFlags;
use crate::common::block::{
    plan_bio_links, plan_bio_owner, plan_block_hooks, BioLinks, RequestBits, StampChoice, Stamps,
};
use crate::common::kernel::hooks::{tracepoint_flavor, twin};
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
}

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
    })
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
