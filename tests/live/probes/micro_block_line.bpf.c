/* micro_block_line (tests/bench/b_probe_lines.sh): thread 0 of each block adds and stores into its SM's own 128-byte line (kcount's pattern). */
#include "cubpf_helpers.h"
struct v { __u64 n[16]; };
struct { __uint(type, CUBPF_MAP_PERCPU_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, struct v); } m SEC(".maps");
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x | ctx->tid_y | ctx->tid_z)
		return 0;
	__u32 k = 1;
	struct v *v = bpf_map_lookup_elem(&m, &k);
	if (!v)
		return 0;
	__sync_fetch_and_add(&v->n[0], ctx->ntid_x);
	v->n[1] = bpf_get_globaltimer();
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
