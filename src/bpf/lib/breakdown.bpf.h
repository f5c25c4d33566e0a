/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A call's time split into parts (lib/breakdown.h) as it happens, from the scheduler's and the
 * block layer's tracepoints. Per thread, a call in progress is in one state: on a CPU, runnable
 * (woken or preempted, waiting for a CPU), or sleeping. Every transition adds the time since the
 * last one to one part (a sleep: to the parts its cause splits it into), so the parts of a call
 * add up to its duration to the nanosecond, by construction.
 *
 * A wakeup is seen twice: sched_waking, in the waker's context, tells what ended the sleep (and
 * the sleep is charged up to then); sched_wakeup, once the task is on a run queue, starts its
 * wait for a CPU, as the kernel's own run_delay (schedstat) counts it. Between the two, the
 * time goes to the part that ended the sleep.
 *
 * A sleep is charged to what ended it (lib/wake_cause.bpf.h): the completion of a request the
 * call submitted (split into OS queue and device time by the union of the call's requests' time
 * on the device), of someone else's request, or a thread's I/O waits during the sleep (one hop);
 * else it is other sleep, or others' I/O if the kernel called it an I/O wait.
 *
 * The tool provides, before including this header: the THREAD_STATE `calls` of struct
 * call_state, and includes lib/wake_cause.bpf.h. */
#ifndef IOSTACK_BREAKDOWN_BPF_H
#define IOSTACK_BREAKDOWN_BPF_H

#include "lib/breakdown.h"
#include "lib/wake_cause.bpf.h"
#include "lib/losses.bpf.h"

#define CALL_REQS 8
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
	__u8 has_io;        /* it submitted a bio: its thread's call_io is its own */
	__u8 woken_part;    /* STATE_WOKEN: the part that ended the sleep */
	__u8 pad[3];
	__u32 ios;          /* requests it waited for that were not its own */
	__u32 nreq;         /* of them in reqs[] */
	__u32 via_pid;      /* the last waker charged (one hop), for --slow */
	char via_comm[BREAKDOWN_COMM_LEN];
	char fs[16];        /* the filesystem type its filesystem layer saw */
	struct req_seen reqs[CALL_REQS];
};

/* The requests a call submitted, reached from the completion's context by call id. One entry
 * per thread (by tid), taken over in place by each of its calls that submits a bio (call_io_begin)
 * and let go when the call returns (live 0): a hash insert at a call's first bio and a delete at
 * its return cost more than the rest of the two programs together (benches/iostack-cost). */
struct call_io {
	__u32 seq;          /* the call whose requests these are (call_state.seq) */
	__u32 live;         /* that call is in progress */
	__u64 sleep_start;  /* the call's sleep in progress (0: not sleeping) */
	/* The time during that sleep when one of its requests was on the device, in completion
	 * order: closed runs, and the run in progress [run_start, run_end]. */
	__u64 closed;
	__u64 floor;        /* the end of the last closed run */
	__u64 run_start;
	__u64 run_end;
	__u32 ios;          /* its requests that completed while it was in progress */
	__u32 nreq;
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

/* The requests of call `id` while it is in progress, or NULL. */
static __always_inline struct call_io *call_io_of(__u64 id)
{
	__u32 tid = id >> 32;
	struct call_io *io = bpf_map_lookup_elem(&call_ios, &tid);

	return io && io->live && io->seq == (__u32)id ? io : NULL;
}

/* Call `id` submits its first bio: its thread's entry is now its own. False if the map refused
 * (counted). */
static __always_inline bool call_io_begin(__u64 id)
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
	io->sleep_start = io->closed = io->floor = io->run_start = io->run_end = 0;
	io->ios = io->nreq = 0;
	io->seq = (__u32)id;
	io->live = 1;
	return true;
}

/* Call `id`, which submitted a bio, returns: its requests, or NULL if its entry was evicted
 * while it ran (counted as a start the map could not keep). Its requests that end from now
 * on are no call's own. */
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
static __always_inline void device_union_add(struct call_io *io, __u64 a, __u64 b)
{
	if (a < io->floor)
		a = io->floor;
	if (b <= a)
		return;
	if (!io->run_end) {
		io->run_start = a;
		io->run_end = b;
		return;
	}
	if (a <= io->run_end) {
		if (a < io->run_start)
			io->run_start = a;
		if (b > io->run_end)
			io->run_end = b;
		return;
	}
	io->closed += io->run_end - io->run_start;
	io->floor = io->run_end;
	io->run_start = a;
	io->run_end = b;
}

static __always_inline __u64 device_union(struct call_io *io)
{
	return io->closed + (io->run_end > io->run_start ? io->run_end - io->run_start : 0);
}

static __always_inline void append_req(struct req_seen *reqs, __u32 *n, struct req_seen *r)
{
	__u32 i = *n;

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

/* A request ended that `m` describes; if the call that submitted it is in progress, it is its
 * own: counted, remembered, and its device time added to the sleep's union. True if so. */
static __always_inline bool own_request_ended(struct completion_mark *m, __u64 now)
{
	struct call_io *io;
	__u64 a;

	if (m->origin != ORIGIN_CALL)
		return false;
	io = call_io_of(m->call);
	if (!io)
		return false;
	__sync_fetch_and_add(&io->ios, 1);
	append_req(io->reqs, &io->nreq, &m->req);
	if (io->sleep_start && m->issue) {
		a = m->issue > io->sleep_start ? m->issue : io->sleep_start;
		device_union_add(io, a, now);
	}
	return true;
}

/* A call's thread leaves its CPU: runnable (preempted) or going to sleep. */
static __always_inline void call_switched_out(struct call_state *st, __u32 tid, bool runnable,
					      bool iowait, __u64 now)
{
	struct call_io *io;

	charge(st, PART_CPU, now);
	if (runnable) {
		st->state = STATE_RUNNABLE;
		return;
	}
	st->state = STATE_SLEEPING;
	st->iowait = iowait;
	if (!st->has_io)
		return;
	io = call_io_of(call_id(tid, st->seq));
	if (io) {
		io->sleep_start = st->last;
		io->closed = io->floor = io->run_start = io->run_end = 0;
	}
}

/* The sleep in progress ends now, with what ended it: a live completion mark (or NULL), and
 * whether the waker is a task in its own context (for the one-hop charge). */
static __always_inline void call_sleep_ends(struct call_state *st, __u32 tid,
					    struct completion_mark *m, bool task_waker, __u64 now)
{
	__u64 s = st->last, len, dev = 0, ov, a, b;
	struct call_io *io = NULL;
	struct req_seen r;

	now = advance(st, now);
	len = now - s;
	st->state = STATE_WOKEN;
	st->woken_part = PART_SLEEP;
	st->last = now;
	if (st->has_io) {
		io = call_io_of(call_id(tid, st->seq));
		if (io)
			io->sleep_start = 0;
	}
	if (m && st->iowait) {
		bool own = m->origin == ORIGIN_CALL && m->call == call_id(tid, st->seq);

		if (own || m->origin == ORIGIN_THROTTLED) {
			if (io)
				dev = device_union(io);
			if (!own && m->issue) {
				/* Not in the union: its bio was queued by the throttle, not here. */
				a = m->issue > s ? m->issue : s;
				b = m->ts < now ? m->ts : now;
				if (b > a)
					dev += b - a;
			}
			if (dev > len)
				dev = len;
			st->parts[PART_IO_DEVICE] += dev;
			st->parts[PART_IO_QUEUE] += len - dev;
			/* Completing in the OS until the task is on a run queue. */
			st->woken_part = PART_IO_QUEUE;
		} else {
			st->parts[PART_OTHERS_IO] += len;
			st->woken_part = PART_OTHERS_IO;
		}
		if (!own) {
			r = m->req;
			r.how = m->origin == ORIGIN_THROTTLED ? REQ_THROTTLED : REQ_OTHERS;
			st->ios++;
			append_req(st->reqs, &st->nreq, &r);
		}
		if (!m->waited) {
			m->waited = 1;
			if (m->kind < KINDS)
				__sync_fetch_and_add(&waited[m->kind], 1);
		}
		return;
	}
	if (st->iowait) {
		/* The kernel calls it an I/O wait and no request ended it (dirty-page
		 * throttling waits for writeback on a timer this way). */
		st->parts[PART_OTHERS_IO] += len;
		st->woken_part = PART_OTHERS_IO;
		return;
	}
	ov = task_waker ? waker_io_within(s, now) : 0;
	if (ov) {
		__u64 pid_tgid = current_ids();

		st->via_waker_ns += ov;
		st->via_pid = pid_tgid >> 32;
		bpf_get_current_comm(st->via_comm, sizeof(st->via_comm));
	}
	st->parts[PART_OTHERS_IO] += ov;
	st->parts[PART_SLEEP] += len - ov;
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
		call_sleep_ends(st, tid, NULL, false, now);
	}
	call_enqueued(st, now);
	charge(st, st->state == STATE_RUNNABLE ? PART_RUN_QUEUE : PART_CPU, now);
	st->state = STATE_ON_CPU;
}

#endif
