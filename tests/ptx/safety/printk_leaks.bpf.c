/* Issue 27: bpf_printk formats the verifier once read with another grammar than the GPU's
 * vprintf ("%16lx", "%#lx", "%hx", "%a", "%p" of a pointer): each program must be refused by the
 * verifier, so that on the GPU (tests/gpu/t_ptx_safety.sh) no "cubpf-printk-leak" line is ever
 * printed, and with it no map's device address or unset register. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} leakmap SEC(".maps");

#define FIRST_THREAD(ctx) ((ctx)->tid_x == 0 && (ctx)->ctaid_x == 0)

SEC("kprobe/*vec_add*")
int leak_width(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&leakmap, &k);
	if (v && FIRST_THREAD(ctx))
		bpf_printk("cubpf-printk-leak: %16lx\n", v);
	return 0;
}

SEC("kprobe/*vec_add*")
int leak_alt(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&leakmap, &k);
	if (v && FIRST_THREAD(ctx))
		bpf_printk("cubpf-printk-leak: %#lx\n", v);
	return 0;
}

SEC("kprobe/*vec_add*")
int leak_pointer_p(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&leakmap, &k);
	if (v && FIRST_THREAD(ctx))
		bpf_printk("cubpf-printk-leak: %-20p\n", v);
	return 0;
}

SEC("kprobe/*vec_add*")
int leak_unset_h(struct cubpf_kernel_ctx *ctx)
{
	if (FIRST_THREAD(ctx))
		bpf_printk("cubpf-printk-leak: %hx\n");
	return 0;
}

SEC("kprobe/*vec_add*")
int leak_float(struct cubpf_kernel_ctx *ctx)
{
	if (FIRST_THREAD(ctx))
		bpf_printk("cubpf-printk-leak: %a\n", ctx->params[0]);
	return 0;
}
