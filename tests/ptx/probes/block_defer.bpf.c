/* A block end and deferred counters in one kernel (issue 32): where the module has room for
 * both, each keeps its state in the kernel's shared memory (the block's 16 bytes, the
 * counters' sums); the room is counted for the two together (ptx-rewriter/inject.c,
 * do_kernel).  accesses[0]: the kernel's memory accesses (adds kept in registers on a loop);
 * durations[0]: the sum of its blocks' durations. */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} accesses SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} durations SEC(".maps");

SEC("memprobe/*")
int on_access(struct cubpf_mem_ctx *ctx)
{
	(void)ctx;
	__u32 k = 0;
	__u64 *p = bpf_map_lookup_elem(&accesses, &k);
	if (p)
		__sync_fetch_and_add(p, 1);
	return 0;
}

SEC("blockretprobe/*")
int on_block_end(struct cubpf_block_ctx *ctx)
{
	__u32 k = 0;
	__u64 *p = bpf_map_lookup_elem(&durations, &k);
	if (p)
		__sync_fetch_and_add(p, ctx->time_ns - ctx->begin_ns);
	return 0;
}
