//! What we attach: the programs a tool runs, where, and why each choice was made. Every hook
//! choice is data with a reason, printed by `--explain`; applying a plan turns on exactly the
//! planned programs of a BPF object and fails if the object lacks one.

use std::fmt;

use anyhow::{anyhow, Context, Result};

use crate::common::kernel::prober::Prober;

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

/// The role of the programs that free a thread's state where it exits. They attach before any
/// other: a program that remembers a thread (-p's memory of other processes' threads, known by
/// their kernel stacks: lib/other_processes.bpf.h) while its exit is not yet hooked could keep a
/// thread that exits meanwhile, whose stack a thread of the traced process may then be given.
pub const CLEANUP: &str = "cleanup";

impl PlannedProgram {
    /// Whether it attaches before every other program of the plan.
    pub fn attaches_first(&self) -> bool {
        self.role == CLEANUP
    }

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
    /// A planned program the object does not have is an error (a misspelt name would otherwise
    /// load nothing and still "attach").
    pub fn apply(&self, object: &mut libbpf_rs::OpenObject) -> Result<()> {
        let names: Vec<String> = object
            .progs()
            .map(|p| p.name().to_string_lossy().into_owned())
            .collect();
        if let Some(missing) = self
            .programs
            .iter()
            .find(|p| !names.iter().any(|n| n == p.program))
        {
            return Err(anyhow!(
                "{}'s plan names program {} ({}), which its BPF object does not have; please report this as a bug",
                self.tool,
                missing.program,
                missing.attach_point()
            ));
        }
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
                        // `attach_first` attaches it before the skeleton attaches the rest.
                        Flavor::TpBtf | Flavor::RawTp if planned.attaches_first() => {
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

    /// Attaches the programs that must run before any other is attached (`attaches_first`).
    pub fn attach_first(&self, object: &libbpf_rs::Object) -> Result<Vec<libbpf_rs::Link>> {
        self.attach_where(object, true)
    }

    /// Attaches the programs libbpf cannot auto-attach from their section (retargeted kprobes,
    /// perf tracepoints), but those `attach_first` attached.
    pub fn attach_manual(&self, object: &libbpf_rs::Object) -> Result<Vec<libbpf_rs::Link>> {
        self.attach_where(object, false)
    }

    fn attach_where(
        &self,
        object: &libbpf_rs::Object,
        first: bool,
    ) -> Result<Vec<libbpf_rs::Link>> {
        let mut links = Vec::new();
        for prog in object.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            // A program may be planned at several targets (one per syscall tracepoint).
            for p in self
                .programs
                .iter()
                .filter(|p| p.program == name && p.attaches_first() == first)
            {
                let link = match p.flavor {
                    Flavor::TpBtf | Flavor::RawTp if first => prog.attach(),
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

impl AsRef<AttachPlan> for AttachPlan {
    fn as_ref(&self) -> &AttachPlan {
        self
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
