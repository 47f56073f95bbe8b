/* Thread block probes on vec_add only: vec_scale, in the same module, must stay byte for byte
 * as it was (issue 32). */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} blocks SEC(".maps");

static __attribute__((always_inline)) void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&blocks, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("blockprobe/vec_add")
int begin(struct cubpf_block_ctx *ctx)
{
	add(0, ctx->sm_id + 1);
	return 0;
}

SEC("blockretprobe/vec_add")
int end(struct cubpf_block_ctx *ctx)
{
	add(1, ctx->end); /* the constant 1 here */
	return 0;
}
