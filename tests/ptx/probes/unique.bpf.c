/* bpf_warp_count_unique over the access's address itself (no shift: values near 2^64 wrap),
 * returned: tests/ptx/ptxsim_warp.py runs the site's code on 32 lanes in step. */
#include "probe.h"

static __u64 (*bpf_warp_count_unique)(__u64 v) = (void *)CUBPF_FN_warp_count_unique;

SEC("memprobe/*")
__u64 on_mem(struct cubpf_mem_ctx *ctx)
{
	return bpf_warp_count_unique(ctx->addr);
}
