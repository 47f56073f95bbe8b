/* threadhist: how many times each GPU thread ran the probed kernels (one counter per thread,
 * no atomics: every thread owns its slot of the per-thread array). */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_PERTHREAD_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} executions SEC(".maps");

SEC("kretprobe/*")
int threadhist(struct cubpf_kernel_ctx *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&executions, &zero);
	(void)ctx;
	if (n)
		*n += 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
