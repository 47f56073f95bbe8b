/* Programs the tests run on the interpreter and whose map contents they check. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} calls_by_func SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sums SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

const volatile __u64 scale = 3;
int table[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
__u64 result;
__u64 ncalls;

SEC("uprobe/cuLaunchKernel")
int count_calls(struct cubpf_api_ctx *ctx)
{
	__u32 func = ctx->func_id, k0 = 0, k1 = 1;
	__u64 one = 1, *n = bpf_map_lookup_elem(&calls_by_func, &func);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&calls_by_func, &func, &one, BPF_NOEXIST);
	__u64 *s0 = bpf_map_lookup_elem(&sums, &k0), *s1 = bpf_map_lookup_elem(&sums, &k1);
	if (s0)
		*s0 += ctx->args[0];
	if (s1)
		*s1 += ctx->args[1] * scale;
	ncalls++;
	return 0;
}

static __noinline int sum_to(__u64 n)
{
	int s = 0;
	for (__u32 i = 0; i < 16; i++) {
		if (i >= n)
			break;
		s += table[i];
	}
	return s;
}

SEC("kprobe/*")
int loops(struct cubpf_kernel_ctx *ctx)
{
	__u64 n = ctx->params[0];
	int s = sum_to(n);
	result = s;
	bpf_printk("loop %d over %lu", s, n);
	return s;
}

struct alloc_event {
	__u32 func_id;
	__u32 tid;
	__u64 ret;
	__u64 size;
};

SEC("uretprobe/cuMemAlloc_v2")
int alloc_ret(struct cubpf_api_ctx *ctx)
{
	struct alloc_event e = {.func_id = ctx->func_id, .tid = ctx->tid, .ret = ctx->ret,
				.size = ctx->args[1]};
	bpf_ringbuf_output(&events, &e, sizeof(e), 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
