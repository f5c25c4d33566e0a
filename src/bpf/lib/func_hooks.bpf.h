/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Every flavour of a kernel-function hook, written once: the function planner
 * (src/common/hooks.rs, plan_function) chooses per function, fentry/fexit where they load,
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

/* Argument i of the hooked function; the flavour is a constant at every call, so each program
 * keeps one of the two reads. */
static __always_inline __u64 hook_arg(void *ctx, enum hook_flavour flavour, int i)
{
	struct pt_regs *regs = ctx;

	if (flavour == HOOK_FENTRY)
		return ((__u64 *)ctx)[i];
	switch (i) {
	case 0:
		return PT_REGS_PARM1(regs);
	case 1:
		return PT_REGS_PARM2(regs);
	case 2:
		return PT_REGS_PARM3(regs);
	case 3:
		return PT_REGS_PARM4(regs);
	default:
		return PT_REGS_PARM5(regs);
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
