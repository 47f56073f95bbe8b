/* host: probes on driver calls, run by the shim on the interpreter (tests/live). */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} calls SEC(".maps");

static __always_inline void add(__u32 key, __u64 v)
{
	__u64 *n = bpf_map_lookup_elem(&calls, &key);
	if (n)
		__sync_fetch_and_add(n, v);
}

SEC("uprobe/cuLaunchKernel")
int on_launch(struct cubpf_api_ctx *ctx)
{
	add(0, 1);          /* launches */
	add(1, ctx->args[1]); /* grid x, summed */
	return 0;
}

SEC("uretprobe/cuLaunchKernel")
int on_launch_return(struct cubpf_api_ctx *ctx)
{
	if (ctx->ret == 0)
		add(2, 1);  /* successful launches */
	return 0;
}

SEC("uretprobe/cuMemcpyHtoD")
int on_copy(struct cubpf_api_ctx *ctx)
{
	add(3, ctx->args[1]); /* bytes copied */
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
