/* threadhist: how many times each GPU thread ran the probed kernels (kernel exits per thread).
 * A thread's id is its linear id in the grid: block_linear * threads_per_block + thread_linear.
 *
 * Cost: every thread of a block that runs leaves it exactly once (a thread has no other way to
 * end; a trap ends the whole launch), so in a block of a multiple of 32 threads (the common
 * case) the exit of thread (0,0,0) stands for all of the block's threads.  Blocks of 2^c warps
 * (32, 64, ... 1024 threads: nearly every launch) add 1 to one counter in `blocks`, in the
 * region of their size, where consecutive blocks have consecutive counters (block b of w warps
 * covers the groups of 32 thread ids b * w .. (b + 1) * w - 1).  Other whole-warp blocks mark
 * their range in `edges`, a difference array: +1 at the block's first group, -1 just past its
 * last.  The host expands both into each group's count.  Why: measured on an H100
 * (b_probe_lines.sh, b_tools.sh, vec_add 2^26 in blocks of 256 threads), one reduction per warp
 * to distinct counters costs 1.32x, and the L2's atomic units, not the memory traffic, are the
 * cost (a plain store per warp: 1.05x); one per block 1.03x; the difference array's two per
 * block (the second on the next block's first slot) 1.11x.  With one per block, where the
 * counters lie matters more than the arithmetic (micro_th_*, PTX instructions on thread 0's
 * path / the other threads'): regions, their start by a log2 in five compares (130 / 27),
 * 1.073x; block b's counter at its in-order number in a binary tree over the groups (84 / 19),
 * 16 slots apart for 8-warp blocks, 1.113x: every block's counter on a 128-byte line of its own
 * (u32 counters in 8-byte slots), 16 times the lines (spreading a warp's counters over lines
 * took 1.32x to 1.48x); thread 0 adding 1 to counter[b] (58 / 15) 1.048x.  So the regions stay,
 * and their start costs no log2: a 6-bit field of TH_REGIONS at bit w, one shift by the warp
 * count itself (88 / 19 here, where a table indexed by w % 11 takes a 64-bit rem and 93); the
 * power-of-two test is a bit mask (BPF has no popcount, and clang may expand w & (w - 1) == 0
 * into ~15 instructions); the block index is taken in 64 bits (no truncation to mask off, no
 * wrap in grids past 2^32 blocks: b * w wraps only past 2^59).  Every other thread of a block
 * with ntid.x a multiple of 32 (nearly every launch) tests only that and its tid.  Blocks of
 * other sizes are counted thread by thread in `threads` (key t), so the counts stay exact
 * whatever the launch shape; the host adds all three.  Blocks past the end of their region
 * (thread ids from 2^26) count in one slot of `blocks` outside the regions, which the host
 * gives to the last group, where `edges` puts blocks past its end; threads counted one by one
 * past 2^20 share the last slot of `threads` (the report says so). */
#include "cubpf_helpers.h"

#define TH_GROUPS (1u << 21)  /* groups of 32 thread ids: ids 0 .. 2^26 - 1 */
#define TH_THREADS (1u << 20) /* threads counted one by one */
/* bit w set for w = 1, 2, 4, 8, 16, 32: warps per block (at most 1024 threads) a power of two */
#define TH_POW2_WARPS 0x100010116ull
/* `blocks` is 64 units of 2^16 counters; the region of blocks of w warps (TH_GROUPS / w
 * counters) starts at unit (TH_REGIONS >> w) & 63.  Bits 6, 10, 11 and 17 make the fields
 * w = 1: 32, 2: 16, 4: 4, 8: 12, 16: 2, 32: 0 (the windows at w = 1, 2 and 4 overlap: bit 6 is
 * all three's), so units 0: 1024 threads, 2..3: 512, 4..11: 128, 12..15: 256, 16..31: 64,
 * 32..63: 32 threads, and unit 1 is free: its first counter takes the blocks past the end of
 * their region.  The overlaps rule out most orders: 16 fit in 64 units, none in 63, and not
 * the order by size that the five compares served (2^c warps at TH_GROUPS * (2 - 2^(1-c)), in
 * 2^22 - 2^16 counters). */
#define TH_REGIONS 0x20c40ull
#define TH_UNIT 16
#define TH_PAST (1u << TH_UNIT)
#define TH_BLOCKS (64u << TH_UNIT)

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_GROUPS + 1);
	__type(key, __u32);
	__type(value, __s64);
} edges SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_BLOCKS);
	__type(key, __u32);
	__type(value, __u32);
} blocks SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_THREADS);
	__type(key, __u32);
	__type(value, __u64);
} threads SEC(".maps");

/* cubpf_block_linear in 64 bits: a grid may hold more than 2^32 blocks, and clang would mask a
 * u32 result to widen it (two instructions). */
static __always_inline __u64 th_block(const struct cubpf_kernel_ctx *c)
{
	return c->ctaid_x + c->nctaid_x * (c->ctaid_y + (__u64)c->nctaid_y * c->ctaid_z);
}

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
	__u64 b = th_block(ctx);
	if ((TH_POW2_WARPS >> warps) & 1) {
		/* the region holds TH_GROUPS / warps blocks: b fits if its groups do */
		__u32 key = b * warps < TH_GROUPS ? (((TH_REGIONS >> warps) & 63) << TH_UNIT) + b
						 : TH_PAST;
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
	__u64 t = th_block(ctx) * per_block + cubpf_thread_linear(ctx);
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
