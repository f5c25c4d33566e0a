/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* -p PID, --tid TID, -c COMM, --cgroup PATH: one rodata struct, filled by user space
 * (src/common/run/filter.rs, TaskFilter), tested in the kernel. With nothing set, the constants
 * remove the code. */
#ifndef IOSTACK_TASK_FILTER_BPF_H
#define IOSTACK_TASK_FILTER_BPF_H

#include "lib/cgroup.bpf.h"

#define IOSTACK_COMM_LEN 16

struct task_filter {
	__u32 tgid;     /* 0: any process */
	__u32 tid;      /* 0: any thread */
	__u32 has_comm; /* compare comm */
	char comm[IOSTACK_COMM_LEN];
	__u32 cgroup_level; /* with cgroup_id: its level below the root */
	__u64 cgroup_id;    /* a cgroup v2 (and its descendants); 0: any */
	__u64 pidns_dev;    /* the tool's pid namespace, where it is not the initial one: */
	__u64 pidns_ino;    /* -p/--tid and the pids shown are that namespace's; 0: initial */
};

const volatile struct task_filter task_filter = {};

/* --cgroup's cgroup, for the running task's side of the filter: a one-slot cgroup array that
 * user space fills before load (src/common/cgroup/task_map.rs). bpf_current_task_under_cgroup
 * is one helper call, where the CO-RE walk of cgroup_selected(current_cgroup()) is five or six
 * probe reads. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} task_cgroup SEC(".maps");

/* Whether the running task lies in --cgroup's cgroup (true without one). */
static __always_inline bool current_in_cgroup(void)
{
	return !task_filter.cgroup_id || bpf_current_task_under_cgroup(&task_cgroup, 0) == 1;
}

/* Whether cg lies in --cgroup's cgroup (true without one). */
static __always_inline bool cgroup_selected(struct cgroup *cg)
{
	return !task_filter.cgroup_id ||
	       cgroup_ancestor_id(cg, task_filter.cgroup_level) == task_filter.cgroup_id;
}

static __always_inline bool comm_equal(const char *a)
{
	for (int i = 0; i < IOSTACK_COMM_LEN; i++) {
		if (a[i] != task_filter.comm[i])
			return false;
		if (!a[i])
			break;
	}
	return true;
}

/* The running task's (tgid << 32 | tid) as the tool's pid namespace numbers them
 * (bpf_get_ns_current_pid_tgid, 5.7+); 0 for a task outside that namespace. */
static __always_inline __u64 current_ids(void)
{
	struct bpf_pidns_info ns = {};

	if (!task_filter.pidns_ino)
		return bpf_get_current_pid_tgid();
	if (bpf_get_ns_current_pid_tgid(task_filter.pidns_dev, task_filter.pidns_ino, &ns, sizeof(ns)))
		return 0;
	return (__u64)ns.tgid << 32 | ns.pid;
}

/* Pid namespaces nested deeper than this below the initial one are not searched. */
#define IOSTACK_PIDNS_LEVELS 8

/* A struct pid's number in the tool's pid namespace (its upid at the level whose namespace is
 * the tool's), 0 if it has none there. The level is found by the namespace's inode: a process
 * inside a pid namespace cannot tell its level from its own /proc (its NSpid line starts at
 * that namespace). */
static __always_inline __u32 pid_in_ns(struct pid *pid)
{
	__u64 numbers = (__u64)pid + bpf_core_field_offset(struct pid, numbers);
	struct upid up = {};
	__u32 level;

	if (!pid)
		return 0;
	level = BPF_CORE_READ(pid, level);
	for (__u32 i = 1; i < IOSTACK_PIDNS_LEVELS; i++) {
		if (i > level)
			break;
		bpf_probe_read_kernel(&up, sizeof(up), (void *)(numbers + i * sizeof(struct upid)));
		if (up.ns && BPF_CORE_READ(up.ns, ns.inum) == task_filter.pidns_ino)
			return up.nr;
	}
	return 0;
}

/* Any task's (tgid << 32 | tid) as the tool's pid namespace numbers them (the scheduler's
 * tasks, which are not the current one): -p and --tid compare in that namespace, on every hook. */
static __always_inline __u64 task_ids(struct task_struct *t)
{
	if (!task_filter.pidns_ino)
		return (__u64)BPF_CORE_READ(t, tgid) << 32 | (__u32)BPF_CORE_READ(t, pid);
	return (__u64)pid_in_ns(BPF_CORE_READ(t, group_leader, thread_pid)) << 32 |
	       pid_in_ns(BPF_CORE_READ(t, thread_pid));
}

/* A task known by its ids and name (e.g. the recorded submitter of an I/O). */
static __always_inline bool task_selected(__u32 tgid, __u32 tid, const char *comm)
{
	if (task_filter.tgid && tgid != task_filter.tgid)
		return false;
	if (task_filter.tid && tid != task_filter.tid)
		return false;
	return !task_filter.has_comm || comm_equal(comm);
}

/* The task running now, but for its name: its ids and its cgroup. */
static __always_inline bool current_selected_but_comm(void)
{
	__u64 id;

	if (task_filter.tgid || task_filter.tid) {
		id = current_ids();
		if (task_filter.tgid && (id >> 32) != task_filter.tgid)
			return false;
		if (task_filter.tid && (__u32)id != task_filter.tid)
			return false;
	}
	return current_in_cgroup();
}

/* The task running now. */
static __always_inline bool current_selected(void)
{
	char comm[IOSTACK_COMM_LEN];

	if (!current_selected_but_comm())
		return false;
	if (!task_filter.has_comm)
		return true;
	bpf_get_current_comm(comm, sizeof(comm));
	return comm_equal(comm);
}

#endif
