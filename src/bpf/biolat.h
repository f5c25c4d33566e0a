/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef IOSTACK_BIOLAT_H
#define IOSTACK_BIOLAT_H

struct biolat_key {
	__u32 gen;   /* double-buffer generation, see hist.bpf.h */
	__u32 dev;   /* with -D: kernel dev_t of the disk, else 0 */
	__u32 flags; /* with -F: cmd_flags masked to op and flag bits, else 0 */
	__u32 queued; /* with also_queued: 1 for the histogram from the OS's accounting start */
	__u64 cgroup; /* with --per-cgroup: the owner's cgroup at that depth (lib/per_cgroup.bpf.h) */
};

#endif
