/* opcodehist: dynamic PTX instructions per kernel and opcode class (enum cubpf_op_class:
 * integer, fp32, fp64, fp16, special functions, logic, compare, move, global loads and stores,
 * shared, local, param/const, atomics, control, barriers, warp-level, tensor, async/texture).
 * A bbretprobe, as hotblocks: at kernel exit, once per basic block of the kernel, the lanes
 * leaving together sum how many times they entered the block (ctx->entries, counted by cubpf
 * in a register: one instruction per block entry) and their lowest lane adds, for each class the
 * block holds (constants there: the loop over the classes folds to the block's own few), the
 * sum times the block's count of that class.  Exact, counted per thread; the classes of a kernel
 * add up to instrcount's count by threads.
 *
 * Per SM (a per-SM map, each copy 160 bytes), OH_LANES records per kernel picked by the warp's
 * slot on its SM (as instrcount's IC_LANES); the reader sums the lanes and the SM copies.
 * Kernel ids from OH_KERNELS on are not counted (256 x 4 lanes x 256 SM slots x 160 B =
 * 40 MiB).
 *
 * Cost (issue 32): at kernel exit, per warp and basic block the thread entered, a warp sum
 * (redux.sync) and one red.global.add per opcode class the block holds (a few: 1 to 6 on
 * vec_add's 3 blocks, 11 in all).  Every warp of an SM used to add to the one record of its
 * kernel on its SM, and the L2 serialises updates to a line (~2 ns each on an H100): on a
 * memory-bound kernel whose warps live a few microseconds, 64 warps x 11 updates queued on
 * one line per SM cost more than the kernel (2.29x on vec_add).  The lanes spread an SM's
 * warps over OH_LANES records: a quarter of the queue per line. */
#include "cubpf_helpers.h"

#define OH_KERNELS 256
#define OH_LANES 4

struct ohstat {
	__u64 threads[CUBPF_OP_CLASSES]; /* instructions of each class, once per thread */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, OH_KERNELS * OH_LANES);
	__type(key, __u32);
	__type(value, struct ohstat);
} ohstats SEC(".maps");

SEC("bbretprobe/*")
int opcodehist(struct cubpf_bb_ctx *ctx)
{
	__u64 n = bpf_warp_sum(ctx->entries);
	if (!n || !bpf_is_warp_leader()) /* n: the same in every lane */
		return 0;
	__u32 id = ctx->kernel_id;
	if (id >= OH_KERNELS)
		return 0;
	__u32 k = id * OH_LANES + (__u32)(bpf_get_warp_id() & (OH_LANES - 1));
	struct ohstat *s = bpf_map_lookup_elem(&ohstats, &k);
	if (!s)
		return 0;
#pragma unroll
	for (__u32 c = 0; c < CUBPF_OP_CLASSES; c++) {
		__u64 m = ctx->op_class[c];
		if (m)
			__sync_fetch_and_add(&s->threads[c], m * n);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
