/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A thread's time as the scheduler itself accounts it, read where a tool already runs (a call's
 * entry and exit, the thread's wakeup) instead of shadowing every context switch of the machine:
 *
 * - se.sum_exec_runtime: time on a CPU, brought up to date by update_curr at a tick and when the
 *   thread leaves or takes a CPU; se.exec_start: the run queue's clock_task at that update. While
 *   a thread runs, both move together, so sum - exec_start stays put; it falls by exactly the
 *   time the thread spends off its CPU (exec_start jumps at the switch in, sum does not). Read at
 *   a call's entry and exit, its change is the call's time off a CPU, with no "now" in the
 *   scheduler's clock needed (the stale slice since the last tick cancels out).
 * - clock_task is a run queue's own clock less the IRQ time (CONFIG_IRQ_TIME_ACCOUNTING) and the
 *   steal time (paravirt) it accounted: each CPU's differs (0.29 s between the CI host's two
 *   CPUs' steal on 2026-11-26), so exec_start is moved to the run queue's clock (rq->clock, the
 *   same on every CPU where sched_clock is stable) by adding that CPU's clock - clock_task, read
 *   through the task's cfs_rq (no per-CPU variables needed: 5.10's BTF has none).
 * - sched_info.run_delay: time waiting on a run queue, added when the thread takes a CPU.
 * - nvcsw, nivcsw: its switches; none during a call means the call never left its CPU.
 * - When a sleeping thread left its CPU (thread_slept_at: its last arrival on a CPU plus what it
 *   ran since, in rq->clock): a wakeup's ktime minus it is the sleep's length plus the offset
 *   between the two clocks (ktime minus the scheduler's clock: 18.86 s on the CI host), which
 *   the call's exit solves for (the sleeps and the run-queue waits add up to its time off a
 *   CPU).
 *
 * Everything here is read with plain loads where the task pointer is typed (tp_btf,
 * bpf_get_current_task_btf), else through CO-RE probe reads. */
#ifndef IOSTACK_THREAD_CLOCK_BPF_H
#define IOSTACK_THREAD_CLOCK_BPF_H

#include "lib/blk.bpf.h"

struct thread_clock {
	__s64 gap;       /* sum_exec_runtime - exec_start (in rq->clock): falls by time off a CPU */
	__u64 run_delay; /* waiting for a CPU, up to its last switch in */
	__u64 nvcsw;     /* its switches: voluntary (it slept), */
	__u64 nivcsw;    /* and preempted */
};

/* rq->clock - rq->clock_task of the run queue a task is on (or last ran on): the IRQ and steal
 * time that CPU accounted, 0 where the kernel has no group scheduling to reach it by. */
static __always_inline __s64 rq_clock_lag(struct task_struct *t, bool typed)
{
	struct cfs_rq *cfs;
	struct rq *rq;

	if (!bpf_core_field_exists(t->se.cfs_rq) || !bpf_core_field_exists(cfs->rq))
		return 0;
	cfs = IOSTACK_GET(typed, t, se.cfs_rq);
	if (!cfs)
		return 0;
	rq = IOSTACK_GET(typed, cfs, rq);
	if (!rq)
		return 0;
	return (__s64)(IOSTACK_GET(typed, rq, clock) - IOSTACK_GET(typed, rq, clock_task));
}

/* When a thread off its CPU left it (exec_start), in the scheduler's rq->clock. */
static __always_inline __s64 thread_left_cpu(struct task_struct *t, bool typed)
{
	return (__s64)IOSTACK_GET(typed, t, se.exec_start) + rq_clock_lag(t, typed);
}

/* Whether thread_left_cpu means anything: moving a thread to another CPU zeroes exec_start
 * (migrate_task_rq_fair: "no longer consider this task hot") until it next runs. */
static __always_inline bool thread_left_cpu_known(struct task_struct *t, bool typed)
{
	return IOSTACK_GET(typed, t, se.exec_start) != 0;
}

#define IOSTACK_SCHED_NORMAL 0
#define IOSTACK_SCHED_BATCH 3
#define IOSTACK_SCHED_IDLE 5

/* When a sleeping thread left its CPU, in rq->clock (0: not known): when it last took a CPU
 * (sched_info.last_arrival, read from rq->clock itself) plus what it ran from then
 * (sum_exec_runtime - prev_sum_exec_runtime: the fair class sets the second to the first as
 * it hands the thread its CPU). Not exec_start plus its CPU's lag read at the wakeup: that lag
 * (rq->clock - clock_task) grows by the steal and IRQ time the CPU accounts while the thread
 * sleeps, and the sleep's start came out late by as much. In an fsync beside a CI run, the
 * start of a 107.7 ms sleep (ftrace's sched_switch to its sched_waking) was 27.2 ms late: it
 * showed as 13.7 ms of other sleep where the journal's I/O was (CI63, 2026-11-29); the host
 * stole 10-40 ms of CPU in 0.2 s at times in the next CI run (/proc/stat's steal, sampled
 * every 0.2 s). A move to another CPU while asleep zeroes exec_start, not these: no longer
 * lost. What this misses is the steal and IRQ time of the thread's last stint on its CPU.
 * Other classes (real-time, deadline) set no prev_sum_exec_runtime: exec_start and the lag. */
static __always_inline __s64 thread_slept_at(struct task_struct *t, bool typed)
{
	__u32 policy = IOSTACK_GET(typed, t, policy);
	__u64 arrival;

	if (policy == IOSTACK_SCHED_NORMAL || policy == IOSTACK_SCHED_BATCH ||
	    policy == IOSTACK_SCHED_IDLE) {
		arrival = IOSTACK_GET(typed, t, sched_info.last_arrival);
		if (arrival)
			return (__s64)(arrival + IOSTACK_GET(typed, t, se.sum_exec_runtime) -
				       IOSTACK_GET(typed, t, se.prev_sum_exec_runtime));
	}
	return thread_left_cpu_known(t, typed) ? thread_left_cpu(t, typed) : 0;
}

static __always_inline void thread_clock_read(struct task_struct *t, bool typed,
					      struct thread_clock *c)
{
	c->gap = (__s64)IOSTACK_GET(typed, t, se.sum_exec_runtime) - thread_left_cpu(t, typed);
	c->run_delay = IOSTACK_GET(typed, t, sched_info.run_delay);
	c->nvcsw = IOSTACK_GET(typed, t, nvcsw);
	c->nivcsw = IOSTACK_GET(typed, t, nivcsw);
}

/* The thread has not finished leaving its CPU (a wakeup before it slept, or while it switches
 * out): no sleep to account yet. */
static __always_inline bool thread_on_cpu(struct task_struct *t, bool typed)
{
	return IOSTACK_GET(typed, t, on_cpu);
}

#endif
