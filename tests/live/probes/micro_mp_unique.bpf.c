/* micro_mp_unique (tests/bench/b_probe_lines.sh): memtrace's per-access warp work without its
 * map update: active lanes, distinct 32-byte sectors (match.any), leader test. */
#include "cubpf_helpers.h"
struct { __uint(type, CUBPF_MAP_GPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } m SEC(".maps");
SEC("memprobe/*bench_vecadd*")
int p(struct cubpf_mem_ctx *ctx)
{
	__u64 lanes = bpf_get_active_count();
	__u64 secs = bpf_warp_count_unique(ctx->addr >> 5);
	if (!bpf_is_warp_leader())
		return 0;
	if (secs * 32 == lanes * 3 + 1) { /* never true: keeps the values alive */
		__u32 k = 0;
		__u64 *v = bpf_map_lookup_elem(&m, &k);
		if (v)
			*v = secs;
	}
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
