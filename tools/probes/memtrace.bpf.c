/* memtrace: bytes moved per memory space and operation, and a histogram of access sizes. */
#include "cubpf_helpers.h"

#define NSPACES 8
#define NOPS 8

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, NSPACES * NOPS);
	__type(key, __u32);
	__type(value, __u64);
} bytes SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} size_log2 SEC(".maps");

SEC("memprobe/*")
int memtrace(struct cubpf_mem_ctx *ctx)
{
	__u32 size = ctx->size;
	__u32 key = (ctx->space & (NSPACES - 1)) * NOPS + (ctx->op & (NOPS - 1));
	__u64 *b = bpf_map_lookup_elem(&bytes, &key);
	if (b)
		__sync_fetch_and_add(b, size);
	__u32 slot = cubpf_log2(size) & 15;
	__u64 *n = bpf_map_lookup_elem(&size_log2, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
