/* shared: one array used by a host probe and a GPU probe of the same object (tests/live): the
 * shim gives both sides the same storage. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} both SEC(".maps");

/* host: count the launch (key 0) and copy what the kernels counted (key 1) plus 100 to key 2 */
SEC("uprobe/cuLaunchKernel")
int on_launch(struct cubpf_api_ctx *ctx)
{
	__u32 k0 = 0, k1 = 1, k2 = 2;
	__u64 *launches = bpf_map_lookup_elem(&both, &k0);
	__u64 *entries = bpf_map_lookup_elem(&both, &k1);
	__u64 *copy = bpf_map_lookup_elem(&both, &k2);
	if (!launches || !entries || !copy)
		return 0;
	*launches += 1;
	*copy = *entries + 100;
	return 0;
}

/* GPU: count the threads entering (key 1) */
SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 k1 = 1;
	__u64 *entries = bpf_map_lookup_elem(&both, &k1);
	if (entries)
		__sync_fetch_and_add(entries, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
