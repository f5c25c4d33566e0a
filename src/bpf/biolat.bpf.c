// SPDX-License-Identifier: GPL-2.0
/* biolat: block I/O latency, issue (or OS accounting start with -Q) to completion. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/hist.bpf.h"
#include "lib/losses.bpf.h"
#include "lib/disk_filter.bpf.h"
#include "lib/blk.bpf.h"
#include "lib/io_seen.bpf.h"
#include "biolat.h"

const volatile __u32 q_start = Q_START_OFF;
const volatile __u32 stamps = STAMPS_OURS;
const volatile bool per_disk = false;
const volatile __u32 flags_mask = 0;

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2048);
	__type(key, struct biolat_key);
	__type(value, struct hist);
} hists SEC(".maps");

/* Our own stamp, where the kernel's is not used. keep: leave an earlier start of this life in
 * place (the -Q start, when the request is then issued). */
static __always_inline int stamp(struct request *rq, bool keep, bool typed)
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

/* First sighting of a request in -Q mode: overwrite whatever a previous life of it left. */
static __always_inline int on_queue_start(struct request *rq, bool typed)
{
	return stamp(rq, false, typed);
}

static __always_inline int on_issue(struct request *rq, bool typed)
{
	return stamp(rq, q_start != Q_START_OFF, typed);
}

/* When the request that ends now started: the kernel's stamp, or ours (taken out of the map).
 * 0 if there is none. */
static __always_inline __u64 request_start(struct request *rq, __u32 flags, bool typed)
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

/* A request is recorded once, when it ends (the completion covering its last bytes). */
static __always_inline int on_complete(struct request *rq, __u32 nr_bytes, bool typed)
{
	__u32 dev = rq_dev(rq, typed);
	__u32 flags, cmd;
	struct biolat_key hk = {};
	struct hist *h;
	__u64 ts, now;

	if (!request_ended(rq, dev, nr_bytes, typed, &flags, &cmd))
		return 0;
	ts = request_start(rq, flags, typed);
	if (!ts) {
		count_loss(LOSS_NO_START);
		return 0;
	}
	now = bpf_ktime_get_ns();
	if (ts > now) {
		count_loss(LOSS_CLOCK);
		return 0;
	}
	hk.gen = hist_gen & 1;
	if (per_disk)
		hk.dev = dev;
	hk.flags = cmd & flags_mask;
	h = hist_get(&hists, &hk);
	/* Only this program writes the histograms, and the kernel never runs it nested in itself
	 * on one CPU (a nested run is skipped, and then shows as unseen): plain adds. */
	if (h)
		hist_record_exclusive(h, now - ts);
	return 0;
}

#include "lib/blk_hooks.bpf.h"

char LICENSE[] SEC("license") = "GPL";
