/* micro_block_red8 (tests/bench/b_probe_lines.sh): thread 0 of each block adds to its SM's 8-byte copy (4 SMs per 32-byte sector, 16 per line). */
#include "cubpf_helpers.h"
struct { __uint(type, CUBPF_MAP_PERCPU_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, __u64); } m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x | ctx->tid_y | ctx->tid_z)
		return 0;
	__u32 k = 1;
	__u64 *v = bpf_map_lookup_elem(&m, &k);
	if (v)
		__sync_fetch_and_add(v, ctx->ntid_x);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
