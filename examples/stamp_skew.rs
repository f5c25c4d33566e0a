//! How far the kernel's request stamps are from our tracepoint stamps, on the same I/Os:
//! `stamp_skew DISK COUNT` attaches examples/stamp_skew.bpf.c to DISK, reads COUNT 4 KiB blocks
//! from it with O_DIRECT (dd), and prints the distribution of
//!   rq->io_start_time_ns - (our stamp at block_rq_issue)    what biolat's plain mode reads
//!   rq->start_time_ns - (our stamp at block_io_start)       what biolat -Q reads (6.5+)
//! in ns, per I/O. Both stamps come from the same clock (CLOCK_MONOTONIC); the kernel's may be
//! cached per plug since 6.9 (blk_time_get_ns), so it can be earlier than the moment.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::process::Command;
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel as _, Skel as _, SkelBuilder as _};
use libbpf_rs::RingBufferBuilder;

iostack::bpf_skeleton!("stamp_skew", skew, rq_bits);

fn fail(msg: String) -> ! {
    eprintln!("stamp_skew: {msg}");
    std::process::exit(1);
}

/// `name: n I/Os, min .. p50 .. p99 .. max ns`
fn summary(name: &str, mut v: Vec<i64>) -> String {
    if v.is_empty() {
        return format!("{name}: no I/O had both stamps");
    }
    v.sort_unstable();
    let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
    format!(
        "{name}: {} I/Os, min {} p50 {} p99 {} max {} ns",
        v.len(),
        v[0],
        q(0.5),
        q(0.99),
        v[v.len() - 1]
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(disk), Some(count)) = (args.get(1), args.get(2)) else {
        fail("usage: stamp_skew DISK COUNT".into())
    };
    let filter = iostack::common::block::disk::DiskFilter::parse(disk)
        .unwrap_or_else(|e| fail(format!("{e:#}")));
    let prober =
        iostack::common::kernel::prober::Prober::new().unwrap_or_else(|e| fail(format!("{e:#}")));
    let mut storage = MaybeUninit::uninit();
    let mut open = skel::StampSkewSkelBuilder::default()
        .open(&mut storage)
        .unwrap_or_else(|e| fail(format!("opening: {e}")));
    let rodata = open.maps.rodata_data.as_deref_mut().expect("rodata");
    rodata.dev = filter.dev;
    let bits = iostack::common::block::RequestBits::from_btf(&prober);
    iostack::common::load::copy_struct("rq_bits", &mut rodata.rq_bits, &bits)
        .unwrap_or_else(|e| fail(format!("{e:#}")));
    let has_io_start = prober.has_tracepoint("block", "block_io_start");
    open.progs.io_start.set_autoload(has_io_start);
    let mut skel = open
        .load()
        .unwrap_or_else(|e| fail(format!("loading: {e}")));
    skel.attach()
        .unwrap_or_else(|e| fail(format!("attaching: {e}")));

    let records: Rc<RefCell<Vec<skel::types::skew>>> = Rc::default();
    let sink = records.clone();
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.skews, move |data: &[u8]| {
            let mut s = skel::types::skew::default();
            if plain::copy_from_bytes(&mut s, data).is_ok() {
                sink.borrow_mut().push(s);
            }
            0
        })
        .unwrap_or_else(|e| fail(format!("ring buffer: {e}")));
    let ring = builder
        .build()
        .unwrap_or_else(|e| fail(format!("ring buffer: {e}")));

    let dd = Command::new("dd")
        .args([
            &format!("if=/dev/{disk}"),
            "of=/dev/null",
            "bs=4096",
            &format!("count={count}"),
            "iflag=direct",
        ])
        .output()
        .unwrap_or_else(|e| fail(format!("running dd: {e}")));
    if !dd.status.success() {
        fail(format!(
            "dd failed: {}",
            String::from_utf8_lossy(&dd.stderr)
        ));
    }
    let _ = ring.poll(Duration::from_millis(100));
    let _ = ring.consume();
    let all = records.borrow();
    let issue: Vec<i64> = all
        .iter()
        .filter(|s| s.has_issue != 0)
        .map(|s| s.issue_ns)
        .collect();
    let setup: Vec<i64> = all
        .iter()
        .filter(|s| s.has_setup != 0)
        .map(|s| s.setup_ns)
        .collect();
    // Runs the kernel skipped rather than nest a program in itself on one CPU (6.18 does that
    // for tp_btf too: a completion's program interrupted by another completion's, seen once
    // in the matrix's host column): such an I/O has no record, and is counted here instead.
    use std::os::fd::AsFd as _;
    // Only the two programs an I/O needs for its issue skew (a skipped block_io_start run
    // costs an I/O its setup stamp alone).
    let progs = [skel.progs.issue.as_fd(), skel.progs.complete.as_fd()];
    let skipped = iostack::common::losses::recursion_misses(progs.into_iter());
    println!("{} I/Os on {disk}, kernel {}", all.len(), prober_release());
    println!("skipped: {skipped} runs of the issue and complete programs (recursion_misses)");
    println!("{}", summary("io_start_time_ns - block_rq_issue", issue));
    if has_io_start {
        println!("{}", summary("start_time_ns - block_io_start", setup));
    } else {
        println!("start_time_ns - block_io_start: no block_io_start tracepoint on this kernel");
    }
}

fn prober_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
