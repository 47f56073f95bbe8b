/* micro_warp_store (tests/bench/b_probe_lines.sh): as micro_warp_distinct, but a plain store instead
 * of a reduction: what the memory traffic alone costs. */
#include "cubpf_helpers.h"
struct { __uint(type, CUBPF_MAP_GPU_ARRAY); __uint(max_entries, 1 << 21); __type(key, __u32); __type(value, __u64); } m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	__u64 n = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 k = ((ctx->ctaid_x * ctx->ntid_x + ctx->tid_x) >> 5) & ((1 << 21) - 1);
	__u64 *v = bpf_map_lookup_elem(&m, &k);
	if (v)
		*v = n;
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
