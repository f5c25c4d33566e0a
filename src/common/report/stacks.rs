//! Kernel stacks from a BPF stack-trace map, symbolized in user space with blazesym from
//! /proc/kallsyms (readable with addresses by root; no vmlinux or debug info needed).

use anyhow::{Context, Result};
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;
use libbpf_rs::{MapCore, MapFlags};

/// Frames the tracing machinery adds on top of the kernel's own (our program, the trampoline or
/// tracepoint glue), dropped from the top of each stack.
fn is_tracing_frame(name: &str) -> bool {
    [
        "bpf_prog_",
        "bpf_trampoline_",
        "bpf_trace_run",
        "__bpf_trace_",
        "__traceiter_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// Symbolizes kernel stacks; keeps kallsyms parsed between calls.
pub struct KernelStacks {
    symbolizer: Symbolizer,
    source: Source<'static>,
}

impl KernelStacks {
    pub fn new() -> KernelStacks {
        let kernel = Kernel {
            kallsyms: MaybeDefault::Default,
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Default::default()
        };
        KernelStacks {
            symbolizer: Symbolizer::builder().enable_code_info(false).build(),
            source: Source::Kernel(kernel),
        }
    }

    /// The addresses of stack `id` in a `BPF_MAP_TYPE_STACK_TRACE` map, innermost first.
    pub fn addresses<M: MapCore>(map: &M, id: i32) -> Result<Option<Vec<u64>>> {
        let Ok(key) = u32::try_from(id) else {
            return Ok(None);
        };
        let Some(bytes) = map
            .lookup(&key.to_ne_bytes(), MapFlags::ANY)
            .context("reading a kernel stack")?
        else {
            return Ok(None);
        };
        Ok(Some(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                .take_while(|&a| a != 0)
                .collect(),
        ))
    }

    /// `function+0xoffset` per frame (`0x<address>` where kallsyms has no symbol), innermost
    /// first, without the tracing frames on top.
    pub fn symbolize(&self, addrs: &[u64]) -> Result<Vec<String>> {
        let syms = self
            .symbolizer
            .symbolize(&self.source, Input::AbsAddr(addrs))
            .context("symbolizing a kernel stack from /proc/kallsyms")?;
        let frames: Vec<String> = addrs
            .iter()
            .zip(syms)
            .map(|(addr, s)| match s {
                Symbolized::Sym(sym) => format!("{}+{:#x}", sym.name, sym.offset),
                Symbolized::Unknown(_) => format!("{addr:#x}"),
            })
            .collect();
        let skip = frames.iter().take_while(|f| is_tracing_frame(f)).count();
        Ok(frames.into_iter().skip(skip).collect())
    }
}

impl Default for KernelStacks {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_frames_are_recognized() {
        assert!(is_tracing_frame(
            "bpf_prog_6deef7357e7b4530_switch_btf+0x51"
        ));
        assert!(is_tracing_frame("bpf_trace_run4+0x76"));
        assert!(is_tracing_frame("__traceiter_sched_switch+0x2d"));
        assert!(!is_tracing_frame("__schedule+0x2f2"));
        assert!(!is_tracing_frame("blk_queue_enter+0x113"));
    }
}
