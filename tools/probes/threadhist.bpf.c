/* threadhist: how many times each GPU thread ran the probed kernels (kernel exits per thread).
 * A thread's id is its linear id in the grid: block_linear * threads_per_block + thread_linear.
 *
 * Cost: every thread of a block that runs leaves it exactly once (a thread has no other way to
 * end; a trap ends the whole launch), so in a block of a multiple of 32 threads (the common
 * case) the exit of thread (0,0,0) stands for all of the block's threads.  Blocks of 2^c warps
 * (32, 64, ... 1024 threads: nearly every launch) add 1 to their own counter in `blocks`, in the
 * region of their size (block b of class c covers groups b * 2^c .. (b + 1) * 2^c - 1 of 32
 * thread ids); other whole-warp blocks mark their range in `edges`, a difference array: +1 at
 * the block's first group, -1 just past its last.  The host expands both into each group's
 * count.  Why: measured on an H100 (b_probe_lines.sh, b_tools.sh), one reduction per warp to
 * distinct counters costs vec_add 2^26 1.32x, and the L2's atomic units, not the memory
 * traffic, are the cost (a plain store per warp: 1.05x); one per block 1.03x; the difference
 * array's two per block (the second on the next block's first slot) 1.11x.  Blocks of other
 * sizes are counted thread by thread in `threads` (key t), so the counts stay exact whatever the
 * launch shape; the host adds all three.  Blocks past the end of their region and groups past
 * the end of `edges` (thread ids from 2^26) share the last slot, threads counted one by one past
 * 2^20 the last slot of `threads` (the report says so). */
#include "cubpf_helpers.h"

#define TH_GROUPS (1u << 21)  /* groups of 32 thread ids: ids 0 .. 2^26 - 1 */
#define TH_THREADS (1u << 20) /* threads counted one by one */
#define TH_CLASSES 6          /* blocks of 2^c warps, c = 0 .. 5 */
/* where class c's region starts: the classes before it hold TH_GROUPS >> c' blocks each */
#define TH_BLOCKS_AT(c) (2 * TH_GROUPS - ((2 * TH_GROUPS) >> (c)))

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_GROUPS + 1);
	__type(key, __u32);
	__type(value, __s64);
} edges SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_BLOCKS_AT(TH_CLASSES));
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

SEC("kretprobe/*")
int threadhist(struct cubpf_kernel_ctx *ctx)
{
	__u32 per_block = ctx->ntid_x * ctx->ntid_y * ctx->ntid_z;
	if ((per_block & 31) == 0) {
		if (ctx->tid_x | ctx->tid_y | ctx->tid_z) /* all but one thread per block stop here */
			return 0;
		__u32 warps = per_block / 32;
		if ((warps & (warps - 1)) == 0) {
			__u32 c = (warps >= 2) + (warps >= 4) + (warps >= 8) + (warps >= 16) +
				  (warps >= 32);
			__u64 b = cubpf_block_linear(ctx), room = TH_GROUPS >> c;
			__u32 key = TH_BLOCKS_AT(c) + (__u32)(b < room ? b : room - 1);
			__u32 *n = bpf_map_lookup_elem(&blocks, &key);
			if (n)
				__sync_fetch_and_add(n, 1);
			return 0;
		}
		__u64 first = (__u64)cubpf_block_linear(ctx) * (per_block / 32);
		__u64 end = first + per_block / 32;
		edge_add(first < TH_GROUPS - 1 ? (__u32)first : TH_GROUPS - 1, 1);
		edge_add(end < TH_GROUPS ? (__u32)end : TH_GROUPS, -1);
		return 0;
	}
	__u64 t = (__u64)cubpf_block_linear(ctx) * per_block + cubpf_thread_linear(ctx);
	__u32 id = t < TH_THREADS - 1 ? (__u32)t : TH_THREADS - 1;
	__u64 *n = bpf_map_lookup_elem(&threads, &id);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
