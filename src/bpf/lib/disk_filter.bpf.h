/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* -d DISK: the kernel dev_t (major << 20 | minor) of one whole disk, set by user space from
 * sysfs (src/common/block/disk.rs, DiskFilter); 0 selects every disk. Where DISK is a stacked
 * device (dm, md) and the tool follows its I/O down (iostack), filter_below holds the disks under
 * it, whose requests carry that I/O. */
#ifndef IOSTACK_DISK_FILTER_BPF_H
#define IOSTACK_DISK_FILTER_BPF_H

#define IOSTACK_FILTER_BELOW 7

const volatile __u32 filter_dev = 0;
const volatile __u32 filter_below[IOSTACK_FILTER_BELOW] = {};

static __always_inline bool disk_selected(__u32 dev)
{
	if (!filter_dev || dev == filter_dev)
		return true;
	for (int i = 0; i < IOSTACK_FILTER_BELOW; i++) {
		if (!filter_below[i])
			return false;
		if (filter_below[i] == dev)
			return true;
	}
	return false;
}

#endif
