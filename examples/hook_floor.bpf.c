// SPDX-License-Identifier: GPL-2.0
/* The floors of the cost benchmarks: programs that do nothing, so their cost is the kernel's
 * price of calling any BPF program there. raw_tp on sys_enter/sys_exit (syscall-cost, against
 * syslat), tp_btf on sched_switch, sched_waking and sched_wakeup (iostack-switch-cost, against
 * iostack's scheduler hooks and offcputime), tp_btf on block_bio_queue and block_rq_complete
 * (biolat-cost: one program at completion, plus one where a bio is submitted for a submitter's
 * cgroup), tp_btf on mm_filemap_add_to_page_cache and fentry on folio_mark_accessed (rastat's
 * kernel-matrix comparison with libbpf-tools' readahead), and the workqueue's three (iostack's
 * for the completions a worker finishes). examples/hook_floor.rs loads the set asked for.
 *
 * The `essential_*` programs are not empty: they are the least a per-call breakdown of I/O time
 * does on iostack's hooks, whatever else it does (benches/iostack-cost, "floor: essential"):
 * a call's start in its thread's storage and its latency at exit (what syslat does), the call
 * a bio is for, written under the bio where it is submitted and read back where its request
 * completes (the only context that knows the submitter, and the only one that knows the end),
 * and at a wakeup whether the woken thread is in a call (what the wakeup is charged to). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

SEC("raw_tp/sys_enter")
int floor_enter(void *ctx)
{
	return 0;
}

SEC("raw_tp/sys_exit")
int floor_exit(void *ctx)
{
	return 0;
}

/* Attached by hand to each traced syscall's syscalls:sys_enter_<name> and sys_exit_<name>
 * (the per-syscall tracepoints the tools use where tracefs is mounted). */
SEC("tp")
int floor_syscall_tp(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_switch")
int floor_switch(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_waking")
int floor_waking(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_wakeup")
int floor_wakeup(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_bio_queue")
int floor_bio_queue(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_complete")
int floor_rq_complete(void *ctx)
{
	return 0;
}

/* rastat's two programs per page read ahead and read: one where the page is added to the page
 * cache, one where a read marks it accessed (retargeted to mark_page_accessed before 5.16). */
SEC("tp_btf/mm_filemap_add_to_page_cache")
int floor_page_added(void *ctx)
{
	return 0;
}

SEC("fentry/folio_mark_accessed")
int floor_page_accessed(void *ctx)
{
	return 0;
}

SEC("tp_btf/workqueue_queue_work")
int floor_queue_work(void *ctx)
{
	return 0;
}

SEC("tp_btf/workqueue_execute_start")
int floor_execute_start(void *ctx)
{
	return 0;
}

SEC("tp_btf/workqueue_execute_end")
int floor_execute_end(void *ctx)
{
	return 0;
}

/* ---- the essential work ---------------------------------------------------------------------- */

struct essential_call {
	__u64 start;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct essential_call);
} essential_calls SEC(".maps");

struct essential_bio {
	__u64 ts;
	__u32 tid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct essential_bio);
} essential_bios SEC(".maps");

/* [0]: calls, [1]: their time, [2]: requests a call waited for, [3]: wakeups of calls. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} essential_sums SEC(".maps");

static __always_inline void essential_add(__u32 i, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&essential_sums, &i);

	if (p)
		*p += v;
}

/* Attached by hand to each traced syscall's syscalls:sys_enter_<name>. */
SEC("tp")
int essential_enter(void *ctx)
{
	struct essential_call *c = bpf_task_storage_get(&essential_calls, bpf_get_current_task_btf(),
							0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (c)
		c->start = bpf_ktime_get_ns();
	return 0;
}

/* ... and to its syscalls:sys_exit_<name>. */
SEC("tp")
int essential_exit(void *ctx)
{
	struct essential_call *c = bpf_task_storage_get(&essential_calls, bpf_get_current_task_btf(),
							0, 0);

	if (!c || !c->start)
		return 0;
	essential_add(0, 1);
	essential_add(1, bpf_ktime_get_ns() - c->start);
	c->start = 0;
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(essential_bio_queue, struct bio *bio)
{
	struct essential_call *c = bpf_task_storage_get(&essential_calls, bpf_get_current_task_btf(),
							0, 0);
	struct essential_bio *b, v = {};
	__u64 key = (__u64)bio;

	if (!c || !c->start)
		return 0;
	v.ts = bpf_ktime_get_ns();
	v.tid = (__u32)bpf_get_current_pid_tgid();
	/* Written in place for every life of a bio, as iostack does. */
	b = bpf_map_lookup_elem(&essential_bios, &key);
	if (b)
		*b = v;
	else
		bpf_map_update_elem(&essential_bios, &key, &v, BPF_ANY);
	return 0;
}

/* The call a completed request's first bio was for. */
static __always_inline void essential_call_io_ended(struct request *rq)
{
	__u64 key = (__u64)rq->bio;
	struct essential_bio *b;

	if (!key)
		return;
	b = bpf_map_lookup_elem(&essential_bios, &key);
	if (!b || !b->ts)
		return;
	b->ts = 0;
	essential_add(2, 1);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(essential_rq_complete, struct request *rq)
{
	essential_call_io_ended(rq);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(essential_waking, struct task_struct *p)
{
	struct essential_call *c = bpf_task_storage_get(&essential_calls, p, 0, 0);

	if (c && c->start)
		essential_add(3, bpf_ktime_get_ns() - c->start);
	return 0;
}

/* ---- the essential work of a per-request breakdown (benches/uring-cost) ------------------------
 *
 * The least any breakdown of io_uring requests does on iostack's hooks (6.13+'s tracepoints,
 * the host's): a request's start under its io_kiocb from its submission to its completion
 * entry; at a block request's completion, the request its bio was made for, with no map (the
 * bench's reads are a block device's single-bio direct I/O: the bio is inside its blkdev_dio,
 * whose iocb is the request's start), its block I/O and time on the device counted there; at
 * the completion entry, its time and device time summed and its entry removed. */

struct essential_req {
	__u64 start;
	__u64 device_ns;
	__u64 ios;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct essential_req);
} essential_reqs SEC(".maps");

/* [0]: requests, [1]: their time, [2]: their time on the device, [3]: their block I/Os. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} essential_req_sums SEC(".maps");

/* blkdev_bio_end_io_async, from kallsyms (hook_floor.rs). */
const volatile __u64 blkdev_async_end_io = 0;

static __always_inline void essential_req_add(__u32 i, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&essential_req_sums, &i);

	if (p)
		*p += v;
}

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(essential_uring_submit, struct io_kiocb *req)
{
	struct essential_req v = {.start = bpf_ktime_get_ns()};
	__u64 key = (__u64)req;

	bpf_map_update_elem(&essential_reqs, &key, &v, BPF_ANY);
	return 0;
}

/* A block request completes: the call its bio was for (as essential_rq_complete), and the
 * request. One program, as iostack's. */
SEC("tp_btf/block_rq_complete")
int BPF_PROG(essential_uring_rq_complete, struct request *rq)
{
	struct bio *bio = rq->bio;
	struct blkdev_dio *dio;
	struct essential_req *r;
	__u64 key;

	essential_call_io_ended(rq);
	if (!bio || (__u64)bio->bi_end_io != blkdev_async_end_io)
		return 0;
	dio = (void *)bio - bpf_core_field_offset(struct blkdev_dio, bio);
	key = (__u64)BPF_CORE_READ(dio, iocb);
	r = bpf_map_lookup_elem(&essential_reqs, &key);
	if (!r)
		return 0;
	r->ios++;
	r->device_ns += bpf_ktime_get_ns() - rq->io_start_time_ns;
	return 0;
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(essential_uring_complete, void *ring, struct io_kiocb *req)
{
	__u64 key = (__u64)req;
	struct essential_req *r = bpf_map_lookup_elem(&essential_reqs, &key);

	if (!r)
		return 0;
	essential_req_add(0, 1);
	essential_req_add(1, bpf_ktime_get_ns() - r->start);
	essential_req_add(2, r->device_ns);
	essential_req_add(3, r->ios);
	bpf_map_delete_elem(&essential_reqs, &key);
	return 0;
}

SEC("tp_btf/io_uring_submit_req")
int floor_uring_submit(void *ctx)
{
	return 0;
}

SEC("tp_btf/io_uring_complete")
int floor_uring_complete(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
