/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What woke a sleeping thread, seen from the waker's side (sched_waking runs in the waker's
 * context): the completion of a block request, or a thread, and what that thread was itself
 * waiting for. Three pieces:
 *
 * - A completion mark per CPU. block_rq_complete fires in blk_update_request just before the
 *   request's bios end, and their end wakes the waiters (a direct-I/O waiter, a page's waiters)
 *   in the same call chain on the same CPU. The mark holds the request; a wakeup on that CPU is
 *   charged to it while the mark is live: in the same task and on the same stack (the task's
 *   own, or the CPU's interrupt stack) as the completion, within mark_ttl_ns, before the CPU
 *   switches tasks (sched_switch closes it) or completes another request. Only a sleep the kernel itself calls an I/O wait (the task's in_iowait, set by
 *   io_schedule) is charged to a mark.
 * - The I/O waits of every thread (their last HISTORY_WAITS in_iowait sleeps), so that a sleep
 *   ended by a thread in task context can be charged to that thread's I/O (one hop: an fsync
 *   woken by jbd2 after its commit write).
 * - blk-throttle's dispatcher: a bio the throttle held is passed to block_bio_queue by a kworker
 *   running blk_throtl_dispatch_work_fn, not by its submitter; user space sets that function's
 *   address (kallsyms) so that such bios are recognised.
 */
#ifndef IOSTACK_WAKE_CAUSE_BPF_H
#define IOSTACK_WAKE_CAUSE_BPF_H

#include "lib/breakdown.h"

/* ---- interrupt context ---------------------------------------------------------------------- */

/* x86_64's kernel stacks (THREAD_SIZE; 32 KiB only on KASAN kernels). */
#define IOSTACK_THREAD_SIZE (16 << 10)

/* Whether we run on the current task's own stack (a task in its own context), or on the CPU's
 * interrupt stack (a hardirq, or a softirq run on irq exit or from local_bh_enable: x86_64 runs
 * both there). The per-CPU preempt count would say so too, but a program can only read it where
 * kallsyms lists data symbols (CONFIG_KALLSYMS_ALL), which the CI host's kernel does not; the
 * stack pointer works everywhere. Our own frame's address is read as a plain number through a
 * probe read of the pointer to it (the verifier does not let a stack pointer be compared with
 * a number). ksoftirqd and threaded interrupt handlers run on their own stacks: they count as
 * tasks, whose I/O waits (none) are then what a one-hop charge finds. */
static __always_inline bool on_task_stack(void)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	__u64 base = (__u64)BPF_CORE_READ(task, stack);
	__u64 here = 0;
	__u64 *where = &here;

	bpf_probe_read_kernel(&here, sizeof(here), &where);
	return here - base < IOSTACK_THREAD_SIZE;
}

/* ---- the completion mark -------------------------------------------------------------------- */

/* Where a request's first bio came from. */
enum origin {
	ORIGIN_UNKNOWN = 0,   /* queued before tracing began, or not seen */
	ORIGIN_TASK = 1,      /* a task outside any traced call */
	ORIGIN_CALL = 2,      /* a traced call (mark.call) */
	ORIGIN_THROTTLED = 3, /* blk-throttle's dispatcher, for a submitter it held */
};

/* bio_origin.call of a bio blk-throttle's dispatcher queued (call ids are tid << 32 | seq). */
#define CALL_THROTTLED 1

struct completion_mark {
	__u64 ts;       /* completion time; 0: no live mark */
	__u64 task;     /* the task current at the completion */
	__u64 call;     /* the call that submitted it (ORIGIN_CALL) */
	__u64 issue;    /* when it was issued to the device, 0 if not stamped */
	__u32 ctx;      /* on_task_stack() at the completion */
	__u32 origin;   /* enum origin */
	__u32 kind;     /* enum req_kind */
	__u32 waited;   /* a traced call waited for it (counted once) */
	struct req_seen req;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct completion_mark);
} marks SEC(".maps");

/* How long after a completion a wakeup on its CPU may still be its doing. Microseconds on
 * hardware; under QEMU's single-threaded TCG (the kernel matrix) a vCPU can stop in between:
 * 1.85 ms from block_rq_complete to the waiter's sched_waking in one hardirq was seen in the
 * 5.10 VM (2026-11-25, bpf_printk; 1 of 320 completions, the one a 1 ms limit missed). The mark
 * is closed anyway at the CPU's next switch or completion: the limit only keeps a later
 * interrupt on top of the same task from charging its wakeups to an old completion. */
const volatile __u64 mark_ttl_ns = 10000000;

static __always_inline struct completion_mark *this_cpu_mark(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&marks, &zero);
}

/* The CPU switches tasks: whatever completion ran here has finished its wakeups. */
static __always_inline void close_mark(void)
{
	struct completion_mark *m = this_cpu_mark();

	if (m && m->ts)
		m->ts = 0;
}

/* The live mark of this CPU for a wakeup now, or NULL. */
static __always_inline struct completion_mark *live_mark(__u64 now)
{
	struct completion_mark *m = this_cpu_mark();

	if (!m || !m->ts || now < m->ts || now - m->ts > mark_ttl_ns)
		return NULL;
	if (m->task != bpf_get_current_task() || m->ctx != on_task_stack())
		return NULL;
	return m;
}

/* ---- every thread's I/O waits --------------------------------------------------------------- */

#define HISTORY_WAITS 8

struct io_history {
	__u64 wait_start;              /* the in_iowait sleep in progress, 0 if none */
	__u32 next;                    /* ring position of the next wait */
	__u32 pad;
	__u64 start[HISTORY_WAITS];
	__u64 end[HISTORY_WAITS];
};

/* By thread id; LRU, preallocated, so updates from inside the scheduler never allocate. A
 * thread whose history aged out only loses the one-hop charge of a sleep it ends (it is then
 * other sleep). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct io_history);
} io_histories SEC(".maps");

const struct io_history io_history_zero = {};

/* A thread goes to sleep in an I/O wait. */
static __always_inline void io_wait_begins(__u32 tid, __u64 now)
{
	struct io_history *h = bpf_map_lookup_elem(&io_histories, &tid);

	if (!h) {
		bpf_map_update_elem(&io_histories, &tid, &io_history_zero, BPF_ANY);
		h = bpf_map_lookup_elem(&io_histories, &tid);
		if (!h)
			return;
	}
	h->wait_start = now;
}

/* A thread in an I/O wait is woken: the wait goes into its ring. */
static __always_inline void io_wait_ends(__u32 tid, __u64 now)
{
	struct io_history *h = bpf_map_lookup_elem(&io_histories, &tid);
	__u32 i;

	if (!h || !h->wait_start || now < h->wait_start)
		return;
	i = h->next % HISTORY_WAITS;
	h->start[i] = h->wait_start;
	h->end[i] = now;
	h->next = i + 1;
	h->wait_start = 0;
}

/* How much of [from, to] the current task spent in I/O waits (its ring; the waits do not
 * overlap, so neither does the sum). */
static __always_inline __u64 waker_io_within(__u64 from, __u64 to)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct io_history *h = bpf_map_lookup_elem(&io_histories, &tid);
	__u64 sum = 0, a, b;

	if (!h)
		return 0;
	for (int i = 0; i < HISTORY_WAITS; i++) {
		a = h->start[i] > from ? h->start[i] : from;
		b = h->end[i] < to ? h->end[i] : to;
		if (h->end[i] && b > a)
			sum += b - a;
	}
	return sum < to - from ? sum : to - from;
}

/* ---- blk-throttle's dispatcher -------------------------------------------------------------- */

/* The address of blk_throtl_dispatch_work_fn (0: this kernel has none, or we do not look). */
const volatile __u64 throttle_dispatch_fn = 0;

#define IOSTACK_PF_WQ_WORKER 0x00000020

/* Where struct kthread lived before 5.17. */
struct task_struct___kthread_in_set_child_tid {
	int *set_child_tid;
} __attribute__((preserve_access_index));

/* The current task is a kworker running blk-throttle's dispatch work. */
static __always_inline bool in_throttle_dispatch(void)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct task_struct___kthread_in_set_child_tid *old = (void *)task;
	struct kthread *k;
	struct worker *w;

	if (!throttle_dispatch_fn || !(BPF_CORE_READ(task, flags) & IOSTACK_PF_WQ_WORKER))
		return false;
	if (bpf_core_field_exists(task->worker_private))
		k = BPF_CORE_READ(task, worker_private);
	else
		k = (void *)BPF_CORE_READ(old, set_child_tid);
	w = k ? BPF_CORE_READ(k, data) : NULL;
	return w && (__u64)BPF_CORE_READ(w, current_func) == throttle_dispatch_fn;
}

/* The kind of a request, from its op and flags (REQ_RAHEAD comes from user space's BTF). */
const volatile __u32 req_rahead = 1 << 19;
const volatile __u32 req_op_discard = 3;
const volatile __u32 req_op_write = 1;

static __always_inline __u32 req_kind(__u32 cmd)
{
	__u32 op = cmd & IOSTACK_REQ_OP_MASK;

	if (op == 0)
		return (cmd & req_rahead) ? KIND_READAHEAD : KIND_READ;
	if (op == req_op_write)
		return KIND_WRITE;
	if (op == rq_bits.flush_op)
		return KIND_FLUSH;
	if (op == req_op_discard)
		return KIND_DISCARD;
	return KIND_OTHER;
}

#endif
