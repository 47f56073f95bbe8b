/* An entry probe most threads leave at once (the bundled entry tools' shape): thread 0 of
 * block 0 counts the launch.  Its code goes after the kernel's pure prefix
 * (test_entry_probe_placement); work.bpf.o, which works on every thread, stays at the top. */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} launches SEC(".maps");

SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x | ctx->ctaid_x)
		return 0;
	__u32 k = 0;
	__u64 *n = bpf_map_lookup_elem(&launches, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
