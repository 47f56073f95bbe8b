/* launchlate: launch latency, from the host's cuLaunchKernel call to the first GPU thread
 * entering the kernel, as a log2 histogram of nanoseconds.  The host side records the call's
 * time; the device side (thread 0 of block 0) subtracts it from %globaltimer.  Both clocks read
 * epoch nanoseconds; the shim's clock calibration corrects their offset. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} launch_ts SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} latency_log2 SEC(".maps");

SEC("uprobe/cuLaunchKernel")
int launch_call(struct cubpf_api_ctx *ctx)
{
	__u32 zero = 0;
	__u64 ts = ctx->ts_ns;
	bpf_map_update_elem(&launch_ts, &zero, &ts, BPF_ANY);
	return 0;
}

SEC("kprobe/*")
int first_entry(struct cubpf_kernel_ctx *ctx)
{
	if (cubpf_thread_linear(ctx) != 0 || cubpf_block_linear(ctx) != 0)
		return 0;
	__u32 zero = 0;
	__u64 *start = bpf_map_lookup_elem(&launch_ts, &zero);
	if (!start || *start == 0)
		return 0;
	__u64 now = bpf_get_globaltimer();
	__u64 delta = now > *start ? now - *start : 0;
	__u32 slot = cubpf_log2(delta);
	__u64 *count = bpf_map_lookup_elem(&latency_log2, &slot);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
