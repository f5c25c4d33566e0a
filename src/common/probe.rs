//! Kernel feature probing: small named predicates over vmlinux BTF, tracefs and trial loads, and
//! the `AttachPlan` a tool builds from them (printed by `--explain`).
//!
//! We never branch on a kernel version: every decision comes from what this kernel describes
//! (BTF) or really allows (a trial load and attach).

use std::fmt;
use std::fs;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::btf::types::{Composite, Enum, Enum64, FuncProto, Typedef};
use libbpf_rs::btf::{Btf, ReferencesType as _};
use libbpf_rs::skel::{OpenSkel as _, SkelBuilder as _};
use libbpf_rs::OpenObject;

use crate::common::bpf::quiet_libbpf;

mod probe_skel {
    include!(concat!(env!("OUT_DIR"), "/probe.skel.rs"));
}
use probe_skel::ProbeSkelBuilder;

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// How a program reaches its hook, in the order tools prefer them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    TpBtf,
    RawTp,
    Fentry,
    Kprobe,
    Tracepoint,
    /// fexit and kretprobe: the return side of an fentry/kprobe pair.
    Fexit,
    Kretprobe,
}

impl Flavor {
    pub fn prefix(self) -> &'static str {
        match self {
            Flavor::TpBtf => "tp_btf",
            Flavor::RawTp => "raw_tp",
            Flavor::Fentry => "fentry",
            Flavor::Kprobe => "kprobe",
            Flavor::Tracepoint => "tracepoint",
            Flavor::Fexit => "fexit",
            Flavor::Kretprobe => "kretprobe",
        }
    }
}

/// What this kernel offers, learned once per run.
pub struct Prober {
    btf: Btf<'static>,
    tracefs: Option<PathBuf>,
}

impl Prober {
    /// Loads the running kernel's BTF; a kernel without it cannot run CO-RE tools.
    pub fn new() -> Result<Prober> {
        if !Path::new(VMLINUX_BTF).exists() {
            return Err(anyhow!(
                "this kernel has no BTF ({VMLINUX_BTF} is missing): iostack needs a kernel built with CONFIG_DEBUG_INFO_BTF=y, as every major distribution ships since 5.4"
            ));
        }
        let btf =
            Btf::from_vmlinux().context("reading the kernel's BTF from /sys/kernel/btf/vmlinux")?;
        Ok(Prober {
            btf,
            tracefs: find_tracefs(),
        })
    }

    pub fn btf(&self) -> &Btf<'static> {
        &self.btf
    }

    /// Where tracefs is mounted, if it is.
    pub fn tracefs(&self) -> Option<&Path> {
        self.tracefs.as_deref()
    }

    /// `struct <name>` has a member called `field`.
    pub fn struct_has_field(&self, name: &str, field: &str) -> bool {
        self.btf
            .type_by_name::<Composite>(name)
            .map(|s| s.iter().any(|m| m.name.is_some_and(|n| n == field)))
            .unwrap_or(false)
    }

    /// The kernel has a function of this name in BTF (not inlined away).
    pub fn has_function(&self, name: &str) -> bool {
        self.btf
            .type_by_name::<libbpf_rs::btf::types::Func>(name)
            .is_some()
    }

    /// The kernel has this function: in BTF, or else as a text symbol in /proc/kallsyms.
    pub fn has_symbol(&self, name: &str) -> bool {
        self.has_function(name) || kallsyms_has_text(name)
    }

    /// A tracepoint exists: its `btf_trace_<name>` typedef, or tracefs when BTF lacks it.
    pub fn has_tracepoint(&self, category: &str, name: &str) -> bool {
        if self
            .btf
            .type_by_name::<Typedef>(&format!("btf_trace_{name}"))
            .is_some()
        {
            return true;
        }
        self.tracefs.as_ref().is_some_and(|t| {
            t.join("events")
                .join(category)
                .join(name)
                .join("format")
                .exists()
        })
    }

    /// Number of arguments a raw tracepoint passes (from `btf_trace_<name>`, minus its `void *`).
    pub fn tracepoint_arity(&self, name: &str) -> Option<usize> {
        let typedef = self
            .btf
            .type_by_name::<Typedef>(&format!("btf_trace_{name}"))?;
        let pointer = typedef.referenced_type().skip_mods_and_typedefs();
        let proto = FuncProto::try_from(pointer.next_type()?.skip_mods_and_typedefs()).ok()?;
        Some(proto.len().saturating_sub(1))
    }

    /// Values of an enum, from whichever of `names` the kernel has (enums get renamed).
    pub fn enum_values(&self, names: &[&str]) -> Option<Vec<(String, i128)>> {
        for name in names {
            if let Some(e) = self.btf.type_by_name::<Enum>(name) {
                return Some(
                    e.iter()
                        .filter_map(|m| {
                            Some((m.name?.to_string_lossy().into_owned(), m.value as i128))
                        })
                        .collect(),
                );
            }
            if let Some(e) = self.btf.type_by_name::<Enum64>(name) {
                return Some(
                    e.iter()
                        .filter_map(|m| Some((m.name?.to_string_lossy().into_owned(), m.value)))
                        .collect(),
                );
            }
        }
        None
    }

    /// The value of an enumerator, whichever enum holds it (named or anonymous: enums get
    /// named and renamed, e.g. the `__RQF_*` bits are an anonymous enum in 6.12 and
    /// `enum rqf_flags` later).
    pub fn enumerator(&self, member: &str) -> Option<i128> {
        let wanted = std::ffi::OsStr::new(member);
        self.btf
            .type_by_kind::<Enum>()
            .find_map(|e| {
                e.iter()
                    .find(|m| m.name == Some(wanted))
                    .map(|m| m.value as i128)
            })
            .or_else(|| {
                self.btf
                    .type_by_kind::<Enum64>()
                    .find_map(|e| e.iter().find(|m| m.name == Some(wanted)).map(|m| m.value))
            })
    }

    /// A tp_btf program loads and attaches on this tracepoint.
    pub fn tp_btf_works(&self, tracepoint: &str) -> Result<(), String> {
        trial(Trial::TpBtf, tracepoint)
    }

    /// A raw_tp program loads and attaches on this tracepoint.
    pub fn raw_tp_works(&self, tracepoint: &str) -> Result<(), String> {
        trial(Trial::RawTp, tracepoint)
    }

    /// An fentry program loads and attaches on this function (on some kernels the verifier knows
    /// fentry but the kernel refuses it, e.g. with EPERM).
    pub fn fentry_works(&self, function: &str) -> Result<(), String> {
        if !self.has_function(function) {
            return Err(format!(
                "{function} is not in the kernel's BTF (absent or inlined)"
            ));
        }
        trial(Trial::Fentry, function)
    }

    /// kprobes can be created at all: the kprobe PMU or tracefs' kprobe_events exists.
    /// (`ProgramType::Kprobe.is_supported()` says yes on kernels built without CONFIG_KPROBES.)
    pub fn kprobes_possible(&self) -> Result<(), String> {
        if Path::new("/sys/bus/event_source/devices/kprobe/type").exists() {
            return Ok(());
        }
        if self
            .tracefs
            .as_ref()
            .is_some_and(|t| t.join("kprobe_events").exists())
        {
            return Ok(());
        }
        Err(
            "this kernel has no kprobes (CONFIG_KPROBES is off: no kprobe PMU, no kprobe_events)"
                .into(),
        )
    }

    /// A kprobe on this function loads and attaches.
    pub fn kprobe_works(&self, function: &str) -> Result<(), String> {
        self.kprobes_possible()?;
        trial(Trial::Kprobe, function)
    }

    /// A one-line description of the attach facilities, for `--explain`.
    pub fn facts(&self) -> Vec<String> {
        let mut facts = vec![format!("kernel BTF: {VMLINUX_BTF}")];
        facts.push(match &self.tracefs {
            Some(p) => format!("tracefs: mounted at {}", p.display()),
            None => "tracefs: not mounted (not needed for tp_btf/raw_tp; `mount -t tracefs nodev /sys/kernel/tracing` for tracepoint fallbacks)".into(),
        });
        facts.push(match self.fentry_works("vfs_read") {
            Ok(()) => "fentry/fexit: work (trial on vfs_read)".into(),
            Err(e) => format!("fentry/fexit: unavailable ({e})"),
        });
        facts.push(match self.kprobes_possible() {
            Ok(()) => "kprobes: available".into(),
            Err(e) => format!("kprobes: unavailable ({e})"),
        });
        facts
    }
}

/// /proc/kallsyms lists a text (function) symbol of this name.
pub fn kallsyms_has_text(name: &str) -> bool {
    use std::io::BufRead;
    let Ok(file) = fs::File::open("/proc/kallsyms") else {
        return false;
    };
    std::io::BufReader::new(file)
        .lines()
        .map_while(|l| l.ok())
        .any(|line| {
            let mut f = line.split_whitespace();
            let (_, kind, sym) = (f.next(), f.next(), f.next());
            matches!(kind, Some("t" | "T")) && sym == Some(name)
        })
}

fn find_tracefs() -> Option<PathBuf> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("events").is_dir())
}

#[derive(Clone, Copy)]
enum Trial {
    TpBtf,
    RawTp,
    Fentry,
    Kprobe,
}

/// Loads (and attaches) one empty probe program retargeted at `target`.
fn trial(kind: Trial, target: &str) -> Result<(), String> {
    let _quiet = quiet_libbpf();
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let mut open = ProbeSkelBuilder::default()
        .open(&mut storage)
        .map_err(|e| e.to_string())?;
    let progs = &mut open.progs;
    progs
        .probe_fentry
        .set_autoload(matches!(kind, Trial::Fentry));
    progs
        .probe_tp_btf
        .set_autoload(matches!(kind, Trial::TpBtf));
    progs
        .probe_kprobe
        .set_autoload(matches!(kind, Trial::Kprobe));
    progs
        .probe_raw_tp
        .set_autoload(matches!(kind, Trial::RawTp));
    match kind {
        Trial::Fentry => progs
            .probe_fentry
            .set_attach_target(0, Some(target.to_string())),
        Trial::TpBtf => progs
            .probe_tp_btf
            .set_attach_target(0, Some(target.to_string())),
        Trial::Kprobe | Trial::RawTp => Ok(()),
    }
    .map_err(|e| e.to_string())?;
    let skel = open.load().map_err(|e| format!("load failed: {e}"))?;
    let link = match kind {
        Trial::Fentry => skel.progs.probe_fentry.attach_trace(),
        Trial::TpBtf => skel.progs.probe_tp_btf.attach_trace(),
        Trial::Kprobe => skel.progs.probe_kprobe.attach_kprobe(false, target),
        Trial::RawTp => skel.progs.probe_raw_tp.attach_raw_tracepoint(target),
    };
    link.map(drop).map_err(|e| format!("attach failed: {e}"))
}

/// One program a tool will run, where, and why that choice.
#[derive(Clone, Debug)]
pub struct PlannedProgram {
    /// What the program measures, e.g. "issue" or "-Q start".
    pub role: String,
    /// Skeleton program name.
    pub program: &'static str,
    pub flavor: Flavor,
    /// Tracepoint or function name.
    pub target: String,
    pub why: String,
}

impl PlannedProgram {
    pub fn attach_point(&self) -> String {
        format!("{}/{}", self.flavor.prefix(), self.target)
    }
}

/// Which programs a tool autoloads, and the reasons; printed by `--explain`.
#[derive(Clone, Debug, Default)]
pub struct AttachPlan {
    pub tool: &'static str,
    pub programs: Vec<PlannedProgram>,
    /// Other decisions taken from BTF (field layouts, argument counts).
    pub decisions: Vec<(String, String)>,
}

impl AttachPlan {
    /// What `--explain` prints once the plan has loaded and attached: the plan, the kernel
    /// facts behind it, and the proof.
    pub fn explain(&self, prober: &Prober) -> String {
        let facts = prober.facts().join("\n  ");
        format!("{self}facts:\n  {facts}\nloaded and attached: ok\n")
    }

    pub fn new(tool: &'static str) -> AttachPlan {
        AttachPlan {
            tool,
            ..Default::default()
        }
    }

    pub fn add(
        &mut self,
        role: &str,
        program: &'static str,
        flavor: Flavor,
        target: &str,
        why: impl Into<String>,
    ) {
        self.programs.push(PlannedProgram {
            role: role.into(),
            program,
            flavor,
            target: target.into(),
            why: why.into(),
        });
    }

    pub fn decide(&mut self, what: &str, choice: impl Into<String>) {
        self.decisions.push((what.into(), choice.into()));
    }

    pub fn uses(&self, program: &str) -> bool {
        self.programs.iter().any(|p| p.program == program)
    }

    pub fn get(&self, program: &str) -> Option<&PlannedProgram> {
        self.programs.iter().find(|p| p.program == program)
    }

    /// Turns on exactly the planned programs of an open skeleton and retargets fentry programs.
    pub fn apply(&self, object: &mut libbpf_rs::OpenObject) -> Result<()> {
        for mut prog in object.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            match self.get(&name) {
                Some(planned) => {
                    prog.set_autoload(true);
                    match planned.flavor {
                        Flavor::Fentry | Flavor::Fexit => prog
                            .set_attach_target(0, Some(planned.target.clone()))
                            .with_context(|| format!("retargeting {name} at {}", planned.target))?,
                        // kprobes and perf tracepoints are attached by `attach_planned`.
                        Flavor::Kprobe | Flavor::Kretprobe | Flavor::Tracepoint => {
                            prog.set_autoattach(false)
                        }
                        Flavor::TpBtf | Flavor::RawTp => {}
                    }
                }
                None => prog.set_autoload(false),
            }
        }
        Ok(())
    }

    /// Attaches the programs libbpf cannot auto-attach from their section (retargeted kprobes).
    pub fn attach_manual(&self, object: &libbpf_rs::Object) -> Result<Vec<libbpf_rs::Link>> {
        let mut links = Vec::new();
        for prog in object.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            // A program may be planned at several targets (one per syscall tracepoint).
            for p in self.programs.iter().filter(|p| p.program == name) {
                let link = match p.flavor {
                    Flavor::Kprobe => prog.attach_kprobe(false, &p.target),
                    Flavor::Kretprobe => prog.attach_kprobe(true, &p.target),
                    Flavor::Tracepoint => {
                        let (cat, tp) = p.target.split_once(':').unwrap_or(("syscalls", &p.target));
                        prog.attach_tracepoint(
                            libbpf_rs::TracepointCategory::Custom(cat.to_string()),
                            tp,
                        )
                    }
                    _ => continue,
                };
                links.push(link.with_context(|| format!("attaching {}", p.attach_point()))?);
            }
        }
        Ok(links)
    }
}

impl fmt::Display for AttachPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} attach plan:", self.tool)?;
        for p in &self.programs {
            writeln!(f, "  {:<10} {:<38} {}", p.role, p.attach_point(), p.why)?;
        }
        for (what, choice) in &self.decisions {
            writeln!(f, "  {what:<10} {choice}")?;
        }
        Ok(())
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

/// Reads a small sysfs/procfs file, trimmed.
pub fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}
