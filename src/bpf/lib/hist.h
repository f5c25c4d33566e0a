/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Latency histogram layout shared by the BPF programs and user space (src/common/report/hist.rs). */
#ifndef IOSTACK_HIST_H
#define IOSTACK_HIST_H

/* log2 slots in the display unit (usecs or msecs), printed in bcc's shape. */
#define HIST_LOG2_SLOTS 32
/* Log-linear buckets in nanoseconds: 2^HIST_SUB_BITS sub-buckets per power of two, so a
 * bucket is at most 1/8 = 12.5% wider than its lower bound. 320 buckets reach 2^42 ns (73 min);
 * longer latencies land in the last bucket. */
#define HIST_SUB_BITS 3
#define HIST_FINE_BUCKETS 320

struct hist {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 slots[HIST_LOG2_SLOTS];
	__u64 fine[HIST_FINE_BUCKETS];
};

#endif
