/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the kernel side of any tool could not account, counted where it happens and reported by
 * user space in-band (src/common/losses.rs holds the names and texts, in this order). One table
 * for every tool: a tool simply never counts the kinds that cannot happen to it. */
#ifndef IOSTACK_LOSSES_BPF_H
#define IOSTACK_LOSSES_BPF_H

enum loss_kind {
	LOSS_NO_START = 0,    /* an end (completion, syscall exit) without a recorded start */
	LOSS_START_FULL = 1,  /* a start could not be stored: the start map refused it */
	LOSS_HIST_FULL = 2,   /* a histogram could not be created: too many distinct keys */
	LOSS_CLOCK = 3,       /* start after end */
	LOSS_RINGBUF_FULL = 4, /* an event could not be handed over: user space fell behind */
	LOSS_NO_WAKE = 5,     /* a sleep whose wakeup no program saw: its cause is unknown */
	LOSS_UNLINKED = 6,    /* a stacked device's clone whose bio above was not found */
	LOSS_CHAIN_CUT = 7,   /* a wait followed through a waker whose history did not reach back */
	LOSS_NO_SWITCH = 8,   /* a switch onto a CPU no program saw: the wait for it is unknown */
	LOSS_KINDS = 9,
};

/* Cumulative, read by user space from the mmap-ed .bss. */
__u64 losses[LOSS_KINDS];

static __always_inline void count_loss(enum loss_kind kind)
{
	if (kind < LOSS_KINDS)
		__sync_fetch_and_add(&losses[kind], 1);
}

#endif
