/* Class 12: loops with branches in them (issue 27).  State pruning compares only the stack bytes
 * some later instruction may read before writing them (slot liveness), so two paths that differ
 * in a key or value written before a helper call and never read again meet as one: without it
 * the paths double at each iteration and a 128-iteration loop hit the 1M-instruction limit.
 * The other side, a byte read after a join still compared, is in test_corpus.c (a12_live_*):
 * C cannot order the verifier's paths. */
#include "common.h"

/* 256 iterations, a map update on the iterations whose bit of the context is set: the key and
 * value written on one path only are dead at the join.  (A count of the updates kept in a
 * register would tell the paths apart by itself: the verifier tracks no precision.) */
SEC("kprobe/*")
int ok_loop_cond_update(struct cubpf_kernel_ctx *ctx)
{
	__u32 bits = ctx->tid_x;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < 256; i++) {
		if (bits & (1u << (i & 31))) {
			__u32 k = i & 3;
			struct val v = {.w = {i}};
			bpf_map_update_elem(&arr, &k, &v, BPF_ANY);
		}
	}
	return 0;
}

/* The same with a lookup and an increment on one branch, a printk on the other. */
SEC("kprobe/*")
int ok_loop_lookup_or_print(struct cubpf_kernel_ctx *ctx)
{
	__u32 bits = ctx->tid_x;
	__u64 sum = 0;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < 300; i++) {
		__u32 k = i & 3;
		if (bits & (1u << (i & 7))) {
			struct val *v = bpf_map_lookup_elem(&arr, &k);
			if (v) {
				v->w[0]++;
				sum += v->w[1];
			}
		} else if ((i & 63) == 0) {
			bpf_printk("i=%u", i);
		}
	}
	return (int)(sum & 0xff) + 1;
}
