//! Every block I/O accounted for: what the kernel completed (/proc/diskstats) is what a block
//! tool shows plus what it reports lost, to the I/O, for both block tools watching at once.

mod support;

use support::*;

/// 80,000 reads: on the CI host (6.18), where the kernel runs no BPF program for a completion
/// that interrupts a thread of the sandbox's PID 1, a run this long loses one now and then; the
/// tools must then say so (`unseen`), never fall short in silence.
const READS: u64 = 80_000;

#[test]
fn biolat_and_bioslower_show_or_report_every_io_of_80000_reads() {
    let _g = serial();
    require_root();
    let dev = LoopDevice::new(READS * 4096 / (1 << 20) + 8);
    let biolat = Running::start("biolat", &["-j", "-d", &dev.name]);
    let bioslower = Running::start("bioslower", &["-j", "0", "-d", &dev.name]);
    let before = diskstats(&dev.name);
    dd_direct(&dev.path, READS, false);
    let after = diskstats(&dev.name);
    let (c1, biolat_out, e1) = biolat.interrupt();
    let (c2, bioslower_out, e2) = bioslower.interrupt();
    assert_eq!((c1, c2), (0, 0), "{e1} {e2}");
    let done = after.0 - before.0;
    assert_eq!(done, READS, "diskstats saw other reads on {}", dev.name);

    let reports = json_lines(&biolat_out);
    let histogram_count: u64 = reports
        .iter()
        .flat_map(|r| r["histograms"].as_array().cloned().unwrap_or_default())
        .map(|h| h["count"].as_u64().unwrap())
        .sum();
    let drops = &reports.last().expect("a biolat report")["drops"];
    let biolat_lost: u64 = drops
        .as_object()
        .expect("a drops object")
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let biolat_unseen = unseen(&biolat_out);

    let lines = json_lines(&bioslower_out);
    let events = lines.iter().filter(|v| v.get("comm").is_some()).count() as u64;
    let summary = &lines.last().expect("a bioslower summary")["summary"];
    let bioslower_lost = summary["lost"].as_u64().unwrap();
    let bioslower_unseen = unseen(&bioslower_out);

    eprintln!(
        "diskstats {done}; biolat {histogram_count} shown + {biolat_lost} lost ({drops}); \
         bioslower {events} shown + {bioslower_lost} lost ({summary})"
    );
    assert_eq!(histogram_count + biolat_lost, done, "biolat: {drops}");
    assert_eq!(events + bioslower_lost, done, "bioslower: {summary}");
    assert_eq!(summary["events"], events);
    // Nothing but unseen completions can be lost here: no I/O was in flight when tracing began,
    // and the maps and the ring buffer are far from full.
    assert_eq!(biolat_lost, biolat_unseen, "biolat: {drops}");
    assert_eq!(bioslower_lost, bioslower_unseen, "bioslower: {summary}");
    // The kernel hides a completion from every BPF program at once, not from one tool.
    assert_eq!(biolat_unseen, bioslower_unseen);
}
