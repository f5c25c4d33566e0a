//! Reading BPF maps from user space, against the real kernel: a walk of a hash map in batches
//! sees every entry once.

mod support;

use std::collections::BTreeMap;

use iostack::common::load::maps::for_each_hash_entry;
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};
use support::*;

/// BPF_F_ZERO_SEED: the map's hash of a key is the same in every run, so where its buckets
/// collide is too.
const ZERO_SEED: u32 = 1 << 6;

/// A hash map of 64 buckets holding 64 entries (`u32` key `i`, `u64` value `i * 10`): many
/// buckets hold two or more, so that batches of 8 end short wherever the next bucket does not
/// fit in what is left of one.
fn crowded_hash() -> MapHandle {
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: ZERO_SEED,
        ..Default::default()
    };
    let map = MapHandle::create(MapType::Hash, Some("crowded"), 4, 8, 64, &opts)
        .expect("create a BPF hash map");
    for i in 0u32..64 {
        map.update(
            &i.to_ne_bytes(),
            &(u64::from(i) * 10).to_ne_bytes(),
            MapFlags::ANY,
        )
        .expect("fill the map");
    }
    map
}

#[test]
fn a_walk_in_batches_sees_every_entry_of_a_hash_map_once_where_libbpf_rs_stops_early() {
    require_root();
    let map = crowded_hash();
    let mut seen = BTreeMap::new();
    for_each_hash_entry(&map, 8, |k, v| {
        let key = u32::from_ne_bytes(k.try_into()?);
        *seen.entry(key).or_insert(0) += 1;
        assert_eq!(u64::from_ne_bytes(v.try_into()?), u64::from(key) * 10);
        Ok(())
    })
    .expect("walk the map");
    assert_eq!(seen.len(), 64, "{seen:?}");
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
    // libbpf-rs 0.27's iterator ends at the first batch shorter than asked for: the reason the
    // walk above exists. If this fails, libbpf-rs reads the map whole and the walk can go.
    let theirs = map
        .lookup_batch(8, MapFlags::ANY, MapFlags::ANY)
        .expect("libbpf-rs's batch lookup")
        .count();
    assert!(theirs < 64, "libbpf-rs's iterator read {theirs} of 64");
}

#[test]
fn a_walk_may_delete_what_it_was_handed_and_still_sees_the_rest() {
    require_root();
    let map = crowded_hash();
    let mut seen = 0;
    for_each_hash_entry(&map, 8, |k, _| {
        seen += 1;
        let key = u32::from_ne_bytes(k.try_into()?);
        if key % 2 == 0 {
            map.delete(k)?;
        }
        Ok(())
    })
    .expect("walk the map");
    assert_eq!(seen, 64);
    assert_eq!(map.keys().count(), 32);
}
