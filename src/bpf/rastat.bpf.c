// SPDX-License-Identifier: GPL-2.0
/* rastat: is readahead helping or wasting? Windows the kernel starts, the pages they bring into
 * the page cache, which of those pages are used (read or mapped) and how soon, and which are
 * evicted never used.
 *
 * A window is remembered per thread when the readahead engine starts it (page_cache_ra_order or
 * page_cache_ra_unbounded: tracepoints on 6.18+, fentry/kprobe before); a page added to the page
 * cache by that thread, to that file, inside the window, is a readahead page. Its state lives in
 * a chunk of 32 pages of the file, from its add to its delete (filemap tracepoints, every
 * kernel). A read (mm_filemap_get_pages on 6.12+, (folio_)mark_page_accessed before) or a fault
 * (mm_filemap_fault / map_pages, filemap_fault / filemap_map_pages before) uses it.
 *
 * A read that fetches only what it asked for is not readahead: with POSIX_FADV_RANDOM, or a
 * small random read the engine declines to extend, page_cache_sync_ra goes straight to the
 * engine with no lookahead for exactly the requested pages. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lib/hist.bpf.h"
#include "lib/losses.bpf.h"
#include "lib/task_filter.bpf.h"
#include "lib/per_cgroup.bpf.h"
#include "lib/thread_state.bpf.h"
#include "lib/func_hooks.bpf.h"
#include "lib/tp_twins.bpf.h"
#include "lib/fn_slots.h"
#include "lib/file.bpf.h"
#include "rastat.h"

#define RA_MAX_DEVS 16

/* -d DISK: the disk's and its partitions' dev_t; none: every device. */
const volatile __u32 disk_devs[RA_MAX_DEVS] = {};
const volatile __u32 n_disk_devs = 0;
/* --per-file: keep counts per file, with its path. */
const volatile bool per_file = false;
/* Which argument of page_cache_sync_ra is req_count (5.10: ractl, ra, req_count; 5.18+: ractl,
 * req_count). */
const volatile __u32 sync_req_arg = 1;

/* Window sizes in pages, log2 slots per kind; cumulative. */
__u64 window_sizes[RA_KINDS][HIST_LOG2_SLOTS];

THREAD_STATE(threads, struct ra_thread, 32768)

/* Sized by user space from the memory size (src/tools/rastat/mod.rs). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ra_chunk_key);
	__type(value, struct ra_chunk);
} chunks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ra_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct ra_file_key);
	__type(value, struct ra_file);
} files SEC(".maps");

/* --per-cgroup: by cgroup id at the depth asked; user space sizes it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct ra_counts);
} cgroups SEC(".maps");

/* Age at first use: index generation * RA_USES + use. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * RA_USES);
	__type(key, __u32);
	__type(value, struct hist);
} ages SEC(".maps");

const struct ra_chunk zero_chunk;

/* Counts the adds of readahead pages: a chunk this CPU found with nothing to use (untracked, or
 * every page used) stays so while this has not moved. A sequential re-read then looks up one
 * chunk in 32 pages, and reads of pages no window brought in look up as few. */
volatile __u64 brought_gen;

struct ra_idle {
	__u64 mapping;
	__u64 chunk;
	__u64 gen;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ra_idle);
} idle_chunk SEC(".maps");
const struct ra_proc zero_proc;
const struct ra_file zero_file;

/* Pages that could not be tracked (the chunk map was full), and processes or files that could
 * not be counted apart (their maps were full: their pages count in the totals only). */
__u64 untracked_pages;
/* Every process's counts together (a process the map had no room for counts here too). */
struct ra_counts total;
__u64 uncounted_procs;
__u64 uncounted_files;
__u64 uncounted_cgroups;
const struct ra_counts zero_counts;

static __always_inline bool dev_selected(__u32 dev)
{
	if (!n_disk_devs)
		return true;
	for (int i = 0; i < RA_MAX_DEVS; i++) {
		if (i >= n_disk_devs)
			break;
		if (disk_devs[i] == dev)
			return true;
	}
	return false;
}

static __always_inline __u32 inode_dev(struct inode *inode)
{
	return BPF_CORE_READ(inode, i_sb, s_dev);
}

static __always_inline struct task_struct *current_task_btf(void)
{
	return per_task ? bpf_get_current_task_btf() : NULL;
}

static __always_inline struct ra_thread *current_thread(bool create)
{
	return threads_of(current_task_btf(), (__u32)bpf_get_current_pid_tgid(), create);
}

static __always_inline struct ra_counts *proc_counts(__u32 tgid, bool create)
{
	struct ra_proc *p = bpf_map_lookup_elem(&procs, &tgid);

	if (p || !create)
		return p ? &p->counts : NULL;
	bpf_map_update_elem(&procs, &tgid, &zero_proc, BPF_NOEXIST);
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p) {
		__sync_fetch_and_add(&uncounted_procs, 1);
		return NULL;
	}
	bpf_get_current_comm(p->comm, sizeof(p->comm));
	return &p->counts;
}

/* --per-cgroup: the counts of cgroup id (created with `create`); NULL without --per-cgroup, or
 * where the map has no room (counted: those pages are in the totals and under `other`). */
static __always_inline struct ra_counts *cgroup_counts(__u64 id, bool create)
{
	struct ra_counts *c;

	if (!per_cgroup_depth)
		return NULL;
	c = bpf_map_lookup_elem(&cgroups, &id);
	if (c || !create)
		return c;
	bpf_map_update_elem(&cgroups, &id, &zero_counts, BPF_NOEXIST);
	c = bpf_map_lookup_elem(&cgroups, &id);
	if (!c)
		__sync_fetch_and_add(&uncounted_cgroups, 1);
	return c;
}

/* The file's path, leaf first, from its first dentry up to its filesystem's root. */
static __always_inline void file_names(struct ra_file *f, struct inode *inode)
{
	struct hlist_node *alias = BPF_CORE_READ(inode, i_dentry.first);
	struct dentry *d, *parent;

	if (!alias)
		return;
	d = container_of(alias, struct dentry, d_u.d_alias);
	for (int i = 0; i < RA_PATH_DEPTH; i++) {
		parent = BPF_CORE_READ(d, d_parent);
		if (!parent || parent == d)
			break;
		bpf_probe_read_kernel_str(&f->names[i * RA_NAME_LEN], RA_NAME_LEN, BPF_CORE_READ(d, d_name.name));
		d = parent;
	}
}

static __always_inline struct ra_counts *file_counts(__u32 dev, __u64 ino, struct inode *inode)
{
	struct ra_file_key key = { .dev = dev, .ino = ino };
	struct ra_file *f;

	if (!per_file)
		return NULL;
	f = bpf_map_lookup_elem(&files, &key);
	if (f || !inode)
		return f ? &f->counts : NULL;
	bpf_map_update_elem(&files, &key, &zero_file, BPF_NOEXIST);
	f = bpf_map_lookup_elem(&files, &key);
	if (!f) {
		__sync_fetch_and_add(&uncounted_files, 1);
		return NULL;
	}
	file_names(f, inode);
	return &f->counts;
}

/* The engine decided (sync or async) for this thread: remember why, for the window it starts. */
static __always_inline void on_decision(struct address_space *mapping, __u64 index, __u64 req,
					enum ra_kind kind)
{
	struct inode *host = BPF_CORE_READ(mapping, host);
	struct ra_thread *t;

	if (!current_selected() || !dev_selected(inode_dev(host)))
		return;
	t = current_thread(true);
	if (!t) {
		count_loss(LOSS_START_FULL);
		return;
	}
	/* A new decision: the thread's last window is over (its pages were added in its call). */
	t->mapping = 0;
	t->pend_mapping = (__u64)mapping;
	t->pend_start = index;
	t->pend_end = index + req;
	t->pend_kind = kind;
}

/* The engine starts reading pages [start, start + size) of mapping, lookahead of them ahead of
 * what was asked. */
static __always_inline void on_window(struct address_space *mapping, __u64 start, __u64 size,
				      __u64 lookahead)
{
	struct inode *host = BPF_CORE_READ(mapping, host);
	struct ra_counts *c;
	struct ra_thread *t;
	__u32 dev, kind;
	__u64 slot;

	if (!current_selected())
		return;
	dev = inode_dev(host);
	if (!dev_selected(dev))
		return;
	t = current_thread(true);
	if (!t) {
		count_loss(LOSS_START_FULL);
		return;
	}
	if (t->pend_mapping != (__u64)mapping) {
		/* The fallback of page_cache_ra_order into the unbounded engine: the same window. */
		if (t->mapping == (__u64)mapping && start >= t->start && start + size <= t->end)
			return;
		kind = lookahead ? RA_AROUND : RA_HINT;
	} else if (!lookahead && t->pend_kind == RA_SYNC && start >= t->pend_start &&
		   start + size <= t->pend_end) {
		/* Exactly what the read asked for: no readahead. The decision stays for the rest
		 * of a forced read (force_page_cache_ra reads in 2 MiB pieces). */
		t->mapping = 0;
		return;
	} else {
		kind = t->pend_kind;
		t->pend_mapping = 0;
	}
	t->mapping = (__u64)mapping;
	t->start = start;
	t->end = start + size;
	/* The page a fault waits for is this window's only if the window covers it. */
	if (t->fault_mapping != (__u64)mapping || t->fault_index < start || t->fault_index >= start + size)
		t->fault_mapping = 0;
	kind &= RA_KINDS - 1;
	__sync_fetch_and_add(&total.windows[kind], 1);
	c = proc_counts(bpf_get_current_pid_tgid() >> 32, true);
	if (c) {
		__sync_fetch_and_add(&c->windows[kind], 1);
		/* The process's name now (an exec, or a reused pid, renames it). */
		bpf_get_current_comm(container_of(c, struct ra_proc, counts)->comm, 16);
	}
	c = file_counts(dev, BPF_CORE_READ(host, i_ino), host);
	if (c)
		__sync_fetch_and_add(&c->windows[kind], 1);
	c = per_cgroup_depth ? cgroup_counts(cgroup_at_depth(current_cgroup()), true) : NULL;
	if (c)
		__sync_fetch_and_add(&c->windows[kind], 1);
	slot = log2_u64(size);
	if (slot >= HIST_LOG2_SLOTS)
		slot = HIST_LOG2_SLOTS - 1;
	__sync_fetch_and_add(&window_sizes[kind][slot], 1);
}

/* Records one page's age at first use. A global function: the verifier checks it once, not once
 * per page of every loop that calls it. */
__noinline int record_age(__u32 use, __u64 age)
{
	__u32 idx = (hist_gen & 1) * RA_USES + (use & (RA_USES - 1));
	struct hist *h = bpf_map_lookup_elem(&ages, &idx);

	if (h)
		hist_record_exclusive(h, age);
	return 0;
}

/* A chunk's pages n from lo, and the kind of use, in one scalar: global functions take at
 * most five arguments, all scalars. */
#define RA_SPAN(lo, n, use) ((__u32)(lo) | (__u32)(n) << 8 | (__u32)(use) << 16)

/* The first use of n pages of a chunk from page lo: each page's age at its first use. Used
 * itself is counted from the states (exactly, in user space); the histogram counts first uses,
 * so a page two threads first used at once shows as one count too many there. A global
 * function, checked once by the verifier: inlined into the loops over chunks, its loop over
 * pages made 6.12's verifier walk more than a million instructions. */
__noinline int use_chunk_pages(__u64 mapping, __u64 chunk, __u32 span)
{
	struct ra_chunk_key key = { .mapping = mapping, .chunk = chunk };
	__u32 lo = span & 0xff, n = (span >> 8) & 0xff, use = span >> 16, p, zero = 0;
	__u64 now = 0, gen = brought_gen, *words;
	struct ra_idle *idle = bpf_map_lookup_elem(&idle_chunk, &zero);
	struct ra_chunk *ch;

	if (idle && idle->mapping == mapping && idle->chunk == chunk && idle->gen == gen)
		return 0;
	ch = bpf_map_lookup_elem(&chunks, &key);
	if (ch) {
		for (__u32 j = 0; j < RA_CHUNK_PAGES; j++) {
			if (j >= n)
				break;
			p = (lo + j) & (RA_CHUNK_PAGES - 1);
			if (ch->state[p] != RA_BROUGHT)
				continue;
			ch->state[p] = RA_USED;
			/* The clock only for a first use: most uses are of pages long used. */
			if (!now)
				now = bpf_ktime_get_ns();
			record_age(use, now > ch->birth[p] ? now - ch->birth[p] : 0);
		}
		/* Bit 0 of a state byte is set for RA_BROUGHT alone. */
		words = (__u64 *)ch->state;
		if ((words[0] | words[1] | words[2] | words[3]) & 0x0101010101010101ULL)
			return 0;
	}
	/* Nothing left to use here: the next uses of this chunk on this CPU stop above, until a
	 * page is brought in anywhere. */
	if (idle) {
		idle->mapping = mapping;
		idle->chunk = chunk;
		idle->gen = gen;
	}
	return 0;
}

/* Pages [first, last] of mapping, in chunk number i of the range: where they start in the
 * chunk and how many. */
static __always_inline __u32 chunk_span(__u64 first, __u64 last, __u64 chunk, __u32 *lo)
{
	__u64 base = chunk << RA_CHUNK_SHIFT;
	__u64 from = first > base ? first : base;
	__u64 to = last < base + RA_CHUNK_PAGES - 1 ? last : base + RA_CHUNK_PAGES - 1;

	*lo = (from - base) & (RA_CHUNK_PAGES - 1);
	return to >= from ? (__u32)(to - from + 1) : 0;
}

struct use_range {
	__u64 mapping;
	__u64 first;
	__u64 last;
	__u32 use;
};

static long use_chunk(__u64 i, struct use_range *r)
{
	__u64 chunk = (r->first >> RA_CHUNK_SHIFT) + i;
	__u32 lo, n;

	if (chunk > r->last >> RA_CHUNK_SHIFT)
		return 1;
	n = chunk_span(r->first, r->last, chunk, &lo);
	use_chunk_pages(r->mapping, chunk, RA_SPAN(lo, n, r->use));
	return 0;
}

/* Pages [first, last] of mapping are used. */
static __always_inline void on_use_range(__u64 mapping, __u64 first, __u64 last, enum ra_use use)
{
	struct use_range r = {
		.mapping = mapping,
		.first = first,
		.last = last,
		.use = use,
	};

	if (last < first)
		return;
	bpf_loop(RA_RANGE_CHUNKS, use_chunk, &r, 0);
}

/* The same for the kernels without bpf_loop (before 5.17), whose ranges are fault-around's (at
 * most fault_around_bytes, 64 KiB by default: 2 chunks) or one folio (at most 16 chunks). */
static __always_inline void on_use_small(__u64 mapping, __u64 first, __u64 last, enum ra_use use)
{
	__u64 nchunks, chunk;
	__u32 lo, n;

	if (last < first)
		return;
	nchunks = (last >> RA_CHUNK_SHIFT) - (first >> RA_CHUNK_SHIFT) + 1;
	for (__u32 i = 0; i < RA_FOLIO_CHUNKS; i++) {
		if (i >= nchunks)
			break;
		chunk = (first >> RA_CHUNK_SHIFT) + i;
		n = chunk_span(first, last, chunk, &lo);
		use_chunk_pages(mapping, chunk, RA_SPAN(lo, n, use));
	}
}

/* A fault on page index of mapping: used now if cached, else when its window adds it. */
static __always_inline void on_fault(__u64 mapping, __u64 index)
{
	struct ra_thread *t;

	on_use_small(mapping, index, index, RA_USE_FAULT);
	if (!current_selected())
		return;
	t = current_thread(true);
	if (t) {
		/* A new operation: what the thread's last read or fault left is over. */
		t->mapping = 0;
		t->pend_mapping = 0;
		t->fault_mapping = mapping;
		t->fault_index = index;
	}
}

/* A folio's mapping, first index and pages: a struct page before 5.16 (order 0), else a folio
 * whose order is in its second page (compound_order until 6.0, then _folio_order, then the low
 * byte of _flags_1). */
struct folio___old {
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* 5.16-6.0: a compound page's order in its second page. */
struct page___old {
	unsigned char compound_order;
} __attribute__((preserve_access_index));

static __always_inline __u32 folio_pages(struct folio *folio);

static __always_inline void folio_span(void *ptr, __u64 *mapping, __u64 *index, __u32 *pages)
{
	struct folio *folio = ptr;

	if (!bpf_core_type_exists(struct folio)) {
		struct page *page = ptr;

		*mapping = (__u64)BPF_CORE_READ(page, mapping);
		*index = BPF_CORE_READ(page, index);
		*pages = 1;
		return;
	}
	*mapping = (__u64)BPF_CORE_READ(folio, mapping);
	*index = BPF_CORE_READ(folio, index);
	*pages = folio_pages(folio);
}

/* The pages a folio holds. */
static __always_inline __u32 folio_pages(struct folio *folio)
{
	__u64 flags = 0;
	__u32 order = 0;

	/* flags is the first word of every struct page and folio (6.18 wraps it in a struct). */
	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))) {
		if (bpf_core_field_exists(((struct folio___old *)0)->_folio_order))
			order = BPF_CORE_READ((struct folio___old *)folio, _folio_order);
		else if (bpf_core_field_exists(folio->_flags_1))
			order = BPF_CORE_READ(folio, _flags_1) & 0xff;
		else
			/* 5.16-6.0: the order is the second page's compound_order. */
			order = BPF_CORE_READ((struct page___old *)((struct page *)folio + 1),
					      compound_order);
	}
	return 1U << (order & 15);
}

/* Pages n from lo of a chunk were added by a window of the current process. Returns the pages
 * now tracked: n, or 0 where the chunk map is full. */
__noinline int bring_in_chunk(__u64 mapping, __u64 chunk, __u32 span, __u64 now)
{
	struct ra_chunk_key key = { .mapping = mapping, .chunk = chunk };
	__u32 lo = span & 0xff, n = (span >> 8) & 0xff, p;
	struct ra_chunk *ch = bpf_map_lookup_elem(&chunks, &key);
	struct inode *host;

	if (!ch) {
		bpf_map_update_elem(&chunks, &key, &zero_chunk, BPF_NOEXIST);
		ch = bpf_map_lookup_elem(&chunks, &key);
		if (!ch) {
			__sync_fetch_and_add(&untracked_pages, n);
			return 0;
		}
		host = BPF_CORE_READ((struct address_space *)mapping, host);
		ch->tgid = bpf_get_current_pid_tgid() >> 32;
		ch->dev = inode_dev(host);
		ch->ino = BPF_CORE_READ(host, i_ino);
		if (per_cgroup_depth)
			ch->cgroup = cgroup_at_depth(current_cgroup());
	}
	for (__u32 j = 0; j < RA_CHUNK_PAGES; j++) {
		if (j >= n)
			break;
		p = (lo + j) & (RA_CHUNK_PAGES - 1);
		ch->birth[p] = now;
		ch->state[p] = RA_BROUGHT;
	}
	__sync_fetch_and_add(&brought_gen, 1);
	return n;
}

/* A folio was added to the page cache: a readahead page if this thread's window covers it.
 * Folios are naturally aligned: one of fewer than 32 pages lies in one chunk, a larger one fills
 * whole chunks. Nothing is counted here: the pages brought in are those the chunks hold and
 * those evicted since (counted at their delete), so an add costs one chunk update. */
static __always_inline int on_add(__u64 *args, bool typed)
{
	__u64 mapping, index, now, nchunks, chunk, fault_page = (__u64)-1;
	struct folio *folio = (void *)args[0];
	struct ra_thread *t;
	__u32 pages, lo, n;

	t = current_thread(false);
	if (!t || !t->mapping)
		return 0;
	if (typed && bpf_core_type_exists(struct folio)) {
		/* Plain loads from the typed folio; the thread's copy of the mapping is a number,
		 * which the global functions below need. */
		if ((__u64)folio->mapping != t->mapping)
			return 0;
		mapping = t->mapping;
		index = folio->index;
		pages = folio_pages(folio);
	} else if (typed) {
		struct page *page = (void *)folio;

		if ((__u64)page->mapping != t->mapping)
			return 0;
		mapping = t->mapping;
		index = page->index;
		pages = 1;
	} else {
		folio_span(folio, &mapping, &index, &pages);
		if (mapping != t->mapping)
			return 0;
	}
	if (index < t->start || index >= t->end)
		return 0;
	if (t->fault_mapping == mapping && t->fault_index >= index && t->fault_index < index + pages) {
		fault_page = t->fault_index;
		t->fault_mapping = 0;
	}
	now = bpf_ktime_get_ns();
	nchunks = pages > RA_CHUNK_PAGES ? pages >> RA_CHUNK_SHIFT : 1;
	lo = pages > RA_CHUNK_PAGES ? 0 : index & (RA_CHUNK_PAGES - 1);
	n = pages > RA_CHUNK_PAGES ? RA_CHUNK_PAGES : pages;
	for (__u32 i = 0; i < RA_FOLIO_CHUNKS; i++) {
		if (i >= nchunks)
			break;
		chunk = (index >> RA_CHUNK_SHIFT) + i;
		bring_in_chunk(mapping, chunk, RA_SPAN(lo, n, 0), now);
		if (fault_page >> RA_CHUNK_SHIFT == chunk)
			use_chunk_pages(mapping, chunk,
					RA_SPAN(fault_page & (RA_CHUNK_PAGES - 1), 1, RA_USE_FAULT_ADD));
	}
	return 0;
}

/* Pages n from lo of a chunk left the page cache: those never used are waste. */
__noinline int evict_chunk(__u64 mapping, __u64 chunk, __u32 span)
{
	struct ra_chunk_key key = { .mapping = mapping, .chunk = chunk };
	__u32 lo = span & 0xff, n = (span >> 8) & 0xff, p, state;
	struct ra_chunk *ch = bpf_map_lookup_elem(&chunks, &key);
	__u64 wasted = 0, used = 0;
	struct ra_counts *c;

	if (!ch)
		return 0;
	for (__u32 j = 0; j < RA_CHUNK_PAGES; j++) {
		if (j >= n)
			break;
		p = (lo + j) & (RA_CHUNK_PAGES - 1);
		state = ch->state[p];
		/* RA_BROUGHT is 1, RA_USED 2: no branch per page. */
		wasted += state & 1;
		used += state >> 1;
		ch->state[p] = RA_ABSENT;
	}
	if (wasted || used) {
		__sync_fetch_and_add(&total.wasted, wasted);
		__sync_fetch_and_add(&total.evicted_used, used);
		c = proc_counts(ch->tgid, false);
		if (c) {
			__sync_fetch_and_add(&c->wasted, wasted);
			__sync_fetch_and_add(&c->evicted_used, used);
		}
		c = file_counts(ch->dev, ch->ino, NULL);
		if (c) {
			__sync_fetch_and_add(&c->wasted, wasted);
			__sync_fetch_and_add(&c->evicted_used, used);
		}
		c = cgroup_counts(ch->cgroup, false);
		if (c) {
			__sync_fetch_and_add(&c->wasted, wasted);
			__sync_fetch_and_add(&c->evicted_used, used);
		}
	}
	/* The chunk stays, empty: deleting it here could free it under another CPU adding a page
	 * to it (and a preallocated element is reused at once, for another chunk). User space
	 * removes empty chunks when the map fills (src/tools/rastat/mod.rs). */
	return 0;
}

/* A folio left the page cache. */
static __always_inline int on_delete(__u64 *args)
{
	__u64 mapping, index, nchunks;
	__u32 pages, lo, n;

	folio_span((void *)args[0], &mapping, &index, &pages);
	nchunks = pages > RA_CHUNK_PAGES ? pages >> RA_CHUNK_SHIFT : 1;
	lo = pages > RA_CHUNK_PAGES ? 0 : index & (RA_CHUNK_PAGES - 1);
	n = pages > RA_CHUNK_PAGES ? RA_CHUNK_PAGES : pages;
	for (__u32 i = 0; i < RA_FOLIO_CHUNKS; i++) {
		if (i >= nchunks)
			break;
		evict_chunk(mapping, (index >> RA_CHUNK_SHIFT) + i, RA_SPAN(lo, n, 0));
	}
	return 0;
}

/* ---- 6.18+: the readahead tracepoints ---- */

static __always_inline struct address_space *inode_mapping(__u64 inode)
{
	return BPF_CORE_READ((struct inode *)inode, i_mapping);
}

/* page_cache_ra_unbounded(inode, index, nr_to_read, lookahead_size) */
static __always_inline int tp_unbounded(__u64 *args, bool typed)
{
	on_window(inode_mapping(args[0]), args[1], args[2], args[3]);
	return 0;
}
TP_TWINS(page_cache_ra_unbounded, tp_ra_unbounded, tp_unbounded)

/* page_cache_ra_order(inode, index, ra): the window is [index, ra->start + ra->size). */
static __always_inline void ra_state_window(struct address_space *mapping, __u64 index,
					    struct file_ra_state *ra)
{
	__u64 end = BPF_CORE_READ(ra, start) + BPF_CORE_READ(ra, size);

	on_window(mapping, index, end > index ? end - index : 0, BPF_CORE_READ(ra, async_size));
}

static __always_inline int tp_order(__u64 *args, bool typed)
{
	ra_state_window(inode_mapping(args[0]), args[1], (struct file_ra_state *)args[2]);
	return 0;
}
TP_TWINS(page_cache_ra_order, tp_ra_order, tp_order)

/* page_cache_sync_ra(inode, index, ra, req_count), page_cache_async_ra (the same) */
static __always_inline int tp_sync(__u64 *args, bool typed)
{
	on_decision(inode_mapping(args[0]), args[1], args[3], RA_SYNC);
	return 0;
}
TP_TWINS(page_cache_sync_ra, tp_sync_ra, tp_sync)

static __always_inline int tp_async(__u64 *args, bool typed)
{
	on_decision(inode_mapping(args[0]), args[1], args[3], RA_ASYNC);
	return 0;
}
TP_TWINS(page_cache_async_ra, tp_async_ra, tp_async)

/* ---- before 6.18: the same functions, at their entry ---- */

static __always_inline struct address_space *ractl_mapping(__u64 ractl)
{
	return BPF_CORE_READ((struct readahead_control *)ractl, mapping);
}

static __always_inline __u64 ractl_index(__u64 ractl)
{
	return BPF_CORE_READ((struct readahead_control *)ractl, _index);
}

/* page_cache_ra_unbounded(ractl, nr_to_read, lookahead_size) */
static __always_inline int fn_unbounded(void *ctx, enum hook_flavour f)
{
	__u64 ractl = hook_arg(ctx, f, 0);

	on_window(ractl_mapping(ractl), ractl_index(ractl), hook_arg(ctx, f, 1), hook_arg(ctx, f, 2));
	return 0;
}
FUNC_ENTRY_HOOKS(page_cache_ra_unbounded, fn_unbounded)

/* page_cache_ra_order(ractl, ra, new_order) (5.18+) */
static __always_inline int fn_order(void *ctx, enum hook_flavour f)
{
	__u64 ractl = hook_arg(ctx, f, 0);

	ra_state_window(ractl_mapping(ractl), ractl_index(ractl),
			(struct file_ra_state *)hook_arg(ctx, f, 1));
	return 0;
}
FUNC_ENTRY_HOOKS(page_cache_ra_order, fn_order)

/* page_cache_sync_ra(ractl, [ra,] req_count) */
static __always_inline int fn_sync(void *ctx, enum hook_flavour f)
{
	__u64 ractl = hook_arg(ctx, f, 0);

	on_decision(ractl_mapping(ractl), ractl_index(ractl), hook_arg(ctx, f, sync_req_arg),
		    RA_SYNC);
	return 0;
}
FUNC_ENTRY_HOOKS(page_cache_sync_ra, fn_sync)

static __always_inline int fn_async(void *ctx, enum hook_flavour f)
{
	__u64 ractl = hook_arg(ctx, f, 0);

	on_decision(ractl_mapping(ractl), ractl_index(ractl), 0, RA_ASYNC);
	return 0;
}
FUNC_ENTRY_HOOKS(page_cache_async_ra, fn_async)

/* ---- the page cache: every kernel ---- */

static __always_inline int tp_add(__u64 *args, bool typed)
{
	return on_add(args, typed);
}
TP_TWINS(mm_filemap_add_to_page_cache, tp_add_page, tp_add)

static __always_inline int tp_delete(__u64 *args, bool typed)
{
	return on_delete(args);
}
TP_TWINS(mm_filemap_delete_from_page_cache, tp_delete_page, tp_delete)

/* A pointer argument of a tracepoint as a plain number: tp_btf types it, and the global
 * functions that take it (use_chunk_pages...) accept scalars only. */
static __always_inline __u64 arg_scalar(__u64 *args, int i)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &args[i]);
	return v;
}

/* ---- uses, 6.12+: mm_filemap_get_pages(mapping, index, last_index), map_pages (the same),
 * fault(mapping, index) ---- */

/* A read's range event is the rest of its request (from where its copy stands to its end): the
 * pages it copies next and the ones after. It is skipped for a batch whose last folio is still
 * being read (filemap_get_pages trims the batch and returns -EAGAIN without it): the next event
 * starts after pages already copied. So a thread's read marks from where its previous event of
 * the same read began, or from the read's own start (recorded at its system call). */
static __always_inline int tp_get_pages(__u64 *args, bool typed)
{
	struct ra_thread *t = current_thread(false);
	__u64 mapping = arg_scalar(args, 0), first = args[1];

	if (t && t->read_mapping == mapping) {
		if (t->read_from < first)
			first = t->read_from;
		t->read_from = args[1];
	}
	on_use_range(mapping, first, args[2], RA_USE_READ);
	return 0;
}
TP_TWINS(mm_filemap_get_pages, tp_read_pages, tp_get_pages)

/* log2 of the page size, set by user space. */
const volatile __u32 page_shift = 12;
/* Syscall numbers of enum ra_read_call, filled by user space. */
const volatile __s64 read_calls[RA_READ_CALLS] = { -1, -1, -1, -1, -1, -1, -1, -1, -1 };

/* A read system call begins: where in which file (read, readv: the file position; the p-forms:
 * their offset, -1 for preadv2's "the file position"). */
static __always_inline int on_read_call(long id, __u64 fd, __s64 offset)
{
	struct ra_thread *t;
	struct file *f;
	__s64 pos;

	if (id == read_calls[RA_SYS_OTHER_0] || id == read_calls[RA_SYS_OTHER_1] ||
	    id == read_calls[RA_SYS_OTHER_2] || id == read_calls[RA_SYS_OTHER_3]) {
		/* sendfile, splice, copy_file_range, io_uring_enter read the page cache too, from
		 * starts we do not know: the last read call's start must not serve them. */
		t = current_thread(false);
		if (t)
			t->read_mapping = 0;
		return 0;
	}
	if (id != read_calls[RA_SYS_READ] && id != read_calls[RA_SYS_READV] &&
	    id != read_calls[RA_SYS_PREAD64] && id != read_calls[RA_SYS_PREADV] &&
	    id != read_calls[RA_SYS_PREADV2])
		return 0;
	f = fd_file(fd);
	if (!f)
		return 0;
	t = current_thread(true);
	if (!t)
		return 0;
	/* A new operation: what the thread's last read or fault left is over. */
	t->mapping = 0;
	t->pend_mapping = 0;
	t->fault_mapping = 0;
	pos = -1;
	if (id != read_calls[RA_SYS_READ] && id != read_calls[RA_SYS_READV])
		pos = offset;
	if (pos < 0)
		pos = BPF_CORE_READ(f, f_pos);
	t->read_mapping = (__u64)BPF_CORE_READ(f, f_mapping);
	t->read_from = pos >> page_shift;
	return 0;
}

/* Every system call's entry, the arguments in di, si, dx, r10 (x86_64). */
SEC("tp_btf/sys_enter")
int BPF_PROG(read_call_btf, struct pt_regs *regs, long id)
{
	return on_read_call(id, BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, r10));
}

SEC("raw_tp/sys_enter")
int read_call_raw(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];

	return on_read_call(ctx->args[1], BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, r10));
}

static __always_inline int tp_map_pages(__u64 *args, bool typed)
{
	on_use_range(arg_scalar(args, 0), args[1], args[2], RA_USE_AROUND);
	return 0;
}
TP_TWINS(mm_filemap_map_pages, tp_mapped_pages, tp_map_pages)

static __always_inline int tp_fault(__u64 *args, bool typed)
{
	on_fault(arg_scalar(args, 0), args[1]);
	return 0;
}
TP_TWINS(mm_filemap_fault, tp_fault_page, tp_fault)

/* ---- uses before 6.12: the functions ---- */

/* folio_mark_accessed(folio) (5.16+) and mark_page_accessed(page): a read copied it. */
/* Whether this CPU last found the chunk of page index of mapping with nothing to use, and no
 * page was brought in since (see use_chunk_pages): then a use stops here, without a lookup. */
static __always_inline bool idle_here(void *mapping, __u64 index)
{
	__u32 zero = 0;
	struct ra_idle *idle = bpf_map_lookup_elem(&idle_chunk, &zero);

	return idle && idle->mapping == (__u64)mapping && idle->chunk == index >> RA_CHUNK_SHIFT &&
	       idle->gen == brought_gen;
}

static __always_inline int fn_accessed(void *ctx, enum hook_flavour f)
{
	struct folio *folio = (void *)hook_arg(ctx, f, 0);
	__u64 mapping, index;
	__u32 pages;

	if (f == HOOK_FENTRY && bpf_core_type_exists(struct folio)) {
		/* Plain loads from the typed folio; the mapping read as a number only past the
		 * idle check (the global functions take numbers). */
		index = folio->index;
		pages = folio_pages(folio);
		if (pages == 1 && idle_here(folio->mapping, index))
			return 0;
		mapping = (__u64)BPF_CORE_READ(folio, mapping);
	} else if (f == HOOK_FENTRY) {
		struct page *page = (void *)folio;

		index = page->index;
		pages = 1;
		if (idle_here(page->mapping, index))
			return 0;
		mapping = (__u64)BPF_CORE_READ(page, mapping);
	} else {
		folio_span(folio, &mapping, &index, &pages);
	}
	on_use_small(mapping, index, index + pages - 1, RA_USE_READ);
	return 0;
}
FUNC_ENTRY_HOOKS(folio_mark_accessed, fn_accessed)
FUNC_ENTRY_HOOKS(mark_page_accessed, fn_accessed)

static __always_inline __u64 vmf_mapping(__u64 vmf)
{
	return (__u64)BPF_CORE_READ((struct vm_fault *)vmf, vma, vm_file, f_mapping);
}

/* filemap_fault(vmf) */
static __always_inline int fn_fault(void *ctx, enum hook_flavour f)
{
	__u64 vmf = hook_arg(ctx, f, 0);

	on_fault(vmf_mapping(vmf), BPF_CORE_READ((struct vm_fault *)vmf, pgoff));
	return 0;
}
FUNC_ENTRY_HOOKS(filemap_fault, fn_fault)

/* filemap_map_pages(vmf, start_pgoff, end_pgoff) */
static __always_inline int fn_map_pages(void *ctx, enum hook_flavour f)
{
	on_use_small(vmf_mapping(hook_arg(ctx, f, 0)), hook_arg(ctx, f, 1), hook_arg(ctx, f, 2),
		     RA_USE_AROUND);
	return 0;
}
FUNC_ENTRY_HOOKS(filemap_map_pages, fn_map_pages)

/* Task storage goes with the task; the hash entry must be removed. */
static __always_inline int task_exit_args(__u64 *args, bool typed)
{
	threads_forget((__u32)bpf_get_current_pid_tgid());
	return 0;
}
TP_TWINS(sched_process_exit, task_exit, task_exit_args)

char LICENSE[] SEC("license") = "GPL";
