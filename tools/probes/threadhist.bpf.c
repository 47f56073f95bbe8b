/* threadhist: how many times each GPU thread ran the probed kernels.  Key = the thread's linear
 * id in the grid (block_linear * threads_per_block + thread_linear); ids past the map's end are
 * counted in the last slot (the report says so).  A plain device array: it works with today's
 * device code; the per-thread array (CUBPF_MAP_PERTHREAD_ARRAY) would drop the atomic. */
#include "cubpf_helpers.h"

#define THREADHIST_SLOTS (1u << 20)

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, THREADHIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} executions SEC(".maps");

SEC("kretprobe/*")
int threadhist(struct cubpf_kernel_ctx *ctx)
{
	__u32 per_block = ctx->ntid_x * ctx->ntid_y * ctx->ntid_z;
	__u32 id = cubpf_block_linear(ctx) * per_block + cubpf_thread_linear(ctx);
	if (id >= THREADHIST_SLOTS - 1)
		id = THREADHIST_SLOTS - 1;
	__u64 *n = bpf_map_lookup_elem(&executions, &id);
	if (n) /* atomic: two launches of the kernel on two streams may run together */
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
