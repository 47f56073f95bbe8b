/* launchlate: the GPU start of every launch (thread 0 of block 0 entering, %globaltimer), kept
 * per kernel id in launch order.  cubpf run joins them with the host launch times of the trace's
 * KERNEL records (the shim's clock at the cuLaunchKernel call) by launch order per kernel, and
 * converts GPU time to host time with the CLOCK records.
 * Cost: almost every other thread pays one OR (tid.x | ctaid.x, which the kernel reads anyway)
 * and a branch (no multiplication, no grid or block size read); one thread per launch touches
 * memory. */
#include "cubpf_helpers.h"

#define LL_KERNELS 256  /* kernel ids kept (ids past it: counted in `lost`) */
#define LL_LAUNCHES 1024 /* launches kept per kernel id */

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, LL_KERNELS);
	__type(key, __u32);
	__type(value, __u64);
} launches SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, LL_KERNELS * LL_LAUNCHES);
	__type(key, __u32);
	__type(value, __u64);
} starts SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

SEC("kprobe/*")
int launchlate_start(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x | ctx->ctaid_x) /* what the kernel reads anyway: most threads stop here */
		return 0;
	if (ctx->tid_y | ctx->tid_z | ctx->ctaid_y | ctx->ctaid_z)
		return 0;
	__u64 now = bpf_get_globaltimer();
	__u32 id = ctx->kernel_id, zero = 0;
	__u64 *n = id < LL_KERNELS ? bpf_map_lookup_elem(&launches, &id) : 0;
	__u64 i = n ? __sync_fetch_and_add(n, 1) : LL_LAUNCHES;
	if (i >= LL_LAUNCHES) {
		__u64 *l = bpf_map_lookup_elem(&lost, &zero);
		if (l)
			__sync_fetch_and_add(l, 1);
		return 0;
	}
	__u32 slot = id * LL_LAUNCHES + (__u32)i;
	__u64 *s = bpf_map_lookup_elem(&starts, &slot);
	if (s)
		*s = now;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
