/* Pointer shapes the PTX generator once miscompiled (issue 14, class 7): a stack address, map
 * value or key address chosen on branches, a stack pointer advanced in a loop, a chosen pointer
 * spilled and filled.  Each program is safe and deterministic: tests/ptx/ptxdiff runs it on the
 * interpreter and on the PTX path (ptxsim on the CPU, the GPU in tests/gpu/t_ptx_safety.sh) over
 * random contexts and map contents, and the results must agree.  `hide` keeps clang from
 * turning a pointer choice back into a value choice. */
#include "cubpf_helpers.h"

#define hide(p) asm volatile("" : "+r"(p))

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} vals SEC(".maps");

/* p = c ? &a : &b; *p += k */
SEC("kprobe/shape_select_stack")
int select_stack(struct cubpf_kernel_ctx *ctx)
{
	__u64 a = ctx->params[1], b = ctx->params[2];
	__u64 *p = (ctx->params[0] & 1) ? &a : &b;
	hide(p);
	*p += 5;
	hide(p);
	return (int)(a * 3 + b + *p);
}

/* the same with 4-byte slots at unequal offsets, read back through the chosen pointer */
SEC("kprobe/shape_select_stack32")
int select_stack32(struct cubpf_kernel_ctx *ctx)
{
	__u32 x[4] = {ctx->tid_x, ctx->tid_y, ctx->tid_z, ctx->ntid_x};
	__u32 *p = (ctx->params[0] & 1) ? &x[0] : &x[3];
	hide(p);
	*p ^= 0x5a5a;
	__u32 *q = (ctx->params[1] & 1) ? &x[1] : p;
	hide(q);
	return (int)(x[0] + 2 * x[1] + 3 * x[2] + 5 * x[3] + *q);
}

/* a stack slot or a map value, chosen on a branch, written through */
SEC("kprobe/shape_stack_or_map")
int stack_or_map(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = (__u32)ctx->params[2] & 3;
	__u64 local = ctx->params[1];
	__u64 *v = bpf_map_lookup_elem(&vals, &k);
	if (!v)
		return 0;
	__u64 *p = (ctx->params[0] & 1) ? v : &local;
	hide(p);
	*p += ctx->params[3];
	hide(p);
	return (int)(local ^ *p);
}

/* a stack pointer advanced in a loop: fill, then sum through another moving pointer */
SEC("kprobe/shape_loop_pointer")
int loop_pointer(struct cubpf_kernel_ctx *ctx)
{
	__u64 buf[6];
	__u64 *p = buf;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 6; i++) {
		hide(p);
		*p = ctx->params[1] * (__u64)i + ctx->params[2];
		p++;
	}
	__u64 s = 0;
	__u64 *q = &buf[5];
#pragma clang loop unroll(disable)
	for (int i = 0; i < 6; i++) {
		hide(q);
		s = s * 31 + *q;
		q--;
	}
	__u32 k = 1;
	__u64 *v = bpf_map_lookup_elem(&vals, &k);
	if (v)
		*v = s;
	return (int)s;
}

/* a key's address chosen on branches */
SEC("kprobe/shape_key_select")
int key_select(struct cubpf_kernel_ctx *ctx)
{
	__u32 k0 = 0, k1 = (__u32)ctx->params[1] & 7; /* 4..7: past the end, a NULL lookup */
	__u32 *k = (ctx->params[0] & 1) ? &k0 : &k1;
	hide(k);
	__u64 *v = bpf_map_lookup_elem(&vals, k);
	if (!v)
		return -1;
	*v += 1;
	return (int)*v;
}

/* a chosen stack pointer spilled to the stack and filled back */
SEC("kprobe/shape_spill_fill")
int spill_fill(struct cubpf_kernel_ctx *ctx)
{
	__u64 a = ctx->params[1], b = ctx->params[2];
	__u64 *volatile slot;
	slot = (ctx->params[0] & 1) ? &a : &b;
	__u64 *p = slot;
	*p = *p * 7 + 1;
	__u32 k = 2;
	__u64 *v = bpf_map_lookup_elem(&vals, &k);
	if (v)
		*v = a - b;
	return (int)(a + b);
}

/* a map value chosen among two lookups (different keys) on a branch */
SEC("kprobe/shape_map_select")
int map_select(struct cubpf_kernel_ctx *ctx)
{
	__u32 k0 = 0, k3 = 3;
	__u64 *a = bpf_map_lookup_elem(&vals, &k0), *b = bpf_map_lookup_elem(&vals, &k3);
	if (!a || !b)
		return 0;
	__u64 *p = (ctx->params[0] & 2) ? a : b;
	hide(p);
	*p = *p * 3 + ctx->params[1];
	return (int)(*a + *b);
}

/* atomics through a pointer chosen between a stack slot and a map value (PTX has no atomics on
 * local memory: the generator tests the address space at run time) */
SEC("kprobe/shape_atomic_select")
int atomic_select(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = (__u32)ctx->params[2] & 3;
	__u64 local = ctx->params[1];
	__u64 *v = bpf_map_lookup_elem(&vals, &k);
	if (!v)
		return 0;
	__u64 *p = (ctx->params[0] & 1) ? v : &local;
	hide(p);
	__sync_fetch_and_add(p, ctx->params[3] | 1);
	__u64 old = __sync_fetch_and_xor(p, 0x0f0f);
	hide(p);
	return (int)(local + old);
}

/* a function given a pointer into its caller's frame updates it atomically */
static __attribute__((noinline)) int bump(__u64 *p, __u64 by)
{
	__sync_fetch_and_add(p, by);
	return (int)*p;
}

SEC("kprobe/shape_atomic_callee")
int atomic_callee(struct cubpf_kernel_ctx *ctx)
{
	__u64 a = ctx->params[1], b = ctx->params[2];
	int r = bump((ctx->params[0] & 1) ? &a : &b, ctx->params[3]);
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&vals, &k);
	if (v)
		r += bump(v, a ^ b);
	return r;
}
