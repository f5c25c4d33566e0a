// SPDX-License-Identifier: GPL-2.0
/* stamp_skew: for each request on one disk, how far the kernel's own stamps are from the ones our
 * tracepoint programs take: rq->io_start_time_ns against block_rq_issue, rq->start_time_ns
 * against block_io_start (6.5+; 0 where that tracepoint does not exist), each only where the
 * request's flags say the kernel stamped this life of it (lib/io_seen.bpf.h). One record per request
 * that ends with data, through a ring buffer (examples/stamp_skew.rs prints the distribution). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/blk.bpf.h"
#include "lib/io_seen.bpf.h"

const volatile __u32 dev = 0;

struct skew {
	__s64 issue_ns;  /* rq->io_start_time_ns - our block_rq_issue stamp; 0: either missing */
	__s64 setup_ns;  /* rq->start_time_ns - our block_io_start stamp; 0: either missing */
	__u32 has_issue; /* both issue stamps were there */
	__u32 has_setup; /* both setup stamps were there */
};

struct skew _skew = {};

struct ours {
	__u64 issue;
	__u64 setup;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct ours);
} stamps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} skews SEC(".maps");

static __always_inline struct ours *ours_of(struct request *rq)
{
	struct ours zero = {};
	__u64 key = (__u64)rq;

	if (rq_dev(rq, true) != dev)
		return NULL;
	bpf_map_update_elem(&stamps, &key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&stamps, &key);
}

SEC("tp_btf/block_io_start")
int BPF_PROG(io_start, struct request *rq)
{
	struct ours *o = ours_of(rq);

	if (o)
		o->setup = bpf_ktime_get_ns();
	return 0;
}

/* The request is the only argument on every kernel the matrix runs (5.10.137+). */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(issue, struct request *rq)
{
	struct ours *o = ours_of(rq);

	if (o)
		o->issue = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct ours *o;
	struct skew *s;

	if (!nr_bytes || nr_bytes < rq->__data_len || rq_dev(rq, true) != dev)
		return 0;
	o = bpf_map_lookup_elem(&stamps, &key);
	if (!o)
		return 0;
	s = bpf_ringbuf_reserve(&skews, sizeof(*s), 0);
	if (s) {
		__u64 issue = issue_stamp(rq, rq->rq_flags, true);
		__u64 setup = setup_stamp(rq, rq->rq_flags, true);

		s->has_issue = o->issue && issue;
		s->has_setup = o->setup && setup;
		s->issue_ns = s->has_issue ? (__s64)(issue - o->issue) : 0;
		s->setup_ns = s->has_setup ? (__s64)(setup - o->setup) : 0;
		bpf_ringbuf_submit(s, 0);
	}
	bpf_map_delete_elem(&stamps, &key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
