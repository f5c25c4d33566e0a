/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The I/O system calls a tool times, and the programs of every flavour the syscall planner
 * (src/common/kernel/syscalls.rs, plan_syscall_hooks) chooses from: sys_enter/sys_exit through
 * tp_btf or raw_tp (one program each for every syscall of the system, filtered here by one table
 * load), else one perf tracepoint pair per traced syscall. A tool defines
 *     on_sys_enter(long id, __u64 fd)    fd: the call's first argument (the file descriptor of
 *                                         read, write, fsync...)
 *     on_sys_exit(long id, long ret)
 *     on_task_exit()                     a thread exits (free its per-thread state)
 * (before or after including this header). The program names are part of the contract with the
 * planner. */
#ifndef IOSTACK_SYSCALLS_BPF_H
#define IOSTACK_SYSCALLS_BPF_H

#include "lib/tp_twins.bpf.h"
#include "lib/other_processes.bpf.h"

static __always_inline int on_sys_enter(long id, __u64 fd);
static __always_inline int on_sys_exit(long id, long ret);
static __always_inline int on_task_exit(void);

/* Syscall numbers below this can be traced (x86_64 has about 470). */
#define SYSCALLS_MAX_NR 1024

/* Syscall number -> slot (0: not traced), filled from the libc crate's SYS_* numbers. One bounds
 * check and one load decide for every syscall of the system. */
const volatile __u8 sys_slot[SYSCALLS_MAX_NR];

/* x86's marker of a 32-bit (ia32 compat) syscall in progress: its numbers differ from ours. */
#define IOSTACK_TS_COMPAT 0x0002

static __always_inline __u32 slot_of(long id)
{
	if (id < 0 || id >= SYSCALLS_MAX_NR)
		return 0;
	return sys_slot[id];
}

/* task: the current task as a trusted pointer, or NULL (then read through a probe). */
static __always_inline bool in_compat_syscall(struct task_struct *task)
{
	if (task) {
		if (!bpf_core_field_exists(task->thread_info.status))
			return false;
		return task->thread_info.status & IOSTACK_TS_COMPAT;
	}
	task = (void *)bpf_get_current_task();
	if (!bpf_core_field_exists(task->thread_info.status))
		return false;
	return BPF_CORE_READ(task, thread_info.status) & IOSTACK_TS_COMPAT;
}

/* sys_enter(regs, id) and sys_exit(regs, ret): the exit's syscall number is in regs->orig_ax,
 * the first argument in regs->di (x86_64). */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter_btf, struct pt_regs *regs, long id)
{
	if (other_process(ctx))
		return 0;
	return on_sys_enter(id, regs->di);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_btf, struct pt_regs *regs, long ret)
{
	if (other_process(ctx))
		return 0;
	return on_sys_exit(regs->orig_ax, ret);
}

SEC("raw_tp/sys_enter")
int sys_enter_raw(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (void *)ctx->args[0];

	if (other_process(ctx))
		return 0;
	return on_sys_enter(ctx->args[1], BPF_CORE_READ(regs, di));
}

SEC("raw_tp/sys_exit")
int sys_exit_raw(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (void *)ctx->args[0];

	if (other_process(ctx))
		return 0;
	return on_sys_exit(BPF_CORE_READ(regs, orig_ax), ctx->args[1]);
}

static __always_inline int task_exit_args(__u64 *args, bool typed)
{
	forget_other_process();
	return on_task_exit();
}

TP_TWINS(sched_process_exit, task_exit, task_exit_args)

/* Fallback: the per-syscall perf tracepoints, one attachment per traced syscall (user space
 * attaches these programs to each syscalls:sys_{enter,exit}_<name>). */
SEC("tracepoint/syscalls/sys_enter_read")
int sys_enter_tp(struct syscall_trace_enter *ctx)
{
	if (other_process(ctx))
		return 0;
	return on_sys_enter(ctx->nr, ctx->args[0]);
}

/* The same for a syscall without arguments (sync): its record ends before args[0], and a
 * program that reads past a record's end is refused at attach (EACCES). */
SEC("tracepoint/syscalls/sys_enter_sync")
int sys_enter_tp_noargs(struct syscall_trace_enter *ctx)
{
	if (other_process(ctx))
		return 0;
	return on_sys_enter(ctx->nr, 0);
}

SEC("tracepoint/syscalls/sys_exit_read")
int sys_exit_tp(struct syscall_trace_exit *ctx)
{
	if (other_process(ctx))
		return 0;
	return on_sys_exit(ctx->nr, ctx->ret);
}

/* Never with other_processes' memory (its exit may be skipped). */
SEC("tracepoint/sched/sched_process_exit")
int task_exit_tp(void *ctx)
{
	return on_task_exit();
}

#endif
