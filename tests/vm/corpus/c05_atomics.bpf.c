/* Class 5: atomics must be naturally aligned (the GPU faults on a misaligned one). */
#include "common.h"

/* A 64-bit atomic add at offset 4 of a map value. */
SEC("kprobe/*")
int rej_atomic64_off4(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (a)
		__sync_fetch_and_add((__u64 *)((char *)a + 4), 1);
	return 0;
}

/* A 64-bit atomic at a variable offset that is only a multiple of 4. */
SEC("kprobe/*")
int rej_atomic64_var4(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (a) {
		__u64 i = (ctx->tid_x & 7) * 4;
		__sync_fetch_and_add((__u64 *)((char *)a + i), 1);
	}
	return 0;
}

/* A 32-bit atomic at offset 2. */
SEC("kprobe/*")
int rej_atomic32_off2(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (a)
		__sync_fetch_and_add((__u32 *)((char *)a + 2), 1);
	return 0;
}

/* Aligned atomics, at constant and variable offsets: accepted. */
SEC("kprobe/*")
int ok_atomics_aligned(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (!a)
		return 0;
	__sync_fetch_and_add(&a->w[ctx->tid_x & 7], 3);
	__sync_fetch_and_add((__u32 *)&a->w[1] + 1, 1);
	return (int)a->w[0];
}

char LICENSE[] SEC("license") = "GPL";
