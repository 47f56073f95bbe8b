/* micro_th_inorder (tests/bench/b_probe_lines.sh): threadhist's `blocks` update as the probe
 * makes it now (a block of 2^c warps adds 1 at its node's in-order number (2b + 1) * 2^c - 1,
 * a power-of-two test by bit mask; other launch shapes not counted): against micro_th_blocks
 * (a region per block size) and micro_th_distinct (counter[block index]), what thread 0's
 * arithmetic costs. */
#include "cubpf_helpers.h"
#define TH_NODES (1u << 22)
struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_NODES);
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
	__u64 node = (2 * (__u64)cubpf_block_linear(ctx) + 1) * warps - 1;
	__u32 key = node < TH_NODES - 1 ? (__u32)node : TH_NODES - 1;
	__u32 *n = bpf_map_lookup_elem(&blocks, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
