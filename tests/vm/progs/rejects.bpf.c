/* Programs written in C that the verifier must reject; tests/vm/test_cprogs.c lists the reason
 * each one must give.  The program name says what is wrong. */
#include "cubpf_helpers.h"

struct big {
	__u64 vals[4];
	__u64 ptr;
};

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct big);
} arr SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");

const volatile int cfg = 1;

SEC("kprobe/*")
int rej_no_null_check(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = ctx->kernel_id;
	struct big *v = bpf_map_lookup_elem(&arr, &k);
	v->vals[0] += 1;
	return 0;
}

SEC("kprobe/*")
int rej_index_unchecked(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0, i = ctx->tid_x;
	struct big *v = bpf_map_lookup_elem(&arr, &k);
	if (v)
		v->vals[i] += 1;
	return 0;
}

SEC("uprobe/cuLaunchKernel")
int rej_unbounded_loop(struct cubpf_api_ctx *ctx)
{
	__u32 k = 0;
	for (__u64 i = 0; i < ctx->args[0]; i++) {
		struct big *v = bpf_map_lookup_elem(&arr, &k);
		if (v)
			v->vals[0] += i;
	}
	return 0;
}

SEC("kprobe/*")
int rej_write_rodata(struct cubpf_kernel_ctx *ctx)
{
	*(volatile int *)&cfg = (int)ctx->tid_x;
	return 0;
}

SEC("kprobe/*")
int rej_pointer_in_map(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct big *v = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (v)
		v->ptr = (__u64)v;
	return 0;
}

SEC("kprobe/*")
int rej_ctx_write(struct cubpf_kernel_ctx *ctx)
{
	ctx->tid_x = 0;
	return 0;
}

SEC("uprobe/cuMemcpy")
int rej_gpu_helper_on_host(struct cubpf_api_ctx *ctx)
{
	(void)ctx;
	return (int)bpf_get_globaltimer();
}

SEC("kprobe/*")
int rej_host_helper_on_gpu(struct cubpf_kernel_ctx *ctx)
{
	(void)ctx;
	return (int)bpf_ktime_get_ns();
}

SEC("kprobe/*")
int rej_stack_variable_index(struct cubpf_kernel_ctx *ctx)
{
	volatile char buf[32] = {0};
	buf[ctx->tid_x & 31] = 1;
	return buf[0];
}

struct ev {
	__u32 a, b;
	__u64 c;
};

SEC("kprobe/*")
int rej_uninit_stack_out(struct cubpf_kernel_ctx *ctx)
{
	struct ev e;
	e.a = ctx->tid_x;
	e.c = 0;
	bpf_ringbuf_output(&rb, &e, sizeof(e), 0);
	return 0;
}

SEC("memprobe/*")
int rej_ctx_narrow_addr(struct cubpf_mem_ctx *ctx)
{
	return *(volatile __u32 *)&ctx->addr;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
