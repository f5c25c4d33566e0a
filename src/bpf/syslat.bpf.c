// SPDX-License-Identifier: GPL-2.0
/* syslat: time spent in I/O system calls, per operation, from sys_enter to sys_exit. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/hist.bpf.h"
#include "lib/losses.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/tp_twins.bpf.h"
#include "syslat.h"

/* Syscall number -> histogram slot (0: not traced), filled from the libc crate's SYS_* numbers.
 * One bounds check and one load decide for every syscall of the system. */
const volatile __u8 sys_slot[SYSLAT_MAX_NR];
const volatile bool failed_only = false;
/* Keep starts in task-local storage (kernels that offer it to tracing programs, 5.11+): found
 * through the task itself, no hashing, freed with the task. User space loads with this set
 * and falls back to the hash map where the kernel refuses. */
const volatile bool per_task = false;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct syslat_start);
} task_starts SEC(".maps");

/* The fallback: one entry per thread that made a traced call, reused in place (plain stores,
 * no map update) and removed when the thread exits, so it holds at most the live threads. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct syslat_start);
} starts SEC(".maps");

/* Index: generation * SYSLAT_MAX_SLOTS + slot. Arrays are looked up inline, without hashing. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * SYSLAT_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* x86's marker of a 32-bit (ia32 compat) syscall in progress: its numbers differ from ours. */
#define TS_COMPAT 0x0002

/* task: the current task as a trusted pointer (per_task mode), else NULL. */
static __always_inline bool in_compat_syscall(struct task_struct *task)
{
	if (task) {
		/* A trusted pointer: a direct load instead of a probe_read. */
		if (!bpf_core_field_exists(task->thread_info.status))
			return false;
		return task->thread_info.status & TS_COMPAT;
	}
	task = (void *)bpf_get_current_task();
	if (!bpf_core_field_exists(task->thread_info.status))
		return false;
	return BPF_CORE_READ(task, thread_info.status) & TS_COMPAT;
}

static __always_inline struct task_struct *current_task_btf(void)
{
	return per_task ? bpf_get_current_task_btf() : NULL;
}

/* The calling thread's start slot; with create, made if missing (NULL when that fails). */
static __always_inline struct syslat_start *start_slot(struct task_struct *task, bool create)
{
	struct syslat_start *s, fresh = {};
	__u32 tid;

	if (per_task)
		return bpf_task_storage_get(&task_starts, task, 0,
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	tid = bpf_get_current_pid_tgid();
	s = bpf_map_lookup_elem(&starts, &tid);
	if (s || !create)
		return s;
	bpf_map_update_elem(&starts, &tid, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&starts, &tid);
}

static __always_inline __u32 slot_of(long id)
{
	if (id < 0 || id >= SYSLAT_MAX_NR)
		return 0;
	return sys_slot[id];
}

static __always_inline int on_enter(long id)
{
	__u32 slot = slot_of(id);
	struct task_struct *task;
	struct syslat_start *s;

	if (!slot || !current_selected())
		return 0;
	task = current_task_btf();
	if (in_compat_syscall(task))
		return 0;
	s = start_slot(task, true);
	if (!s) {
		count_loss(LOSS_START_FULL);
		return 0;
	}
	s->slot = slot;
	s->ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_exit(long id, long ret)
{
	struct task_struct *task;
	struct syslat_start *s;
	struct hist *h;
	__u64 now, ts;
	__u32 idx;

	if (!slot_of(id) || !current_selected())
		return 0;
	task = current_task_btf();
	s = start_slot(task, false);
	if (!s || !s->ts) {
		/* In flight when tracing began; compat calls were never started on purpose. */
		if (!in_compat_syscall(task))
			count_loss(LOSS_NO_START);
		return 0;
	}
	now = bpf_ktime_get_ns();
	ts = s->ts;
	idx = s->slot;
	s->ts = 0;
	if (ts > now) {
		count_loss(LOSS_CLOCK);
		return 0;
	}
	if (failed_only && ret >= 0)
		return 0;
	idx = (hist_gen & 1) * SYSLAT_MAX_SLOTS + (idx & (SYSLAT_MAX_SLOTS - 1));
	h = bpf_map_lookup_elem(&hists, &idx);
	if (h)
		hist_record_exclusive(h, now - ts);
	return 0;
}

static __always_inline int on_task_exit(void)
{
	__u32 tid = bpf_get_current_pid_tgid();

	/* Task storage goes with the task; the hash entry must be removed. */
	if (!per_task)
		bpf_map_delete_elem(&starts, &tid);
	return 0;
}

/* sys_enter(regs, id) and sys_exit(regs, ret): the exit's syscall number is in regs->orig_ax. */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter_btf, struct pt_regs *regs, long id)
{
	return on_enter(id);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_btf, struct pt_regs *regs, long ret)
{
	return on_exit(regs->orig_ax, ret);
}


SEC("raw_tp/sys_enter")
int sys_enter_raw(struct bpf_raw_tracepoint_args *ctx)
{
	return on_enter(ctx->args[1]);
}

SEC("raw_tp/sys_exit")
int sys_exit_raw(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (void *)ctx->args[0];

	return on_exit(BPF_CORE_READ(regs, orig_ax), ctx->args[1]);
}

static __always_inline int task_exit_args(__u64 *args, bool typed)
{
	return on_task_exit();
}

TP_TWINS(sched_process_exit, task_exit, task_exit_args)

/* Fallback: the per-syscall perf tracepoints, one attachment per traced syscall (user space
 * attaches these programs to each syscalls:sys_{enter,exit}_<name>). */
SEC("tracepoint/syscalls/sys_enter_read")
int sys_enter_tp(struct syscall_trace_enter *ctx)
{
	return on_enter(ctx->nr);
}

SEC("tracepoint/syscalls/sys_exit_read")
int sys_exit_tp(struct syscall_trace_exit *ctx)
{
	return on_exit(ctx->nr, ctx->ret);
}

SEC("tracepoint/sched/sched_process_exit")
int task_exit_tp(void *ctx)
{
	return on_task_exit();
}

char LICENSE[] SEC("license") = "GPL";
