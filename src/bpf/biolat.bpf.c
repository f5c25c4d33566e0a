// SPDX-License-Identifier: GPL-2.0
/* biolat: block I/O latency, issue (or OS accounting start with -Q) to completion. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "hist.bpf.h"
#include "blk.bpf.h"
#include "biolat.h"

const volatile __u32 q_start = Q_START_OFF;
const volatile bool filter_disk = false;
const volatile __u32 filter_dev = 0;
const volatile bool per_disk = false;
const volatile __u32 flags_mask = 0;

/* Start time per in-flight request. LRU, so requests that never complete (merged away, or in
 * flight when we detach) cannot fill it; entries are also deleted at completion. */
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

static __always_inline bool disk_selected(struct request *rq)
{
	return !filter_disk || rq_dev(rq) == filter_dev;
}

static __always_inline int stamp(struct request *rq, __u64 flags)
{
	__u64 key = (__u64)rq;
	__u64 ts;

	if (!disk_selected(rq))
		return 0;
	/* The kernel's own accounting stamp serves -Q; the map is only needed where it is 0. */
	if (q_start == Q_START_RQ_FIELD && BPF_CORE_READ(rq, start_time_ns))
		return 0;
	ts = bpf_ktime_get_ns();
	/* BPF_NOEXIST keeps an earlier -Q start; failing then is expected, not a drop. */
	if (bpf_map_update_elem(&starts, &key, &ts, flags) && flags == BPF_ANY)
		count_drop(DROP_START_FULL);
	return 0;
}

/* First sighting of a request in -Q mode: overwrite whatever a previous life of it left. */
static __always_inline int on_queue_start(struct request *rq)
{
	return stamp(rq, BPF_ANY);
}

static __always_inline int on_issue(struct request *rq)
{
	return stamp(rq, q_start == Q_START_OFF ? BPF_ANY : BPF_NOEXIST);
}

static __always_inline int on_complete(struct request *rq)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 key = (__u64)rq;
	struct biolat_key hk = {};
	struct hist *h;
	__u64 ts = 0, *tsp;

	if (q_start == Q_START_RQ_FIELD) {
		ts = BPF_CORE_READ(rq, start_time_ns);
		if (ts && !disk_selected(rq))
			return 0;
	}
	if (!ts) {
		tsp = bpf_map_lookup_elem(&starts, &key);
		if (!tsp) {
			if (disk_selected(rq))
				count_drop(DROP_NO_START);
			return 0;
		}
		ts = *tsp;
		bpf_map_delete_elem(&starts, &key);
	}
	if (ts > now) {
		count_drop(DROP_CLOCK);
		return 0;
	}

	hk.gen = hist_gen & 1;
	if (per_disk)
		hk.dev = rq_dev(rq);
	if (flags_mask)
		hk.flags = BPF_CORE_READ(rq, cmd_flags) & flags_mask;
	h = hist_get(&hists, &hk);
	if (h)
		hist_record(h, now - ts);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int issue_btf(__u64 *ctx)
{
	return on_issue(rq_tp_request(ctx));
}

SEC("raw_tp/block_rq_issue")
int issue_raw(struct bpf_raw_tracepoint_args *ctx)
{
	return on_issue(rq_tp_request(ctx->args));
}

SEC("tp_btf/block_rq_complete")
int complete_btf(__u64 *ctx)
{
	return on_complete((struct request *)ctx[0]);
}

SEC("raw_tp/block_rq_complete")
int complete_raw(struct bpf_raw_tracepoint_args *ctx)
{
	return on_complete((struct request *)ctx->args[0]);
}

/* -Q start points, best first; user space loads exactly one of them. */
SEC("tp_btf/block_io_start")
int io_start_btf(__u64 *ctx)
{
	return on_queue_start((struct request *)ctx[0]);
}

SEC("raw_tp/block_io_start")
int io_start_raw(struct bpf_raw_tracepoint_args *ctx)
{
	return on_queue_start((struct request *)ctx->args[0]);
}

/* Retargeted by user space to __blk_account_io_start where that is the attachable name. */
SEC("fentry/blk_account_io_start")
int BPF_PROG(account_start_fentry, struct request *rq)
{
	return on_queue_start(rq);
}

SEC("kprobe/blk_account_io_start")
int BPF_KPROBE(account_start_kprobe, struct request *rq)
{
	return on_queue_start(rq);
}

/* With Q_START_RQ_FIELD, covers requests whose rq->start_time_ns is 0 (queue without iostats). */
SEC("tp_btf/block_rq_insert")
int insert_btf(__u64 *ctx)
{
	return on_queue_start(rq_tp_request(ctx));
}

SEC("raw_tp/block_rq_insert")
int insert_raw(struct bpf_raw_tracepoint_args *ctx)
{
	return on_queue_start(rq_tp_request(ctx->args));
}

char LICENSE[] SEC("license") = "GPL";
