/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* -d DISK: the kernel dev_t (major << 20 | minor) of one whole disk, set by user space from
 * sysfs (src/common/block/disk.rs, DiskFilter); 0 selects every disk. Where the tool follows I/O
 * through stacked devices (dm, md: iostack), filter_stack holds the devices stacked with DISK:
 * the disks under it, whose requests carry its I/O, and the devices over it, whose I/O its
 * requests carry. */
#ifndef IOSTACK_DISK_FILTER_BPF_H
#define IOSTACK_DISK_FILTER_BPF_H

#define IOSTACK_FILTER_STACK 7

const volatile __u32 filter_dev = 0;
const volatile __u32 filter_stack[IOSTACK_FILTER_STACK] = {};

static __always_inline bool disk_selected(__u32 dev)
{
	if (!filter_dev || dev == filter_dev)
		return true;
	for (int i = 0; i < IOSTACK_FILTER_STACK; i++) {
		if (!filter_stack[i])
			return false;
		if (filter_stack[i] == dev)
			return true;
	}
	return false;
}

#endif
