/* micro_warp_line (tests/bench/b_probe_lines.sh): every warp's leader adds to its SM's own 128-byte line (memtrace's pattern, one counter). */
#include "cubpf_helpers.h"
struct v { __u64 n[16]; };
struct { __uint(type, CUBPF_MAP_PERCPU_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, struct v); } m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	__u64 n = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 k = 1;
	struct v *v = bpf_map_lookup_elem(&m, &k);
	if (v)
		__sync_fetch_and_add(&v->n[0], n);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
