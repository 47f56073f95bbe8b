/* Basic block entries (bbprobe, issue 32), counted so that a test knows the answer:
 *   counts[0]        instructions issued by threads (ctx->insn_count per block entry, a
 *                    constant add: warp-aggregated on sm_70+),
 *   counts[1]        instructions issued by warps (the lowest lane of the lanes entering),
 *   counts[2]        block entries by threads,
 *   counts[3]        the sum of every constant field (block id, PTX and source lines, the
 *                    opcode classes), so that each is read at least once,
 *   counts[4 + c]    instructions of opcode class c issued by threads (c < CUBPF_OP_CLASSES),
 *   counts[32 + k]   entries of block k (k < 32) by threads. */
#include "probe.h"

static __u64 (*bpf_is_warp_leader)(void) = (void *)CUBPF_FN_is_warp_leader;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __attribute__((always_inline)) void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("bbprobe/*")
int on_block(struct cubpf_bb_ctx *ctx)
{
	add(0, ctx->insn_count);
	if (bpf_is_warp_leader())
		add(1, ctx->insn_count);
	add(2, 1);
	add(3, ctx->block_id + ctx->ptx_line + ctx->src_file + ctx->src_line + ctx->kernel_id +
	       ctx->tid_x + ctx->ctaid_x + ctx->sm_id);
#pragma unroll
	for (__u32 c = 0; c < CUBPF_OP_CLASSES; c++)
		if (ctx->op_class[c])
			add(4 + c, ctx->op_class[c]);
	if (ctx->block_id < 32)
		add(32 + ctx->block_id, 1);
	return 0;
}
