/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* -d DISK: the kernel dev_t (major << 20 | minor) of one whole disk, set by user space from
 * sysfs (src/common/block/disk.rs, DiskFilter); 0 selects every disk. */
#ifndef IOSTACK_DISK_FILTER_BPF_H
#define IOSTACK_DISK_FILTER_BPF_H

const volatile __u32 filter_dev = 0;

static __always_inline bool disk_selected(__u32 dev)
{
	return !filter_dev || dev == filter_dev;
}

#endif
