//! Where rastat hooks on this kernel, each choice with its reason: the readahead tracepoints
//! where the kernel has them (6.18+), else the readahead engine's functions; the page cache's
//! add and delete tracepoints (every kernel); the filemap read and fault tracepoints (6.12+),
//! else the functions they sit in.

use anyhow::{bail, Result};

use crate::common::kernel::hooks::{
    plan_function, raw_tracepoint_flavor, twin, FunctionHook, FunctionPrograms,
};
use crate::common::kernel::plan::{AttachPlan, Flavor};
use crate::common::kernel::prober::Prober;

/// A tracepoint program pair (`TP_TWINS`) and the role it plays.
struct TracepointHook {
    role: &'static str,
    tracepoint: &'static str,
    btf: &'static str,
    raw: &'static str,
}

/// A function hooked at its entry (`FUNC_ENTRY_HOOKS`) and the role it plays.
struct EntryHook {
    role: &'static str,
    function: &'static str,
    fentry: &'static str,
    kprobe: &'static str,
}

const WINDOW_TRACEPOINTS: [TracepointHook; 4] = [
    TracepointHook {
        role: "window",
        tracepoint: "page_cache_ra_unbounded",
        btf: "tp_ra_unbounded_btf",
        raw: "tp_ra_unbounded_raw",
    },
    TracepointHook {
        role: "window",
        tracepoint: "page_cache_ra_order",
        btf: "tp_ra_order_btf",
        raw: "tp_ra_order_raw",
    },
    TracepointHook {
        role: "sync",
        tracepoint: "page_cache_sync_ra",
        btf: "tp_sync_ra_btf",
        raw: "tp_sync_ra_raw",
    },
    TracepointHook {
        role: "async",
        tracepoint: "page_cache_async_ra",
        btf: "tp_async_ra_btf",
        raw: "tp_async_ra_raw",
    },
];

const PAGE_CACHE_TRACEPOINTS: [TracepointHook; 2] = [
    TracepointHook {
        role: "added",
        tracepoint: "mm_filemap_add_to_page_cache",
        btf: "tp_add_page_btf",
        raw: "tp_add_page_raw",
    },
    TracepointHook {
        role: "evicted",
        tracepoint: "mm_filemap_delete_from_page_cache",
        btf: "tp_delete_page_btf",
        raw: "tp_delete_page_raw",
    },
];

const USE_TRACEPOINTS: [TracepointHook; 3] = [
    TracepointHook {
        role: "read",
        tracepoint: "mm_filemap_get_pages",
        btf: "tp_read_pages_btf",
        raw: "tp_read_pages_raw",
    },
    TracepointHook {
        role: "fault",
        tracepoint: "mm_filemap_fault",
        btf: "tp_fault_page_btf",
        raw: "tp_fault_page_raw",
    },
    TracepointHook {
        role: "mapped",
        tracepoint: "mm_filemap_map_pages",
        btf: "tp_mapped_pages_btf",
        raw: "tp_mapped_pages_raw",
    },
];

const CLEANUP: TracepointHook = TracepointHook {
    role: crate::common::kernel::plan::CLEANUP,
    tracepoint: "sched_process_exit",
    btf: "task_exit_btf",
    raw: "task_exit_raw",
};

const WINDOW_FUNCTIONS: [EntryHook; 4] = [
    EntryHook {
        role: "window",
        function: "page_cache_ra_unbounded",
        fentry: "page_cache_ra_unbounded_fentry",
        kprobe: "page_cache_ra_unbounded_kprobe",
    },
    EntryHook {
        role: "window",
        function: "page_cache_ra_order",
        fentry: "page_cache_ra_order_fentry",
        kprobe: "page_cache_ra_order_kprobe",
    },
    EntryHook {
        role: "sync",
        function: "page_cache_sync_ra",
        fentry: "page_cache_sync_ra_fentry",
        kprobe: "page_cache_sync_ra_kprobe",
    },
    EntryHook {
        role: "async",
        function: "page_cache_async_ra",
        fentry: "page_cache_async_ra_fentry",
        kprobe: "page_cache_async_ra_kprobe",
    },
];

/// A read's use, newest first: folio_mark_accessed (5.16+) replaced mark_page_accessed, which
/// stayed as a wrapper (hooking both would count a page twice). Preferred to the filemap read
/// tracepoint: a read marks each folio it copies, and the tracepoint skips some batches.
const READ_FUNCTIONS: [EntryHook; 2] = [
    EntryHook {
        role: "read",
        function: "folio_mark_accessed",
        fentry: "folio_mark_accessed_fentry",
        kprobe: "folio_mark_accessed_kprobe",
    },
    EntryHook {
        role: "read",
        function: "mark_page_accessed",
        fentry: "mark_page_accessed_fentry",
        kprobe: "mark_page_accessed_kprobe",
    },
];

const FAULT_FUNCTIONS: [EntryHook; 2] = [
    EntryHook {
        role: "fault",
        function: "filemap_fault",
        fentry: "filemap_fault_fentry",
        kprobe: "filemap_fault_kprobe",
    },
    EntryHook {
        role: "mapped",
        function: "filemap_map_pages",
        fentry: "filemap_map_pages_fentry",
        kprobe: "filemap_map_pages_kprobe",
    },
];

/// rastat's plan and the settings that go with it.
#[derive(Clone, Debug)]
pub struct RastatPlan {
    pub plan: AttachPlan,
    /// The argument of page_cache_sync_ra that is req_count (a function hook only).
    pub sync_req_arg: u32,
}

impl AsRef<AttachPlan> for RastatPlan {
    fn as_ref(&self) -> &AttachPlan {
        &self.plan
    }
}

fn add_tracepoint(
    prober: &Prober,
    plan: &mut AttachPlan,
    hook: &TracepointHook,
    why: &str,
) -> Result<(), String> {
    let (flavor, how) = raw_tracepoint_flavor(prober, hook.tracepoint, None)?;
    plan.add(
        hook.role,
        twin(flavor, hook.btf, hook.raw),
        flavor,
        hook.tracepoint,
        format!("{how}; {why}"),
    );
    Ok(())
}

fn add_function(
    prober: &Prober,
    plan: &mut AttachPlan,
    hook: &EntryHook,
) -> Result<Flavor, String> {
    plan_function(
        prober,
        plan,
        &FunctionHook {
            entry_role: hook.role,
            exit_role: hook.role,
            function: hook.function,
            module: None,
            programs: FunctionPrograms {
                fentry: hook.fentry,
                kprobe: hook.kprobe,
                exit: None,
            },
        },
    )
}

/// Where each read system call starts, for the filemap read tracepoint: sys_enter, where every
/// system call of the machine runs the program (231 ns a run on the CI host, 2026-11-26, with a
/// QEMU beside it); the read calls' own perf tracepoints would run it for reads only, but
/// attaching them is refused there (EACCES).
fn plan_read_calls(prober: &Prober, plan: &mut AttachPlan) -> Result<()> {
    let (flavor, how) = raw_tracepoint_flavor(prober, "sys_enter", None)
        .map_err(|e| anyhow::anyhow!("sys_enter cannot be traced here: {e}"))?;
    plan.add(
        "read start",
        twin(flavor, "read_call_btf", "read_call_raw"),
        flavor,
        "sys_enter",
        format!("{how}; where each read system call starts: the filemap read event skips a batch that ends in a page still being read"),
    );
    Ok(())
}

/// What rastat attaches on this kernel.
pub fn plan(prober: &Prober) -> Result<RastatPlan> {
    let mut plan = AttachPlan::new(super::NAME);
    let mut sync_req_arg = 1;
    if prober.has_tracepoint("readahead", "page_cache_ra_unbounded") {
        for hook in &WINDOW_TRACEPOINTS {
            add_tracepoint(prober, &mut plan, hook, "the readahead tracepoints (6.18+)")
                .map_err(|e| anyhow::anyhow!("{} cannot be traced here: {e}", hook.tracepoint))?;
        }
    } else {
        for hook in &WINDOW_FUNCTIONS {
            match add_function(prober, &mut plan, hook) {
                Ok(_) => {}
                // page_cache_ra_order came in 5.18; before it every window went through the
                // unbounded engine.
                Err(e) if hook.function == "page_cache_ra_order" => {
                    plan.decide("order", format!("not hooked: {e}; every window passes through page_cache_ra_unbounded"));
                }
                Err(e) => bail!(
                    "this kernel has no readahead tracepoints (6.18+) and {} cannot be hooked ({e}): rastat needs kprobes or fentry here",
                    hook.function
                ),
            }
        }
        sync_req_arg = match prober.function_arity("page_cache_sync_ra") {
            Some(3) => 2,
            _ => 1,
        };
        plan.decide(
            "sync",
            format!("page_cache_sync_ra's request size is argument {sync_req_arg}"),
        );
    }
    for hook in &PAGE_CACHE_TRACEPOINTS {
        add_tracepoint(prober, &mut plan, hook, "every page cache add and delete")
            .map_err(|e| anyhow::anyhow!("{} cannot be traced here: {e}", hook.tracepoint))?;
    }
    let mut failures = Vec::new();
    let read = READ_FUNCTIONS.iter().find_map(|hook| {
        add_function(prober, &mut plan, hook)
            .map_err(|e| failures.push(e))
            .ok()
    });
    if read.is_none() {
        if !prober.has_tracepoint("filemap", "mm_filemap_get_pages") {
            bail!(
                "this kernel has no filemap read tracepoints (6.12+) and a read's use of a page cannot be hooked ({}): rastat needs kprobes or fentry here",
                failures.join("; ")
            );
        }
        let why = format!(
            "a read's range of pages: {} cannot be hooked ({})",
            READ_FUNCTIONS[0].function,
            failures.first().map(String::as_str).unwrap_or("")
        );
        add_tracepoint(prober, &mut plan, &USE_TRACEPOINTS[0], &why)
            .map_err(|e| anyhow::anyhow!("mm_filemap_get_pages cannot be traced here: {e}"))?;
        plan_read_calls(prober, &mut plan)?;
    }
    if prober.has_tracepoint("filemap", "mm_filemap_fault") {
        for hook in &USE_TRACEPOINTS[1..] {
            add_tracepoint(prober, &mut plan, hook, "the filemap tracepoints (6.12+)")
                .map_err(|e| anyhow::anyhow!("{} cannot be traced here: {e}", hook.tracepoint))?;
        }
    } else {
        for hook in &FAULT_FUNCTIONS {
            add_function(prober, &mut plan, hook).map_err(|e| {
                anyhow::anyhow!(
                    "this kernel has no filemap fault tracepoints (6.12+) and {} cannot be hooked ({e}): rastat needs kprobes or fentry here",
                    hook.function
                )
            })?;
        }
    }
    add_tracepoint(
        prober,
        &mut plan,
        &CLEANUP,
        "frees the per-thread state of an exiting thread",
    )
    .map_err(|e| anyhow::anyhow!("sched_process_exit cannot be traced here: {e}"))?;
    plan.decide(
        "readahead",
        "a page added by a thread inside the window its readahead just started; a read of only the pages asked for (POSIX_FADV_RANDOM, a small random read) is not readahead",
    );
    Ok(RastatPlan { plan, sync_req_arg })
}
