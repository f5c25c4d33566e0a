// SPDX-License-Identifier: GPL-2.0
/* The floor of the syscall-cost benchmark: raw_tp programs on sys_enter/sys_exit that do
 * nothing, so their cost is the kernel's price of calling any BPF program there. */
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

char LICENSE[] SEC("license") = "GPL";
