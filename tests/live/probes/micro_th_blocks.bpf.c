/* micro_th_blocks (tests/bench/b_probe_lines.sh): threadhist with its `blocks` map only (blocks of
 * 2^c warps counted once per block; other launch shapes not counted): what the other maps cost. */
#include "cubpf_helpers.h"
#define TH_GROUPS (1u << 21)
#define TH_CLASSES 6
#define TH_BLOCKS_AT(c) (2 * TH_GROUPS - ((2 * TH_GROUPS) >> (c)))
struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_BLOCKS_AT(TH_CLASSES));
	__type(key, __u32);
	__type(value, __u32);
} blocks SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	__u32 per_block = ctx->ntid_x * ctx->ntid_y * ctx->ntid_z, warps = per_block / 32;
	if ((per_block & 31) || (ctx->tid_x | ctx->tid_y | ctx->tid_z) || (warps & (warps - 1)))
		return 0;
	__u32 c = (warps >= 2) + (warps >= 4) + (warps >= 8) + (warps >= 16) + (warps >= 32);
	__u64 b = cubpf_block_linear(ctx), room = TH_GROUPS >> c;
	__u32 key = TH_BLOCKS_AT(c) + (__u32)(b < room ? b : room - 1);
	__u32 *n = bpf_map_lookup_elem(&blocks, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
