/* Class 9: what the PTX code generator refuses is refused by the verifier for GPU programs, and
 * host programs do not write GPU ring buffers. */
#include "common.h"

struct big {
	__u8 b[8192];
};

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct big);
} bigarr SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_GPU_RINGBUF);
	__uint(max_entries, 16384);
} gpurb SEC(".maps");

struct key80 {
	__u8 b[80];
};

struct {
	__uint(type, CUBPF_MAP_HASH);
	__uint(max_entries, 4);
	__type(key, struct key80);
	__type(value, __u64);
} bigkeys SEC(".maps");

/* A GPU ring buffer record of 5000 bytes. */
SEC("kprobe/*")
int rej_gpu_record_too_big(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct big *v = bpf_map_lookup_elem(&bigarr, &k);
	(void)ctx;
	if (v)
		bpf_ringbuf_output(&rb, v, 5000, 0);
	return 0;
}

/* A GPU ring buffer record of a size known only at run time. */
SEC("kprobe/*")
int rej_gpu_record_var_size(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct big *v = bpf_map_lookup_elem(&bigarr, &k);
	if (v)
		bpf_ringbuf_output(&rb, v, (ctx->tid_x & 255) + 1, 0);
	return 0;
}

/* The context pointer kept on the stack. */
SEC("kprobe/*")
int rej_gpu_ctx_spill(struct cubpf_kernel_ctx *ctx)
{
	struct cubpf_kernel_ctx *volatile keep = ctx;
	return (int)keep->tid_x;
}

/* A hash key longer than the GPU's 64 bytes. */
SEC("kprobe/*")
int rej_gpu_hash_key_80(struct cubpf_kernel_ctx *ctx)
{
	struct key80 key = {};
	key.b[0] = (__u8)ctx->tid_x;
	__u64 *v = bpf_map_lookup_elem(&bigkeys, &key);
	return v ? (int)*v : 0;
}

/* A host program reserving on a GPU ring buffer. */
SEC("uprobe/cuLaunchKernel")
int rej_host_reserve_gpu_ring(struct cubpf_api_ctx *ctx)
{
	__u64 *e = bpf_ringbuf_reserve(&gpurb, 8, 0);
	if (!e)
		return 0;
	*e = ctx->func_id;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* A 4096-byte record, the largest the GPU ring buffer takes: accepted. */
SEC("kprobe/*")
int ok_gpu_record_4096(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct big *v = bpf_map_lookup_elem(&bigarr, &k);
	(void)ctx;
	if (v)
		bpf_ringbuf_output(&gpurb, v, 4096, 0);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
