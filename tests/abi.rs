//! The user-space mirrors of BPF structs must match what clang laid out, in every tool's object.

mod biolat_skel {
    include!(concat!(env!("OUT_DIR"), "/biolat.skel.rs"));
}
mod bioslower_skel {
    include!(concat!(env!("OUT_DIR"), "/bioslower.skel.rs"));
}
mod syslat_skel {
    include!(concat!(env!("OUT_DIR"), "/syslat.skel.rs"));
}

use std::mem::size_of;

use iostack::common::block::RequestBits;
use iostack::common::losses::Loss;
use iostack::common::report::hist::{RawHist, FINE_BUCKETS, LOG2_SLOTS};
use iostack::common::run::filter::BpfTaskFilter;

#[test]
fn raw_hist_matches_the_bpf_struct() {
    let h = biolat_skel::types::hist::default();
    assert_eq!(size_of::<RawHist>(), std::mem::size_of_val(&h));
    assert_eq!(h.slots.len(), LOG2_SLOTS);
    assert_eq!(h.fine.len(), FINE_BUCKETS);
}

#[test]
fn every_tool_counts_losses_in_the_one_shared_table() {
    // SAFETY: plain data of integers; all zeroes is valid.
    let biolat: biolat_skel::types::bss = unsafe { std::mem::zeroed() };
    let bioslower: bioslower_skel::types::bss = unsafe { std::mem::zeroed() };
    let syslat: syslat_skel::types::bss = unsafe { std::mem::zeroed() };
    for n in [
        biolat.losses.len(),
        bioslower.losses.len(),
        syslat.losses.len(),
    ] {
        assert_eq!(n, Loss::KERNEL.len());
    }
}

#[test]
fn shared_rodata_structs_match_their_mirrors() {
    assert_eq!(
        size_of::<bioslower_skel::types::task_filter>(),
        size_of::<BpfTaskFilter>()
    );
    assert_eq!(
        size_of::<syslat_skel::types::task_filter>(),
        size_of::<BpfTaskFilter>()
    );
    assert_eq!(
        size_of::<biolat_skel::types::rq_bits>(),
        size_of::<RequestBits>()
    );
    assert_eq!(
        size_of::<bioslower_skel::types::rq_bits>(),
        size_of::<RequestBits>()
    );
}
