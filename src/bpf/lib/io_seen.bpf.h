/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Per disk, the request completions /proc/diskstats counts, as our programs saw them.
 *
 * User space compares these counts with /proc/diskstats (src/common/block/unseen.rs): whatever the
 * kernel completed that our programs never saw is reported as the named loss `unseen`. It is not
 * hypothetical: on some kernels BPF programs do not run at all for a tracepoint hit in some
 * contexts (e.g. the CI host's 6.18, for a softirq completion that interrupts a thread of the
 * sandbox's PID 1), with no recursion miss counted; see the README, "Every block I/O accounted for".
 *
 * diskstats counts a request once, when it ends (blk_account_io_done), if it carries
 * RQF_IO_STAT and not RQF_FLUSH_SEQ; and a flush when the flush machinery's own flush request
 * ends (blk_account_io_flush). block_rq_complete fires just before either, in
 * blk_update_request; the completion that ends a request is the one covering all of its
 * remaining bytes (a partial completion leaves bytes behind and is not counted). Checked against
 * /proc/diskstats through ext4 fsyncs on 5.10, 6.1, 6.12 and 6.18 (tests/vm/guest/biolat.sh). */
#ifndef IOSTACK_IO_SEEN_BPF_H
#define IOSTACK_IO_SEEN_BPF_H

#include "lib/blk.bpf.h"
#include "lib/disk_filter.bpf.h"

/* rq->rq_flags bits and the flush op, from this kernel's BTF or the constants of kernels that
 * still #define them (user space decides: src/common/block/mod.rs, RequestBits, which mirrors this
 * struct). */
struct rq_bits {
	__u32 io_stat;          /* RQF_IO_STAT: counted in /proc/diskstats; start_time_ns stamped */
	__u32 flush_seq;        /* RQF_FLUSH_SEQ */
	__u32 stats;            /* RQF_STATS: io_start_time_ns stamped at issue */
	__u32 flush_op;         /* REQ_OP_FLUSH */
	/* Kernels before the __RQF_* enum set RQF_IO_STAT on passthrough requests too, and skip
	 * them when accounting. */
	__u32 skip_passthrough;
};

const volatile struct rq_bits rq_bits = { .flush_op = 2 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);   /* kernel dev_t of the whole disk */
	__type(value, __u64); /* completions diskstats counts */
} io_seen SEC(".maps");

/* REQ_OP_SCSI_IN/OUT (5.10) and REQ_OP_DRV_IN/OUT: passthrough requests. */
#define IOSTACK_REQ_OP_FIRST_PASSTHROUGH 32
#define IOSTACK_REQ_OP_LAST_PASSTHROUGH 35

/* The kernel's own stamps on a request, 0 where it did not stamp this life of the request: a
 * stamp is fresh only with the flag set together with it (without it the field may hold a stale
 * value from an earlier life; seen on 6.18 with iostats off). */
static __always_inline __u64 issue_stamp(struct request *rq, __u32 flags, bool typed)
{
	return (flags & rq_bits.stats) ? IOSTACK_GET(typed, rq, io_start_time_ns) : 0;
}

static __always_inline __u64 setup_stamp(struct request *rq, __u32 flags, bool typed)
{
	return (flags & rq_bits.io_stat) ? IOSTACK_GET(typed, rq, start_time_ns) : 0;
}

/* -Q's start from the kernel's stamps: the setup stamp, or the issue stamp where that is older.
 * Since 6.9 blk_time_get_ns() returns a time cached per plug, so the issue stamp can predate the
 * setup stamp by a few hundred ns (measured: examples/stamp_skew); taking the earlier keeps -Q at
 * least as long as plain mode for every I/O. The flush machinery's own flush request is made at
 * dispatch (blk_kick_flush) without RQF_IO_STAT, so it has no setup stamp and no OS queue of its
 * own: it starts at its issue (seen in the matrix: 4 flushes of 3 ext4 fsyncs were lost starts
 * on 6.1 before). 0 (a lost start, counted) for any other request without a setup stamp. */
static __always_inline __u64 queued_stamp(struct request *rq, __u32 flags, bool typed)
{
	__u64 setup = setup_stamp(rq, flags, typed), issue = issue_stamp(rq, flags, typed);

	if (!setup)
		return (flags & rq_bits.flush_seq) ? issue : 0;
	return issue && issue < setup ? issue : setup;
}

/* What a completion is, from block_rq_complete's nr_bytes and the request as it is then. The
 * flush machinery's own flush request carries no data but is issued to the device: it ends with
 * zero bytes and is an I/O of its own. */
static __always_inline enum rq_end classify(__u32 nr_bytes, __u32 data_len, __u32 flags,
						 __u32 op)
{
	if (nr_bytes < data_len)
		return COMPLETION_PARTIAL;
	if (nr_bytes || ((flags & rq_bits.flush_seq) && op == rq_bits.flush_op))
		return COMPLETION_ENDS;
	return COMPLETION_EMPTY;
}

/* Called by a block_rq_complete program for every completion that is not partial, on a disk it
 * watches. The count is per CPU and only this program writes it; the kernel never runs one
 * program nested in itself on a CPU, so a plain increment is enough. */
static __always_inline void count_seen(__u32 dev, __u32 flags, __u32 op)
{
	__u64 one = 1, *n;

	if (flags & rq_bits.flush_seq) {
		/* Inside the flush machinery: only its own flush request is counted (as a flush,
		 * by blk_account_io_flush); the request that asked for it is counted when the
		 * machinery gives it back, FLUSH_SEQ cleared. */
		if (op != rq_bits.flush_op)
			return;
	} else {
		if (!(flags & rq_bits.io_stat))
			return;
		if (rq_bits.skip_passthrough && op >= IOSTACK_REQ_OP_FIRST_PASSTHROUGH &&
		    op <= IOSTACK_REQ_OP_LAST_PASSTHROUGH)
			return;
	}
	n = bpf_map_lookup_elem(&io_seen, &dev);
	if (n) {
		(*n)++;
		return;
	}
	/* A disk's first completion. Another CPU may create the entry first (then count into
	 * it); if the map is full the completion goes uncounted and shows as unseen: a loss is
	 * over-reported, never hidden. */
	if (!bpf_map_update_elem(&io_seen, &dev, &one, BPF_NOEXIST))
		return;
	n = bpf_map_lookup_elem(&io_seen, &dev);
	if (n)
		(*n)++;
}

/* What every block_rq_complete program does first: on a watched disk, a completion that ends
 * its request is counted as diskstats counts it. True when it ends an I/O to record (its flags
 * and cmd_flags then in *flags and *cmd); false for another disk, a partial completion (the
 * request goes on: it is recorded when it ends) or an empty one. */
static __always_inline bool request_ended(struct request *rq, __u32 dev, __u32 nr_bytes, bool typed,
					  __u32 *flags, __u32 *cmd)
{
	enum rq_end kind;
	__u32 op;

	if (!disk_selected(dev))
		return false;
	*flags = IOSTACK_GET(typed, rq, rq_flags);
	*cmd = IOSTACK_GET(typed, rq, cmd_flags);
	op = *cmd & IOSTACK_REQ_OP_MASK;
	kind = classify(nr_bytes, IOSTACK_GET(typed, rq, __data_len), *flags, op);
	if (kind == COMPLETION_PARTIAL)
		return false;
	count_seen(dev, *flags, op);
	return kind == COMPLETION_ENDS;
}

#endif
