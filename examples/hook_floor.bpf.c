// SPDX-License-Identifier: GPL-2.0
/* The floors of the cost benchmarks: programs that do nothing, so their cost is the kernel's
 * price of calling any BPF program there. raw_tp on sys_enter/sys_exit (syscall-cost, against
 * syslat), tp_btf on sched_switch, sched_waking and sched_wakeup (iostack-switch-cost, against
 * iostack's scheduler hooks and offcputime), tp_btf on block_bio_queue and block_rq_complete
 * (biolat-cost: one program at completion, plus one where a bio is submitted for a submitter's
 * cgroup), tp_btf on mm_filemap_add_to_page_cache and fentry on folio_mark_accessed (rastat's
 * kernel-matrix comparison with libbpf-tools' readahead). examples/hook_floor.rs loads the set
 * asked for. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

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

char LICENSE[] SEC("license") = "GPL";
