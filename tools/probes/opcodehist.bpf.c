/* opcodehist: dynamic PTX instructions per kernel and opcode class (enum cubpf_op_class:
 * integer, fp32, fp64, fp16, special functions, logic, compare, move, global loads and stores,
 * shared, local, param/const, atomics, control, barriers, warp-level, tensor, async/texture).
 * At the entry of every basic block (bbprobe), the lowest lane of the lanes entering together
 * adds, for each class the block holds (constants where the probe sits: the loop over the
 * classes folds to the block's own few), its count times the lanes to `threads[class]` and its
 * count to `warps[class]`.  Exact, like instrcount, whose totals the classes sum to; a few more
 * reductions per warp and block than instrcount (one pair per class present).
 *
 * Per SM (a per-SM map, each copy 320 bytes); kernel ids from OH_KERNELS on are not counted
 * (256 x 256 SM slots x 320 B = 20 MiB). */
#include "cubpf_helpers.h"

#define OH_KERNELS 256

struct ohstat {
	__u64 threads[CUBPF_OP_CLASSES]; /* instructions of each class, once per thread */
	__u64 warps[CUBPF_OP_CLASSES];   /* and once per warp */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, OH_KERNELS);
	__type(key, __u32);
	__type(value, struct ohstat);
} ohstats SEC(".maps");

SEC("bbprobe/*")
int opcodehist(struct cubpf_bb_ctx *ctx)
{
	__u64 n = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 id = ctx->kernel_id;
	if (id >= OH_KERNELS)
		return 0;
	struct ohstat *s = bpf_map_lookup_elem(&ohstats, &id);
	if (!s)
		return 0;
	__u64 one = n != 0; /* a run-time 1: see instrcount.bpf.c */
#pragma unroll
	for (__u32 c = 0; c < CUBPF_OP_CLASSES; c++) {
		__u64 k = ctx->op_class[c];
		if (!k)
			continue;
		__sync_fetch_and_add(&s->threads[c], k * n);
		__sync_fetch_and_add(&s->warps[c], k * one);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
