/* instrcount: dynamic PTX instructions per kernel, by threads and by warps (issue 32; what
 * NVBit's instr_count counts, at PTX level).  At the entry of every basic block (bbprobe) the
 * lowest lane of the lanes entering together adds, for all of them, the block's instruction
 * count (a constant where the probe sits) times their number to `threads`, and the count once
 * to `warps`: two fire-and-forget reductions per warp and block, nothing for the other lanes
 * but the leader test.  Instructions are PTX instructions (cubpf's own are not counted); a
 * predicated-off one counts, as the warp issues it.
 *
 * Cost: the records are per SM (a per-SM map, each copy a 128-byte line of its own, as
 * kcount's), and each kernel has IC_LANES of them, picked by the warp's slot on the SM, so that
 * the warps of one SM spread their updates over IC_LANES lines (the L2 serialises updates to
 * one line, ~2 ns each on an H100).  The reader sums the lanes and the SM copies.  Kernel ids
 * from IC_KERNELS on are not counted (256 x 4 lanes x 256 SM slots x 128 B = 32 MiB). */
#include "cubpf_helpers.h"

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

SEC("bbprobe/*")
int instrcount(struct cubpf_bb_ctx *ctx)
{
	__u64 n = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 id = ctx->kernel_id;
	if (id >= IC_KERNELS)
		return 0;
	__u32 k = id * IC_LANES + (__u32)(bpf_get_warp_id() & (IC_LANES - 1));
	struct icstat *s = bpf_map_lookup_elem(&icstats, &k);
	if (!s)
		return 0;
	__u64 c = ctx->insn_count;
	__sync_fetch_and_add(&s->threads, c * n);
	/* c * (n != 0): the leader's count, a run-time value, so that the code generator adds it
	 * as it is rather than warp-aggregating a constant (the leader is alone here) */
	__sync_fetch_and_add(&s->warps, c * (n != 0));
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
