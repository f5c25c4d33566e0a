/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* When a request started, for tools that time requests (biolat, iostack): the kernel's own stamp
 * read at completion (rq->io_start_time_ns, or rq->start_time_ns for -Q), or a stamp of ours taken
 * at a tracepoint and kept in a map, as user space decides per traced queue
 * (src/common/block/mod.rs, plan_block_hooks: Stamps, QueueStart). Include after lib/io_seen.bpf.h. */
#ifndef IOSTACK_RQ_STARTS_BPF_H
#define IOSTACK_RQ_STARTS_BPF_H

#include "lib/blk.bpf.h"
#include "lib/io_seen.bpf.h"
#include "lib/disk_filter.bpf.h"
#include "lib/losses.bpf.h"

const volatile __u32 q_start = Q_START_OFF;
const volatile __u32 stamps = STAMPS_OURS;

/* Start time per request structure, 0 while it is not in flight. Request structures are
 * preallocated per tag and reused, so after warm-up an issue and a completion are each a lookup
 * and a store in place, with no allocation or delete (an LRU update + delete per I/O made
 * the two programs cost 690 ns per I/O here instead of 280). LRU, so structures no longer used (a
 * removed disk, a replaced scheduler's requests) age out instead of filling it. User space sizes
 * it to all request structures of the system (request_map_entries), so it never evicts one
 * in flight. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} starts SEC(".maps");

/* Our own stamp, where the kernel's is not used. keep: leave an earlier start of this life in
 * place (the -Q start, when the request is then issued). */
static __always_inline int rq_stamp(struct request *rq, bool keep, bool typed)
{
	__u64 key = (__u64)rq;
	__u64 ts, *tsp;

	if (filter_dev && !disk_selected(rq_dev(rq, typed)))
		return 0;
	/* The kernel's own accounting stamp serves -Q; the map is only needed where it is 0. */
	if (q_start == Q_START_RQ_FIELD &&
	    setup_stamp(rq, IOSTACK_GET(typed, rq, rq_flags), typed))
		return 0;
	tsp = bpf_map_lookup_elem(&starts, &key);
	if (tsp) {
		if (!keep || !*tsp)
			*tsp = bpf_ktime_get_ns();
		return 0;
	}
	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &key, &ts, BPF_ANY))
		count_loss(LOSS_START_FULL);
	return 0;
}

/* When the request that ends now started: the kernel's stamp, or ours (taken out of the map).
 * 0 if there is none. */
static __always_inline __u64 rq_start(struct request *rq, __u32 flags, bool typed)
{
	__u64 key = (__u64)rq;
	__u64 ts = 0, *tsp;

	if (stamps == STAMPS_KERNEL)
		return q_start != Q_START_OFF ? queued_stamp(rq, flags, typed) :
						issue_stamp(rq, flags, typed);
	if (q_start == Q_START_RQ_FIELD)
		ts = setup_stamp(rq, flags, typed);
	if (ts)
		return ts;
	tsp = bpf_map_lookup_elem(&starts, &key);
	if (!tsp)
		return 0;
	ts = *tsp;
	*tsp = 0;
	return ts;
}

#endif
