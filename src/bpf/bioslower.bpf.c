// SPDX-License-Identifier: GPL-2.0
/* bioslower: every block I/O slower than a threshold, as it completes; or, with --stage submit,
 * every slow bio submission (a frozen queue, tag or throttle waits before the request exists).
 *
 * Block stage: who submitted an I/O is learned from its first bio (block_bio_queue/block_split
 * run in the submitter's context on every kernel), looked up when the request is first seen
 * (issue, or the -Q start) and kept with the request's start until completion. The threshold is
 * compared here; only slow I/Os take a ring-buffer slot. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/losses.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/disk_filter.bpf.h"
#include "lib/blk.bpf.h"
#include "lib/io_seen.bpf.h"
#include "lib/tp_twins.bpf.h"
#include "lib/func_hooks.bpf.h"
#include "lib/bio_origin.bpf.h"
#include "bioslower.h"

const volatile __u64 min_ns = 10 * 1000 * 1000;
const volatile __u32 q_start = Q_START_OFF;
const volatile __u32 stamps = STAMPS_OURS;
/* --stage submit -K: remember where each slow submission slept. */
const volatile bool want_stack = false;

/* Reserved so that the type reaches the generated skeleton. */
struct slow_event _event = {};

struct rq_start {
	__u64 bio;      /* rq->bio when first seen: tells this life of the request from a previous one */
	__u64 q_ns;     /* -Q start, 0 if not seen */
	__u64 issue_ns; /* last issue to the driver, 0 if not yet */
	struct bio_origin who;
	__u32 skip;     /* the submitter does not pass -p/-c/--cgroup: complete quietly */
	__u32 pad;
};

/* One entry per request in flight, deleted at completion (LRU: bounded even if one is missed). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct rq_start);
} rq_starts SEC(".maps");

/* Slow events only. Sized by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

/* A ring-buffer slot for something that ran from start to now, stamped, if it is slower than
 * the threshold; NULL otherwise, with a clock anomaly or a full ring buffer counted. */
static __always_inline struct slow_event *slow_event(__u64 start, __u64 now)
{
	struct slow_event *e;

	if (start > now) {
		count_loss(LOSS_CLOCK);
		return NULL;
	}
	if (now - start < min_ns)
		return NULL;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_loss(LOSS_RINGBUF_FULL);
		return NULL;
	}
	e->ts_ns = now;
	e->lat_ns = now - start;
	return e;
}

/* ---- block stage ------------------------------------------------------------------------- */

/* Every bio's submitter is kept (-p/-c are applied to the request's submitter, later). */
static __always_inline bool bio_origin_call(struct bio_origin *o)
{
	return true;
}

/* A new life of a request: its submitter is the owner of its first bio, or (a request without
 * bios, such as a flush, or a bio queued before tracing began) the task running now. */
static __always_inline void track(struct request *rq, __u32 dev, __u64 bio, __u64 q_ns,
				  __u64 issue_ns)
{
	struct rq_start s = {};
	__u64 key = (__u64)rq;

	s.bio = bio;
	s.q_ns = q_ns;
	s.issue_ns = issue_ns;
	if (!take_origin(bio, &s.who)) {
		current_origin(&s.who);
		unknown_cgroup(&s.who);
	}
	/* The flush machinery's own flush (no bio) is for the last requester that asked for one. */
	if (!bio && flush_origin(dev, &s.who))
		unknown_cgroup(&s.who);
	origin_cgroup(&s.who, bio);
	s.skip = !s.who.in_cgroup || !task_selected(s.who.pid, s.who.tid, s.who.comm);
	if (bpf_map_update_elem(&rq_starts, &key, &s, BPF_ANY))
		count_loss(LOSS_START_FULL);
}

static __always_inline int on_queue_start(struct request *rq, bool typed)
{
	__u64 key = (__u64)rq, bio;
	struct rq_start *s;

	if (filter_dev && !disk_selected(rq_dev(rq, typed)))
		return 0;
	bio = (__u64)IOSTACK_GET(typed, rq, bio);
	/* A requeued request is inserted again (from kblockd): the same life, same owner. */
	s = bpf_map_lookup_elem(&rq_starts, &key);
	if (s && s->bio == bio)
		return 0;
	track(rq, rq_dev(rq, typed), bio, bpf_ktime_get_ns(), 0);
	return 0;
}

static __always_inline int on_issue(struct request *rq, bool typed)
{
	__u64 key = (__u64)rq;
	__u64 bio, now;
	struct rq_start *s;

	if (filter_dev && !disk_selected(rq_dev(rq, typed)))
		return 0;
	now = bpf_ktime_get_ns();
	bio = (__u64)IOSTACK_GET(typed, rq, bio);
	s = bpf_map_lookup_elem(&rq_starts, &key);
	/* The same life (its -Q start was seen, or it is being issued again after a requeue). */
	if (s && s->bio == bio) {
		s->issue_ns = now;
		return 0;
	}
	track(rq, rq_dev(rq, typed), bio, 0, now);
	return 0;
}

/* Our stamps, from the request's life in rq_starts: the start, the issue (0 if not seen) and the
 * owner. False if there is nothing to report (not tracked, or filtered out). */
static __always_inline bool our_starts(struct request *rq, __u32 flags, bool typed, __u64 *start,
				       __u64 *issue, struct bio_origin *who)
{
	__u64 key = (__u64)rq;
	struct rq_start *sp, s;

	sp = bpf_map_lookup_elem(&rq_starts, &key);
	if (!sp) {
		count_loss(LOSS_NO_START);
		return false;
	}
	s = *sp;
	bpf_map_delete_elem(&rq_starts, &key);
	if (s.skip)
		return false;
	*issue = s.issue_ns;
	*who = s.who;
	if (q_start == Q_START_OFF) {
		*start = s.issue_ns;
		return true;
	}
	/* As biolat -Q: the kernel's own accounting stamp where that is the chosen start, else the
	 * start event; where neither was seen, the stamp, then the issue. */
	*start = 0;
	if (q_start == Q_START_RQ_FIELD)
		*start = setup_stamp(rq, flags, typed);
	if (!*start)
		*start = s.q_ns;
	if (!*start)
		*start = setup_stamp(rq, flags, typed);
	if (!*start)
		*start = s.issue_ns;
	return true;
}

/* The kernel's stamps, read now, and the owner of the request's first bio. */
static __always_inline bool kernel_starts(struct request *rq, __u32 flags, bool typed,
					  __u64 *start, __u64 *issue, struct bio_origin *who)
{
	__u64 bio = (__u64)IOSTACK_GET(typed, rq, bio);

	*issue = issue_stamp(rq, flags, typed);
	*start = q_start != Q_START_OFF ? queued_stamp(rq, flags, typed) : *issue;
	if (!take_origin(bio, who)) {
		/* No bio (a flush request: for the last requester that asked for one), or queued
		 * before tracing began: no submitter known. */
		__builtin_memset(who, 0, sizeof(*who));
		if (bio || !flush_origin(rq_dev(rq, typed), who))
			who->comm[0] = '?';
		unknown_cgroup(who);
	}
	origin_cgroup(who, bio);
	return who->in_cgroup && task_selected(who->pid, who->tid, who->comm);
}

static __always_inline int on_complete(struct request *rq, __u32 nr_bytes, bool typed,
				       void *ctx)
{
	__u32 dev = rq_dev(rq, typed);
	__u64 now, start = 0, issue = 0;
	__u32 flags, cmd;
	struct slow_event *e;
	struct bio_origin who;

	if (!request_ended(rq, dev, nr_bytes, typed, &flags, &cmd))
		return 0;
	if (stamps == STAMPS_KERNEL) {
		if (!kernel_starts(rq, flags, typed, &start, &issue, &who))
			return 0;
	} else if (!our_starts(rq, flags, typed, &start, &issue, &who)) {
		return 0;
	}
	if (!start) {
		count_loss(LOSS_NO_START);
		return 0;
	}
	now = bpf_ktime_get_ns();
	e = slow_event(start, now);
	if (!e)
		return 0;
	e->queue_ns = (q_start != Q_START_OFF && issue > start) ? issue - start : 0;
	e->slept_ns = 0;
	e->sector = IOSTACK_GET(typed, rq, __sector);
	e->bytes = IOSTACK_GET(typed, rq, __data_len);
	e->pid = who.pid;
	e->tid = who.tid;
	e->cgroup = who.cgroup;
	e->dev = dev;
	e->cmd_flags = cmd;
	e->stack_id = -1;
	__builtin_memcpy(e->comm, who.comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

#include "lib/blk_hooks.bpf.h"

/* ---- submit stage ------------------------------------------------------------------------ */

struct submit_start {
	__u64 start_ns;
	__u64 sector;
	__u64 sleep_ns;      /* when the current sleep began, 0 while on CPU */
	__u64 longest_ns;    /* the longest sleep so far */
	__u32 bytes;
	__u32 opf;
	__u32 dev;
	__u32 depth;         /* nested submissions (stacked devices resubmit from inside) */
	__s32 sleep_stack;   /* where the current sleep began */
	__s32 longest_stack; /* where the longest sleep happened */
};

/* One entry per thread inside a submission. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct submit_start);
} submits SEC(".maps");

/* Kernel stacks for -K; user space shrinks it to one entry otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__uint(value_size, 127 * sizeof(__u64));
} stacks SEC(".maps");

static __always_inline int submit_enter(struct bio *bio)
{
	struct submit_start n = {};
	struct submit_start *s;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 dev;

	s = bpf_map_lookup_elem(&submits, &tid);
	/* Nested: a stacked driver resubmitting from inside a submission, which runs with
	 * current->bio_list set. A leftover entry without it is a return we never saw (a missed
	 * kretprobe): start over rather than count this submission as nested forever. */
	if (s && BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), bio_list)) {
		s->depth++;
		return 0;
	}
	if (s)
		bpf_map_delete_elem(&submits, &tid);
	dev = bio_dev(bio, false);
	if (!disk_selected(dev) || !current_selected())
		return 0;
	n.start_ns = bpf_ktime_get_ns();
	n.sector = BPF_CORE_READ(bio, bi_iter.bi_sector);
	n.bytes = BPF_CORE_READ(bio, bi_iter.bi_size);
	n.opf = BPF_CORE_READ(bio, bi_opf);
	n.dev = dev;
	n.depth = 1;
	n.sleep_stack = -1;
	n.longest_stack = -1;
	if (bpf_map_update_elem(&submits, &tid, &n, BPF_ANY))
		count_loss(LOSS_START_FULL);
	return 0;
}

static __always_inline int submit_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct submit_start *sp, s;
	struct slow_event *e;
	__u64 now, ids;

	sp = bpf_map_lookup_elem(&submits, &tid);
	if (!sp)
		return 0;
	if (sp->depth > 1) {
		sp->depth--;
		return 0;
	}
	s = *sp;
	bpf_map_delete_elem(&submits, &tid);
	now = bpf_ktime_get_ns();
	e = slow_event(s.start_ns, now);
	if (!e)
		return 0;
	e->queue_ns = 0;
	e->slept_ns = s.longest_ns;
	e->sector = s.sector;
	e->bytes = s.bytes;
	e->dev = s.dev;
	e->cmd_flags = s.opf;
	e->stack_id = -1;
	if (want_stack) {
		/* Where it waited longest; if it never slept, the submitter's own call chain. */
		e->stack_id = s.longest_stack >= 0 ? s.longest_stack :
			      bpf_get_stackid(ctx, &stacks, 0);
	}
	/* The submission runs in the submitter's context. */
	ids = current_ids();
	e->pid = ids >> 32;
	e->tid = (__u32)ids;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->cgroup = per_cgroup_depth ? cgroup_at_depth(current_cgroup()) : 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline int submit_entry(void *ctx, enum hook_flavour flavour)
{
	return submit_enter((struct bio *)hook_arg(ctx, flavour, 0));
}

static __always_inline int submit_return(void *ctx, long ret)
{
	return submit_exit(ctx);
}

/* Retargeted by user space at submit_bio_noacct, generic_make_request or submit_bio, each
 * taking one argument, the bio. */
FUNC_HOOKS(submit, 1, submit_entry, submit_return)

/* -K: a thread inside a submission going to sleep (not preempted) records where; waking up, it
 * keeps the stack of its longest sleep. */
static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next)
{
	struct submit_start *s;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid;

	if (!preempt) {
		tid = BPF_CORE_READ(prev, pid);
		s = bpf_map_lookup_elem(&submits, &tid);
		if (s) {
			s->sleep_ns = now;
			s->sleep_stack = bpf_get_stackid(ctx, &stacks, 0);
		}
	}
	tid = BPF_CORE_READ(next, pid);
	s = bpf_map_lookup_elem(&submits, &tid);
	if (s && s->sleep_ns) {
		if (now > s->sleep_ns && now - s->sleep_ns > s->longest_ns) {
			s->longest_ns = now - s->sleep_ns;
			s->longest_stack = s->sleep_stack;
		}
		s->sleep_ns = 0;
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int switch_btf(__u64 *ctx)
{
	return on_switch(ctx, (bool)ctx[0], (struct task_struct *)ctx[1],
			 (struct task_struct *)ctx[2]);
}

SEC("raw_tp/sched_switch")
int switch_raw(struct bpf_raw_tracepoint_args *ctx)
{
	return on_switch(ctx, (bool)ctx->args[0], (struct task_struct *)ctx->args[1],
			 (struct task_struct *)ctx->args[2]);
}

char LICENSE[] SEC("license") = "GPL";
