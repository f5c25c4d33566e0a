/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* bioslower: the event record shared by the BPF programs and user space (src/bin/bioslower.rs). */
#ifndef IOSTACK_BIOSLOWER_H
#define IOSTACK_BIOSLOWER_H


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
	char comm[16];
	__u64 cgroup;   /* --per-cgroup: the owner's cgroup at that depth, 0 if unknown */
};

#endif
