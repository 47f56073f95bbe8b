/* A memory probe that names its own site (issue 32): counts[0] += ptx_line << 32 | src_line,
 * counts[1] += src_file, constants where the probe sits (so the code holds them as literals). */
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
	__u32 k = 0;
	__u64 *p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		*p += (__u64)ctx->ptx_line << 32 | ctx->src_line;
	k = 1;
	p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		*p += ctx->src_file;
	return 0;
}

SEC("syncprobe/*")
int on_sync(struct cubpf_sync_ctx *ctx)
{
	__u32 k = 0;
	__u64 *p = bpf_map_lookup_elem(&counts, &k);
	if (p && ctx->after)
		*p += (__u64)ctx->ptx_line << 32 | ctx->src_line;
	return 0;
}
