/* Thread block begins and ends (issue 32), with what the GPU test knows in advance:
 * counts[0] blocks begun, counts[1] blocks ended, counts[2] the sum of their linear block
 * indices plus one at begin, counts[3] the same at end (both n(n+1)/2 for a grid of n blocks),
 * counts[4] blocks whose end came before their begin (0), counts[5] begin reads of ctx->end
 * (0: it is the constant 0 there), counts[6] ends whose ctx->begin_ns is 0 or after their
 * time_ns, or more than 1 s before it (0).  Per block, begin and end times in times[2*b], times[2*b+1]
 * (the first 4096 blocks), and the end's ctx->begin_ns in begins[b] (tests/ptx/ptxsim_blocks.py
 * checks it is the time the block began). */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} times SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} begins SEC(".maps");

static __attribute__((always_inline)) void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

static __attribute__((always_inline)) __u32 linear(const struct cubpf_block_ctx *ctx)
{
	return ctx->ctaid_x + ctx->nctaid_x * (ctx->ctaid_y + ctx->nctaid_y * ctx->ctaid_z);
}

SEC("blockprobe/*")
int on_block_begin(struct cubpf_block_ctx *ctx)
{
	__u32 b = linear(ctx);
	add(0, 1);
	add(2, (__u64)b + 1);
	if (ctx->end)
		add(5, 1);
	__u32 k = 2 * b;
	__u64 t = ctx->time_ns;
	if (k < 8192)
		bpf_map_update_elem(&times, &k, &t, 0);
	return 0;
}

SEC("blockretprobe/*")
int on_block_end(struct cubpf_block_ctx *ctx)
{
	__u32 b = linear(ctx);
	add(1, 1);
	add(3, (__u64)b + 1);
	if (ctx->begin_ns == 0 || ctx->begin_ns > ctx->time_ns ||
	    ctx->time_ns - ctx->begin_ns > 1000000000ull)
		add(6, 1);
	__u32 k = 2 * b;
	if (k < 8192) {
		__u64 *begin = bpf_map_lookup_elem(&times, &k);
		if (begin && *begin > ctx->time_ns)
			add(4, 1);
		k++;
		__u64 t = ctx->time_ns;
		bpf_map_update_elem(&times, &k, &t, 0);
		__u64 b0 = ctx->begin_ns;
		bpf_map_update_elem(&begins, &b, &b0, 0);
	}
	return 0;
}
