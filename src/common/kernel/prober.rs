//! What this kernel has: small named predicates over BTF (vmlinux and modules), tracefs,
//! kallsyms and trial loads, learned once per run. A prober is built from the running kernel, or
//! from a kernel's BTF file plus a description of its attach facilities, so that plans can be
//! built and tested without root for kernels we do not run on (tests/plans.rs).
//!
//! We never branch on a kernel version: every decision comes from what this kernel describes
//! (BTF) or really allows (a trial load and attach).

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::fs;
use std::hash::BuildHasher as _;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::btf::types::{Composite, Enum, Enum64, FuncProto, Typedef};
use libbpf_rs::btf::{Btf, BtfType, ReferencesType as _, TypeId};
use libbpf_rs::skel::{OpenSkel as _, SkelBuilder as _};
use libbpf_rs::{AsRawLibbpf as _, OpenObject};

use crate::common::load::libbpf::quiet_libbpf;

mod probe_skel {
    include!(concat!(env!("OUT_DIR"), "/probe.skel.rs"));
}
use probe_skel::ProbeSkelBuilder;

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// How a kernel we do not run on can attach, for a prober built from its BTF file (trial loads
/// are only possible on the running kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facilities {
    /// tp_btf (and raw_tp) programs load and attach.
    pub tp_btf: bool,
    /// fentry/fexit programs load and attach.
    pub fentry: bool,
    /// kprobes exist (CONFIG_KPROBES).
    pub kprobes: bool,
    /// Its disks' queues gather I/O statistics (writeback throttling on): the kernel stamps
    /// `rq->io_start_time_ns` when it issues a request.
    pub queue_stats: bool,
    /// Its disks keep iostats: the kernel stamps `rq->start_time_ns` when it sets up a request.
    pub iostats: bool,
}

/// A stamp the kernel may put on a request itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelStamp {
    /// `rq->io_start_time_ns`: set by blk_mq_start_request, right after block_rq_issue, on
    /// queues with QUEUE_FLAG_STATS (writeback throttling, or another statistics user).
    Issue,
    /// `rq->start_time_ns`: set when the request is set up, if iostats is on (or a scheduler
    /// needs it); what /proc/diskstats' times and iostat's await are computed from.
    Setup,
}

impl KernelStamp {
    pub fn field(self) -> &'static str {
        match self {
            KernelStamp::Issue => "io_start_time_ns",
            KernelStamp::Setup => "start_time_ns",
        }
    }
}

/// Where the answers come from.
enum Source {
    /// The running kernel: trial loads, tracefs, kallsyms.
    Live,
    /// A BTF file and what we know of that kernel.
    Described(Facilities),
}

/// What this kernel offers, learned once per run.
pub struct Prober {
    names: OnceLock<NameIndex>,
    /// The loaded modules' BTF, parsed at the first question about a function vmlinux lacks.
    /// Declared before `btf`, so dropped before it: each is split BTF on it.
    modules: OnceLock<Vec<ModuleBtf>>,
    /// The text symbols of /proc/kallsyms, read at the first question BTF cannot answer.
    kallsyms: OnceLock<KallsymsTexts>,
    tracefs: Option<PathBuf>,
    source: Source,
    btf: Btf<'static>,
}

/// One loaded module's split BTF (`/sys/kernel/btf/<module>`, on the prober's vmlinux BTF).
///
/// Parsed once per run: each question about a function vmlinux lacks (one inlined there, or
/// one of a module) read every module's BTF, and planning the block hooks asks two, each twice
/// (module_of, then has_symbol): in a 6.1 guest with 18 modules, `biolat --explain` read each
/// module's BTF 4 times and /proc/kallsyms twice, and took 2.0-2.3 s of CPU against 0.8 s on
/// 6.12, whose BTF has the function (strace and /proc/stat in the guests, 2026-11-29).
struct ModuleBtf {
    name: String,
    btf: *mut libbpf_sys::btf,
}

impl ModuleBtf {
    /// The id of the function called `name` in this module's own types.
    fn function_id(&self, name: &CStr) -> Option<u32> {
        // SAFETY: btf is a valid split BTF owned by self; name is NUL-terminated.
        let id = unsafe {
            libbpf_sys::btf__find_by_name_kind(self.btf, name.as_ptr(), libbpf_sys::BTF_KIND_FUNC)
        };
        u32::try_from(id).ok().filter(|&id| id > 0)
    }
}

impl Drop for ModuleBtf {
    fn drop(&mut self) {
        // SAFETY: parsed by btf__parse_split, owned by self alone, freed once.
        unsafe { libbpf_sys::btf__free(self.btf) }
    }
}

/// The names of /proc/kallsyms' text symbols, as hashes (8 bytes a symbol; two names of one
/// 64-bit hash among the ~10^5 symbols are a chance of about 10^-14), from one read of the
/// file: the kernel formats every symbol on each read.
struct KallsymsTexts {
    hasher: hashbrown::DefaultHashBuilder,
    names: std::collections::HashSet<u64>,
}

/// The kernel's named types by a hash of their name, built at the first lookup. libbpf's
/// btf__find_by_name compares the name with every type of vmlinux in turn, and planning
/// iostack asks for every function, tracepoint, struct field and enum it may use: those scans
/// were about a fifth of its CPU time at start (perf record of `iostack --explain` on the CI
/// host, 2026-11-25: strcmp, btf__str_by_offset and btf_find_by_name_kind). With the index,
/// `iostack --explain` (which loads and attaches) took 181 ms instead of 241 (medians of 8
/// alternating runs). A hash table of type ids (4 bytes a named type, at most half empty); the
/// names stay in the BTF. It was a sorted vector of SipHash hashes: building it was 45M of the
/// 339M instructions of `iostack --explain` and 45M of biolat's 181M (callgrind, this host,
/// 2026-11-29: SipHash 17M, the sort 20M), and a tool starts up to four times a check in the
/// kernel matrix.
struct NameIndex {
    hasher: hashbrown::DefaultHashBuilder,
    ids: hashbrown::HashTable<u32>,
}

/// A type's name as bytes; empty for an anonymous type or an id the BTF lacks.
///
/// # Safety
/// `btf` must be a valid BTF object that outlives the returned slice.
unsafe fn type_name<'a>(btf: *const libbpf_sys::btf, id: u32) -> &'a [u8] {
    let t = libbpf_sys::btf__type_by_id(btf, id);
    if t.is_null() || (*t).name_off == 0 {
        return &[];
    }
    let name = libbpf_sys::btf__name_by_offset(btf, (*t).name_off);
    if name.is_null() {
        return &[];
    }
    CStr::from_ptr(name).to_bytes()
}

impl NameIndex {
    fn build(btf: *const libbpf_sys::btf) -> NameIndex {
        let hasher = hashbrown::DefaultHashBuilder::default();
        // SAFETY: btf is the prober's own BTF object, alive for the whole call.
        let count = unsafe { libbpf_sys::btf__type_cnt(btf) };
        let mut ids = hashbrown::HashTable::with_capacity(count as usize);
        for id in 1..count {
            // SAFETY: as above; ids below btf__type_cnt are valid.
            let name = unsafe { type_name(btf, id) };
            if !name.is_empty() {
                // SAFETY: as above, for the ids already in the table.
                ids.insert_unique(hasher.hash_one(name), id, |&id| {
                    hasher.hash_one(unsafe { type_name(btf, id) })
                });
            }
        }
        NameIndex { hasher, ids }
    }

    /// The ids of the types called `name`, in id order.
    fn ids(&self, btf: *const libbpf_sys::btf, name: &str) -> impl Iterator<Item = u32> {
        let mut found: Vec<u32> = self
            .ids
            .iter_hash(self.hasher.hash_one(name.as_bytes()))
            .copied()
            // SAFETY: btf is the BTF the index was built from; a hash match is confirmed by
            // the name itself.
            .filter(|&id| unsafe { type_name(btf, id) } == name.as_bytes())
            .collect();
        found.sort_unstable();
        found.into_iter()
    }
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
            names: OnceLock::new(),
            modules: OnceLock::new(),
            kallsyms: OnceLock::new(),
            tracefs: find_tracefs(),
            source: Source::Live,
        })
    }

    /// A kernel we do not run on: its BTF (a raw BTF file or an ELF vmlinux with a .BTF
    /// section) and how it can attach. Its tracefs and kallsyms are unknown; functions are
    /// known from BTF only.
    pub fn described(btf_file: &Path, facilities: Facilities) -> Result<Prober> {
        let btf = Btf::from_path(btf_file)
            .with_context(|| format!("reading kernel BTF from {}", btf_file.display()))?;
        Ok(Prober {
            btf,
            names: OnceLock::new(),
            modules: OnceLock::new(),
            kallsyms: OnceLock::new(),
            tracefs: None,
            source: Source::Described(facilities),
        })
    }

    /// Whether this is the running kernel (not one described by a BTF file).
    pub fn is_live(&self) -> bool {
        self.facilities().is_none()
    }

    fn facilities(&self) -> Option<Facilities> {
        match self.source {
            Source::Live => None,
            Source::Described(f) => Some(f),
        }
    }

    pub fn btf(&self) -> &Btf<'static> {
        &self.btf
    }

    fn raw_btf(&self) -> *const libbpf_sys::btf {
        self.btf.as_libbpf_object().as_ptr()
    }

    /// The ids of the types called `name` in vmlinux, through the name index.
    fn ids_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = u32> + 'a {
        let btf = self.raw_btf();
        self.names
            .get_or_init(|| NameIndex::build(btf))
            .ids(btf, name)
    }

    /// The first type called `name` of the kind K.
    fn type_named<'s, K>(&'s self, name: &str) -> Option<K>
    where
        K: TryFrom<BtfType<'s>>,
    {
        let found = self
            .ids_named(name)
            .find_map(|id| self.btf.type_by_id::<K>(TypeId::from(id)));
        found
    }

    /// The id of the function called `name` in vmlinux.
    fn function_id(&self, name: &str) -> Option<u32> {
        self.ids_named(name).find(|&id| {
            self.btf
                .type_by_id::<libbpf_rs::btf::types::Func>(TypeId::from(id))
                .is_some()
        })
    }

    /// Where tracefs is mounted, if it is.
    pub fn tracefs(&self) -> Option<&Path> {
        self.tracefs.as_deref()
    }

    /// `struct <name>` has a member called `field`.
    pub fn struct_has_field(&self, name: &str, field: &str) -> bool {
        self.type_named::<Composite>(name)
            .map(|s| s.iter().any(|m| m.name.is_some_and(|n| n == field)))
            .unwrap_or(false)
    }

    /// The kernel has a function of this name in BTF (not inlined away).
    pub fn has_function(&self, name: &str) -> bool {
        self.function_id(name).is_some()
    }

    /// The kernel has this function: in BTF, or else as a text symbol in /proc/kallsyms.
    pub fn has_symbol(&self, name: &str) -> bool {
        self.has_function(name)
            || (self.facilities().is_none()
                && self.kallsyms.get_or_init(KallsymsTexts::read).has(name))
            || self.module_of(name).is_some()
    }

    /// The loaded modules' BTF, sorted by name; none for a described kernel.
    fn module_btfs(&self) -> &[ModuleBtf] {
        self.modules.get_or_init(|| {
            if self.facilities().is_some() {
                return Vec::new();
            }
            let Ok(dir) = fs::read_dir("/sys/kernel/btf") else {
                return Vec::new();
            };
            let mut names: Vec<String> = dir
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|m| m != "vmlinux")
                .collect();
            names.sort();
            let base = self.raw_btf();
            names
                .into_iter()
                .filter_map(|name| {
                    let path = CString::new(format!("/sys/kernel/btf/{name}")).ok()?;
                    // SAFETY: the path is NUL-terminated; `base` (vmlinux) outlives the split,
                    // which the prober drops first (the fields' order); libbpf returns an error
                    // pointer on failure, checked first.
                    let btf =
                        unsafe { libbpf_sys::btf__parse_split(path.as_ptr(), base as *mut _) };
                    // SAFETY: as above.
                    if btf.is_null()
                        || unsafe { libbpf_sys::libbpf_get_error(btf as *const _) } != 0
                    {
                        return None;
                    }
                    Some(ModuleBtf { name, btf })
                })
                .collect()
        })
    }

    /// The loaded module whose BTF has this function (`/sys/kernel/btf/<module>`), for functions
    /// that are not in vmlinux: filesystems (xfs, btrfs, nfs...) are often modules. Only the
    /// running kernel has module BTF to read.
    pub fn module_of(&self, function: &str) -> Option<String> {
        if self.has_function(function) {
            return None;
        }
        self.module_function(function)
            .map(|(module, _)| module.name.clone())
    }

    /// The loaded module whose BTF has this function, and the function's id there (None for a
    /// described kernel: only the running one has module BTF to read).
    fn module_function(&self, function: &str) -> Option<(&ModuleBtf, u32)> {
        if self.facilities().is_some() {
            return None;
        }
        let name = CString::new(function).ok()?;
        self.module_btfs()
            .iter()
            .find_map(|m| Some((m, m.function_id(&name)?)))
    }

    /// A function's parameters, from vmlinux BTF or, for a function of a loaded module, the
    /// module's BTF.
    pub fn signature(&self, function: &str) -> Option<Signature> {
        if let Some(id) = self.function_id(function) {
            // SAFETY: the vmlinux BTF object lives as long as self; id is one of its functions.
            return Some(Signature {
                params: unsafe { btf_params(self.raw_btf(), id) }?,
                module: None,
            });
        }
        let (module, id) = self.module_function(function)?;
        Some(Signature {
            // SAFETY: the module's BTF lives as long as self; id is one of its functions.
            params: unsafe { btf_params(module.btf, id) }?,
            module: Some(module.name.clone()),
        })
    }

    /// The kernel's BTF describes a variable of this name (per-CPU variables are there when
    /// pahole emitted them: 5.10's Debian kernel has none).
    pub fn has_variable(&self, name: &str) -> bool {
        self.type_named::<libbpf_rs::btf::types::Var>(name)
            .is_some()
    }

    /// A text symbol's address in the running kernel (kallsyms; root sees real addresses), None
    /// for a described kernel or a symbol it lacks; read in a thread of its own while the
    /// caller goes on planning (the kernel takes 40-70 ms to write /proc/kallsyms on the CI
    /// host): the returned function gives the answer.
    pub fn symbol_address_later(
        &self,
        name: &str,
    ) -> impl FnOnce() -> Option<u64> + Send + 'static {
        let name = name.to_string();
        let asked = match self.facilities() {
            None => kernel_symbol_address(&name),
            Some(_) => Ok(None),
        };
        let reader = match asked {
            Ok(_) => None,
            Err(_) => Some(std::thread::spawn(move || kallsyms_text_address(&name))),
        };
        move || match reader {
            Some(r) => r.join().ok().flatten(),
            None => asked.ok().flatten(),
        }
    }

    /// A tracepoint exists: its `btf_trace_<name>` typedef, or tracefs when BTF lacks it.
    pub fn has_tracepoint(&self, category: &str, name: &str) -> bool {
        if self
            .type_named::<Typedef>(&format!("btf_trace_{name}"))
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
        let typedef = self.type_named::<Typedef>(&format!("btf_trace_{name}"))?;
        let pointer = typedef.referenced_type().skip_mods_and_typedefs();
        let proto = FuncProto::try_from(pointer.next_type()?.skip_mods_and_typedefs()).ok()?;
        Some(proto.len().saturating_sub(1))
    }

    /// Values of an enum, from whichever of `names` the kernel has (enums get renamed).
    pub fn enum_values(&self, names: &[&str]) -> Option<Vec<(String, i128)>> {
        for name in names {
            if let Some(e) = self.type_named::<Enum>(name) {
                return Some(
                    e.iter()
                        .filter_map(|m| {
                            Some((m.name?.to_string_lossy().into_owned(), m.value as i128))
                        })
                        .collect(),
                );
            }
            if let Some(e) = self.type_named::<Enum64>(name) {
                return Some(
                    e.iter()
                        .filter_map(|m| Some((m.name?.to_string_lossy().into_owned(), m.value)))
                        .collect(),
                );
            }
        }
        None
    }

    /// Every value of the enum that holds this enumerator, named or anonymous (5.15's io_uring
    /// opcodes are an anonymous enum; 6.x names it `io_uring_op`).
    pub fn enum_holding(&self, member: &str) -> Option<Vec<(String, i128)>> {
        let wanted = std::ffi::OsStr::new(member);
        let named = |name: Option<&std::ffi::OsStr>| name.map(|n| n.to_string_lossy().into_owned());
        self.btf
            .type_by_kind::<Enum>()
            .find(|e| e.iter().any(|m| m.name == Some(wanted)))
            .map(|e| {
                e.iter()
                    .filter_map(|m| Some((named(m.name)?, m.value as i128)))
                    .collect()
            })
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

    /// The id of the typedef called `name` in vmlinux (`btf_trace_<tracepoint>`).
    fn typedef_id(&self, name: &str) -> Option<u32> {
        self.ids_named(name)
            .find(|&id| self.btf.type_by_id::<Typedef>(TypeId::from(id)).is_some())
    }

    /// A tp_btf program loads and attaches on this tracepoint.
    pub fn tp_btf_works(&self, tracepoint: &str) -> Result<(), String> {
        match self.facilities() {
            None => trial(Trial::TpBtf, tracepoint, || {
                self.typedef_id(&format!("btf_trace_{tracepoint}"))
            }),
            Some(f) => self.described_tracepoint(f, tracepoint),
        }
    }

    fn described_tracepoint(&self, f: Facilities, tracepoint: &str) -> Result<(), String> {
        if !f.tp_btf {
            return Err("this kernel does not load tp_btf programs (described)".into());
        }
        if self.tracepoint_arity(tracepoint).is_none() {
            return Err(format!("no btf_trace_{tracepoint} in this kernel's BTF"));
        }
        Ok(())
    }

    /// A raw_tp program loads and attaches on this tracepoint.
    pub fn raw_tp_works(&self, tracepoint: &str) -> Result<(), String> {
        match self.facilities() {
            None => trial(Trial::RawTp, tracepoint, || Some(0)),
            Some(f) => self.described_tracepoint(f, tracepoint),
        }
    }

    /// An fentry program loads and attaches on this function (on some kernels the verifier knows
    /// fentry but the kernel refuses it, e.g. with EPERM).
    pub fn fentry_works(&self, function: &str) -> Result<(), String> {
        if !self.has_function(function) && self.module_of(function).is_none() {
            return Err(format!(
                "{function} is not in the kernel's BTF (absent or inlined)"
            ));
        }
        match self.facilities() {
            None => trial(Trial::Fentry, function, || self.function_id(function)),
            Some(f) if f.fentry => Ok(()),
            Some(_) => Err("this kernel refuses fentry programs (described)".into()),
        }
    }

    /// kprobes can be created at all: the kprobe PMU or tracefs' kprobe_events exists.
    /// (`ProgramType::Kprobe.is_supported()` says yes on kernels built without CONFIG_KPROBES.)
    pub fn kprobes_possible(&self) -> Result<(), String> {
        match self.facilities() {
            Some(f) if f.kprobes => return Ok(()),
            Some(_) => return Err("this kernel has no kprobes (described)".into()),
            None => {}
        }
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
        if self.facilities().is_some() {
            return match self.has_symbol(function) {
                true => Ok(()),
                false => Err(format!("{function} is not in the kernel's BTF")),
            };
        }
        trial(Trial::Kprobe, function, || None)
    }

    /// Whether every queue traced (one disk, or every request-based disk) carries this stamp on
    /// its requests; Ok with the disks, or Err with the reason. From sysfs: a queue with
    /// writeback throttling attached (`queue/wbt_lat_usec` readable, even as 0: the statistics
    /// callback stays) has QUEUE_FLAG_STATS; `queue/iostats` is 1 where start_time_ns is kept.
    /// The BPF side checks every request again: one that lacks the stamp is a counted loss.
    pub fn kernel_stamp(&self, stamp: KernelStamp, disk: Option<&str>) -> Result<String, String> {
        let field = stamp.field();
        if !self.struct_has_field("request", field) {
            return Err(format!("struct request has no {field}"));
        }
        if let Some(f) = self.facilities() {
            let kept = match stamp {
                KernelStamp::Issue => f.queue_stats,
                KernelStamp::Setup => f.iostats,
            };
            return match kept {
                true => Ok("its queues keep it (described)".into()),
                false => Err("its queues do not keep it (described)".into()),
            };
        }
        let disks: Vec<String> = match disk {
            Some(d) => vec![d.to_string()],
            None => request_disks(),
        };
        let lacking: Vec<&str> = disks
            .iter()
            .filter(|d| {
                let q = Path::new("/sys/block").join(d).join("queue");
                match stamp {
                    KernelStamp::Issue => fs::read_to_string(q.join("wbt_lat_usec")).is_err(),
                    KernelStamp::Setup => read_trimmed(q.join("iostats")).as_deref() != Some("1"),
                }
            })
            .map(String::as_str)
            .collect();
        let why = match stamp {
            KernelStamp::Issue => "queue statistics (writeback throttling)",
            KernelStamp::Setup => "iostats",
        };
        if lacking.is_empty() {
            Ok(format!("{why} on {}", disks.join(", ")))
        } else {
            Err(format!("no {why} on {}", lacking.join(", ")))
        }
    }

    /// Number of arguments a function takes, from its BTF prototype (vmlinux or its module).
    pub fn function_arity(&self, name: &str) -> Option<usize> {
        self.signature(name).map(|s| s.params.len())
    }

    /// A one-line description of the attach facilities, for `--explain`.
    pub fn facts(&self) -> Vec<String> {
        if let Some(f) = self.facilities() {
            return vec![format!("a described kernel (BTF file): {f:?}")];
        }
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

/// Whole disks with request queues (bio-based ones such as zram and device-mapper emit no
/// request events), sorted.
pub fn request_disks() -> Vec<String> {
    let mut disks: Vec<String> = fs::read_dir("/sys/block")
        .map(|dir| {
            dir.flatten()
                .filter(|e| e.path().join("mq").is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    disks.sort();
    disks
}

impl KallsymsTexts {
    /// One read of /proc/kallsyms; empty if it cannot be read.
    fn read() -> KallsymsTexts {
        use std::io::BufRead;
        let hasher = hashbrown::DefaultHashBuilder::default();
        let mut names = std::collections::HashSet::new();
        if let Ok(file) = fs::File::open("/proc/kallsyms") {
            for line in std::io::BufReader::new(file).lines().map_while(|l| l.ok()) {
                if let Some((_, sym)) = kallsyms_text_line(&line) {
                    names.insert(hasher.hash_one(sym.as_bytes()));
                }
            }
        }
        KallsymsTexts { hasher, names }
    }

    /// /proc/kallsyms lists a text (function) symbol of this name.
    fn has(&self, name: &str) -> bool {
        self.names.contains(&self.hasher.hash_one(name.as_bytes()))
    }
}

/// The address /proc/kallsyms gives a text symbol, if it is listed with one (not 0: addresses
/// are hidden from non-root readers).
pub fn kallsyms_text_address(name: &str) -> Option<u64> {
    kallsyms_text(name)
        .and_then(|addr| u64::from_str_radix(&addr, 16).ok())
        .filter(|&a| a != 0)
}

/// `name`'s address as the kernel's own lookup gives it (bpf_kallsyms_lookup_name, from a
/// syscall program's test run: 5.16+, and like /proc/kallsyms' addresses only for a process the
/// kernel shows them to); Ok(None): no such symbol; Err: ask /proc/kallsyms.
fn kernel_symbol_address(name: &str) -> Result<Option<u64>, String> {
    let _quiet = quiet_libbpf();
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let skel = open_probe(&mut storage, None)?
        .load()
        .map_err(|e| e.to_string())?;
    // struct ksym_query: addr, err, name[64].
    let mut query = [0u8; 80];
    let bytes = name.as_bytes();
    if bytes.len() >= 64 {
        return Err(format!("{name}: too long a name to ask for"));
    }
    query[16..16 + bytes.len()].copy_from_slice(bytes);
    skel.progs
        .ksym_address
        .test_run(libbpf_rs::ProgramInput {
            context_in: Some(&mut query),
            ..Default::default()
        })
        .map_err(|e| e.to_string())?;
    let addr = u64::from_ne_bytes(query[0..8].try_into().unwrap_or_default());
    match i64::from_ne_bytes(query[8..16].try_into().unwrap_or_default()) {
        0 if addr != 0 => Ok(Some(addr)),
        e if e == -(libc::ENOENT as i64) => Ok(None),
        e => Err(format!("bpf_kallsyms_lookup_name: {e}")),
    }
}

fn kallsyms_text(name: &str) -> Option<String> {
    use std::io::BufRead;
    let file = fs::File::open("/proc/kallsyms").ok()?;
    std::io::BufReader::new(file)
        .lines()
        .map_while(|l| l.ok())
        .find_map(|line| {
            let (addr, sym) = kallsyms_text_line(&line)?;
            (sym == name).then(|| addr.to_string())
        })
}

/// A /proc/kallsyms line of a text (function) symbol: its address and name.
fn kallsyms_text_line(line: &str) -> Option<(&str, &str)> {
    let mut f = line.split_whitespace();
    match (f.next(), f.next(), f.next()) {
        (Some(addr), Some("t" | "T"), Some(sym)) => Some((addr, sym)),
        _ => None,
    }
}

fn find_tracefs() -> Option<PathBuf> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("events").is_dir())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Trial {
    TpBtf,
    RawTp,
    Fentry,
    Kprobe,
}

/// What the trials of this process found. The kernel's answer does not change while we run. A
/// kernel that refuses fentry with EPERM (the CI host: lockdown-like policy, not the function)
/// refuses it for every function: the first such answer stands for all.
static TRIALS: Mutex<BTreeMap<(Trial, String), Result<(), String>>> = Mutex::new(BTreeMap::new());

/// Loads (and attaches) one empty program at `target`, once per process. `vmlinux_id` gives the
/// target's id in vmlinux' BTF (0 for a raw tracepoint, which has none; None where it is not
/// there, e.g. in a module, or for a kprobe).
fn trial(
    kind: Trial,
    target: &str,
    vmlinux_id: impl FnOnce() -> Option<u32>,
) -> Result<(), String> {
    let mut known = TRIALS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = known.get(&(kind, target.to_string())) {
        return r.clone();
    }
    if kind == Trial::Fentry {
        if let Some(r) = known.get(&(kind, String::new())) {
            return r.clone();
        }
    }
    let r = match vmlinux_id() {
        Some(id) => trial_bare(kind, target, id),
        None => trial_load(kind, target),
    };
    if kind == Trial::Fentry {
        if let Err(e) = &r {
            if e.starts_with("load failed") && e.contains("os error 1)") {
                known.insert((kind, String::new()), r.clone());
            }
        }
    }
    known.insert((kind, target.to_string()), r.clone());
    r
}

/// A trial as two system calls: `r0 = 0; exit` loaded against the target's BTF id (the prober
/// already read vmlinux' BTF), then attached. A libbpf object's load reads and parses the
/// kernel's BTF again: 8-12 ms a trial, six trials in iostack's start on the CI host
/// (strace, 2026-11-26), against well under one here.
fn trial_bare(kind: Trial, target: &str, btf_id: u32) -> Result<(), String> {
    let (prog_type, attach_type) = match kind {
        Trial::TpBtf => (
            libbpf_sys::BPF_PROG_TYPE_TRACING,
            libbpf_sys::BPF_TRACE_RAW_TP,
        ),
        Trial::Fentry => (
            libbpf_sys::BPF_PROG_TYPE_TRACING,
            libbpf_sys::BPF_TRACE_FENTRY,
        ),
        Trial::RawTp => (libbpf_sys::BPF_PROG_TYPE_RAW_TRACEPOINT, 0),
        Trial::Kprobe => return trial_load(kind, target),
    };
    let insn = |code: u8| libbpf_sys::bpf_insn {
        code,
        _bitfield_align_1: [],
        _bitfield_1: libbpf_sys::bpf_insn::new_bitfield_1(0, 0),
        off: 0,
        imm: 0,
    };
    let insns = [
        insn((libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K) as u8),
        insn((libbpf_sys::BPF_JMP | libbpf_sys::BPF_EXIT) as u8),
    ];
    let opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type: attach_type,
        attach_btf_id: btf_id,
        ..Default::default()
    };
    let name = c"iostack_trial";
    let gpl = c"GPL";
    // SAFETY: two valid instructions, NUL-terminated strings and an options struct that live
    // across the call; the returned descriptor is ours to close.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            prog_type,
            name.as_ptr(),
            gpl.as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            &opts as *const _ as *mut _,
        )
    };
    if fd < 0 {
        return Err(format!(
            "load failed: {}",
            std::io::Error::from_raw_os_error(-fd)
        ));
    }
    // SAFETY: fd was just returned to us and is closed only by this OwnedFd.
    let prog = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let tracepoint = CString::new(target).map_err(|e| e.to_string())?;
    let name = match kind {
        Trial::RawTp => tracepoint.as_ptr(),
        _ => std::ptr::null(),
    };
    // SAFETY: a NUL-terminated name (or none: the program's own target) and a loaded program.
    let link = unsafe { libbpf_sys::bpf_raw_tracepoint_open(name, prog.as_raw_fd()) };
    if link < 0 {
        return Err(format!(
            "attach failed: {}",
            std::io::Error::from_raw_os_error(-link)
        ));
    }
    // SAFETY: as above; closing it detaches the trial.
    let link = unsafe { std::os::fd::OwnedFd::from_raw_fd(link) };
    TRIAL_LINKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((kind, link));
    Ok(())
}

/// The trials' links, kept until the tool's own programs are attached (release_trials): the
/// last program to leave a tracepoint turns its static key off, which patches the kernel's text
/// and waits for it (closing a trial's link took 7-20 ms, three of them 30 ms of iostack's
/// start on the CI host, 2026-11-26); with ours on the same tracepoints, leaving is cheap. An
/// empty program meanwhile costs the events a few nanoseconds.
static TRIAL_LINKS: Mutex<Vec<(Trial, std::os::fd::OwnedFd)>> = Mutex::new(Vec::new());

/// Detaches the trials, once the tool's programs are attached. A function's trampoline is
/// rebuilt without the trial's program before the tool says it traces (fentry: an ext4 count
/// was one short, once, in the run where all of them left while the first calls were timed);
/// a tracepoint's trials leave beside the tool, which goes on (a tracepoint's programs are an
/// array swapped under RCU: ours stay in both).
pub fn release_trials() {
    let links = std::mem::take(&mut *TRIAL_LINKS.lock().unwrap_or_else(|e| e.into_inner()));
    let (functions, tracepoints): (Vec<_>, Vec<_>) = links
        .into_iter()
        .partition(|(kind, _)| *kind == Trial::Fentry);
    drop(functions);
    if !tracepoints.is_empty() {
        std::thread::spawn(move || drop(tracepoints));
    }
}

/// The probe object, opened with one of its programs to load: a trial's (`Some(kind)`), or the
/// symbol lookup's (None).
fn open_probe(
    storage: &mut MaybeUninit<OpenObject>,
    only: Option<Trial>,
) -> Result<probe_skel::OpenProbeSkel<'_>, String> {
    let mut open = ProbeSkelBuilder::default()
        .open(storage)
        .map_err(|e| e.to_string())?;
    let progs = &mut open.progs;
    progs.ksym_address.set_autoload(only.is_none());
    progs.probe_fentry.set_autoload(only == Some(Trial::Fentry));
    progs.probe_tp_btf.set_autoload(only == Some(Trial::TpBtf));
    progs.probe_kprobe.set_autoload(only == Some(Trial::Kprobe));
    progs.probe_raw_tp.set_autoload(only == Some(Trial::RawTp));
    Ok(open)
}

fn trial_load(kind: Trial, target: &str) -> Result<(), String> {
    let _quiet = quiet_libbpf();
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let mut open = open_probe(&mut storage, Some(kind))?;
    let progs = &mut open.progs;
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

/// A kernel function as BTF describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// Per parameter, the name of the struct it points to (`file`, `kiocb`, `dentry`...), or
    /// None for anything else.
    pub params: Vec<Option<String>>,
    /// The module whose BTF has it; None for vmlinux.
    pub module: Option<String>,
}

/// The parameters of the function `id` in one BTF object. libbpf-rs does not wrap split
/// (module) BTF, so this reads through libbpf itself.
///
/// # Safety
/// `btf` must be a valid libbpf BTF object for the duration of the call.
unsafe fn btf_params(btf: *const libbpf_sys::btf, id: u32) -> Option<Vec<Option<String>>> {
    let func = libbpf_sys::btf__type_by_id(btf, id);
    if func.is_null() {
        return None;
    }
    let proto = libbpf_sys::btf__type_by_id(btf, (*func).__bindgen_anon_1.type_);
    if proto.is_null() {
        return None;
    }
    let vlen = ((*proto).info & 0xffff) as usize;
    // The parameters follow the FUNC_PROTO's btf_type in memory.
    let params = proto.add(1).cast::<libbpf_sys::btf_param>();
    Some(
        (0..vlen)
            .map(|i| pointee_struct(btf, (*params.add(i)).type_))
            .collect(),
    )
}

/// # Safety
/// As `btf_params`.
unsafe fn pointee_struct(btf: *const libbpf_sys::btf, type_id: u32) -> Option<String> {
    let kind = |t: *const libbpf_sys::btf_type| ((*t).info >> 24) & 0x1f;
    let ptr = libbpf_sys::btf__resolve_type(btf, type_id);
    let t = libbpf_sys::btf__type_by_id(btf, u32::try_from(ptr).ok()?);
    if t.is_null() || kind(t) != libbpf_sys::BTF_KIND_PTR {
        return None;
    }
    let target = libbpf_sys::btf__resolve_type(btf, (*t).__bindgen_anon_1.type_);
    let st = libbpf_sys::btf__type_by_id(btf, u32::try_from(target).ok()?);
    if st.is_null() || kind(st) != libbpf_sys::BTF_KIND_STRUCT {
        return None;
    }
    let name = libbpf_sys::btf__name_by_offset(btf, (*st).name_off);
    (!name.is_null()).then(|| {
        std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned()
    })
}

/// Reads a small sysfs/procfs file, trimmed.
pub fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's own lookup (a syscall program's test run) gives the address /proc/kallsyms
    /// lists, for the function iostack asks about (the CI host: 6.18, as root).
    #[test]
    fn the_kernels_symbol_lookup_gives_the_address_kallsyms_lists() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test asks the running kernel and must run as root"
        );
        let name = "blk_throtl_dispatch_work_fn";
        let listed = kallsyms_text_address(name).expect("blk-throttle in /proc/kallsyms");
        assert_eq!(kernel_symbol_address(name), Ok(Some(listed)));
        assert_eq!(kernel_symbol_address("no_such_function_here"), Ok(None));
    }
}
