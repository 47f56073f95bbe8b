/* Basic block entries counted at kernel exit (bbretprobe, issue 32): counts[b] is the sum of
 * the entries of block b (b < 16) over the threads, added by the lowest lane of the lanes
 * leaving together; counts[16] the instructions they issued (entries x ctx->insn_count). */
#include "probe.h"

static __u64 (*bpf_is_warp_leader)(void) = (void *)CUBPF_FN_is_warp_leader;
static __u64 (*bpf_warp_sum)(__u64 v) = (void *)CUBPF_FN_warp_sum;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 17);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

SEC("bbretprobe/*")
int at_exit(struct cubpf_bb_ctx *ctx)
{
	__u64 n = bpf_warp_sum(ctx->entries);
	if (!bpf_is_warp_leader())
		return 0;
	__u32 b = ctx->block_id < 16 ? ctx->block_id : 16, k = 16;
	__u64 *p = bpf_map_lookup_elem(&counts, &b);
	if (p && b < 16)
		__sync_fetch_and_add(p, n);
	p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		__sync_fetch_and_add(p, n * ctx->insn_count);
	return 0;
}
