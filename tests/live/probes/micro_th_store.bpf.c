/* micro_th_store (tests/bench/b_probe_lines.sh): thread 0 of each block stores 1 to a u32
 * counter of its own (block index), in a 16 MB array: threadhist's `blocks` update alone. */
#include "cubpf_helpers.h"
struct { __uint(type, CUBPF_MAP_GPU_ARRAY); __uint(max_entries, 1u << 22); __type(key, __u32); __type(value, __u32); } m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x | ctx->tid_y | ctx->tid_z)
		return 0;
	__u32 key = (__u32)cubpf_block_linear(ctx) & ((1u << 22) - 1);
	__u32 *n = bpf_map_lookup_elem(&m, &key);
	if (n)
		*n = 1;
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
