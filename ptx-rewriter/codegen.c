/* eBPF -> PTX: one PTX instruction sequence per eBPF instruction, with the semantics of RFC 9669
 * (and of the host interpreter): division by zero gives 0, modulo by zero leaves dst, shift
 * amounts are masked, signed INT_MIN / -1 wraps, 32-bit results are zero-extended.
 *
 * Registers: r0..r10 are %__cb_r0..10 (.b64); temporaries %__cb_t (.b64), %__cb_w (.b32),
 * %__cb_p (.pred); %__cb_s saves r6..r10 around inlined bpf-to-bpf calls.  The stack is the
 * .local array __cubpf_stack; accesses whose address is known statically (r10 + constant,
 * the usual case) become ld.local/st.local at a fixed offset, so no stack pointer is needed.
 * bpf-to-bpf calls are inlined at each call site (the verifier forbids recursion and bounds
 * depth), which keeps probes straight-line code the JIT optimises as a whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/cgint.h"

#define R "%%__cb_r"
#define OUT(...) buf_printf(g->out, "\t" __VA_ARGS__)

static int fail(struct cg *g, uint32_t pc, const char *what)
{
	ptx_seterr(g->err, g->errlen, "%s insn %u: %s", g->p->prog.name ? g->p->prog.name : "program",
		   pc, what);
	return -1;
}

long ptx_cg_stack_off(const struct cg *g, uint32_t depth, int64_t v, uint32_t size)
{
	int64_t top = (int64_t)(depth + 1) * g->p->frame;
	int64_t o = top + v;
	if (o < (int64_t)depth * g->p->frame || o + size > top)
		return -1;
	return (long)o;
}

int ptx_cg_sloc(struct cg *g, uint32_t depth, int64_t v, uint32_t size, struct sloc *l)
{
	l->size = size;
	if (g->p->promoted) {
		for (uint32_t i = 0; i < g->p->nslots; i++)
			if (g->p->slots[i].off == v && g->p->slots[i].size == size) {
				l->reg = true;
				snprintf(l->ref, sizeof(l->ref), "%%__cb_k%u", i);
				return 0;
			}
		return -1; /* cannot happen: every static access was recorded */
	}
	long o = ptx_cg_stack_off(g, depth, v, size);
	if (o < 0)
		return -1;
	l->reg = false;
	l->off = o;
	snprintf(l->ref, sizeof(l->ref), "__cubpf_stack+%ld", o);
	if ((uint64_t)o + size > g->res->stack_bytes)
		g->res->stack_bytes = (uint32_t)o + size;
	return 0;
}

static uint32_t piece_of(uint32_t size, uint32_t align)
{
	return align >= size ? size : align ? align : 1;
}

void ptx_cg_ld(struct cg *g, const char *sp, const char *T, int bits, const char *B, int64_t off,
	   uint32_t size, uint32_t align, bool sx)
{
	uint32_t pc = piece_of(size, align);
	if (pc == size) {
		OUT("ld%s.%c%u %s, [%s+%lld];\n", sp, sx ? 's' : 'u', size * 8, T, B, (long long)off);
		return;
	}
	/* %__cb_u0 accumulates, so that T may also be the base register */
	for (uint32_t i = 0; i < size; i += pc) {
		const char *D = i ? "%__cb_u1" : "%__cb_u0";
		OUT("ld%s.u%u %s, [%s+%lld];\n", sp, pc * 8, D, B, (long long)(off + i));
		if (!i)
			continue;
		OUT("shl.b64 %%__cb_u1, %%__cb_u1, %u;\n", i * 8);
		OUT("or.b64 %%__cb_u0, %%__cb_u0, %%__cb_u1;\n");
	}
	if (sx && size < 8)
		OUT("bfe.s64 %%__cb_u0, %%__cb_u0, 0, %u;\n", size * 8);
	if (bits == 32)
		OUT("cvt.u32.u64 %s, %%__cb_u0;\n", T);
	else
		OUT("mov.b64 %s, %%__cb_u0;\n", T);
}

void ptx_cg_st(struct cg *g, const char *sp, const char *B, int64_t off, const char *S, int bits,
	   uint32_t size, uint32_t align, const char *guard)
{
	uint32_t pc = piece_of(size, align);
	if (pc == size) {
		OUT("%sst%s.u%u [%s+%lld], %s;\n", guard, sp, size * 8, B, (long long)off, S);
		return;
	}
	if (bits == 0) { /* a literal: its pieces are literals too */
		uint64_t v = S[0] == '-' ? (uint64_t)strtoll(S, NULL, 0) : strtoull(S, NULL, 0);
		uint64_t m = pc == 8 ? ~0ull : (1ull << (8 * pc)) - 1;
		for (uint32_t i = 0; i < size; i += pc)
			OUT("%sst%s.u%u [%s+%lld], %llu;\n", guard, sp, pc * 8, B,
			    (long long)(off + i), (unsigned long long)((v >> (8 * i)) & m));
		return;
	}
	OUT("%s %%__cb_u0, %s;\n", bits == 32 ? "cvt.u64.u32" : "mov.b64", S);
	for (uint32_t i = 0; i < size; i += pc) {
		OUT("shr.u64 %%__cb_u1, %%__cb_u0, %u;\n", i * 8);
		OUT("%sst%s.u%u [%s+%lld], %%__cb_u1;\n", guard, sp, pc * 8, B, (long long)(off + i));
	}
}

static uint32_t sloc_align(const struct sloc *l)
{
	uint32_t a = 16;
	while (a > 1 && l->off % a)
		a /= 2;
	return a;
}

void ptx_cg_sload(struct cg *g, const struct sloc *l, const char *T, int bits, bool sx)
{
	if (!l->reg) {
		ptx_cg_ld(g, ".local", T, bits, "__cubpf_stack", l->off, l->size, sloc_align(l), sx);
		return;
	}
	if (sx && l->size < 8)
		OUT("bfe.s%d %s, %s, 0, %u;\n", bits, T, bits == 64 ? l->ref : "%__cb_w5", l->size * 8);
	if (sx && l->size < 8 && bits == 32)
		return; /* (not reached: 32-bit loads are never sign-extending) */
	if (!(sx && l->size < 8))
		OUT("%s %s, %s;\n", bits == 64 ? "mov.b64" : "cvt.u32.u64", T, l->ref);
}

void ptx_cg_sstore(struct cg *g, const struct sloc *l, const char *S, int bits, const char *guard)
{
	if (!l->reg) {
		ptx_cg_st(g, ".local", "__cubpf_stack", l->off, S, bits, l->size, sloc_align(l), guard);
		return;
	}
	uint64_t mask = l->size == 8 ? ~0ull : (1ull << (8 * l->size)) - 1;
	if (bits == 0) /* literal, already truncated */
		OUT("%smov.b64 %s, %s;\n", guard, l->ref, S);
	else if (bits == 32 && l->size == 4)
		OUT("%scvt.u64.u32 %s, %s;\n", guard, l->ref, S);
	else if (bits == 32) {
		OUT("cvt.u64.u32 %%__cb_t3, %s;\n", S);
		OUT("%sand.b64 %s, %%__cb_t3, %llu;\n", guard, l->ref, (unsigned long long)mask);
	} else if (l->size == 8)
		OUT("%smov.b64 %s, %s;\n", guard, l->ref, S);
	else
		OUT("%sand.b64 %s, %s, %llu;\n", guard, l->ref, S, (unsigned long long)mask);
}

/* A register operand that must hold a runtime value (not the context pointer). */
static int val(struct cg *g, uint32_t pc, uint8_t r)
{
	uint8_t k = g->p->st[pc].r[r].kind;
	if (k == AV_CTX || k == AV_CONFLICT)
		return fail(g, pc, "the context pointer is used as a value (only loads through it, "
				   "at constant offsets, compile to GPU code)");
	return 0;
}

/* ---- ALU ---- */

static const char *alu_name(uint8_t op, bool sgn)
{
	switch (op) {
	case BPF_ADD: return "add.s";
	case BPF_SUB: return "sub.s";
	case BPF_MUL: return "mul.lo.s";
	case BPF_OR: return "or.b";
	case BPF_AND: return "and.b";
	case BPF_XOR: return "xor.b";
	case BPF_LSH: return "shl.b";
	case BPF_RSH: return "shr.u";
	case BPF_ARSH: return "shr.s";
	case BPF_DIV: return sgn ? "div.s" : "div.u";
	case BPF_MOD: return sgn ? "rem.s" : "rem.u";
	}
	return NULL;
}

/* dst = dst op src for DIV/MOD, with the zero and -1 rules.  D and S name registers of `bits`
 * bits; when S is NULL the source is the constant k. */
static void emit_divmod(struct cg *g, int bits, bool mod, bool sgn, const char *D, const char *S,
			int64_t k)
{
	const char *name = alu_name(mod ? BPF_MOD : BPF_DIV, sgn);
	if (!S) {
		if (bits == 32)
			k = sgn ? (int32_t)k : (int64_t)(uint32_t)k;
		if (k == 0) {
			if (!mod)
				OUT("mov.b%d %s, 0;\n", bits, D);
		} else if (sgn && k == -1) {
			if (mod)
				OUT("mov.b%d %s, 0;\n", bits, D);
			else
				OUT("neg.s%d %s, %s;\n", bits, D, D);
		} else {
			OUT("%s%d %s, %s, %lld;\n", name, bits, D, D, (long long)k);
		}
		return;
	}
	OUT("setp.eq.s%d %%__cb_p0, %s, 0;\n", bits, S);
	if (sgn) {
		OUT("setp.eq.s%d %%__cb_p1, %s, -1;\n", bits, S);
		OUT("or.pred %%__cb_p2, %%__cb_p0, %%__cb_p1;\n");
		OUT("@!%%__cb_p2 %s%d %s, %s, %s;\n", name, bits, D, D, S);
		if (mod)
			OUT("@%%__cb_p1 mov.b%d %s, 0;\n", bits, D);
		else
			OUT("@%%__cb_p1 neg.s%d %s, %s;\n", bits, D, D);
	} else {
		OUT("@!%%__cb_p0 %s%d %s, %s, %s;\n", name, bits, D, D, S);
	}
	if (!mod)
		OUT("@%%__cb_p0 mov.b%d %s, 0;\n", bits, D);
}

static void emit_bswap(struct cg *g, const char *D, int width)
{
	if (width == 64) {
		OUT("mov.b64 {%%__cb_w0, %%__cb_w1}, %s;\n", D);
		OUT("prmt.b32 %%__cb_w2, %%__cb_w0, 0, 0x0123;\n");
		OUT("prmt.b32 %%__cb_w3, %%__cb_w1, 0, 0x0123;\n");
		OUT("mov.b64 %s, {%%__cb_w3, %%__cb_w2};\n", D);
		return;
	}
	OUT("cvt.u32.u64 %%__cb_w0, %s;\n", D);
	OUT("prmt.b32 %%__cb_w0, %%__cb_w0, 0, %s;\n", width == 16 ? "0x4401" : "0x0123");
	OUT("cvt.u64.u32 %s, %%__cb_w0;\n", D);
}

static int emit_end(struct cg *g, uint32_t pc, const struct bpf_insn *in, const char *D)
{
	if (in->imm != 16 && in->imm != 32 && in->imm != 64)
		return fail(g, pc, "byte swap width must be 16, 32 or 64");
	bool swap = BPF_CLASS(in->code) == BPF_ALU64 || BPF_SRC(in->code) == BPF_TO_BE;
	if (swap)
		emit_bswap(g, D, in->imm);
	else if (in->imm == 16)
		OUT("and.b64 %s, %s, 0xFFFF;\n", D, D);
	else if (in->imm == 32)
		OUT("and.b64 %s, %s, 0xFFFFFFFF;\n", D, D);
	return 0;
}

static int emit_alu64(struct cg *g, uint32_t pc, const struct bpf_insn *in, const char *D)
{
	uint8_t op = BPF_OP(in->code);
	bool k = BPF_SRC(in->code) == BPF_K;
	char S[24];
	snprintf(S, sizeof(S), "%%__cb_r%u", in->src_reg);
	char SK[24];
	snprintf(SK, sizeof(SK), "%lld", (long long)in->imm);
	const char *src = k ? SK : S;
	switch (op) {
	case BPF_MOV:
		if (k || in->off == 0)
			OUT("mov.b64 %s, %s;\n", D, src);
		else if (in->off == 8 || in->off == 16 || in->off == 32)
			OUT("bfe.s64 %s, %s, 0, %d;\n", D, S, in->off);
		else
			return fail(g, pc, "bad movsx width");
		return 0;
	case BPF_NEG:
		OUT("neg.s64 %s, %s;\n", D, D);
		return 0;
	case BPF_LSH:
	case BPF_RSH:
	case BPF_ARSH:
		if (k) {
			OUT("%s64 %s, %s, %d;\n", alu_name(op, 0), D, D, in->imm & 63);
		} else {
			OUT("cvt.u32.u64 %%__cb_w4, %s;\n", S);
			OUT("and.b32 %%__cb_w4, %%__cb_w4, 63;\n");
			OUT("%s64 %s, %s, %%__cb_w4;\n", alu_name(op, 0), D, D);
		}
		return 0;
	case BPF_DIV:
	case BPF_MOD:
		if (in->off != 0 && in->off != 1)
			return fail(g, pc, "bad div/mod offset");
		emit_divmod(g, 64, op == BPF_MOD, in->off == 1, D, k ? NULL : S, in->imm);
		return 0;
	case BPF_END:
		return emit_end(g, pc, in, D);
	}
	const char *name = alu_name(op, 0);
	if (!name)
		return fail(g, pc, "unknown ALU64 operation");
	OUT("%s64 %s, %s, %s;\n", name, D, D, src);
	return 0;
}

static int emit_alu32(struct cg *g, uint32_t pc, const struct bpf_insn *in, const char *D)
{
	uint8_t op = BPF_OP(in->code);
	bool k = BPF_SRC(in->code) == BPF_K;
	if (op == BPF_END)
		return emit_end(g, pc, in, D);
	char SK[24];
	snprintf(SK, sizeof(SK), "%d", in->imm);
	const char *src = k ? SK : "%__cb_w1";
	if (!k)
		OUT("cvt.u32.u64 %%__cb_w1, %%__cb_r%u;\n", in->src_reg);
	if (op == BPF_MOV) {
		if (k)
			OUT("mov.b64 %s, %u;\n", D, (uint32_t)in->imm);
		else if (in->off == 0)
			OUT("cvt.u64.u32 %s, %%__cb_w1;\n", D);
		else if (in->off == 8 || in->off == 16) {
			OUT("bfe.s32 %%__cb_w0, %%__cb_w1, 0, %d;\n", in->off);
			OUT("cvt.u64.u32 %s, %%__cb_w0;\n", D);
		} else
			return fail(g, pc, "bad movsx width");
		return 0;
	}
	OUT("cvt.u32.u64 %%__cb_w0, %s;\n", D);
	switch (op) {
	case BPF_NEG:
		OUT("neg.s32 %%__cb_w0, %%__cb_w0;\n");
		break;
	case BPF_LSH:
	case BPF_RSH:
	case BPF_ARSH:
		if (k) {
			OUT("%s32 %%__cb_w0, %%__cb_w0, %d;\n", alu_name(op, 0), in->imm & 31);
		} else {
			OUT("and.b32 %%__cb_w1, %%__cb_w1, 31;\n");
			OUT("%s32 %%__cb_w0, %%__cb_w0, %%__cb_w1;\n", alu_name(op, 0));
		}
		break;
	case BPF_DIV:
	case BPF_MOD:
		if (in->off != 0 && in->off != 1)
			return fail(g, pc, "bad div/mod offset");
		emit_divmod(g, 32, op == BPF_MOD, in->off == 1, "%__cb_w0", k ? NULL : "%__cb_w1",
			    in->imm);
		break;
	default: {
		const char *name = alu_name(op, 0);
		if (!name)
			return fail(g, pc, "unknown ALU operation");
		OUT("%s32 %%__cb_w0, %%__cb_w0, %s;\n", name, src);
	}
	}
	OUT("cvt.u64.u32 %s, %%__cb_w0;\n", D);
	return 0;
}

static int emit_alu(struct cg *g, uint32_t pc, const struct bpf_insn *in)
{
	if (in->dst_reg > 9)
		return fail(g, pc, "r10 is read-only");
	uint8_t op = BPF_OP(in->code);
	const struct av *d = &g->p->st[pc].r[in->dst_reg];
	bool addk = BPF_CLASS(in->code) == BPF_ALU64 && (op == BPF_ADD || op == BPF_SUB) &&
		    (BPF_SRC(in->code) == BPF_K || g->p->st[pc].r[in->src_reg].kind == AV_CONST);
	if (addk && d->kind == AV_CTX)
		return 0; /* ctx + constant: tracked statically (before val(), which refuses ctx) */
	if (op != BPF_MOV && val(g, pc, in->dst_reg))
		return -1;
	if (BPF_SRC(in->code) == BPF_X && op != BPF_END && op != BPF_NEG) {
		const struct av *s = &g->p->st[pc].r[in->src_reg];
		bool ctx_copy = op == BPF_MOV && BPF_CLASS(in->code) == BPF_ALU64 && in->off == 0;
		if (!ctx_copy && val(g, pc, in->src_reg))
			return -1;
		if (ctx_copy && (s->kind == AV_CTX || s->kind == AV_CONFLICT))
			return 0; /* a copy of the context pointer: nothing to compute */
	}
	/* Stack addresses that never escape are only used statically: computing them would
	 * take the address of the stack array and keep the JIT from putting it in registers. */
	bool stack_copy = op == BPF_MOV && BPF_CLASS(in->code) == BPF_ALU64 &&
			  BPF_SRC(in->code) == BPF_X && in->off == 0 &&
			  g->p->st[pc].r[in->src_reg].kind == AV_STACK;
	if (!g->p->escape && (stack_copy || (addk && d->kind == AV_STACK)))
		return 0;
	char D[24];
	snprintf(D, sizeof(D), "%%__cb_r%u", in->dst_reg);
	uint64_t v;
	if (ptx_cg_alu_known(g->p, pc, &v)) { /* folded: inputs known at this site */
		OUT("mov.b64 %s, %lld;\n", D, (long long)v);
		return 0;
	}
	return BPF_CLASS(in->code) == BPF_ALU64 ? emit_alu64(g, pc, in, D)
						 : emit_alu32(g, pc, in, D);
}

/* ---- memory ---- */

static uint32_t width_bytes(uint8_t size)
{
	return size == BPF_B ? 1 : size == BPF_H ? 2 : size == BPF_W ? 4 : 8;
}

/* The state space of an access through register r: ".global" for map values, else generic.
 * Map pointers are the driver's device addresses, which are global-window addresses as they
 * stand (cvta.to.global is the identity there, and ptxas emits nothing for it). */
static const char *space(const struct cg *g, uint32_t pc, uint8_t r)
{
	return ptx_av_global(&g->p->st[pc].r[r]) ? ".global" : "";
}

/* The address of [r + off]: a static stack location (*stack set) or a generic address. */
static int address(struct cg *g, uint32_t pc, uint32_t depth, uint8_t r, int16_t off,
		   uint32_t size, char *A, size_t alen, struct sloc *stack, bool *is_stack,
		   uint32_t *align)
{
	*align = ptx_av_align(&g->p->st[pc].r[r], off);
	const struct av *a = &g->p->st[pc].r[r];
	*is_stack = a->kind == AV_STACK;
	if (*is_stack) {
		if (ptx_cg_sloc(g, depth, a->v + off, size, stack))
			return fail(g, pc, "stack access outside the frame");
		return 0;
	}
	if (val(g, pc, r))
		return -1;
	snprintf(A, alen, "%%__cb_r%u", r);
	return 0;
}

static int emit_ldx(struct cg *g, uint32_t pc, uint32_t depth, const struct bpf_insn *in)
{
	uint8_t mode = BPF_MODE(in->code), size = BPF_SIZE(in->code);
	if (mode != BPF_MEM && mode != BPF_MEMSX)
		return fail(g, pc, "unsupported load mode");
	if (in->dst_reg > 9)
		return fail(g, pc, "r10 is read-only");
	const struct av *a = &g->p->st[pc].r[in->src_reg];
	char D[24];
	snprintf(D, sizeof(D), "%%__cb_r%u", in->dst_reg);
	if (a->kind == AV_CTX) {
		if (!g->ctx || mode == BPF_MEMSX)
			return fail(g, pc, "context load not supported here");
		int64_t off = a->v + in->off;
		uint64_t v;
		if (off < 0 || off > 0xffff)
			return fail(g, pc, "context load out of range");
		/* a field constant at this site (what the analysis folded): the value itself, so
		 * that no context source has to emit its constants again */
		if (g->ctx->constant && g->ctx->constant(g->ctx->user, (uint32_t)off,
							 width_bytes(size), &v)) {
			OUT("mov.b64 %s, %llu;\n", D, (unsigned long long)v);
			return 0;
		}
		return g->ctx->load(g->ctx->user, g->out, D, (uint32_t)off, width_bytes(size), g->err,
				    g->errlen);
	}
	char A[64];
	struct sloc l;
	bool st;
	uint32_t al;
	if (address(g, pc, depth, in->src_reg, in->off, width_bytes(size), A, sizeof(A), &l, &st,
		    &al))
		return -1;
	if (st)
		ptx_cg_sload(g, &l, D, 64, mode == BPF_MEMSX);
	else
		ptx_cg_ld(g, space(g, pc, in->src_reg), D, 64, A, in->off, width_bytes(size), al,
		      mode == BPF_MEMSX);
	return 0;
}

static int emit_st(struct cg *g, uint32_t pc, uint32_t depth, const struct bpf_insn *in)
{
	uint8_t size = BPF_SIZE(in->code);
	if (BPF_MODE(in->code) != BPF_MEM)
		return fail(g, pc, "unsupported store mode");
	char A[64], S[32];
	struct sloc l;
	bool st;
	uint32_t al;
	if (address(g, pc, depth, in->dst_reg, in->off, width_bytes(size), A, sizeof(A), &l, &st,
		    &al))
		return -1;
	int bits = 64;
	if (BPF_CLASS(in->code) == BPF_ST) {
		/* 64-bit: the sign-extended immediate, written signed (a decimal literal above
		 * INT64_MAX would be out of range); narrower: the truncated value */
		uint64_t v = (uint64_t)(int64_t)in->imm;
		if (size != BPF_DW)
			snprintf(S, sizeof(S), "%llu",
				 (unsigned long long)(v & ((1ull << (8 * width_bytes(size))) - 1)));
		else
			snprintf(S, sizeof(S), "%lld", (long long)in->imm);
		bits = 0;
	} else {
		if (val(g, pc, in->src_reg))
			return -1;
		snprintf(S, sizeof(S), "%%__cb_r%u", in->src_reg);
	}
	if (st)
		ptx_cg_sstore(g, &l, S, bits, "");
	else
		ptx_cg_st(g, space(g, pc, in->dst_reg), A, in->off, S, bits, width_bytes(size), al, "");
	return 0;
}

static const char *atomic_op(int32_t imm, bool *fetch)
{
	*fetch = imm & BPF_FETCH;
	switch (imm & ~BPF_FETCH) {
	case BPF_ADD: return "add";
	case BPF_OR: return "or";
	case BPF_AND: return "and";
	case BPF_XOR: return "xor";
	case BPF_XCHG & ~BPF_FETCH: return *fetch ? "exch" : NULL;
	case BPF_CMPXCHG & ~BPF_FETCH: return *fetch ? "cas" : NULL;
	}
	return NULL;
}

/* Where a thread-private read-modify-write reads and writes: a stack slot (l), or the generic
 * address in %__cb_t3 that was found to be local memory. */
static void rmw_load(struct cg *g, const struct sloc *l, const char *T, int bits)
{
	if (l)
		ptx_cg_sload(g, l, T, bits, false);
	else
		OUT("ld.u%d %s, [%%__cb_t3];\n", bits, T);
}

static void rmw_store(struct cg *g, const struct sloc *l, const char *V, int bits,
		      const char *guard)
{
	if (l)
		ptx_cg_sstore(g, l, V, bits, guard);
	else
		OUT("%sst.u%d [%%__cb_t3], %s;\n", guard, bits, V);
}

/* Atomics on the stack (slot l, or with l NULL the local address in %__cb_t3): the stack is
 * private to the thread (and PTX has no atomics on .local), so a plain read-modify-write is
 * exact. */
static void emit_atomic_stack(struct cg *g, const struct sloc *l, int bits, const char *op,
			      bool fetch, uint8_t src)
{
	const char *T = bits == 64 ? "%__cb_t0" : "%__cb_w0";
	const char *N = bits == 64 ? "%__cb_t1" : "%__cb_w1";
	const char *S = bits == 64 ? "%__cb_t2" : "%__cb_w2";
	if (bits == 64)
		OUT("mov.b64 %s, %%__cb_r%u;\n", S, src);
	else
		OUT("cvt.u32.u64 %s, %%__cb_r%u;\n", S, src);
	rmw_load(g, l, T, bits);
	if (!strcmp(op, "cas")) {
		if (bits == 64)
			OUT("setp.eq.u64 %%__cb_p0, %s, %%__cb_r0;\n", T);
		else {
			OUT("cvt.u32.u64 %%__cb_w3, %%__cb_r0;\n");
			OUT("setp.eq.u32 %%__cb_p0, %s, %%__cb_w3;\n", T);
		}
		rmw_store(g, l, S, bits, "@%__cb_p0 ");
		OUT("%s %%__cb_r0, %s;\n", bits == 64 ? "mov.b64" : "cvt.u64.u32", T);
		return;
	}
	if (!strcmp(op, "exch"))
		OUT("mov.b%d %s, %s;\n", bits, N, S);
	else
		OUT("%s.%s%d %s, %s, %s;\n", op, strcmp(op, "add") ? "b" : "s", bits, N, T, S);
	rmw_store(g, l, N, bits, "");
	if (fetch)
		OUT("%s %%__cb_r%u, %s;\n", bits == 64 ? "mov.b64" : "cvt.u64.u32", src, T);
}

/* An atomic through a register that may hold a stack address (chosen on a branch, passed to a
 * function, filled from a spill): PTX atomics on a generic address of local memory are
 * undefined, so the address space is tested at run time and a stack address gets the plain
 * read-modify-write of emit_atomic_stack (the stack is private to the thread). */
static void emit_atomic_mem(struct cg *g, const char *sp, const char *A, int bits, const char *op,
			    bool fetch, uint8_t src);

static void emit_atomic_maybe_local(struct cg *g, const struct bpf_insn *in, int bits,
				    const char *op, bool fetch, const char *A)
{
	uint32_t inst = g->next_inst++;
	OUT("add.s64 %%__cb_t3, %%__cb_r%u, %d;\n", in->dst_reg, in->off);
	OUT("isspacep.local %%__cb_g0, %%__cb_t3;\n");
	OUT("@!%%__cb_g0 bra %sq%u_m;\n", g->lbl, inst);
	emit_atomic_stack(g, NULL, bits, op, fetch, in->src_reg);
	OUT("bra %sq%u_d;\n", g->lbl, inst);
	buf_printf(g->out, "%sq%u_m:\n", g->lbl, inst);
	emit_atomic_mem(g, "", A, bits, op, fetch, in->src_reg);
	buf_printf(g->out, "%sq%u_d:\n", g->lbl, inst);
}

/* Reductions go to map values, which the L2 performs: a line missing from it is read from DRAM
 * first and holds the atomic unit meanwhile.  An application streaming through memory evicts
 * the maps' lines between two updates, so on sm_80 and later (PTX 7.4) reductions carry the
 * evict_last policy made at the probe's start (%__cb_pol): probe maps are small next to the L2
 * and stay (b_probe_lines.sh on vec_add 2^26: one reduction per block to a counter of its own in
 * a 16 MB array 1.089x -> 1.049x; kcount 1.042x -> 1.010x).  Atomics that return a value are
 * rare (one per launch) and keep the plain form. */
static const char *l2_hint(const struct cg *g)
{
	return g->p->l2_keep ? ".L2::cache_hint" : "";
}

static const char *l2_policy(const struct cg *g)
{
	return g->p->l2_keep ? ", %__cb_pol" : "";
}

static void emit_atomic_mem(struct cg *g, const char *sp, const char *A, int bits, const char *op,
			    bool fetch, uint8_t src)
{
	const char *ty = !strcmp(op, "add") ? "u" : "b", *H = l2_hint(g), *P = l2_policy(g);
	if (bits == 64) {
		if (!strcmp(op, "cas"))
			OUT("atom%s.cas.b64 %%__cb_r0, [%s], %%__cb_r0, %%__cb_r%u;\n", sp, A, src);
		else if (fetch)
			OUT("atom%s.%s.%s64 %%__cb_r%u, [%s], %%__cb_r%u;\n", sp, op, ty, src, A, src);
		else
			OUT("red%s.%s%s.%s64 [%s], %%__cb_r%u%s;\n", sp, op, H, ty, A, src, P);
		return;
	}
	OUT("cvt.u32.u64 %%__cb_w1, %%__cb_r%u;\n", src);
	if (!strcmp(op, "cas")) {
		OUT("cvt.u32.u64 %%__cb_w2, %%__cb_r0;\n");
		OUT("atom%s.cas.b32 %%__cb_w0, [%s], %%__cb_w2, %%__cb_w1;\n", sp, A);
		OUT("cvt.u64.u32 %%__cb_r0, %%__cb_w0;\n");
	} else if (fetch) {
		OUT("atom%s.%s.%s32 %%__cb_w0, [%s], %%__cb_w1;\n", sp, op, ty, A);
		OUT("cvt.u64.u32 %%__cb_r%u, %%__cb_w0;\n", src);
	} else {
		OUT("red%s.%s%s.%s32 [%s], %%__cb_w1%s;\n", sp, op, H, ty, A, P);
	}
}

/* A counter update (atomic add of a constant without fetch) from many threads of a warp to one
 * address is the common probe pattern, and the contended case for the memory system: the lanes
 * that target the same address elect one that adds constant * their count. */
static bool aggregate(const struct cg *g, uint32_t pc, const struct bpf_insn *in, bool fetch,
		      const char *op)
{
	return g->p->warp_aggregate && !fetch && !strcmp(op, "add") &&
	       g->p->st[pc].r[in->src_reg].kind == AV_CONST;
}

/* The common cases first: one lane alone, or every active lane on the same address (a counter
 * shared by the warp): a shuffle of the lowest lane's address and a vote decide it, and the
 * lowest lane adds for all.  Only lanes on different addresses pay for match.any (which costs a
 * memory-bound kernel far more: tests/bench/b_probe_lines.sh). */
static void emit_red_aggregated(struct cg *g, const char *sp, const struct bpf_insn *in, int bits,
				int64_t k)
{
	uint32_t inst = g->next_inst++;
	char slow[96], go[96];
	snprintf(slow, sizeof(slow), "%sa%u_s", g->lbl, inst);
	snprintf(go, sizeof(go), "%sa%u_g", g->lbl, inst);
	OUT("add.s64 %%__cb_t2, %%__cb_r%u, %d;\n", in->dst_reg, in->off);
	OUT("activemask.b32 %%__cb_w0;\n");
	OUT("mov.u32 %%__cb_w2, %%lanemask_lt;\n");
	OUT("and.b32 %%__cb_w2, %%__cb_w2, %%__cb_w0;\n");
	OUT("setp.eq.u32 %%__cb_p1, %%__cb_w2, 0;\n"); /* the lowest active lane */
	OUT("brev.b32 %%__cb_w4, %%__cb_w0;\n");
	OUT("clz.b32 %%__cb_w4, %%__cb_w4;\n");
	OUT("mov.b64 {%%__cb_w1, %%__cb_w2}, %%__cb_t2;\n");
	OUT("shfl.sync.idx.b32 %%__cb_w1, %%__cb_w1, %%__cb_w4, 31, %%__cb_w0;\n");
	OUT("shfl.sync.idx.b32 %%__cb_w2, %%__cb_w2, %%__cb_w4, 31, %%__cb_w0;\n");
	OUT("mov.b64 %%__cb_t1, {%%__cb_w1, %%__cb_w2};\n");
	OUT("setp.eq.u64 %%__cb_p2, %%__cb_t1, %%__cb_t2;\n");
	OUT("vote.sync.all.pred %%__cb_p2, %%__cb_p2, %%__cb_w0;\n");
	OUT("@!%%__cb_p2 bra %s;\n", slow);
	OUT("popc.b32 %%__cb_w3, %%__cb_w0;\n");
	OUT("bra %s;\n", go);
	buf_printf(g->out, "%s:\n", slow);
	OUT("match.any.sync.b64 %%__cb_w1, %%__cb_t2, %%__cb_w0;\n");
	OUT("mov.u32 %%__cb_w2, %%lanemask_lt;\n");
	OUT("and.b32 %%__cb_w2, %%__cb_w2, %%__cb_w1;\n");
	OUT("setp.eq.u32 %%__cb_p1, %%__cb_w2, 0;\n");
	OUT("popc.b32 %%__cb_w3, %%__cb_w1;\n");
	buf_printf(g->out, "%s:\n", go);
	const char *H = l2_hint(g), *P = l2_policy(g);
	if (bits == 64) {
		OUT("cvt.u64.u32 %%__cb_t1, %%__cb_w3;\n");
		OUT("mul.lo.s64 %%__cb_t1, %%__cb_t1, %lld;\n", (long long)k);
		OUT("@%%__cb_p1 red%s.add%s.u64 [%%__cb_t2], %%__cb_t1%s;\n", sp, H, P);
	} else {
		OUT("mul.lo.s32 %%__cb_w3, %%__cb_w3, %d;\n", (int32_t)k);
		OUT("@%%__cb_p1 red%s.add%s.u32 [%%__cb_t2], %%__cb_w3%s;\n", sp, H, P);
	}
}

/* The slot where this add may keep its sum (cg_ctxsrc.defer_slot), or -1: a 64-bit add whose
 * result is not used, to a map value of a CUBPF_F_DEFER_ADD map. */
static int defer_slot(const struct cg *g, uint32_t pc, const struct av *a, int bits, bool fetch,
		      const char *op)
{
	if (!g->ctx || !g->ctx->defer_slot || bits != 64 || fetch || strcmp(op, "add"))
		return -1;
	bool defer = a->kind == AV_MAPVAL ? a->map < g->p->map_cnt &&
						    (g->p->maps[a->map].flags & CUBPF_F_DEFER_ADD)
					  : a->kind == AV_UNKNOWN && a->global && a->defer;
	return defer ? g->ctx->defer_slot(g->ctx->user, pc) : -1;
}

/* An add kept in registers (issue 32): slot n holds an address (%__cb_da<n>, 0: none) and the
 * sum not yet added there (%__cb_dv<n>).  The same address adds to the sum: no memory; another
 * one first adds the sum to the old address (a red, which the warp does not wait for) and
 * starts over.  ptx_cg_emit_defer_flush adds what is left where the kernel ends.  Seven
 * instructions, none touching memory while a thread keeps adding to one record. */
static void emit_red_deferred(struct cg *g, const struct bpf_insn *in, int n)
{
	const char *H = l2_hint(g), *P = l2_policy(g);
	OUT("add.s64 %%__cb_t2, %%__cb_r%u, %d;\n", in->dst_reg, in->off);
	OUT("setp.ne.u64 %%__cb_g1, %%__cb_da%d, %%__cb_t2;\n", n);
	OUT("setp.ne.and.u64 %%__cb_g0, %%__cb_da%d, 0, %%__cb_g1;\n", n);
	OUT("@%%__cb_g0 red.global.add%s.u64 [%%__cb_da%d], %%__cb_dv%d%s;\n", H, n, n, P);
	OUT("@%%__cb_g1 mov.u64 %%__cb_dv%d, 0;\n", n);
	OUT("@%%__cb_g1 mov.u64 %%__cb_da%d, %%__cb_t2;\n", n);
	OUT("add.u64 %%__cb_dv%d, %%__cb_dv%d, %%__cb_r%u;\n", n, n, in->src_reg);
}

bool ptx_cg_may_defer(const struct cg_prog *p)
{
	for (uint32_t m = 0; m < p->map_cnt; m++)
		if (p->maps[m].flags & CUBPF_F_DEFER_ADD)
			return true;
	return false;
}

void ptx_cg_emit_defer_decls(uint32_t n, struct ptx_buf *decl, struct ptx_buf *zero)
{
	if (!n)
		return;
	buf_printf(decl, "\t.reg .b64 %%__cb_da<%u>;\n\t.reg .b64 %%__cb_dv<%u>;\n", n, n);
	ptx_buf_puts(zero, "\t// cubpf: adds kept in registers\n");
	for (uint32_t i = 0; i < n; i++)
		buf_printf(zero, "\tmov.u64 %%__cb_da%u, 0;\n\tmov.u64 %%__cb_dv%u, 0;\n", i, i);
}

/* Where the kernel ends, each slot's sum goes to its address: one red per thread and slot
 * that added (a thread whose sum is 0 skips it). */
void ptx_cg_emit_defer_flush(uint32_t n, struct ptx_buf *out)
{
	if (n)
		ptx_buf_puts(out, "\t// cubpf: adds kept in registers, to memory\n");
	for (uint32_t i = 0; i < n; i++)
		buf_printf(out, "\tsetp.ne.u64 %%__cb_g0, %%__cb_dv%u, 0;\n"
			   "\t@%%__cb_g0 red.global.add.u64 [%%__cb_da%u], %%__cb_dv%u;\n", i, i, i);
}

/* The deferred counter (struct cg_accs) an atomic at pc adds to, or -1 when it must be made
 * now: an add without fetch through a pointer to a known place of a map that may be deferred,
 * at a site that keeps counters, while registers are left. */
static int defer_acc(struct cg *g, uint32_t pc, const struct bpf_insn *in, int bits)
{
	struct cg_accs *t = g->ctx ? g->ctx->accs : NULL;
	const struct av *a = &g->p->st[pc].r[in->dst_reg];
	if (!t || g->p->patch || in->imm != BPF_ADD || a->kind != AV_MAPVAL || a->map >= 64 ||
	    a->map >= g->p->map_cnt || !(t->maps >> a->map & 1) || a->v + in->off < 0)
		return -1;
	struct cg_acc want = {.map = a->map, .off = (uint64_t)(a->v + in->off), .wide = bits == 64};
	if (a->sm)
		want.stride = (uint32_t)CUBPF_VALUE_STRIDE(g->p->maps[a->map].value_size);
	for (uint32_t i = 0; i < t->n; i++)
		if (t->a[i].map == want.map && t->a[i].stride == want.stride &&
		    t->a[i].off == want.off && t->a[i].wide == want.wide)
			return (int)i;
	if (t->n == CG_MAX_ACCS)
		return -1;
	t->a[t->n] = want;
	return (int)t->n++;
}

static int emit_atomic(struct cg *g, uint32_t pc, uint32_t depth, const struct bpf_insn *in)
{
	uint8_t size = BPF_SIZE(in->code);
	if (size != BPF_W && size != BPF_DW)
		return fail(g, pc, "atomics are 32 or 64 bits wide");
	bool fetch;
	const char *op = atomic_op(in->imm, &fetch);
	if (!op)
		return fail(g, pc, "unknown atomic operation");
	if (val(g, pc, in->src_reg) || (!strcmp(op, "cas") && val(g, pc, 0)))
		return -1;
	char A[80];
	struct sloc l;
	bool st;
	uint32_t al;
	if (address(g, pc, depth, in->dst_reg, in->off, width_bytes(size), A, sizeof(A), &l, &st,
		    &al))
		return -1;
	/* atomics cannot be split: like Linux, they require the natural alignment (a misaligned
	 * one faults on the GPU, never corrupts memory silently) */
	snprintf(A + strlen(A), sizeof(A) - strlen(A), "+%d", in->off);
	int bits = size == BPF_DW ? 64 : 32;
	const char *sp = space(g, pc, in->dst_reg);
	const struct av *a = &g->p->st[pc].r[in->dst_reg];
	int n = st ? -1 : defer_slot(g, pc, a, bits, fetch, op);
	int acc = st || n >= 0 ? -1 : defer_acc(g, pc, in, bits);
	if (n >= 0)
		emit_red_deferred(g, in, n);
	else if (acc >= 0) /* the 32-bit add's low half: the flush adds the sum's */
		OUT("add.s64 %%__cb_a%d, %%__cb_a%d, %%__cb_r%u;\n", acc, acc, in->src_reg);
	else if (st)
		emit_atomic_stack(g, &l, bits, op, fetch, in->src_reg);
	else if (!ptx_av_global(a) && (a->stk || g->p->escape))
		emit_atomic_maybe_local(g, in, bits, op, fetch, A);
	else if (aggregate(g, pc, in, fetch, op))
		emit_red_aggregated(g, sp, in, bits, g->p->st[pc].r[in->src_reg].v);
	else
		emit_atomic_mem(g, sp, A, bits, op, fetch, in->src_reg);
	return 0;
}

static int emit_lddw(struct cg *g, uint32_t pc, const struct bpf_insn *in)
{
	if (in->dst_reg > 9)
		return fail(g, pc, "r10 is read-only");
	uint64_t v = (uint32_t)in[0].imm | ((uint64_t)(uint32_t)in[1].imm << 32);
	if (in->src_reg == 0) {
		OUT("mov.b64 %%__cb_r%u, %lld;\n", in->dst_reg, (long long)v);
		return 0;
	}
	uint32_t map = (uint32_t)in->imm;
	if (map >= g->p->map_cnt || map >= 64)
		return fail(g, pc, "lddw refers to a map that does not exist");
	g->res->maps_used |= 1ull << map;
	if (in->src_reg == BPF_PSEUDO_MAP_FD) {
		OUT("mov.b64 %%__cb_r%u, %u;\n", in->dst_reg, map); /* map "pointer": its index */
		return 0;
	}
	if (in->src_reg != BPF_PSEUDO_MAP_VALUE)
		return fail(g, pc, "lddw pseudo source not supported on the GPU");
	char dst[24];
	snprintf(dst, sizeof(dst), "%%__cb_r%u", in->dst_reg);
	ptx_cg_map_ptr(g, dst, map);
	if (in[1].imm)
		OUT("add.s64 %%__cb_r%u, %%__cb_r%u, %d;\n", in->dst_reg, in->dst_reg, in[1].imm);
	return 0;
}

/* ---- control flow ---- */

static const char *cmp_name(uint8_t op, bool *set)
{
	*set = false;
	switch (op) {
	case BPF_JEQ: return "eq.u";
	case BPF_JNE: return "ne.u";
	case BPF_JGT: return "gt.u";
	case BPF_JGE: return "ge.u";
	case BPF_JLT: return "lt.u";
	case BPF_JLE: return "le.u";
	case BPF_JSGT: return "gt.s";
	case BPF_JSGE: return "ge.s";
	case BPF_JSLT: return "lt.s";
	case BPF_JSLE: return "le.s";
	case BPF_JSET: *set = true; return "ne.u";
	}
	return NULL;
}

static int emit_cond(struct cg *g, uint32_t pc, const struct bpf_insn *in, const char *ip)
{
	int known = ptx_cg_cond_known(g->p, pc);
	if (known == 1)
		OUT("bra %s%u;\n", ip, pc + 1 + (uint32_t)(int32_t)in->off);
	if (known >= 0)
		return 0;
	bool set, k = BPF_SRC(in->code) == BPF_K;
	const char *cmp = cmp_name(BPF_OP(in->code), &set);
	if (!cmp)
		return fail(g, pc, "unknown jump operation");
	if (val(g, pc, in->dst_reg) || (!k && val(g, pc, in->src_reg)))
		return -1;
	bool is64 = BPF_CLASS(in->code) == BPF_JMP;
	char A[24], B[24];
	if (is64) {
		snprintf(A, sizeof(A), "%%__cb_r%u", in->dst_reg);
		if (k)
			snprintf(B, sizeof(B), "%lld", (long long)in->imm);
		else
			snprintf(B, sizeof(B), "%%__cb_r%u", in->src_reg);
	} else {
		OUT("cvt.u32.u64 %%__cb_w0, %%__cb_r%u;\n", in->dst_reg);
		snprintf(A, sizeof(A), "%%__cb_w0");
		if (k)
			snprintf(B, sizeof(B), "%d", in->imm);
		else {
			OUT("cvt.u32.u64 %%__cb_w1, %%__cb_r%u;\n", in->src_reg);
			snprintf(B, sizeof(B), "%%__cb_w1");
		}
	}
	int bits = is64 ? 64 : 32;
	if (set) {
		OUT("and.b%d %s, %s, %s;\n", bits, is64 ? "%__cb_t0" : "%__cb_w0", A, B);
		OUT("setp.ne.u%d %%__cb_p0, %s, 0;\n", bits, is64 ? "%__cb_t0" : "%__cb_w0");
	} else {
		OUT("setp.%s%d %%__cb_p0, %s, %s;\n", cmp, bits, A, B);
	}
	OUT("@%%__cb_p0 bra %s%u;\n", ip, pc + 1 + (uint32_t)(int32_t)in->off);
	return 0;
}

static int emit_func(struct cg *g, uint32_t start, uint32_t depth, const char *ip,
		     const char *ret);

/* bpf-to-bpf call: inlined, with r6..r10 saved and a fresh frame. */
static int emit_call_local(struct cg *g, uint32_t pc, uint32_t depth, const struct bpf_insn *in)
{
	uint32_t target = pc + 1 + (uint32_t)in->imm;
	if (depth + 1 >= CG_FRAMES_MAX)
		return fail(g, pc, "bpf-to-bpf calls nested too deep");
	uint32_t inst = g->next_inst++;
	char ip[64], ret[80];
	snprintf(ip, sizeof(ip), "%si%u_", g->lbl, inst);
	snprintf(ret, sizeof(ret), "%sret", ip);
	for (int r = 6; r <= 10; r++)
		OUT("mov.b64 %%__cb_s%u, %%__cb_r%d;\n", depth * 5 + (r - 6), r);
	OUT("add.s64 %%__cb_r10, %%__cb_r10, %u;\n", g->p->frame);
	if (emit_func(g, target, depth + 1, ip, ret))
		return -1;
	buf_printf(g->out, "%s:\n", ret);
	for (int r = 6; r <= 10; r++)
		OUT("mov.b64 %%__cb_r%d, %%__cb_s%u;\n", r, depth * 5 + (r - 6));
	return 0;
}

static int emit_jmp(struct cg *g, uint32_t pc, uint32_t depth, const struct bpf_insn *in,
		    const char *ip, const char *ret)
{
	uint8_t op = BPF_OP(in->code);
	switch (op) {
	case BPF_EXIT:
		OUT("bra %s;\n", ret);
		return 0;
	case BPF_JA: {
		int32_t o = BPF_CLASS(in->code) == BPF_JMP32 ? in->imm : in->off;
		OUT("bra %s%u;\n", ip, pc + 1 + (uint32_t)o);
		return 0;
	}
	case BPF_CALL:
		if (BPF_CLASS(in->code) != BPF_JMP)
			return fail(g, pc, "bad call");
		if (BPF_SRC(in->code) == BPF_X) {
			const struct av *t = &g->p->st[pc].r[in->dst_reg];
			if (t->kind != AV_CONST)
				return fail(g, pc, "callx target is not a known helper number");
			return ptx_cg_helper(g, pc, (uint32_t)t->v, depth, ip);
		}
		if (in->src_reg == BPF_PSEUDO_CALL)
			return emit_call_local(g, pc, depth, in);
		if (in->src_reg != 0)
			return fail(g, pc, "kfunc calls are not supported on the GPU");
		return ptx_cg_helper(g, pc, (uint32_t)in->imm, depth, ip);
	}
	return emit_cond(g, pc, in, ip);
}

static int emit_insn(struct cg *g, uint32_t pc, uint32_t depth, const char *ip, const char *ret)
{
	const struct bpf_insn *in = &g->p->prog.insns[pc];
	if (in->dst_reg > 10 || in->src_reg > 10)
		return fail(g, pc, "bad register");
	switch (BPF_CLASS(in->code)) {
	case BPF_ALU:
	case BPF_ALU64:
		return emit_alu(g, pc, in);
	case BPF_LDX:
		return emit_ldx(g, pc, depth, in);
	case BPF_ST:
		return emit_st(g, pc, depth, in);
	case BPF_STX:
		if (BPF_MODE(in->code) == BPF_ATOMIC)
			return emit_atomic(g, pc, depth, in);
		return emit_st(g, pc, depth, in);
	case BPF_LD:
		if (in->code != (BPF_LD | BPF_IMM | BPF_DW))
			return fail(g, pc, "legacy packet loads are not supported");
		return emit_lddw(g, pc, in);
	default:
		return emit_jmp(g, pc, depth, in, ip, ret);
	}
}

/* Emits the function starting at `start`; its exits branch to `ret`. */
static int emit_func(struct cg *g, uint32_t start, uint32_t depth, const char *ip,
		     const char *ret)
{
	uint32_t end = g->p->func_end[start];
	uint32_t need = g->p->escape ? (depth + 1) * g->p->frame : 0;
	if (need > g->res->stack_bytes)
		g->res->stack_bytes = need;
	if (depth + 1 > g->p->depth)
		g->p->depth = depth + 1;
	for (uint32_t pc = start; pc < end; pc += cg_slots(&g->p->prog.insns[pc])) {
		if (!g->p->st[pc].reached)
			continue;
		if (g->out->len > CG_MAX_TEXT)
			return fail(g, pc, "generated code too large (bpf-to-bpf calls inline at every "
					   "call site)");
		if (g->p->target[pc])
			buf_printf(g->out, "%s%u:\n", ip, pc);
		if (emit_insn(g, pc, depth, ip, ret))
			return -1;
	}
	OUT("bra %s;\n", ret);
	return 0;
}

void ptx_cg_map_ptr(struct cg *g, const char *dst, uint32_t map)
{
	if (g->p->patch) /* the record is written before the launch and never during it */
		OUT("ld.global.u64 %s, [%%__cb_rec+%u];\n", dst,
		    (unsigned)PTX_PATCH_REC_MAPS + 8 * map);
	else
		OUT("ld.const.u64 %s, [" PTX_MAP_SYMBOL_FMT "];\n", dst, map);
}

int ptx_cg_emit(struct cg_prog *p, const struct cg_ctxsrc *ctx, const char *lbl, struct ptx_buf *out,
	    struct cg_result *res, char *err, size_t errlen)
{
	struct cg g = {.p = p, .ctx = ctx, .lbl = lbl, .out = out, .res = res, .err = err,
		       .errlen = errlen};
	if (p->fold) { /* specialise the program to this site's constant context fields */
		p->ctx = ctx;
		int rc = ptx_cg_analyze(p, err, errlen);
		p->ctx = NULL;
		if (rc)
			return -1;
	}
	char ip[64], ret[80];
	snprintf(ip, sizeof(ip), "%si%u_", lbl, g.next_inst++);
	snprintf(ret, sizeof(ret), "%send", lbl);
	if (p->escape)
		res->needs_r10 = true;
	if (p->l2_keep) /* the reductions' L2 policy (l2_hint); the JIT drops it when unused */
		buf_printf(out, "\tcreatepolicy.fractional.L2::evict_last.b64 %%__cb_pol, 1.0;\n");
	/* r10 as a generic pointer: computed always, removed by the JIT when unused. */
	if (p->frame && p->escape) {
		buf_printf(out, "\tmov.u64 %%__cb_r10, __cubpf_stack;\n");
		buf_printf(out, "\tcvta.local.u64 %%__cb_r10, %%__cb_r10;\n");
		buf_printf(out, "\tadd.s64 %%__cb_r10, %%__cb_r10, %u;\n", p->frame);
	}
	if (emit_func(&g, 0, 0, ip, ret))
		return -1;
	buf_printf(out, "%s:\n", ret);
	if (out->oom) {
		ptx_seterr(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

void ptx_cg_emit_decls(const struct cg_result *res, struct ptx_buf *out)
{
	ptx_buf_puts(out, "\t.reg .b64 %__cb_r<11>;\n\t.reg .b64 %__cb_t<4>;\n\t.reg .b64 %__cb_u<2>;\n"
		      "\t.reg .b64 %__cb_m<10>;\n\t.reg .b32 %__cb_x<8>;\n\t.reg .pred %__cb_q<2>;\n"
		      "\t.reg .b64 %__cb_h<8>;\n\t.reg .b32 %__cb_en;\n"
		      "\t.reg .b32 %__cb_w<6>;\n\t.reg .pred %__cb_p<3>;\n"
		      "\t.reg .b64 %__cb_s<40>;\n\t.reg .b64 %__cb_k<32>;\n\t.reg .b64 %__cb_pol;\n"
		      "\t.reg .b64 %__cb_v<4>;\n\t.reg .pred %__cb_g<2>;\n");
	if (res->stack_bytes)
		buf_printf(out, "\t.local .align 16 .b8 __cubpf_stack[%u];\n",
			   (res->stack_bytes + 15) & ~15u);
	if (res->vprintf)
		ptx_buf_puts(out, "\t.local .align 8 .b8 __cubpf_pbuf[224];\n");
}

struct cg_prog *ptx_cg_prepare(const struct ptx_prog *prog, const struct vm_map_def *maps,
			   uint32_t map_cnt, char *err, size_t errlen)
{
	if (!prog || !prog->insns || !prog->insn_cnt) {
		ptx_seterr(err, errlen, "empty program");
		return NULL;
	}
	struct cg_prog *p = calloc(1, sizeof(*p));
	if (!p) {
		ptx_seterr(err, errlen, "out of memory");
		return NULL;
	}
	p->prog = *prog;
	p->maps = maps;
	p->map_cnt = map_cnt;
	if (ptx_cg_analyze(p, err, errlen)) {
		ptx_cg_prog_free(p);
		return NULL;
	}
	p->taint = ptx_cg_map_taint(p);
	return p;
}

void ptx_cg_prog_free(struct cg_prog *p)
{
	if (!p)
		return;
	free(p->st);
	free(p->target);
	free(p->func_end);
	free(p);
}

uint32_t ptx_map_value_stride(const struct vm_map_def *def)
{
	return (def->value_size + 7) & ~7u;
}

void ptx_gen_module_decls(uint32_t map_cnt, bool vprintf, struct ptx_buf *out)
{
	for (uint32_t i = 0; i < map_cnt; i++)
		buf_printf(out, ".visible .const .align 8 .u64 " PTX_MAP_SYMBOL_FMT ";\n", i);
	if (vprintf)
		ptx_buf_puts(out, ".extern .func (.param .b32 func_retval0) vprintf\n(\n"
			      "\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n);\n");
}

int ptx_gen_raw_func(const struct ptx_prog *prog, const struct vm_map_def *maps,
		     uint32_t map_cnt, const char *fname, struct ptx_buf *out, char *err,
		     size_t errlen)
{
	return ptx_gen_raw_func_opt(prog, maps, map_cnt, fname, false, out, err, errlen);
}

int ptx_gen_raw_func_opt(const struct ptx_prog *prog, const struct vm_map_def *maps,
			 uint32_t map_cnt, const char *fname, bool fold, struct ptx_buf *out,
			 char *err, size_t errlen)
{
	struct cg_prog *p = ptx_cg_prepare(prog, maps, map_cnt, err, errlen);
	if (!p)
		return -1;
	p->fold = fold;
	struct ptx_buf body = {0};
	struct cg_result res = {0};
	int rc = ptx_cg_emit(p, NULL, "$__cb_", &body, &res, err, errlen);
	if (!rc) {
		buf_printf(out, ".func (.param .b64 __cb_ret) %s(.param .b64 __cb_mem, "
				".param .b64 __cb_len)\n{\n", fname);
		ptx_cg_emit_decls(&res, out);
		ptx_buf_puts(out, "\tld.param.u64 %__cb_r1, [__cb_mem];\n"
			      "\tld.param.u64 %__cb_r2, [__cb_len];\n");
		buf_put(out, body.data, body.len);
		ptx_buf_puts(out, "\tst.param.b64 [__cb_ret], %__cb_r0;\n\tret;\n}\n");
		if (out->oom) {
			ptx_seterr(err, errlen, "out of memory");
			rc = -1;
		}
	}
	ptx_buf_free(&body);
	ptx_cg_prog_free(p);
	return rc;
}
