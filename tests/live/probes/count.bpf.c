/* count: kernel entries and exits per kernel (indexed by cubpf's kernel id), and entries per
 * thread of the kernels named live_vecadd* (indexed by the global linear thread id of a 1-D
 * launch).  The live tests (CPU, tests/live; GPU, tests/gpu/t_live_count.sh) check the counts
 * against the thread counts the programs are built to have. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} entries SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} exits SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 1 << 20);
	__type(key, __u32);
	__type(value, __u64);
} per_thread SEC(".maps");

SEC("kprobe/live_*")
int count_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 id = ctx->kernel_id;
	__u64 *n = bpf_map_lookup_elem(&entries, &id);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("kretprobe/live_*")
int count_exit(struct cubpf_kernel_ctx *ctx)
{
	__u32 id = ctx->kernel_id;
	__u64 *n = bpf_map_lookup_elem(&exits, &id);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("kprobe/live_vecadd*")
int count_thread(struct cubpf_kernel_ctx *ctx)
{
	__u32 t = ctx->ctaid_x * ctx->ntid_x + ctx->tid_x;
	__u64 *n = bpf_map_lookup_elem(&per_thread, &t);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
