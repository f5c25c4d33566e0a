//! Compiles every `src/bpf/<tool>.bpf.c` (and the benchmarks' `examples/<name>.bpf.c`) into a
//! libbpf-rs skeleton `$OUT_DIR/<name>.skel.rs`.
//!
//! The objects are independent, so they are compiled side by side, as many at a time as cargo
//! gives build scripts jobs (NUM_JOBS): one after another, the 13 objects took 16.8 s of every
//! build on the 2-CPU CI machine (cargo --timings, 2026-11-26), and every CI run builds the
//! tools four times (lints, tests, the reproducibility check, the distribution build).
//!
//! `IOSTACK_MUTANT=<NAME>` (scripts/mutants) compiles every object with `-DIOSTACK_MUTANT_<NAME>`:
//! one of the deliberate attribution faults in src/bpf, for mutation testing. Empty or unset:
//! none, and the clang command line is exactly the default one.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use libbpf_cargo::SkeletonBuilder;

/// The deliberate faults src/bpf knows (`#ifdef IOSTACK_MUTANT_<NAME>`); README, "Mutation
/// testing", says what each breaks. scripts/mutants runs them all.
const MUTANTS: &[&str] = &[
    "FLUSH_NEVER_ENDS",
    "WORKER_NOT_CARRIED",
    "HELD_OWNER_LOST",
    "SPLIT_FRONT_LOST",
    "CLONE_UNLINKED",
    "READAHEAD_NOT_OWN",
    "OWN_VIA_WAKER",
    "URING_BIO_UNLINKED",
    "URING_DEVICE_AS_QUEUE",
    "CHAIN_NOT_PASSED",
    "URING_PUNT_LOST",
    "URING_WORKER_IO_UNLINKED",
];

fn main() {
    println!("cargo:rerun-if-env-changed=IOSTACK_MUTANT");
    let mutant = env::var("IOSTACK_MUTANT").ok().filter(|m| !m.is_empty());
    if let Some(m) = &mutant {
        if !MUTANTS.contains(&m.as_str()) {
            eprintln!(
                "IOSTACK_MUTANT={m} is no mutant; the known ones: {}",
                MUTANTS.join(" ")
            );
            std::process::exit(1);
        }
        println!(
            "cargo:warning=IOSTACK_MUTANT={m}: building the BPF with a deliberate fault \
             (-DIOSTACK_MUTANT_{m}): not for use"
        );
    }
    let define = mutant.map(|m| format!("-DIOSTACK_MUTANT_{m}"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok(other) => panic!("no vmlinux.h for target arch {other}: add vmlinux/<arch>/vmlinux.h"),
        Err(_) => panic!("cargo sets CARGO_CFG_TARGET_ARCH"),
    };
    let vmlinux_dir = format!("vmlinux/{arch}");

    let mut sources: Vec<PathBuf> = ["src/bpf", "examples"]
        .iter()
        .flat_map(|dir| fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {dir}: {e}")))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();

    let jobs = env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, sources.len().max(1));
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some(source) = sources.get(next.fetch_add(1, Ordering::Relaxed)) {
                    build_skeleton(source, &vmlinux_dir, &out_dir, define.as_deref());
                }
            });
        }
    });
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=src/bpf/lib");
    println!("cargo:rerun-if-changed=examples");
    println!("cargo:rerun-if-changed={vmlinux_dir}/vmlinux.h");
}

fn build_skeleton(source: &Path, vmlinux_dir: &str, out_dir: &Path, define: Option<&str>) {
    let file = source.file_name().expect("file name").to_string_lossy();
    let tool = file.trim_end_matches(".bpf.c");
    let args = [
        "-I",
        vmlinux_dir,
        "-I",
        "src/bpf",
        "-Wall",
        "-Wno-unused-function",
        // BPF ISA v2 (kernel 4.14+): jumps on "less than" an immediate. Under v1 (clang
        // 14's default) `v < 4` compiles to `r5 = 4; if r5 > r3`, a constant in a register,
        // which 6.1's verifier cannot decide: it walks the dead branch, derives a range with
        // umin 4 > umax 3, and refuses the histogram index it feeds (iostack --per-cgroup on
        // 6.1: "R2 invalid mem access 'scalar'", 2026-11-27).
        "-mcpu=v2",
    ]
    .into_iter()
    .chain(define);
    SkeletonBuilder::new()
        .source(source)
        .clang_args(args)
        .build_and_generate(out_dir.join(format!("{tool}.skel.rs")))
        .unwrap_or_else(|err| panic!("compiling {}: {err:#}", source.display()));
}
