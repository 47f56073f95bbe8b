/* A memory probe that adds to a counter and reads another of the same map: its adds must stay
 * reductions made at the site (a deferred add would hide from the read). */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

SEC("memprobe/*")
int on_mem(struct cubpf_mem_ctx *ctx)
{
	__u32 k0 = 0, k1 = 1;
	__u64 *a = bpf_map_lookup_elem(&counts, &k0), *b = bpf_map_lookup_elem(&counts, &k1);
	if (!a || !b)
		return 0;
	__sync_fetch_and_add(a, ctx->size);
	return *b > 5;
}
