/* Instruction counts (ctx->insns, ctx->warp_insns, issue 32), summed so that a test knows the
 * answer: counts[0] the threads' instructions, counts[1] the warps' (bpf_warp_sum over the lanes
 * leaving together, added by their lowest lane), counts[2] threads that left, counts[3] what a
 * kprobe sees of both (0: cubpf counts from the kernel's entry). */
#include "probe.h"

static __u64 (*bpf_is_warp_leader)(void) = (void *)CUBPF_FN_is_warp_leader;
static __u64 (*bpf_warp_sum)(__u64 v) = (void *)CUBPF_FN_warp_sum;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __attribute__((always_inline)) void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("kprobe/*")
int at_entry(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->insns | ctx->warp_insns)
		add(3, 1);
	return 0;
}

SEC("kretprobe/*")
int at_exit(struct cubpf_kernel_ctx *ctx)
{
	__u64 t = bpf_warp_sum(ctx->insns), w = bpf_warp_sum(ctx->warp_insns);
	add(2, 1);
	if (!bpf_is_warp_leader())
		return 0;
	add(0, t);
	add(1, w);
	return 0;
}
