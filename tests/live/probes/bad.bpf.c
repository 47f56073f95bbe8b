/* bad: a program the verifier rejects (a map value used without its NULL check), beside a good
 * one: the shim skips the first with a warning and runs the second. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

SEC("kprobe/live_*")
int unchecked(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = ctx->tid_x & 3;
	__u64 *n = bpf_map_lookup_elem(&counts, &k);
	*n += 1; /* no NULL check: rejected */
	return 0;
}

SEC("kretprobe/live_*")
int checked(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = ctx->tid_x & 3;
	__u64 *n = bpf_map_lookup_elem(&counts, &k);
	if (n)
		*n += 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
