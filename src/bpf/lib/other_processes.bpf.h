/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* -p's memory of the threads of other processes, so that a syscall program run by the machine's
 * other processes leaves without calling a helper. One helper call costs 16 ns a run on the
 * host (an AMD EPYC whose kernel returns through Safe-RET thunks), a third of an empty
 * program's 50 (examples/hook_floor on the per-syscall tracepoints, a pipe ping-pong, 6.9
 * programs a switch; 2026-11-27); and -p's test needs the running thread's process, which only a
 * helper gives here (bpf_get_current_pid_tgid; 6.18 inlines neither it nor the task helpers).
 *
 * A thread is known by its kernel stack. Every syscall program's context lies on the stack of
 * the thread in the syscall (the raw tracepoint's argument array, perf's record for the
 * per-syscall tracepoints: locals of the kernel's functions that call the program); x86_64
 * stacks are THREAD_SIZE-aligned (16 KiB, 32 KiB with KASAN) and a live thread's is its own.
 * So a slot holds the 16 KiB-block number of another process's thread's stack base, and a
 * context whose address lies in that block is that thread's. A thread is remembered only when
 * the context it was seen with lies in its stack's first block (always, with 16 KiB stacks),
 * and forgotten where it exits, before its stack can be anyone else's; user space turns the
 * memory on only where that exit program cannot be skipped (tp_btf and raw_tp guard recursion
 * per program; a perf tracepoint program is skipped while another runs on its CPU, e.g. while
 * a map update from user space is preempted there), and only with -p.
 *
 * The context's address becomes a number by subtracting a variable's address from it (pointer
 * subtraction, allowed to tracers that may see kernel addresses) and adding that variable's
 * address, learnt from the current task seen both as a pointer (bpf_get_current_task_btf,
 * 5.11+) and as a number (bpf_get_current_task). A stack's address is read as a number (a
 * probe read: 6.1 types task->stack as a scalar, 6.18 as memory). */
#ifndef IOSTACK_OTHER_PROCESSES_BPF_H
#define IOSTACK_OTHER_PROCESSES_BPF_H

#include "lib/task_filter.bpf.h"

/* Set by user space (src/common/kernel/syscalls.rs, remember_other_processes). */
const volatile bool remember_others = false;

#define OTHERS_SLOTS_LOG2 12
#define OTHERS_SLOTS (1 << OTHERS_SLOTS_LOG2)
#define OTHERS_BLOCK_SHIFT 14

/* In a section of their own: written once per thread of another process, read on every
 * syscall, away from the tools' counters that every event writes. */
__u64 others_block[OTHERS_SLOTS] SEC(".bss.others");
/* This variable's own address as a number (0 until a thread was remembered). */
__u64 others_base SEC(".bss.others");

/* Fibonacci hashing: the product's top OTHERS_SLOTS_LOG2 bits, which every bit of the block
 * number reaches. */
static __always_inline __u32 others_slot(__u64 block)
{
	return (block * 0x9E3779B97F4A7C15ULL) >> (64 - OTHERS_SLOTS_LOG2);
}

static __always_inline __u64 address_of(void *p)
{
	__u64 from_base = (__u64)((char *)p - (char *)&others_base);

	/* Kept apart: the compiler would otherwise subtract the pointer from a number, which the
	 * verifier refuses. */
	barrier_var(from_base);
	return from_base + others_base;
}

/* Whether the thread running the syscall program whose context is ctx is of a process -p
 * leaves out: one load where it was seen before, else its ids (remembered when it is). */
static __always_inline bool other_process(void *ctx)
{
	struct task_struct *task;
	__u64 block;

	if (!remember_others)
		return false;
	if (others_base) {
		block = address_of(ctx) >> OTHERS_BLOCK_SHIFT;
		if (others_block[others_slot(block)] == block)
			return true;
	}
	if ((current_ids() >> 32) == task_filter.tgid)
		return false;
	task = (void *)bpf_get_current_task();
	if (!others_base) {
		__u64 task_from_base = (__u64)((char *)bpf_get_current_task_btf() -
					       (char *)&others_base);

		barrier_var(task_from_base);
		others_base = (__u64)task - task_from_base;
	}
	block = address_of(ctx) >> OTHERS_BLOCK_SHIFT;
	if (block == (__u64)BPF_CORE_READ(task, stack) >> OTHERS_BLOCK_SHIFT)
		others_block[others_slot(block)] = block;
	return true;
}

/* The exiting thread (current) is forgotten while its stack is still its own. */
static __always_inline void forget_other_process(void)
{
	struct task_struct *task;
	__u64 block;
	__u32 slot;

	if (!remember_others || !others_base)
		return;
	task = (void *)bpf_get_current_task();
	block = (__u64)BPF_CORE_READ(task, stack) >> OTHERS_BLOCK_SHIFT;
	slot = others_slot(block);
	if (others_block[slot] == block)
		others_block[slot] = 0;
}

#endif
