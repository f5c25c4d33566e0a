//! Kernel functions timed through numbered slots (`src/bpf/lib/fn_slots.bpf.h`): the programs
//! each slot has, and the planner that puts one function in a slot, hooked with fentry/fexit
//! where they load and kprobe/kretprobe where they do not, with the argument that leads to its
//! file read from BTF. fnlat times a layer's functions this way; iostack times the VFS and
//! filesystem layers of the calls it follows.

use crate::common::kernel::hooks::{plan_function, FunctionHook, FunctionPrograms};
use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::Prober;
use crate::tools::fnlat::Function;

/// How many slots the programs of `FN_SLOTS_16` provide.
pub const SLOTS: usize = 16;

/// `struct fn_slot` (`src/bpf/lib/fn_slots.h`): one planned function.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FnSlot {
    /// What the slot counts for, in the tool's terms (fnlat: an operation; iostack: a layer).
    pub op: u32,
    /// The argument that leads to the file, of kind `kind` (`enum fn_arg`).
    pub arg: u32,
    pub kind: u32,
    /// The argument holding a `loff_t *` position, or `u32::MAX`.
    pub pos_arg: u32,
}

// SAFETY: u32s; any bit pattern is valid.
unsafe impl plain::Plain for FnSlot {}

/// Slot program names, as FN_SLOT generates them.
macro_rules! slot_names {
    ($suffix:literal) => {
        [
            concat!("slot0_", $suffix),
            concat!("slot1_", $suffix),
            concat!("slot2_", $suffix),
            concat!("slot3_", $suffix),
            concat!("slot4_", $suffix),
            concat!("slot5_", $suffix),
            concat!("slot6_", $suffix),
            concat!("slot7_", $suffix),
            concat!("slot8_", $suffix),
            concat!("slot9_", $suffix),
            concat!("slot10_", $suffix),
            concat!("slot11_", $suffix),
            concat!("slot12_", $suffix),
            concat!("slot13_", $suffix),
            concat!("slot14_", $suffix),
            concat!("slot15_", $suffix),
        ]
    };
}
const FENTRY: [&str; SLOTS] = slot_names!("fentry");
const KPROBE: [&str; SLOTS] = slot_names!("kprobe");
const KRETPROBE: [&str; SLOTS] = slot_names!("kretprobe");
/// fexit programs by the arity they were built for: 2 to 5.
const FEXIT: [[&str; SLOTS]; 4] = [
    slot_names!("fexit2"),
    slot_names!("fexit3"),
    slot_names!("fexit4"),
    slot_names!("fexit5"),
];

/// `enum fnlat_arg`: the argument kinds that lead to a file, best first.
const ARG_KINDS: [(&str, u32); 5] = [
    ("kiocb", 2),
    ("file", 1),
    ("dentry", 3),
    ("path", 4),
    ("inode", 5),
];

/// Plans one function in slot `slot`: its argument layout from BTF, then fentry/fexit or
/// kprobe/kretprobe.
pub fn plan_slot(
    prober: &Prober,
    plan: &mut AttachPlan,
    module: Option<&str>,
    op: (usize, &str),
    func: &Function,
    slot: usize,
) -> Result<FnSlot, String> {
    // Without BTF for it (a module's function on a kernel without module BTF, such as 5.10),
    // a function known to kallsyms can still be timed with kprobes; its arguments are then
    // unknown, so calls are not labelled with their filesystem.
    let absent =
        "is not in this kernel (BTF, kallsyms): absent, inlined, or in a module not loaded";
    let params = match prober.signature(func.name) {
        Some(sig) => sig.params,
        None if prober.has_symbol(func.name) => Vec::new(),
        None => return Err(format!("{} {absent}", func.name)),
    };
    let arity = params.len();
    if !params.is_empty() && !(2..=5).contains(&arity) {
        return Err(format!(
            "{} takes {arity} arguments; the slots' fexit programs take 2 to 5",
            func.name
        ));
    }
    let (arg, kind) = ARG_KINDS
        .iter()
        .find_map(|(name, kind)| {
            let i = params.iter().position(|p| p.as_deref() == Some(*name))?;
            Some((i as u32, *kind))
        })
        .unwrap_or((0, 0));
    let hook = FunctionHook {
        entry_role: op.1,
        exit_role: op.1,
        function: func.name,
        module,
        programs: FunctionPrograms {
            fentry: FENTRY[slot],
            kprobe: KPROBE[slot],
            exit: Some((FEXIT[arity.max(2) - 2][slot], KRETPROBE[slot], arity)),
        },
    };
    plan_function(prober, plan, &hook)?;
    Ok(FnSlot {
        op: op.0 as u32,
        arg,
        kind,
        pos_arg: func.pos_arg.unwrap_or(u32::MAX),
    })
}
