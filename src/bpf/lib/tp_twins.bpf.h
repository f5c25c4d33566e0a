/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Both flavours of one tracepoint program: NAME_btf (tp_btf, typed, cheapest) and NAME_raw
 * (raw_tp, where tp_btf does not load). HANDLER takes the tracepoint's arguments as __u64s. The
 * planner (src/common/hooks.rs, tracepoint_program) picks one by these names. */
#ifndef IOSTACK_TP_TWINS_BPF_H
#define IOSTACK_TP_TWINS_BPF_H

#define TP_TWINS(tp, name, handler)                                                  \
	SEC("tp_btf/" #tp)                                                          \
	int name##_btf(__u64 *ctx)                                                  \
	{                                                                           \
		return handler(ctx);                                                \
	}                                                                           \
	SEC("raw_tp/" #tp)                                                          \
	int name##_raw(struct bpf_raw_tracepoint_args *ctx)                         \
	{                                                                           \
		return handler(ctx->args);                                          \
	}

#endif
