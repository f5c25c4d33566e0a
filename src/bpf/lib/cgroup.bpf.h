/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* cgroup v2 membership, CO-RE on every kernel we support: whether a cgroup lies in the one
 * --cgroup names (src/common/run/cgroup.rs, CgroupFilter: its id and its level) is whether its
 * ancestor at that level has that id. Until 6.1 a cgroup keeps its ancestors' ids
 * (cgrp->ancestor_ids[level]); since 6.2 their pointers (cgrp->ancestors[level], whose kernfs
 * node holds the id). A task's cgroup is task->cgroups->dfl_cgrp; a bio's is its blkcg's,
 * bio->bi_blkg->blkcg->css.cgroup, on the v2 hierarchy only where the io controller is there. */
#ifndef IOSTACK_CGROUP_BPF_H
#define IOSTACK_CGROUP_BPF_H

struct cgroup___with_ancestor_ids {
	int level;
	__u64 ancestor_ids[];
} __attribute__((preserve_access_index));

/* Levels deeper than this are not compared (systemd's deepest are about 6). */
#define IOSTACK_CGROUP_MAX_LEVEL 64

/* The id of cg's ancestor at `level` (cg itself at its own level); 0 if cg is shallower. */
static __always_inline __u64 cgroup_ancestor_id(struct cgroup *cg, __u32 level)
{
	struct cgroup___with_ancestor_ids *old = (void *)cg;
	struct cgroup *ancestor = NULL;
	__u64 id = 0;

	if (!cg || level >= IOSTACK_CGROUP_MAX_LEVEL || BPF_CORE_READ(cg, level) < (int)level)
		return 0;
	if (bpf_core_field_exists(old->ancestor_ids)) {
		bpf_probe_read_kernel(&id, sizeof(id), &old->ancestor_ids[level]);
		return id;
	}
	bpf_probe_read_kernel(&ancestor, sizeof(ancestor), &cg->ancestors[level]);
	return ancestor ? BPF_CORE_READ(ancestor, kn, id) : 0;
}

/* The running task's cgroup v2. */
static __always_inline struct cgroup *current_cgroup(void)
{
	struct task_struct *task = (void *)bpf_get_current_task();

	return BPF_CORE_READ(task, cgroups, dfl_cgrp);
}

/* The cgroup a bio is charged to (its blkcg's; NULL without one). */
static __always_inline struct cgroup *bio_cgroup(struct bio *bio)
{
	return BPF_CORE_READ(bio, bi_blkg, blkcg, css.cgroup);
}

#endif
