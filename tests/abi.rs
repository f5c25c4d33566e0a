//! The user-space mirrors of BPF structs must match what clang laid out.

mod biolat_skel {
    include!(concat!(env!("OUT_DIR"), "/biolat.skel.rs"));
}

use iostack::common::hist::{RawHist, FINE_BUCKETS, LOG2_SLOTS};

#[test]
fn raw_hist_matches_the_bpf_struct() {
    let h = biolat_skel::types::hist::default();
    assert_eq!(std::mem::size_of::<RawHist>(), std::mem::size_of_val(&h));
    assert_eq!(h.slots.len(), LOG2_SLOTS);
    assert_eq!(h.fine.len(), FINE_BUCKETS);
}

#[test]
fn drop_counters_match_the_bpf_enum() {
    let bss: biolat_skel::types::bss = unsafe { std::mem::zeroed() };
    assert_eq!(bss.drops.len(), iostack::common::bpf::DROP_NAMES.len());
}
