/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Both flavours of one tracepoint program: NAME_btf (tp_btf, typed, cheapest) and NAME_raw
 * (raw_tp, where tp_btf does not load). HANDLER(args, typed) takes the tracepoint's arguments as
 * __u64s; `typed` (a constant in each program) says whether pointer arguments are typed for the
 * verifier (tp_btf), so that kernel structs can be read with plain loads instead of
 * bpf_probe_read_kernel calls (see IOSTACK_GET in lib/blk.bpf.h). The planner
 * (src/common/kernel/hooks.rs, twin) picks one by these names. */
#ifndef IOSTACK_TP_TWINS_BPF_H
#define IOSTACK_TP_TWINS_BPF_H

#define TP_TWINS(tp, name, handler)                                                  \
	SEC("tp_btf/" #tp)                                                          \
	int name##_btf(__u64 *ctx)                                                  \
	{                                                                           \
		return handler(ctx, true);                                          \
	}                                                                           \
	SEC("raw_tp/" #tp)                                                          \
	int name##_raw(struct bpf_raw_tracepoint_args *ctx)                         \
	{                                                                           \
		return handler(ctx->args, false);                                   \
	}

#endif
