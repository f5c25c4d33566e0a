/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef IOSTACK_BIOLAT_H
#define IOSTACK_BIOLAT_H

/* Where -Q starts the clock (user space picks one from what the kernel offers). */
enum q_start {
	Q_START_OFF = 0,       /* plain mode: issue -> complete */
	Q_START_EVENT = 1,     /* block_io_start tracepoint or (__)blk_account_io_start probe */
	Q_START_RQ_FIELD = 2,  /* rq->start_time_ns at completion; block_rq_insert/issue when it is 0 */
};

struct biolat_key {
	__u32 gen;   /* double-buffer generation, see hist.bpf.h */
	__u32 dev;   /* with -D: kernel dev_t of the disk, else 0 */
	__u32 flags; /* with -F: cmd_flags masked to op and flag bits, else 0 */
	__u32 pad;
};

#endif
