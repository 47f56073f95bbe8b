/* bpf_probe_read from readable and unreadable addresses (issue 14, class 6): from the stack and
 * a map value it copies; from NULL, a small address and a wild (misaligned) one it must return -EFAULT and zero the destination, on the host and on the
 * GPU alike (tests/ptx/ptxdiff: interpreter vs PTX, and tests/gpu/t_ptx_safety.sh). */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

static __always_inline void put(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&out, &k);
	if (p)
		*p = v;
}

SEC("kprobe/bad_reads")
int bad_reads(struct cubpf_kernel_ctx *ctx)
{
	__u64 src[2] = {ctx->params[0], ctx->params[1] ^ 0x55}, dst[2] = {1, 2};
	long r1 = bpf_probe_read(dst, sizeof(dst), src); /* the stack: copies */
	__u64 good = dst[0] + dst[1] * 3;
	__u64 bad[2] = {7, 7};
	long r2 = bpf_probe_read(bad, sizeof(bad), (void *)0);          /* NULL */
	__u64 z = bad[0] | bad[1];
	bad[0] = bad[1] = 9;
	long r3 = bpf_probe_read(bad, 12, (void *)(0x1000 + (ctx->params[2] & 0xff0)));
	z |= bad[0] | bad[1];
	__u32 k = 3;
	__u64 *v = bpf_map_lookup_elem(&out, &k);
	long r4 = -1;
	if (v) {
		__u64 m = 0;
		r4 = bpf_probe_read(&m, 8, v);               /* a map value: copies */
		good ^= m;
		bad[0] = 5;
		long r5 = bpf_probe_read(bad, 16, (char *)0x7ead00000000 + (ctx->params[3] & 0xff));
		z |= bad[0] | bad[1];
		r4 = r4 * 16 + r5;
	}
	put(0, good);
	put(1, z);
	put(2, (__u64)(r1 * 4096 + r2 * 256 + r3 * 16) ^ (__u64)r4);
	return (int)(r1 + r2 + r3);
}
