// SPDX-License-Identifier: GPL-2.0
/* iostack: the same I/O calls through every layer this kernel lets us trace, and each call's
 * time split into parts that add up to it (lib/breakdown.bpf.h): syscall enter/exit, the VFS
 * and filesystem functions inside the call (function slots, where fentry or kprobes work), the
 * scheduler's accounting of the thread and the wakeups that end its sleeps, and the block
 * requests the call waited for.
 *
 * Everything about a call is recorded once, when it returns, by the sys_exit program: its
 * latency per layer, its breakdown, and (--slow) its journey. Each report map has that one
 * writer, so its per-CPU values take plain adds. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/hist.bpf.h"
#include "lib/losses.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/disk_filter.bpf.h"
#include "lib/blk.bpf.h"
#include "lib/io_seen.bpf.h"
#include "lib/rq_starts.bpf.h"
#include "lib/thread_state.bpf.h"
#include "lib/file.bpf.h"
#include "lib/bio_origin.bpf.h"
#include "lib/breakdown.bpf.h"
#include "lib/syscalls.bpf.h"
#include "iostack.h"

#define FN_SLOTS IOSTACK_FN_SLOTS
#include "lib/fn_slots.bpf.h"

/* -P: totals per process; --per-cgroup (per_cgroup_depth, lib/per_cgroup.bpf.h): per cgroup. */
const volatile bool per_process = false;
/* --slow: journeys of calls at least this slow (want_journeys), instead of histograms. */
const volatile bool want_journeys = false;
const volatile __u64 slow_ns = 0;
/* The operation whose return value is the file descriptor (open), 0 if none is traced. */
const volatile __u8 open_op = 0;
/* --fs FS and -d DISK: only calls whose file is on that filesystem type, on that disk. */
const volatile bool filter_fs = false;
const volatile char fs_filter[FN_FS_LEN] = {};
const volatile __u32 disk_devs[IOSTACK_DISK_DEVS] = {};
/* sched_switch passes prev_state (5.18+); before, it is read from the task. */
const volatile bool switch_has_state = true;

/* Reserved so that the types reach the generated skeleton. */
struct journey _journey = {};
struct request_journey _request_journey = {};
struct layer_key _layer_key = {};
struct group_key _group_key = {};
struct cgroup_totals _cgroup_totals = {};
struct uring_totals _uring_totals = {};

THREAD_STATE(calls, struct call_state, 32768)

/* Index: generation * IOSTACK_OPS + op. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * IOSTACK_OPS);
	__type(key, __u32);
	__type(value, struct op_totals);
} op_totals SEC(".maps");

/* The histograms of the layers that have no filesystem type (syscall, VFS, block), by
 * (generation * IOSTACK_OPS + op) * LAYERS + layer: a hashed 32-byte key per call was a third
 * of sys_exit's time (benches/iostack-cost), and a hash of 1024 preallocated per-CPU
 * histograms was 5.7 MB of kernel memory on 2 CPUs (2.9 MB per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * IOSTACK_OPS * LAYERS);
	__type(key, __u32);
	__type(value, struct hist);
} op_layer_hists SEC(".maps");

/* The filesystem layer, by filesystem type. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2 * IOSTACK_OPS * IOSTACK_FS_TYPES);
	__type(key, struct layer_key);
	__type(value, struct hist);
} fs_hists SEC(".maps");

/* -P only; user space sizes it (1 entry otherwise). A call that finds no room is a loss:
 * -P ranks processes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct group_key);
	__type(value, struct group_totals);
} group_totals SEC(".maps");

const struct group_totals group_totals_zero = {};

/* --per-cgroup only; user space sizes it (1 entry otherwise). A call that finds no room is in
 * its operation's totals all the same: user space shows the difference as `other`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct group_key);
	__type(value, struct cgroup_totals);
} cgroup_totals SEC(".maps");

const struct cgroup_totals cgroup_totals_zero = {};

/* --slow only; user space sizes it (one page otherwise). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* ---- tasks ---------------------------------------------------------------------------------- */

static __always_inline struct task_struct *current_task_btf(void)
{
	return per_task ? bpf_get_current_task_btf() : NULL;
}

/* The current task: typed where task storage is used (5.11+), else read through probes. */
static __always_inline struct task_struct *current_task_any(void)
{
	return per_task ? bpf_get_current_task_btf() : (struct task_struct *)bpf_get_current_task();
}

static __always_inline __u32 current_tid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

/* The current thread's call in progress, or NULL. */
static __always_inline struct call_state *current_call(void)
{
	struct call_state *st = calls_of(current_task_btf(), current_tid(), false);

	return st && st->start ? st : NULL;
}

/* A task the scheduler hands us passes -p/--tid/-c, compared in the tool's pid namespace (its
 * thread id in the initial namespace, the key of its state, in *tid). */
static __always_inline bool task_traced(struct task_struct *t, bool typed, __u32 *tid)
{
	char comm[IOSTACK_COMM_LEN];
	__u64 ids;

	*tid = IOSTACK_GET(typed, t, pid);
	if (task_filter.tgid || task_filter.tid) {
		ids = task_filter.pidns_ino ? task_ids(t) :
					      (__u64)IOSTACK_GET(typed, t, tgid) << 32 | *tid;
		if (task_filter.tgid && (ids >> 32) != task_filter.tgid)
			return false;
		if (task_filter.tid && (__u32)ids != task_filter.tid)
			return false;
	}
	if (!task_filter.has_comm)
		return true;
	bpf_probe_read_kernel(comm, sizeof(comm), &t->comm);
	return comm_equal(comm);
}

/* Its call in progress (the scheduler's tasks are typed only through tp_btf). */
static __always_inline struct call_state *call_of(struct task_struct *t, bool typed)
{
	struct call_state *st;
	__u32 tid;

	if (!task_traced(t, typed, &tid))
		return NULL;
	st = calls_of(typed ? t : NULL, tid, false);
	return st && st->start ? st : NULL;
}

static __always_inline bool in_iowait(struct task_struct *t, bool typed)
{
	if (typed)
		return BPF_CORE_READ_BITFIELD(t, in_iowait);
	return BPF_CORE_READ_BITFIELD_PROBED(t, in_iowait);
}

/* The state field before 5.14. */
struct task_struct___with_state {
	long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *t)
{
	struct task_struct___with_state *old = (void *)t;

	if (bpf_core_field_exists(old->state))
		return BPF_CORE_READ(old, state);
	return BPF_CORE_READ(t, __state);
}

/* ---- the scheduler -------------------------------------------------------------------------- */

/* The scheduler's programs run for every task of the machine: the clock is read only once
 * something is to be charged (most switches and wakeups concern no traced call). */
static __always_inline int on_switch(bool preempt, struct task_struct *prev,
				     struct task_struct *next, long prev_state, bool typed)
{
	struct call_state *out, *in;
	bool runnable, iowait = false;
	__u64 now;

	close_mark();
	if (!switch_has_state)
		prev_state = task_state(prev);
	/* TASK_RUNNING (0): preempted, or woken before it could sleep. */
	runnable = preempt || prev_state == 0;
	if (!runnable)
		iowait = in_iowait(prev, typed);
	out = call_of(prev, typed);
	in = call_of(next, typed);
	if (!iowait && !out && !in)
		return 0;
	now = bpf_ktime_get_ns();
	if (iowait)
		io_wait_begins(IOSTACK_GET(typed, prev, pid), now);
	if (out)
		call_switched_out(out, IOSTACK_GET(typed, prev, pid), runnable, iowait, now);
	if (in)
		call_switched_in(in, IOSTACK_GET(typed, next, pid), now);
	return 0;
}

/* sched_switch(preempt, prev, next[, prev_state]) */
static __always_inline int switch_args(__u64 *args, bool typed)
{
	return on_switch((bool)args[0], (struct task_struct *)args[1],
			 (struct task_struct *)args[2], switch_has_state ? (long)args[3] : 0, typed);
}

/* sched_waking(p) runs in the waker's context: what ended the sleep is around us. A wakee
 * that is neither in an I/O wait (for the chains of wakers) nor in a traced call costs two
 * loads. */
static __always_inline int waking_args(__u64 *args, bool typed)
{
	struct task_struct *p = (struct task_struct *)args[0];
	bool iowait = in_iowait(p, typed);
	struct call_state *st;
	__s64 left;
	__u32 tid;
	__u64 now;

	st = call_of(p, typed);
	if (shadow_switches && st && st->state != STATE_SLEEPING)
		st = NULL;
	if (!iowait && !st)
		return 0;
	tid = IOSTACK_GET(typed, p, pid);
	if (shadow_switches) {
		now = bpf_ktime_get_ns();
		if (iowait)
			io_wait_ends(tid, now);
		if (st)
			call_sleep_ends_now(st, tid, live_mark(now, args), on_task_stack(args), now);
		return 0;
	}
	/* Woken before it could sleep, or while it leaves its CPU: no sleep yet. If it does switch
	 * out meanwhile, that voluntary switch's wakeup was seen here (call_settle): not a loss.
	 * Counted as one, it made most host runs of a buffered sequential read report no_wake
	 * (1-61 a run, 6 runs of 7; none with this, 9 runs of 9; the soak's 2 minutes: 2,746 before, 27
	 * after, of about 1.07 million calls; 2026-11-28). */
	if (thread_on_cpu(p, typed)) {
		if (st)
			st->woken_leaving++;
		return 0;
	}
	now = bpf_ktime_get_ns();
	left = thread_slept_at(p, typed);
	if (!thread_left_cpu_known(p, typed)) {
		/* Moved to another CPU while it slept (6.12+: a sleeper under delayed dequeue is
		 * still on its run queue, and the load balancer moves it): its run_delay counts
		 * the rest of the sleep (call_settle). The move zeroed exec_start, which a thread
		 * outside the fair class needs to say when it left its CPU (read as such it made
		 * an 18 s sleep of a 1 s write, whose sum then set the clocks' offset 6 s wrong
		 * for the calls after it; TCG guest, 2026-11-28): a call's sleep then began after
		 * its last transition, from there; a thread in no call goes unrecorded. */
		if (st)
			st->moved_asleep = 1;
		if (!left) {
			if (!st)
				return 0;
			left = (__s64)st->last - clock_offset;
		}
	}
	if (iowait)
		io_wait_ended(tid, left, now);
	if (st)
		call_woken(st, tid, iowait, left, live_mark(now, args), on_task_stack(args), now);
	return 0;
}

/* sched_wakeup(p): p is on a run queue. */
static __always_inline int wakeup_args(__u64 *args, bool typed)
{
	struct call_state *st = call_of((struct task_struct *)args[0], typed);

	if (st)
		call_enqueued(st, bpf_ktime_get_ns());
	return 0;
}

TP_TWINS(sched_switch, switch, switch_args)
TP_TWINS(sched_waking, waking, waking_args)
TP_TWINS(sched_wakeup, wakeup, wakeup_args)

/* ---- io_uring requests ---------------------------------------------------------------------- */

/* Requests never pass through read() or write(): each is followed from its submission (the SQE
 * consumed, in the submitter, the SQPOLL thread or a retry) to its completion entry (the CQE
 * posted), by the io_uring tracepoints, whoever runs it meanwhile (inline, an io-wq worker). */
const volatile __u8 uring_abi = URING_NONE;

/* PF_IO_WORKER (include/linux/sched.h): an io_uring thread of its application (an io-wq
 * worker, the SQPOLL thread). */
#define IOSTACK_PF_IO_WORKER 0x00000010

/* An opcode's operation slot (0: not followed). */
const volatile __u8 uring_ops[IOSTACK_URING_OPCODES] = {};
/* REQ_F_CQE_SKIP (5.17+, from BTF): a request that posts no completion entry when it succeeds
 * is not followed (it would never end). */
const volatile __u64 uring_cqe_skip = 0;

/* The request (6.1+), or its ring and user_data on 5.15's io_uring, whose completion
 * tracepoint passes no request. */
struct uring_key {
	__u64 a;
	__u64 b;
};

struct uring_req {
	__u64 start;
	__u64 req;     /* the io_kiocb or aio_kiocb: its file at completion (alive until then) */
	/* Its block I/O (direct I/O's bios lead to it: uring_request_io_ended): its block
	 * requests' time on the device, and when the last one ended. */
	struct device_runs dev;
	__u64 first_issue;
	__u64 io_end;
	__u32 ios;
	__u8 op;       /* 0: an AIO iocb of an operation not traced (followed to its end all the same) */
	__u8 punted;
	__u8 iface;    /* enum request_iface */
	__u8 pad;
	__u64 group;   /* -P: its submitter's process; --per-cgroup: its cgroup (at submission) */
	__u64 punt_at; /* handed to an io-wq worker (0: never) */
	__u64 taken_at; /* a worker took it (0: not seen: not yet, or io_wq_submit_work not hooked) */
};

/* Requests in flight, io_uring's and native AIO's (their keys are distinct objects' addresses,
 * or 5.15's ring and user_data). A submission that finds no room is counted (uring_losses). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct uring_key);
	__type(value, struct uring_req);
} uring_reqs SEC(".maps");

/* Index: (interface * 2 + generation) * IOSTACK_OPS + op. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4 * IOSTACK_OPS);
	__type(key, __u32);
	__type(value, struct uring_totals);
} uring_totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4 * IOSTACK_OPS);
	__type(key, __u32);
	__type(value, struct hist);
} uring_hists SEC(".maps");

/* -P or --per-cgroup only (user space sizes it; 1 entry otherwise): the requests of each
 * submitter's process or cgroup, by (generation, interface * IOSTACK_OPS + op, group). One that
 * finds no room is a loss, as a call's -P row is. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct group_key);
	__type(value, struct uring_totals);
} group_requests SEC(".maps");

const struct uring_totals uring_totals_zero = {};

/* --slow only (user space sizes it; 1 entry otherwise): each request's trail while it is in
 * flight, for its journey. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct uring_key);
	__type(value, struct request_trail);
} request_trails SEC(".maps");

const struct request_trail request_trail_zero = {};

/* --slow: a request's trail from its submission: who submitted it, what it asked for, and
 * room for its block requests. A submission that finds no room goes without one: its journey
 * says so (no submitter). */
static __always_inline void request_trail_begin(struct uring_key *k, __u64 user_data,
						__u32 opcode)
{
	struct request_trail *t;
	__u64 id;

	if (bpf_map_update_elem(&request_trails, k, &request_trail_zero, BPF_ANY))
		return;
	t = bpf_map_lookup_elem(&request_trails, k);
	if (!t)
		return;
	id = current_ids();
	t->user_data = user_data;
	t->opcode = opcode;
	t->pid = id >> 32;
	t->tid = (__u32)id;
	t->cgroup = per_cgroup_depth ? cgroup_at_depth(current_cgroup()) : 0;
	bpf_get_current_comm(t->comm, sizeof(t->comm));
}

/* Cumulative: [0] completions of followed requests whose submission was not seen (in flight
 * when tracing began; io_uring 6.1+ only: 5.15's completion names no request), [1] submissions
 * the map had no room for. */
__u64 uring_losses[2];

/* Native AIO is followed (its function hooks are attached): a direct-I/O bio's kiocb may be an
 * iocb's. */
const volatile bool aio_followed = false;

/* The end_io functions of direct I/O whose bios lead to their kiocb, which is at offset 0 of
 * an io_uring request (and of an AIO request): iomap's (bi_private is the iomap_dio), the
 * block device's (bi_private is the blkdev_dio) and its single-bio asynchronous path (the bio
 * is inside the blkdev_dio). Set by user space after the verifier is done, from kallsyms (as
 * throttle_dispatch_fn); 0: not here. */
__u64 dio_end_io_iomap = 0;
__u64 dio_end_io_blkdev = 0;
__u64 dio_end_io_blkdev_async = 0;

/* The kiocb a direct-I/O bio was made for, 0 if none. */
static __always_inline __u64 bio_kiocb(__u64 bio)
{
	__u64 end_io = (__u64)BPF_CORE_READ((struct bio *)bio, bi_end_io);
	struct blkdev_dio *bdio;
	struct iomap_dio *idio;

	if (!end_io)
		return 0;
	if (end_io == dio_end_io_iomap) {
		idio = BPF_CORE_READ((struct bio *)bio, bi_private);
		return (__u64)BPF_CORE_READ(idio, iocb);
	}
	if (!bpf_core_type_exists(struct blkdev_dio))
		return 0;
	if (end_io == dio_end_io_blkdev) {
		bdio = BPF_CORE_READ((struct bio *)bio, bi_private);
		return (__u64)BPF_CORE_READ(bdio, iocb);
	}
	if (end_io == dio_end_io_blkdev_async) {
		bdio = (void *)(bio - bpf_core_field_offset(struct blkdev_dio, bio));
		return (__u64)BPF_CORE_READ(bdio, iocb);
	}
	return 0;
}

/* 5.15's io_kiocb keeps its ring and user_data itself (6.x: user_data in req->cqe). */
struct io_kiocb___5_15 {
	struct io_ring_ctx *ctx;
	__u64 user_data;
} __attribute__((preserve_access_index));

/* The request in flight a kiocb is the start of (an io_kiocb's, an aio_kiocb's), or NULL. */
static __always_inline struct uring_req *uring_req_of_kiocb(__u64 kiocb, struct uring_key *k)
{
	struct io_kiocb___5_15 *old = (void *)kiocb;
	struct uring_req *r;

	if (uring_abi == URING_5_15) {
		k->a = (__u64)BPF_CORE_READ(old, ctx);
		k->b = BPF_CORE_READ(old, user_data);
		r = bpf_map_lookup_elem(&uring_reqs, k);
		if (r || !aio_followed)
			return r;
	}
	k->a = kiocb;
	k->b = 0;
	return bpf_map_lookup_elem(&uring_reqs, k);
}

/* --slow: the block request ending on this CPU (its description in the CPU's completion mark)
 * goes on the trail of a request it was made for. */
static __always_inline void request_trail_add(struct uring_key *k)
{
	struct completion_mark *m = this_cpu_mark();
	struct request_trail *t;
	__u32 n;

	if (!m)
		return;
	t = bpf_map_lookup_elem(&request_trails, k);
	if (!t || t->nreq >= IOSTACK_REQUEST_JOURNEY_REQS)
		return;
	n = t->nreq;
	t->reqs[n & (IOSTACK_REQUEST_JOURNEY_REQS - 1)] = m->req;
	t->nreq = n + 1;
}

/* A block request of request r (key k), issued at `issue` (0: unknown), ends: its block I/O,
 * its time on the device and its end. */
static __always_inline void request_io_ended(struct uring_req *r, struct uring_key *k,
					     __u64 issue, __u64 now)
{
	r->ios++;
	/* Its block requests may end on two CPUs at once: the last end is the latest. */
	if (now > r->io_end)
		r->io_end = now;
	issue = issue && issue < now ? issue : now;
	if (!r->first_issue || issue < r->first_issue)
		r->first_issue = issue;
	runs_add(&r->dev, issue, now);
	if (want_journeys)
		request_trail_add(k);
}

/* A block request ends, issued at `issue` (0: unknown): each io_uring request its bios were
 * made for counts it, its device time and its end. True if any did. One function the verifier
 * checks once on its own (as own_request_ended_now). */
__noinline int uring_request_io_ended(__u64 bio, __u64 issue, __u64 now)
{
	struct uring_key k = {}, last = {};
	struct uring_req *r;
	bool any = false;
	__u64 kiocb;

	if (uring_abi == URING_NONE && !aio_followed)
		return 0;
	for (int i = 0; i < 8; i++) {
		if (!bio)
			break;
		kiocb = bio_kiocb(bio);
		bio = (__u64)BPF_CORE_READ((struct bio *)bio, bi_next);
		if (!kiocb)
			continue;
#ifdef IOSTACK_MUTANT_URING_BIO_UNLINKED
		/* Mutant: the bio leads to no request (its kiocb's address off by one). */
		kiocb += 1;
#endif
		r = uring_req_of_kiocb(kiocb, &k);
		/* Bios of one request merged into one block request count once. */
		if (!r || (k.a == last.a && k.b == last.b))
			continue;
		last = k;
		any = true;
		request_io_ended(r, &k, issue, now);
	}
	return any;
}

/* A block request ends whose first bio an io-wq worker submitted for the request it ran (its
 * origin's key, bio_origin_call): a buffered read's, a sync's writeback. True if it counted. One
 * function the verifier checks once on its own. */
__noinline int worker_request_io_ended(__u64 a, __u64 b, __u64 issue, __u64 now)
{
	struct uring_key k = {.a = a, .b = b};
	struct uring_req *r;

	if (!a)
		return 0;
	r = bpf_map_lookup_elem(&uring_reqs, &k);
	if (!r)
		return 0;
	request_io_ended(r, &k, issue, now);
	return 1;
}

/* ---- block I/O ------------------------------------------------------------------------------ */

/* 5.15's io_uring (Debian's 5.10) finds its io-wq worker here. */
struct task_struct___5_15 {
	void *pf_io_worker;
} __attribute__((preserve_access_index));

/* An io-wq worker's bio is for the request it runs: its task's io_worker's cur_work is inside
 * the request's io_kiocb (a buffered read a worker makes, a sync's writeback). Its key goes with
 * the bio's origin. */
static __always_inline void origin_worker_request(struct bio_origin *o)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	struct io_kiocb___5_15 *old;
	struct io_worker *w;
	__u64 work;

	if (uring_abi == URING_NONE || !(BPF_CORE_READ(t, flags) & IOSTACK_PF_IO_WORKER))
		return;
	if (bpf_core_field_exists(t->worker_private))
		w = BPF_CORE_READ(t, worker_private);
	else
		w = BPF_CORE_READ((struct task_struct___5_15 *)t, pf_io_worker);
	if (!w || !bpf_core_field_exists(w->cur_work))
		return;
	work = (__u64)BPF_CORE_READ(w, cur_work);
	if (!work)
		return;
	o->req_a = work - bpf_core_field_offset(struct io_kiocb, work);
	o->req_b = 0;
	if (uring_abi == URING_5_15) {
		old = (void *)o->req_a;
		o->req_a = (__u64)BPF_CORE_READ(old, ctx);
		o->req_b = BPF_CORE_READ(old, user_data);
	}
}

/* A bio enters the block layer in its submitter's context: the call in progress there, if any,
 * submitted it (its thread's entry is bound to it, for the requests that end while it runs). */
static __always_inline bool bio_origin_call(struct bio_origin *o)
{
	struct call_state *st = current_call();
	__u64 id;

#ifndef IOSTACK_MUTANT_URING_WORKER_IO_UNLINKED
	origin_worker_request(o);
#else
	/* Mutant: a bio an io-wq worker submits carries no request. */
#endif
	if (!st)
		return true;
	id = call_id(current_tid(), st->seq);
	o->call = id;
	if (!st->has_io && call_io_bind(id, shadow_switches ? 0 : st->last))
		st->has_io = 1;
	return true;
}

static __always_inline int on_issue(struct request *rq, bool typed)
{
	return rq_stamp(rq, false, typed);
}

/* Never planned: iostack times requests from their issue. */
static __always_inline int on_queue_start(struct request *rq, bool typed)
{
	return 0;
}

/* The traced calls that submitted the request this CPU's mark describes, as one function the
 * verifier checks once on its own (inlined into the completion program, its loops over the
 * owners and the flushes multiplied that program's states: 626 ms to load on the CI host's
 * 6.18, 2026-11-26). */
__noinline int own_request_ended_now(__u64 data_issue, __u64 data_end, __u64 now)
{
	struct completion_mark *m = this_cpu_mark();

	return m ? own_request_ended(m, data_issue, data_end, now) : 0;
}

/* The flushes made on `dev` between `since` and now, into this CPU's mark (flushes_within);
 * checked once on its own, as own_request_ended_now. */
__noinline __u64 flushes_within_now(__u32 dev, __u64 since, __u64 now)
{
	struct completion_mark *m = this_cpu_mark();

	return m ? flushes_within(dev, since, now, m) : 0;
}

/* Bios a request's end walks for their submitters (a merged request carries one per bio). */
#define REQ_BIOS 8

/* The origin of the first bio of the request ending on this CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bio_origin);
} first_origin SEC(".maps");

/* Takes the origins of a request's bios: their submitters become this CPU's mark's owners, the
 * first bio's origin goes into first_origin (zeros if none was known). True if any was known.
 * One function the verifier checks once on its own, as own_request_ended_now. The first origin
 * is copied once, straight from its entry (through a copy on the stack, and back out for the
 * caller, it was three 112-byte copies per completion). */
__noinline int take_request_origins(__u64 bio)
{
	struct completion_mark *m = this_cpu_mark();
	struct bio_origin *first, *found;
	bool known = false;
	__u32 zero = 0, n = 0;

	first = bpf_map_lookup_elem(&first_origin, &zero);
	if (!m || !first)
		return 0;
	m->nown = 0;
	for (int i = 0; i < REQ_BIOS; i++) {
		if (!bio)
			break;
		found = origin_of(bio);
		if (found) {
			if (!known) {
				*first = *found;
				known = true;
			}
			if (found->gtid && !(found->flags & ORIGIN_F_DISPATCHED) && n < MARK_OWNERS &&
#ifdef IOSTACK_MUTANT_READAHEAD_NOT_OWN
			    /* Mutant: a bio whose call has returned (readahead) has no owner. */
			    (!found->call || call_io_of(found->call)) &&
#endif
			    !mark_owned_by(m, found->gtid)) {
				m->owners[n & (MARK_OWNERS - 1)] = found->gtid;
				n++;
				m->nown = n;
			}
			origin_taken(found);
		}
		bio = (__u64)BPF_CORE_READ((struct bio *)bio, bi_next);
	}
	if (!known)
		__builtin_memset(first, 0, sizeof(*first));
	return known;
}

/* A request ends: it becomes this CPU's completion mark, for the wakeups its end causes, and
 * the own I/O of each traced call whose thread submitted one of its bios. The flush machinery
 * takes a request that asked for a cache flush or FUA through steps: a flush request of its own
 * (no bio), the request's data, another flush; the request ends after them, with no bytes
 * left, and its device time is its data step and the flushes made while it waited. */
static __always_inline int on_complete(struct request *rq, __u32 nr_bytes, bool typed,
				       void *ctx)
{
	__u32 dev = rq_dev(rq, typed), flags, cmd, op, kind, data_len, nflush = 0;
	__u64 now, issue, bio, bio_nr = 0, data_issue = 0, data_end = 0, flush_ns = 0;
	struct bio_origin *first;
	struct completion_mark *m;
	__u32 zero = 0;
	enum rq_end end;
	bool known = false, flush_seq;

	if (!disk_selected(dev))
		return 0;
	flags = IOSTACK_GET(typed, rq, rq_flags);
	cmd = IOSTACK_GET(typed, rq, cmd_flags);
	op = cmd & IOSTACK_REQ_OP_MASK;
	data_len = IOSTACK_GET(typed, rq, __data_len);
	bio = (__u64)IOSTACK_GET(typed, rq, bio);
	end = classify(nr_bytes, data_len, flags, op);
	if (end == COMPLETION_PARTIAL)
		return 0;
	if (flags & rq_bits.flush_seq) {
		now = bpf_ktime_get_ns();
		if (op == rq_bits.flush_op) {
			/* The machinery's own flush request: for the requests waiting in it. */
			count_seen(dev, flags, op);
			__sync_fetch_and_add(&ended[KIND_FLUSH], 1);
			issue = rq_start(rq, flags, typed);
			flush_done(dev, issue <= now ? issue : 0, now);
		} else {
			/* A request's data step, not its end. */
			issue = rq_start(rq, flags, typed);
			origin_data_step(bio, issue <= now ? issue : 0, now, data_len);
		}
		return 0;
	}
	count_seen(dev, flags, op);
	m = this_cpu_mark();
	if (!m)
		return 0;
	now = bpf_ktime_get_ns();
	issue = rq_start(rq, flags, typed);
	/* A typed bio pointer (tp_btf) becomes a plain number for the function (the verifier
	 * passes only numbers to functions it checks on their own). */
	bpf_probe_read_kernel(&bio_nr, sizeof(bio_nr), &bio);
	known = take_request_origins(bio_nr);
	first = bpf_map_lookup_elem(&first_origin, &zero);
	if (!first)
		return 0;
	data_issue = first->data_issue;
	data_end = first->data_end;
	/* The end of a flush-sequenced request: no bytes left, or a data step seen. */
	flush_seq = known && (data_end || (end == COMPLETION_EMPTY &&
					   (first->flags & ORIGIN_F_FLUSH_SEQ)));
#ifdef IOSTACK_MUTANT_FLUSH_NEVER_ENDS
	/* Mutant: a flush-sequenced request's end is no completion (no owners, no own I/O). */
	flush_seq = false;
#endif
	if (end == COMPLETION_EMPTY && !flush_seq) {
		m->ts = 0;
		return 0;
	}
	kind = req_kind(cmd);
	if (kind < KINDS)
		__sync_fetch_and_add(&ended[kind], 1);
	if (!issue && !flush_seq)
		count_loss(LOSS_NO_START);
	for (int j = 0; j < MARK_FLUSHES; j++) {
		m->flush_issue[j] = 0;
		m->flush_end[j] = 0;
	}
	m->flush_dev = dev;
	if (flush_seq) {
		flush_ns = flushes_within_now(dev, first->ts, now);
		for (int j = 0; j < MARK_FLUSHES; j++)
			nflush += m->flush_end[j] != 0;
		issue = 0;
	}
	m->ts = now;
	m->task = bpf_get_current_task();
	m->ctx = on_task_stack(ctx);
	m->issue = issue <= now ? issue : 0;
	m->queued = first->ts;
	m->dev_ns = flush_seq ? (data_end > data_issue ? data_end - data_issue : 0) + flush_ns :
		    (m->issue ? now - m->issue : 0);
	m->data_issue = data_issue;
	m->data_end = data_end;
	m->kind = kind;
	m->waited = 0;
	m->flags = known ? first->flags : 0;
	/* What a journey shows of the request (--slow). */
	if (keep_requests) {
		m->req.sector = IOSTACK_GET(typed, rq, __sector);
		m->req.bytes = flush_seq ? first->data_bytes : data_len;
		m->req.dev = dev;
		m->req.cmd_flags = cmd;
		m->req.how = REQ_OWN;
		m->req.pid = first->pid;
		m->req.tid = first->tid;
		m->req.origin = m->flags;
		m->req.upper_dev = first->upper_dev;
		m->req.owners = m->nown;
		m->req.flushes = nflush;
		m->req.held_ns = first->held_ns;
		__builtin_memcpy(m->req.comm, first->comm, sizeof(m->req.comm));
		if (!known)
			m->req.comm[0] = '?';
		m->req.device_ns = m->dev_ns;
		/* From entering the block layer (after blk-throttle let it go) to the device. */
		m->req.queue_ns = 0;
		if (first->ts) {
			__u64 at_device = flush_seq ? (m->flush_issue[0] && (!data_issue ||
						       m->flush_issue[0] < data_issue) ?
						       m->flush_issue[0] : data_issue) :
						      m->issue;

			if (at_device > first->ts)
				m->req.queue_ns = at_device - first->ts;
		}
	}
	if (own_request_ended_now(data_issue, data_end, now)) {
		m->waited = 1;
		if (kind < KINDS)
			__sync_fetch_and_add(&waited[kind], 1);
		credit_flushes_of(0);
	}
	/* An io_uring request waited for it (its direct I/O, or what a worker made for it). */
	if ((uring_request_io_ended(bio_nr, m->issue, now) ||
	     (known && worker_request_io_ended(first->req_a, first->req_b, m->issue, now))) &&
	    !m->waited) {
		m->waited = 1;
		if (kind < KINDS)
			__sync_fetch_and_add(&waited[kind], 1);
	}
	return 0;
}

#include "lib/blk_hooks.bpf.h"

/* ---- the VFS and filesystem layers ---------------------------------------------------------- */

/* The time a call spends in a layer is counted from its outermost function (an O_SYNC write's
 * fsync inside its write_iter counts once). */
static __always_inline int fn_entry(void *ctx, enum hook_flavour flavour, __u32 slot)
{
	struct call_state *st;
	__u32 layer;

	if (slot >= FN_SLOTS)
		return 0;
	st = current_call();
	if (!st)
		return 0;
	layer = (slots[slot].op - 1) & 1;
	if (st->layer_depth[layer]++ == 0)
		st->layer_start[layer] = bpf_ktime_get_ns();
	if (slots[slot].op == LAYER_FS && !st->fs[0])
		fs_name(st->fs, slot_file_arg(ctx, flavour, slot), slots[slot].kind);
	return 0;
}

static __always_inline int fn_exit(void *ctx, long ret, __u32 slot)
{
	struct call_state *st;
	__u32 layer;
	__u64 now;

	if (slot >= FN_SLOTS)
		return 0;
	st = current_call();
	if (!st)
		return 0;
	layer = (slots[slot].op - 1) & 1;
	if (!st->layer_depth[layer] || --st->layer_depth[layer])
		return 0;
	now = bpf_ktime_get_ns();
	if (now > st->layer_start[layer])
		st->layer_ns[layer] += now - st->layer_start[layer];
	return 0;
}

FN_SLOTS_16

/* ---- system calls --------------------------------------------------------------------------- */

static __always_inline int on_sys_enter(long id, __u64 fd)
{
	__u32 slot = slot_of(id);
	struct task_struct *t;
	struct call_state *st;
	__u64 now;

	if (!slot || !current_selected())
		return 0;
	/* Typed where task storage is used (5.11+), else the probed pointer: read once. */
	t = current_task_any();
	if (in_compat_syscall(per_task ? t : NULL))
		return 0;
	st = calls_of(per_task ? t : NULL, current_tid(), true);
	if (!st) {
		count_loss(LOSS_START_FULL);
		return 0;
	}
	now = bpf_ktime_get_ns();
	st->seq++;
	st->start = now;
	st->last = now;
	for (int i = 0; i < PARTS; i++) {
		st->parts[i] = 0;
		st->sleep_raw[i] = 0;
		st->moved[i] = 0;
		st->sleeps[i] = 0;
	}
	if (!shadow_switches) {
		thread_clock_read(t, per_task, &st->at_entry);
		/* Until a call that slept solves it: the clocks' offset is at most now - when this
		 * thread's accounting was last brought up to date. */
		if (!clock_offset)
			clock_offset = (__s64)now - thread_left_cpu(t, per_task);
	}
	for (int i = 0; i < CALL_LAYERS; i++) {
		st->layer_ns[i] = 0;
		st->layer_depth[i] = 0;
	}
	st->via_waker_ns = 0;
	st->via_pid = 0;
	st->woken_leaving = 0;
	st->moved_asleep = 0;
	st->fd = fd;
	st->nr = id;
	st->op = slot;
	st->state = STATE_ON_CPU;
	st->has_io = 0;
	st->ios = 0;
	st->others_ios = 0;
	st->nreq = 0;
	st->fs[0] = 0;
	return 0;
}

/* --fs and -d: the file is on that filesystem type and disk (any file without them). */
static __always_inline bool file_passes(struct file *f)
{
	char fs[FN_FS_LEN] = {};
	__u32 dev;

	if (!filter_fs && !disk_devs[0])
		return true;
	if (!f)
		return false;
	if (filter_fs) {
		sb_fs_name(fs, BPF_CORE_READ(f, f_inode, i_sb));
		for (int i = 0; i < FN_FS_LEN; i++) {
			if (fs[i] != fs_filter[i])
				return false;
			if (!fs[i])
				break;
		}
	}
	if (!disk_devs[0])
		return true;
	dev = file_dev(f);
	for (int i = 0; i < IOSTACK_DISK_DEVS; i++) {
		if (disk_devs[i] && disk_devs[i] == dev)
			return true;
	}
	return false;
}

/* --fs and -d: the call's file is on that filesystem type and disk. */
static __always_inline bool file_selected(struct call_state *st, long ret)
{
	__s64 fd = st->op == open_op ? ret : (__s64)st->fd;

	if (!filter_fs && !disk_devs[0])
		return true;
	return fd >= 0 && file_passes(fd_file(fd));
}

/* `gen`: the report generation the call's exit read once, so that its totals, its layers and
 * its group row land in the same report. */
static __always_inline void record_layer(__u32 gen, __u32 op, __u32 layer, __u64 ns)
{
	__u32 idx = (gen * IOSTACK_OPS + (op & (IOSTACK_OPS - 1))) * LAYERS + layer;
	struct hist *h = bpf_map_lookup_elem(&op_layer_hists, &idx);

	if (h)
		hist_record_exclusive(h, ns);
}

static __always_inline void record_fs_layer(__u32 gen, __u32 op, const char *fs, __u64 ns)
{
	struct layer_key k = {.gen = gen, .op = op, .layer = LAYER_FS};
	struct hist *h;

	__builtin_memcpy(k.fs, fs, sizeof(k.fs));
	h = hist_get(&fs_hists, &k);
	if (h)
		hist_record_exclusive(h, ns);
}

/* The call's process (-P) or cgroup (--per-cgroup). */
static __always_inline __u64 call_group(void)
{
	return per_process ? current_ids() >> 32 : cgroup_at_depth(current_cgroup());
}

static __always_inline void group_add(struct group_totals *p, struct call_state *st, __u64 total,
				      __u32 ios)
{
	p->calls++;
	p->total_ns += total;
	if (total > p->max_ns)
		p->max_ns = total;
	for (int i = 0; i < PARTS; i++)
		p->parts[i] += st->parts[i];
	p->via_waker_ns += st->via_waker_ns;
	p->ios += ios;
}

static __always_inline void record_group(__u32 gen, struct call_state *st, __u64 total, __u32 ios)
{
	struct group_key k = {.gen = gen, .op = st->op, .id = call_group()};
	struct group_totals *p;
	struct cgroup_totals *c;

	if (!per_process) {
		/* One that finds no room is shown under `other`. */
		c = bpf_map_lookup_elem(&cgroup_totals, &k);
		if (!c) {
			bpf_map_update_elem(&cgroup_totals, &k, &cgroup_totals_zero, BPF_NOEXIST);
			c = bpf_map_lookup_elem(&cgroup_totals, &k);
			if (!c)
				return;
		}
		group_add(&c->t, st, total, ios);
		hist_record_exclusive(&c->latency, total);
		return;
	}
	p = bpf_map_lookup_elem(&group_totals, &k);
	if (!p) {
		bpf_map_update_elem(&group_totals, &k, &group_totals_zero, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&group_totals, &k);
		if (!p) {
			/* -P ranks processes: one missing would rank wrongly, so it is a loss. */
			count_loss(LOSS_HIST_FULL);
			return;
		}
		bpf_get_current_comm(p->comm, sizeof(p->comm));
	}
	group_add(p, st, total, ios);
}

static __always_inline void send_journey(struct call_state *st, struct call_io *io, __u64 total,
					 __u32 ios, long ret, __u64 fd)
{
	struct journey *e;
	struct file *f;
	__u64 id;
	__u32 n = 0;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_loss(LOSS_RINGBUF_FULL);
		return;
	}
	id = current_ids();
	e->kind = JOURNEY_CALL;
	e->kind_pad = 0;
	e->ts_ns = st->last;
	e->lat_ns = total;
	for (int i = 0; i < PARTS; i++)
		e->parts[i] = st->parts[i];
	e->via_waker_ns = st->via_waker_ns;
	e->layer_ns[0] = st->layer_ns[0];
	e->layer_ns[1] = st->layer_ns[1];
	e->ret = ret;
	e->fd = (__s64)fd;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->op = st->op;
	e->nr = st->nr;
	e->ios = ios;
	e->via_pid = st->via_pid;
	e->pad = 0;
	e->cgroup = per_cgroup_depth ? cgroup_at_depth(current_cgroup()) : 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	__builtin_memcpy(e->via_comm, st->via_comm, sizeof(e->via_comm));
	__builtin_memcpy(e->fs, st->fs, sizeof(e->fs));
	__builtin_memset(e->file, 0, sizeof(e->file));
	f = (__s64)fd >= 0 ? fd_file(fd) : NULL;
	if (f)
		dentry_name(e->file, sizeof(e->file), BPF_CORE_READ(f, f_path.dentry));
	/* Its own requests first, then those it was woken by. */
	for (int i = 0; i < CALL_REQS; i++) {
		if (!io || i >= io->nreq)
			break;
		e->reqs[n & (IOSTACK_JOURNEY_REQS - 1)] = io->reqs[i];
		n++;
	}
	for (int i = 0; i < CALL_REQS; i++) {
		if (i >= st->nreq || n >= IOSTACK_JOURNEY_REQS)
			break;
		e->reqs[n & (IOSTACK_JOURNEY_REQS - 1)] = st->reqs[i];
		n++;
	}
	e->nreq = n;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int on_sys_exit(long id, long ret)
{
	struct task_struct *task;
	struct call_state *st;
	struct call_io *io = NULL;
	struct op_totals *t;
	__u64 total, cid, io_wait, fd;
	__u32 ios, idx, op, gen;

	/* A task -p, --tid, -c or --cgroup leaves out costs no lookup. */
	if (!slot_of(id) || !current_selected())
		return 0;
	task = current_task_btf();
	st = calls_of(task, current_tid(), false);
	if (!st || !st->start) {
		/* In flight when tracing began; compat calls were never started on purpose. */
		if (!in_compat_syscall(task))
			count_loss(LOSS_NO_START);
		return 0;
	}
	if (shadow_switches)
		charge(st, PART_CPU, bpf_ktime_get_ns());
	else
		call_settle(st, current_task_any(), per_task, bpf_ktime_get_ns());
	total = st->last - st->start;
	st->start = 0;
	op = st->op;
	ios = st->ios;
	cid = call_id(current_tid(), st->seq);
	if (st->has_io) {
		io = call_io_end(cid);
		if (io)
			ios += io->ios;
	}
	fd = op == open_op ? (__u64)ret : st->fd;
	if (!file_selected(st, ret))
		return 0;
	if (want_journeys) {
		if (total >= slow_ns)
			send_journey(st, io, total, ios, ret, fd);
		return 0;
	}
	gen = hist_gen & 1;
	barrier_var(gen);
	idx = gen * IOSTACK_OPS + (op & (IOSTACK_OPS - 1));
	t = bpf_map_lookup_elem(&op_totals, &idx);
	if (t) {
		t->calls++;
		for (int i = 0; i < PARTS; i++)
			t->parts[i] += st->parts[i];
		t->via_waker_ns += st->via_waker_ns;
		t->ios += ios;
		t->others_ios += st->others_ios;
	}
	record_layer(gen, op, LAYER_SYSCALL, total);
	if (st->layer_ns[0])
		record_layer(gen, op, LAYER_VFS, st->layer_ns[0]);
	if (st->layer_ns[1])
		record_fs_layer(gen, op, st->fs, st->layer_ns[1]);
	io_wait = st->parts[PART_IO_QUEUE] + st->parts[PART_IO_DEVICE] + st->parts[PART_OTHERS_IO];
	if (io_wait || ios)
		record_layer(gen, op, LAYER_BLOCK, io_wait);
	if (per_process || per_cgroup_depth)
		record_group(gen, st, total, ios);
	return 0;
}

static __always_inline __u8 uring_op_of(__u8 opcode)
{
	return opcode < IOSTACK_URING_OPCODES ? uring_ops[opcode & (IOSTACK_URING_OPCODES - 1)] : 0;
}

/* A 6.x request's user_data (its completion entry's). */
static __always_inline __u64 uring_user_data(struct io_kiocb *req)
{
	if (!bpf_core_field_exists(req->cqe))
		return 0;
	return BPF_CORE_READ(req, cqe.user_data);
}

/* A request's submitter is selected. The SQPOLL thread (iou-sqp-PID, a thread of the
 * application since 5.12 and on Debian's 5.10) consumes the application's SQEs: -c names the
 * application, so there its leader's name is compared (its ids and cgroup are its own, and
 * the application's). */
static __always_inline bool submitter_selected(void)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	char comm[IOSTACK_COMM_LEN];

	if (!task_filter.has_comm || !(BPF_CORE_READ(t, flags) & IOSTACK_PF_IO_WORKER))
		return current_selected();
	if (!current_selected_but_comm())
		return false;
	BPF_CORE_READ_STR_INTO(&comm, t, group_leader, comm);
	return comm_equal(comm);
}

/* io_uring_submit_req(req) (6.4+), io_uring_submit_sqe(req, force_nonblock) (6.1), or 5.15's
 * io_uring_submit_sqe(ctx, req, opcode, user_data, ...): the SQE is consumed, the request about
 * to be issued. */
static __always_inline int uring_submit_args(__u64 *args, bool typed)
{
	struct uring_req r = {};
	struct uring_key k = {};
	struct io_kiocb *req;
	__u8 opcode;

	if (!submitter_selected())
		return 0;
	if (uring_abi == URING_5_15) {
		req = (struct io_kiocb *)args[1];
		opcode = (__u8)args[2];
		k.a = args[0];
		k.b = args[3];
	} else {
		req = (struct io_kiocb *)args[0];
		opcode = BPF_CORE_READ(req, opcode);
		if (uring_cqe_skip && ((__u64)BPF_CORE_READ(req, flags) & uring_cqe_skip))
			return 0;
		k.a = (__u64)req;
	}
	r.op = uring_op_of(opcode);
	if (!r.op)
		return 0;
	r.req = (__u64)req;
	if (per_process || per_cgroup_depth)
		r.group = call_group();
	r.start = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&uring_reqs, &k, &r, BPF_ANY)) {
		__sync_fetch_and_add(&uring_losses[1], 1);
		return 0;
	}
	if (want_journeys)
		request_trail_begin(&k, uring_abi == URING_5_15 ? k.b : uring_user_data(req), opcode);
	return 0;
}

/* io_uring_queue_async_work(req, rw) (6.1+) or (ctx, rw, req, work, flags) (5.15): handed to an
 * io-wq worker. */
static __always_inline int uring_punt_args(__u64 *args, bool typed)
{
	struct uring_key k = {};
	struct uring_req *r;

	if (uring_abi == URING_5_15) {
		struct io_kiocb___5_15 *req = (void *)args[2];

		k.a = args[0];
		k.b = BPF_CORE_READ(req, user_data);
	} else {
		k.a = args[0];
	}
#ifdef IOSTACK_MUTANT_URING_PUNT_LOST
	/* Mutant: a request handed to an io-wq worker is lost there (no longer in flight). */
	bpf_map_delete_elem(&uring_reqs, &k);
	return 0;
#endif
	r = bpf_map_lookup_elem(&uring_reqs, &k);
	if (r) {
		r->punted = 1;
		if (!r->punt_at)
			r->punt_at = bpf_ktime_get_ns();
	}
	return 0;
}

/* io_wq_submit_work(work): an io-wq worker takes a request it was handed; no tracepoint marks
 * it, so it is hooked where fentry or kprobes work (plan_uring). The work is inside the
 * io_kiocb: the request without a map. Its wait for a worker ends (the first time). */
static __always_inline int uring_taken_entry(void *ctx, enum hook_flavour f)
{
	__u64 work = hook_arg(ctx, f, 0);
	struct io_kiocb *req = (void *)(work - bpf_core_field_offset(struct io_kiocb, work));
	struct io_kiocb___5_15 *old = (void *)req;
	struct uring_key k = {.a = (__u64)req};
	struct uring_req *r;

	if (!work)
		return 0;
	if (uring_abi == URING_5_15) {
		k.a = (__u64)BPF_CORE_READ(old, ctx);
		k.b = BPF_CORE_READ(old, user_data);
	}
	r = bpf_map_lookup_elem(&uring_reqs, &k);
	if (r && r->punt_at && !r->taken_at)
		r->taken_at = bpf_ktime_get_ns();
	return 0;
}

FUNC_ENTRY_HOOKS(uring_taken, uring_taken_entry)

/* The request's file (the opened one, for an open: its result; NULL if it failed). */
static __always_inline struct file *request_file(struct uring_req *r, __s64 res)
{
	struct io_kiocb *req = (struct io_kiocb *)r->req;
	struct aio_kiocb *iocb = (struct aio_kiocb *)r->req;

	/* Every kind of iocb starts with its file. */
	if (r->iface == IFACE_AIO)
		return BPF_CORE_READ(iocb, ki_filp);
	if (r->op == open_op)
		return res >= 0 ? fd_file(res) : NULL;
	return BPF_CORE_READ(req, file);
}

/* The request's file passes --fs and -d. */
static __always_inline bool uring_file_passes(struct uring_req *r, __s64 res)
{
	struct file *f;

	if (!filter_fs && !disk_devs[0])
		return true;
	f = request_file(r, res);
	return f && file_passes(f);
}

/* The part of [from, to] a punted request waited for a worker (it was handed over, no worker
 * had taken it yet): its wait clipped to it. */
static __always_inline __u64 worker_wait_in(struct uring_req *r, __u64 from, __u64 to)
{
	__u64 a = r->punt_at, b = r->taken_at;

	if (!a || !b)
		return 0;
	a = a < from ? from : a;
	b = b > to ? to : b;
	return b > a ? b - a : 0;
}

/* A request's time, [start, now], along its own time line: to its first block request's issue,
 * on the device (the union of its block requests there), between them, after the last one's
 * end; all of it without block I/O where it had none. A wait for an io-wq worker is carved from
 * the time to its first block request (or from the whole, with none): a worker issues its I/O
 * after taking it. Each bound is kept inside the ones around it, so the parts add up to now -
 * start exactly. */
static __always_inline void uring_parts(struct uring_req *r, __u64 now, __u64 *p)
{
	__u64 start = r->start < now ? r->start : now, end = r->io_end, first = r->first_issue;
	__u64 span, dev;

	for (int i = 0; i < REQUEST_PARTS; i++)
		p[i] = 0;
	if (!r->ios || !end) {
		p[RPART_WORKER_WAIT] = worker_wait_in(r, start, now);
		p[RPART_NO_IO] = now - start - p[RPART_WORKER_WAIT];
		return;
	}
	end = end < start ? start : end > now ? now : end;
	first = first < start ? start : first > end ? end : first;
	span = end - first;
	dev = runs_total(&r->dev);
	dev = dev < span ? dev : span;
#ifdef IOSTACK_MUTANT_URING_DEVICE_AS_QUEUE
	/* Mutant: the time on the device taken for time before it. */
	p[RPART_TO_DEVICE] = first - start + dev;
#else
	p[RPART_WORKER_WAIT] = worker_wait_in(r, start, first);
	p[RPART_TO_DEVICE] = first - start - p[RPART_WORKER_WAIT];
	p[RPART_DEVICE] = dev;
#endif
	p[RPART_BETWEEN_IO] = span - dev;
	p[RPART_AFTER_IO] = now - end;
}

/* A request of `lat`, its parts p, into totals. */
static __always_inline void uring_add(struct uring_totals *t, struct uring_req *r, __u64 lat,
				      __u64 *p)
{
	t->requests++;
	t->total_ns += lat;
	if (lat > t->max_ns)
		t->max_ns = lat;
	t->punted += r->punted;
	t->ios += r->ios;
	t->to_device_ns += p[RPART_TO_DEVICE];
	t->device_ns += p[RPART_DEVICE];
	t->between_io_ns += p[RPART_BETWEEN_IO];
	t->after_io_ns += p[RPART_AFTER_IO];
	t->no_io_ns += p[RPART_NO_IO];
	t->worker_wait_ns += p[RPART_WORKER_WAIT];
}

/* --slow: a request at least that slow, as its completion is posted: its journey. */
static __always_inline void send_request_journey(struct uring_req *r, struct uring_key *k,
						 __u64 lat, __s64 res, __u64 now)
{
	struct request_journey *e;
	struct request_trail *t;
	struct file *f;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_loss(LOSS_RINGBUF_FULL);
		return;
	}
	e->kind = JOURNEY_REQUEST;
	e->op = r->op;
	e->ts_ns = now;
	e->lat_ns = lat;
	uring_parts(r, now, e->parts);
	e->res = res;
	e->iface = r->iface;
	e->punted = r->punted;
	e->ios = r->ios;
	e->pad = 0;
	__builtin_memset(e->file, 0, sizeof(e->file));
	f = request_file(r, res);
	if (f)
		dentry_name(e->file, sizeof(e->file), BPF_CORE_READ(f, f_path.dentry));
	t = bpf_map_lookup_elem(&request_trails, k);
	if (!t || bpf_probe_read_kernel(&e->trail, sizeof(e->trail), t))
		bpf_probe_read_kernel(&e->trail, sizeof(e->trail), &request_trail_zero);
	bpf_ringbuf_submit(e, 0);
}

/* -P or --per-cgroup: the request into its submitter's process's or cgroup's totals. */
static __always_inline void group_request_ended(__u32 gen, struct uring_req *r, __u64 lat,
						__u64 *p)
{
	struct group_key k = {
		.gen = gen,
		.op = (r->iface & 1) * IOSTACK_OPS + (r->op & (IOSTACK_OPS - 1)),
		.id = r->group,
	};
	struct uring_totals *t = bpf_map_lookup_elem(&group_requests, &k);

	if (!t) {
		bpf_map_update_elem(&group_requests, &k, &uring_totals_zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&group_requests, &k);
		if (!t) {
			count_loss(LOSS_HIST_FULL);
			return;
		}
	}
	uring_add(t, r, lat, p);
}

/* A followed request's completion is posted now (its result `res`): its interface's totals
 * and latency for its operation, or with --slow its journey if it was that slow. */
static __always_inline void async_request_ended(struct uring_req *r, struct uring_key *k,
						__s64 res, __u64 now)
{
	struct uring_totals *t;
	struct hist *h;
	__u64 lat = now > r->start ? now - r->start : 0, p[REQUEST_PARTS];
	__u32 idx, gen;

	if (want_journeys) {
		if (lat >= slow_ns)
			send_request_journey(r, k, lat, res, now);
		return;
	}
	gen = hist_gen & 1;
	barrier_var(gen);
	idx = ((r->iface & 1) * 2 + gen) * IOSTACK_OPS + (r->op & (IOSTACK_OPS - 1));
	uring_parts(r, now, p);
	t = bpf_map_lookup_elem(&uring_totals, &idx);
	if (t)
		uring_add(t, r, lat, p);
	h = bpf_map_lookup_elem(&uring_hists, &idx);
	if (h)
		hist_record_exclusive(h, lat);
	if (per_process || per_cgroup_depth)
		group_request_ended(gen, r, lat, p);
}

/* io_uring_complete: the request's completion entry is posted (6.13+: (ctx, req, cqe), an
 * auxiliary entry with no request; 6.1: (ctx, req, user_data, res, ...); 5.15: (ctx,
 * user_data, res, cflags)). */
static __always_inline int uring_complete_args(__u64 *args, bool typed)
{
	struct uring_key k = {};
	struct uring_req *r;
	__s64 res;

	if (uring_abi == URING_5_15) {
		k.a = args[0];
		k.b = args[1];
		res = (__s32)args[2];
	} else {
		k.a = args[1];
		if (!k.a)
			return 0;
		if (uring_abi == URING_6_13)
			res = BPF_CORE_READ((struct io_uring_cqe *)args[2], res);
		else
			res = (__s32)args[3];
	}
	r = bpf_map_lookup_elem(&uring_reqs, &k);
	if (!r) {
		struct io_kiocb *req = (struct io_kiocb *)k.a;

		/* Only a request we would have followed is a loss. */
		if (uring_abi != URING_5_15 && uring_op_of(BPF_CORE_READ(req, opcode)) &&
		    current_selected())
			__sync_fetch_and_add(&uring_losses[0], 1);
		return 0;
	}
	if (uring_file_passes(r, res))
		async_request_ended(r, &k, res, bpf_ktime_get_ns());
	bpf_map_delete_elem(&uring_reqs, &k);
	if (want_journeys)
		bpf_map_delete_elem(&request_trails, &k);
	return 0;
}

TP_TWINS(io_uring_submit_req, uring_submit, uring_submit_args)
TP_TWINS(io_uring_submit_sqe, uring_submit_sqe, uring_submit_args)
TP_TWINS(io_uring_queue_async_work, uring_punt, uring_punt_args)
TP_TWINS(io_uring_complete, uring_complete, uring_complete_args)

/* ---- native AIO requests -------------------------------------------------------------------- */

/* fs/aio.c has no tracepoints: where function hooks work (src/tools/iostack/plan.rs, plan_aio),
 * an io_submit iocb is followed from its setup in io_submit (aio_read, aio_write; aio_fsync: a
 * sync, which a worker runs) to aio_complete, which writes its completion event to the ring:
 * for a direct read or write, in its last bio's completion. It is known by its aio_kiocb,
 * whose kiocb is at offset 0, where a direct-I/O bio leads (uring_request_io_ended): in the
 * same map as io_uring's requests. A setup that fails (a file not open for it, a bad buffer,
 * an offset out of range: the function returns an error, io_submit destroys the iocb, and no
 * event comes) ends it there. */

/* IOCB_CMD_*'s operation slot (0: not traced), from user space. */
const volatile __u8 aio_ops[IOSTACK_IOCB_CMDS] = {};
/* aio_complete_rw and aio_fsync_work (kallsyms; set after the verifier is done, as
 * dio_end_io_*): where a read's or write's kiocb and a sync's work go at their end. An iocb
 * whose setup was not seen is a loss if it is one of these. */
__u64 aio_rw_done_fn = 0;
__u64 aio_sync_work_fn = 0;

/* kprobes' return side has no arguments: the iocb each CPU last began to set up, and by which
 * thread, for a failed setup's end. */
struct aio_setting_up {
	__u64 key;
	__u32 tid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct aio_setting_up);
} aio_setting_up SEC(".maps");

/* aio_read(kiocb, iocb, vectored, compat), aio_write(...) or aio_fsync(fsync_iocb, iocb,
 * datasync): an iocb copied in by io_submit is being set up. Every submitter's is followed to its end, its operation's slot 0
 * where it is not traced (or not selected: its completion runs in whatever context ends its
 * I/O, where the submitter is not known), so that a completion whose setup was not seen is a
 * loss. */
static __always_inline int aio_setup_entry(void *ctx, enum hook_flavour f)
{
	struct iocb *iocb = (void *)hook_arg(ctx, f, 1);
	struct uring_req r = {};
	struct uring_key k = {};
	__u16 cmd = BPF_CORE_READ(iocb, aio_lio_opcode);

	k.a = hook_arg(ctx, f, 0);
	if (!k.a)
		return 0;
	if (f == HOOK_KPROBE) {
		__u32 zero = 0;
		struct aio_setting_up *up = bpf_map_lookup_elem(&aio_setting_up, &zero);

		if (up) {
			up->key = k.a;
			up->tid = current_tid();
		}
	}
	if (cmd < IOSTACK_IOCB_CMDS && current_selected())
		r.op = aio_ops[cmd & (IOSTACK_IOCB_CMDS - 1)];
	r.iface = IFACE_AIO;
	r.req = k.a;
	if (per_process || per_cgroup_depth)
		r.group = call_group();
	r.start = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&uring_reqs, &k, &r, BPF_ANY)) {
		__sync_fetch_and_add(&uring_losses[1], 1);
		return 0;
	}
	if (want_journeys && r.op)
		request_trail_begin(&k, BPF_CORE_READ(iocb, aio_data), cmd);
	return 0;
}

/* aio_complete(iocb): its completion event is written to the ring. */
static __always_inline int aio_complete_entry(void *ctx, enum hook_flavour f)
{
	struct aio_kiocb *iocb = (void *)hook_arg(ctx, f, 0);
	struct uring_key k = {.a = (__u64)iocb};
	struct uring_req *r = bpf_map_lookup_elem(&uring_reqs, &k);
	__u64 done, work;
	__s64 res;

	if (!r) {
		done = (__u64)BPF_CORE_READ(iocb, rw.ki_complete);
		work = (__u64)BPF_CORE_READ(iocb, fsync.work.func);
		if ((done && done == aio_rw_done_fn) || (work && work == aio_sync_work_fn))
			__sync_fetch_and_add(&uring_losses[0], 1);
		return 0;
	}
	if (r->op) {
		res = BPF_CORE_READ(iocb, ki_res.res);
		if (uring_file_passes(r, res))
			async_request_ended(r, &k, res, bpf_ktime_get_ns());
	}
	bpf_map_delete_elem(&uring_reqs, &k);
	if (want_journeys)
		bpf_map_delete_elem(&request_trails, &k);
	return 0;
}

/* The setup of the iocb `key` failed: no event will come. */
static __always_inline void aio_setup_failed(__u64 key)
{
	struct uring_key k = {.a = key};

	bpf_map_delete_elem(&uring_reqs, &k);
	if (want_journeys)
		bpf_map_delete_elem(&request_trails, &k);
}

/* The kprobe flavour's failed setup: the iocb its CPU began, if this thread began it (a thread
 * that slept in the setup, faulting in its iovec, and woke on another CPU leaves its entry to
 * be overwritten when its aio_kiocb is next set up). */
static __always_inline __u64 aio_setup_stashed(void)
{
	__u32 zero = 0;
	struct aio_setting_up *up = bpf_map_lookup_elem(&aio_setting_up, &zero);

	return up && up->tid == current_tid() ? up->key : 0;
}

/* Each setup function's entry starts the request; its return, if it is an error (an int), ends
 * it. */
#define AIO_SETUP_HOOKS(name, nargs)                                                  \
	FUNC_ENTRY_HOOKS(name, aio_setup_entry)                                     \
	SEC("fexit/" #name)                                                         \
	int name##_fexit(__u64 *ctx)                                                \
	{                                                                           \
		if ((int)ctx[nargs])                                                \
			aio_setup_failed(ctx[0]);                                   \
		return 0;                                                           \
	}                                                                           \
	SEC("kretprobe/" #name)                                                     \
	int name##_kretprobe(struct pt_regs *ctx)                                   \
	{                                                                           \
		__u64 key;                                                          \
                                                                                    \
		if ((int)PT_REGS_RC(ctx)) {                                         \
			key = aio_setup_stashed();                                  \
			if (key)                                                    \
				aio_setup_failed(key);                              \
		}                                                                   \
		return 0;                                                           \
	}

AIO_SETUP_HOOKS(aio_read_setup, 4)
AIO_SETUP_HOOKS(aio_write_setup, 4)
AIO_SETUP_HOOKS(aio_sync_setup, 3)
FUNC_ENTRY_HOOKS(aio_done, aio_complete_entry)

/* Task storage goes with the task; the hash entries must be removed. */
static __always_inline int on_task_exit(void)
{
	calls_forget(current_tid());
	history_forget(current_tid());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
