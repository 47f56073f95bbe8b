/* Counts what the fixture tests know in advance: threads entering and leaving every kernel,
 * and per (space, op) the number of accesses and bytes.  counts[]:
 *   0 threads entering, 1 threads leaving,
 *   8 + 2*(space*4 + op):     accesses      (space 0..3, op 1..4)
 *   8 + 2*(space*4 + op) + 1: bytes */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __attribute__((always_inline)) void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&counts, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	(void)ctx;
	add(0, 1);
	return 0;
}

SEC("kretprobe/*")
int on_exit(struct cubpf_kernel_ctx *ctx)
{
	(void)ctx;
	add(1, 1);
	return 0;
}

SEC("memprobe/*")
int on_mem(struct cubpf_mem_ctx *ctx)
{
	__u32 k = 8 + 2 * (ctx->space * 4 + ctx->op);
	if (k >= 62)
		return 0;
	add(k, 1);
	add(k + 1, ctx->size);
	return 0;
}
