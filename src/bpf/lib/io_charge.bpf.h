/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Whether a request belongs to --cgroup's cgroup (src/common/block/charge.rs, IoCharge): its
 * first bio's blkcg where the io controller is on cgroup v2 and enabled there, else the cgroup
 * of the task that submitted it, recorded at block_bio_queue (lib/bio_origin.bpf.h) only for
 * submitters in the cgroup (biolat's bio_origin_call keeps o->in_cgroup ones only). */
#ifndef IOSTACK_IO_CHARGE_BPF_H
#define IOSTACK_IO_CHARGE_BPF_H

#include "lib/bio_origin.bpf.h"

/* Whether a request, by its first bio, is charged to --cgroup's cgroup (true without one), and
 * in *cgroup the id --per-cgroup counts it under (0: none known, counted as `other`). */
static __always_inline bool request_owner(__u64 bio, __u64 *cgroup)
{
	struct bio_origin o = {};

	*cgroup = 0;
	if (!task_filter.cgroup_id && !per_cgroup_depth)
		return true;
	if (charge_by_blkcg)
		origin_cgroup(&o, bio);
	else if (!take_origin(bio, &o))
		unknown_cgroup(&o);
	*cgroup = o.cgroup;
	return o.in_cgroup;
}

#endif
