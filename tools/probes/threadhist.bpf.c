/* threadhist: how many times each GPU thread ran the probed kernels (kernel exits per thread).
 * A thread's id is its linear id in the grid: block_linear * threads_per_block + thread_linear.
 *
 * Cost: a warp whose 32 lanes leave together, in a block of a multiple of 32 threads (the
 * common case), holds 32 consecutive thread ids t..t+31 with t % 32 == 0: its lowest lane adds
 * 1 to the counter of that group of 32 (`warps`, key t / 32), and the host credits each of the
 * 32 threads: one 8-byte reduction per warp instead of 32 atomics, 1/32 of the memory traffic.
 * Any other exit (lanes leaving apart, blocks of other sizes) is counted thread by thread in
 * `threads` (key t), so the counts stay exact whatever the kernel does; the host adds both.
 * Groups past the end of `warps` (thread ids from 2^26) share its last slot, threads counted
 * one by one past 2^20 the last slot of `threads` (the report says so).
 * Not a per-thread map (CUBPF_MAP_PERTHREAD_ARRAY): it needs no atomic, but every thread would
 * read and write its own 8 bytes, 1 GB of traffic per launch of 2^26 threads against vec_add's
 * own 768 MB; the groups cost 16 MB of reductions.  Not per-SM counters either: a warp leader
 * updating its SM's copy serialises in the L2 (2.8x on vec_add, tests/bench/b_probe_lines.sh);
 * distinct group counters spread over the whole L2. */
#include "cubpf_helpers.h"

#define TH_GROUPS (1u << 21)  /* groups of 32 thread ids: ids 0 .. 2^26 - 1 */
#define TH_THREADS (1u << 20) /* threads counted one by one */

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_GROUPS);
	__type(key, __u32);
	__type(value, __u64);
} warps SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, TH_THREADS);
	__type(key, __u32);
	__type(value, __u64);
} threads SEC(".maps");

SEC("kretprobe/*")
int threadhist(struct cubpf_kernel_ctx *ctx)
{
	__u32 per_block = ctx->ntid_x * ctx->ntid_y * ctx->ntid_z;
	if ((per_block & 31) == 0 && bpf_get_active_count() == 32) {
		if (!bpf_is_warp_leader()) /* 31 lanes of 32 stop here, before any arithmetic */
			return 0;
		__u64 t = (__u64)cubpf_block_linear(ctx) * per_block + cubpf_thread_linear(ctx);
		__u32 g = t / 32 < TH_GROUPS - 1 ? (__u32)(t / 32) : TH_GROUPS - 1;
		__u64 *n = bpf_map_lookup_elem(&warps, &g);
		if (n) /* atomic: two launches of the kernel on two streams may run together */
			__sync_fetch_and_add(n, 1);
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
