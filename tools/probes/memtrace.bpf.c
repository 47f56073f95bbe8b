/* memtrace: per kernel, bytes and accesses per memory space and operation, and a histogram of
 * access sizes.  Keys are (kernel id % MT_KERNELS) * slots + slot; cubpf run names the kernels.
 * Plain device arrays with atomics (works today); per-SM arrays would remove the contention. */
#include "cubpf_helpers.h"

#define MT_KERNELS 64
#define MT_SPACES 8
#define MT_OPS 8
#define MT_SIZES 16

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, MT_KERNELS * MT_SPACES * MT_OPS);
	__type(key, __u32);
	__type(value, __u64);
} bytes SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, MT_KERNELS * MT_SPACES * MT_OPS);
	__type(key, __u32);
	__type(value, __u64);
} accesses SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, MT_KERNELS * MT_SIZES);
	__type(key, __u32);
	__type(value, __u64);
} size_log2 SEC(".maps");

SEC("memprobe/*")
int memtrace(struct cubpf_mem_ctx *ctx)
{
	__u32 size = ctx->size;
	__u32 k = ctx->kernel_id & (MT_KERNELS - 1);
	__u32 key = k * (MT_SPACES * MT_OPS) + (ctx->space & (MT_SPACES - 1)) * MT_OPS +
		    (ctx->op & (MT_OPS - 1));
	__u64 *b = bpf_map_lookup_elem(&bytes, &key);
	if (b)
		__sync_fetch_and_add(b, size);
	__u64 *a = bpf_map_lookup_elem(&accesses, &key);
	if (a)
		__sync_fetch_and_add(a, 1);
	__u32 slot = k * MT_SIZES + (cubpf_log2(size) & (MT_SIZES - 1));
	__u64 *n = bpf_map_lookup_elem(&size_log2, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
