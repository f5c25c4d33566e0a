/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The block-layer programs that plan_block_hooks (src/common/block/mod.rs) chooses from, for every
 * request-latency tool. A tool defines
 *     on_issue(struct request *rq, bool typed)
 *     on_complete(struct request *rq, __u32 nr_bytes, bool typed, void *ctx)
 *     on_queue_start(struct request *rq, bool typed)   (the -Q start, whichever hook this kernel has)
 * where `typed` says the verifier knows rq as a struct request (tp_btf, fentry): fields can be
 * read with plain loads (IOSTACK_GET); `ctx` is the tracepoint's arguments (where they lie
 * tells the stack it fired on: lib/wake_cause.bpf.h, on_task_stack).
 * and then includes this header; user space autoloads one flavour of each hook it planned.
 * The program names are part of the contract with plan_block_hooks. The tool also includes
 * lib/blk.bpf.h (for enum q_start) before its handlers. */
#ifndef IOSTACK_BLK_HOOKS_BPF_H
#define IOSTACK_BLK_HOOKS_BPF_H

#include "lib/blk.bpf.h"
#include "lib/tp_twins.bpf.h"
#include "lib/func_hooks.bpf.h"

static __always_inline int issue_args(__u64 *args, bool typed)
{
	return on_issue(rq_tp_request(args), typed);
}

/* block_rq_complete(rq, error, nr_bytes) on every kernel we support. */
static __always_inline int complete_args(__u64 *args, bool typed)
{
	return on_complete((struct request *)args[0], (__u32)args[2], typed, args);
}

static __always_inline int io_start_args(__u64 *args, bool typed)
{
	return on_queue_start((struct request *)args[0], typed);
}

static __always_inline int insert_args(__u64 *args, bool typed)
{
	return on_queue_start(rq_tp_request(args), typed);
}

TP_TWINS(block_rq_issue, issue, issue_args)
TP_TWINS(block_rq_complete, complete, complete_args)

/* -Q start points, best first; user space loads exactly one of them. */
TP_TWINS(block_io_start, io_start, io_start_args)

static __always_inline int account_start_entry(void *ctx, enum hook_flavour flavour)
{
	return on_queue_start((struct request *)hook_arg(ctx, flavour, 0), flavour == HOOK_FENTRY);
}

/* (__)blk_account_io_start, where no block_io_start tracepoint exists. */
FUNC_ENTRY_HOOKS(account_start, account_start_entry)

/* With Q_START_RQ_FIELD, covers requests whose rq->start_time_ns is 0 (queue without iostats). */
TP_TWINS(block_rq_insert, insert, insert_args)

#endif
