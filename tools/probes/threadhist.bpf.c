/* threadhist: how many times each GPU thread ran the probed kernels (kernel exits per thread).
 * A thread's id is its linear id in the grid: block_linear * threads_per_block + thread_linear.
 *
 * Cost: every thread of a block that runs leaves it exactly once (a thread has no other way to
 * end; a trap ends the whole launch), so the exit of thread (0,0,0) stands for all of the
 * block's threads, and every other thread only tests its tid.  TH_AT_ENTRY
 * (threadhist_entry.bpf.c, what `cubpf run --sanitizer -t threadhist` loads) counts at the
 * entry instead, as every thread of a block starts: the Sanitizer backend then patches only
 * BLOCK_ENTER, whose trampoline is cheap (an empty patch 1.13x on vec_add 2^26, H200), not
 * BLOCK_EXIT (19.4x empty): 1.35x there against 18.9x.  On the PTX path the exit is cheaper
 * (1.048x against 1.081x at the entry, same card and kernel).  Blocks of 2^c warps (32, 64, ...
 * 1024 threads: nearly every launch) add 1 to one counter in `blocks`, in the region of their
 * size, where consecutive blocks have consecutive counters (block b of w warps covers the groups
 * of 32 thread ids b * w .. (b + 1) * w - 1).  Other whole-warp blocks mark their range in
 * `edges`, a difference array over groups: +1 at the block's first group, -1 just past its
 * last; blocks of other sizes mark theirs in `tedges`, a difference array over thread ids.  The
 * host expands all three into each thread's count.
 * Why: measured on an H100 (b_probe_lines.sh, b_tools.sh, vec_add 2^26 in blocks of 256
 * threads), one reduction per warp to distinct counters costs 1.32x, and the L2's atomic units,
 * not the memory traffic, are the cost (a plain store per warp: 1.05x); one per block 1.03x; a
 * difference array's two per block 1.11x.  With one per block, where the counters lie matters
 * more than thread 0's arithmetic: counter[b] 1.041x; regions 1.066-1.076x; a binary tree's
 * in-order numbers, every block's counter on a line of its own, 1.113x.  And what the other 255
 * threads do matters most: counter[b] behind a test of the block size before the tid test
 * (once needed to count odd-sized blocks thread by thread) 1.058x instead of 1.041x.  So only
 * thread 0 looks at the block size; the region start is a 6-bit field of TH_REGIONS at bit w,
 * one shift by the warp count (no log2: five compares made thread 0's path 130 PTX
 * instructions); the power-of-two test is a bit mask (BPF has no popcount, and clang may expand
 * w & (w - 1) == 0 into ~15 instructions); 1-D grids and blocks (nearly all) skip the
 * multiplications, others take the block index in 64 bits (no wrap in grids past 2^32 blocks).
 * Blocks past the end of their region (thread ids from 2^26) count in one slot of `blocks`
 * outside the regions, which the host gives to the last group, where `edges` puts blocks past
 * its end; `tedges` covers ids below 2^20, later ones share its last id (the report says so). */
#include "cubpf_helpers.h"

#define TH_GROUPS (1u << 21)  /* groups of 32 thread ids: ids 0 .. 2^26 - 1 */
#define TH_THREADS (1u << 20) /* thread ids covered by `tedges` */
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
	__uint(max_entries, TH_THREADS + 1);
	__type(key, __u32);
	__type(value, __s64);
} tedges SEC(".maps");

/* The block's linear index: in a 1-D grid (nearly every launch) ctaid.x itself; otherwise in
 * 64 bits, since a grid may hold more than 2^32 blocks. */
static __always_inline __u64 th_block(const struct cubpf_kernel_ctx *c)
{
	if ((c->nctaid_y | c->nctaid_z) == 1)
		return c->ctaid_x;
	return c->ctaid_x + c->nctaid_x * (c->ctaid_y + (__u64)c->nctaid_y * c->ctaid_z);
}

/* atomic: two launches of the kernel on two streams may run together */
static __always_inline void diff_add(void *map, __u32 at, __s64 v)
{
	__s64 *e = bpf_map_lookup_elem(map, &at);
	if (e)
		__sync_fetch_and_add(e, v);
}

/* +1 on units first .. end - 1 of a difference array of `size` units (+ the slot past them):
 * units from size - 1 on share the last one. */
static __always_inline void diff_range(void *map, __u64 first, __u64 end, __u32 size)
{
	diff_add(map, first < size - 1 ? (__u32)first : size - 1, 1);
	diff_add(map, end < size ? (__u32)end : size, -1);
}

/* A block of `warps` whole warps: a region counter, or its groups in `edges`. */
static __always_inline void count_warps(__u64 b, __u64 warps)
{
	if ((TH_POW2_WARPS >> warps) & 1) {
		/* the region holds TH_GROUPS / warps blocks: b fits if its groups do */
		__u32 key = b * warps < TH_GROUPS ? (((TH_REGIONS >> warps) & 63) << TH_UNIT) + b
						 : TH_PAST;
		__u32 *n = bpf_map_lookup_elem(&blocks, &key);
		if (n)
			__sync_fetch_and_add(n, 1);
		return;
	}
	diff_range(&edges, b * warps, (b + 1) * warps, TH_GROUPS);
}

#ifdef TH_AT_ENTRY
SEC("kprobe/*")
#else
SEC("kretprobe/*")
#endif
int threadhist(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x | ctx->tid_y | ctx->tid_z) /* all but one thread per block stop here */
		return 0;
	__u64 per_block = ctx->ntid_x, b = th_block(ctx);
	if ((ctx->ntid_y | ctx->ntid_z) != 1)
		per_block *= (__u64)ctx->ntid_y * ctx->ntid_z;
	if (per_block & 31)
		diff_range(&tedges, b * per_block, (b + 1) * per_block, TH_THREADS);
	else
		count_warps(b, per_block >> 5);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
