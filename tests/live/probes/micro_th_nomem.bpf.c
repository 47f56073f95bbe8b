/* micro_th_nomem (tests/bench/b_probe_lines.sh): threadhist's arithmetic on every thread's exit
 * (block size, class of 2^c warps, block index) and no memory update: what the code costs. */
#include "cubpf_helpers.h"
struct { __uint(type, CUBPF_MAP_GPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u32); } m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	__u32 per_block = ctx->ntid_x * ctx->ntid_y * ctx->ntid_z, warps = per_block / 32;
	if ((per_block & 31) || (ctx->tid_x | ctx->tid_y | ctx->tid_z) || (warps & (warps - 1)))
		return 0;
	__u32 c = (warps >= 2) + (warps >= 4) + (warps >= 8) + (warps >= 16) + (warps >= 32);
	__u64 b = cubpf_block_linear(ctx);
	__u32 key = (__u32)(b >> (40 + c)); /* 0 for every real grid: the lookup happens, no update */
	__u32 *n = bpf_map_lookup_elem(&m, &key);
	if (n && b == ~0ull)
		__sync_fetch_and_add(n, 1);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
