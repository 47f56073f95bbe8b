/* kinds: one map of each device kind beyond arrays (per-SM, per-thread, hash), for the shim's
 * allocation, binding and read-back tests (tests/live/test_live.c writes their memory). */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} per_sm SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_PERTHREAD_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} per_thread SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_HASH);
	__uint(max_entries, 8);
	__type(key, __u64);
	__type(value, __u64);
} by_key SEC(".maps");

SEC("kprobe/live_*")
int kinds_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 1;
	__u64 key = ctx->ctaid_x, one = 1;
	__u64 *n = bpf_map_lookup_elem(&per_sm, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	n = bpf_map_lookup_elem(&per_thread, &k);
	if (n)
		*n += 1;
	bpf_map_update_elem(&by_key, &key, &one, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
