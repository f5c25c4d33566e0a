/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The block-layer programs that plan_block_hooks (src/common/blk.rs) chooses from, for every
 * request-latency tool. A tool defines
 *     on_issue(struct request *rq)
 *     on_complete(struct request *rq, __u32 nr_bytes)
 *     on_queue_start(struct request *rq)      (the -Q start, whichever hook this kernel has)
 * and then includes this header; user space autoloads one flavour of each hook it planned.
 * The program names are part of the contract with plan_block_hooks. */
#ifndef IOSTACK_BLK_HOOKS_BPF_H
#define IOSTACK_BLK_HOOKS_BPF_H

#include "blk.bpf.h"

/* Both flavours of one tracepoint program: NAME_btf (tp_btf, typed, cheapest) and NAME_raw
 * (raw_tp, where tp_btf does not load). HANDLER takes the tracepoint's arguments as __u64s. */
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

static __always_inline int issue_args(__u64 *args)
{
	return on_issue(rq_tp_request(args));
}

/* block_rq_complete(rq, error, nr_bytes) on every kernel we support. */
static __always_inline int complete_args(__u64 *args)
{
	return on_complete((struct request *)args[0], (__u32)args[2]);
}

static __always_inline int io_start_args(__u64 *args)
{
	return on_queue_start((struct request *)args[0]);
}

static __always_inline int insert_args(__u64 *args)
{
	return on_queue_start(rq_tp_request(args));
}

TP_TWINS(block_rq_issue, issue, issue_args)
TP_TWINS(block_rq_complete, complete, complete_args)

/* -Q start points, best first; user space loads exactly one of them. */
TP_TWINS(block_io_start, io_start, io_start_args)

/* Retargeted by user space to __blk_account_io_start where that is the attachable name. */
SEC("fentry/blk_account_io_start")
int BPF_PROG(account_start_fentry, struct request *rq)
{
	return on_queue_start(rq);
}

SEC("kprobe/blk_account_io_start")
int BPF_KPROBE(account_start_kprobe, struct request *rq)
{
	return on_queue_start(rq);
}

/* With Q_START_RQ_FIELD, covers requests whose rq->start_time_ns is 0 (queue without iostats). */
TP_TWINS(block_rq_insert, insert, insert_args)

#endif
