/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A tool's per-thread state: in task-local storage where the kernel offers it to tracing
 * programs (5.11+: found through the task, no hashing, freed with the task), else in a hash map
 * by thread id, which the tool empties when a thread exits (its on_task_exit). User space loads
 * with per_task set and falls back where the kernel refuses (src/common/load/mod.rs,
 * load_with_thread_state), creating only the map of the path taken.
 *
 *     THREAD_STATE(name, struct value, entries)
 * defines name_by_task, name_by_tid, a zeroed value to create hash entries from, and
 *     struct value *name_of(struct task_struct *task, __u32 tid, bool create)
 * where task is a trusted pointer (bpf_get_current_task_btf(), a tp_btf argument) in per_task
 * mode and ignored otherwise. Entries are created only where a tool says so: task storage may
 * allocate, and a tool never creates from inside the scheduler (sched_switch, sched_waking). */
#ifndef IOSTACK_THREAD_STATE_BPF_H
#define IOSTACK_THREAD_STATE_BPF_H

const volatile bool per_task = false;

#define THREAD_STATE(name, vtype, entries)                                              \
	struct {                                                                      \
		__uint(type, BPF_MAP_TYPE_TASK_STORAGE);                              \
		__uint(map_flags, BPF_F_NO_PREALLOC);                                 \
		__type(key, int);                                                     \
		__type(value, vtype);                                                  \
	} name##_by_task SEC(".maps");                                                \
	struct {                                                                      \
		__uint(type, BPF_MAP_TYPE_HASH);                                      \
		__uint(max_entries, entries);                                         \
		__type(key, __u32);                                                   \
		__type(value, vtype);                                                  \
	} name##_by_tid SEC(".maps");                                                 \
	const vtype name##_zero = {};                                                  \
	static __always_inline vtype *name##_of(struct task_struct *task, __u32 tid,   \
					       bool create)                           \
	{                                                                             \
		vtype *v;                                                              \
		/* NULL only on paths the compiler keeps for a task it checked: 6.1's   \
		 * verifier walks them (a trusted task pointer may be NULL to it) and   \
		 * refuses NULL for bpf_task_storage_get, which 6.2+ allow. */          \
		if (per_task && !task)                                                \
			return NULL;                                                  \
		if (per_task)                                                         \
			return bpf_task_storage_get(&name##_by_task, task, 0,         \
					create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0); \
		v = bpf_map_lookup_elem(&name##_by_tid, &tid);                        \
		if (v || !create)                                                     \
			return v;                                                     \
		bpf_map_update_elem(&name##_by_tid, &tid, &name##_zero, BPF_NOEXIST); \
		return bpf_map_lookup_elem(&name##_by_tid, &tid);                     \
	}                                                                             \
	static __always_inline void name##_forget(__u32 tid)                          \
	{                                                                             \
		if (!per_task)                                                        \
			bpf_map_delete_elem(&name##_by_tid, &tid);                    \
	}

#endif
