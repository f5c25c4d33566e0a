/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A call's time split into parts (lib/breakdown.h) that add up to it to the nanosecond.
 *
 * Where the time went is read from the scheduler's own accounting of the thread
 * (lib/thread_clock.bpf.h) at the call's entry and exit: its time off a CPU, of which the run
 * queue's share (run_delay); the rest of it is the call's sleeps, and the call's time on a CPU
 * is what remains of its duration. A call that never left its CPU (no switch counted) is all on
 * a CPU, with nothing else read. No program runs on the machine's context switches: what ended
 * each sleep is seen once, from the waker's side (sched_waking runs in the waker's context),
 * where the sleep's raw length (the wakeup's ktime minus when the thread left its CPU, in the
 * scheduler's clock) is added to the part that ended it; the exit solves the offset between
 * the two clocks from the call's own figures (its sleeps add up to its time off a CPU less
 * its waits for one), so the parts add up exactly.
 *
 * A sleep is charged to what ended it (lib/wake_cause.bpf.h, call_sleep_ends): the completion
 * of a request its thread submitted or the kernel made for it (split into OS queue and device
 * time by the union of the thread's requests' time on the device), directly or through a kernel
 * worker; of someone else's request; or what its waker waited for meanwhile, and so on along
 * the chain; else it is other sleep, or others' I/O if the kernel called it an I/O wait.
 *
 * The validator (shadow_switches, for the tests): the same parts from every switch and wakeup
 * of the machine (sched_switch, sched_waking, sched_wakeup), per thread in one state (on a
 * CPU, runnable, sleeping), each transition adding the time since the last one to one part.
 *
 * The tool provides, before including this header: the THREAD_STATE `calls` of struct
 * call_state, and includes lib/wake_cause.bpf.h. */
#ifndef IOSTACK_BREAKDOWN_BPF_H
#define IOSTACK_BREAKDOWN_BPF_H

#include "lib/breakdown.h"
#include "lib/wake_cause.bpf.h"
#include "lib/losses.bpf.h"
#include "lib/thread_clock.bpf.h"

#define CALL_REQS 8

/* The validator: the parts from every context switch and wakeup (tests only). */
const volatile bool shadow_switches = false;
/* --slow: each call keeps the requests it waited for, for its journey; nothing else shows them
 * (an 88-byte copy per request and per completion's description otherwise). */
const volatile bool keep_requests = false;

/* ktime - the scheduler's rq->clock, as the last call that slept solved it: it places a sleep
 * in ktime for the windows that need one (its own requests' device time within it, what its
 * waker waited for meanwhile). 0 until a call's entry first bounds it. */
__s64 clock_offset = 0;
#define CALL_LAYERS 2

/* Requests that ended on the traced disks, per kind (enum req_kind), and of those, the ones a
 * traced call waited for: user space shows the difference as I/O no traced call waited for.
 * Cumulative; read by user space in this order. */
__u64 ended[KINDS];
__u64 waited[KINDS];

enum call_state_kind {
	STATE_ON_CPU = 0,
	STATE_RUNNABLE = 1,
	STATE_SLEEPING = 2,
	STATE_WOKEN = 3,    /* woken, not yet on a run queue: time goes to woken_part */
};

/* The call a thread is in. */
struct call_state {
	__u64 start;        /* sys_enter; 0: no call in progress */
	__u64 last;         /* the last transition: parts cover [start, last] */
	__u64 parts[PARTS];
	__u64 via_waker_ns; /* of PART_OTHERS_IO: charged through a waker's I/O waits */
	__u64 layer_start[CALL_LAYERS];
	__u64 layer_ns[CALL_LAYERS];
	__u64 fd;           /* the first argument */
	__u32 seq;          /* this thread's call count: the call id is tid << 32 | seq */
	__u32 nr;           /* syscall number */
	__u32 layer_depth[CALL_LAYERS];
	__u8 op;            /* 1 + index of the traced operation */
	__u8 state;         /* enum call_state_kind */
	__u8 iowait;        /* the sleep in progress is an I/O wait (in_iowait) */
	__u8 has_io;        /* it submitted a bio or slept: its thread's call_io is bound to it */
	__u8 woken_part;    /* STATE_WOKEN: the part that ended the sleep */
	__u8 moved_asleep;  /* a sleep of it was moved to another CPU (its run_delay is no run queue) */
	__u8 pad[2];
	__u32 ios;          /* requests it waited for that were not its own */
	__u32 others_ios;   /* of them, those someone else submitted (REQ_OTHERS) */
	__u32 nreq;         /* of them in reqs[] */
	__u32 via_pid;      /* the last waker charged, for --slow */
	__u32 woken_leaving; /* wakings seen while its thread still held its CPU (no sleep yet) */
	char via_comm[BREAKDOWN_COMM_LEN];
	char fs[16];        /* the filesystem type its filesystem layer saw */
	struct req_seen reqs[CALL_REQS];
	/* The scheduler's accounting of the thread at the call's entry, and per part that ended
	 * a sleep: the sleeps' raw lengths (wakeup in ktime - left its CPU in rq->clock), how
	 * many, and the time moved from that part to another within them (device time of its
	 * own I/O, others' I/O through a waker), for the exit to settle. */
	struct thread_clock at_entry;
	__s64 sleep_raw[PARTS];
	__s64 moved[PARTS];
	__u32 sleeps[PARTS];
};

/* A union of intervals on the device, added in completion order: closed runs, and the run in
 * progress [run_start, run_end] (runs_add). */
struct device_runs {
	__u64 closed;
	__u64 floor;        /* the end of the last closed run */
	__u64 run_start;
	__u64 run_end;
};

/* A thread's own requests while it is in a traced call, reached from the completion's context
 * by its thread id: "own" is the thread's (any of its calls, its readahead, a plug it flushed,
 * and what the kernel did on its behalf: lib/bio_origin.bpf.h), so read N+1 waits for the
 * readahead read N started as its own I/O. One entry per thread, taken over in place by each of
 * its calls that submits a bio or sleeps (call_io_bind) and let go when the call returns (live
 * 0): a hash insert per call and a delete at its return cost more than the rest of the two
 * programs together (benches/iostack-cost). */
struct call_io {
	__u32 seq;          /* the call it is bound to (call_state.seq) */
	__u32 live;         /* that call is in progress */
	__u64 sleep_start;  /* the validator: the call's sleep in progress (0: not sleeping);
			     * else since when its requests count toward its next sleep */
	/* The time during that sleep when one of the thread's requests was on the device. */
	struct device_runs dev;
	__u32 sleep_ios;    /* its requests that ended during the sleep in progress */
	__u32 ios;          /* its requests that ended while the call was in progress */
	__u32 nreq;
	__u32 pad;
	struct req_seen reqs[CALL_REQS];
};

/* By tid. LRU: the entries of threads that are gone age out (there is no exit hook in task
 * storage mode). An entry evicted while its call is in progress is counted (call_io_end). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct call_io);
} call_ios SEC(".maps");

const struct call_io call_io_zero = {};

static __always_inline __u64 call_id(__u32 tid, __u32 seq)
{
	return ((__u64)tid << 32) | seq;
}

/* Thread `tid`'s entry while its call is in progress, or NULL. */
static __always_inline struct call_io *thread_io(__u32 tid)
{
	struct call_io *io = bpf_map_lookup_elem(&call_ios, &tid);

	return io && io->live ? io : NULL;
}

/* The requests of call `id` while it is in progress, or NULL. */
static __always_inline struct call_io *call_io_of(__u64 id)
{
	struct call_io *io = thread_io(id >> 32);

	return io && io->seq == (__u32)id ? io : NULL;
}

/* Call `id` submits its first bio or goes to sleep first: its thread's entry is now its own,
 * its requests' device time counted from `window` (its sleep in progress for the validator,
 * since its last wakeup otherwise). False if the map refused (counted). */
static __always_inline bool call_io_bind(__u64 id, __u64 window)
{
	__u32 tid = id >> 32;
	struct call_io *io = bpf_map_lookup_elem(&call_ios, &tid);

	if (!io) {
		if (bpf_map_update_elem(&call_ios, &tid, &call_io_zero, BPF_ANY) ||
		    !(io = bpf_map_lookup_elem(&call_ios, &tid))) {
			count_loss(LOSS_START_FULL);
			return false;
		}
	}
	io->live = 0;
	io->dev = (struct device_runs){};
	io->sleep_start = window;
	io->sleep_ios = io->ios = io->nreq = 0;
	io->seq = (__u32)id;
	io->live = 1;
	return true;
}

/* Call `id`, bound to its thread's entry, returns: its requests, or NULL if its entry was
 * evicted while it ran (counted as a start the map could not keep). The thread's requests that
 * end from now on are no call's. */
static __always_inline struct call_io *call_io_end(__u64 id)
{
	struct call_io *io = call_io_of(id);

	if (!io)
		count_loss(LOSS_START_FULL);
	else
		io->live = 0;
	return io;
}

/* Adds [a, b] (device time of one request, clipped to the sleep) to the union. Requests come
 * in completion order (b does not decrease), so a run grows or closes; an interval starting
 * before the run is extended back only to the end of the last closed run, so nothing is
 * counted twice (a request issued before and completed after another one counts from the
 * earlier one's end). */
static __always_inline void runs_add(struct device_runs *u, __u64 a, __u64 b)
{
	if (a < u->floor)
		a = u->floor;
	if (b <= a)
		return;
	if (!u->run_end) {
		u->run_start = a;
		u->run_end = b;
		return;
	}
	if (a <= u->run_end) {
		if (a < u->run_start)
			u->run_start = a;
		if (b > u->run_end)
			u->run_end = b;
		return;
	}
	u->closed += u->run_end - u->run_start;
	u->floor = u->run_end;
	u->run_start = a;
	u->run_end = b;
}

static __always_inline __u64 runs_total(struct device_runs *u)
{
	return u->closed + (u->run_end > u->run_start ? u->run_end - u->run_start : 0);
}

static __always_inline void append_req(struct req_seen *reqs, __u32 *n, struct req_seen *r)
{
	__u32 i = *n;

	if (!keep_requests)
		return;
	if (i < CALL_REQS) {
		barrier_var(i);
		reqs[i] = *r;
		*n = i + 1;
	}
}

/* Time moves on for a call: everything since the last transition goes to `part`. The clock
 * never goes backwards for a call (a CPU's clock a few ns behind another's counts as 0), so
 * the parts always add up to last - start. */
static __always_inline __u64 advance(struct call_state *st, __u64 now)
{
	return now > st->last ? now : st->last;
}

static __always_inline void charge(struct call_state *st, __u32 part, __u64 now)
{
	now = advance(st, now);
	if (part < PARTS)
		st->parts[part] += now - st->last;
	st->last = now;
}

/* Adds a request's device intervals (its own issue to end, or its data step and the flushes
 * made for it) during the sleep in progress to a sleeping thread's union. */
static __always_inline void add_device_time(struct call_io *io, struct completion_mark *m,
					    __u64 data_issue, __u64 data_end, __u64 now)
{
	__u64 s = io->sleep_start, a, b;
	bool data_done = false;

	if (!s)
		return;
	for (int j = 0; j < MARK_FLUSHES; j++) {
		b = m->flush_end[j];
		if (!b)
			break;
		if (!data_done && data_end && data_end <= b) {
			a = data_issue > s ? data_issue : s;
			runs_add(&io->dev, a, data_end);
			data_done = true;
		}
		a = m->flush_issue[j] > s ? m->flush_issue[j] : s;
		runs_add(&io->dev, a, b);
	}
	if (!data_done && data_end) {
		a = data_issue > s ? data_issue : s;
		runs_add(&io->dev, a, data_end);
	}
	if (!data_end && !m->flush_end[0] && m->issue) {
		a = m->issue > s ? m->issue : s;
		runs_add(&io->dev, a, now);
	}
}

/* A request ended that `m` describes: for each of its submitters in a traced call, it is that
 * call's own: counted, remembered, and its device time added to the sleep's union. True if a
 * traced call's own. */
static __always_inline bool own_request_ended(struct completion_mark *m, __u64 data_issue,
					      __u64 data_end, __u64 now)
{
	struct call_io *io;
	bool any = false;

	for (int i = 0; i < MARK_OWNERS; i++) {
		if (i >= m->nown)
			break;
		io = thread_io(m->owners[i]);
		if (!io)
			continue;
		any = true;
		__sync_fetch_and_add(&io->ios, 1);
		append_req(io->reqs, &io->nreq, &m->req);
		if (io->sleep_start) {
#ifndef IOSTACK_MUTANT_OWN_VIA_WAKER
			/* (Mutant OWN_VIA_WAKER: not counted, so an I/O wait woken with no own mark
			 * after its own requests ended is others' I/O, through a waker or not.) */
			io->sleep_ios++;
#endif
			add_device_time(io, m, data_issue, data_end, now);
		}
	}
	return any;
}

/* A call's thread leaves its CPU: runnable (preempted) or going to sleep. */
static __always_inline void call_switched_out(struct call_state *st, __u32 tid, bool runnable,
					      bool iowait, __u64 now)
{
	struct call_io *io;

	/* The validator saw the thread woken or preempted and never put on a CPU since: the
	 * kernel ran no program for that switch (the CI host's 6.18 runs none while a thread of
	 * its sandbox's PID 1 is current, and a switch's program runs as the task leaving: 5.04
	 * ms of a reader's wait for a CPU after such a switch were charged to its CPU,
	 * 2026-11-27). How that time splits between the run queue and the CPU is unknown. */
	if (st->state == STATE_RUNNABLE || st->state == STATE_WOKEN)
		count_loss(LOSS_NO_SWITCH);
	charge(st, PART_CPU, now);
	if (runnable) {
		st->state = STATE_RUNNABLE;
		return;
	}
	st->state = STATE_SLEEPING;
	st->iowait = iowait;
	if (!st->has_io) {
		if (!call_io_bind(call_id(tid, st->seq), 0))
			return;
		st->has_io = 1;
	}
	io = call_io_of(call_id(tid, st->seq));
	if (io) {
		io->sleep_start = st->last;
		io->dev = (struct device_runs){};
		io->sleep_ios = 0;
	}
}

/* What the current task waited for in [from, to], passed on to `wakee` (waker_io_within),
 * checked by the verifier once on its own: inlined, its loop over the history multiplied the
 * wakeup program's states. */
__noinline __u64 waker_io_within_now(__u64 from, __u64 to, __u32 wakee)
{
	return waker_io_within(from, to, wakee);
}

/* The flushes the mark in `slot` of this CPU includes were waited for (credit_flushes), checked
 * once on its own. */
__noinline int credit_flushes_of(__u32 slot)
{
	struct completion_mark *m = cpu_mark(slot);

	if (m)
		credit_flushes(m, &waited[KIND_FLUSH]);
	return 0;
}

/* A sleep of `len` ns, ending now, is `principal`'s, of which `amount2` (at most all of it) is
 * `part2`'s. The validator charges it at once (and the wait until the thread is on a run queue
 * goes to `principal`); otherwise its raw length goes to `principal`, for the exit to settle
 * (call_settle). */
static __always_inline void charge_sleep(struct call_state *st, __u32 principal, __u32 part2,
					 __u64 amount2, __u64 len, __s64 raw)
{
	if (principal >= PARTS || part2 >= PARTS)
		return;
	if (amount2 > len)
		amount2 = len;
	if (shadow_switches) {
		st->parts[principal] += len - amount2;
		st->parts[part2] += amount2;
		st->woken_part = principal;
		return;
	}
	st->sleep_raw[principal] += raw;
	st->sleeps[principal]++;
	st->moved[principal] -= amount2;
	st->moved[part2] += amount2;
}

/* Its own I/O ended the sleep: OS queue and device, split by the union of its requests' time
 * on the device (and `dev` of a request outside the union). */
static __always_inline void charge_own(struct call_state *st, struct call_io *io, __u64 dev,
				       __u64 len, __s64 raw)
{
	if (io)
		dev += runs_total(&io->dev);
	charge_sleep(st, PART_IO_QUEUE, PART_IO_DEVICE, dev, len, raw);
}

/* The sleep [s, now] ends, with what ended it: a live completion mark (or NULL), and whether
 * the waker is a task in its own context (a chain through its waits); `raw` is its length as
 * the two clocks give it (lib/thread_clock.bpf.h; 0 for the validator). `tid` is the sleeper's
 * thread id in the initial namespace. What ended it, first match wins:
 *   - a request its thread submitted, or the kernel made for it (the mark's owners); or one
 *     blk-throttle's dispatcher queued with its submitter unseen, which ends its I/O wait (its
 *     completion wakes the thread that waits for it): own I/O, whether the kernel called the
 *     sleep an I/O wait or not (an unaligned direct write waiting in inode_dio_wait);
 *   - someone else's request, in an I/O wait: others' I/O;
 *   - in an I/O wait, its own requests that ended while it slept (a completion a kernel worker
 *     finished: ext4's unwritten extents, btrfs's checksums): own I/O;
 *   - a task waker: what that task waited for during the sleep, its I/O waits and the chains
 *     behind them (others' I/O through the waker); the rest is others' I/O in an I/O wait
 *     (the kernel calls it one), other sleep otherwise. */
static __always_inline void call_sleep_ends(struct call_state *st, __u32 tid,
					    struct completion_mark *m, bool task_waker, __u64 s,
					    __u64 now, __s64 raw)
{
	__u64 len = now - s, dev = 0, ov;
	struct call_io *io = NULL;
	struct req_seen r;
	bool own_mark;

	if (st->has_io)
		io = call_io_of(call_id(tid, st->seq));
	own_mark = m && (mark_owned_by(m, tid) ||
			 ((m->flags & ORIGIN_F_DISPATCHED) && !m->nown && st->iowait));
	if (m && (own_mark || st->iowait)) {
		if (own_mark) {
			if (!mark_owned_by(m, tid)) {
				/* Not in the union: its submitter was unseen at its completion. */
				dev = mark_device_within(m, s, now);
				r = m->req;
				r.how = REQ_HELD;
				/* Held from the sleep's start to its dispatch, as far as we can see. */
				r.held_ns = m->queued > s ? m->queued - s : 0;
				if (r.queue_ns > r.held_ns && m->queued <= s)
					r.held_ns = 0;
				st->ios++;
				append_req(st->reqs, &st->nreq, &r);
			}
			charge_own(st, io, dev, len, raw);
		} else if (io && io->sleep_ios) {
			charge_own(st, io, 0, len, raw);
		} else {
			charge_sleep(st, PART_OTHERS_IO, PART_OTHERS_IO, 0, len, raw);
			r = m->req;
			r.how = REQ_OTHERS;
			st->ios++;
			st->others_ios++;
			append_req(st->reqs, &st->nreq, &r);
		}
		if (!m->waited) {
			m->waited = 1;
			if (m->kind < KINDS)
				__sync_fetch_and_add(&waited[m->kind], 1);
			credit_flushes_of(m == cpu_mark(0) ? 0 : 1);
		}
		if (!st->iowait)
			history_of_io_sleep(tid, s, now);
	} else if (st->iowait && io && io->sleep_ios) {
		charge_own(st, io, 0, len, raw);
	} else {
		ov = task_waker ? waker_io_within_now(s, now, tid) : 0;
		if (ov) {
			__u64 pid_tgid = current_ids();

			st->via_waker_ns += ov;
			st->via_pid = pid_tgid >> 32;
			bpf_get_current_comm(st->via_comm, sizeof(st->via_comm));
		}
		if (st->iowait) {
			/* The kernel calls it an I/O wait: what the waker waited for, and the rest
			 * (dirty-page throttling waits for writeback on a timer this way). */
			charge_sleep(st, PART_OTHERS_IO, PART_OTHERS_IO, 0, len, raw);
		} else {
			charge_sleep(st, PART_SLEEP, PART_OTHERS_IO, ov, len, raw);
		}
	}
	if (io) {
		/* Its requests count toward its next sleep from now on. */
		io->sleep_start = shadow_switches ? 0 : now;
		io->dev = (struct device_runs){};
		io->sleep_ios = 0;
	}
}

/* The validator: the sleep since the last transition ends now. */
static __always_inline void call_sleep_ends_now(struct call_state *st, __u32 tid,
						struct completion_mark *m, bool task_waker,
						__u64 now)
{
	__u64 s = st->last;

	now = advance(st, now);
	st->state = STATE_WOKEN;
	st->woken_part = PART_SLEEP;
	st->last = now;
	call_sleep_ends(st, tid, m, task_waker, s, now, 0);
}

/* A call's thread, off its CPU since `left` (rq->clock), is woken now (ktime). */
static __always_inline void call_woken(struct call_state *st, __u32 tid, bool iowait,
				       __s64 left, struct completion_mark *m, bool task_waker,
				       __u64 now)
{
	__s64 raw = (__s64)now - left;
	__u64 s = clock_offset ? (__u64)(left + clock_offset) : 0;

	/* The sleep began inside the call (the clocks' offset is known to within a run-queue
	 * wait's start, and unknown until a call bounded it). */
	if (s < st->last || s > now)
		s = st->last;
	if (!st->has_io) {
		if (!call_io_bind(call_id(tid, st->seq), s))
			return;
		st->has_io = 1;
	}
	st->iowait = iowait;
	call_sleep_ends(st, tid, m, task_waker, s, now, raw);
	st->last = now;
}

/* A thread in an I/O wait since `left` (rq->clock) is woken now: the wait goes into its
 * history, wholly I/O, for the threads it wakes later (once the clocks' offset is known). A
 * traced call's thread records its other sleeps itself (history_of_io_sleep, waker_io_within). */
static __always_inline void io_wait_ended(__u32 tid, __s64 left, __u64 now)
{
	struct io_history *h;
	__u64 s;

	if (!clock_offset)
		return;
	s = left + clock_offset;
	if (s >= now)
		return;
	h = history_of(tid, true);
	if (h)
		history_add(h, s, now);
}

/* a / k for a signed a (the BPF instruction set before v4 divides unsigned only). */
static __always_inline __s64 div_signed(__s64 a, __u32 k)
{
	return a < 0 ? -(__s64)((__u64)(-a) / k) : (__s64)((__u64)a / k);
}

/* The call returns now: its parts from the thread's accounting (lib/thread_clock.bpf.h). Its
 * time off a CPU is the fall of sum_exec_runtime - exec_start; of that, run_delay's rise is
 * run queue; the rest, its sleeps, goes to the parts that ended them: each sleep's raw length
 * is its length plus the clocks' offset, which the sum solves for. What the kernel took from
 * the thread while it held its CPU (steal time; IRQ time where the kernel accounts it) is in
 * the time off a CPU too: spread over its sleeps, or on a CPU for a call that never slept. */
static __always_inline void call_settle(struct call_state *st, struct task_struct *t, bool typed,
					__u64 now)
{
	__u64 total = now - st->start, off, runq, sleeps = 0, n = 0, sum = 0, big = 0;
	__s64 raw = 0, d, v;
	struct thread_clock c;
	__u32 top = PART_SLEEP;

	st->last = now;
	thread_clock_read(t, typed, &c);
	if (c.nvcsw == st->at_entry.nvcsw && c.nivcsw == st->at_entry.nivcsw) {
		/* It never left its CPU. */
		st->parts[PART_CPU] = total;
		return;
	}
	d = st->at_entry.gap - c.gap;
	off = d < 0 ? 0 : (__u64)d;
	if (off > total)
		off = total;
	runq = c.run_delay - st->at_entry.run_delay;
	if ((__s64)runq < 0 || runq > off)
		runq = (__s64)runq < 0 ? 0 : off;
	sleeps = off - runq;
	st->parts[PART_RUN_QUEUE] = runq;
	for (int i = PART_IO_QUEUE; i < PARTS; i++) {
		n += st->sleeps[i];
		raw += st->sleep_raw[i];
	}
	/* Each sleep is a voluntary switch: fewer wakeups seen than that, and the kernel ran no
	 * program for one (the CI host's 6.18 runs none while a thread of its sandbox's PID 1 is
	 * current, e.g. for a completion softirq on top of one: an fsync's I/O wait then showed as
	 * other sleep, 36 ms of 544, beside CI's builds, 2026-11-27). Said, not guessed. */
	/* (A waking that found the thread still on its CPU accounts for a switch it may then
	 * make: woken while leaving, its sleep is that moment. One that came before the thread
	 * could sleep accounts for none, and would hide an unseen wakeup of the same call; how
	 * often both meet in one call is not measured.) */
	if (n + st->woken_leaving < c.nvcsw - st->at_entry.nvcsw)
		count_loss(LOSS_NO_WAKE);
	if (!n) {
		/* Preempted only (the rest is what the kernel took from it on its CPU), or slept
		 * with its wakeup unseen (woken while it was still leaving its CPU). */
		if (c.nvcsw == st->at_entry.nvcsw) {
			st->parts[PART_CPU] = total - runq;
		} else {
			st->parts[PART_SLEEP] = sleeps;
			st->parts[PART_CPU] = total - off;
		}
		return;
	}
	/* The kernel's run_delay is not always the run queue: a thread that sleeps under 6.12's
	 * delayed dequeue stays on its run queue, the load balancer may move it while it
	 * sleeps, and the move counts the rest of the sleep as waiting for a CPU (a writer's
	 * run_delay rose 1084 ms in a 1194 ms write that slept on the inode's lock for most of
	 * it; another's 105 ms while its thread waited 1.2 ms for a CPU by ftrace's sched_waking
	 * and sched_switch; TCG guest, 2026-11-28). The sleeps' own lengths bound it: with the
	 * clocks' offset read now (exec_start is when the thread last took its CPU or ticked),
	 * what the sleeps leave of its time off a CPU is what it waited for one. Only then: that
	 * bound is n times one reading of the offset, and under TCG beside a busy host the
	 * offset read at a tiny sleep's end wandered 11 ms within one read's second, the exit's
	 * 5 ms below all of them (6.1 guest, 2026-11-28), so that the bound of a read that never
	 * moved was 24 ms below zero once in 12 runs, and CI's 2.4 ms where schedstat gave 44.7. */
	if (st->moved_asleep) {
		v = (__s64)off - (raw - (__s64)n * ((__s64)now - thread_left_cpu(t, typed)));
		if (v >= 0 && (__u64)v < runq) {
			runq = v;
			sleeps = off - runq;
			st->parts[PART_RUN_QUEUE] = runq;
		}
	}
	d = div_signed(raw - (__s64)sleeps, n);
	clock_offset = d;
	for (int i = PART_IO_QUEUE; i < PARTS; i++) {
		v = st->sleep_raw[i] - (__s64)st->sleeps[i] * d + st->moved[i];
		v = v < 0 ? 0 : v;
		st->parts[i] = v;
		sum += v;
		if ((__u64)v > big) {
			big = v;
			top = i;
		}
	}
	/* What division and clamping left over, to the largest part; the parts then add up to
	 * the sleeps exactly. */
	if (sum < sleeps) {
		if (top < PARTS)
			st->parts[top] += sleeps - sum;
	} else {
		__u64 over = sum - sleeps, take;

		for (int i = PART_IO_QUEUE; i < PARTS; i++) {
			take = st->parts[i] < over ? st->parts[i] : over;
			st->parts[i] -= take;
			over -= take;
		}
	}
	st->parts[PART_CPU] = total - off;
}

/* A woken call's thread is on a run queue: from now on it waits for a CPU. */
static __always_inline void call_enqueued(struct call_state *st, __u64 now)
{
	if (st->state != STATE_WOKEN)
		return;
	charge(st, st->woken_part, now);
	st->state = STATE_RUNNABLE;
}

/* A call's thread is put on a CPU. A sleep whose wakeup we never saw (the kernel did not run
 * our program) ends here, charged by the kernel's in_iowait flag alone. */
static __always_inline void call_switched_in(struct call_state *st, __u32 tid, __u64 now)
{
	if (st->state == STATE_SLEEPING) {
		count_loss(LOSS_NO_WAKE);
		call_sleep_ends_now(st, tid, NULL, false, now);
	}
	call_enqueued(st, now);
	charge(st, st->state == STATE_RUNNABLE ? PART_RUN_QUEUE : PART_CPU, now);
	st->state = STATE_ON_CPU;
}

#endif
