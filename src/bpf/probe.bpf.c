// SPDX-License-Identifier: GPL-2.0
/* Feature probes: empty programs that user space retargets, loads and attaches to learn what this
 * kernel really allows (a program type being known to the verifier does not prove it attaches). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("fentry/vfs_read")
int probe_fentry(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_issue")
int probe_tp_btf(void *ctx)
{
	return 0;
}

SEC("raw_tp/sys_enter")
int probe_raw_tp(void *ctx)
{
	return 0;
}

SEC("kprobe/vfs_read")
int probe_kprobe(void *ctx)
{
	return 0;
}

/* A function's address, asked of the kernel (5.16+) through a test run: the context is the
 * question and takes the answer. Reading /proc/kallsyms for it instead, the kernel formats every
 * symbol it has: 100 ms on the CI host, the longest step of iostack's start (2026-11-26). */
struct ksym_query {
	__u64 addr;
	__s64 err;
	__u64 name[8]; /* NUL-terminated */
};

SEC("syscall")
int ksym_address(struct ksym_query *q)
{
	__u64 name[8], addr = 0;

	for (int i = 0; i < 8; i++)
		name[i] = q->name[i];
	((char *)name)[sizeof(name) - 1] = 0;
	q->err = bpf_kallsyms_lookup_name((char *)name, sizeof(name), 0, &addr);
	q->addr = addr;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
