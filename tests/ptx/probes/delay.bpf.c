/* bpf_gpu_delay_ns (issue 32): every global load of the probed kernels waits delay_ns (a
 * bounded global: the verifier wants the delay proven <= CUBPF_MAX_DELAY_NS); stores, shared
 * and local accesses are left alone (their probes fold away). */
#include "probe.h"

static long (*bpf_gpu_delay_ns)(__u64 ns) = (void *)CUBPF_FN_gpu_delay_ns;

const volatile __u64 delay_ns = 200;

SEC("memprobe/*")
int slow_loads(struct cubpf_mem_ctx *ctx)
{
	if (ctx->op != CUBPF_MEM_LOAD || ctx->space != CUBPF_SPACE_GLOBAL)
		return 0;
	/* a constant of .rodata: the verifier proves the bound from it (a clamp here would be a
	 * branch on a constant, leaving code no path reaches, which GPU programs may not hold) */
	return bpf_gpu_delay_ns(delay_ns);
}
