/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Block-layer CO-RE helpers: one binary for kernels with rq->rq_disk (< 5.17) and rq->q->disk. */
#ifndef IOSTACK_BLK_BPF_H
#define IOSTACK_BLK_BPF_H

/* Where -Q starts the clock (user space picks one from what the kernel offers:
 * src/common/block/mod.rs, QueueStart). */
enum q_start {
	Q_START_OFF = 0,       /* plain mode: issue -> complete */
	Q_START_EVENT = 1,     /* block_io_start tracepoint or (__)blk_account_io_start probe */
	Q_START_RQ_FIELD = 2,  /* rq->start_time_ns at completion; block_rq_insert/issue when it is 0 */
};

/* Where a request's start comes from (src/common/block/mod.rs, Stamps): the kernel's own stamp, read
 * at completion (rq->io_start_time_ns, set by blk_mq_start_request on queues that gather I/O
 * statistics; rq->start_time_ns for -Q, set when the request is set up if iostats is on), or a
 * stamp of ours taken at a tracepoint and kept in a map. */
enum stamps {
	STAMPS_OURS = 0,
	STAMPS_KERNEL = 1,
};

/* How a completion counts (block_rq_complete(rq, error, nr_bytes) fires in blk_update_request,
 * before the bytes are accounted). */
enum rq_end {
	COMPLETION_PARTIAL,  /* bytes remain: the request goes on (and may be requeued) */
	COMPLETION_ENDS,     /* the request ends here, with data or as the flush machinery's flush */
	COMPLETION_EMPTY,    /* a zero-byte end whose I/O was already seen (a PREFLUSH write's
			      * data step) or never issued (an empty flush the machinery served) */
};

/* REQ_OP_MASK; REQ_OP_FLUSH and RQF_FLUSH_SEQ come from user space (lib/io_seen.bpf.h). */
#define IOSTACK_REQ_OP_MASK 0xff

/* A field of a kernel struct: a plain load where the pointer is typed for the verifier (tp_btf
 * and fentry arguments, and pointers read from them), bpf_probe_read_kernel otherwise (raw_tp,
 * kprobe). `typed` is a constant in each program, so each keeps one of the two. A helper call
 * costs tens of ns with retpolines; biolat reads 8 fields per I/O. */
#define IOSTACK_GET(typed, ptr, field) ((typed) ? (ptr)->field : BPF_CORE_READ(ptr, field))

/* The field as it was before it moved to the request queue. */
struct request___with_rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/* Kernel-internal dev_t (major << 20 | minor), as user space computes it from sysfs. */
#define IOSTACK_MKDEV(ma, mi) (((__u32)(ma) << 20) | (__u32)(mi))

static __always_inline struct gendisk *rq_gendisk(struct request *rq, bool typed)
{
	struct request___with_rq_disk *old = (void *)rq;

	if (bpf_core_field_exists(old->rq_disk))
		return IOSTACK_GET(typed, old, rq_disk);
	if (typed)
		return rq->q->disk;
	return BPF_CORE_READ(rq, q, disk);
}

static __always_inline __u32 rq_dev(struct request *rq, bool typed)
{
	struct gendisk *disk = rq_gendisk(rq, typed);

	if (!disk)
		return 0;
	return IOSTACK_MKDEV(IOSTACK_GET(typed, disk, major), IOSTACK_GET(typed, disk, first_minor));
}

/* block_rq_insert/issue lost their request_queue argument in 5.11 (a54895fa, also backported to
 * 5.10.137). User space reads the arity from BTF and sets this; the untaken branch is pruned by
 * the verifier, so a two-argument read never reaches a one-argument kernel. */
const volatile bool rq_tp_single_arg = true;

/* args[first ? 0 : 1] as two fixed-offset loads: folded into one load at a computed offset, as
 * clang likes to do, it is rejected by the 5.10 verifier ("dereference of modified ctx ptr"). */
static __always_inline __u64 tp_arg0_or_1(__u64 *args, bool first)
{
	__u64 v;

	if (first) {
		v = args[0];
		barrier_var(v);
	} else {
		v = args[1];
		barrier_var(v);
	}
	return v;
}

static __always_inline struct request *rq_tp_request(__u64 *args)
{
	return (struct request *)tp_arg0_or_1(args, rq_tp_single_arg);
}

/* bio->bi_disk until 5.11, then bio->bi_bdev->bd_disk (the whole disk, also for a partition). */
struct bio___with_bi_disk {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *bio_gendisk(struct bio *bio, bool typed)
{
	struct bio___with_bi_disk *old = (void *)bio;
	struct block_device *bdev;

	if (bpf_core_field_exists(old->bi_disk))
		return IOSTACK_GET(typed, old, bi_disk);
	bdev = IOSTACK_GET(typed, bio, bi_bdev);
	return bdev ? IOSTACK_GET(typed, bdev, bd_disk) : NULL;
}

/* `typed`: bio is a pointer the verifier knows (a tp_btf argument): plain loads instead of four
 * bpf_probe_read_kernel calls, which were a quarter of block_bio_queue's time (about 200 of
 * 780 ns per O_DIRECT read on the CI host, 2026-11-26). */
static __always_inline __u32 bio_dev(struct bio *bio, bool typed)
{
	struct gendisk *disk = bio_gendisk(bio, typed);

	if (!disk)
		return 0;
	return IOSTACK_MKDEV(IOSTACK_GET(typed, disk, major), IOSTACK_GET(typed, disk, first_minor));
}

#endif
