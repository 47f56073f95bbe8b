/* Fixture for `cubpf trace replay`: host programs over recorded API calls.  Counts the calls of
 * cuLaunchKernel*, sums their first argument and the result codes of every call, and sends one
 * ring-buffer record per failing call. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_RINGBUF);
	__uint(max_entries, 4096);
} failures SEC(".maps");

static __always_inline void add(__u32 slot, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&stats, &slot);
	if (p)
		*p += v;
}

SEC("uprobe/cuLaunchKernel*")
int on_launch(struct cubpf_api_ctx *ctx)
{
	add(0, 1);
	add(1, ctx->args[0]);
	return 0;
}

SEC("uretprobe/*")
int on_return(struct cubpf_api_ctx *ctx)
{
	add(2, ctx->ret);
	if (ctx->ret != 0) {
		__u64 rec[2] = {ctx->ret, ctx->tid};
		bpf_ringbuf_output(&failures, rec, sizeof(rec), 0);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
