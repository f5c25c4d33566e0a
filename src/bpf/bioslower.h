/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* bioslower: the event record shared by the BPF programs and user space (src/bin/bioslower.rs). */
#ifndef IOSTACK_BIOSLOWER_H
#define IOSTACK_BIOSLOWER_H

#define BIOSLOWER_COMM_LEN 16

/* One I/O (or bio submission) slower than the threshold. */
struct slow_event {
	__u64 ts_ns;    /* CLOCK_MONOTONIC at completion (block) or end of submission (submit) */
	__u64 lat_ns;   /* latency compared with the threshold */
	__u64 queue_ns; /* -Q: OS queue time (start to issue), else 0 */
	__u64 slept_ns; /* submit -K: the longest sleep inside the submission, else 0 */
	__u64 sector;
	__u32 bytes;
	__u32 pid;      /* process (tgid) that submitted the I/O */
	__u32 tid;      /* its thread */
	__u32 dev;      /* kernel dev_t of the whole disk (major << 20 | minor) */
	__u32 cmd_flags; /* op and flags (REQ_OP_* | REQ_*), decoded with the kernel's BTF enums */
	__s32 stack_id; /* submit -K: kernel stack in the stacks map, else -1 */
	char comm[BIOSLOWER_COMM_LEN];
};

/* I/Os the kernel side could not report, counted in .bss drops[] and printed by user space. */
enum slow_drop {
	SLOW_DROP_RINGBUF = 0,       /* ring buffer full: user space fell behind */
	SLOW_DROP_MISSED_START = 1,  /* completion without a recorded start */
	SLOW_DROP_START_FULL = 2,    /* the start map refused an entry */
	SLOW_DROP_CLOCK = 3,         /* start after end */
	SLOW_DROP_MAX = 4,
};

#endif
