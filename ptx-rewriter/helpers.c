/* GPU helpers: each helper call becomes inline PTX.  Maps live in device memory and are reached
 * through the module's __cubpf_map_<i> pointers: a lookup is an index check and an address
 * computation, never a call to the host. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ptx-rewriter/cgint.h"

#define OUT(...) buf_printf(g->out, "\t" __VA_ARGS__)

static int hfail(struct cg *g, uint32_t pc, uint32_t id, const char *what)
{
	ptx_seterr(g->err, g->errlen, "%s insn %u: helper %u: %s",
		   g->p->prog.name ? g->p->prog.name : "program", pc, id, what);
	return -1;
}

static const struct av *arg(const struct cg *g, uint32_t pc, int r)
{
	return &g->p->st[pc].r[r];
}

/* The array map that argument r1 names, or NULL (message set). */
static const struct vm_map_def *array_map(struct cg *g, uint32_t pc, uint32_t id, uint32_t *idx)
{
	const struct av *m = arg(g, pc, 1);
	if (m->kind != AV_MAP || m->map >= g->p->map_cnt || m->map >= 64) {
		hfail(g, pc, id, "r1 is not a map known at compile time");
		return NULL;
	}
	const struct vm_map_def *d = &g->p->maps[m->map];
	if (!ptx_cg_map_kind_supported(d->type)) {
		hfail(g, pc, id, "map type not supported on the GPU (array, per-SM array, per-thread "
				 "array and hash are)");
		return NULL;
	}
	*idx = m->map;
	g->res->maps_used |= 1ull << m->map;
	return d;
}

/* A pointer argument: a static stack location (*st) when it is r10 + constant, else its
 * register as a generic address A (+ add), of alignment *al. */
static int ptr_arg(struct cg *g, uint32_t pc, uint32_t depth, int r, int64_t add, uint32_t size,
		   char *A, size_t alen, struct sloc *l, bool *st, uint32_t *al)
{
	const struct av *a = arg(g, pc, r);
	*al = ptx_av_align(a, add);
	*st = a->kind == AV_STACK;
	if (*st) {
		if (ptx_cg_sloc(g, depth, a->v + add, size, l))
			return hfail(g, pc, 0, "stack pointer argument outside the frame");
		return 0;
	}
	if (a->kind == AV_CTX || a->kind == AV_CONFLICT)
		return hfail(g, pc, 0, "the context cannot be passed to helpers on the GPU");
	snprintf(A, alen, "%%__cb_r%d", r);
	return 0;
}

int ptx_cg_arg_load(struct cg *g, uint32_t pc, uint32_t depth, int r, int64_t off, uint32_t size,
		const char *T)
{
	char A[64];
	struct sloc l;
	bool st;
	uint32_t al;
	if (ptr_arg(g, pc, depth, r, off, size, A, sizeof(A), &l, &st, &al))
		return -1;
	if (st)
		ptx_cg_sload(g, &l, T, 64, false);
	else
		ptx_cg_ld(g, "", T, 64, A, off, size, al, false);
	return 0;
}

/* %__cb_t0 = address of the slot of key [r2] in map `idx`; %__cb_p0 = key in range. */
static int slot_address(struct cg *g, uint32_t pc, uint32_t depth, uint32_t idx,
			const struct vm_map_def *d)
{
	char A[64];
	struct sloc l;
	bool st;
	uint32_t al;
	if (d->key_size != 4)
		return hfail(g, pc, 0, "array map keys are 4 bytes");
	if (ptr_arg(g, pc, depth, 2, 0, 4, A, sizeof(A), &l, &st, &al))
		return -1;
	if (st)
		ptx_cg_sload(g, &l, "%__cb_w0", 32, false);
	else
		ptx_cg_ld(g, "", "%__cb_w0", 32, A, 0, 4, al, false);
	OUT("setp.lt.u32 %%__cb_p0, %%__cb_w0, %u;\n", d->max_entries);
	ptx_cg_map_ptr(g, "%__cb_t0", idx);
	OUT("mad.wide.u32 %%__cb_t0, %%__cb_w0, %u, %%__cb_t0;\n", ptx_map_value_stride(d));
	return 0;
}

static bool plain_array(const struct vm_map_def *d)
{
	return d->type == CUBPF_MAP_ARRAY || d->type == CUBPF_MAP_GPU_ARRAY;
}

static int h_lookup(struct cg *g, uint32_t pc, uint32_t depth, const char *ip)
{
	uint32_t idx;
	uint64_t off;
	bool sm;
	if (ptx_cg_lookup_fold(g->p, pc, &idx, &off, &sm)) { /* constant key in range: never NULL */
		g->res->maps_used |= 1ull << idx;
		ptx_cg_map_ptr(g, "%__cb_t0", idx);
		if (sm)
			ptx_cg_sm_copy(g->out, "%__cb_t0",
				       (uint32_t)CUBPF_VALUE_STRIDE(g->p->maps[idx].value_size));
		OUT("add.s64 %%__cb_r0, %%__cb_t0, %llu;\n", (unsigned long long)off);
		return 0;
	}
	const struct vm_map_def *d = array_map(g, pc, 1, &idx);
	if (!d)
		return -1;
	if (!plain_array(d))
		return ptx_cg_map_op(g, pc, CUBPF_FN_map_lookup_elem, depth, ip, idx, d);
	if (slot_address(g, pc, depth, idx, d))
		return -1;
	OUT("selp.b64 %%__cb_r0, %%__cb_t0, 0, %%__cb_p0;\n");
	return 0;
}

int ptx_cg_copy_value(struct cg *g, uint32_t pc, uint32_t depth, const struct vm_map_def *d,
		  const char *dst)
{
	const struct av *a = arg(g, pc, 3);
	uint32_t chunk = ptx_cg_value_chunk(d->value_size, a->kind == AV_STACK ? a->v : 0);
	for (uint32_t o = 0; o < d->value_size; o += chunk) {
		char A[64];
		struct sloc l;
		bool st;
		uint32_t al;
		if (ptr_arg(g, pc, depth, 3, o, chunk, A, sizeof(A), &l, &st, &al))
			return -1;
		if (st)
			ptx_cg_sload(g, &l, "%__cb_t1", 64, false);
		else
			ptx_cg_ld(g, "", "%__cb_t1", 64, A, o, chunk, al, false);
		OUT("st.global.u%u [%s+%u], %%__cb_t1;\n", chunk * 8, dst, o);
	}
	return 0;
}

static int h_update(struct cg *g, uint32_t pc, uint32_t depth, const char *ip)
{
	uint32_t idx;
	const struct vm_map_def *d = array_map(g, pc, 2, &idx);
	if (!d)
		return -1;
	if (!plain_array(d))
		return ptx_cg_map_op(g, pc, CUBPF_FN_map_update_elem, depth, ip, idx, d);
	if (slot_address(g, pc, depth, idx, d))
		return -1;
	if (!vm_map_prog_writable(d))
		return hfail(g, pc, 2, "the map is read-only for programs");
	uint32_t inst = g->next_inst++;
	OUT("mov.b64 %%__cb_r0, -7;\n"); /* -E2BIG, as Linux for an index past the end */
	OUT("@!%%__cb_p0 bra %sh%u;\n", ip, inst);
	OUT("mov.b64 %%__cb_r0, -17;\n"); /* -EEXIST: BPF_NOEXIST on an array */
	OUT("setp.eq.u64 %%__cb_p1, %%__cb_r4, %d;\n", BPF_NOEXIST);
	OUT("@%%__cb_p1 bra %sh%u;\n", ip, inst);
	if (ptx_cg_copy_value(g, pc, depth, d, "%__cb_t0"))
		return -1;
	OUT("mov.b64 %%__cb_r0, 0;\n");
	buf_printf(g->out, "%sh%u:\n", ip, inst);
	return 0;
}

static void sreg(struct cg *g, const char *dst, const char *sr)
{
	OUT("mov.u32 %%__cb_w0, %s;\n", sr);
	OUT("cvt.u64.u32 %s, %%__cb_w0;\n", dst);
}

/* (u64 *x, u64 *y, u64 *z) helpers. */
static int h_xyz(struct cg *g, uint32_t pc, uint32_t depth, const char *sr)
{
	static const char axis[3] = {'x', 'y', 'z'};
	for (int i = 0; i < 3; i++) {
		char A[64], S[16];
		struct sloc l;
		bool st;
		uint32_t al;
		if (ptr_arg(g, pc, depth, i + 1, 0, 8, A, sizeof(A), &l, &st, &al))
			return -1;
		snprintf(S, sizeof(S), "%s.%c", sr, axis[i]);
		sreg(g, "%__cb_t1", S);
		if (st)
			ptx_cg_sstore(g, &l, "%__cb_t1", 64, "");
		else
			ptx_cg_st(g, "", A, 0, "%__cb_t1", 64, 8, al, "");
	}
	OUT("mov.b64 %%__cb_r0, 0;\n");
	return 0;
}

static void vprintf_call(struct cg *g)
{
	g->res->vprintf = true;
	OUT("{\n");
	OUT(".param .b64 __cb_pa0;\n\t.param .b64 __cb_pa1;\n\t.param .b32 __cb_prv;\n");
	OUT("st.param.b64 [__cb_pa0], %%__cb_r1;\n");
	OUT("mov.u64 %%__cb_t0, __cubpf_pbuf;\n");
	OUT("cvta.local.u64 %%__cb_t0, %%__cb_t0;\n");
	OUT("st.param.b64 [__cb_pa1], %%__cb_t0;\n");
	OUT("call (__cb_prv), vprintf, (__cb_pa0, __cb_pa1);\n");
	OUT("ld.param.b32 %%__cb_w0, [__cb_prv];\n");
	OUT("}\n");
	OUT("cvt.s64.s32 %%__cb_r0, %%__cb_w0;\n");
}

/* bpf_gpu_puts(str): vprintf with str as the format, so str must be a constant NUL-terminated
 * string with no conversion (vprintf would read arguments it is not given). */
static int h_puts(struct cg *g, uint32_t pc)
{
	const struct av *f = arg(g, pc, 1);
	const struct vm_map_def *d = f->kind == AV_MAPVAL && f->map < g->p->map_cnt
					     ? &g->p->maps[f->map] : NULL;
	const char *str = d && d->init && f->v >= 0 && (uint64_t)f->v < d->value_size
				  ? (const char *)d->init + f->v : NULL;
	size_t n = str ? d->value_size - (size_t)f->v : 0;
	const char *end = str ? memchr(str, 0, n) : NULL;
	if (!end)
		return hfail(g, pc, CUBPF_FN_gpu_puts, "on the GPU the string must be a NUL-terminated "
				"constant in .rodata");
	struct vm_printk_fmt pf;
	if (vm_printk_parse(str, (size_t)(end - str), &pf, NULL, NULL, 0) < 0 || pf.nconv)
		return hfail(g, pc, CUBPF_FN_gpu_puts, "the string has a % conversion (write %% or use "
				"bpf_printk)");
	vprintf_call(g);
	return 0;
}

#define PSTR_OFF 32 /* %s copies in __cubpf_pbuf: 64 bytes per argument after the arguments */
#define PSTR_MAX 64

static int readable(struct cg *g, uint32_t depth);

/* The string argument r (a %s) copied into __cubpf_pbuf through the checked path (at most 63
 * bytes, each checked readable; an unreadable one ends the copy), T = its generic address. */
static int printk_str(struct cg *g, uint32_t depth, const char *ip, int r, int i, const char *T)
{
	uint32_t inst = g->next_inst++, base = PSTR_OFF + PSTR_MAX * (uint32_t)i;
	OUT("mov.b64 %%__cb_t0, 0;\n");
	buf_printf(g->out, "%ss%u:\n", ip, inst);
	OUT("mov.u64 %%__cb_t1, __cubpf_pbuf;\n");
	OUT("add.s64 %%__cb_t1, %%__cb_t1, %u;\n", base);
	OUT("add.s64 %%__cb_t1, %%__cb_t1, %%__cb_t0;\n");
	OUT("setp.ge.u64 %%__cb_p0, %%__cb_t0, %u;\n", PSTR_MAX - 1);
	OUT("@%%__cb_p0 bra %sz%u;\n", ip, inst);
	OUT("add.s64 %%__cb_v0, %%__cb_r%d, %%__cb_t0;\n", r);
	OUT("mov.b64 %%__cb_v1, 1;\n");
	if (readable(g, depth))
		return -1;
	OUT("setp.eq.u64 %%__cb_p0, %%__cb_v3, 0;\n");
	OUT("@%%__cb_p0 bra %sz%u;\n", ip, inst);
	OUT("ld.u8 %%__cb_w0, [%%__cb_v0];\n");
	OUT("st.local.u8 [%%__cb_t1], %%__cb_w0;\n");
	OUT("setp.eq.u32 %%__cb_p0, %%__cb_w0, 0;\n");
	OUT("@%%__cb_p0 bra %sz%u;\n", ip, inst);
	OUT("add.s64 %%__cb_t0, %%__cb_t0, 1;\n");
	OUT("bra %ss%u;\n", ip, inst);
	buf_printf(g->out, "%sz%u:\n", ip, inst);
	OUT("mov.u32 %%__cb_w0, 0;\n");
	OUT("st.local.u8 [%%__cb_t1], %%__cb_w0;\n");
	OUT("mov.u64 %s, __cubpf_pbuf;\n", T);
	OUT("add.s64 %s, %s, %u;\n", T, T, base);
	OUT("cvta.local.u64 %s, %s;\n", T, T);
	return 0;
}

/* bpf_trace_printk(fmt, fmt_size, a, b, c) -> vprintf.  The format must be a global constant
 * (.rodata, as bpf_printk makes it), known now and NUL-terminated within fmt_size: the
 * arguments are packed as C varargs would be (%d takes 4 bytes, %ld 8), and a %s argument is
 * copied through the checked path (vprintf would read an unchecked pointer and fault). */
static int h_printk(struct cg *g, uint32_t pc, uint32_t depth, const char *ip)
{
	const struct av *f = arg(g, pc, 1), *fs = arg(g, pc, 2);
	const struct vm_map_def *d = f->kind == AV_MAPVAL && f->map < g->p->map_cnt
					     ? &g->p->maps[f->map] : NULL;
	if (!d || !d->init || f->v < 0 || (uint64_t)f->v >= d->value_size)
		return hfail(g, pc, CUBPF_FN_trace_printk, "on the GPU the format must be a constant "
				"string in .rodata (bpf_printk puts it there)");
	size_t n = d->value_size - (size_t)f->v;
	if (fs->kind == AV_CONST && fs->v >= 0 && (uint64_t)fs->v < n)
		n = (size_t)fs->v;
	const char *fmt = (const char *)d->init + f->v;
	if (!memchr(fmt, 0, n))
		return hfail(g, pc, CUBPF_FN_trace_printk, "the format has no terminating NUL within "
				"its size");
	struct vm_printk_fmt pf;
	uint32_t at = 0;
	char why[128];
	if (vm_printk_parse(fmt, n, &pf, &at, why, sizeof(why)) < 0) {
		char msg[192];
		snprintf(msg, sizeof(msg), "the format at offset %u: %s", at, why);
		return hfail(g, pc, CUBPF_FN_trace_printk, msg);
	}
	uint32_t off = 0;
	for (uint32_t i = 0; i < pf.nconv; i++) { /* only what the format converts: r3-r5 past it
						   * may never have been set */
		char R[24];
		uint32_t size = pf.conv[i].size;
		snprintf(R, sizeof(R), "%%__cb_r%u", i + 3);
		if (pf.conv[i].conv == 's') {
			snprintf(R, sizeof(R), "%%__cb_v2");
			if (printk_str(g, depth, ip, (int)i + 3, (int)i, "%__cb_v2"))
				return -1;
		}
		off = (off + size - 1) & ~(size - 1);
		OUT("st.local.u%u [__cubpf_pbuf+%u], %s;\n", size * 8, off, R);
		off += size;
	}
	vprintf_call(g);
	return 0;
}

/* ---- reads of memory the program names by address (bpf_probe_read, printk's %s) ----
 * A GPU thread that loads from an unmapped or misaligned address kills the application's
 * context, so such reads are checked first against the memory cubpf knows is readable: the
 * probe's own stack frames, the storage of array maps (globals included), and for a memory
 * probe the bytes of the access it sits on (generic or global space).  The application's own
 * allocations are not known to the generated code: a read of them fails like any other. */

/* %__cb_v3 |= [%__cb_v0, %__cb_v0 + %__cb_v1) lies within [lo, lo + size). */
static void region(struct cg *g, const char *lo, uint64_t size)
{
	OUT("sub.s64 %%__cb_t2, %%__cb_v0, %s;\n", lo);
	OUT("setp.le.u64 %%__cb_g0, %%__cb_t2, %llu;\n", (unsigned long long)size);
	OUT("neg.s64 %%__cb_t2, %%__cb_t2;\n");
	OUT("add.s64 %%__cb_t2, %%__cb_t2, %llu;\n", (unsigned long long)size);
	OUT("setp.le.u64 %%__cb_g1, %%__cb_v1, %%__cb_t2;\n");
	OUT("and.pred %%__cb_g0, %%__cb_g0, %%__cb_g1;\n");
	OUT("@%%__cb_g0 mov.b64 %%__cb_v3, 1;\n");
}

/* %__cb_v3 = 1 when the %__cb_v1 bytes at %__cb_v0 are readable (see above), else 0. */
static int readable(struct cg *g, uint32_t depth)
{
	OUT("mov.b64 %%__cb_v3, 0;\n");
	if (g->p->escape && g->p->frame) { /* frames 0..depth: __cubpf_stack holds them */
		OUT("mov.u64 %%__cb_v2, __cubpf_stack;\n");
		OUT("cvta.local.u64 %%__cb_v2, %%__cb_v2;\n");
		region(g, "%__cb_v2", (uint64_t)(depth + 1) * g->p->frame);
	}
	for (uint32_t i = 0; i < g->p->map_cnt && i < 64; i++) {
		const struct vm_map_def *d = &g->p->maps[i];
		if (d->type != CUBPF_MAP_ARRAY && d->type != CUBPF_MAP_GPU_ARRAY)
			continue;
		g->res->maps_used |= 1ull << i;
		ptx_cg_map_ptr(g, "%__cb_v2", i);
		region(g, "%__cb_v2", (uint64_t)ptx_map_value_stride(d) * d->max_entries);
	}
	uint64_t size, space;
	if (g->ctx && g->ctx->constant && g->p->prog.kind == VM_PROG_MEMPROBE &&
	    g->ctx->constant(g->ctx->user, offsetof(struct cubpf_mem_ctx, size), 4, &size) &&
	    g->ctx->constant(g->ctx->user, offsetof(struct cubpf_mem_ctx, space), 4, &space) &&
	    (space == CUBPF_SPACE_GENERIC || space == CUBPF_SPACE_GLOBAL)) {
		if (g->ctx->load(g->ctx->user, g->out, "%__cb_v2", offsetof(struct cubpf_mem_ctx, addr),
				 8, g->err, g->errlen))
			return -1;
		region(g, "%__cb_v2", size);
	}
	return 0;
}

/* bpf_probe_read(dst, size, src): a checked copy; a refused one zeroes dst and returns -EFAULT,
 * as Linux does. */
static int probe_read(struct cg *g, uint32_t depth, const char *ip)
{
	uint32_t inst = g->next_inst++;
	OUT("mov.b64 %%__cb_v0, %%__cb_r3;\n");
	OUT("and.b64 %%__cb_v1, %%__cb_r2, 0xffffffff;\n");
	if (readable(g, depth))
		return -1;
	OUT("setp.eq.u64 %%__cb_g1, %%__cb_v1, 0;\n"); /* nothing to read: 0, as on the host */
	OUT("@%%__cb_g1 mov.b64 %%__cb_v3, 1;\n");
	OUT("setp.ne.u64 %%__cb_g0, %%__cb_v3, 0;\n");
	OUT("mov.b64 %%__cb_r0, 0;\n");
	OUT("@!%%__cb_g0 mov.b64 %%__cb_r0, -14;\n"); /* -EFAULT */
	OUT("mov.b64 %%__cb_t0, 0;\n");
	buf_printf(g->out, "%sl%u:\n", ip, inst);
	OUT("setp.ge.u64 %%__cb_p0, %%__cb_t0, %%__cb_v1;\n");
	OUT("@%%__cb_p0 bra %se%u;\n", ip, inst);
	OUT("mov.u32 %%__cb_w0, 0;\n");
	OUT("add.s64 %%__cb_t1, %%__cb_v0, %%__cb_t0;\n");
	OUT("@%%__cb_g0 ld.u8 %%__cb_w0, [%%__cb_t1];\n");
	OUT("add.s64 %%__cb_t1, %%__cb_r1, %%__cb_t0;\n");
	OUT("st.u8 [%%__cb_t1], %%__cb_w0;\n");
	OUT("add.s64 %%__cb_t0, %%__cb_t0, 1;\n");
	OUT("bra %sl%u;\n", ip, inst);
	buf_printf(g->out, "%se%u:\n", ip, inst);
	return 0;
}

/* bpf_warp_count_unique(v): distinct values among the active lanes.  The common case first: a
 * whole warp whose values rise by 0 or 1 from lane to lane (a coalesced access's sectors):
 * the count is 1 + the rises, two shuffles and two votes.  Otherwise the lanes holding each
 * value elect their lowest (match.any) and the electees are counted: exact for any values, but
 * match.any costs a memory-bound kernel far more (b_probe_lines.sh: 1.83x on vec_add for the
 * general form at every access). */
static void warp_count_unique(struct cg *g, const char *ip)
{
	uint32_t inst = g->next_inst++;
	char slow[96], done[96];
	snprintf(slow, sizeof(slow), "%su%u_s", ip, inst);
	snprintf(done, sizeof(done), "%su%u_d", ip, inst);
	OUT("activemask.b32 %%__cb_w0;\n");
	OUT("setp.ne.u32 %%__cb_p1, %%__cb_w0, 0xffffffff;\n");
	OUT("@%%__cb_p1 bra %s;\n", slow);
	OUT("mov.b64 {%%__cb_w1, %%__cb_w2}, %%__cb_r1;\n");
	OUT("shfl.sync.up.b32 %%__cb_w3, %%__cb_w1, 1, 0, 0xffffffff;\n"); /* lane 0: its own */
	OUT("shfl.sync.up.b32 %%__cb_w4, %%__cb_w2, 1, 0, 0xffffffff;\n");
	OUT("mov.b64 %%__cb_t1, {%%__cb_w3, %%__cb_w4};\n");
	OUT("sub.s64 %%__cb_t1, %%__cb_r1, %%__cb_t1;\n");
	OUT("setp.le.u64 %%__cb_p1, %%__cb_t1, 1;\n");
	OUT("vote.sync.all.pred %%__cb_p1, %%__cb_p1, 0xffffffff;\n");
	OUT("@!%%__cb_p1 bra %s;\n", slow);
	OUT("setp.eq.u64 %%__cb_p1, %%__cb_t1, 1;\n");
	OUT("vote.sync.ballot.b32 %%__cb_w3, %%__cb_p1, 0xffffffff;\n");
	OUT("popc.b32 %%__cb_w3, %%__cb_w3;\n");
	OUT("add.u32 %%__cb_w3, %%__cb_w3, 1;\n");
	OUT("cvt.u64.u32 %%__cb_r0, %%__cb_w3;\n");
	OUT("bra %s;\n", done);
	buf_printf(g->out, "%s:\n", slow);
	OUT("match.any.sync.b64 %%__cb_w1, %%__cb_r1, %%__cb_w0;\n");
	OUT("mov.u32 %%__cb_w2, %%lanemask_lt;\n");
	OUT("and.b32 %%__cb_w2, %%__cb_w2, %%__cb_w1;\n");
	OUT("setp.eq.u32 %%__cb_p1, %%__cb_w2, 0;\n");
	OUT("vote.sync.ballot.b32 %%__cb_w3, %%__cb_p1, %%__cb_w0;\n");
	OUT("popc.b32 %%__cb_w3, %%__cb_w3;\n");
	OUT("cvt.u64.u32 %%__cb_r0, %%__cb_w3;\n");
	buf_printf(g->out, "%s:\n", done);
}

/* bpf_warp_sum(v): the 64-bit sum of v over the active lanes, the same in each.  With
 * redux.sync (32-bit sums): when every lane's value is below 2^27 (the common case: counts of
 * one warp's threads), one redux of the low words (32 of them cannot carry out of 32 bits);
 * else the high words summed (mod 2^32, all that shows past bit 32), the low words in two
 * 16-bit halves, put together: three reductions, each a round through the warp's
 * convergence unit, where the test costs a compare and a vote (issue 32: kretprobes and
 * bbretprobes sum at every warp's exit, once per basic block for the latter).
 * Before sm_80: each active lane's value in turn, broadcast with shuffles (sm_70's .sync), in a
 * loop at label `loop` (with redux: `loop`s and `loop`d label the paths). */
void ptx_cg_warp_sum(struct ptx_buf *out, bool redux, const char *loop)
{
	buf_printf(out, "\tactivemask.b32 %%__cb_w0;\n");
	buf_printf(out, "\tmov.b64 {%%__cb_w1, %%__cb_w2}, %%__cb_r1;\n");
	if (redux) {
		buf_printf(out, "\tsetp.lt.u64 %%__cb_p1, %%__cb_r1, %u;\n", 1u << 27);
		ptx_buf_puts(out, "\tvote.sync.all.pred %__cb_p1, %__cb_p1, %__cb_w0;\n");
		buf_printf(out, "\t@!%%__cb_p1 bra %ss;\n", loop);
		ptx_buf_puts(out, "\tredux.sync.add.u32 %__cb_w1, %__cb_w1, %__cb_w0;\n"
				  "\tcvt.u64.u32 %__cb_r0, %__cb_w1;\n");
		buf_printf(out, "\tbra %sd;\n%ss:\n", loop, loop);
		ptx_buf_puts(out, "\tredux.sync.add.u32 %__cb_w2, %__cb_w2, %__cb_w0;\n"
				  "\tshr.u32 %__cb_w3, %__cb_w1, 16;\n"
				  "\tand.b32 %__cb_w1, %__cb_w1, 65535;\n"
				  "\tredux.sync.add.u32 %__cb_w3, %__cb_w3, %__cb_w0;\n"
				  "\tredux.sync.add.u32 %__cb_w1, %__cb_w1, %__cb_w0;\n"
				  "\tmov.b64 %__cb_r0, {%__cb_w1, %__cb_w2};\n"
				  "\tcvt.u64.u32 %__cb_t1, %__cb_w3;\n"
				  "\tshl.b64 %__cb_t1, %__cb_t1, 16;\n"
				  "\tadd.s64 %__cb_r0, %__cb_r0, %__cb_t1;\n");
		buf_printf(out, "%sd:\n", loop);
		return;
	}
	ptx_buf_puts(out, "\tmov.b64 %__cb_r0, 0;\n\tmov.b32 %__cb_w3, %__cb_w0;\n");
	buf_printf(out, "%s:\n", loop);
	ptx_buf_puts(out, "\tbrev.b32 %__cb_w4, %__cb_w3;\n"
			  "\tclz.b32 %__cb_w4, %__cb_w4;\n" /* the lowest lane left */
			  "\tshfl.sync.idx.b32 %__cb_w5, %__cb_w1, %__cb_w4, 31, %__cb_w0;\n"
			  "\tshfl.sync.idx.b32 %__cb_w4, %__cb_w2, %__cb_w4, 31, %__cb_w0;\n"
			  "\tmov.b64 %__cb_t1, {%__cb_w5, %__cb_w4};\n"
			  "\tadd.s64 %__cb_r0, %__cb_r0, %__cb_t1;\n"
			  "\tadd.u32 %__cb_w4, %__cb_w3, -1;\n"
			  "\tand.b32 %__cb_w3, %__cb_w3, %__cb_w4;\n"
			  "\tsetp.ne.u32 %__cb_p1, %__cb_w3, 0;\n");
	buf_printf(out, "\t@%%__cb_p1 bra %s;\n", loop);
}

static void warp_sum(struct cg *g, const char *ip)
{
	char loop[96];
	snprintf(loop, sizeof(loop), "%sws%u", ip, g->next_inst++);
	ptx_cg_warp_sum(g->out, g->p->redux, loop);
}

/* bpf_gpu_delay_ns(ns): spins until %globaltimer has moved ns past its first reading (the
 * verifier bounds ns to CUBPF_MAX_DELAY_NS).  %globaltimer rather than %clock64: nanoseconds
 * whatever the SM's clock does. */
static void gpu_delay(struct cg *g, const char *ip)
{
	uint32_t inst = g->next_inst++;
	OUT("mov.u64 %%__cb_t0, %%globaltimer;\n");
	buf_printf(g->out, "%sd%u:\n", ip, inst);
	OUT("mov.u64 %%__cb_t1, %%globaltimer;\n");
	OUT("sub.u64 %%__cb_t1, %%__cb_t1, %%__cb_t0;\n");
	OUT("setp.lt.u64 %%__cb_p0, %%__cb_t1, %%__cb_r1;\n");
	OUT("@%%__cb_p0 bra %sd%u;\n", ip, inst);
	OUT("mov.b64 %%__cb_r0, 0;\n");
}

int ptx_cg_helper(struct cg *g, uint32_t pc, uint32_t id, uint32_t depth, const char *ip)
{
	switch (id) {
	case CUBPF_FN_map_lookup_elem:
		return h_lookup(g, pc, depth, ip);
	case CUBPF_FN_map_update_elem:
		return h_update(g, pc, depth, ip);
	case CUBPF_FN_map_delete_elem: {
		uint32_t idx;
		const struct vm_map_def *d = array_map(g, pc, id, &idx);
		if (!d)
			return -1;
		if (!plain_array(d))
			return ptx_cg_map_op(g, pc, id, depth, ip, idx, d);
		OUT("mov.b64 %%__cb_r0, -22;\n"); /* -EINVAL: array elements cannot be deleted */
		return 0;
	}
	case CUBPF_FN_ringbuf_output:
		return ptx_cg_ringbuf_output(g, pc, depth, ip);
	case CUBPF_FN_probe_read:
	case CUBPF_FN_probe_read_user:
		return probe_read(g, depth, ip);
	case CUBPF_FN_ktime_get_ns:
	case CUBPF_FN_get_globaltimer:
		OUT("mov.u64 %%__cb_r0, %%globaltimer;\n");
		return 0;
	case CUBPF_FN_get_clock:
		OUT("mov.u64 %%__cb_r0, %%clock64;\n");
		return 0;
	case CUBPF_FN_trace_printk:
		return h_printk(g, pc, depth, ip);
	case CUBPF_FN_gpu_puts:
		return h_puts(g, pc);
	case CUBPF_FN_get_smp_processor_id:
	case CUBPF_FN_get_sm_id:
		sreg(g, "%__cb_r0", "%smid");
		return 0;
	case CUBPF_FN_get_warp_id:
		sreg(g, "%__cb_r0", "%warpid");
		return 0;
	case CUBPF_FN_get_lane_id:
		sreg(g, "%__cb_r0", "%laneid");
		return 0;
	case CUBPF_FN_get_block_idx:
		return h_xyz(g, pc, depth, "%ctaid");
	case CUBPF_FN_get_block_dim:
		return h_xyz(g, pc, depth, "%ntid");
	case CUBPF_FN_get_thread_idx:
		return h_xyz(g, pc, depth, "%tid");
	case CUBPF_FN_get_grid_dim:
		return h_xyz(g, pc, depth, "%nctaid");
	case CUBPF_FN_gpu_membar:
		OUT("membar.gl;\n");
		OUT("mov.b64 %%__cb_r0, 0;\n");
		return 0;
	case CUBPF_FN_get_active_mask:
		OUT("activemask.b32 %%__cb_w0;\n");
		OUT("cvt.u64.u32 %%__cb_r0, %%__cb_w0;\n");
		return 0;
	case CUBPF_FN_get_active_count:
		OUT("activemask.b32 %%__cb_w0;\n");
		OUT("popc.b32 %%__cb_w0, %%__cb_w0;\n");
		OUT("cvt.u64.u32 %%__cb_r0, %%__cb_w0;\n");
		return 0;
	case CUBPF_FN_is_warp_leader: /* no active lane below this one */
		OUT("activemask.b32 %%__cb_w0;\n");
		OUT("mov.u32 %%__cb_w1, %%lanemask_lt;\n");
		OUT("and.b32 %%__cb_w1, %%__cb_w1, %%__cb_w0;\n");
		OUT("setp.eq.u32 %%__cb_p1, %%__cb_w1, 0;\n");
		OUT("selp.u64 %%__cb_r0, 1, 0, %%__cb_p1;\n");
		return 0;
	case CUBPF_FN_warp_count_unique:
		warp_count_unique(g, ip);
		return 0;
	case CUBPF_FN_gpu_delay_ns:
		gpu_delay(g, ip);
		return 0;
	case CUBPF_FN_warp_sum:
		warp_sum(g, ip);
		return 0;
	}
	return hfail(g, pc, id, "not available on the GPU");
}
