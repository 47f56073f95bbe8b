/* micro_mp_red (tests/bench/b_probe_lines.sh): memtrace's per-access update without the sector
 * count: the warp leader adds the active lanes to its SM's own line, before every access. */
#include "cubpf_helpers.h"
struct v { __u64 n[16]; };
struct { __uint(type, CUBPF_MAP_PERCPU_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, struct v); } m SEC(".maps");
SEC("memprobe/*bench_vecadd*")
int p(struct cubpf_mem_ctx *ctx)
{
	__u64 lanes = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 k = ctx->space & 3;
	struct v *v = bpf_map_lookup_elem(&m, &k);
	if (v)
		__sync_fetch_and_add(&v->n[0], lanes);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
