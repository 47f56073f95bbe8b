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
 * Per SM (a per-SM map, each copy 160 bytes), one record per kernel; the reader sums the SM
 * copies.  Kernel ids from OH_KERNELS on are not counted (256 x 256 SM slots x 160 B =
 * 10 MiB).  The record's place is the same for every thread of a thread block, so where the
 * kernel has room for a few bytes of shared memory cubpf adds the warps' products to the
 * block's sums (one per class) and the block's last warp to leave makes the reductions
 * (ptx-rewriter/accs.c).
 *
 * Cost (issue 32): at kernel exit, per warp and basic block the thread entered, a warp sum
 * (redux.sync) and one shared-memory add per opcode class the block holds (a few: 1 to 6 on
 * vec_add's 3 blocks, 11 in all); per thread block, a barrier where it starts and one
 * red.global.add per class its threads ran, by its last warp.  Every warp of an SM used to add
 * to the one record of its kernel on its SM, and the L2 serialises updates to a line (~2 ns
 * each on an H100): on a memory-bound kernel whose warps live a few microseconds, 64 warps x
 * 11 updates queued on one line per SM cost more than the kernel (2.29x on vec_add); OH_LANES
 * = 4 records per kernel picked by the warp's slot on its SM cut the queue by 4 (2.03x).  A
 * kernel with dynamic shared memory (or CUBPF_SHARED_SUMS=0) still reduces per warp, now to
 * one line per SM. */
#include "cubpf_helpers.h"

#define OH_KERNELS 256

struct ohstat {
	__u64 threads[CUBPF_OP_CLASSES]; /* instructions of each class, once per thread */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, OH_KERNELS);
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
	struct ohstat *s = bpf_map_lookup_elem(&ohstats, &id);
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
