/* Adds kept in registers (CUBPF_F_DEFER_ADD, issue 32), checked against the answer that
 * bb.bpf.c's immediate adds give (tests/ptx/ptxsim_instr.py):
 *   counts[0]        instructions issued by threads, one record for every block: each thread
 *                    keeps adding to one address (a register add, no memory until it leaves),
 *   counts[1], [2]   the same split by the block's parity: blocks of both parities follow one
 *                    another, so the thread's slot changes address (adds its sum to the old
 *                    one, starts over) as it goes; counts[1] + counts[2] = counts[0]. */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, CUBPF_F_DEFER_ADD);
	__uint(max_entries, 4);
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
	add(1 + (ctx->block_id & 1), ctx->insn_count);
	return 0;
}
