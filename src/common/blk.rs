//! Block-layer attach points shared by biolat and bioslower: which tracepoint flavor, the
//! argument shape of block_rq_insert/issue, and where `-Q` starts the clock.
//!
//! Both tools' BPF objects use the same program names (`issue_btf`, `issue_raw`, ...), so one
//! plan serves both.

use anyhow::{anyhow, Result};

use crate::common::probe::{tracepoint_flavor, AttachPlan, Flavor, Prober};

/// Where `-Q` starts the clock; values match `enum q_start` in `src/bpf/biolat.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QueueStart {
    /// Plain mode: issue to completion.
    Off = 0,
    /// The block_io_start tracepoint or a (__)blk_account_io_start probe.
    Event = 1,
    /// `rq->start_time_ns` read at completion, block_rq_insert/issue where it is 0.
    RqField = 2,
}

pub struct BlockHooks {
    pub plan: AttachPlan,
    /// block_rq_insert/issue take only the request (5.11+, and 5.10.137+ by backport).
    pub single_arg: bool,
    pub queue_start: QueueStart,
}

fn program(flavor: Flavor, btf: &'static str, raw: &'static str) -> &'static str {
    if flavor == Flavor::TpBtf {
        btf
    } else {
        raw
    }
}

/// Plans the block tracepoints; with `queued` the `-Q` start is planned and loaded, with only
/// `describe_queued` it is worked out for `--explain` but not loaded.
pub fn plan_block_hooks(
    prober: &Prober,
    tool: &'static str,
    queued: bool,
    describe_queued: bool,
) -> Result<BlockHooks> {
    for tp in ["block_rq_issue", "block_rq_complete"] {
        if !prober.has_tracepoint("block", tp) {
            return Err(anyhow!("this kernel has no block:{tp} tracepoint, which {tool} needs (CONFIG_BLOCK and tracepoints)"));
        }
    }
    let mut plan = AttachPlan::new(tool);
    let (flavor, why) = tracepoint_flavor(prober, "block_rq_issue");
    plan.add(
        "issue",
        program(flavor, "issue_btf", "issue_raw"),
        flavor,
        "block_rq_issue",
        why.clone(),
    );
    plan.add(
        "complete",
        program(flavor, "complete_btf", "complete_raw"),
        flavor,
        "block_rq_complete",
        why.clone(),
    );

    let arity = prober.tracepoint_arity("block_rq_issue");
    let single_arg = arity != Some(2);
    plan.decide(
        "rq args",
        match arity {
            Some(n) => format!(
                "block_rq_insert/issue pass {n} argument(s) (btf_trace_block_rq_issue in BTF)"
            ),
            None => "block_rq_issue prototype not in BTF: assuming (rq)".into(),
        },
    );
    plan.decide(
        "disk",
        if prober.struct_has_field("request", "rq_disk") {
            "rq->rq_disk (struct request has rq_disk)"
        } else {
            "rq->q->disk (struct request has no rq_disk)"
        },
    );

    let mut queue_start = QueueStart::Off;
    if queued || describe_queued {
        let mut q_plan = AttachPlan::new(tool);
        let start = plan_queue_start(prober, flavor, &mut q_plan);
        if queued {
            queue_start = start;
            plan.programs.extend(q_plan.programs);
        } else {
            for p in q_plan.programs {
                plan.decide(
                    "-Q start",
                    format!("{} would be used with -Q: {}", p.attach_point(), p.why),
                );
            }
        }
    }
    Ok(BlockHooks {
        plan,
        single_arg,
        queue_start,
    })
}

/// The first start point that exists and attaches, best first.
fn plan_queue_start(prober: &Prober, flavor: Flavor, plan: &mut AttachPlan) -> QueueStart {
    if prober.has_tracepoint("block", "block_io_start") {
        plan.add(
            "-Q start",
            program(flavor, "io_start_btf", "io_start_raw"),
            flavor,
            "block_io_start",
            "tracepoint fired when the OS starts accounting the request",
        );
        return QueueStart::Event;
    }
    let mut refused = Vec::new();
    for function in ["__blk_account_io_start", "blk_account_io_start"] {
        match prober.fentry_works(function) {
            Ok(()) => {
                plan.add(
                    "-Q start",
                    "account_start_fentry",
                    Flavor::Fentry,
                    function,
                    "no block_io_start tracepoint; fentry attaches",
                );
                return QueueStart::Event;
            }
            Err(e) => refused.push(format!("fentry/{function}: {e}")),
        }
        match prober.kprobe_works(function) {
            Ok(()) => {
                plan.add(
                    "-Q start",
                    "account_start_kprobe",
                    Flavor::Kprobe,
                    function,
                    "no block_io_start tracepoint, no fentry; kprobe attaches",
                );
                return QueueStart::Event;
            }
            Err(e) => refused.push(format!("kprobe/{function}: {e}")),
        }
    }
    plan.add(
        "-Q start",
        program(flavor, "insert_btf", "insert_raw"),
        flavor,
        "block_rq_insert",
        format!(
            "rq->start_time_ns at completion (the stamp iostat's await uses), block_rq_insert where it is 0; no block_io_start, {}",
            refused.join("; ")
        ),
    );
    QueueStart::RqField
}
