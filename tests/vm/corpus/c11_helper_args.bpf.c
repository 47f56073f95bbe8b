/* Class 11 (issue 27): a helper's memory argument is checked against the object it points
 * into, as a load or store of its size would be.  bpf_probe_read's source took a pointer to the
 * context, a map value or a record at any offset: ctx + K, value - 8 and record + K copied the
 * host stack and heap around them into the program.  Every pointer a helper reads or writes
 * through is bounded by its object (with the size register's largest value); the same shapes
 * inside their objects are accepted. */
#include "common.h"

struct rec {
	__u64 w[2];
};

/* 16 bytes from the context's last 8: past its end (the api context is 160 bytes). */
SEC("uprobe/cuLaunchKernel")
int rej_read_ctx_past_end(struct cubpf_api_ctx *ctx)
{
	__u64 buf[2];
	__u32 k = 0;
	bpf_probe_read(buf, sizeof(buf), (char *)ctx + sizeof(*ctx) - 8);
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (a)
		a->w[0] = buf[0] + buf[1];
	return 0;
}

/* 8 bytes before a map value: the allocator's bookkeeping, on the host. */
SEC("uprobe/cuLaunchKernel")
int rej_read_value_minus_8(struct cubpf_api_ctx *ctx)
{
	__u64 x;
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (!a)
		return 0;
	bpf_probe_read(&x, 8, (char *)a - 8);
	a->w[1] = x;
	return 0;
}

/* 16 bytes from 8 bytes into a 16-byte record. */
SEC("uprobe/cuLaunchKernel")
int rej_read_record_past_end(struct cubpf_api_ctx *ctx)
{
	__u64 buf[2];
	struct rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	(void)ctx;
	if (!r)
		return 0;
	r->w[0] = r->w[1] = 0;
	bpf_probe_read(buf, sizeof(buf), (char *)r + 8);
	r->w[0] = buf[1];
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* A size of up to 64 bytes (a register) from 8 bytes into a 64-byte value. */
SEC("uprobe/cuLaunchKernel")
int rej_read_var_size_past_value(struct cubpf_api_ctx *ctx)
{
	__u64 buf[8];
	__u32 k = 0, n = ctx->args[0] & 63;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (!a)
		return 0;
	bpf_probe_read(buf, n + 1, (char *)a + 8);
	a->w[0] = buf[0];
	return 0;
}

/* A destination: 16 bytes written from 8 bytes into a 16-byte record. */
SEC("uprobe/cuLaunchKernel")
int rej_write_record_past_end(struct cubpf_api_ctx *ctx)
{
	struct rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r)
		return 0;
	bpf_probe_read((char *)r + 8, 16, (void *)ctx->args[1]);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* A ring buffer record's data taken from the context's tail: past its end. */
SEC("uprobe/cuLaunchKernel")
int rej_output_ctx_tail(struct cubpf_api_ctx *ctx)
{
	bpf_ringbuf_output(&rb, (char *)ctx + 152, 16, 0);
	return 0;
}

/* A map update's value from the second half of another value: 32 bytes past its end. */
SEC("uprobe/cuLaunchKernel")
int rej_update_value_tail(struct cubpf_api_ctx *ctx)
{
	__u32 k = 0;
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	(void)ctx;
	if (a)
		bpf_map_update_elem(&hash, &k, (char *)a + 32, 0);
	return 0;
}

/* The whole context, a value's tail and a record's second half, each inside its object; the
 * stack as a source: accepted (and run: 16 + 40 + 8 = 64 bytes copied, all zeros). */
SEC("uprobe/cuLaunchKernel")
int ok_reads_inside(struct cubpf_api_ctx *ctx)
{
	__u64 buf[20], part[2] = {3, 4};
	__u32 k = 0;
	long rc = bpf_probe_read(buf, sizeof(*ctx), ctx);
	struct val *a = bpf_map_lookup_elem(&arr, &k);
	if (!a)
		return 1;
	rc |= bpf_probe_read(buf, 40, (char *)a + 24);
	rc |= bpf_probe_read(&a->w[0], 16, part);
	struct rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r)
		return 2;
	r->w[0] = r->w[1] = 5;
	rc |= bpf_probe_read(buf, 8, (char *)r + 8);
	bpf_ringbuf_submit(r, 0);
	return (int)rc + (int)a->w[0] + (int)a->w[1] + (int)buf[0];
}

char LICENSE[] SEC("license") = "GPL";
