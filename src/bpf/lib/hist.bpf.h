/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* In-kernel half of the latency histogram: one map lookup per event, then plain adds. */
#ifndef IOSTACK_HIST_BPF_H
#define IOSTACK_HIST_BPF_H

#include "lib/hist.h"
#include "lib/losses.bpf.h"

/* Set by user space: divides nanoseconds into the display unit of the log2 slots. */
const volatile __u64 unit_ns = 1000;
/* floor(log2(unit_ns)), set with it (Unit::lg): computing it per event costs a dozen insns. */
const volatile __u32 unit_lg = 9;

/* Double buffering: programs write into generation (hist_gen & 1); user space flips it at each
 * interval and drains the other half, so a report never races with the writers. */
volatile __u32 hist_gen;

/* A zeroed value to create histogram entries from (too big for the BPF stack). */
const struct hist zero_hist;

/* floor(log2(v)), 0 for v <= 1 */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r;
}

/* Index of the log-linear bucket holding v, given h = log2_u64(v) (see hist.h); mirrored by
 * fine_bucket_bounds() in src/common/report/hist.rs. */
static __always_inline __u32 fine_bucket_h(__u64 v, __u32 h)
{
	__u32 idx;

	if (v < (1 << HIST_SUB_BITS))
		return v;
	idx = ((h - HIST_SUB_BITS + 1) << HIST_SUB_BITS) +
	      ((v >> (h - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1));
	return idx < HIST_FINE_BUCKETS ? idx : HIST_FINE_BUCKETS - 1;
}

/* floor(log2(v / unit_ns)) without a division (slow on the hot path), given h = log2_u64(v):
 * the answer is h - unit_lg or one less. */
static __always_inline __u64 unit_log2(__u64 v, __u32 h)
{
	__u32 k;

	if (v < unit_ns)
		return 0;
	k = h - unit_lg;
	if ((unit_ns << k) > v)
		k--;
	return k;
}

/* Find or create the histogram for key in a per-CPU hash map. */
static __always_inline struct hist *hist_get(void *map, const void *key)
{
	struct hist *h = bpf_map_lookup_elem(map, key);

	if (h)
		return h;
	bpf_map_update_elem(map, key, &zero_hist, BPF_NOEXIST);
	h = bpf_map_lookup_elem(map, key);
	if (!h)
		count_loss(LOSS_HIST_FULL);
	return h;
}

/* log2 slot in the display unit, bounded */
static __always_inline __u64 hist_slot(__u64 delta_ns, __u32 h)
{
	__u64 slot = unit_log2(delta_ns, h);

	return slot < HIST_LOG2_SLOTS ? slot : HIST_LOG2_SLOTS - 1;
}

/* Record a latency in a per-CPU histogram that only one program writes: the kernel never runs a
 * program nested in itself on one CPU (it skips the nested run and counts a recursion miss), so
 * plain adds suffice, no lock prefix. */
static __always_inline void hist_record_exclusive(struct hist *h, __u64 delta_ns)
{
	__u32 lg = log2_u64(delta_ns);
	__u64 slot = hist_slot(delta_ns, lg);
	__u64 fine = fine_bucket_h(delta_ns, lg);

	h->count++;
	h->sum_ns += delta_ns;
	barrier_var(slot);
	if (slot < HIST_LOG2_SLOTS)
		h->slots[slot]++;
	barrier_var(fine);
	if (fine < HIST_FINE_BUCKETS)
		h->fine[fine]++;
	if (delta_ns > h->max_ns)
		h->max_ns = delta_ns;
}

#endif
