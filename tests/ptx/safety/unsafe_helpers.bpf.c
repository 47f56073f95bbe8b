/* Probes that hand GPU helpers addresses they may not read (issue 14, class 6), for
 * tests/gpu/t_ptx_safety.sh: under `cubpf run -p` the application must run to the end with its
 * output unchanged.  Each bad read must return -EFAULT and zero its destination; map `res`
 * counts, per thread: [0] threads whose four bad reads all failed cleanly, [1] threads where
 * one did not, [2] memory-probe reads of the probed access's own bytes that succeeded, [3]
 * those that failed.  One thread prints two %s strings through unchecked pointers (they print
 * empty). */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} res SEC(".maps");

static __always_inline void count(__u32 k)
{
	__u64 *p = bpf_map_lookup_elem(&res, &k);
	if (p)
		__sync_fetch_and_add(p, 1);
}

SEC("kprobe/*vec_add*")
int bad_helpers(struct cubpf_kernel_ctx *ctx)
{
	__u64 v[4] = {1, 2, 3, 4};
	long r0 = bpf_probe_read(&v[0], 8, (void *)0);
	long r1 = bpf_probe_read(&v[1], 8, (void *)0x7ead00000000);
	long r2 = bpf_probe_read(&v[2], 8, (void *)(ctx->params[0] + (1ull << 40)));
	long r3 = bpf_probe_read(&v[3], 8, (void *)(ctx->params[2] ^ 0xffff000000000001ull));
	int clean = r0 == -14 && r1 == -14 && r2 == -14 && r3 == -14 &&
		    (v[0] | v[1] | v[2] | v[3]) == 0;
	count(clean ? 0 : 1);
	if (ctx->tid_x == 0 && ctx->ctaid_x == 0)
		bpf_printk("cubpf-safety: bad strings [%s] [%s]\n",
			   (const char *)(ctx->params[0] + (1ull << 40)), (const char *)16);
	return 0;
}

SEC("memprobe/*vec_add*")
int own_access(struct cubpf_mem_ctx *ctx)
{
	__u32 w = 0;
	if (ctx->size != 4)
		return 0;
	long r = bpf_probe_read(&w, 4, (void *)ctx->addr);
	count(r == 0 ? 2 : 3);
	return 0;
}
