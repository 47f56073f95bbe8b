/* threadhist: how many times each GPU thread ran the probed kernels (kernel exits per thread).
 * A thread's id is its linear id in the grid: block_linear * threads_per_block + thread_linear.
 *
 * Cost: every thread of a block that runs leaves it exactly once (a thread has no other way to
 * end; a trap ends the whole launch), so in a block of a multiple of 32 threads (the common
 * case) the exit of thread (0,0,0) stands for all of the block's threads.  Blocks of 2^c warps
 * (32, 64, ... 1024 threads: nearly every launch) add 1 to one counter in `blocks`: the block
 * with linear index b covers the groups of 32 thread ids b * 2^c .. (b + 1) * 2^c - 1, node b
 * of level c of a perfect binary tree over the groups, and its counter is that node's in-order
 * number (2b + 1) * 2^c - 1 (unique over the levels, below 2 * TH_GROUPS).  Other whole-warp
 * blocks mark their range in `edges`, a difference array: +1 at the block's first group, -1
 * just past its last.  The host expands both into each group's count.  Why: measured on an
 * H100 (b_probe_lines.sh, b_tools.sh), one reduction per warp to distinct counters costs
 * vec_add 2^26 1.32x, and the L2's atomic units, not the memory traffic, are the cost (a plain
 * store per warp: 1.05x); one per block 1.03x; the difference array's two per block (the
 * second on the next block's first slot) 1.11x.  With one reduction per block what is left is
 * the arithmetic on thread 0's path: a region per block size (its log2 by five compares, a
 * shifted region start, a clamp) cost 1.076x where thread 0 adding 1 to counter[block index]
 * costs 1.049x; the node number is one multiply-add, and the power-of-two test a bit mask
 * (BPF has no popcount instruction, and clang may turn w & (w - 1) == 0 into its ~15
 * instruction expansion).  Every other thread of a block with ntid.x a multiple of 32 (nearly
 * every launch) tests only that and its tid.  Blocks of other sizes are counted thread by
 * thread in `threads` (key t), so the counts stay exact whatever the launch shape; the host
 * adds all three.  Blocks whose node falls past the end of `blocks` (thread ids from 2^26)
 * count in its last slot, which is no node: the host gives it to the last group, where `edges`
 * puts blocks past its end; threads counted one by one past 2^20 share the last slot of
 * `threads` (the report says so). */
#include "cubpf_helpers.h"

#define TH_GROUPS (1u << 21)  /* groups of 32 thread ids: ids 0 .. 2^26 - 1 */
#define TH_THREADS (1u << 20) /* threads counted one by one */
#define TH_NODES (2 * TH_GROUPS) /* tree nodes 0 .. 2 * TH_GROUPS - 2, a slot past the end */
/* bit w set for w = 1, 2, 4, 8, 16, 32: warps per block (at most 1024 threads) a power of two */
#define TH_POW2_WARPS 0x100010116ull

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_GROUPS + 1);
	__type(key, __u32);
	__type(value, __s64);
} edges SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_NODES);
	__type(key, __u32);
	__type(value, __u32);
} blocks SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_THREADS);
	__type(key, __u32);
	__type(value, __u64);
} threads SEC(".maps");

/* atomic: two launches of the kernel on two streams may run together */
static __always_inline void edge_add(__u32 g, __s64 v)
{
	__s64 *e = bpf_map_lookup_elem(&edges, &g);
	if (e)
		__sync_fetch_and_add(e, v);
}

/* Thread (0,0,0) of a block of `warps` whole warps counts the block once. */
static __always_inline int count_block(struct cubpf_kernel_ctx *ctx, __u64 warps)
{
	__u64 b = cubpf_block_linear(ctx); /* 64 bits: (2b + 1) * warps takes up to 38 */
	if ((TH_POW2_WARPS >> warps) & 1) {
		__u64 node = (2 * b + 1) * warps - 1;
		__u32 key = node < TH_NODES - 1 ? (__u32)node : TH_NODES - 1;
		__u32 *n = bpf_map_lookup_elem(&blocks, &key);
		if (n)
			__sync_fetch_and_add(n, 1);
		return 0;
	}
	__u64 first = b * warps, end = first + warps;
	edge_add(first < TH_GROUPS - 1 ? (__u32)first : TH_GROUPS - 1, 1);
	edge_add(end < TH_GROUPS ? (__u32)end : TH_GROUPS, -1);
	return 0;
}

/* A thread of a block that is not whole warps counts itself. */
static __always_inline int count_thread(struct cubpf_kernel_ctx *ctx, __u64 per_block)
{
	__u64 t = (__u64)cubpf_block_linear(ctx) * per_block + cubpf_thread_linear(ctx);
	__u32 id = t < TH_THREADS - 1 ? (__u32)t : TH_THREADS - 1;
	__u64 *n = bpf_map_lookup_elem(&threads, &id);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("kretprobe/*")
int threadhist(struct cubpf_kernel_ctx *ctx)
{
	/* ntid.x a multiple of 32 settles "whole warps" without the product (every thread asks) */
	if (ctx->ntid_x & 31) {
		__u64 per_block = (__u64)ctx->ntid_x * ctx->ntid_y * ctx->ntid_z;
		if (per_block & 31)
			return count_thread(ctx, per_block);
	}
	/* all but one thread per block stop here (a sum: clang zero-extends a u32 or, 2 more) */
	if ((__u64)ctx->tid_x + ctx->tid_y + ctx->tid_z)
		return 0;
	return count_block(ctx, ((__u64)ctx->ntid_x * ctx->ntid_y * ctx->ntid_z) >> 5);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
