/* Device function entries and returns (fentry/fexit, issue 32), counted so that a test knows
 * the answer (tests/gpu/t_fentry.sh with tests/cuda/tools_fentry.cu; test_ptx.c assembles it
 * into every fixture's .funcs):
 *   fcounts[0] entries, fcounts[1] returns (both calls x threads);
 *   fcounts[2] the sum of params[0] at entry, fcounts[3] of params[1] at entry;
 *   fcounts[4] the sum of params[0] at return (= fcounts[2]);
 *   fcounts[5] entries and returns whose ctx->kernel_id is CUBPF_KERNEL_ID_SHARED (0 when one
 *              kernel calls the function);
 *   fcounts[6] entries with ctx->exit set, returns without it (0: both are constants);
 *   fcounts[7] the last ctx->func_id seen (the FNV-1a of the function's mangled name);
 *   fcounts[8] the sum of ctx->retval at return, fcounts[9] returns with ctx->has_retval, and
 *   fcounts[10] entries with has_retval or a retval (0: both are 0 at entry). */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} fcounts SEC(".maps");

static __attribute__((always_inline)) void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&fcounts, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("fentry/*")
int on_func_entry(struct cubpf_func_ctx *ctx)
{
	add(0, 1);
	add(2, ctx->params[0]);
	add(3, ctx->params[1]);
	if (ctx->kernel_id == 0xffffffffu)
		add(5, 1);
	if (ctx->exit)
		add(6, 1);
	if (ctx->has_retval || ctx->retval)
		add(10, 1);
	__u32 k = 7;
	__u64 id = ctx->func_id;
	bpf_map_update_elem(&fcounts, &k, &id, 0);
	return 0;
}

SEC("fexit/*")
int on_func_exit(struct cubpf_func_ctx *ctx)
{
	add(1, 1);
	add(4, ctx->params[0]);
	if (ctx->kernel_id == 0xffffffffu)
		add(5, 1);
	if (!ctx->exit)
		add(6, 1);
	if (ctx->has_retval) {
		add(8, ctx->retval);
		add(9, 1);
	}
	return 0;
}
