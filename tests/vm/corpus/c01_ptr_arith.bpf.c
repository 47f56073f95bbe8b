/* Class 1: out-of-bounds map access through pointer subtraction.  Two lookups may return two
 * elements (or one value and the stack): their difference is an address difference, which
 * added back to a map value escapes every bounds check. */
#include "common.h"

__u64 sink[4];

/* Two map values subtracted, the difference added back to a third value, then a store. */
SEC("kprobe/*")
int rej_sub_two_values(struct cubpf_kernel_ctx *ctx)
{
	__u32 k0 = 0, k1 = 1;
	struct val *a = bpf_map_lookup_elem(&arr, &k0);
	struct val *b = bpf_map_lookup_elem(&arr, &k1);
	(void)ctx;
	if (!a || !b)
		return 0;
	long d = (char *)a - (char *)b;
	*(__u64 *)((char *)sink + d) = 1;
	return 0;
}

/* A map value and a stack pointer subtracted. */
SEC("kprobe/*")
int rej_sub_value_stack(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&hash, &k);
	(void)ctx;
	if (!a)
		return 0;
	long d = (char *)a - (char *)&k;
	OPAQUE(d);
	a->w[0] = (__u64)d;
	return 0;
}

/* An unknown scalar added to a map value pointer, no bounds check before the store. */
SEC("kprobe/*")
int rej_unchecked_offset(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (!a)
		return 0;
	*(__u64 *)((char *)a + ctx->params[0]) = 1;
	return 0;
}

/* Pointers into one value: their difference is an offset (here 64), bounded and safe. */
SEC("kprobe/*")
int ok_sub_same_value(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (!a)
		return 0;
	char *begin = (char *)&a->w[0], *end = (char *)&a->w[8];
	OPAQUE(end);
	return (int)(end - begin);
}

/* An unknown index bounded before use: accepted, and it stays inside the value. */
SEC("kprobe/*")
int ok_bounded_offset(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (!a)
		return 0;
	__u64 i = ctx->params[0] & 7;
	a->w[i] = 7;
	return (int)a->w[i];
}

char LICENSE[] SEC("license") = "GPL";
