/* libbpf-style settings: `const volatile` knobs in .rodata, fixed when the object is loaded.
 * The verifier knows them as constants, so a branch on one goes one way only: the clamp and the
 * switched-off printk below are code on no feasible path, which vm_prog_drop_dead drops (an
 * `exit` in its place, the branch hard-wired) instead of the verifier refusing the program. */
#include "probe.h"

const volatile __u32 slot = 7;
const volatile __u32 verbose = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = slot;
	if (k > 15) /* never taken: slot is 7 */
		k = 15;
	if (verbose) /* never taken */
		bpf_trace_printk("block %d\n", sizeof("block %d\n"), ctx->ctaid_x);
	__u64 *v = bpf_map_lookup_elem(&hits, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}
