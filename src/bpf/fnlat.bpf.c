// SPDX-License-Identifier: GPL-2.0
/* fnlat: latency of kernel functions, grouped into operations (read, write, fsync, open...): the
 * engine of vfslat (VFS functions) and fslat (a filesystem's file operations). User space plans
 * one slot per function (src/tools/fnlat.rs), each hooked with fentry/fexit where they load and
 * kprobe/kretprobe where they do not, and says per slot which operation it counts for and which
 * argument leads to the file.
 *
 * Starts are kept per thread *and* slot: an O_SYNC write runs ext4_sync_file inside
 * ext4_file_write_iter, and keying by thread alone (libbpf-tools' fsdist) would let the inner
 * start overwrite the outer, losing the write. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/hist.bpf.h"
#include "lib/losses.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/per_cgroup.bpf.h"
#include "lib/file.bpf.h"
#include "fnlat.h"

#define FN_SLOTS FNLAT_SLOTS
#include "lib/fn_slots.bpf.h"
/* --per-fs: label each histogram with the filesystem type of the file. */
const volatile bool per_fs = false;
/* --min: report each operation slower than this instead of histograms. */
const volatile bool want_events = false;
const volatile __u64 min_ns = 0;

/* Calls that returned -EIOCBQUEUED (io_uring, aio): queued, not done; counted apart per op. */
__u64 async_calls[FNLAT_OPS];

/* Reserved so that the types reach the generated skeleton. */
struct fnlat_event _event = {};
struct fnlat_key _key = {};

#define EIOCBQUEUED 529

struct start_key {
	__u32 tid;
	__u32 slot;
};

struct start {
	__u64 ts;
	__u64 obj;  /* the file-like argument (enum fnlat_arg), for --per-fs and --min */
	__s64 pos;  /* --min: the file position at entry, -1 if unknown */
};

/* Starts of one thread, one per slot, in task-local storage (5.11+): found through the task, no
 * hashing and no locked map update per call, freed with the task. ts = 0: no call in flight.
 * User space loads with per_task set and falls back to the hash map below where the kernel
 * refuses. */
const volatile bool per_task = false;

struct task_starts {
	struct start s[FNLAT_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_starts);
} task_starts SEC(".maps");

/* The fallback. A plain hash, not an LRU: an LRU may evict a live start (its free lists are
 * per CPU) and the call would vanish without a word; here a start that does not fit is counted
 * (start_full). A start whose return was never seen (a missed kretprobe) is overwritten by the
 * thread's next call of the same function. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct start_key);
	__type(value, struct start);
} starts SEC(".maps");

/* --per-fs: keyed by generation, op and filesystem type. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct fnlat_key);
	__type(value, struct hist);
} hists SEC(".maps");

/* --per-cgroup (lib/per_cgroup.bpf.h): sized by user space; a call no cgroup's histogram has
 * room for goes to the histograms above, shown as `other`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct fnlat_key);
	__type(value, struct hist);
} cgroup_hists SEC(".maps");

/* Otherwise one per slot, index generation * FNLAT_SLOTS + slot: an array lookup, without
 * hashing. Per slot rather than per op so that each histogram has a single writer, the slot's
 * exit program, which the kernel never runs nested in itself on one CPU (it skips it and counts
 * a recursion miss, reported as `skipped`): plain adds, where a histogram per op written by
 * several functions' programs needs four locked adds per call. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * FNLAT_SLOTS);
	__type(key, __u32);
	__type(value, struct hist);
} slot_hists SEC(".maps");

/* --min only; user space sizes it (1 entry otherwise). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* The slot's start in the current task's storage (per_task), made if missing; NULL if not. */
static __always_inline struct start *task_start(__u32 slot, bool create)
{
	struct task_starts *t;

	t = bpf_task_storage_get(&task_starts, bpf_get_current_task_btf(), 0,
				 create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!t || slot >= FNLAT_SLOTS)
		return NULL;
	/* Keeps clang from computing &t->s[slot] before the NULL check, which the verifier refuses
	 * ("pointer arithmetic on map_value_or_null prohibited": 6.12, 2026-11-24). */
	barrier_var(t);
	return &t->s[slot];
}

/* Argument i, a `loff_t *`, of the hooked function. fentry: copied from the trampoline's saved
 * arguments rather than loaded from the context, since 5.10's verifier refuses a context load
 * of a pointer to anything but a struct (the 5.10 VM rejected vfslat --min with it). */
static __always_inline __u64 pos_arg(void *ctx, enum hook_flavour flavour, __u32 i)
{
	__u64 v = 0;

	if (flavour != HOOK_FENTRY)
		return hook_arg(ctx, flavour, i);
	if (i < 5)
		bpf_probe_read_kernel(&v, sizeof(v), (__u64 *)ctx + i);
	return v;
}

static __always_inline int fn_entry(void *ctx, enum hook_flavour flavour, __u32 slot)
{
	struct start_key key = {.slot = slot};
	struct start s = {.pos = -1};
	struct start *ts;
	__u64 pos_ptr;
	__u32 a;

	if (slot >= FNLAT_SLOTS || !current_selected())
		return 0;
	if (per_fs || want_events)
		s.obj = slot_file_arg(ctx, flavour, slot);
	if (want_events) {
		a = slots[slot].pos_arg;
		/* Through a local: a cast of s.obj inside BPF_CORE_READ would relocate s.obj as
		 * a kernel field (struct start has none), and the load fails. */
		struct kiocb *iocb = (struct kiocb *)s.obj;

		if (slots[slot].kind == FN_ARG_KIOCB && iocb)
			s.pos = BPF_CORE_READ(iocb, ki_pos);
		else if (a < 5 && (pos_ptr = pos_arg(ctx, flavour, a)))
			bpf_probe_read_kernel(&s.pos, sizeof(s.pos), (void *)pos_ptr);
	}
	s.ts = bpf_ktime_get_ns();
	if (per_task) {
		ts = task_start(slot, true);
		if (ts)
			*ts = s;
		else
			count_loss(LOSS_START_FULL);
		return 0;
	}
	key.tid = (__u32)bpf_get_current_pid_tgid();
	if (bpf_map_update_elem(&starts, &key, &s, BPF_ANY))
		count_loss(LOSS_START_FULL);
	return 0;
}

static __always_inline void report(struct start *s, __u32 slot, __u32 op, __u64 lat, long ret)
{
	struct fnlat_event *e;
	__u64 id;

	if (lat < min_ns)
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_loss(LOSS_RINGBUF_FULL);
		return;
	}
	id = current_ids();
	e->ts_ns = s->ts + lat;
	e->lat_ns = lat;
	e->ret = ret;
	e->pos = s->pos;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->op = op;
	e->pad = 0;
	e->cgroup = per_cgroup_depth ? cgroup_at_depth(current_cgroup()) : 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	__builtin_memset(e->fs, 0, sizeof(e->fs));
	__builtin_memset(e->file, 0, sizeof(e->file));
	fs_name(e->fs, s->obj, slots[slot].kind);
	if (s->obj && slots[slot].kind != FN_ARG_INODE)
		dentry_name(e->file, sizeof(e->file), obj_dentry(s->obj, slots[slot].kind));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int fn_exit(void *ctx, long ret, __u32 slot)
{
	struct start_key key = {.slot = slot};
	struct fnlat_key hk = {};
	struct start *sp, s;
	struct hist *h;
	__u64 now;
	__u32 op;

	if (slot >= FNLAT_SLOTS)
		return 0;
	if (per_task) {
		sp = task_start(slot, false);
	} else {
		key.tid = (__u32)bpf_get_current_pid_tgid();
		sp = bpf_map_lookup_elem(&starts, &key);
	}
	if (!sp || !sp->ts) {
		/* A selected task's call that was in flight when tracing began. */
		if (current_selected())
			count_loss(LOSS_NO_START);
		return 0;
	}
	s = *sp;
	if (per_task)
		sp->ts = 0;
	else
		bpf_map_delete_elem(&starts, &key);
	op = slots[slot].op;
	if (op >= FNLAT_OPS)
		return 0;
	if (ret == -EIOCBQUEUED) {
		__sync_fetch_and_add(&async_calls[op], 1);
		return 0;
	}
	now = bpf_ktime_get_ns();
	if (s.ts > now) {
		count_loss(LOSS_CLOCK);
		return 0;
	}
	if (want_events) {
		report(&s, slot, op, now - s.ts, ret);
		return 0;
	}
	hk.gen = hist_gen & 1;
	hk.slot = slot;
	if (per_fs)
		fs_name(hk.fs, s.obj, slots[slot].kind);
	h = NULL;
	if (per_cgroup_depth) {
		hk.cgroup = cgroup_at_depth(current_cgroup());
		h = cgroup_hist(&cgroup_hists, &hk);
		hk.cgroup = 0;
	}
	if (!h && per_fs)
		h = hist_get(&hists, &hk);
	if (!h && !per_fs) {
		__u32 i = (hist_gen & 1) * FNLAT_SLOTS + slot;

		h = bpf_map_lookup_elem(&slot_hists, &i);
	}
	if (h)
		hist_record_exclusive(h, now - s.ts);
	return 0;
}

FN_SLOTS_16

char LICENSE[] SEC("license") = "GPL";
