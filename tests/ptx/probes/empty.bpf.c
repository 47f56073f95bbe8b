/* Entry and exit probes that do nothing: the cost of the instrumentation itself. */
#include "probe.h"

SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	(void)ctx;
	return 0;
}

SEC("kretprobe/*")
int on_exit(struct cubpf_kernel_ctx *ctx)
{
	(void)ctx;
	return 0;
}
