/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Who submitted a bio, learned where it enters the block layer: block_bio_queue and block_split
 * run in the submitter's context on every kernel (block_io_start is 6.5+, blk_account_io_start is
 * inlined on 6.1, and issue or insert may run in a kworker). A tool looks the origin up by a
 * request's first bio (rq->bio) when it first sees the request or when it ends.
 *
 * A tool defines, before its programs run,
 *     bool bio_origin_call(struct bio_origin *o)
 * to add its own notion of the submitter (iostack: the traced call in progress) and say whether
 * to keep the origin at all (o->in_cgroup and o->cgroup are set by then).
 *
 * The cgroup an I/O belongs to (--cgroup, --per-cgroup; src/common/block/charge.rs) is the
 * submitter's, recorded here, or, where bios carry their own (charge_by_blkcg), the first
 * bio's blkcg, read when the request is looked at (origin_cgroup).
 *
 * The programs bio_queue_{btf,raw} and split_{btf,raw} are planned by src/common/block/mod.rs,
 * plan_bio_owner. */
#ifndef IOSTACK_BIO_ORIGIN_BPF_H
#define IOSTACK_BIO_ORIGIN_BPF_H

#include "lib/blk.bpf.h"
#include "lib/disk_filter.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/per_cgroup.bpf.h"
#include "lib/tp_twins.bpf.h"

struct bio_origin {
	__u64 call;     /* the tool's id of the call that submitted it (iostack), else 0 */
	__u64 ts;       /* when it entered the block layer */
	__u64 cgroup;   /* --per-cgroup: the owner's cgroup at that depth (0: unknown, `other`) */
	__u32 pid;
	__u32 tid;
	char comm[IOSTACK_COMM_LEN];
	__u32 in_cgroup; /* the owner is in --cgroup's cgroup (1 without --cgroup) */
	__u32 pad;
};

/* Set by user space: a bio's blkcg names its owner (IoCharge::Blkcg). */
const volatile bool charge_by_blkcg = false;

/* block_bio_queue(q, bio) and block_split(q, bio, sector) until 5.11; (bio[, sector]) since.
 * Set from BTF by user space; the untaken branch is pruned by the verifier. */
const volatile bool bio_tp_with_queue = false;

/* By bio address. bios come from slabs and per-CPU caches that hand the same structures out
 * again and again, so an entry is written in place for every life of its bio and taken by
 * clearing ts, never deleted: after warm-up a bio costs a lookup and a store on each side. An
 * LRU update at the queue and an LRU delete at the completion (the map's free lists and their
 * locks) made block_bio_queue 1472 ns and block_rq_complete 1409 ns per O_DIRECT read on the
 * CI host (benches/iostack-cost, 2026-11-25). LRU, so the entries of bios no longer used (and
 * of bios merged into another request, never taken) age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct bio_origin);
} bio_origins SEC(".maps");

static __always_inline bool bio_origin_call(struct bio_origin *o);

static __always_inline void current_origin(struct bio_origin *o)
{
	__u64 id = current_ids();

	o->pid = id >> 32;
	o->tid = (__u32)id;
	bpf_get_current_comm(o->comm, sizeof(o->comm));
}

/* An owner nobody knows (a request without bios, a bio queued before tracing began): in no
 * cgroup, so outside --cgroup's and `other` for --per-cgroup. */
static __always_inline void unknown_cgroup(struct bio_origin *o)
{
	o->in_cgroup = !task_filter.cgroup_id;
	o->cgroup = 0;
}

/* The submitter's cgroup, at block_bio_queue (where bios carry none of their own). */
static __always_inline void submitter_cgroup(struct bio_origin *o)
{
	o->in_cgroup = 1;
	if (charge_by_blkcg)
		return;
	o->in_cgroup = current_in_cgroup();
	if (per_cgroup_depth && o->in_cgroup)
		o->cgroup = cgroup_at_depth(current_cgroup());
}

/* Where bios carry their cgroup: the request's first bio's, read now, into o. */
static __always_inline void origin_cgroup(struct bio_origin *o, __u64 bio)
{
	struct cgroup *cg;

	if (!charge_by_blkcg)
		return;
	cg = bio ? bio_cgroup((struct bio *)bio) : NULL;
	o->in_cgroup = cgroup_selected(cg);
	o->cgroup = per_cgroup_depth && cg ? cgroup_at_depth(cg) : 0;
}

static __always_inline int remember_origin(struct bio *bio)
{
	struct bio_origin o = {}, *found;
	__u64 key = (__u64)bio;

	if (!bio || (filter_dev && !disk_selected(bio_dev(bio))))
		return 0;
	submitter_cgroup(&o);
	if (!bio_origin_call(&o))
		return 0;
	current_origin(&o);
	o.ts = bpf_ktime_get_ns();
	found = bpf_map_lookup_elem(&bio_origins, &key);
	if (found)
		*found = o;
	else
		bpf_map_update_elem(&bio_origins, &key, &o, BPF_ANY);
	return 0;
}

/* The origin of a request's first bio, taken into *o (its entry left for the bio's next life,
 * ts 0: taken); false if unknown. */
static __always_inline bool take_origin(__u64 bio, struct bio_origin *o)
{
	struct bio_origin *found;

	if (!bio)
		return false;
	found = bpf_map_lookup_elem(&bio_origins, &bio);
	if (!found || !found->ts)
		return false;
	*o = *found;
	found->ts = 0;
	return true;
}

static __always_inline int bio_queue_args(__u64 *args, bool typed)
{
	return remember_origin((struct bio *)tp_arg0_or_1(args, !bio_tp_with_queue));
}

TP_TWINS(block_bio_queue, bio_queue, bio_queue_args)
/* The front part of a split bio is never passed to block_bio_queue; it becomes a request. */
TP_TWINS(block_split, split, bio_queue_args)

#endif
