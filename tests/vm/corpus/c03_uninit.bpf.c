/* Class 3: uninitialised reads.  Stack bytes never written must not be read, whether directly,
 * through a helper or as a helper's argument registers. */
#include "common.h"

/* bpf_probe_read with a size of 0 or 64: the buffer may hold nothing it wrote. */
SEC("uprobe/cuMemcpy")
int rej_probe_read_var_size(struct cubpf_api_ctx *ctx)
{
	__u32 k = 0;
	struct val buf;
	__u32 n = ctx->args[2] & 64;
	bpf_probe_read(&buf, n, (void *)ctx->args[1]);
	bpf_map_update_elem(&arr, &k, &buf, BPF_ANY);
	return 0;
}

/* A format converting two arguments given one: the second is whatever r4 held. */
SEC("kprobe/*")
int rej_printk_unset_arg(struct cubpf_kernel_ctx *ctx)
{
	static const char fmt[] = "%u %lx";
	bpf_trace_printk(fmt, sizeof(fmt), ctx->tid_x);
	return 0;
}

/* A buffer written in part, then read whole. */
SEC("kprobe/*")
int rej_partly_written(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	struct val buf;
	buf.w[0] = ctx->tid_x;
	buf.w[1] = ctx->tid_y;
	bpf_map_update_elem(&arr, &k, &buf, BPF_ANY);
	return 0;
}

/* bpf_probe_read of at least 8 bytes: the first 8 are written (zeros when the read fails). */
SEC("uprobe/cuMemcpy")
int ok_probe_read_min_size(struct cubpf_api_ctx *ctx)
{
	__u64 buf[4];
	__u32 n = (ctx->args[2] & 24) + 8;
	bpf_probe_read(buf, n, (void *)ctx->args[1]);
	return (int)(buf[0] & 0);
}

char LICENSE[] SEC("license") = "GPL";
