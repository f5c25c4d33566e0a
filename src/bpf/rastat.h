/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* rastat's layout shared with user space (src/tools/rastat/). */
#ifndef IOSTACK_RASTAT_H
#define IOSTACK_RASTAT_H

/* Pages are tracked in chunks of 32 consecutive page indexes of one file: a read of 1 MiB is 8
 * lookups, not 256, and a large folio (up to 512 pages) touches at most 16 chunks. */
#define RA_CHUNK_SHIFT 5
#define RA_CHUNK_PAGES 32
/* The most chunks one folio or one range event visits (512 pages, or 16384 of a read: a read's
 * range event covers at most the rest of its request from the last one's start, see
 * tp_get_pages). */
#define RA_FOLIO_CHUNKS 16
#define RA_RANGE_CHUNKS 512

/* Why a window was started. */
enum ra_kind {
	RA_SYNC = 0,   /* a read missed the cache: page_cache_sync_ra */
	RA_ASYNC = 1,  /* a read reached the lookahead mark: page_cache_async_ra */
	RA_AROUND = 2, /* a page fault read around the faulting page (mmap) */
	RA_HINT = 3,   /* the application asked: fadvise/madvise WILLNEED, readahead(2) */
	RA_KINDS = 4,
};

/* A page's state in its chunk. */
enum ra_page_state {
	RA_ABSENT = 0,
	RA_BROUGHT = 1, /* added to the page cache by a readahead window, not used yet */
	RA_USED = 2,    /* ... and read or mapped since */
};

/* How the first use of a page was seen: one age histogram per writer (a program never runs
 * nested in itself on one CPU; two programs may). */
enum ra_use {
	RA_USE_READ = 0,   /* read(): mm_filemap_get_pages, (folio_)mark_page_accessed */
	RA_USE_FAULT = 1,  /* a page fault on a cached page: mm_filemap_fault, filemap_fault */
	RA_USE_FAULT_ADD = 2, /* the faulting page itself, brought in by its own fault's window */
	RA_USE_AROUND = 3, /* mapped by fault-around: mm_filemap_map_pages, filemap_map_pages */
	RA_USES = 4,
};

struct ra_chunk_key {
	__u64 mapping; /* struct address_space *: an inode's pages, while it has any */
	__u64 chunk;   /* page index >> RA_CHUNK_SHIFT */
};

struct ra_chunk {
	__u32 tgid;    /* the process whose window brought the chunk's first page in */
	__u32 dev;     /* the file's device (kernel dev_t) and inode, for --per-file */
	__u64 ino;
	__u64 cgroup;  /* --per-cgroup: that process's cgroup (at the depth asked) */
	__u64 birth[RA_CHUNK_PAGES]; /* when each page was added, ns */
	__u8 state[RA_CHUNK_PAGES];  /* enum ra_page_state; one byte each: no two writers share a word */
};

/* Cumulative per process (by tgid), with --per-cgroup per cgroup and, with --per-file, per file;
 * user space takes differences.
 * Pages brought in are not counted here: they are the pages the chunks hold (walked by user
 * space) and those evicted since (wasted + evicted_used). */
struct ra_counts {
	__u64 windows[RA_KINDS];
	__u64 wasted;       /* pages evicted never used */
	__u64 evicted_used; /* pages evicted after use (used = these + the resident used ones) */
};

struct ra_proc {
	struct ra_counts counts;
	char comm[16];
};

struct ra_file_key {
	__u32 dev;
	__u32 pad;
	__u64 ino;
};

/* The file's path from its filesystem's root, one component per RA_NAME_LEN bytes, leaf
 * first (one flat array: the generated Rust type has no 2-D arrays). */
#define RA_PATH_DEPTH 12
#define RA_NAME_LEN 64

struct ra_file {
	struct ra_counts counts;
	char names[RA_PATH_DEPTH * RA_NAME_LEN];
};

/* Per-thread: the window being filled, and what started it. */
struct ra_thread {
	__u64 mapping; /* the window: pages [start, end) of this mapping; 0 when none */
	__u64 start;
	__u64 end;
	__u64 pend_mapping; /* a sync/async decision not yet followed by its window */
	__u64 pend_start;   /* sync: the pages the read asked for, [pend_start, pend_end) */
	__u64 pend_end;
	__u32 pend_kind;
	__u32 pad;
	__u64 fault_mapping; /* the page this thread is faulting on, until it is added */
	__u64 fault_index;
	__u64 read_mapping; /* the file of this thread's read system call, and the first page */
	__u64 read_from;    /* of it not yet marked used (6.18 without function hooks) */
};

/* The read system calls whose start rastat records (x86_64 numbers, filled by user space):
 * read and readv start at the file position, the others at their offset argument. */
enum ra_read_call {
	RA_SYS_READ = 0,
	RA_SYS_READV = 1,
	RA_SYS_PREAD64 = 2,
	RA_SYS_PREADV = 3,
	RA_SYS_PREADV2 = 4,
	/* Calls that read the page cache from starts rastat does not record: sendfile, splice,
	 * copy_file_range, io_uring_enter. */
	RA_SYS_OTHER_0 = 5,
	RA_SYS_OTHER_1 = 6,
	RA_SYS_OTHER_2 = 7,
	RA_SYS_OTHER_3 = 8,
	RA_READ_CALLS = 9,
};

#endif
