/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Whether a request belongs to --cgroup's cgroup (src/common/block/charge.rs, IoCharge): its
 * first bio's blkcg where the io controller is on cgroup v2 and enabled there, else the cgroup
 * of the task that submitted it, recorded at block_bio_queue (lib/bio_origin.bpf.h) only for
 * submitters in the cgroup. A tool using the submitter defines bio_origin_call to record
 * current_selected() submitters, with o->cgroup = cgroup_at_depth(current_cgroup()) under
 * --per-cgroup (biolat.bpf.c). */
#ifndef IOSTACK_IO_CHARGE_BPF_H
#define IOSTACK_IO_CHARGE_BPF_H

#include "lib/bio_origin.bpf.h"

/* Set by user space with --cgroup: IoCharge::Blkcg. */
const volatile bool charge_by_blkcg = false;

/* Whether a request, by its first bio, is charged to --cgroup's cgroup (true without one), and
 * in *cgroup the id --per-cgroup counts it under (0: none known, counted as `other`). */
static __always_inline bool request_owner(__u64 bio, __u64 *cgroup)
{
	struct bio_origin o;
	struct cgroup *cg;

	*cgroup = 0;
	if (!task_filter.cgroup_id && !per_cgroup_depth)
		return true;
	if (!bio)
		return !task_filter.cgroup_id;
	if (charge_by_blkcg) {
		cg = bio_cgroup((struct bio *)bio);
		if (!cgroup_selected(cg))
			return false;
		if (per_cgroup_depth)
			*cgroup = cgroup_at_depth(cg);
		return true;
	}
	/* Only submitters in --cgroup's cgroup are recorded: an unknown one is another's. */
	if (!take_origin(bio, &o))
		return !task_filter.cgroup_id;
	*cgroup = o.cgroup;
	return true;
}

#endif
