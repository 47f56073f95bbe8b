/* micro_warp_red8 (tests/bench/b_probe_lines.sh): every warp's leader adds its lane count to its SM's 8-byte copy (16 SMs per line). */
#include "cubpf_helpers.h"
struct { __uint(type, CUBPF_MAP_PERCPU_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, __u64); } m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	__u64 n = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 k = 1;
	__u64 *v = bpf_map_lookup_elem(&m, &k);
	if (v)
		__sync_fetch_and_add(v, n);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
