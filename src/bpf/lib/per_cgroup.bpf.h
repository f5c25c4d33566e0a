/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* --per-cgroup DEPTH: a histogram per cgroup v2, cut at DEPTH levels below the root (a cgroup
 * shallower than that is its own). The histograms live in a hash sized by user space
 * (src/common/run/cgroup.rs); when it is full, an event is counted in the tool's histogram
 * without a cgroup, shown as `other`, so nothing is lost and memory stays bounded. */
#ifndef IOSTACK_PER_CGROUP_BPF_H
#define IOSTACK_PER_CGROUP_BPF_H

#include "lib/cgroup.bpf.h"
#include "lib/hist.bpf.h"

/* 0: off. */
const volatile __u32 per_cgroup_depth = 0;

/* The id cg is counted under: its ancestor at per_cgroup_depth, or itself if shallower. */
static __always_inline __u64 cgroup_at_depth(struct cgroup *cg)
{
	int level;

	if (!cg)
		return 0;
	level = BPF_CORE_READ(cg, level);
	if (level > (int)per_cgroup_depth)
		level = per_cgroup_depth;
	return cgroup_ancestor_id(cg, level);
}

/* The histogram of key in a per-cgroup hash, created if there is room; NULL if there is none
 * (the caller counts the event under `other`). */
static __always_inline struct hist *cgroup_hist(void *map, const void *key)
{
	struct hist *h = bpf_map_lookup_elem(map, key);

	if (h)
		return h;
	bpf_map_update_elem(map, key, &zero_hist, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

#endif
