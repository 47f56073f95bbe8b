/* micro_th_regions (tests/bench/b_probe_lines.sh): threadhist's `blocks` update as the probe
 * makes it now (a region per block size, consecutive blocks side by side, its start a field of
 * a constant at bit w = warps per block; blocks past their region in one counter; a 64-bit block
 * index; a power-of-two test by bit mask; other launch shapes not counted): against
 * micro_th_blocks (the same density, its region start by five compares), micro_th_inorder (a
 * shorter path, a counter per line) and micro_th_distinct (counter[block index]). */
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
	if ((ctx->ntid_x & 31) && (((__u64)ctx->ntid_x * ctx->ntid_y * ctx->ntid_z) & 31))
		return 0;
	if ((__u64)ctx->tid_x + ctx->tid_y + ctx->tid_z)
		return 0;
	__u64 warps = ((__u64)ctx->ntid_x * ctx->ntid_y * ctx->ntid_z) >> 5;
	if (!((0x100010116ull >> warps) & 1))
		return 0;
	__u64 b = ctx->ctaid_x + ctx->nctaid_x * (ctx->ctaid_y + (__u64)ctx->nctaid_y * ctx->ctaid_z);
	__u32 key = b * warps < TH_GROUPS ? (((TH_REGIONS >> warps) & 63) << 16) + b : 1u << 16;
	__u32 *n = bpf_map_lookup_elem(&blocks, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
