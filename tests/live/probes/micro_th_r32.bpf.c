/* micro_th_r32 (tests/bench/b_probe_lines.sh): micro_th_regions in 32-bit arithmetic (block
 * index, block size, key): what the 64-bit multiplies of the region probe cost thread 0. */
#include "cubpf_helpers.h"
#define TH_GROUPS (1u << 21)
#define TH_REGIONS 0x20c40ull
struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, 1u << 22);
	__type(key, __u32);
	__type(value, __u32);
} blocks SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	__u32 per_block = ctx->ntid_x * ctx->ntid_y * ctx->ntid_z;
	if ((ctx->ntid_x & 31) && (per_block & 31))
		return 0;
	if (ctx->tid_x | ctx->tid_y | ctx->tid_z)
		return 0;
	__u32 warps = per_block >> 5;
	if (!((0x100010116ull >> warps) & 1))
		return 0;
	__u32 b = ctx->ctaid_x + ctx->nctaid_x * (ctx->ctaid_y + ctx->nctaid_y * ctx->ctaid_z);
	__u32 key = b * warps < TH_GROUPS ? (__u32)(((TH_REGIONS >> warps) & 63) << 16) + b : 1u << 16;
	__u32 *n = bpf_map_lookup_elem(&blocks, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
