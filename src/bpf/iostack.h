/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* iostack: the layout shared by src/bpf/iostack.bpf.c and user space (src/tools/iostack/). */
#ifndef IOSTACK_IOSTACK_H
#define IOSTACK_IOSTACK_H

#include "lib/breakdown.h"
#include "lib/fn_slots.h"
#include "lib/hist.h"

/* Operation slots per run (slot 0 means "not traced"). */
#define IOSTACK_OPS 8
/* Function slots for the VFS and filesystem layers. */
#define IOSTACK_FN_SLOTS 16
/* A device filter: the whole disk and its partitions. */
#define IOSTACK_DISK_DEVS 16
/* Requests a --slow journey lists. */
#define IOSTACK_JOURNEY_REQS 16

/* The layers a call passes through, as histogram keys. The function slots' `op` field holds
 * LAYER_VFS or LAYER_FS (1 and 2), minus one as an index into call_state.layer_*. */
enum layer {
	LAYER_SYSCALL = 0,
	LAYER_VFS = 1,
	LAYER_FS = 2,
	LAYER_BLOCK = 3,   /* the call's time waiting for I/O (the breakdown's three I/O parts) */
	LAYERS = 4,
};

/* Filesystem types a run's filesystem layer can tell apart, per operation. */
#define IOSTACK_FS_TYPES 8

/* Per operation, what its calls that ended in an interval add up to. */
struct op_totals {
	__u64 calls;
	__u64 parts[PARTS];
	__u64 via_waker_ns;   /* of parts[PART_OTHERS_IO], through a waker's I/O waits */
	__u64 ios;            /* block I/Os the calls waited for */
	__u64 others_ios;     /* of them, those someone else submitted */
};

/* A histogram of one layer for one operation (and filesystem type). */
struct layer_key {
	__u32 gen;
	__u32 op;
	__u32 layer;
	__u32 pad;
	char fs[FN_FS_LEN];
};

/* -P: per process and operation (id: the tgid); --per-cgroup: per cgroup and operation (id:
 * the cgroup's, at its depth). */
struct group_key {
	__u32 gen;
	__u32 op;
	__u64 id;
};

struct group_totals {
	__u64 calls;
	__u64 total_ns;
	__u64 max_ns;
	__u64 parts[PARTS];
	__u64 via_waker_ns;   /* of parts[PART_OTHERS_IO], through a waker's I/O waits */
	__u64 ios;
	char comm[16];
};

/* --per-cgroup: a cgroup's calls of one operation, with their latency histogram, so that the
 * exporter's per-cgroup syscall latency comes from the same drain as the calls' parts (they
 * add up to its sum). A per-CPU histogram is 2.8 KB: -P's thousands of processes have none. */
struct cgroup_totals {
	struct group_totals t;
	struct hist latency;
};

/* What a --slow record in the ring is: its first field. */
enum journey_kind {
	JOURNEY_CALL = 0,
	JOURNEY_REQUEST = 1,
};

/* --slow: one call slower than the threshold, as it ends. */
struct journey {
	__u32 kind;            /* JOURNEY_CALL */
	__u32 kind_pad;
	__u64 ts_ns;
	__u64 lat_ns;
	__u64 parts[PARTS];
	__u64 via_waker_ns;
	__u64 layer_ns[2];     /* time in the VFS, in the filesystem */
	__s64 ret;
	__s64 fd;              /* the file descriptor it used (-1 if none) */
	__u32 pid;
	__u32 tid;
	__u32 op;
	__u32 nr;              /* syscall number */
	__u32 ios;             /* block I/Os it waited for (reqs[] holds the first nreq) */
	__u32 nreq;
	__u32 via_pid;         /* the waker its others' I/O went through, if any */
	__u32 pad;
	__u64 cgroup;          /* --per-cgroup: the caller's cgroup at its depth, else 0 */
	char comm[16];
	char via_comm[16];
	char fs[FN_FS_LEN];
	char file[32];
	struct req_seen reqs[IOSTACK_JOURNEY_REQS];
};

/* io_uring requests: how this kernel's io_uring tracepoints pass their arguments (chosen by
 * src/tools/iostack/plan.rs from the tracepoints' BTF; the research note io-interfaces.md). */
enum uring_abi {
	URING_NONE = 0,  /* no io_uring tracepoints, or a layout we do not know: not followed */
	URING_5_15 = 1,  /* Debian's 5.10 (5.15's io_uring): submit_sqe(ctx, req, opcode, user_data,
			  * flags, force_nonblock, sq_thread), queue_async_work(ctx, rw, req, work,
			  * flags), complete(ctx, user_data, res, cflags): no request at completion */
	URING_6_1 = 2,   /* submit_sqe(req, force_nonblock) or submit_req(req) (6.4+),
			  * queue_async_work(req, rw), complete(ctx, req, user_data, res, cflags, ...) */
	URING_6_13 = 3,  /* complete(ctx, req, cqe) */
};

/* io_uring opcodes an operation can claim (6.18 has 63). */
#define IOSTACK_URING_OPCODES 64

/* How a request reached the kernel: its slot in the totals (uring_totals, uring_hists). */
enum request_iface {
	IFACE_IO_URING = 0,
	IFACE_AIO = 1,  /* native AIO: io_submit's iocbs */
};

/* IOCB_CMD_* an operation can claim (PREAD 0 .. PWRITEV 8). */
#define IOSTACK_IOCB_CMDS 16

/* Per interface and operation, the requests that posted their completion (an io_uring
 * request's entry, an AIO iocb's event) in an interval. */
struct uring_totals {
	__u64 requests;
	__u64 total_ns;   /* submission (the SQE consumed, the iocb set up) to the completion posted */
	__u64 max_ns;
	__u64 punted;     /* of them, those handed to an io-wq worker */
	__u64 ios;        /* block requests made for them (direct I/O) */
	/* total_ns, split along each request's own time line (they add up to it): */
	__u64 to_device_ns;  /* submission to its first block request's issue to the device:
			      * issue, a wait for a worker, blk-throttle, the OS queue */
	__u64 device_ns;     /* while one of its block requests was on the device */
	__u64 between_io_ns; /* from its first block request's issue to its last one's end, with
			      * none of them on the device */
	__u64 after_io_ns;   /* its last block request's end to its completion posted (io_uring:
			      * the completion's task work) */
	__u64 no_io_ns;      /* requests with no block request of their own: their whole time */
	__u64 worker_wait_ns; /* handed to an io-wq worker until one took it (io_wq_submit_work,
			       * where it can be hooked), carved from to_device_ns or no_io_ns */
};

/* A request's time along its own time line (struct uring_totals' six parts, in order). */
enum request_part {
	RPART_TO_DEVICE = 0,
	RPART_DEVICE = 1,
	RPART_BETWEEN_IO = 2,
	RPART_AFTER_IO = 3,
	RPART_NO_IO = 4,
	RPART_WORKER_WAIT = 5,
	REQUEST_PARTS = 6,
};

/* Block requests a request's journey lists. */
#define IOSTACK_REQUEST_JOURNEY_REQS 4

/* --slow: what a request in flight keeps for its journey, from its submission (request_trails). */
struct request_trail {
	__u64 user_data;       /* io_uring's user_data; an iocb's aio_data */
	__u64 cgroup;          /* --per-cgroup: the submitter's cgroup at its depth, else 0 */
	__u32 pid;             /* its submitter (0: not seen: no room to keep it) */
	__u32 tid;
	__u32 nreq;
	__u32 opcode;          /* the SQE's opcode; the iocb's IOCB_CMD_* */
	char comm[16];
	struct req_seen reqs[IOSTACK_REQUEST_JOURNEY_REQS];
};

/* --slow: one io_uring or AIO request slower than the threshold, as its completion is posted. */
struct request_journey {
	__u32 kind;            /* JOURNEY_REQUEST */
	__u32 op;
	__u64 ts_ns;
	__u64 lat_ns;
	__u64 parts[REQUEST_PARTS];
	__s64 res;             /* bytes, or -errno */
	__u32 iface;           /* enum request_iface */
	__u32 punted;
	__u32 ios;             /* block requests made for it (trail.reqs holds the first trail.nreq) */
	__u32 pad;
	char file[32];
	struct request_trail trail;
};

#endif
