/* micro_th_dpre (tests/bench/b_probe_lines.sh): micro_th_distinct with the region probe's test
 * of the block size before the thread test: what the other threads' longer path costs. */
#include "cubpf_helpers.h"
struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, 1u << 22);
	__type(key, __u32);
	__type(value, __u32);
} m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	if ((ctx->ntid_x & 31) && (((__u64)ctx->ntid_x * ctx->ntid_y * ctx->ntid_z) & 31))
		return 0;
	if ((__u64)ctx->tid_x + ctx->tid_y + ctx->tid_z)
		return 0;
	__u32 key = (__u32)cubpf_block_linear(ctx) & ((1u << 22) - 1);
	__u32 *n = bpf_map_lookup_elem(&m, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
