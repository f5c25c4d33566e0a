//! Compiles every `src/bpf/<tool>.bpf.c` (and the benchmarks' `examples/<name>.bpf.c`) into a
//! libbpf-rs skeleton `$OUT_DIR/<name>.skel.rs`.
use std::env;
use std::fs;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
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

    for source in &sources {
        let file = source.file_name().expect("file name").to_string_lossy();
        let tool = file.trim_end_matches(".bpf.c");
        SkeletonBuilder::new()
            .source(source)
            .clang_args([
                "-I",
                &vmlinux_dir,
                "-I",
                "src/bpf",
                "-Wall",
                "-Wno-unused-function",
            ])
            .build_and_generate(out_dir.join(format!("{tool}.skel.rs")))
            .unwrap_or_else(|err| panic!("compiling {}: {err:#}", source.display()));
    }
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=src/bpf/lib");
    println!("cargo:rerun-if-changed=examples");
    println!("cargo:rerun-if-changed={vmlinux_dir}/vmlinux.h");
}
