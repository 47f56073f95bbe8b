/* Barriers and fences (syncprobe, issue 32), counted so that a test knows the answer:
 *   counts[2*kind]     threads before a barrier or fence of that kind (enum cubpf_sync_kind),
 *   counts[2*kind + 1] threads after it,
 *   counts[32 + kind]  the sum of the barrier ids seen before (ids the instruction names),
 *   counts[48]         threads after a barrier whose clock went backwards (0),
 *   counts[49]         threads after a barrier whose ctx->before_ns is not a time between
 *                      their own before probe's and their after probe's (0). */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_PERTHREAD_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} before_ns SEC(".maps");

static __attribute__((always_inline)) void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("syncprobe/*")
int on_sync(struct cubpf_sync_ctx *ctx)
{
	__u32 k = ctx->kind * 2 + ctx->after, zero = 0;
	if (ctx->kind > 15)
		return 0;
	add(k, 1);
	__u64 *t = bpf_map_lookup_elem(&before_ns, &zero);
	if (!ctx->after) {
		if (ctx->id != CUBPF_SYNC_ID_NONE)
			add(32 + ctx->kind, ctx->id);
		if (t)
			*t = ctx->time_ns;
	} else if (t) {
		if (ctx->time_ns < *t)
			add(48, 1);
		if (ctx->before_ns < *t || ctx->before_ns > ctx->time_ns)
			add(49, 1);
	}
	return 0;
}
