/* Abstract interpretation of an eBPF program before code generation: for every instruction,
 * which registers hold the context pointer (which has no runtime value on the GPU: loads
 * through it become special-register or parameter reads), a map, a constant, or a stack
 * address (loads through it become static .local accesses).  Also finds jump targets,
 * function boundaries, and the stack frame size. */
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/cgint.h"

bool ptx_cg_is_gpu_kind(enum vm_prog_kind k)
{
	return vm_kind_is_gpu(k);
}

static uint64_t bswap(uint64_t v, int width)
{
	uint64_t r = 0;
	for (int i = 0; i < width / 8; i++)
		r = (r << 8) | ((v >> (8 * i)) & 0xff);
	return r;
}

static int64_t sext(uint64_t v, int bits)
{
	return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}

bool ptx_cg_alu_eval(const struct bpf_insn *in, uint64_t d, uint64_t s, uint64_t *out)
{
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64;
	int bits = is64 ? 64 : 32;
	uint64_t m = is64 ? ~0ull : 0xffffffffull;
	uint8_t op = BPF_OP(in->code);
	if (op == BPF_END) { /* reads the whole 64-bit register, whatever the class */
		if (in->imm != 16 && in->imm != 32 && in->imm != 64)
			return false;
		if (is64 || BPF_SRC(in->code) == BPF_TO_BE)
			*out = bswap(d, in->imm);
		else
			*out = in->imm == 64 ? d : d & ((1ull << in->imm) - 1);
		return true;
	}
	if (BPF_SRC(in->code) == BPF_K)
		s = is64 ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm;
	d &= m;
	s &= m;
	uint64_t r;
	switch (op) {
	case BPF_ADD: r = d + s; break;
	case BPF_SUB: r = d - s; break;
	case BPF_MUL: r = d * s; break;
	case BPF_OR: r = d | s; break;
	case BPF_AND: r = d & s; break;
	case BPF_XOR: r = d ^ s; break;
	case BPF_LSH: r = d << (s & (bits - 1)); break;
	case BPF_RSH: r = d >> (s & (bits - 1)); break;
	case BPF_ARSH: r = (uint64_t)(sext(d, bits) >> (s & (bits - 1))); break;
	case BPF_NEG: r = -d; break;
	case BPF_MOV:
		if (in->off == 0)
			r = s;
		else if (in->off == 8 || in->off == 16 || (in->off == 32 && is64))
			r = (uint64_t)sext(s, in->off);
		else
			return false;
		break;
	case BPF_DIV:
		if (in->off == 0)
			r = s ? d / s : 0;
		else if (in->off == 1)
			r = !s ? 0 : sext(s, bits) == -1 ? -d : (uint64_t)(sext(d, bits) / sext(s, bits));
		else
			return false;
		break;
	case BPF_MOD:
		if (in->off == 0)
			r = s ? d % s : d;
		else if (in->off == 1)
			r = !s ? d : sext(s, bits) == -1 ? 0 : (uint64_t)(sext(d, bits) % sext(s, bits));
		else
			return false;
		break;
	default:
		return false;
	}
	*out = r & m;
	return true;
}

bool ptx_cg_jmp_eval(const struct bpf_insn *in, uint64_t a, uint64_t b)
{
	if (BPF_SRC(in->code) == BPF_K)
		b = (uint64_t)(int64_t)in->imm;
	return vm_jmp_taken(BPF_OP(in->code), a, b, BPF_CLASS(in->code) == BPF_JMP);
}

/* ---- constants in stack slots ---- */

static void slot_kill(struct av_state *s, int64_t off, uint32_t size)
{
	uint8_t k = 0;
	for (uint8_t i = 0; i < s->nsl; i++)
		if (s->sl[i].off + (int64_t)s->sl[i].size <= off || off + (int64_t)size <= s->sl[i].off)
			s->sl[k++] = s->sl[i];
	s->nsl = k;
}

static void slot_set(struct av_state *s, int64_t off, uint32_t size, uint64_t val)
{
	slot_kill(s, off, size);
	if (s->nsl < AV_SLOTS)
		s->sl[s->nsl++] = (struct av_slot){off, size,
						   size == 8 ? val : val & ((1ull << (8 * size)) - 1)};
}

static const struct av_slot *slot_get(const struct av_state *s, int64_t off, uint32_t size)
{
	for (uint8_t i = 0; i < s->nsl; i++)
		if (s->sl[i].off == off && s->sl[i].size == size)
			return &s->sl[i];
	return NULL;
}

/* a + b as the BPF machine adds: modulo 2^64 (constants the program folds may overflow) */
static int64_t wrap_add(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static uint32_t lowbit(int64_t v, uint32_t cap)
{
	uint64_t b = (uint64_t)v & (~(uint64_t)v + 1);
	return b == 0 || b > cap ? cap : (uint32_t)b;
}

uint32_t ptx_av_align(const struct av *a, int64_t off)
{
	switch (a->kind) {
	case AV_MAPVAL:
		return lowbit(wrap_add(a->v, off), 8);
	case AV_STACK:
		return lowbit(wrap_add(a->v, off), 16);
	case AV_CONST:
		return lowbit(wrap_add(a->v, off), 16);
	case AV_UNKNOWN: {
		uint32_t al = a->al ? a->al : 1;
		uint32_t o = lowbit(off, 16);
		return o < al ? o : al;
	}
	}
	return 1;
}

static bool av_eq(const struct av *a, const struct av *b)
{
	return a->kind == b->kind && a->map == b->map && a->v == b->v && a->al == b->al &&
	       a->global == b->global && a->stk == b->stk && a->defer == b->defer && a->sm == b->sm;
}

bool ptx_av_global(const struct av *a)
{
	return a->kind == AV_MAPVAL || (a->kind == AV_UNKNOWN && a->global);
}

/* Whether the runtime value of `a` may be a stack address. */
static bool may_stack(const struct av *a)
{
	return a->kind == AV_STACK || (a->kind == AV_UNKNOWN && a->stk);
}

/* Two stack addresses at different offsets (p = c ? &x : &y, a pointer moved in a loop), or a
 * stack address and another value, join to a runtime value that remembers it may point to the
 * stack: the generator then makes the stack addressable (scan_stack) instead of using the
 * register as if it held something else. */
static struct av av_join(struct av a, struct av b)
{
	uint32_t aa = ptx_av_align(&a, 0), ba = ptx_av_align(&b, 0);
	uint8_t al = (uint8_t)(aa < ba ? aa : ba), global = ptx_av_global(&a) && ptx_av_global(&b);
	uint8_t stk = may_stack(&a) || may_stack(&b);
	uint8_t defer = global && a.defer && b.defer;
	if (a.kind == b.kind && a.map == b.map && a.v == b.v && a.sm == b.sm) {
		a.al = a.kind == AV_UNKNOWN ? al : 0;
		a.global = a.kind == AV_UNKNOWN && global;
		a.stk = a.kind == AV_UNKNOWN && stk;
		a.defer = a.kind == AV_UNKNOWN && defer;
		return a;
	}
	if (a.kind == AV_CTX || b.kind == AV_CTX || a.kind == AV_CONFLICT || b.kind == AV_CONFLICT)
		return (struct av){.kind = AV_CONFLICT};
	return (struct av){.kind = AV_UNKNOWN, .al = al, .global = global, .stk = stk,
			   .defer = defer};
}

/* Merges `in` into state `pc`; true when it changed. */
static bool merge(struct cg_prog *p, uint32_t pc, const struct av_state *in)
{
	struct av_state *s = &p->st[pc];
	if (!s->reached) {
		*s = *in;
		s->reached = true;
		return true;
	}
	bool changed = false;
	for (int r = 0; r < 11; r++) {
		struct av j = av_join(s->r[r], in->r[r]);
		if (!av_eq(&j, &s->r[r])) {
			s->r[r] = j;
			changed = true;
		}
	}
	uint8_t k = 0; /* slots: the constants both paths agree on */
	for (uint8_t i = 0; i < s->nsl; i++) {
		const struct av_slot *o = slot_get(in, s->sl[i].off, s->sl[i].size);
		if (o && o->val == s->sl[i].val)
			s->sl[k++] = s->sl[i];
	}
	changed |= k != s->nsl;
	s->nsl = k;
	return changed;
}

static struct av av_of(uint8_t kind, uint32_t map, int64_t v)
{
	return (struct av){.kind = kind, .map = map, .v = v};
}

static bool is_pointer(const struct av *a)
{
	return a->kind == AV_CTX || a->kind == AV_STACK || a->kind == AV_MAPVAL;
}

/* ALU effect on the destination's abstract value. */
static void alu_effect(const struct bpf_insn *in, struct av_state *s)
{
	struct av *d = &s->r[in->dst_reg];
	uint8_t op = BPF_OP(in->code);
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64;
	bool k = BPF_SRC(in->code) == BPF_K;
	int64_t imm = in->imm;
	const struct av *src = k ? NULL : &s->r[in->src_reg];
	if (op == BPF_MOV) {
		if (k)
			*d = av_of(AV_CONST, 0, is64 ? imm : (int64_t)(uint32_t)imm);
		else if (is64 && in->off == 0)
			*d = *src;
		else if (src->kind == AV_CONST && in->off == 0)
			*d = av_of(AV_CONST, 0, (int64_t)(uint32_t)src->v);
		else
			*d = av_of(AV_UNKNOWN, 0, 0);
		return;
	}
	if (!k && src->kind == AV_CONST)
		imm = src->v, k = true;
	if (is64 && k && (op == BPF_ADD || op == BPF_SUB) && (is_pointer(d) || d->kind == AV_CONST)) {
		d->v = wrap_add(d->v, op == BPF_ADD ? imm : (int64_t)(0 - (uint64_t)imm));
		return;
	}
	if (is64 && k && (op == BPF_ADD || op == BPF_SUB) && d->kind == AV_UNKNOWN) {
		d->al = (uint8_t)ptx_av_align(d, imm); /* an aligned pointer moved by a constant */
		return;
	}
	/* a map value pointer moved by a runtime offset still points into the value (the verifier
	 * checked the bounds of every access through it); a pointer plus a pointer is refused */
	bool global = is64 && op == BPF_ADD && !k &&
		      ((ptx_av_global(d) && src->kind == AV_UNKNOWN && !src->global) ||
		       (ptx_av_global(src) && d->kind == AV_UNKNOWN && !d->global));
	bool stk = is64 && (may_stack(d) || (!k && may_stack(src)));
	bool defer = global && (ptx_av_global(d) ? d->defer : src->defer);
	if (d->kind == AV_CTX || d->kind == AV_CONFLICT)
		*d = av_of(AV_CONFLICT, 0, 0); /* arithmetic on ctx: refused if ever read */
	else
		*d = av_of(AV_UNKNOWN, 0, 0);
	d->global = global;
	d->defer = defer;
	d->stk = d->kind == AV_UNKNOWN && stk;
}

static void clobber_call(struct av_state *s)
{
	for (int r = 0; r <= 5; r++)
		s->r[r] = av_of(AV_UNKNOWN, 0, 0);
}

/* Successors of pc with the state after it; returns their number (0..2). */
/* -1: unknown; 0: the jump at pc is not taken; 1: it is. */
int ptx_cg_cond_known(const struct cg_prog *p, uint32_t pc)
{
	const struct bpf_insn *in = &p->prog.insns[pc];
	const struct av_state *s = &p->st[pc];
	uint8_t op = BPF_OP(in->code);
	if (!p->fold || op == BPF_JA || op == BPF_CALL || op == BPF_EXIT || op > BPF_JSLE)
		return -1;
	const struct av *a = &s->r[in->dst_reg];
	bool k = BPF_SRC(in->code) == BPF_K;
	const struct av *b = k ? NULL : &s->r[in->src_reg];
	if (a->kind == AV_CONST && (k || b->kind == AV_CONST))
		return ptx_cg_jmp_eval(in, (uint64_t)a->v, k ? 0 : (uint64_t)b->v);
	/* map values are never NULL */
	if (BPF_CLASS(in->code) == BPF_JMP && k && in->imm == 0 && a->kind == AV_MAPVAL &&
	    (op == BPF_JEQ || op == BPF_JNE))
		return op == BPF_JNE;
	return -1;
}

/* A lookup with a constant key in range: never NULL, a known place in the map (a per-SM array's
 * is in the running SM's copy: *sm). */
static bool lookup_fold_state(const struct cg_prog *p, const struct av_state *s, uint32_t *map,
			      uint64_t *off, bool *sm)
{
	const struct av *m = &s->r[1], *k = &s->r[2];
	if (!p->fold || !p->track_slots || m->kind != AV_MAP || m->map >= p->map_cnt ||
	    m->map >= 64 || k->kind != AV_STACK)
		return false;
	const struct vm_map_def *d = &p->maps[m->map];
	const struct av_slot *key = slot_get(s, k->v, 4);
	*sm = d->type == CUBPF_MAP_PERCPU_ARRAY;
	if ((d->type != CUBPF_MAP_ARRAY && d->type != CUBPF_MAP_GPU_ARRAY && !*sm) ||
	    d->key_size != 4 || !key || key->val >= d->max_entries)
		return false;
	*map = m->map;
	*off = *sm ? CUBPF_PERCPU_OFFSET(key->val, 0, d->value_size)
		   : key->val * ((d->value_size + 7) & ~7u);
	return true;
}

bool ptx_cg_lookup_fold(const struct cg_prog *p, uint32_t pc, uint32_t *map, uint64_t *off,
			bool *sm)
{
	const struct bpf_insn *in = &p->prog.insns[pc];
	return in->code == (BPF_JMP | BPF_CALL) && in->src_reg == 0 &&
	       in->imm == CUBPF_FN_map_lookup_elem && lookup_fold_state(p, &p->st[pc], map, off, sm);
}

/* The constant an ALU instruction at pc produces, when its inputs are known. */
bool ptx_cg_alu_known(const struct cg_prog *p, uint32_t pc, uint64_t *v)
{
	const struct bpf_insn *in = &p->prog.insns[pc];
	const struct av_state *s = &p->st[pc];
	uint8_t op = BPF_OP(in->code);
	if (!p->fold)
		return false;
	const struct av *d = &s->r[in->dst_reg];
	bool unary = op == BPF_NEG || op == BPF_END;
	bool k = BPF_SRC(in->code) == BPF_K || unary;
	const struct av *src = k ? NULL : &s->r[in->src_reg];
	if ((op != BPF_MOV && d->kind != AV_CONST) || (!k && src->kind != AV_CONST))
		return false;
	return ptx_cg_alu_eval(in, (uint64_t)d->v, k ? 0 : (uint64_t)src->v, v);
}

static void step_ldx(struct cg_prog *p, const struct bpf_insn *in, struct av_state *out)
{
	const struct av *b = &out->r[in->src_reg];
	uint8_t sz = BPF_SIZE(in->code);
	uint32_t w = sz == BPF_B ? 1 : sz == BPF_H ? 2 : sz == BPF_W ? 4 : 8;
	bool sx = BPF_MODE(in->code) == BPF_MEMSX;
	struct av res = av_of(AV_UNKNOWN, 0, 0);
	uint64_t v;
	if (p->fold && b->kind == AV_CTX && !sx && p->ctx && p->ctx->constant &&
	    b->v + in->off >= 0 &&
	    p->ctx->constant(p->ctx->user, (uint32_t)(b->v + in->off), w, &v))
		res = av_of(AV_CONST, 0, (int64_t)v);
	const struct av_slot *sl;
	if (p->track_slots && b->kind == AV_STACK && (sl = slot_get(out, b->v + in->off, w)))
		res = av_of(AV_CONST, 0, sx ? sext(sl->val, 8 * (int)w) : (int64_t)sl->val);
	out->r[in->dst_reg] = res;
}

static void step_store(struct cg_prog *p, const struct bpf_insn *in, struct av_state *out)
{
	const struct av *b = &out->r[in->dst_reg];
	if (!p->track_slots || b->kind != AV_STACK)
		return;
	uint8_t sz = BPF_SIZE(in->code);
	uint32_t w = sz == BPF_B ? 1 : sz == BPF_H ? 2 : sz == BPF_W ? 4 : 8;
	int64_t off = b->v + in->off;
	if (BPF_CLASS(in->code) == BPF_ST && BPF_MODE(in->code) == BPF_MEM)
		slot_set(out, off, w, (uint64_t)(int64_t)in->imm);
	else if (BPF_CLASS(in->code) == BPF_STX && BPF_MODE(in->code) == BPF_MEM &&
		 out->r[in->src_reg].kind == AV_CONST)
		slot_set(out, off, w, (uint64_t)out->r[in->src_reg].v);
	else
		slot_kill(out, off, w);
}

/* What a helper call does to the stack slots and r0. */
static void step_helper(struct cg_prog *p, const struct bpf_insn *in, struct av_state *out)
{
	uint32_t map;
	uint64_t off;
	bool sm;
	bool folded = BPF_SRC(in->code) == BPF_K && in->imm == CUBPF_FN_map_lookup_elem &&
		      lookup_fold_state(p, out, &map, &off, &sm);
	if (p->track_slots) {
		if (in->imm == CUBPF_FN_probe_read || in->imm == CUBPF_FN_probe_read_user ||
		    BPF_SRC(in->code) == BPF_X)
			out->nsl = 0;
		for (int r = 1; r <= 3; r++)
			if (out->r[r].kind == AV_STACK)
				slot_kill(out, out->r[r].v, 8);
	}
	const struct av r1 = out->r[1];
	clobber_call(out);
	if (folded) {
		out->r[0] = av_of(AV_MAPVAL, map, (int64_t)off);
		out->r[0].sm = sm;
	} else if (BPF_SRC(in->code) == BPF_K && in->imm == CUBPF_FN_map_lookup_elem) {
		out->r[0].al = 8, out->r[0].global = 1; /* a map value (or NULL): 8-aligned in
							  * every GPU map layout, in global memory */
		out->r[0].defer = r1.kind == AV_MAP && r1.map < p->map_cnt &&
				  (p->maps[r1.map].flags & CUBPF_F_DEFER_ADD);
	}
}

static int step(struct cg_prog *p, uint32_t pc, struct av_state *out, uint32_t succ[2],
		struct av_state *callee, uint32_t *callee_pc)
{
	const struct bpf_insn *in = &p->prog.insns[pc];
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	*callee_pc = UINT32_MAX;
	switch (cls) {
	case BPF_ALU:
	case BPF_ALU64: {
		uint64_t v;
		if (ptx_cg_alu_known(p, pc, &v)) {
			out->r[in->dst_reg] = av_of(AV_CONST, 0, (int64_t)v);
			break;
		}
		if (op == BPF_END || op == BPF_NEG)
			alu_effect(&(struct bpf_insn){.code = BPF_ALU64 | BPF_XOR | BPF_X,
						      .dst_reg = in->dst_reg, .src_reg = in->dst_reg},
				   out);
		else
			alu_effect(in, out);
		break;
	}
	case BPF_LDX:
		step_ldx(p, in, out);
		break;
	case BPF_ST:
		step_store(p, in, out);
		break;
	case BPF_STX:
		if (BPF_MODE(in->code) == BPF_ATOMIC && p->track_slots &&
		    out->r[in->dst_reg].kind == AV_STACK)
			slot_kill(out, out->r[in->dst_reg].v + in->off, 8);
		else
			step_store(p, in, out);
		if (BPF_MODE(in->code) == BPF_ATOMIC) {
			if (in->imm == BPF_CMPXCHG)
				out->r[0] = av_of(AV_UNKNOWN, 0, 0);
			else if (in->imm & BPF_FETCH)
				out->r[in->src_reg] = av_of(AV_UNKNOWN, 0, 0);
		}
		break;
	case BPF_LD: {
		if (in->code != (BPF_LD | BPF_IMM | BPF_DW))
			break; /* legacy packet loads: refused when emitted */
		uint64_t v = (uint32_t)in[0].imm | ((uint64_t)(uint32_t)in[1].imm << 32);
		if (in->src_reg == BPF_PSEUDO_MAP_FD)
			out->r[in->dst_reg] = av_of(AV_MAP, (uint32_t)in->imm, 0);
		else if (in->src_reg == BPF_PSEUDO_MAP_VALUE)
			out->r[in->dst_reg] = av_of(AV_MAPVAL, (uint32_t)in->imm, in[1].imm);
		else
			out->r[in->dst_reg] = av_of(AV_CONST, 0, (int64_t)v);
		succ[0] = pc + 2;
		return 1;
	}
	case BPF_JMP:
	case BPF_JMP32:
		if (op == BPF_EXIT)
			return 0;
		if (op == BPF_CALL) {
			if (in->src_reg == BPF_PSEUDO_CALL && BPF_SRC(in->code) == BPF_K) {
				*callee = *out;
				for (int r = 1; r <= 5; r++)
					if (may_stack(&callee->r[r])) { /* the caller's frame */
						callee->r[r] = av_of(AV_UNKNOWN, 0, 0);
						callee->r[r].stk = 1;
					}
				callee->r[0] = av_of(AV_UNKNOWN, 0, 0);
				for (int r = 6; r <= 9; r++)
					callee->r[r] = av_of(AV_UNKNOWN, 0, 0);
				callee->r[10] = av_of(AV_STACK, 0, 0);
				callee->nsl = 0; /* a new frame */
				*callee_pc = pc + 1 + (uint32_t)in->imm;
				clobber_call(out);
				break;
			}
			step_helper(p, in, out);
			break;
		}
		if (op == BPF_JA) {
			int32_t o = cls == BPF_JMP32 ? in->imm : in->off;
			succ[0] = pc + 1 + (uint32_t)o;
			return 1;
		}
		int known = ptx_cg_cond_known(p, pc);
		if (known >= 0) {
			succ[0] = known ? pc + 1 + (uint32_t)(int32_t)in->off : pc + 1;
			return 1;
		}
		succ[0] = pc + 1;
		succ[1] = pc + 1 + (uint32_t)(int32_t)in->off;
		return 2;
	}
	succ[0] = pc + 1;
	return 1;
}

uint32_t ptx_cg_value_chunk(uint32_t value_size, int64_t v)
{
	uint32_t chunk = 8;
	while (chunk > 1 && (value_size % chunk || v % chunk))
		chunk /= 2;
	return chunk;
}

uint32_t ptx_cg_chunk_at(const struct cg_prog *p, int64_t v, int64_t o, int64_t end)
{
	int64_t in_word = (o - v) % 8;
	uint32_t best = 0;
	for (uint32_t i = 0; i < p->nacc; i++) {
		const struct cg_slot *a = &p->acc[i];
		if (a->off == o && a->size > best && a->size <= 8 && o + a->size <= end &&
		    in_word + a->size <= 8)
			best = a->size;
	}
	if (best)
		return best;
	uint32_t c = 8;
	while (c > 1 && ((o - v) % c || o % c || end - o < c || in_word + c > 8))
		c /= 2;
	return c;
}

/* Records a static stack access [v, v+size). */
static void note_stack(struct cg_prog *p, int64_t *lowest, int64_t v, uint32_t size)
{
	if (v < *lowest)
		*lowest = v;
	if (p->nacc >= CG_MAX_SLOTS * 4) {
		p->escape = true; /* too many to promote: keep them in .local */
		return;
	}
	p->acc[p->nacc++] = (struct cg_slot){.off = v, .size = size};
}

static bool static_stack_helper(int32_t id)
{
	return id == CUBPF_FN_map_lookup_elem || id == CUBPF_FN_map_update_elem ||
	       id == CUBPF_FN_ringbuf_output ||
	       id == CUBPF_FN_map_delete_elem || id == CUBPF_FN_get_block_idx ||
	       id == CUBPF_FN_get_block_dim || id == CUBPF_FN_get_thread_idx ||
	       id == CUBPF_FN_get_grid_dim;
}

static void scan_helper(struct cg_prog *p, const struct bpf_insn *in, const struct av_state *s,
			int64_t *lowest)
{
	bool any = false;
	for (int r = 1; r <= 5; r++)
		any |= s->r[r].kind == AV_STACK;
	if (!any)
		return;
	if (BPF_SRC(in->code) == BPF_X || !static_stack_helper(in->imm)) {
		p->escape = true;
		return;
	}
	const struct av *a = s->r;
	switch (in->imm) {
	case CUBPF_FN_map_update_elem:
		if (a[3].kind == AV_STACK) {
			if (a[1].kind != AV_MAP || a[1].map >= p->map_cnt) {
				p->escape = true;
				break;
			}
			uint32_t vs = p->maps[a[1].map].value_size;
			uint32_t ch = ptx_cg_value_chunk(vs, a[3].v);
			for (uint32_t o = 0; o < vs; o += ch)
				note_stack(p, lowest, a[3].v + o, ch);
		}
		__attribute__((fallthrough)); /* the key */
	case CUBPF_FN_map_lookup_elem:
	case CUBPF_FN_map_delete_elem:
		if (a[2].kind == AV_STACK && a[1].kind == AV_MAP && a[1].map < p->map_cnt &&
		    p->maps[a[1].map].type == CUBPF_MAP_HASH) {
			/* hash keys are read in chunks as maps.c reads them */
			int64_t v = a[2].v, end = v + p->maps[a[1].map].key_size;
			for (int64_t o = v, ch; o < end; o += ch)
				note_stack(p, lowest, o, (uint32_t)(ch = ptx_cg_chunk_at(p, v, o, end)));
		} else if (a[2].kind == AV_STACK) {
			note_stack(p, lowest, a[2].v, 4);
		}
		for (int r = 4; r <= 5; r++)
			if (a[r].kind == AV_STACK)
				p->escape = true;
		if (a[1].kind == AV_STACK || (in->imm != CUBPF_FN_map_update_elem && a[3].kind == AV_STACK))
			p->escape = true;
		break;
	case CUBPF_FN_ringbuf_output: /* the record: r2, r3 bytes (a constant) */
		if (a[2].kind == AV_STACK && a[3].kind == AV_CONST && a[3].v > 0 && a[3].v <= 4096) {
			int64_t v = a[2].v, end = v + a[3].v;
			for (int64_t o = v, ch; o < end; o += ch)
				note_stack(p, lowest, o, (uint32_t)(ch = ptx_cg_chunk_at(p, v, o, end)));
		} else if (a[2].kind == AV_STACK) {
			p->escape = true;
		}
		for (int r = 3; r <= 5; r++)
			if (a[r].kind == AV_STACK)
				p->escape = true;
		break;
	default: /* x, y, z outputs */
		for (int r = 1; r <= 3; r++)
			if (a[r].kind == AV_STACK)
				note_stack(p, lowest, a[r].v, 8);
		if (a[4].kind == AV_STACK || a[5].kind == AV_STACK)
			p->escape = true;
	}
}

/* Whether register r holds, here, a runtime value that may be a stack address. */
static bool lost_stack(const struct av_state *s, int r)
{
	return s->r[r].kind == AV_UNKNOWN && s->r[r].stk;
}

/* Whether the instruction reads a register that may hold a stack address the analysis could
 * not pin to one offset: its value must then exist at run time, a real generic address of the
 * stack (r10 computed, every stack address computed, no slot kept in a register). */
static bool reads_lost_stack(const struct bpf_insn *in, const struct av_state *s)
{
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	bool x = BPF_SRC(in->code) == BPF_X;
	switch (cls) {
	case BPF_LDX:
		return lost_stack(s, in->src_reg);
	case BPF_ST:
		return lost_stack(s, in->dst_reg);
	case BPF_STX:
		return lost_stack(s, in->dst_reg) || lost_stack(s, in->src_reg);
	case BPF_ALU:
	case BPF_ALU64:
		return (op != BPF_MOV && lost_stack(s, in->dst_reg)) || (x && lost_stack(s, in->src_reg));
	case BPF_JMP:
	case BPF_JMP32:
		if (op == BPF_EXIT)
			return lost_stack(s, 0);
		if (op == BPF_CALL) {
			for (int r = 1; r <= 5; r++)
				if (lost_stack(s, r))
					return true;
			return false;
		}
		if (op == BPF_JA)
			return false;
		return lost_stack(s, in->dst_reg) || (x && lost_stack(s, in->src_reg));
	}
	return false;
}

static void scan_stack(struct cg_prog *p, uint32_t pc, int64_t *lowest)
{
	const struct bpf_insn *in = &p->prog.insns[pc];
	const struct av_state *s = &p->st[pc];
	uint8_t cls = BPF_CLASS(in->code), sz = BPF_SIZE(in->code);
	uint32_t w = sz == BPF_B ? 1 : sz == BPF_H ? 2 : sz == BPF_W ? 4 : 8;
	if (reads_lost_stack(in, s))
		p->escape = true;
	if (cls == BPF_LDX && s->r[in->src_reg].kind == AV_STACK)
		note_stack(p, lowest, s->r[in->src_reg].v + in->off, w);
	if ((cls == BPF_ST || cls == BPF_STX) && s->r[in->dst_reg].kind == AV_STACK)
		note_stack(p, lowest, s->r[in->dst_reg].v + in->off, w);
	if (cls == BPF_JMP && BPF_OP(in->code) == BPF_CALL && in->src_reg == 0)
		scan_helper(p, in, s, lowest);
	if (cls == BPF_JMP && BPF_OP(in->code) == BPF_CALL && in->src_reg == BPF_PSEUDO_CALL) {
		p->has_calls = true;
		for (int r = 1; r <= 5; r++)
			if (s->r[r].kind == AV_STACK)
				p->escape = true;
	}
	/* Any other read of a stack address makes it a runtime value: generic accesses can
	 * then reach anywhere in the frame. */
	if (cls == BPF_STX && s->r[in->src_reg].kind == AV_STACK)
		p->escape = true;
	if ((cls == BPF_ALU || cls == BPF_ALU64) && BPF_SRC(in->code) == BPF_X &&
	    s->r[in->src_reg].kind == AV_STACK &&
	    !(BPF_OP(in->code) == BPF_MOV && cls == BPF_ALU64 && in->off == 0))
		p->escape = true;
	if ((cls == BPF_ALU || cls == BPF_ALU64) && s->r[in->dst_reg].kind == AV_STACK &&
	    BPF_OP(in->code) != BPF_MOV) {
		bool constadd = cls == BPF_ALU64 && (BPF_OP(in->code) == BPF_ADD ||
						     BPF_OP(in->code) == BPF_SUB) &&
				(BPF_SRC(in->code) == BPF_K || s->r[in->src_reg].kind == AV_CONST);
		if (!constadd)
			p->escape = true;
	}
	if ((cls == BPF_JMP || cls == BPF_JMP32) && BPF_OP(in->code) != BPF_CALL &&
	    BPF_OP(in->code) != BPF_EXIT && BPF_OP(in->code) != BPF_JA &&
	    (s->r[in->dst_reg].kind == AV_STACK ||
	     (BPF_SRC(in->code) == BPF_X && s->r[in->src_reg].kind == AV_STACK)))
		p->escape = true;
	if (cls == BPF_JMP && BPF_OP(in->code) == BPF_EXIT && s->r[0].kind == AV_STACK)
		p->escape = true;
}

static int slot_cmp(const void *a, const void *b)
{
	const struct cg_slot *x = a, *y = b;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->size < y->size ? -1 : x->size > y->size;
}

/* Stack slots become registers when every access is static and accesses never partly
 * overlap: then the program's stack is a set of variables, as the JIT would want it. */
static void choose_slots(struct cg_prog *p)
{
	if (p->escape || p->has_calls || !p->nacc)
		return;
	qsort(p->acc, p->nacc, sizeof(*p->acc), slot_cmp);
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->nacc; i++) {
		if (n && p->acc[i].off == p->slots[n - 1].off && p->acc[i].size == p->slots[n - 1].size)
			continue;
		if (n && p->acc[i].off < p->slots[n - 1].off + (int64_t)p->slots[n - 1].size)
			return; /* partial overlap: keep the stack in memory */
		if (n == CG_MAX_SLOTS)
			return;
		p->slots[n++] = p->acc[i];
	}
	p->nslots = n;
	p->promoted = true;
}

static int check_bounds(struct cg_prog *p, char *err, size_t errlen)
{
	uint32_t n = p->prog.insn_cnt;
	for (uint32_t pc = 0; pc < n; pc++) {
		const struct bpf_insn *in = &p->prog.insns[pc];
		if (in->dst_reg > 10 || in->src_reg > 10) {
			ptx_seterr(err, errlen, "insn %u: register r%u does not exist", pc,
				   in->dst_reg > 10 ? in->dst_reg : in->src_reg);
			return -1;
		}
	}
	/* every slot, not only instruction starts: a jump may land anywhere */
	for (uint32_t pc = 0; pc < n; pc++) {
		const struct bpf_insn *in = &p->prog.insns[pc];
		if (in->code == (BPF_LD | BPF_IMM | BPF_DW) && pc + 1 >= n) {
			ptx_seterr(err, errlen, "insn %u: lddw without its second half", pc);
			return -1;
		}
	}
	return 0;
}

static int walk(struct cg_prog *p, char *err, size_t errlen)
{
	uint32_t n = p->prog.insn_cnt;
	uint32_t *work = malloc(sizeof(*work) * (n + 1) * 2);
	bool *queued = calloc(n + 1, sizeof(*queued));
	if (!work || !queued) {
		free(work), free(queued);
		ptx_seterr(err, errlen, "out of memory");
		return -1;
	}
	size_t top = 0;
	struct av_state init = {.reached = true};
	if (ptx_cg_is_gpu_kind(p->prog.kind))
		init.r[1] = av_of(AV_CTX, 0, 0);
	init.r[10] = av_of(AV_STACK, 0, 0);
	p->st[0] = init;
	p->func_end[0] = 1;
	work[top++] = 0;
	queued[0] = true;
	int rc = 0;
	while (top && !rc) {
		uint32_t pc = work[--top];
		queued[pc] = false;
		struct av_state out = p->st[pc], callee;
		uint32_t succ[2], cpc;
		int ns = step(p, pc, &out, succ, &callee, &cpc);
		if (cpc != UINT32_MAX) {
			if (cpc >= n) {
				ptx_seterr(err, errlen, "insn %u: call target %u outside the program", pc, cpc);
				rc = -1;
				break;
			}
			p->func_end[cpc] = 1;
			if (merge(p, cpc, &callee) && !queued[cpc])
				work[top++] = cpc, queued[cpc] = true;
		}
		for (int i = 0; i < ns; i++) {
			if (succ[i] >= n) {
				ptx_seterr(err, errlen, "insn %u: jump or fall-through past the end", pc);
				rc = -1;
				break;
			}
			if (succ[i] != pc + cg_slots(&p->prog.insns[pc]))
				p->target[succ[i]] = true;
			if (merge(p, succ[i], &out) && !queued[succ[i]])
				work[top++] = succ[i], queued[succ[i]] = true;
		}
		/* the target of any jump gets a label, even when the branch is folded */
		const struct bpf_insn *ji = &p->prog.insns[pc];
		uint8_t jc = BPF_CLASS(ji->code), jo = BPF_OP(ji->code);
		if ((jc == BPF_JMP || jc == BPF_JMP32) && jo != BPF_CALL && jo != BPF_EXIT) {
			int32_t o = jc == BPF_JMP32 && jo == BPF_JA ? ji->imm : ji->off;
			uint32_t t = pc + 1 + (uint32_t)o;
			if (t < n)
				p->target[t] = true;
		}
	}
	free(work);
	free(queued);
	return rc;
}

/* Turns the function-start marks into [start, end) ranges. */
static void func_ranges(struct cg_prog *p)
{
	uint32_t n = p->prog.insn_cnt, start = 0;
	for (uint32_t pc = 1; pc <= n; pc++) {
		if (pc == n || p->func_end[pc]) {
			p->func_end[start] = pc;
			start = pc;
		}
	}
}

static void scan_all(struct cg_prog *p, int64_t *lowest)
{
	*lowest = 0;
	p->nacc = 0;
	for (uint32_t pc = 0; pc < p->prog.insn_cnt; pc += cg_slots(&p->prog.insns[pc]))
		if (p->st[pc].reached)
			scan_stack(p, pc, lowest);
}

int ptx_cg_analyze(struct cg_prog *p, char *err, size_t errlen)
{
	uint32_t n = p->prog.insn_cnt;
	free(p->st), free(p->target), free(p->func_end);
	p->st = calloc(n + 1, sizeof(*p->st));
	p->target = calloc(n + 1, sizeof(*p->target));
	p->func_end = calloc(n + 1, sizeof(*p->func_end));
	if (!p->st || !p->target || !p->func_end) {
		ptx_seterr(err, errlen, "out of memory");
		return -1;
	}
	p->escape = p->has_calls = p->promoted = p->track_slots = false;
	p->nslots = 0;
	if (check_bounds(p, err, errlen) || walk(p, err, errlen))
		return -1;
	int64_t lowest;
	scan_all(p, &lowest);
	if (p->fold && !p->escape) {
		/* again, now following constants through the stack (no pointer to it escapes) */
		memset(p->st, 0, (n + 1) * sizeof(*p->st));
		memset(p->target, 0, (n + 1) * sizeof(*p->target));
		memset(p->func_end, 0, (n + 1) * sizeof(*p->func_end));
		p->track_slots = true;
		if (walk(p, err, errlen))
			return -1;
		scan_all(p, &lowest);
	}
	func_ranges(p);
	choose_slots(p);
	if (lowest < -VM_STACK_SIZE) {
		ptx_seterr(err, errlen, "stack access at r10%lld is beyond the %d-byte stack",
			   (long long)lowest, VM_STACK_SIZE);
		return -1;
	}
	p->frame = p->escape ? VM_STACK_SIZE : (uint32_t)((-lowest + 15) & ~15);
	return 0;
}

/* ---- maps only added to (deferred counters, struct cg_accs) ---- */

/* Helpers that neither read nor write map values: a deferred add cannot show through them. */
static bool helper_blind(int32_t id)
{
	switch (id) {
	case CUBPF_FN_map_lookup_elem: /* an address, not the value */
	case CUBPF_FN_ktime_get_ns:
	case CUBPF_FN_get_globaltimer:
	case CUBPF_FN_get_clock:
	case CUBPF_FN_get_smp_processor_id:
	case CUBPF_FN_get_sm_id:
	case CUBPF_FN_get_warp_id:
	case CUBPF_FN_get_lane_id:
	case CUBPF_FN_gpu_membar:
	case CUBPF_FN_get_active_mask:
	case CUBPF_FN_get_active_count:
	case CUBPF_FN_is_warp_leader:
	case CUBPF_FN_warp_count_unique:
	case CUBPF_FN_gpu_delay_ns:
	case CUBPF_FN_warp_sum:
		return true;
	}
	return false;
}

/* The maps an access through `a` may touch: none for the context and the stack, its map for a
 * map value, any for a pointer of unknown origin. */
static uint64_t touches(const struct av *a)
{
	if (a->kind == AV_CTX || a->kind == AV_STACK)
		return 0;
	if (a->kind == AV_MAPVAL && a->map < 64)
		return 1ull << a->map;
	return ~0ull;
}

static uint64_t insn_taint(const struct cg_prog *p, uint32_t pc)
{
	const struct bpf_insn *in = &p->prog.insns[pc];
	const struct av_state *s = &p->st[pc];
	switch (BPF_CLASS(in->code)) {
	case BPF_LDX:
		return touches(&s->r[in->src_reg]);
	case BPF_ST:
		return touches(&s->r[in->dst_reg]);
	case BPF_STX: /* an add without fetch commutes with a deferred one */
		if (BPF_MODE(in->code) == BPF_ATOMIC && in->imm == BPF_ADD)
			return 0;
		return touches(&s->r[in->dst_reg]);
	case BPF_JMP:
		if (BPF_OP(in->code) != BPF_CALL || in->src_reg == BPF_PSEUDO_CALL)
			return 0;
		return BPF_SRC(in->code) == BPF_K && in->src_reg == 0 && helper_blind(in->imm)
			       ? 0 : ~0ull;
	}
	return 0;
}

uint64_t ptx_cg_map_taint(const struct cg_prog *p)
{
	uint64_t t = 0;
	for (uint32_t pc = 0; pc < p->prog.insn_cnt; pc += cg_slots(&p->prog.insns[pc]))
		if (p->st[pc].reached)
			t |= insn_taint(p, pc);
	return t;
}
