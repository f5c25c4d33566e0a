/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* fnlat: the layout shared by src/bpf/fnlat.bpf.c and user space (src/tools/fnlat.rs). */
#ifndef IOSTACK_FNLAT_H
#define IOSTACK_FNLAT_H

#include "lib/fn_slots.h"

/* Kernel functions one run can time (each planned function gets a slot), and operations. */
#define FNLAT_SLOTS 16
#define FNLAT_OPS 16
#define FNLAT_NAME_LEN 32

/* --per-fs and --per-cgroup histograms. Keyed by slot, not op: each histogram then has one writer (the slot's
 * exit program), and user space adds the slots of an op together. */
struct fnlat_key {
	__u32 gen;                  /* double-buffer generation, see lib/hist.bpf.h */
	__u32 slot;
	__u64 cgroup;               /* --per-cgroup: the caller's cgroup at that depth, else 0 */
	char fs[FN_FS_LEN];         /* --per-fs: the superblock's filesystem type, else empty */
};

/* --min: one operation slower than the threshold. */
struct fnlat_event {
	__u64 ts_ns;
	__u64 lat_ns;
	__s64 ret;      /* bytes for reads and writes, else the return value */
	__s64 pos;      /* file position at entry, -1 if unknown */
	__u64 cgroup;   /* --per-cgroup: the caller's cgroup at that depth, else 0 */
	__u32 pid;
	__u32 tid;
	__u32 op;
	__u32 pad;
	char comm[16];
	char fs[FN_FS_LEN];
	char file[FNLAT_NAME_LEN];
};

#endif
