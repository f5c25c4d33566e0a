/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Kernel functions timed through numbered slots: user space plans one function per slot
 * (src/tools/fnlat.rs, plan_slot), hooked with fentry/fexit where they load and kprobe/kretprobe
 * where they do not, and says per slot what it counts for and which argument leads to the file.
 * A tool defines FN_SLOTS (how many), then
 *     fn_entry(void *ctx, enum hook_flavour flavour, __u32 slot)
 *     fn_exit(void *ctx, long ret, __u32 slot)
 * includes this header, and instantiates its slots with FN_SLOTS_16 (or FN_SLOT(n) each). */
#ifndef IOSTACK_FN_SLOTS_BPF_H
#define IOSTACK_FN_SLOTS_BPF_H

#include "lib/fn_slots.h"
#include "lib/func_hooks.bpf.h"

const volatile struct fn_slot slots[FN_SLOTS] = {};

/* One slot: its entry and exit flavours, with an fexit per arity (the return value follows the
 * arguments), which the planner picks from the function's BTF prototype. Program names:
 * slotN_fentry, slotN_kprobe, slotN_kretprobe, slotN_fexit2..5. */
#define FN_SLOT(n)                                                                   \
	static __always_inline int slot##n##_entry(void *ctx, enum hook_flavour f)   \
	{                                                                            \
		return fn_entry(ctx, f, n);                                          \
	}                                                                            \
	static __always_inline int slot##n##_exit(void *ctx, long ret)               \
	{                                                                            \
		return fn_exit(ctx, ret, n);                                         \
	}                                                                            \
	FUNC_ENTRY_HOOKS(slot##n, slot##n##_entry)                                   \
	SEC("kretprobe/slot" #n)                                                     \
	int slot##n##_kretprobe(struct pt_regs *ctx)                                 \
	{                                                                            \
		return slot##n##_exit(ctx, (long)PT_REGS_RC(ctx));                   \
	}                                                                            \
	FEXIT_ARITY(slot##n, 2, slot##n##_exit)                                      \
	FEXIT_ARITY(slot##n, 3, slot##n##_exit)                                      \
	FEXIT_ARITY(slot##n, 4, slot##n##_exit)                                      \
	FEXIT_ARITY(slot##n, 5, slot##n##_exit)

#define FN_SLOTS_16                                                                  \
	FN_SLOT(0) FN_SLOT(1) FN_SLOT(2) FN_SLOT(3)                                  \
	FN_SLOT(4) FN_SLOT(5) FN_SLOT(6) FN_SLOT(7)                                  \
	FN_SLOT(8) FN_SLOT(9) FN_SLOT(10) FN_SLOT(11)                                \
	FN_SLOT(12) FN_SLOT(13) FN_SLOT(14) FN_SLOT(15)

/* The file-like argument of a slot's function (enum fn_arg), 0 if it has none. */
static __always_inline __u64 slot_file_arg(void *ctx, enum hook_flavour flavour, __u32 slot)
{
	__u32 a;

	if (slot >= FN_SLOTS || slots[slot].kind == FN_ARG_NONE)
		return 0;
	a = slots[slot].arg;
	return a < 5 ? hook_arg(ctx, flavour, a) : 0;
}

#endif
