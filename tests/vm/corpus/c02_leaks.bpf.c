/* Class 2: pointer leaks.  Addresses must never reach a map, a record, printed output or a
 * helper that returns something computed from its argument. */
#include "common.h"

/* A pointer printed. */
SEC("kprobe/*")
int rej_printk_pointer(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (a)
		bpf_printk("%lx", a);
	return 0;
}

/* A pointer counted by a warp-wide helper whose result the program may store. */
SEC("kprobe/*")
int rej_warp_unique_pointer(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (!a)
		return 0;
	a->w[0] = bpf_warp_count_unique((__u64)a);
	return 0;
}

/* A pointer compared with constants: its bits, one branch at a time. */
SEC("kprobe/*")
int rej_compare_pointer(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (!a)
		return 0;
	__u64 bits = (__u64)a;
	OPAQUE(bits);
	if (bits > 0x7f0000000000ull)
		a->w[1] = 1;
	return 0;
}

/* A record pointer kept on the stack past bpf_ringbuf_submit, then stored in a map. */
SEC("uprobe/cuLaunchKernel")
int rej_ringbuf_after_submit(struct cubpf_api_ctx *ctx)
{
	__u32 k = 0;
	volatile __u64 saved;
	__u64 *e = bpf_ringbuf_reserve(&rb, 8, 0);
	(void)ctx;
	if (!e)
		return 0;
	*e = 1;
	saved = (__u64)e;
	bpf_ringbuf_submit(e, 0);
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (a)
		a->w[0] = saved;
	return 0;
}

/* A spilled pointer with 4 of its bytes overwritten, the other 4 read back. */
SEC("kprobe/*")
int rej_partial_overwrite(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	volatile union {
		__u64 p;
		__u32 half[2];
	} u;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (!a)
		return 0;
	u.p = (__u64)a;
	u.half[0] = 0;
	a->w[0] = u.half[1];
	return 0;
}

/* Scalars printed and counted, a record submitted: accepted. */
SEC("kprobe/*")
int ok_scalars_out(struct cubpf_kernel_ctx *ctx)
{
	bpf_printk("kernel %u tid %u", ctx->kernel_id, ctx->tid_x);
	return (int)bpf_warp_count_unique(ctx->tid_x);
}

char LICENSE[] SEC("license") = "GPL";
