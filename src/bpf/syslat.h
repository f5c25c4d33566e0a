/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* syslat's layout shared with user space (src/tools/syslat.rs). */
#ifndef IOSTACK_SYSLAT_H
#define IOSTACK_SYSLAT_H

/* Histogram slots per generation; slot 0 means "not traced". */
#define SYSLAT_MAX_SLOTS 64

/* Per-thread start of the traced call in progress; ts == 0 when none. */
struct syslat_start {
	__u64 ts;
	__u32 slot;
	__u32 pad;
};

/* With --per-cgroup: a histogram per (slot, cgroup). */
struct syslat_cgroup_key {
	__u32 gen;
	__u32 slot;
	__u64 cgroup;
};

#endif
