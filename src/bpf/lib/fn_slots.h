/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Kernel functions timed through slots: the layout shared by lib/fn_slots.bpf.h and user space
 * (src/tools/fnlat.rs, FnSlot). */
#ifndef IOSTACK_FN_SLOTS_H
#define IOSTACK_FN_SLOTS_H

/* Filesystem type names, as the kernel's file_system_type.name (truncated). */
#define FN_FS_LEN 16

/* How to find the file (its superblock, its name) from a function's arguments. */
enum fn_arg {
	FN_ARG_NONE = 0,
	FN_ARG_FILE = 1,   /* struct file * */
	FN_ARG_KIOCB = 2,  /* struct kiocb *: ki_filp */
	FN_ARG_DENTRY = 3, /* struct dentry * */
	FN_ARG_PATH = 4,   /* const struct path *: dentry */
	FN_ARG_INODE = 5,  /* struct inode *: i_sb only */
};

/* One planned function, set by user space. */
struct fn_slot {
	__u32 op;       /* what it counts for, in the tool's terms (an operation, a layer) */
	__u32 arg;      /* argument index of the file-like object, with `kind` */
	__u32 kind;     /* enum fn_arg */
	__u32 pos_arg;  /* argument index of a loff_t * holding the position, or ~0 */
};

#endif
