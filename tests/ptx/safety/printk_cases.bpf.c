/* bpf_printk shapes for the GPU code generator (tests/ptx/test_ptx_diff.c): a %s argument goes
 * through the checked copy; a format without its NUL within the size, or one not in .rodata,
 * is refused with a message. */
#include "cubpf_helpers.h"

SEC("kprobe/printk_str")
int printk_str(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("s=%s n=%d\n", (const char *)ctx->params[0], ctx->nparams);
	return 0;
}

SEC("kprobe/printk_no_nul")
int printk_no_nul(struct cubpf_kernel_ctx *ctx)
{
	static const char fmt[] = "n=%d\n";
	bpf_trace_printk(fmt, sizeof(fmt) - 1, ctx->nparams);
	return 0;
}

SEC("kprobe/printk_stack_fmt")
int printk_stack_fmt(struct cubpf_kernel_ctx *ctx)
{
	volatile char fmt[8] = {'n', '=', '%', 'd', '\n', 0};
	bpf_trace_printk((const char *)fmt, sizeof(fmt), ctx->nparams);
	return 0;
}
