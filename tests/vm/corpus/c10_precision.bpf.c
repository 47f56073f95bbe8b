/* Class 10: precision.  Safe shapes clang emits must verify. */
#include "common.h"

/* A loop zeroing a stack buffer 8 bytes at a time (not unrolled), then the buffer read. */
SEC("kprobe/*")
int ok_zero_loop(struct cubpf_kernel_ctx *ctx)
{
	__u64 buf[8];
	__u32 k = 0;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 8; i++)
		buf[i] = 0;
	buf[3] = ctx->tid_x + 5;
	bpf_map_update_elem(&arr, &k, buf, BPF_ANY);
	return (int)(buf[2] + buf[3]);
}

/* A pointer walking a stack buffer to its end. */
SEC("kprobe/*")
int ok_pointer_walk(struct cubpf_kernel_ctx *ctx)
{
	__u64 buf[6], sum = 0;
	__u64 *end = buf + 6;
	(void)ctx;
#pragma clang loop unroll(disable)
	for (__u64 *p = buf; p < end; p++)
		*p = 3;
#pragma clang loop unroll(disable)
	for (__u64 *p = buf; p != end; p++)
		sum += *p;
	return (int)sum;
}

/* A bounded index over a map value, in a loop. */
SEC("kprobe/*")
int ok_value_loop(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 1;
	__u64 sum = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (!a)
		return 0;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 8; i++) {
		a->w[i] = (__u64)i;
		sum += a->w[i];
	}
	return (int)sum;
}

char LICENSE[] SEC("license") = "GPL";
