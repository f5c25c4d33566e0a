/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Where a call's time went, the layout shared by lib/breakdown.bpf.h and user space
 * (src/tools/iostack/breakdown.rs). Every nanosecond of a call is in exactly one part. */
#ifndef IOSTACK_BREAKDOWN_H
#define IOSTACK_BREAKDOWN_H

enum part {
	PART_CPU = 0,        /* running */
	PART_RUN_QUEUE = 1,  /* runnable, waiting for a CPU (woken, or preempted) */
	PART_IO_QUEUE = 2,   /* waiting for block I/O it submitted, before and around the device:
			      * throttled, queued, completing */
	PART_IO_DEVICE = 3,  /* waiting for block I/O it submitted, while the device has it */
	PART_OTHERS_IO = 4,  /* waiting for I/O someone else submitted (a page under readahead,
			      * the journal's commit, writeback), or that the kernel calls I/O
			      * (in_iowait) with no request seen */
	PART_SLEEP = 5,      /* any other sleep: locks, pipes, journal waits that are not I/O */
	PARTS = 6,
};

/* How a call came to wait for a block I/O. */
enum req_how {
	REQ_OWN = 1,        /* its thread submitted it, or the kernel did for it */
	REQ_HELD = 2,       /* blk-throttle's dispatcher queued it, its submitter unseen (no
			     * function hooks here), and its completion ended the call's I/O wait:
			     * taken for the call's own */
	REQ_OTHERS = 3,     /* its completion woke the call; someone else submitted it */
};

/* Kinds of requests, for the count of those no traced call waited for. */
enum req_kind {
	KIND_READ = 0,
	KIND_READAHEAD = 1,
	KIND_WRITE = 2,
	KIND_FLUSH = 3,
	KIND_DISCARD = 4,
	KIND_OTHER = 5,
	KINDS = 6,
};

#define BREAKDOWN_COMM_LEN 16

/* One block I/O a call waited for. */
struct req_seen {
	__u64 sector;
	__u64 queue_ns;    /* from entering the block layer to issue (0 if unknown), less held_ns */
	__u64 device_ns;   /* on the device: issue to completion, or its data step and the flushes
			    * made for it (0 if the issue was not stamped) */
	__u64 held_ns;     /* held by blk-throttle before it was queued */
	__u32 dev;         /* kernel dev_t of the whole disk */
	__u32 bytes;
	__u32 cmd_flags;   /* op and flags, decoded with the kernel's BTF enums */
	__u32 how;         /* enum req_how */
	__u32 pid;         /* who submitted it (its first bio), 0 if unknown */
	__u32 tid;
	__u32 origin;      /* ORIGIN_F_* of its first bio (lib/bio_origin.bpf.h) */
	__u32 upper_dev;   /* ORIGIN_F_CLONE: the stacked device above */
	__u32 owners;      /* submitters of its bios (merged requests: more than one) */
	__u32 flushes;     /* flush requests made for it */
	char comm[BREAKDOWN_COMM_LEN];
};

#endif
