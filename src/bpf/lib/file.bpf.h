/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* From a function's file-like argument (enum fn_arg, lib/fn_slots.h) or a file descriptor of the
 * current task to the file's name, its filesystem type and its device. Probe reads throughout:
 * these pointers come from kprobe registers as often as from typed arguments. */
#ifndef IOSTACK_FILE_BPF_H
#define IOSTACK_FILE_BPF_H

#include "lib/fn_slots.h"

static __always_inline struct dentry *obj_dentry(__u64 obj, __u32 kind)
{
	switch (kind) {
	case FN_ARG_FILE:
		return BPF_CORE_READ((struct file *)obj, f_path.dentry);
	case FN_ARG_KIOCB:
		return BPF_CORE_READ((struct kiocb *)obj, ki_filp, f_path.dentry);
	case FN_ARG_DENTRY:
		return (struct dentry *)obj;
	case FN_ARG_PATH:
		return BPF_CORE_READ((struct path *)obj, dentry);
	default:
		return NULL;
	}
}

static __always_inline struct super_block *obj_sb(__u64 obj, __u32 kind)
{
	struct dentry *d;

	if (kind == FN_ARG_INODE)
		return BPF_CORE_READ((struct inode *)obj, i_sb);
	d = obj_dentry(obj, kind);
	return d ? BPF_CORE_READ(d, d_sb) : NULL;
}

/* The superblock's filesystem type name into dst (FN_FS_LEN bytes), left as is without one. */
static __always_inline void sb_fs_name(char *dst, struct super_block *sb)
{
	const char *name;

	if (!sb)
		return;
	name = BPF_CORE_READ(sb, s_type, name);
	if (name)
		bpf_probe_read_kernel_str(dst, FN_FS_LEN, name);
}

static __always_inline void fs_name(char *dst, __u64 obj, __u32 kind)
{
	sb_fs_name(dst, obj ? obj_sb(obj, kind) : NULL);
}

/* The final component of the file's name into dst (len bytes). */
static __always_inline void dentry_name(char *dst, __u32 len, struct dentry *d)
{
	const unsigned char *name = d ? BPF_CORE_READ(d, d_name.name) : NULL;

	if (name)
		bpf_probe_read_kernel_str(dst, len, name);
}

/* The current task's open file for descriptor fd, or NULL. */
static __always_inline struct file *fd_file(__u64 fd)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct file **table;
	struct file *f = NULL;
	unsigned int max;

	table = BPF_CORE_READ(task, files, fdt, fd);
	max = BPF_CORE_READ(task, files, fdt, max_fds);
	if (!table || fd >= max)
		return NULL;
	bpf_probe_read_kernel(&f, sizeof(f), table + fd);
	return f;
}

/* S_IFMT and S_IFBLK, from include/uapi/linux/stat.h. */
#define IOSTACK_S_IFMT 00170000
#define IOSTACK_S_IFBLK 0060000

/* The device a file's data lives on, as the kernel's dev_t (major << 20 | minor): the device
 * itself for a block device node (dd on /dev/sdb), else its filesystem's device. */
static __always_inline __u32 file_dev(struct file *f)
{
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	__u16 mode = BPF_CORE_READ(inode, i_mode);

	if ((mode & IOSTACK_S_IFMT) == IOSTACK_S_IFBLK)
		return BPF_CORE_READ(inode, i_rdev);
	return BPF_CORE_READ(inode, i_sb, s_dev);
}

#endif
