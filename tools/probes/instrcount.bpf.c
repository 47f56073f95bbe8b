/* instrcount: dynamic PTX instructions per kernel, by threads and by warps (issue 32; what
 * NVBit's instr_count counts, at PTX level).  A kretprobe reads ctx->insns and warp_insns,
 * which cubpf counts in registers of each thread of the kernels whose kretprobes read them: at
 * the entry of each basic block one instruction counts the thread's entry, and, for
 * warp_insns, three more count the entry of the one lane elected among the lanes entering
 * together; the read sums entries x instructions over the blocks.  At exit, the lanes leaving
 * together sum theirs (bpf_warp_sum: redux.sync) and their lowest lane adds the sums to its
 * SM's record: two reductions per warp and kernel, no memory touched while the kernel runs.
 * Instructions are PTX instructions (cubpf's own are not counted, nor those of the non-inlined
 * .funcs a kernel calls); a predicated-off one counts, as the warp issues it.
 *
 * IC_WARPS 0 (instrcount_threads.bpf.c) leaves the warp-level count out, and with it the
 * elected lane's test at each block entry: the cheapest exact count of a tight loop (one
 * instruction per iteration), for `cubpf run -p` and tests/bench/b_instr.sh.
 *
 * Per SM (a per-SM map, each copy a 128-byte line of its own, as kcount's), IC_LANES records
 * per kernel picked by the warp's slot on its SM, so that an SM's warps leaving together spread
 * over IC_LANES lines.  The reader sums the lanes and the SM copies.  Kernel ids from
 * IC_KERNELS on are not counted (256 x 4 lanes x 256 SM slots x 128 B = 32 MiB).
 *
 * Cost (issue 32): per basic block entry, 1 instruction per thread (threads) + 3 (activemask,
 * elect.sync, a predicated add: warps), no memory; per warp at exit, ALU to sum the blocks,
 * two warp sums and two red.global.add to one line of IC_LANES per SM.  Each warp sum was
 * three redux.sync (64-bit); since 2026-11-28 one, when every lane's count is below 2^27 (the
 * generator checks with a vote).  (Adding to the thread block's shared-memory sums instead,
 * one reduction per block, cost more on vec_add, 2.30x against 1.38x on the H200: the block's
 * entry barrier and the fences of its exit.)  On an issue-bound loop the 4 instructions per
 * block entry were the cost (b_instr.sh's compute loop has 7 of its own: 1.44x;
 * instrcount_threads 1.07x).  Since 2026-11-28 a loop of one block whose trip count the lanes
 * share (a parameter's, an induction's: ptx-rewriter/uniform.c) costs what instrcount_threads'
 * does, 1 instruction per iteration: the lanes entering it together run every iteration
 * together, so the lane elected where they enter marks itself once and its thread count is the
 * warp's.  nvcc's compute loop is two such loops (unrolled by 4 and the remainder): 1.105x on
 * the H200; other loops keep the 4 instructions per entry. */
#include "cubpf_helpers.h"

#ifndef IC_WARPS
#define IC_WARPS 1
#endif
#define IC_KERNELS 256
#define IC_LANES 4

struct icstat {
	__u64 threads;  /* instructions issued, counted once per thread */
	__u64 warps;    /* instructions issued, counted once per warp (warp-level executions) */
	__u64 pad[14];  /* 128 bytes: a cache line per SM copy */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, IC_KERNELS * IC_LANES);
	__type(key, __u32);
	__type(value, struct icstat);
} icstats SEC(".maps");

SEC("kretprobe/*")
int instrcount(struct cubpf_kernel_ctx *ctx)
{
	__u64 t = bpf_warp_sum(ctx->insns), w = IC_WARPS ? bpf_warp_sum(ctx->warp_insns) : 0;
	if (!bpf_is_warp_leader())
		return 0;
	__u32 id = ctx->kernel_id;
	if (id >= IC_KERNELS)
		return 0;
	__u32 k = id * IC_LANES + (__u32)(bpf_get_warp_id() & (IC_LANES - 1));
	struct icstat *s = bpf_map_lookup_elem(&icstats, &k);
	if (!s)
		return 0;
	__sync_fetch_and_add(&s->threads, t);
	if (IC_WARPS)
		__sync_fetch_and_add(&s->warps, w);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
