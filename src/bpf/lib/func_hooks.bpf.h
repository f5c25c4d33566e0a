/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Every flavour of a kernel-function hook, written once: the function planner
 * (src/common/kernel/hooks.rs, plan_function) chooses per function, fentry/fexit where they load,
 * kprobe/kretprobe where they do not, and retargets the program at the function it chose.
 *
 *   FUNC_HOOKS(name, nargs, entry, exit)   NAME_fentry, NAME_fexit, NAME_kprobe, NAME_kretprobe
 *   FUNC_ENTRY_HOOKS(name, entry)          NAME_fentry, NAME_kprobe
 *
 * entry(ctx, flavour) reads the function's arguments with hook_arg(ctx, flavour, i); exit(ctx,
 * ret) gets the return value. nargs is the function's arity (fexit finds the return value after
 * the arguments); the planner checks it against the target's BTF prototype. */
#ifndef IOSTACK_FUNC_HOOKS_BPF_H
#define IOSTACK_FUNC_HOOKS_BPF_H

enum hook_flavour {
	HOOK_FENTRY,
	HOOK_KPROBE,
};

/* Argument i of the hooked function. Every read is at a literal offset: fentry allows no
 * variable-offset context access, and where i comes from rodata (a known value once loaded) the
 * verifier keeps only the matching case, so an index past the function's arity in a dead case is
 * never checked. The flavour is a constant at every call, so each program keeps one family. */
/* args[N] as a load at its own literal offset: without the barrier, clang folds the cases of a
 * switch into one load at a computed offset, which the verifier refuses ("dereference of
 * modified ctx ptr"), as for tp_arg0_or_1 in lib/blk.bpf.h. */
#define IOSTACK_CTX_ARG(args, n)                                                     \
	({                                                                           \
		__u64 __v = (args)[n];                                               \
		barrier_var(__v);                                                    \
		__v;                                                                 \
	})

static __always_inline __u64 hook_arg(void *ctx, enum hook_flavour flavour, __u32 i)
{
	struct pt_regs *regs = ctx;
	__u64 *args = ctx;

	if (flavour == HOOK_FENTRY) {
		switch (i) {
		case 0:
			return IOSTACK_CTX_ARG(args, 0);
		case 1:
			return IOSTACK_CTX_ARG(args, 1);
		case 2:
			return IOSTACK_CTX_ARG(args, 2);
		case 3:
			return IOSTACK_CTX_ARG(args, 3);
		case 4:
			return IOSTACK_CTX_ARG(args, 4);
		default:
			return 0;
		}
	}
	switch (i) {
	case 0:
		return PT_REGS_PARM1(regs);
	case 1:
		return PT_REGS_PARM2(regs);
	case 2:
		return PT_REGS_PARM3(regs);
	case 3:
		return PT_REGS_PARM4(regs);
	case 4:
		return PT_REGS_PARM5(regs);
	default:
		return 0;
	}
}

#define FUNC_ENTRY_HOOKS(name, entry)                                                \
	SEC("fentry/" #name)                                                        \
	int name##_fentry(__u64 *ctx)                                               \
	{                                                                           \
		return entry(ctx, HOOK_FENTRY);                                     \
	}                                                                           \
	SEC("kprobe/" #name)                                                        \
	int name##_kprobe(struct pt_regs *ctx)                                      \
	{                                                                           \
		return entry(ctx, HOOK_KPROBE);                                     \
	}

/* NAME_fexitN: the return side for a function of N arguments (fexit finds the return value after
 * them). */
#define FEXIT_ARITY(name, nargs, exit)                                               \
	SEC("fexit/" #name)                                                         \
	int name##_fexit##nargs(__u64 *ctx)                                         \
	{                                                                           \
		return exit(ctx, (long)ctx[nargs]);                                 \
	}

#define FUNC_HOOKS(name, nargs, entry, exit)                                         \
	FUNC_ENTRY_HOOKS(name, entry)                                               \
	SEC("fexit/" #name)                                                         \
	int name##_fexit(__u64 *ctx)                                                \
	{                                                                           \
		return exit(ctx, (long)ctx[nargs]);                                 \
	}                                                                           \
	SEC("kretprobe/" #name)                                                     \
	int name##_kretprobe(struct pt_regs *ctx)                                   \
	{                                                                           \
		return exit(ctx, (long)PT_REGS_RC(ctx));                            \
	}

#endif
