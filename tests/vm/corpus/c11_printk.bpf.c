/* Class 11: bpf_trace_printk formats (issue 27).  The verifier reads a constant format with the
 * grammar both formatters use (vm/printk.c): every conversion it counts is an argument checked
 * (set, not a pointer), and a format the grammar does not describe is refused with its offset.
 * Before, "%16lx", "%#lx", "%hx" converted nothing for the verifier and one argument on the
 * GPU, which printed whatever the register held (a map's device address). */
#include "common.h"

/* A field width: a map value's address as the argument. */
SEC("kprobe/*")
int rej_printk_width_ptr(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *v = bpf_map_lookup_elem(&arr, &k);
	if (v)
		bpf_printk("%16lx", v);
	return ctx->tid_x & 0;
}

/* The '#' flag, the same address. */
SEC("kprobe/*")
int rej_printk_alt_ptr(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *v = bpf_map_lookup_elem(&arr, &k);
	if (v)
		bpf_printk("%#lx", v);
	return ctx->tid_x & 0;
}

/* %p of a pointer: printed as an address on both sides. */
SEC("kprobe/*")
int rej_printk_p_ptr(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *v = bpf_map_lookup_elem(&arr, &k);
	if (v)
		bpf_printk("at %-18p", v);
	return ctx->tid_x & 0;
}

/* A length modifier h with no argument given: r3 is whatever it held. */
SEC("kprobe/*")
int rej_printk_h_unset(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("tid %hx");
	return ctx->tid_x & 0;
}

/* A floating conversion: no eBPF value is a double; vprintf would print a register's bits. */
SEC("kprobe/*")
int rej_printk_float(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("x=%a", ctx->tid_x);
	return 0;
}

/* A '*' width: vprintf takes one more argument than there are conversions. */
SEC("kprobe/*")
int rej_printk_star(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("%*d", 4, ctx->tid_x);
	return 0;
}

/* %n writes through its argument. */
SEC("kprobe/*")
int rej_printk_n(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("ab%n", ctx->tid_x);
	return 0;
}

/* A wide character: no length modifier on %c. */
SEC("kprobe/*")
int rej_printk_lc(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("%lc", ctx->tid_x);
	return 0;
}

/* A width past the grammar's bound. */
SEC("kprobe/*")
int rej_printk_wide(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("%99d", ctx->tid_x);
	return 0;
}

/* Four conversions: bpf_trace_printk has three argument registers. */
SEC("kprobe/*")
int rej_printk_four(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("%d %d %d %d", ctx->tid_x, ctx->tid_y, ctx->tid_z);
	return 0;
}

/* A % at the very end. */
SEC("kprobe/*")
int rej_printk_trailing(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("%d%%%", ctx->tid_x);
	return 0;
}

/* The whole grammar on scalars: widths, flags, precisions, every length, %p of a number. */
SEC("kprobe/*")
int ok_printk_shapes(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("%16lx|%#x|%-5hd", ctx->kernel_id, ctx->tid_x, ctx->tid_y);
	bpf_printk("%+.3lld|% 08hu|%5.2s", ctx->tid_x, ctx->tid_y, ctx->tid_z);
	bpf_printk("%%%-18p%%|%c", ctx->kernel_id, 'a');
	return 0;
}
