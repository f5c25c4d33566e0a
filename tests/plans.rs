//! Every tool's attach plan, built without root from the BTF of each kernel of the matrix (and
//! of this host), chooses the hooks the kernel matrix saw them attach (README, "Kernel matrix";
//! tests/vm/run-matrix prints the same table from real boots). The VM kernels' BTF comes out of
//! their images (tests/vm/fetch-kernels, run by scripts/test before these tests).

use std::path::PathBuf;

use iostack::common::block::StampChoice;
use iostack::common::kernel::plan::AttachPlan;
use iostack::common::kernel::prober::{Facilities, Prober};
use iostack::common::kernel::syscalls;
use iostack::common::report::hist::Unit;
use iostack::common::run::filter::TaskFilter;
use iostack::common::run::Tool;
use iostack::tools::biolat::{Biolat, BiolatOptions};
use iostack::tools::bioslower::{Bioslower, BioslowerOptions, Stage};
use iostack::tools::fnlat::{Fnlat, FnlatOptions, Layer};
use iostack::tools::iostack::{Iostack, IostackOptions};
use iostack::tools::syslat::{Syslat, SyslatOptions};
use iostack::tools::{fslat, vfslat};

/// A kernel of the matrix: where its BTF is, and how it can attach.
struct Kernel {
    name: &'static str,
    btf: PathBuf,
    facilities: Facilities,
}

/// Debian's cloud kernels have fentry and kprobes; the CI host (6.18, a sandbox VM) has neither.
fn kernels() -> Vec<Kernel> {
    let cache = std::env::var("IOSTACK_CACHE").unwrap_or_else(|_| "/var/cache/iostack".into());
    let vm = Facilities {
        tp_btf: true,
        fentry: true,
        kprobes: true,
        queue_stats: true,
        iostats: true,
    };
    let mut all: Vec<Kernel> = ["5.10", "6.1", "6.12"]
        .into_iter()
        .map(|name| Kernel {
            name,
            btf: PathBuf::from(&cache).join(format!("kernels/current-{name}/vmlinux.btf")),
            facilities: vm,
        })
        .collect();
    all.push(Kernel {
        name: "host",
        btf: PathBuf::from("/sys/kernel/btf/vmlinux"),
        facilities: Facilities {
            tp_btf: true,
            fentry: false,
            kprobes: false,
            queue_stats: true,
            iostats: true,
        },
    });
    for k in &all {
        assert!(
            k.btf.exists(),
            "{}: no BTF at {}: run tests/vm/fetch-kernels (scripts/test does) to fetch the matrix kernels and extract it",
            k.name,
            k.btf.display()
        );
    }
    all
}

fn prober(k: &Kernel) -> Prober {
    Prober::described(&k.btf, k.facilities).unwrap_or_else(|e| panic!("{}: {e:#}", k.name))
}

/// The attach point planned for a role, e.g. `tp_btf/block_rq_issue`; "none" if none.
fn role(plan: &AttachPlan, role: &str) -> String {
    plan.programs
        .iter()
        .find(|p| p.role == role)
        .map_or("none".into(), |p| p.attach_point())
}

/// A decision's text, e.g. the "disk" line.
fn decision(plan: &AttachPlan, what: &str) -> String {
    plan.decisions
        .iter()
        .find(|(w, _)| w == what)
        .map_or("none".into(), |(_, c)| c.clone())
}

/// One row of the matrix's attach-path table: the value for 5.10, 6.1, 6.12, host.
fn row(name: &str, kernel: &str, got: String, want: [&str; 4]) -> Option<String> {
    let i = ["5.10", "6.1", "6.12", "host"]
        .iter()
        .position(|k| *k == kernel)
        .unwrap();
    (!got.starts_with(want[i]))
        .then(|| format!("{kernel} {name}: planned {got}, the matrix saw {}", want[i]))
}

#[test]
fn biolat_plans_the_hooks_the_matrix_attached_on_every_kernel() {
    let mut wrong = Vec::new();
    for k in kernels() {
        let p = prober(&k);
        let plain = Biolat::plan(&p, &BiolatOptions::default()).unwrap();
        let queued = BiolatOptions {
            queued: true,
            ..Default::default()
        };
        let q = Biolat::plan(&p, &queued).unwrap();
        // Our own stamps: the two-program path, with the -Q start hook this kernel has.
        let ours = |queued| BiolatOptions {
            queued,
            stamps: StampChoice::Ours,
            ..Default::default()
        };
        let ours_plain = Biolat::plan(&p, &ours(false)).unwrap();
        let ours_q = Biolat::plan(&p, &ours(true)).unwrap();
        let (plain, q) = (plain.as_ref(), q.as_ref());
        let (ours_plain, ours_q) = (ours_plain.as_ref(), ours_q.as_ref());
        let q_programs = q.programs.len().to_string();
        let counted = "what /proc/diskstats counts: requests ending with rq_flags IO_STAT";
        let (defines, btf) = (format!("{counted} 0x2000"), format!("{counted} 0x100"));
        let rows = [
            // The kernel stamps every request on these queues: one program per I/O.
            ("issue", role(plain, "issue"), ["none"; 4]),
            (
                "complete",
                role(plain, "complete"),
                ["tp_btf/block_rq_complete"; 4],
            ),
            (
                "stamps",
                decision(plain, "stamps"),
                ["the kernel's rq->io_start_time_ns, read at completion"; 4],
            ),
            (
                "-Q stamps",
                decision(q, "stamps"),
                ["the kernel's rq->start_time_ns, read at completion"; 4],
            ),
            ("-Q programs", q_programs.clone(), ["1"; 4]),
            (
                "ours: issue",
                role(ours_plain, "issue"),
                ["tp_btf/block_rq_issue"; 4],
            ),
            (
                "q_start",
                role(ours_q, "-Q start"),
                [
                    "fentry/blk_account_io_start",
                    "tp_btf/block_rq_insert",
                    "tp_btf/block_io_start",
                    "tp_btf/block_io_start",
                ],
            ),
            (
                "disk",
                decision(plain, "disk"),
                ["rq->rq_disk", "rq->q->disk", "rq->q->disk", "rq->q->disk"],
            ),
            (
                "rq args",
                decision(plain, "rq args"),
                ["block_rq_insert/issue pass 1 argument(s)"; 4],
            ),
            (
                "counted",
                decision(plain, "counted"),
                [defines.as_str(), &defines, &btf, &btf],
            ),
        ];
        for (name, got, want) in rows {
            wrong.extend(row(name, k.name, got, want));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn bioslower_plans_its_submitter_and_submit_hooks_on_every_kernel() {
    let mut wrong = Vec::new();
    for k in kernels() {
        let p = prober(&k);
        let block = Bioslower::plan(&p, &BioslowerOptions::default()).unwrap();
        wrong.extend(row(
            "submitter",
            k.name,
            role(block.as_ref(), "submitter"),
            ["tp_btf/block_bio_queue"; 4],
        ));
        let submit = BioslowerOptions {
            stage: Stage::Submit,
            stacks: true,
            ..Default::default()
        };
        let got = match Bioslower::plan(&p, &submit) {
            Ok(plan) => format!(
                "{} + {}",
                role(plan.as_ref(), "submit"),
                role(plan.as_ref(), "submitted")
            ),
            Err(e) => format!("none ({e})"),
        };
        let fentry = "fentry/submit_bio_noacct + fexit/submit_bio_noacct";
        wrong.extend(row("submit", k.name, got, [fentry, fentry, fentry, "none"]));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn syslat_plans_sys_enter_and_sys_exit_on_every_kernel() {
    let mut wrong = Vec::new();
    for k in kernels() {
        let opts = SyslatOptions {
            ops: syscalls::select(&[], false).unwrap(),
            unit: Unit::Usecs,
            ..Default::default()
        };
        let plan = Syslat::plan(&prober(&k), &opts).unwrap();
        for (r, want) in [("enter", "tp_btf/sys_enter"), ("exit", "tp_btf/sys_exit")] {
            wrong.extend(row(r, k.name, role(&plan, r), [want; 4]));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// vfslat's and ext4lat's plans: what each operation's first function is hooked with, or why
/// the tool refuses (the matrix prints the first function of each operation).
fn fnlat_plan(k: &Kernel, name: &'static str, layer: Layer) -> Result<Vec<String>, String> {
    let opts = FnlatOptions {
        name,
        layer,
        tasks: Default::default(),
        unit: Unit::Usecs,
        per_fs: false,
        min_ns: None,
        per_cgroup: None,
    };
    let plan = Fnlat::plan(&prober(k), &opts).map_err(|e| e.to_string())?;
    Ok(layer
        .ops
        .iter()
        .map(|op| role(plan.as_ref(), op.name))
        .collect())
}

#[test]
fn vfslat_and_ext4lat_plan_fentry_on_the_vms_and_refuse_on_the_host() {
    let mut wrong = Vec::new();
    let ext4 = fslat::layer("ext4").unwrap();
    for k in kernels() {
        for (name, layer, want) in [
            (
                "vfslat",
                vfslat::VFS,
                vec![
                    ("read", "fentry/vfs_read"),
                    ("write", "fentry/vfs_write"),
                    ("fsync", "fentry/vfs_fsync_range"),
                    ("open", "fentry/vfs_open"),
                    ("getattr", "fentry/vfs_getattr"),
                ],
            ),
            (
                "ext4lat",
                ext4,
                vec![
                    ("read", "fentry/ext4_file_read_iter"),
                    ("write", "fentry/ext4_file_write_iter"),
                    ("open", "fentry/ext4_file_open"),
                    ("fsync", "fentry/ext4_sync_file"),
                    ("getattr", "fentry/ext4_file_getattr"),
                ],
            ),
        ] {
            match (k.name, fnlat_plan(&k, name, layer)) {
                ("host", Err(e)) => {
                    if !(e.contains("fentry unavailable")
                        && e.contains("kprobes unavailable")
                        && e.contains("syslat and biolat work here"))
                    {
                        wrong.push(format!("host {name}: refusal without its reasons: {e}"));
                    }
                }
                ("host", Ok(hooks)) => {
                    wrong.push(format!("host {name}: planned {hooks:?}, must refuse"))
                }
                (_, Err(e)) => wrong.push(format!("{} {name}: refused: {e}", k.name)),
                (_, Ok(hooks)) => {
                    for (op, hook) in want {
                        let i = layer.ops.iter().position(|o| o.name == op).unwrap();
                        if hooks[i] != hook {
                            wrong.push(format!(
                                "{} {name} {op}: planned {}, the matrix saw {hook}",
                                k.name, hooks[i]
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A kernel whose queues keep no stamps of their own gets the two-program path, saying why.
#[test]
fn iostack_plans_the_scheduler_the_block_layer_and_the_layers_each_kernel_has() {
    let mut wrong = Vec::new();
    for k in kernels() {
        let p = prober(&k);
        let opts = IostackOptions::new(
            TaskFilter::default(),
            None,
            Some("ext4".into()),
            false,
            None,
            None,
            Unit::Usecs,
        )
        .unwrap();
        let plan = Iostack::plan(&p, &opts).unwrap_or_else(|e| panic!("{}: {e:#}", k.name));
        let missing: Vec<&str> = plan.missing.iter().map(|m| m.layer).collect();
        let plan = plan.as_ref();
        let n = k.name;
        // No program on the machine's switches: the scheduler's accounting, and the wakeups.
        wrong.extend(row("switch", n, role(plan, "switch"), ["none"; 4]));
        wrong.extend(row("waking", n, role(plan, "waking"), ["tp_btf"; 4]));
        wrong.extend(row("wakeup", n, role(plan, "wakeup"), ["none"; 4]));
        let time = ["the scheduler's own accounting"; 4];
        wrong.extend(row("time", n, decision(plan, "time"), time));
        wrong.extend(row("complete", n, role(plan, "complete"), ["tp_btf"; 4]));
        wrong.extend(row("submitter", n, role(plan, "submitter"), ["tp_btf"; 4]));
        wrong.extend(row("exit", n, role(plan, "exit"), ["tp_btf/sys_exit"; 4]));
        let vfs = [
            "fentry/vfs_read",
            "fentry/vfs_read",
            "fentry/vfs_read",
            "none",
        ];
        wrong.extend(row("vfs-read", n, role(plan, "vfs-read"), vfs));
        let ext4 = [
            "fentry/ext4_file_read_iter",
            "fentry/ext4_file_read_iter",
            "fentry/ext4_file_read_iter",
            "none",
        ];
        wrong.extend(row("ext4-read", n, role(plan, "ext4-read"), ext4));
        // io_uring's tracepoints: 5.15's io_uring (Debian's 5.10) names no request at
        // completion; 6.4 renamed the submission; 6.13 passes the CQE.
        let submit = [
            "tp_btf/io_uring_submit_sqe",
            "tp_btf/io_uring_submit_sqe",
            "tp_btf/io_uring_submit_req",
            "tp_btf/io_uring_submit_req",
        ];
        wrong.extend(row("uring-submit", n, role(plan, "uring-submit"), submit));
        for r in ["uring-punt", "uring-complete"] {
            wrong.extend(row(r, n, role(plan, r), ["tp_btf/io_uring_"; 4]));
        }
        let layout = [
            "requests followed from the SQE consumed to the CQE posted, as their calls' operations: read READV, read READ_FIXED, read READ, write WRITEV, write WRITE_FIXED, write WRITE, sync FSYNC, sync SYNC_FILE_RANGE, open OPENAT, open OPENAT2; 5.15's io_uring",
            "requests followed from the SQE consumed to the CQE posted, as their calls' operations: read READV, read READ_FIXED, read READ, write WRITEV, write WRITE_FIXED, write WRITE, sync FSYNC, sync SYNC_FILE_RANGE, open OPENAT, open OPENAT2; 6.1's io_uring",
            "requests followed from the SQE consumed to the CQE posted, as their calls' operations: read READV, read READ_FIXED, read READ, write WRITEV, write WRITE_FIXED, write WRITE, sync FSYNC, sync SYNC_FILE_RANGE, open OPENAT, open OPENAT2; a request is known by its io_kiocb",
            "requests followed from the SQE consumed to the CQE posted, as their calls' operations: read READV, read READ_FIXED, read READ, write WRITEV, write WRITE_FIXED, write WRITE, sync FSYNC, sync SYNC_FILE_RANGE, open OPENAT, open OPENAT2; a request is known by its io_kiocb",
        ];
        wrong.extend(row("io_uring", n, decision(plan, "io_uring"), layout));
        // 6.1 added the block device's single-bio asynchronous path.
        let dio = [
            "a direct-I/O bio leads to its request, with no map: its end_io (iomap_dio_bio_end_io, blkdev_bio_end_io, addresses",
            "a direct-I/O bio leads to its request, with no map: its end_io (iomap_dio_bio_end_io, blkdev_bio_end_io, blkdev_bio_end_io_async, addresses",
            "a direct-I/O bio leads to its request, with no map: its end_io (iomap_dio_bio_end_io, blkdev_bio_end_io, blkdev_bio_end_io_async, addresses",
            "a direct-I/O bio leads to its request, with no map: its end_io (iomap_dio_bio_end_io, blkdev_bio_end_io, blkdev_bio_end_io_async, addresses",
        ];
        wrong.extend(row("request-io", n, decision(plan, "request-io"), dio));
        // Native AIO: fs/aio.c has no tracepoints; its functions where hooks work, not on the
        // host (its line of the report says so).
        let setup = [
            "fentry/aio_read",
            "fentry/aio_read",
            "fentry/aio_read",
            "none",
        ];
        wrong.extend(row("aio-setup", n, role(plan, "aio-setup"), setup));
        let failed = ["fexit/aio_read", "fexit/aio_read", "fexit/aio_read", "none"];
        wrong.extend(row(
            "aio-setup-failed",
            n,
            role(plan, "aio-setup-failed"),
            failed,
        ));
        let done = [
            "fentry/aio_complete",
            "fentry/aio_complete",
            "fentry/aio_complete",
            "none",
        ];
        wrong.extend(row("aio-complete", n, role(plan, "aio-complete"), done));
        let followed = "native AIO's iocbs followed from their setup in io_submit to their completion event, as their calls' operations: read PREAD, read PREADV, write PWRITE, write PWRITEV, sync FSYNC, sync FDSYNC";
        let aio = [
            followed,
            followed,
            followed,
            "native AIO (io_submit) is not followed: fs/aio.c has no tracepoints, and its functions cannot be hooked here",
        ];
        wrong.extend(row("aio", n, decision(plan, "aio"), aio));
        let unfollowed: Vec<&str> = Iostack::plan(&p, &opts)
            .unwrap()
            .unfollowed
            .iter()
            .map(|(i, _)| *i)
            .collect();
        let want: &[&str] = if n == "host" { &["aio"] } else { &[] };
        if unfollowed != want {
            wrong.push(format!(
                "{n}: interfaces not followed {unfollowed:?}, want {want:?}"
            ));
        }
        // prev_state became sched_switch's fourth argument in 5.18.
        let state = [
            "sched_switch has no prev_state",
            "sched_switch passes prev_state",
            "sched_switch passes prev_state",
            "sched_switch passes prev_state",
        ];
        let validator = IostackOptions {
            shadow_switches: true,
            ..opts.clone()
        };
        let shadow = Iostack::plan(&p, &validator).unwrap_or_else(|e| panic!("{n}: {e:#}"));
        let shadow = shadow.as_ref();
        wrong.extend(row("switch state", n, decision(shadow, "switch"), state));
        for r in ["switch", "waking", "wakeup"] {
            wrong.extend(row(r, n, role(shadow, r), ["tp_btf"; 4]));
        }
        let hooks = k.facilities.fentry || k.facilities.kprobes;
        if hooks != missing.is_empty() {
            wrong.push(format!(
                "{n}: layers missing {missing:?} where function hooks are {hooks}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn queues_without_stamps_get_our_stamps_and_the_issue_program() {
    let mut k = kernels().pop().unwrap();
    k.facilities.queue_stats = false;
    k.facilities.iostats = false;
    let p = prober(&k);
    for queued in [false, true] {
        let opts = BiolatOptions {
            queued,
            ..Default::default()
        };
        let plan = Biolat::plan(&p, &opts).unwrap();
        let plan = plan.as_ref();
        assert_eq!(role(plan, "issue"), "tp_btf/block_rq_issue");
        let stamps = decision(plan, "stamps");
        assert!(
            stamps.starts_with("ours, kept in a map: the kernel's rq->")
                && stamps.contains("is not kept"),
            "{stamps}"
        );
        let block = BioslowerOptions {
            queued,
            ..Default::default()
        };
        let block = Bioslower::plan(&p, &block).unwrap();
        assert_eq!(role(block.as_ref(), "issue"), "tp_btf/block_rq_issue");
    }
}

/// Without fentry and kprobes (this host), a submit-stage plan is refused with both reasons.
#[test]
fn a_kernel_without_function_hooks_refuses_the_submit_stage_saying_why() {
    let host = kernels().pop().unwrap();
    let opts = BioslowerOptions {
        stage: Stage::Submit,
        ..Default::default()
    };
    let err = Bioslower::plan(&prober(&host), &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("fentry unavailable") && err.contains("kprobes unavailable"),
        "{err}"
    );
}

/// A plan that names a program the object lacks is refused when applied, instead of loading
/// nothing and reporting success.
#[test]
fn a_plan_naming_a_program_the_object_lacks_is_refused() {
    use libbpf_rs::skel::{OpenSkel as _, SkelBuilder as _};
    mod skel {
        include!(concat!(env!("OUT_DIR"), "/biolat.skel.rs"));
    }
    let mut plan = AttachPlan::new("biolat");
    plan.add(
        "issue",
        "isue_btf",
        iostack::common::kernel::plan::Flavor::TpBtf,
        "block_rq_issue",
        "a typo",
    );
    let mut storage = std::mem::MaybeUninit::uninit();
    let mut open = skel::BiolatSkelBuilder::default()
        .open(&mut storage)
        .expect("opening needs no privilege");
    let err = plan.apply(open.open_object_mut()).unwrap_err().to_string();
    assert!(
        err.contains("names program isue_btf") && err.contains("does not have"),
        "{err}"
    );
}

#[test]
fn rastat_plans_the_hooks_the_matrix_attached_on_every_kernel() {
    use iostack::tools::rastat::plan::plan;
    let mut wrong = Vec::new();
    for k in kernels() {
        let p = plan(&prober(&k)).unwrap_or_else(|e| panic!("{}: {e:#}", k.name));
        let rows: [(&str, [&str; 4]); 5] = [
            (
                "window",
                [
                    "fentry/page_cache_ra_unbounded",
                    "fentry/page_cache_ra_unbounded",
                    "fentry/page_cache_ra_unbounded",
                    "tp_btf/page_cache_ra_unbounded",
                ],
            ),
            ("added", ["tp_btf/mm_filemap_add_to_page_cache"; 4]),
            (
                "read",
                [
                    "fentry/mark_page_accessed",
                    "fentry/folio_mark_accessed",
                    "fentry/folio_mark_accessed",
                    "tp_btf/mm_filemap_get_pages",
                ],
            ),
            ("read start", ["none", "none", "none", "tp_btf/sys_enter"]),
            (
                "fault",
                [
                    "fentry/filemap_fault",
                    "fentry/filemap_fault",
                    "tp_btf/mm_filemap_fault",
                    "tp_btf/mm_filemap_fault",
                ],
            ),
        ];
        for (name, want) in rows {
            wrong.extend(row(name, k.name, role(&p.plan, name), want));
        }
        // 5.10's page_cache_sync_ra(ractl, ra, req_count); later (ractl, req_count).
        let want_arg = if k.name == "5.10" { 2 } else { 1 };
        if k.name != "host" && p.sync_req_arg != want_arg {
            wrong.push(format!(
                "{}: req_count is argument {}, want {want_arg}",
                k.name, p.sync_req_arg
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
