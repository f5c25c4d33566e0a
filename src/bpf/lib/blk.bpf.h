/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Block-layer CO-RE helpers: one binary for kernels with rq->rq_disk (< 5.17) and rq->q->disk. */
#ifndef IOSTACK_BLK_BPF_H
#define IOSTACK_BLK_BPF_H

/* Where -Q starts the clock (user space picks one from what the kernel offers:
 * src/common/blk.rs, QueueStart). */
enum q_start {
	Q_START_OFF = 0,       /* plain mode: issue -> complete */
	Q_START_EVENT = 1,     /* block_io_start tracepoint or (__)blk_account_io_start probe */
	Q_START_RQ_FIELD = 2,  /* rq->start_time_ns at completion; block_rq_insert/issue when it is 0 */
};

/* The field as it was before it moved to the request queue. */
struct request___with_rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/* Kernel-internal dev_t (major << 20 | minor), as user space computes it from sysfs. */
#define IOSTACK_MKDEV(ma, mi) (((__u32)(ma) << 20) | (__u32)(mi))

static __always_inline struct gendisk *rq_gendisk(struct request *rq)
{
	struct request___with_rq_disk *old = (void *)rq;

	if (bpf_core_field_exists(old->rq_disk))
		return BPF_CORE_READ(old, rq_disk);
	return BPF_CORE_READ(rq, q, disk);
}

static __always_inline __u32 rq_dev(struct request *rq)
{
	struct gendisk *disk = rq_gendisk(rq);

	if (!disk)
		return 0;
	return IOSTACK_MKDEV(BPF_CORE_READ(disk, major), BPF_CORE_READ(disk, first_minor));
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

static __always_inline struct gendisk *bio_gendisk(struct bio *bio)
{
	struct bio___with_bi_disk *old = (void *)bio;

	if (bpf_core_field_exists(old->bi_disk))
		return BPF_CORE_READ(old, bi_disk);
	return BPF_CORE_READ(bio, bi_bdev, bd_disk);
}

static __always_inline __u32 bio_dev(struct bio *bio)
{
	struct gendisk *disk = bio_gendisk(bio);

	if (!disk)
		return 0;
	return IOSTACK_MKDEV(BPF_CORE_READ(disk, major), BPF_CORE_READ(disk, first_minor));
}

#endif
