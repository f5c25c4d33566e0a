/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Per disk, the request completions /proc/diskstats counts, as our programs saw them.
 *
 * User space compares these counts with /proc/diskstats (src/common/unseen.rs): whatever the
 * kernel completed that our programs never saw is reported as the named loss `unseen`. It is not
 * hypothetical: on some kernels BPF programs do not run at all for a tracepoint hit in some
 * contexts (e.g. the CI host's 6.18, for a softirq completion that interrupts a thread of the
 * sandbox's PID 1), with no recursion miss counted; see the README, "Every I/O accounted for".
 *
 * diskstats counts a request once, when it ends (blk_account_io_done), if it carries
 * RQF_IO_STAT and not RQF_FLUSH_SEQ; and a flush when the flush machinery's own flush request
 * ends (blk_account_io_flush). block_rq_complete fires just before either, in
 * blk_update_request; the completion that ends a request is the one covering all of its
 * remaining bytes (a partial completion leaves bytes behind and is not counted). Checked against
 * /proc/diskstats through ext4 fsyncs on 5.10, 6.1, 6.12 and 6.18 (tests/vm/guest/biolat.sh). */
#ifndef IOSTACK_IO_SEEN_BPF_H
#define IOSTACK_IO_SEEN_BPF_H

/* rq->rq_flags bits and the flush op, from this kernel's BTF or the constants of kernels that
 * still #define them (user space decides: src/common/blk.rs, AccountedRequests, which mirrors
 * this struct). */
struct io_seen_config {
	__u32 io_stat;          /* RQF_IO_STAT */
	__u32 flush_seq;        /* RQF_FLUSH_SEQ */
	__u32 flush_op;         /* REQ_OP_FLUSH */
	/* Kernels before the __RQF_* enum set RQF_IO_STAT on passthrough requests too, and skip
	 * them when accounting. */
	__u32 skip_passthrough;
};

const volatile struct io_seen_config io_seen_config = { .flush_op = 2 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);   /* kernel dev_t of the whole disk */
	__type(value, __u64); /* completions diskstats counts */
} io_seen SEC(".maps");

/* REQ_OP_SCSI_IN/OUT (5.10) and REQ_OP_DRV_IN/OUT: passthrough requests. */
#define IOSTACK_REQ_OP_MASK 0xff
#define IOSTACK_REQ_OP_FIRST_PASSTHROUGH 32
#define IOSTACK_REQ_OP_LAST_PASSTHROUGH 35

/* Called by a block_rq_complete program for every completion on a disk it watches. The count is
 * per CPU and only this program writes it; the kernel never runs one program nested in itself
 * on a CPU, so a plain increment is enough. */
static __always_inline void count_seen(struct request *rq, __u32 nr_bytes, __u32 dev)
{
	__u64 one = 1, *n;
	__u32 flags, op;

	if (nr_bytes < BPF_CORE_READ(rq, __data_len))
		return;
	flags = BPF_CORE_READ(rq, rq_flags);
	op = BPF_CORE_READ(rq, cmd_flags) & IOSTACK_REQ_OP_MASK;
	if (flags & io_seen_config.flush_seq) {
		/* Inside the flush machinery: only its own flush request is counted (as a flush,
		 * by blk_account_io_flush); the request that asked for it is counted when the
		 * machinery gives it back, FLUSH_SEQ cleared. */
		if (op != io_seen_config.flush_op)
			return;
	} else {
		if (!(flags & io_seen_config.io_stat))
			return;
		if (io_seen_config.skip_passthrough && op >= IOSTACK_REQ_OP_FIRST_PASSTHROUGH &&
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

#endif
