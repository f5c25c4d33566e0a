//! Loading a tool's BPF object as its plan says: open, let the tool configure it (rodata, map
//! sizes), turn on exactly the planned programs, load, attach; with errors that say what to do.

pub mod events;
pub mod libbpf;
pub mod maps;

/// A tool's generated skeleton (of `src/bpf/<name>.bpf.c`) as the module `skel`, and
/// `plain::Plain` for the C types the tool copies in and out of maps and rodata.
#[macro_export]
macro_rules! bpf_skeleton {
    ($name:literal $(, $plain:ident)* $(,)?) => {
        mod skel {
            include!(concat!(env!("OUT_DIR"), "/", $name, ".skel.rs"));
        }
        $(
            // SAFETY: repr(C) structs of integers and bytes, generated from the object's BTF:
            // any bit pattern is valid.
            unsafe impl plain::Plain for skel::types::$plain {}
        )*
    };
}

use std::mem::MaybeUninit;

use anyhow::{Context, Result};
use libbpf_rs::OpenObject;

use crate::common::kernel::plan::AttachPlan;

/// Storage for an open BPF object that lives as long as the process: a tool is opened once and
/// runs until the process ends, and a skeleton borrows its storage for its whole life.
fn object_storage() -> &'static mut MaybeUninit<OpenObject> {
    Box::leak(Box::new(MaybeUninit::uninit()))
}

/// A skeleton's mmap-ed global section (`.rodata` to configure before load, `.bss` to read
/// after), or an error naming it.
pub fn mapped<'a, T>(section: Option<&'a mut T>, what: &str) -> Result<&'a mut T> {
    section.with_context(|| format!("{what} is not mapped"))
}

/// A C string the BPF side wrote into a fixed array (a comm, a file or filesystem name), up to
/// its NUL.
pub fn c_str(bytes: &[std::ffi::c_char]) -> String {
    let b: Vec<u8> = bytes
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&b).into_owned()
}

/// A comm the BPF side kept, or `?` where it kept none (no room, or no task to name).
pub fn comm_or_unknown(bytes: &[std::ffi::c_char]) -> String {
    match c_str(bytes) {
        c if c.is_empty() => "?".into(),
        c => c,
    }
}

/// Copies a value into a skeleton's rodata struct of the same layout (the skeleton's generated
/// type and our mirror of it, e.g. `struct task_filter` and `BpfTaskFilter`). A size mismatch is
/// a bug of ours: reported, not written.
pub fn copy_struct<D: plain::Plain, S: plain::Plain>(
    what: &str,
    dst: &mut D,
    src: &S,
) -> Result<()> {
    // SAFETY: D is Plain, so any bytes are a valid D; S is Plain, so its bytes may be read.
    let (dst, src) = unsafe { (plain::as_mut_bytes(dst), plain::as_bytes(src)) };
    if dst.len() != src.len() {
        return Err(anyhow::anyhow!(
            "internal: {what} is {} bytes in the BPF object, {} in user space; please report this bug",
            dst.len(),
            src.len()
        ));
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// Opens a skeleton, lets the tool set its rodata, enables exactly the planned programs, loads
/// and attaches. Returns the skeleton and the links of manually attached programs.
pub fn load_planned<B>(
    builder: B,
    plan: &AttachPlan,
    configure: impl FnOnce(&mut B::Output) -> Result<()>,
) -> Result<Loaded<<B::Output as libbpf_rs::skel::OpenSkel<'static>>::Output>>
where
    B: libbpf_rs::skel::SkelBuilder<'static>,
{
    load_planned_then(builder, plan, configure, |_| Ok(()))
}

/// load_planned, with `loaded` called between load and attach: what the programs need before
/// they run that took too long to have before the verifier started (set in .bss).
pub fn load_planned_then<B>(
    builder: B,
    plan: &AttachPlan,
    configure: impl FnOnce(&mut B::Output) -> Result<()>,
    loaded: impl FnOnce(&mut <B::Output as libbpf_rs::skel::OpenSkel<'static>>::Output) -> Result<()>,
) -> Result<Loaded<<B::Output as libbpf_rs::skel::OpenSkel<'static>>::Output>>
where
    B: libbpf_rs::skel::SkelBuilder<'static>,
{
    use libbpf_rs::skel::{OpenSkel as _, Skel as _};

    let mut open = builder
        .open(object_storage())
        .context("opening the BPF object")?;
    configure(&mut open)?;
    plan.apply(open.open_object_mut())?;
    let mut skel = open.load().map_err(|e| load_advice(plan, e))?;
    loaded(&mut skel)?;
    // A thread's exit first (plan::CLEANUP): no window in which a thread is remembered and its
    // exit not yet seen.
    let mut links = plan.attach_first(skel.object())?;
    skel.attach().map_err(|e| {
        anyhow::anyhow!(
            "attaching {}'s programs failed ({e}); try --explain",
            plan.tool
        )
    })?;
    links.extend(plan.attach_manual(skel.object())?);
    crate::common::kernel::prober::release_trials();
    Ok(Loaded {
        skel,
        _links: links,
    })
}

/// Loads a tool whose per-thread state lives in task-local storage where the kernel offers it to
/// tracing programs (5.11+), else in a hash map by thread id (`src/bpf/lib/thread_state.bpf.h`):
/// `load(per_task)` is tried with task storage first. Returns the loaded tool and, for
/// `--explain`, where its state lives and why.
pub fn load_with_thread_state<T>(load: impl Fn(bool) -> Result<T>) -> Result<(T, String)> {
    match load(true) {
        Ok(loaded) => Ok((
            loaded,
            "task-local storage (bpf_task_storage_get)".to_string(),
        )),
        Err(e) => Ok((
            load(false)?,
            format!("hash map by thread id (with task-local storage: {e:#})"),
        )),
    }
}

/// Configures the two maps of a `THREAD_STATE` before load: only the map of the path taken is
/// created (5.10 has no task storage for tracing programs), the other kept to one entry.
pub fn thread_state_maps(
    by_task: &mut libbpf_rs::OpenMapMut,
    by_tid: &mut libbpf_rs::OpenMapMut,
    per_task: bool,
) -> Result<()> {
    by_task.set_autocreate(per_task)?;
    if per_task {
        by_tid.set_max_entries(1)?;
    }
    Ok(())
}

/// A loaded and attached skeleton, with the links of the programs attached by hand (kprobes,
/// perf tracepoints): they detach when dropped, so they live exactly as long as the skeleton.
pub struct Loaded<S> {
    pub skel: S,
    _links: Vec<libbpf_rs::Link>,
}

impl<S> Drop for Loaded<S> {
    /// A perf tracepoint's detach waits for the tracepoints' grace period, 75-84 ms each on the
    /// CI host's 6.18 (2026-11-26: 36 per-syscall tracepoints took 2.6 s one after the other):
    /// detached side by side, their waits overlap.
    fn drop(&mut self) {
        let links = std::mem::take(&mut self._links);
        if links.len() < 2 {
            return;
        }
        std::thread::scope(|s| {
            for link in links {
                s.spawn(move || drop(link));
            }
        });
    }
}

fn load_advice(plan: &AttachPlan, err: libbpf_rs::Error) -> anyhow::Error {
    let hint = match err.kind() {
        // As root, EACCES/EPERM at load is the verifier (or lockdown), not a missing privilege.
        libbpf_rs::ErrorKind::PermissionDenied if nix::unistd::geteuid().is_root() => {
            "the kernel's verifier rejected a program: run with -v to see its log, and please report it as a bug"
        }
        libbpf_rs::ErrorKind::PermissionDenied => {
            "the kernel refused the BPF programs: run as root, and check kernel.unprivileged_bpf_disabled and lockdown"
        }
        _ => "run with -v to see the verifier's log, and --explain for the chosen hooks",
    };
    anyhow::anyhow!(
        "loading {}'s BPF programs failed ({err}): {hint}",
        plan.tool
    )
}
