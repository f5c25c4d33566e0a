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

char LICENSE[] SEC("license") = "GPL";
