//! Hook planners: from what the kernel has (`Prober`) to which program flavour attaches where,
//! with the reason, into an `AttachPlan`. Tracepoints get tp_btf or raw_tp (the twins of
//! `src/bpf/lib/tp_twins.bpf.h`); kernel functions get fentry/fexit or kprobe/kretprobe (the
//! flavours of `src/bpf/lib/func_hooks.bpf.h`), decided per function.

use std::path::Path;

use crate::common::kernel::plan::{AttachPlan, Flavor};
use crate::common::kernel::prober::Prober;

/// The program of a TP_TWINS pair for a flavour.
pub fn twin(flavor: Flavor, btf: &'static str, raw: &'static str) -> &'static str {
    if flavor == Flavor::TpBtf {
        btf
    } else {
        raw
    }
}

/// Picks tp_btf where it works, raw_tp otherwise, for a tracepoint every supported kernel has.
pub fn tracepoint_flavor(prober: &Prober, tracepoint: &str) -> (Flavor, String) {
    match prober.tp_btf_works(tracepoint) {
        Ok(()) => (Flavor::TpBtf, "tp_btf loads and attaches here".into()),
        Err(e) => (Flavor::RawTp, format!("raw_tp: tp_btf unavailable ({e})")),
    }
}

/// For a raw tracepoint (one every supported kernel has, like `sys_enter`): tp_btf where it
/// works, else raw_tp where that works, else the reasons both failed. `only` restricts the
/// choice (a user forcing a flavour).
pub fn raw_tracepoint_flavor(
    prober: &Prober,
    tracepoint: &str,
    only: Option<Flavor>,
) -> Result<(Flavor, String), String> {
    let mut failures = Vec::new();
    if only.is_none_or(|f| f == Flavor::TpBtf) {
        match prober.tp_btf_works(tracepoint) {
            Ok(()) => return Ok((Flavor::TpBtf, "tp_btf loads and attaches here".into())),
            Err(e) => failures.push(format!("tp_btf: {e}")),
        }
    }
    if only.is_none_or(|f| f == Flavor::RawTp) {
        match prober.raw_tp_works(tracepoint) {
            Ok(()) if failures.is_empty() => {
                return Ok((Flavor::RawTp, "raw_tp loads and attaches here".into()))
            }
            Ok(()) => return Ok((Flavor::RawTp, format!("raw_tp ({})", failures.join("; ")))),
            Err(e) => failures.push(format!("raw_tp: {e}")),
        }
    }
    Err(failures.join("; "))
}

/// The programs `FUNC_HOOKS(name, nargs, ...)` (or `FUNC_ENTRY_HOOKS`) generated for one hook.
#[derive(Clone, Copy, Debug)]
pub struct FunctionPrograms {
    pub fentry: &'static str,
    pub kprobe: &'static str,
    /// fexit and kretprobe, with the arity compiled into the fexit program (it reads the return
    /// value after the arguments); None for an entry-only hook.
    pub exit: Option<(&'static str, &'static str, usize)>,
}

/// A kernel function to hook, and where it lives.
#[derive(Clone, Copy, Debug)]
pub struct FunctionHook<'a> {
    /// The roles the programs play, for `--explain` (e.g. "submit" and "submitted").
    pub entry_role: &'a str,
    pub exit_role: &'a str,
    pub function: &'a str,
    /// The module the function is built into on distributions that build it as one (xfs,
    /// btrfs...): if it is not in vmlinux and this module is not loaded, the reason says so.
    pub module: Option<&'a str>,
    pub programs: FunctionPrograms,
}

/// Plans one kernel function: fentry (and fexit) where they load and attach, else kprobe (and
/// kretprobe), recorded in `plan` with the reason. Returns the flavour chosen, or why neither
/// works here (the caller decides whether that is fatal or tries another function).
pub fn plan_function(
    prober: &Prober,
    plan: &mut AttachPlan,
    hook: &FunctionHook,
) -> Result<Flavor, String> {
    let f = hook.function;
    let in_module = prober.module_of(f);
    if !prober.has_symbol(f) {
        if let Some(m) = hook.module {
            if !Path::new("/sys/module").join(m).exists() {
                return Err(format!(
                    "{f} is in module {m}, which is not loaded (modprobe {m}, or mount a filesystem that needs it)"
                ));
            }
        }
        return Err(format!("this kernel has no function {f} (BTF, kallsyms)"));
    }
    let place = in_module
        .map(|m| format!(" (module {m})"))
        .unwrap_or_default();
    let fentry = match (hook.programs.exit, prober.function_arity(f)) {
        (Some((_, _, compiled)), Some(actual)) if compiled != actual => Err(format!(
            "{f} takes {actual} arguments here, the fexit program was built for {compiled}"
        )),
        _ => prober.fentry_works(f),
    };
    match fentry {
        Ok(()) => {
            let why = format!("fentry{} attaches here{place}", exit_pair(hook, "/fexit"));
            plan.add(
                hook.entry_role,
                hook.programs.fentry,
                Flavor::Fentry,
                f,
                why.clone(),
            );
            if let Some((fexit, _, _)) = hook.programs.exit {
                plan.add(hook.exit_role, fexit, Flavor::Fexit, f, why);
            }
            Ok(Flavor::Fentry)
        }
        Err(fentry) => match prober.kprobe_works(f) {
            Ok(()) => {
                let why = format!(
                    "kprobe{}{place}: fentry unavailable ({fentry})",
                    exit_pair(hook, "/kretprobe")
                );
                plan.add(
                    hook.entry_role,
                    hook.programs.kprobe,
                    Flavor::Kprobe,
                    f,
                    why.clone(),
                );
                if let Some((_, kretprobe, _)) = hook.programs.exit {
                    plan.add(hook.exit_role, kretprobe, Flavor::Kretprobe, f, why);
                }
                Ok(Flavor::Kprobe)
            }
            Err(kprobe) => Err(format!(
                "fentry unavailable ({fentry}); kprobes unavailable ({kprobe})"
            )),
        },
    }
}

fn exit_pair(hook: &FunctionHook, pair: &'static str) -> &'static str {
    if hook.programs.exit.is_some() {
        pair
    } else {
        ""
    }
}
