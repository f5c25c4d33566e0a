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
#include "lib/rq_starts.bpf.h"
#include "lib/io_charge.bpf.h"
#include "biolat.h"

const volatile bool per_disk = false;
const volatile __u32 flags_mask = 0;
/* Both latencies in one program (the exporter's two block families): issue to completion, and
 * from the OS's accounting start (key.queued = 1), both from the kernel's own stamps on the
 * request; user space sets it only where the traced queues keep both (stamps == KERNEL). */
const volatile bool also_queued = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2048);
	__type(key, struct biolat_key);
	__type(value, struct hist);
} hists SEC(".maps");

/* --per-cgroup: sized by user space; `hists` is then `other`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct biolat_key);
	__type(value, struct hist);
} cgroup_hists SEC(".maps");

/* With --cgroup charged to submitters: only theirs are recorded (lib/io_charge.bpf.h). */
static __always_inline bool bio_origin_call(struct bio_origin *o)
{
	return o->in_cgroup;
}

/* First sighting of a request in -Q mode: overwrite whatever a previous life of it left. */
static __always_inline int on_queue_start(struct request *rq, bool typed)
{
	return rq_stamp(rq, false, typed);
}

static __always_inline int on_issue(struct request *rq, bool typed)
{
	return rq_stamp(rq, q_start != Q_START_OFF, typed);
}

/* One latency into key's histogram, or its cgroup's (--per-cgroup) where there is room. Only
 * this program writes the histograms, and the kernel never runs it nested in itself on one CPU
 * (a nested run is skipped, and then shows as unseen): plain adds. */
static __always_inline void record(struct biolat_key *hk, __u64 cgroup, __u64 delta)
{
	struct hist *h = NULL;

	if (cgroup) {
		hk->cgroup = cgroup;
		h = cgroup_hist(&cgroup_hists, hk);
		hk->cgroup = 0;
	}
	if (!h)
		h = hist_get(&hists, hk);
	if (h)
		hist_record_exclusive(h, delta);
}

/* A request is recorded once, when it ends (the completion covering its last bytes). */
static __always_inline int on_complete(struct request *rq, __u32 nr_bytes, bool typed,
				       void *ctx)
{
	__u32 dev = rq_dev(rq, typed);
	__u32 flags, cmd;
	struct biolat_key hk = {};
	__u64 ts, now, cgroup = 0;

	if (!request_ended(rq, dev, nr_bytes, typed, &flags, &cmd))
		return 0;
	if ((task_filter.cgroup_id || per_cgroup_depth) &&
	    !request_owner((__u64)IOSTACK_GET(typed, rq, bio), &cgroup))
		return 0;
	ts = rq_start(rq, flags, typed);
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
	record(&hk, cgroup, now - ts);
	if (also_queued) {
		ts = queued_stamp(rq, flags, typed);
		if (!ts) {
			count_loss(LOSS_NO_START);
			return 0;
		}
		if (ts > now) {
			count_loss(LOSS_CLOCK);
			return 0;
		}
		hk.queued = 1;
		record(&hk, cgroup, now - ts);
	}
	return 0;
}

#include "lib/blk_hooks.bpf.h"

char LICENSE[] SEC("license") = "GPL";
