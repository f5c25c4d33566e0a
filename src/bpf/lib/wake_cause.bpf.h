/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What woke a sleeping thread, seen from the waker's side (sched_waking runs in the waker's
 * context): the completion of a block request (directly, or through the work it deferred to a
 * kernel worker), or a thread, and what that thread was itself waiting for. Four pieces:
 *
 * - A completion mark per CPU. block_rq_complete fires in blk_update_request just before the
 *   request's bios end, and their end wakes the waiters (a direct-I/O waiter, a page's waiters)
 *   in the same call chain on the same CPU. The mark holds the request and its owners (the
 *   submitters of its bios: lib/bio_origin.bpf.h); a wakeup on that CPU is charged to it while
 *   the mark is live: in the same task and on the same stack (the task's own, or the CPU's
 *   interrupt stack) as the completion, within mark_ttl_ns, before the CPU switches tasks
 *   (sched_switch closes it) or completes another request.
 * - A worker's mark. Where a completion defers its end to a workqueue (ext4's unwritten-extent
 *   conversion ending page writeback, XFS's, btrfs's checksum checks, dm-crypt), the work it
 *   queues while its mark is live carries the mark (workqueue_queue_work), and the worker that
 *   runs it holds the mark while it does (workqueue_execute_start/end): the wakeups that work
 *   makes are the completion's.
 * - The flush machinery's flushes per disk: the machinery's own flush request has no bio; the
 *   requests it served end right after it, and each counts the flushes made while it waited as
 *   its own device time.
 * - Every thread's recent sleeps and how much of each was waiting for I/O (the kernel's I/O
 *   waits wholly, a traced call's sleep by its parts), so that a sleep ended by a thread in task
 *   context can be charged to what that thread was waiting for meanwhile: an fsync woken by jbd2
 *   after its commit, a writer woken by the writer before it in a queue for the inode's lock.
 *   Chains follow: each thread's record of a sleep already holds what it waited for through its
 *   own waker.
 */
#ifndef IOSTACK_WAKE_CAUSE_BPF_H
#define IOSTACK_WAKE_CAUSE_BPF_H

#include "lib/breakdown.h"
#include "lib/bio_origin.bpf.h"
#include "lib/losses.bpf.h"

/* ---- interrupt context ---------------------------------------------------------------------- */

/* x86_64's kernel stacks (THREAD_SIZE; 32 KiB only on KASAN kernels). */
#define IOSTACK_THREAD_SIZE (16 << 10)

/* Whether the program runs on the current task's own stack (a task in its own context), or on
 * the CPU's interrupt stack (a hardirq, or a softirq run on irq exit or from local_bh_enable:
 * x86_64 runs both there). The per-CPU preempt count would say so too, but a program can only
 * read it where kallsyms lists data symbols (CONFIG_KALLSYMS_ALL), which the CI host's kernel
 * does not. Where the kernel put the hook's arguments tells instead: a tracepoint's arguments
 * (the array bpf_trace_run builds), fentry's and a kprobe's registers are on the stack the hook
 * fired on. Not our own frame: since 6.13 a tracing program with a frame over 64 bytes runs on a
 * per-CPU private stack (0xffffe8ff... on the CI host's 6.18, 2026-11-26), which made every
 * completion look like an interrupt's to the code that compared our frame's address. The
 * address is read as a plain number through a probe read of a copy of the pointer (the verifier
 * does not let a pointer be compared with a number). ksoftirqd and threaded interrupt handlers
 * run on their own stacks: they count as tasks. */
static __always_inline bool on_task_stack(void *ctx)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	__u64 base = (__u64)BPF_CORE_READ(task, stack);
	__u64 at = 0;
	void *where = ctx;

	bpf_probe_read_kernel(&at, sizeof(at), &where);
	return at - base < IOSTACK_THREAD_SIZE;
}

/* ---- the completion mark -------------------------------------------------------------------- */

/* The submitters a request's bios came from, as many as are kept (merged requests carry
 * several). */
#define MARK_OWNERS 4
/* Flushes one request's end may include (a preflush and a postflush). */
#define MARK_FLUSHES 4

struct completion_mark {
	__u64 ts;       /* completion time (a worker's mark: when its work began); 0: no live mark */
	__u64 task;     /* the task current then */
	__u64 issue;    /* when it was issued to the device, 0 if not stamped */
	__u64 queued;   /* when its first bio entered the block layer, 0 if unknown */
	__u64 dev_ns;   /* its device time: issue to end, or its data step and its flushes */
	__u64 data_issue; /* a flush-sequenced request's data step (0: none) */
	__u64 data_end;
	__u64 flush_issue[MARK_FLUSHES]; /* the flushes it includes: their device intervals */
	__u64 flush_end[MARK_FLUSHES];
	__u32 flush_dev;
	__u32 ctx;      /* on_task_stack() at the completion */
	__u32 kind;     /* enum req_kind */
	__u32 waited;   /* a traced call waited for it (counted once) */
	__u32 flags;    /* ORIGIN_F_* of its first bio */
	__u32 nown;
	__u32 owners[MARK_OWNERS]; /* the submitters' thread ids (initial namespace) */
	struct req_seen req;
};

/* Slot 0: this CPU's last completion; slot 1: the mark of the work a worker runs here. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct completion_mark);
} marks SEC(".maps");

/* Work queued while a completion's mark was live, by work_struct address, until a worker runs
 * it. LRU: work that is never run (cancelled) ages out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct completion_mark);
} deferred SEC(".maps");

/* Work items in `deferred` not yet taken, or more (an entry overwritten, or aged out before its
 * work ran, is never taken): while it is 0, which is nearly always, a worker starting work
 * looks nothing up. Every work item of the machine passes workqueue_execute_start; the lookup
 * that misses was 60 ns of its 127 on the CI host (2026-11-26). */
__u64 deferred_pending = 0;

/* How long after a completion a wakeup on its CPU may still be its doing. Microseconds on
 * hardware; under QEMU's single-threaded TCG (the kernel matrix) a vCPU can stop in between:
 * 1.85 ms from block_rq_complete to the waiter's sched_waking in one hardirq was seen in the
 * 5.10 VM (2026-11-25, bpf_printk; 1 of 320 completions, the one a 1 ms limit missed). The mark
 * is closed anyway at the CPU's next switch or completion: the limit only keeps a later
 * interrupt on top of the same task from charging its wakeups to an old completion. */
const volatile __u64 mark_ttl_ns = 10000000;

static __always_inline struct completion_mark *cpu_mark(__u32 slot)
{
	return bpf_map_lookup_elem(&marks, &slot);
}

static __always_inline struct completion_mark *this_cpu_mark(void)
{
	return cpu_mark(0);
}

/* The CPU switches tasks: whatever completion ran here has finished its wakeups (a worker
 * between two work items, too). */
static __always_inline void close_mark(void)
{
	struct completion_mark *m = cpu_mark(0);

	if (m && m->ts)
		m->ts = 0;
	m = cpu_mark(1);
	if (m && m->ts)
		m->ts = 0;
}

/* `ctx`: the calling program's arguments (on_task_stack). */
static __always_inline bool mark_live(struct completion_mark *m, __u64 now, void *ctx)
{
	if (!m || !m->ts || now < m->ts || now - m->ts > mark_ttl_ns)
		return false;
	return m->task == bpf_get_current_task() && m->ctx == on_task_stack(ctx);
}

/* The live mark of this CPU for a wakeup now (a completion's, else the work's a worker runs),
 * or NULL. */
static __always_inline struct completion_mark *live_mark(__u64 now, void *ctx)
{
	struct completion_mark *m = cpu_mark(0);

	if (mark_live(m, now, ctx))
		return m;
	m = cpu_mark(1);
	/* A worker's work may run for longer than a completion's wakeups: no time limit. */
	if (m && m->ts && m->task == bpf_get_current_task())
		return m;
	return NULL;
}

/* Whether the request `m` describes was submitted by thread `gtid`. */
static __always_inline bool mark_owned_by(struct completion_mark *m, __u32 gtid)
{
	for (int i = 0; i < MARK_OWNERS; i++) {
		if (i >= m->nown)
			break;
		if (m->owners[i] == gtid)
			return true;
	}
	return false;
}

/* workqueue_queue_work(req_cpu, pwq, work): in a completion's context, the work carries its
 * mark. */
static __always_inline int queue_work_args(__u64 *args, bool typed)
{
	struct completion_mark *m = cpu_mark(0);
	__u64 work = args[2];

#ifdef IOSTACK_MUTANT_WORKER_NOT_CARRIED
	/* Mutant: work queued by a completion carries no mark: the worker's wakeups are no I/O's. */
	return 0;
#endif
	/* Most work is queued outside a completion (none on this CPU, or another task's): no
	 * clock read then. */
	if (!m || !m->ts || m->task != bpf_get_current_task() ||
	    !mark_live(m, bpf_ktime_get_ns(), args))
		return 0;
	/* Counted before the work is queued (this tracepoint precedes insert_work), so a worker
	 * that runs it finds the count raised. */
	if (!bpf_map_update_elem(&deferred, &work, m, BPF_ANY))
		__sync_fetch_and_add(&deferred_pending, 1);
	return 0;
}

/* workqueue_execute_start(work): the worker holds the mark of the completion that queued it. */
static __always_inline int execute_start_args(__u64 *args, bool typed)
{
	__u64 work = args[0];
	struct completion_mark *d, *m;

	if (!deferred_pending)
		return 0;
	d = bpf_map_lookup_elem(&deferred, &work);
	if (!d || !d->ts)
		return 0;
	m = cpu_mark(1);
	if (!m)
		return 0;
	*m = *d;
	d->ts = 0;
	__sync_fetch_and_add(&deferred_pending, -1);
	m->ts = bpf_ktime_get_ns();
	m->task = bpf_get_current_task();
	m->ctx = 1;
	return 0;
}

/* workqueue_execute_end(work[, function]): its wakeups are over. */
static __always_inline int execute_end_args(__u64 *args, bool typed)
{
	struct completion_mark *m = cpu_mark(1);

	if (m && m->ts)
		m->ts = 0;
	return 0;
}

TP_TWINS(workqueue_queue_work, queue_work, queue_work_args)
TP_TWINS(workqueue_execute_start, execute_start, execute_start_args)
TP_TWINS(workqueue_execute_end, execute_end, execute_end_args)

/* ---- the flush machinery's flushes ---------------------------------------------------------- */

#define FLUSH_RING 8

struct flush_ring {
	__u32 next;
	__u32 pad;
	__u64 issue[FLUSH_RING];
	__u64 end[FLUSH_RING];
	__u8 waited[FLUSH_RING];
};

/* By disk (kernel dev_t). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct flush_ring);
} flush_rings SEC(".maps");

const struct flush_ring flush_ring_zero = {};

/* The machinery's flush request ended on `dev`: [issue, end] on the device. */
static __always_inline void flush_done(__u32 dev, __u64 issue, __u64 end)
{
	struct flush_ring *r = bpf_map_lookup_elem(&flush_rings, &dev);
	__u32 i;

	if (!r) {
		bpf_map_update_elem(&flush_rings, &dev, &flush_ring_zero, BPF_NOEXIST);
		r = bpf_map_lookup_elem(&flush_rings, &dev);
		if (!r)
			return;
	}
	i = r->next % FLUSH_RING;
	r->issue[i] = issue ? issue : end;
	r->end[i] = end;
	r->waited[i] = 0;
	r->next = i + 1;
}

/* A flush-sequenced request that waited since `since` ends now on `dev`: the flushes made in
 * between are its own (a flush serves every request waiting for one). Their device intervals go
 * into m->flush_issue/flush_end, in the order they ended; their device time, added up. */
static __always_inline __u64 flushes_within(__u32 dev, __u64 since, __u64 now,
					    struct completion_mark *m)
{
	struct flush_ring *r = bpf_map_lookup_elem(&flush_rings, &dev);
	__u64 sum = 0, floor = 0;
	__u32 n = 0;

	m->flush_dev = dev;
	if (!r)
		return 0;
	for (int k = 0; k < FLUSH_RING; k++) {
		__u32 i = (r->next + k) % FLUSH_RING;
		__u64 a = r->issue[i], b = r->end[i];

		if (!b || a < since || b > now || n >= MARK_FLUSHES)
			continue;
		if (a < floor)
			a = floor;
		if (b > a)
			sum += b - a;
		floor = b;
		m->flush_issue[n & (MARK_FLUSHES - 1)] = a;
		m->flush_end[n & (MARK_FLUSHES - 1)] = b;
		n++;
	}
	return sum;
}

/* The device time of the request `m` describes within [s, e]: from its issue to its end, or
 * its data step and the flushes made for it. */
static __always_inline __u64 mark_device_within(struct completion_mark *m, __u64 s, __u64 e)
{
	__u64 sum = 0, a, b;

	if (m->issue) {
		a = m->issue > s ? m->issue : s;
		b = m->ts < e ? m->ts : e;
		return b > a ? b - a : 0;
	}
	if (m->data_end) {
		a = m->data_issue > s ? m->data_issue : s;
		b = m->data_end < e ? m->data_end : e;
		if (b > a)
			sum += b - a;
	}
	for (int j = 0; j < MARK_FLUSHES; j++) {
		if (!m->flush_end[j])
			break;
		a = m->flush_issue[j] > s ? m->flush_issue[j] : s;
		b = m->flush_end[j] < e ? m->flush_end[j] : e;
		if (b > a)
			sum += b - a;
	}
	return sum;
}

/* The flushes a request's end included were waited for (once each). */
static __always_inline void credit_flushes(struct completion_mark *m, __u64 *waited_flush)
{
	struct flush_ring *r;

	if (!m->flush_end[0])
		return;
	r = bpf_map_lookup_elem(&flush_rings, &m->flush_dev);
	if (!r)
		return;
	for (int j = 0; j < MARK_FLUSHES; j++) {
		if (!m->flush_end[j])
			break;
		for (int i = 0; i < FLUSH_RING; i++) {
			if (r->end[i] == m->flush_end[j] && !r->waited[i]) {
				r->waited[i] = 1;
				__sync_fetch_and_add(waited_flush, 1);
			}
		}
	}
}

/* ---- every thread's sleeps -------------------------------------------------------------------- */

#define HISTORY_WAITS 16

/* A thread's recent spells of waiting for I/O, oldest first from `next`: its I/O waits whole,
 * and of its other sleeps exactly the spells its wakers waited for I/O (copied from theirs as
 * it is woken), so that a chain of wakers passes on when each link waited, not how much.
 * Keeping a sleep's share instead, spread evenly over it, gave 8 writers convoyed on one
 * file's lock 0.30-0.69 s more other sleep than ftrace's switches and wakeups said in 8 runs
 * of 41 (30 s of calls each; 6.12 TCG guests, 7 side by side beside 2 CPU hogs, 2026-11-29):
 * a spell of the holder on a CPU is at one end of a waiter's sleep, not spread over it. */
struct io_history {
	__u64 wait_start;              /* the in_iowait sleep in progress, 0 if none */
	__u32 next;                    /* ring position of the next spell */
	__u32 count;                   /* spells recorded (saturating) */
	__u64 start[HISTORY_WAITS];
	__u64 end[HISTORY_WAITS];
};

/* By thread id, preallocated (updates from inside the scheduler never allocate), emptied when a
 * thread exits (sched_process_exit), never evicted: a thread that finds no room is counted
 * (chain_cut), since a chain through it would be cut. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct io_history);
} io_histories SEC(".maps");

const struct io_history io_history_zero = {};

static __always_inline struct io_history *history_of(__u32 tid, bool create)
{
	struct io_history *h = bpf_map_lookup_elem(&io_histories, &tid);

	if (h || !create)
		return h;
	if (bpf_map_update_elem(&io_histories, &tid, &io_history_zero, BPF_NOEXIST) &&
	    !(h = bpf_map_lookup_elem(&io_histories, &tid))) {
		count_loss(LOSS_CHAIN_CUT);
		return NULL;
	}
	return bpf_map_lookup_elem(&io_histories, &tid);
}

static __always_inline void history_add(struct io_history *h, __u64 start, __u64 end)
{
	__u32 i = h->next % HISTORY_WAITS;

	h->start[i] = start;
	h->end[i] = end;
	h->next = i + 1;
	if (h->count < HISTORY_WAITS + 1)
		h->count++;
}

/* A thread goes to sleep in an I/O wait. */
static __always_inline void io_wait_begins(__u32 tid, __u64 now)
{
	struct io_history *h = history_of(tid, true);

	if (h)
		h->wait_start = now;
}

/* A thread in an I/O wait is woken: the wait goes into its history, wholly I/O. A traced call's
 * thread records its sleeps itself (history_of_io_sleep, waker_io_within). */
static __always_inline void io_wait_ends(__u32 tid, __u64 now)
{
	struct io_history *h = bpf_map_lookup_elem(&io_histories, &tid);

	if (!h || !h->wait_start || now < h->wait_start)
		return;
	history_add(h, h->wait_start, now);
	h->wait_start = 0;
}

/* A traced call's sleep [start, end] that waited for I/O throughout (its own, or others'), for
 * the threads it wakes later. */
static __always_inline void history_of_io_sleep(__u32 tid, __u64 start, __u64 end)
{
	struct io_history *h = history_of(tid, true);

	if (!h)
		return;
	h->wait_start = 0;
	history_add(h, start, end);
}

/* How much of [from, to] the current task spent waiting for I/O, by its recorded spells; each
 * piece also goes into the history of `wakee`, the thread it wakes, whose sleep it ended. A
 * history that has wrapped and no longer reaches back to `from` while the thread was alive
 * then cuts the chain (counted). */
static __always_inline __u64 waker_io_within(__u64 from, __u64 to, __u32 wakee)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct io_history *h = bpf_map_lookup_elem(&io_histories, &tid);
	struct io_history *w = NULL;
	__u64 sum = 0, a, b, oldest = ~0ULL;
	bool looked = false;
	__u32 i;

	if (!h)
		return 0;
	/* Oldest first, so that the wakee's ring, if it wraps, loses its oldest. */
	for (int k = 0; k < HISTORY_WAITS; k++) {
		i = (h->next + k) % HISTORY_WAITS;
		if (!h->end[i])
			continue;
		if (h->start[i] < oldest)
			oldest = h->start[i];
		a = h->start[i] > from ? h->start[i] : from;
		b = h->end[i] < to ? h->end[i] : to;
		if (b <= a)
			continue;
		sum += b - a;
		if (!looked) {
			looked = true;
			w = history_of(wakee, true);
			if (w)
				w->wait_start = 0;
		}
#ifndef IOSTACK_MUTANT_CHAIN_NOT_PASSED
		/* (Mutant CHAIN_NOT_PASSED: the wakee keeps none of them, so the next link of a
		 * chain sees only this one's own I/O waits.) */
		if (w)
			history_add(w, a, b);
#endif
	}
	if (h->count > HISTORY_WAITS && oldest > from)
		count_loss(LOSS_CHAIN_CUT);
	return sum < to - from ? sum : to - from;
}

/* A thread exits: its history goes (the map is never evicted). */
static __always_inline void history_forget(__u32 tid)
{
	bpf_map_delete_elem(&io_histories, &tid);
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
