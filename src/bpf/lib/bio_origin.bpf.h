/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Who an I/O is for: its submitter, learned where a bio enters the block layer, and the kernel's
 * own work on a submitter's behalf linked back to it.
 *
 * - block_bio_queue and block_split run in the submitter's context on every kernel
 *   (block_io_start is 6.5+, blk_account_io_start is inlined on 6.1, and issue or insert may run
 *   in a kworker).
 * - blk-throttle holds a bio before block_bio_queue: its dispatcher (a kworker running
 *   blk_throtl_dispatch_work_fn) queues it later. Where function hooks work, the bio's submitter
 *   is recorded when the throttle takes it (blk_throtl_bio, ORIGIN_F_HELD) and the time it was
 *   held is kept; where they do not, the bio is marked ORIGIN_F_DISPATCHED (submitter unknown)
 *   and its completion's waiter is taken for its submitter (lib/breakdown.bpf.h).
 * - A stacked device (dm, md: bio-based) remaps its bio as a clone it queues below, from the
 *   submitter's context (dm-linear) or from a worker (dm-crypt, dm-delay): block_bio_remap links
 *   the clone to the bio above, found by (device, sector) (ORIGIN_F_CLONE).
 * - A bio asking for a cache flush or FUA (ORIGIN_F_FLUSH_SEQ) on a disk with a volatile cache
 *   goes through the flush machinery, whose own flush request has no bio: each disk remembers
 *   the last such bio's origin, the one the flush is for (flush_for).
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
 * The programs bio_queue_{btf,raw}, split_{btf,raw}, bio_remap_{btf,raw} and throttle_{fentry,
 * kprobe} are planned by src/common/block/mod.rs, plan_bio_owner. */
#ifndef IOSTACK_BIO_ORIGIN_BPF_H
#define IOSTACK_BIO_ORIGIN_BPF_H

#include "lib/blk.bpf.h"
#include "lib/disk_filter.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/per_cgroup.bpf.h"
#include "lib/tp_twins.bpf.h"
#include "lib/func_hooks.bpf.h"
#include "lib/losses.bpf.h"

/* struct bio_origin.flags */
#define ORIGIN_F_FLUSH_SEQ 0x1   /* asked for a cache flush or FUA */
#define ORIGIN_F_HELD 0x2        /* blk-throttle held it; its submitter recorded as it was held */
#define ORIGIN_F_DISPATCHED 0x4  /* queued by blk-throttle's dispatcher, its submitter unseen */
#define ORIGIN_F_CLONE 0x8       /* a stacked device's clone of a bio of upper_dev */
#define ORIGIN_F_FLUSH_FOR 0x10  /* the flush machinery's flush, for this (last) requester */
/* Set where the origin is recorded before the bio is queued (the throttle's hook, a remap):
 * block_bio_queue takes it over once instead of the context it runs in. */
#define ORIGIN_F_PENDING 0x100
/* The block layer split the bio: the rest is submitted again, and passes blk_throtl_bio again
 * on 5.10, in whatever context split it (blk-throttle's dispatcher for a bio it held): it keeps
 * its origin. */
#define ORIGIN_F_SPLIT_REST 0x200

struct bio_origin {
	__u64 call;      /* the tool's id of the call that submitted it (iostack), else 0 */
	__u64 ts;        /* when it entered the block layer (0: taken) */
	__u64 cgroup;    /* --per-cgroup: the owner's cgroup at that depth (0: unknown, `other`) */
	__u64 held_ns;   /* how long blk-throttle held it (ORIGIN_F_HELD) */
	__u64 data_issue; /* a flush-sequenced request's data step: issued and done (0: none) */
	__u64 data_end;
	/* The io_uring request an io-wq worker submitted it for (the tool's key of it: iostack's
	 * bio_origin_call), else 0. */
	__u64 req_a;
	__u64 req_b;
	__u32 pid;       /* the submitter as the tool's pid namespace numbers it (shown) */
	__u32 tid;
	__u32 gtid;      /* the submitter's thread id in the initial namespace (matched) */
	__u32 flags;     /* ORIGIN_F_* */
	__u32 upper_dev; /* ORIGIN_F_CLONE: the stacked device the bio above was queued on */
	__u32 in_cgroup; /* the owner is in --cgroup's cgroup (1 without --cgroup) */
	__u32 data_bytes; /* a flush-sequenced request's data step: its bytes */
	__u32 pad;
	char comm[IOSTACK_COMM_LEN];
};

/* Set by user space: a bio's blkcg names its owner (IoCharge::Blkcg). */
const volatile bool charge_by_blkcg = false;

/* block_bio_queue(q, bio) and block_split(q, bio, sector) until 5.11; (bio[, sector]) since;
 * block_bio_remap likewise (q, bio, dev, from) then (bio, dev, from). Set from BTF by user
 * space; the untaken branch is pruned by the verifier. */
const volatile bool bio_tp_with_queue = false;

/* Whether a bio's origin keeps its submitter's name: bioslower shows it for every I/O, iostack
 * only in its journeys (--slow); nothing else reads it. */
const volatile bool origin_comm = true;

/* bpf_get_current_task_btf works (5.11+; user space sets it where task storage loaded): the
 * current task's fields are plain loads, not probe reads. */
const volatile bool origin_task_btf = false;

/* REQ_PREFLUSH and REQ_FUA, from the kernel's BTF (user space). */
const volatile __u32 req_preflush = 1 << 18;
const volatile __u32 req_fua = 1 << 17;

/* The address of blk_throtl_dispatch_work_fn (0: this kernel has none, or we do not look). Not
 * read-only: user space sets it after the verifier is done and before attaching, so that the
 * kernel's slow /proc/kallsyms (40-120 ms) is read beside the verifier's work. */
__u64 throttle_dispatch_fn = 0;

/* Stacked (bio-based) devices whose clones are linked to the bios above (dm, md; set by user
 * space for -d of such a device, or every one of them without -d). */
#define IOSTACK_STACKED_DEVS 8
const volatile __u32 stacked_devs[IOSTACK_STACKED_DEVS] = {};

/* By bio address. bios come from slabs and per-CPU caches that hand the same structures out
 * again and again, so an entry is written in place for every life of its bio and taken by
 * clearing ts, never deleted: after warm-up a bio costs a lookup and a store on each side. An
 * LRU update at the queue and an LRU delete at the completion (the map's free lists and their
 * locks) made block_bio_queue 1472 ns and block_rq_complete 1409 ns per O_DIRECT read on the
 * CI host (benches/iostack-cost, 2026-11-25). LRU, so the entries of bios no longer used age
 * out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct bio_origin);
} bio_origins SEC(".maps");

/* The bios of stacked devices by (device, 1 MiB of sectors), for the clones remapped from them:
 * a bio of up to 1 MiB is found under its first and its last chunk, and a clone's old sector
 * must lie inside it. */
struct upper_key {
	__u32 dev;
	__u32 chunk;
};

struct upper_bio {
	__u64 sector;
	__u64 end;
	__u64 bio;
};

#define IOSTACK_UPPER_SHIFT 11

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct upper_key);
	__type(value, struct upper_bio);
} upper_bios SEC(".maps");

/* Per disk, the last bio that asked for a cache flush or FUA: the flush machinery's flush
 * request, which has no bio, is for it (and for any other waiting then). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct bio_origin);
} flush_for SEC(".maps");

static __always_inline bool bio_origin_call(struct bio_origin *o);

static __always_inline bool stacked_dev(__u32 dev)
{
	for (int i = 0; i < IOSTACK_STACKED_DEVS; i++) {
		if (!stacked_devs[i])
			return false;
		if (stacked_devs[i] == dev)
			return true;
	}
	return false;
}

static __always_inline void current_origin(struct bio_origin *o)
{
	__u64 id = current_ids();

	o->pid = id >> 32;
	o->tid = (__u32)id;
	o->gtid = (__u32)bpf_get_current_pid_tgid();
	if (origin_comm)
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

#define IOSTACK_PF_WQ_WORKER 0x00000020

/* Where struct kthread lived before 5.17. */
struct task_struct___kthread_in_set_child_tid {
	int *set_child_tid;
} __attribute__((preserve_access_index));

/* The current task is a kworker running blk-throttle's dispatch work. */
static __always_inline bool in_throttle_dispatch(void)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct task_struct___kthread_in_set_child_tid *old = (void *)task;
	struct kthread *k;
	struct worker *w;
	__u32 flags;

	if (!throttle_dispatch_fn)
		return false;
	/* Every bio asks this of its submitter: a plain load where the task is typed. */
	if (origin_task_btf)
		flags = bpf_get_current_task_btf()->flags;
	else
		flags = BPF_CORE_READ(task, flags);
	if (!(flags & IOSTACK_PF_WQ_WORKER))
		return false;
	if (bpf_core_field_exists(task->worker_private))
		k = BPF_CORE_READ(task, worker_private);
	else
		k = (void *)BPF_CORE_READ(old, set_child_tid);
	w = k ? BPF_CORE_READ(k, data) : NULL;
	return w && (__u64)BPF_CORE_READ(w, current_func) == throttle_dispatch_fn;
}

static __always_inline void index_upper(struct bio *bio, bool typed, __u32 dev, __u64 key_bio)
{
	struct upper_bio u = {};
	struct upper_key k = {.dev = dev};

	u.sector = IOSTACK_GET(typed, bio, bi_iter.bi_sector);
	u.end = u.sector + (IOSTACK_GET(typed, bio, bi_iter.bi_size) >> 9);
	u.bio = key_bio;
	k.chunk = u.sector >> IOSTACK_UPPER_SHIFT;
	bpf_map_update_elem(&upper_bios, &k, &u, BPF_ANY);
	if (u.end > u.sector && ((u.end - 1) >> IOSTACK_UPPER_SHIFT) != k.chunk) {
		k.chunk = (u.end - 1) >> IOSTACK_UPPER_SHIFT;
		bpf_map_update_elem(&upper_bios, &k, &u, BPF_ANY);
	}
}

/* `typed`: bio is a tp_btf argument, read with plain loads. */
static __always_inline int remember_origin(struct bio *bio, bool typed)
{
	struct bio_origin o = {}, *found;
	__u64 key = (__u64)bio, now;
	__u32 dev, opf;

	if (!bio)
		return 0;
	dev = bio_dev(bio, typed);
	if (!disk_selected(dev))
		return 0;
	now = bpf_ktime_get_ns();
	found = bpf_map_lookup_elem(&bio_origins, &key);
	if (found && found->ts && (found->flags & ORIGIN_F_SPLIT_REST)) {
		found->flags &= ~ORIGIN_F_SPLIT_REST;
		return 0;
	}
	if (found && (found->flags & ORIGIN_F_PENDING)) {
		/* Recorded for this life before it was queued: as blk-throttle held it (now its
		 * dispatcher queues it), or as a stacked device's clone of a bio above. */
		found->flags &= ~ORIGIN_F_PENDING;
		if ((found->flags & ORIGIN_F_HELD) && in_throttle_dispatch())
			found->held_ns = now > found->ts ? now - found->ts : 0;
		else
			found->flags &= ~ORIGIN_F_HELD;
#ifdef IOSTACK_MUTANT_HELD_OWNER_LOST
		/* Mutant (hook path): a held bio becomes the dispatcher kworker's own. */
		if (found->flags & ORIGIN_F_HELD)
			found->gtid = (__u32)bpf_get_current_pid_tgid();
#endif
		found->ts = now;
		found->data_issue = found->data_end = 0;
		if (found->flags & ORIGIN_F_FLUSH_SEQ)
			bpf_map_update_elem(&flush_for, &dev, found, BPF_ANY);
		if (stacked_dev(dev))
			index_upper(bio, typed, dev, key);
		return 0;
	}
	submitter_cgroup(&o);
#ifdef IOSTACK_MUTANT_HELD_OWNER_LOST
	/* Mutant (DISPATCHED path): a bio the dispatcher queues is the kworker's own. */
	if (0) {
#else
	if (in_throttle_dispatch()) {
#endif
		/* Held by blk-throttle and now passed on, but its submitter was not seen. */
		o.flags = ORIGIN_F_DISPATCHED;
		unknown_cgroup(&o);
		o.comm[0] = '?';
	} else {
		if (!bio_origin_call(&o))
			return 0;
		current_origin(&o);
	}
	opf = IOSTACK_GET(typed, bio, bi_opf);
	if (opf & (req_preflush | req_fua))
		o.flags |= ORIGIN_F_FLUSH_SEQ;
	o.ts = now;
	if (found)
		*found = o;
	else
		bpf_map_update_elem(&bio_origins, &key, &o, BPF_ANY);
	if (o.flags & ORIGIN_F_FLUSH_SEQ)
		bpf_map_update_elem(&flush_for, &dev, &o, BPF_ANY);
	if (stacked_dev(dev))
		index_upper(bio, typed, dev, key);
	return 0;
}

/* The origin of a bio in its entry, NULL if unknown or taken; origin_taken(found) takes it. */
static __always_inline struct bio_origin *origin_of(__u64 bio)
{
	struct bio_origin *found;

	if (!bio)
		return NULL;
	found = bpf_map_lookup_elem(&bio_origins, &bio);
	return found && found->ts ? found : NULL;
}

/* Its entry is left for the bio's next life: ts 0, taken. */
static __always_inline void origin_taken(struct bio_origin *found)
{
	found->ts = 0;
}

/* The origin of a bio, taken into *o; false if unknown. */
static __always_inline bool take_origin(__u64 bio, struct bio_origin *o)
{
	struct bio_origin *found = origin_of(bio);

	if (!found)
		return false;
	*o = *found;
	origin_taken(found);
	return true;
}

/* A flush-sequenced request's data step ended [issue, now] (not its end: the flush after it
 * is still to come); kept with its bio for the request's end. */
static __always_inline void origin_data_step(__u64 bio, __u64 issue, __u64 now, __u32 bytes)
{
	struct bio_origin *found;

	if (!bio)
		return;
	found = bpf_map_lookup_elem(&bio_origins, &bio);
	if (!found || !found->ts)
		return;
	found->data_issue = issue;
	found->data_end = now;
	found->data_bytes = bytes;
}

/* The flush machinery's flush request on `dev`: for the last requester that asked for one. */
static __always_inline bool flush_origin(__u32 dev, struct bio_origin *o)
{
	struct bio_origin *found = bpf_map_lookup_elem(&flush_for, &dev);

	if (!found)
		return false;
	*o = *found;
	o->flags = (o->flags & ~ORIGIN_F_FLUSH_SEQ) | ORIGIN_F_FLUSH_FOR;
	return true;
}

static __always_inline int bio_queue_args(__u64 *args, bool typed)
{
	return remember_origin((struct bio *)tp_arg0_or_1(args, !bio_tp_with_queue), typed);
}

TP_TWINS(block_bio_queue, bio_queue, bio_queue_args)

/* block_split(split, sector): the front part of a bio the block layer splits is never passed to
 * block_bio_queue (it becomes a request); bio_chain made the bio it came from its bi_private.
 * Both parts are that bio's: the front part takes its origin, and the rest keeps it when it is
 * submitted again. (A 1 MiB readahead held by blk-throttle was split in the throttle's
 * dispatcher on 5.10, and its 8 KiB rest, passing blk_throtl_bio again there, was taken for the
 * kworker's: its reader's next reads waited for "others' I/O", 3 runs of 6, 2026-11-26.) */
static __always_inline int split_args(__u64 *args, bool typed)
{
	struct bio *split = (struct bio *)tp_arg0_or_1(args, !bio_tp_with_queue);
	struct bio_origin o, *from;
	__u64 key = (__u64)split, parent;

	if (!split)
		return 0;
#ifdef IOSTACK_MUTANT_SPLIT_FRONT_LOST
	/* Mutant: a split's front part gets no origin (its request's owner unknown). */
	return 0;
#endif
	parent = (__u64)IOSTACK_GET(typed, split, bi_private);
	from = parent ? bpf_map_lookup_elem(&bio_origins, &parent) : NULL;
	if (!from || !from->ts)
		return remember_origin(split, typed);
	o = *from;
	o.flags &= ~(ORIGIN_F_PENDING | ORIGIN_F_SPLIT_REST);
	o.ts = bpf_ktime_get_ns();
	o.data_issue = o.data_end = 0;
	from->flags |= ORIGIN_F_SPLIT_REST;
	bpf_map_update_elem(&bio_origins, &key, &o, BPF_ANY);
	return 0;
}

TP_TWINS(block_split, split, split_args)

static __always_inline int link_clone(struct bio *clone, __u32 dev, __u64 from);

/* block_bio_remap(clone, dev, from): a stacked device remaps a bio as `clone`, from its bio at
 * sector `from` of device `dev` (a partition's remap keeps the same bio: nothing to link). */
static __always_inline int bio_remap_args(__u64 *args, bool typed)
{
	struct bio *clone = (struct bio *)tp_arg0_or_1(args, !bio_tp_with_queue);
	__u64 dev, from;

	/* Each argument at its own literal offset (lib/blk.bpf.h, tp_arg0_or_1). */
	if (bio_tp_with_queue) {
		dev = args[2];
		barrier_var(dev);
		from = args[3];
		barrier_var(from);
	} else {
		dev = args[1];
		barrier_var(dev);
		from = args[2];
		barrier_var(from);
	}
	return link_clone(clone, (__u32)dev, from);
}

/* A stacked device's clone `clone` of its bio at sector `from` of device `dev`. */
static __always_inline int link_clone(struct bio *clone, __u32 dev, __u64 from)
{
	struct upper_key k = {.dev = dev, .chunk = from >> IOSTACK_UPPER_SHIFT};
	struct bio_origin *above, o;
	struct upper_bio *u;
	__u64 key = (__u64)clone;

	if (!clone || !stacked_dev(dev))
		return 0;
#ifdef IOSTACK_MUTANT_CLONE_UNLINKED
	/* Mutant: a clone is not linked to its bio above (and no unlinked loss says so). */
	return 0;
#endif
	u = bpf_map_lookup_elem(&upper_bios, &k);
	if (u && u->bio == key)
		return 0;
	if (!u || from < u->sector || from >= u->end) {
		count_loss(LOSS_UNLINKED);
		return 0;
	}
	above = bpf_map_lookup_elem(&bio_origins, &u->bio);
	if (!above || !above->ts) {
		count_loss(LOSS_UNLINKED);
		return 0;
	}
	o = *above;
	o.flags = (o.flags & ~(ORIGIN_F_HELD | ORIGIN_F_DISPATCHED)) | ORIGIN_F_CLONE |
		  ORIGIN_F_PENDING;
	o.upper_dev = dev;
	o.data_issue = o.data_end = 0;
	bpf_map_update_elem(&bio_origins, &key, &o, BPF_ANY);
	return 0;
}

TP_TWINS(block_bio_remap, bio_remap, bio_remap_args)

/* blk_throtl_bio(bio) (__blk_throtl_bio on 5.16+), where function hooks work: the submitter of
 * a bio blk-throttle may hold, in its context. If the throttle lets it through, block_bio_queue
 * follows at once in the same context (the same owner); if it holds it, its dispatcher queues it
 * later and this origin is taken over then. */
static __always_inline int throttle_entry(void *ctx, enum hook_flavour flavour)
{
	struct bio *bio = (struct bio *)hook_arg(ctx, flavour, 0);
	struct bio_origin o = {}, *found;
	__u64 key = (__u64)bio;

	if (!bio || !disk_selected(bio_dev(bio, false)))
		return 0;
	found = bpf_map_lookup_elem(&bio_origins, &key);
	if (found && found->ts && (found->flags & ORIGIN_F_SPLIT_REST)) {
		/* The rest of a split bio, submitted again (5.10): still its submitter's. */
		found->flags &= ~ORIGIN_F_SPLIT_REST;
		return 0;
	}
	if (found && (found->flags & ORIGIN_F_PENDING)) {
		/* Before 5.16 the dispatcher submits a bio it held again, and it passes through
		 * blk_throtl_bio a second time (flagged BIO_THROTTLED): the hold being timed goes on
		 * to block_bio_queue. (Stamping it again showed held bios held 0 ms on 5.10.) */
		if (found->flags & ORIGIN_F_HELD)
			return 0;
		/* A stacked device's clone, linked to its bio above (from a worker, for dm-delay):
		 * its owner stays; the throttle may hold it from now. */
		found->flags |= ORIGIN_F_HELD;
		found->ts = bpf_ktime_get_ns();
		return 0;
	}
	submitter_cgroup(&o);
	if (!bio_origin_call(&o))
		return 0;
	current_origin(&o);
	if (BPF_CORE_READ(bio, bi_opf) & (req_preflush | req_fua))
		o.flags |= ORIGIN_F_FLUSH_SEQ;
	o.flags |= ORIGIN_F_HELD | ORIGIN_F_PENDING;
	o.ts = bpf_ktime_get_ns();
	if (found)
		*found = o;
	else
		bpf_map_update_elem(&bio_origins, &key, &o, BPF_ANY);
	return 0;
}

FUNC_ENTRY_HOOKS(throttle, throttle_entry)

#endif
