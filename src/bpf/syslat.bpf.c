// SPDX-License-Identifier: GPL-2.0
/* syslat: time spent in I/O system calls, per operation, from sys_enter to sys_exit. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/hist.bpf.h"
#include "lib/losses.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/thread_state.bpf.h"
#include "lib/syscalls.bpf.h"
#include "lib/per_cgroup.bpf.h"
#include "syslat.h"

const volatile bool failed_only = false;

/* One entry per thread that made a traced call, reused in place (plain stores, no map update). */
THREAD_STATE(starts, struct syslat_start, 32768)

/* Index: generation * SYSLAT_MAX_SLOTS + slot. Arrays are looked up inline, without hashing. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * SYSLAT_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* --per-cgroup (lib/per_cgroup.bpf.h): sized by user space; `hists` is then `other`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct syslat_cgroup_key);
	__type(value, struct hist);
} cgroup_hists SEC(".maps");

static __always_inline struct task_struct *current_task_btf(void)
{
	return per_task ? bpf_get_current_task_btf() : NULL;
}

static __always_inline __u32 current_tid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}


static __always_inline int on_sys_enter(long id, __u64 fd)
{
	__u32 slot = slot_of(id);
	struct task_struct *task;
	struct syslat_start *s;

	if (!slot || !current_selected())
		return 0;
	task = current_task_btf();
	if (in_compat_syscall(task))
		return 0;
	s = starts_of(task, current_tid(), true);
	if (!s) {
		count_loss(LOSS_START_FULL);
		return 0;
	}
	s->slot = slot;
	s->ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_sys_exit(long id, long ret)
{
	struct task_struct *task;
	struct syslat_start *s;
	struct hist *h;
	__u64 now, ts;
	__u32 idx;

	if (!slot_of(id) || !current_selected())
		return 0;
	task = current_task_btf();
	s = starts_of(task, current_tid(), false);
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
	h = NULL;
	if (per_cgroup_depth) {
		struct syslat_cgroup_key k = {
			.gen = hist_gen & 1,
			.slot = idx,
			.cgroup = cgroup_at_depth(current_cgroup()),
		};

		h = cgroup_hist(&cgroup_hists, &k);
	}
	idx = (hist_gen & 1) * SYSLAT_MAX_SLOTS + (idx & (SYSLAT_MAX_SLOTS - 1));
	if (!h)
		h = bpf_map_lookup_elem(&hists, &idx);
	if (h)
		hist_record_exclusive(h, now - ts);
	return 0;
}

/* Task storage goes with the task; the hash entry must be removed. */
static __always_inline int on_task_exit(void)
{
	starts_forget(current_tid());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
