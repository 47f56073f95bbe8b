/* What each instruction does to the verifier's abstract state, and the checks it must pass:
 * register initialisation, pointer arithmetic, memory bounds (stack, map values, context),
 * helper arguments, bpf-to-bpf frames. */
#include <string.h>

#include "vm/verifier.h"

#define REJ(...) vm_reject(v, pc, __VA_ARGS__)

const char *vm_type_name(uint8_t type)
{
	static const char *const names[] = {"uninit", "scalar", "ctx", "fp", "map_value",
					    "map_value_or_null", "map_ptr", "ringbuf_mem",
					    "ringbuf_mem_or_null"};
	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

static bool is_ptr(const struct vreg *r)
{
	return r->type != T_NOT_INIT && r->type != T_SCALAR;
}

static void mark_uninit(struct vreg *r)
{
	memset(r, 0, sizeof(*r));
}

static bool gpu(const struct verifier *v)
{
	return vm_kind_is_gpu(v->prog->kind);
}

static struct vframe *cur(struct vstate *st)
{
	return st->fr[st->cur];
}

static int need_init(struct verifier *v, uint32_t pc, const struct vreg *r, int regno)
{
	if (r->type == T_NOT_INIT)
		return REJ("R%d !read_ok (register read before it was written)", regno);
	return STEP_NEXT;
}

/* ---- ALU ------------------------------------------------------------------------------------- */

static bool or_null(uint8_t type)
{
	return type == T_MAP_VALUE_OR_NULL || type == T_MEM_OR_NULL;
}

static int ptr_alu(struct verifier *v, uint32_t pc, struct vreg *dst, const struct vreg *src,
		   uint8_t op, int dreg)
{
	if (or_null(dst->type))
		return REJ("R%d pointer arithmetic on %s prohibited, null-check it first", dreg,
			   vm_type_name(dst->type));
	if (dst->type == T_MAP_PTR)
		return REJ("R%d pointer arithmetic on map_ptr prohibited", dreg);
	if (op != BPF_ADD && op != BPF_SUB)
		return REJ("R%d pointer arithmetic with this operator is prohibited (only += and -=)",
			   dreg);
	if (src->type != T_SCALAR)
		return REJ("R%d pointer arithmetic between two pointers is prohibited", dreg);
	if (dst->type == T_CTX && !vm_range_is_const(src))
		return REJ("R%d variable ctx access prohibited (context offsets must be constant)",
			   dreg);
	if (vm_range_is_const(src)) {
		int64_t k = (int64_t)src->tv;
		int64_t noff = op == BPF_ADD ? (int64_t)dst->off + k : (int64_t)dst->off - k;
		if (noff < -(1ll << 29) || noff > (1ll << 29))
			return REJ("R%d pointer offset %lld is out of range", dreg, (long long)noff);
		dst->off = (int32_t)noff;
		return STEP_NEXT;
	}
	/* the variable part lives in the scalar fields of the pointer register */
	struct vreg var = *dst;
	var.type = T_SCALAR;
	vm_range_alu(&var, src, op, 0, true); /* any range: accesses check it before using it */
	/* keep what makes it a pointer (type, map, frame, fixed offset), take the new range */
	dst->smin = var.smin, dst->smax = var.smax;
	dst->umin = var.umin, dst->umax = var.umax;
	dst->tv = var.tv, dst->tm = var.tm;
	return STEP_NEXT;
}

/* Two pointers into one region (one frame's stack, one map value, one ring buffer record):
 * their difference and their order are offsets, not addresses. */
static bool same_region(const struct vreg *a, const struct vreg *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case T_STACK:
		return a->frameno == b->frameno;
	case T_MAP_VALUE:
		return a->map == b->map && a->vid == b->vid;
	case T_MEM:
		return a->ref == b->ref;
	default:
		return false;
	}
}

/* A pointer whose variable part is a known constant. */
static bool r_is_const_off(const struct vreg *r)
{
	return r->tm == 0 && r->smin == r->smax;
}

/* Both offsets (fixed + variable part) must be bounded for a difference to be one. */
static bool offset_bounded(const struct vreg *r)
{
	return r->smin >= -(1ll << 29) && r->smax <= (1ll << 29);
}

/* pointer - pointer: allowed only within one region, where the result is the (bounded)
 * difference of the offsets; two map values (even of one map: two lookups may return two
 * elements) or two frames would give an address difference, which leaks addresses and, added
 * back to a pointer, escapes every bounds check. */
static int alu_pointer_sub(struct verifier *v, uint32_t pc, struct vreg *dst,
			   const struct vreg *src, int dreg)
{
	if (!same_region(dst, src))
		return REJ("R%d subtraction of unrelated pointers prohibited (%s - %s: "
			   "only pointers into one map value, one stack frame or one record)", dreg,
			   vm_type_name(dst->type), vm_type_name(src->type));
	if (!offset_bounded(dst) || !offset_bounded(src))
		return REJ("R%d subtraction of pointers with unbounded offsets prohibited", dreg);
	int64_t lo = ((int64_t)dst->off + dst->smin) - ((int64_t)src->off + src->smax);
	int64_t hi = ((int64_t)dst->off + dst->smax) - ((int64_t)src->off + src->smin);
	if (lo == hi)
		vm_range_const(dst, (uint64_t)lo);
	else {
		vm_range_unknown(dst);
		dst->smin = lo, dst->smax = hi;
		if (lo >= 0)
			dst->umin = (uint64_t)lo, dst->umax = (uint64_t)hi;
		vm_range_sync(dst);
	}
	return STEP_NEXT;
}

static int check_end(struct verifier *v, uint32_t pc, const struct bpf_insn *in, struct vreg *d)
{
	if (in->imm != 16 && in->imm != 32 && in->imm != 64)
		return REJ("invalid byte swap width %d", in->imm);
	if (vm_range_is_const(d)) {
		uint64_t x = d->tv;
		bool swap = BPF_CLASS(in->code) == BPF_ALU64 || BPF_SRC(in->code) == BPF_X;
		x = in->imm == 16 ? (swap ? __builtin_bswap16((uint16_t)x) : (uint16_t)x)
		    : in->imm == 32 ? (swap ? __builtin_bswap32((uint32_t)x) : (uint32_t)x)
				    : (swap ? __builtin_bswap64(x) : x);
		vm_range_const(d, x);
	} else if (in->imm < 64)
		vm_range_set(d, 0, in->imm == 16 ? 0xffff : 0xffffffffull);
	else
		vm_range_unknown(d);
	return STEP_NEXT;
}

static int check_alu(struct verifier *v, uint32_t pc, const struct bpf_insn *in, struct vstate *st)
{
	struct vframe *f = cur(st);
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64;
	uint8_t op = BPF_OP(in->code);
	struct vreg *dst = &f->regs[in->dst_reg], src;
	if (in->dst_reg == BPF_REG_10)
		return REJ("frame pointer is read only");
	if (BPF_SRC(in->code) == BPF_X && op != BPF_END && op != BPF_NEG) {
		if (need_init(v, pc, &f->regs[in->src_reg], in->src_reg) == STEP_ERROR)
			return STEP_ERROR;
		src = f->regs[in->src_reg];
	} else
		vm_range_const(&src, is64 ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm);
	if (op == BPF_MOV && in->off == 0) {
		if (is64) {
			*dst = src;
			return STEP_NEXT;
		}
		if (is_ptr(&src))
			return REJ("R%d partial copy of pointer (32-bit move of R%d)", in->dst_reg,
				   in->src_reg);
		vm_range_alu(dst, &src, BPF_MOV, 0, false);
		return STEP_NEXT;
	}
	if (op != BPF_MOV && need_init(v, pc, dst, in->dst_reg) == STEP_ERROR)
		return STEP_ERROR;
	if (op == BPF_END)
		return is_ptr(dst) ? REJ("R%d byte swap of a pointer prohibited", in->dst_reg)
				   : check_end(v, pc, in, dst);
	bool dptr = op != BPF_MOV && is_ptr(dst), sptr = is_ptr(&src);
	if ((dptr || sptr) && !is64)
		return REJ("R%d 32-bit pointer arithmetic prohibited", in->dst_reg);
	if (op == BPF_MOV && sptr)
		return REJ("R%d sign-extending move of a pointer prohibited", in->dst_reg);
	if (dptr && sptr && op == BPF_SUB)
		return alu_pointer_sub(v, pc, dst, &src, in->dst_reg);
	if (dptr && dst->type == T_CTX && BPF_SRC(in->code) == BPF_X && vm_range_is_const(&src) &&
	    gpu(v))
		return REJ("R%d context pointer + register is not compiled in %s programs (the code "
			   "generator follows only offsets it can see: write ctx + constant)",
			   in->dst_reg, vm_prog_kind_name(v->prog->kind));
	if (dptr)
		return ptr_alu(v, pc, dst, &src, op, in->dst_reg);
	if (sptr) {
		if (src.type == T_CTX && gpu(v))
			return REJ("R%d scalar + context pointer is not compiled in %s programs (write "
				   "ctx + offset)", in->dst_reg, vm_prog_kind_name(v->prog->kind));
		if (op != BPF_ADD)
			return REJ("R%d pointer arithmetic with this operator is prohibited "
				   "(scalar %s pointer)", in->dst_reg, op == BPF_SUB ? "-" : "op");
		struct vreg scalar = *dst;
		*dst = src;
		return ptr_alu(v, pc, dst, &scalar, BPF_ADD, in->dst_reg);
	}
	vm_range_alu(dst, &src, op == BPF_NEG ? BPF_NEG : op, in->off, is64);
	return STEP_NEXT;
}

/* ---- memory ------------------------------------------------------------------------------------ */

static int64_t slot_index(int64_t off)
{
	return VM_STACK_SIZE + off; /* byte index in stype, for -512 <= off < 0 */
}

/* A stack range of the frame `fr`: [lo, hi) relative to its r10. */
static int stack_bounds(struct verifier *v, uint32_t pc, int64_t lo, int64_t hi, int regno)
{
	if (lo < -VM_STACK_SIZE || hi > 0 || lo >= hi)
		return REJ("invalid stack access R%d off=%lld size=%lld (the stack is [-512, 0) from "
			   "r10)", regno, (long long)lo, (long long)(hi - lo));
	return STEP_NEXT;
}

/* Records stack use; all frames together share one 512-byte stack, as in Linux. */
static int stack_touch(struct verifier *v, uint32_t pc, struct vstate *st, struct vframe *f,
		       int64_t lo)
{
	if ((uint32_t)-lo > f->depth)
		f->depth = (uint32_t)-lo;
	uint32_t total = 0;
	for (uint32_t i = 0; i <= st->cur; i++)
		total += (st->fr[i]->depth + 7) & ~7u;
	if (total > v->max_depth)
		v->max_depth = total;
	if (total > VM_STACK_SIZE)
		return REJ("combined stack size of %u calls is %u bytes: too large (limit %d)",
			   st->cur + 1, total, VM_STACK_SIZE);
	return STEP_NEXT;
}

/* Bytes [lo, hi) of a spilled slot change: a spilled scalar becomes plain data, a spilled
 * pointer's other bytes become unreadable (S_POISON): they still hold address bits. */
static void unspill(struct vframe *f, int64_t lo, int64_t hi)
{
	for (int64_t s = lo & ~7ll; s < hi; s += 8) {
		int64_t i = slot_index(s);
		if (f->stype[i] == S_SPILL)
			memset(&f->stype[i], is_ptr(&f->spill[i / 8]) ? S_POISON : S_MISC, 8);
	}
}

static void stack_write_misc(struct vframe *f, int64_t lo, int64_t hi)
{
	unspill(f, lo, hi);
	memset(&f->stype[slot_index(lo)], S_MISC, (size_t)(hi - lo));
}

/* A helper writes [lo, lo + n) where n is in [min, max]: only the first `min` bytes are surely
 * written; the others keep what they were (or lose a spill they may have overwritten). */
static void stack_write_upto(struct vframe *f, int64_t lo, uint64_t min, uint64_t max)
{
	unspill(f, lo, lo + (int64_t)max);
	if (min)
		memset(&f->stype[slot_index(lo)], S_MISC, (size_t)min);
}

static int stack_read_ok(struct verifier *v, uint32_t pc, const struct vreg *p, struct vframe *f,
			 int64_t lo, int64_t hi, int regno, bool allow_ptr)
{
	vm_stack_read(v, p->frameno, lo, hi);
	for (int64_t o = lo; o < hi; o++) {
		uint8_t t = f->stype[slot_index(o)];
		if (t == S_INVALID)
			return REJ("invalid read from stack R%d off %lld+%lld size %lld: fp%lld is not "
				   "initialised", regno, (long long)lo, (long long)(o - lo),
				   (long long)(hi - lo), (long long)o);
		if (t == S_POISON)
			return REJ("R%d invalid read from stack: fp%lld holds bytes of a pointer that is "
				   "no longer valid (partly overwritten, a released ring buffer record, or "
				   "the stack of a function that returned): reading it would leak an "
				   "address", regno, (long long)o);
		if (t == S_SPILL && !allow_ptr &&
		    is_ptr(&f->spill[slot_index(o & ~7ll) / 8]))
			return REJ("R%d leaks a pointer: stack slot fp%lld holds a pointer", regno,
				   (long long)(o & ~7ll));
	}
	return STEP_NEXT;
}

/* The frame a stack pointer points into; NULL (rejected) when that function has returned. */
static struct vframe *stack_frame(struct verifier *v, uint32_t pc, struct vstate *st,
				  const struct vreg *p, int regno)
{
	if (p->frameno > st->cur || !st->fr[p->frameno]) {
		REJ("R%d points into the stack of a function that has returned", regno);
		return NULL;
	}
	return st->fr[p->frameno];
}

static void load_result(struct vreg *dst, int size, bool sx)
{
	if (size == 8)
		vm_range_unknown(dst);
	else if (!sx)
		vm_range_set(dst, 0, (1ull << (size * 8)) - 1);
	else {
		vm_range_unknown(dst);
		dst->smin = -(1ll << (size * 8 - 1));
		dst->smax = (1ll << (size * 8 - 1)) - 1;
		vm_range_sync(dst);
	}
}

/* One memory access, by an instruction or by a helper through an argument: [off, off + size)
 * from the pointer in `regno`.  A helper's size may be a register: `size` is then its largest
 * value (every byte up to it must be in bounds, and readable when read) and `size_min` its
 * smallest (the bytes a write surely initialises). */
struct access {
	int regno;             /* the pointer register */
	int64_t off;           /* the instruction's offset */
	int size;
	int size_min;          /* helpers: the bytes a write surely initialises */
	bool write, sx, atomic;
	bool helper;           /* through a helper argument: a copy, not a load or a spill */
	const struct vreg *val;/* stored value (stx register or st immediate), NULL for loads */
	int valreg;            /* its register number (-1 for an immediate) */
	struct vreg *dst;      /* load destination (NULL: nothing is loaded) */
};

/* A helper copies bytes: a read needs them all initialised and none a pointer's; a write of
 * size_min..size bytes initialises the first size_min. */
/* A helper's memory argument on the stack.  Liveness (state pruning): a read marks the bytes
 * read; a write marks as written only the bytes it surely writes (size_min), since the rest
 * may keep what an earlier path left there. */
static int stack_helper_access(struct verifier *v, uint32_t pc, const struct vreg *p,
			       struct vframe *f, int64_t lo, const struct access *a)
{
	if (a->write) {
		vm_stack_written(v, p->frameno, lo, lo + a->size_min);
		stack_write_upto(f, lo, (uint64_t)a->size_min, (uint64_t)a->size);
		return STEP_NEXT;
	}
	return stack_read_ok(v, pc, p, f, lo, lo + a->size, a->regno, false);
}

static int stack_access(struct verifier *v, uint32_t pc, struct vstate *st, const struct vreg *p,
			const struct access *a)
{
	if (p->smin != p->smax)
		return REJ("R%d variable stack access prohibited (use a constant offset from r10)",
			   a->regno);
	if (p->smin < -(1ll << 29) || p->smin > (1ll << 29))
		return REJ("invalid stack access R%d: offset %lld", a->regno, (long long)p->smin);
	struct vframe *f = stack_frame(v, pc, st, p, a->regno);
	if (!f)
		return STEP_ERROR;
	int64_t lo = p->off + p->smin + a->off, hi = lo + a->size;
	if (stack_bounds(v, pc, lo, hi, a->regno) == STEP_ERROR)
		return STEP_ERROR;
	if (stack_touch(v, pc, st, f, lo) == STEP_ERROR)
		return STEP_ERROR;
	if (a->helper)
		return stack_helper_access(v, pc, p, f, lo, a);
	int64_t slot = slot_index(lo) / 8;
	if (a->write && !a->atomic) {
		if (a->val && is_ptr(a->val) && (a->size != 8 || lo % 8))
			return REJ("invalid size of register spill: a pointer must be stored with 8 "
				   "aligned bytes");
		if (a->val && a->val->type == T_CTX && gpu(v))
			return REJ("R%d the context pointer cannot be spilled to the stack in %s "
				   "programs (keep it in a register; the code generator tracks it "
				   "there only)", a->valreg, vm_prog_kind_name(v->prog->kind));
		if (a->val && a->val->type == T_MAP_PTR && gpu(v))
			return REJ("R%d a map pointer cannot be spilled to the stack in %s programs "
				   "(the code generator names the map of each call at compile time, "
				   "from registers only: load it again)", a->valreg,
				   vm_prog_kind_name(v->prog->kind));
		vm_stack_written(v, p->frameno, lo, hi);
		if (a->size == 8 && lo % 8 == 0) {
			memset(&f->stype[slot_index(lo)], S_SPILL, 8);
			f->spill[slot] = *a->val;
			return STEP_NEXT;
		}
		stack_write_misc(f, lo, hi);
		return STEP_NEXT;
	}
	if (stack_read_ok(v, pc, p, f, lo, hi, a->regno, !a->atomic) == STEP_ERROR)
		return STEP_ERROR;
	if (a->atomic) {
		vm_stack_written(v, p->frameno, lo, hi);
		stack_write_misc(f, lo, hi);
		return STEP_NEXT;
	}
	if (a->size == 8 && lo % 8 == 0 && f->stype[slot_index(lo)] == S_SPILL) {
		*a->dst = f->spill[slot];
		return STEP_NEXT;
	}
	for (int64_t s = lo & ~7ll; s < hi; s += 8)
		if (f->stype[slot_index(s)] == S_SPILL && is_ptr(&f->spill[slot_index(s) / 8]))
			return REJ("corrupted spill memory: partial read of a spilled pointer at fp%lld",
				   (long long)s);
	load_result(a->dst, a->size, a->sx);
	return STEP_NEXT;
}

/* A map value read from .rodata at a constant offset is a known constant. */
static bool rodata_value(struct verifier *v, const struct vreg *p, const struct access *a,
			 uint64_t *out)
{
	const struct vm_map_def *m = &v->obj->maps[p->map];
	if (m->origin != VM_MAP_RODATA || !m->init || p->smin != p->smax || a->sx)
		return false;
	int64_t o = p->off + p->smin + a->off;
	uint64_t x = 0;
	memcpy(&x, m->init + o, (size_t)a->size);
	*out = x;
	return true;
}

static int map_value_access(struct verifier *v, uint32_t pc, const struct vreg *p,
			    const struct access *a)
{
	const struct vm_map_def *m = &v->obj->maps[p->map];
	if (p->smin < 0)
		return REJ("R%d min value is negative, either use unsigned index or do a "
			   "if (index >= 0) check", a->regno);
	if (p->umax > (1u << 29) || p->smax > (1 << 29))
		return REJ("R%d unbounded memory access, make sure to bounds check any such access "
			   "(map '%s')", a->regno, m->name);
	int64_t lo = p->off + p->smin + a->off, hi = p->off + p->smax + a->off + a->size;
	if (lo < 0 || hi > (int64_t)m->value_size)
		return REJ("invalid access to map value, value_size=%u off=%lld size=%d (map '%s')",
			   m->value_size, (long long)(p->off + p->smin + a->off), a->size, m->name);
	if (a->write && !vm_map_prog_writable(m))
		return REJ("write into map '%s' which is read-only (%s)", m->name,
			   m->origin == VM_MAP_RODATA ? ".rodata" : "BPF_F_RDONLY_PROG");
	if (a->write && a->val && is_ptr(a->val))
		return REJ("R%d leaks addr into map '%s' (a pointer may not be stored in a map)",
			   a->valreg, m->name);
	if ((!a->write || a->atomic) && a->dst) {
		uint64_t x;
		if (!a->atomic && a->size <= 8 && rodata_value(v, p, a, &x))
			vm_range_const(a->dst, x);
		else if (a->dst)
			load_result(a->dst, a->size, a->sx);
	}
	return STEP_NEXT;
}

/* A reserved ring buffer record: writable, bounded by its size, never holds pointers. */
static int mem_access(struct verifier *v, uint32_t pc, const struct vreg *p, const struct access *a)
{
	if (p->smin < 0)
		return REJ("R%d min value is negative, either use unsigned index or do a "
			   "if (index >= 0) check", a->regno);
	if (p->umax > (1u << 29) || p->smax > (1 << 29))
		return REJ("R%d unbounded memory access into a ring buffer record", a->regno);
	int64_t lo = p->off + p->smin + a->off, hi = p->off + p->smax + a->off + a->size;
	if (lo < 0 || hi > (int64_t)p->mem_size)
		return REJ("invalid access to ring buffer record, size=%u off=%lld size=%d",
			   p->mem_size, (long long)lo, a->size);
	if (a->write && a->val && is_ptr(a->val))
		return REJ("R%d leaks addr into a ring buffer record", a->valreg);
	if ((!a->write || a->atomic) && a->dst)
		load_result(a->dst, a->size, a->sx);
	return STEP_NEXT;
}

/* A helper's copy of [off, off + size) of the context: whole fields back to back, so that it
 * reads no padding (which the host never writes) and nothing a load could not read. */
static bool ctx_fields_cover(const struct vm_ctx_layout *ctx, int64_t off, int64_t size)
{
	if (off < 0 || off + size > ctx->size)
		return false;
	for (int64_t o = off, end = off + size; o < end;) {
		uint32_t w = ctx->field_ok((uint32_t)o, 8) ? 8 : ctx->field_ok((uint32_t)o, 4) ? 4
			   : ctx->field_ok((uint32_t)o, 2) ? 2 : ctx->field_ok((uint32_t)o, 1) ? 1 : 0;
		if (!w)
			return false;
		o += w;
	}
	return true;
}

static int ctx_access(struct verifier *v, uint32_t pc, const struct vreg *p, const struct access *a)
{
	if (a->write)
		return REJ("cannot write into ctx: the context of %s programs is read-only",
			   vm_prog_kind_name(v->prog->kind));
	if (!v->ctx)
		return REJ("R%d: %s programs have no context to read", a->regno,
			   vm_prog_kind_name(v->prog->kind));
	if (a->sx && gpu(v))
		return REJ("sign-extending context loads are not supported in %s programs (load the "
			   "field with its own size, then sign-extend it)",
			   vm_prog_kind_name(v->prog->kind));
	int64_t off = p->off + a->off;
	bool whole = a->helper ? ctx_fields_cover(v->ctx, off, a->size)
			       : off >= 0 && v->ctx->field_ok((uint32_t)off, (uint32_t)a->size);
	if (off < 0 || off + a->size > v->ctx->size || !whole)
		return REJ("invalid bpf_context access off=%lld size=%d (fields are read whole, with "
			   "loads of their own size)", (long long)off, a->size);
	if (a->dst)
		load_result(a->dst, a->size, a->sx);
	return STEP_NEXT;
}

static int check_access(struct verifier *v, uint32_t pc, struct vstate *st, const struct access *a)
{
	const struct vreg *p = &cur(st)->regs[a->regno];
	switch (p->type) {
	case T_NOT_INIT:
		return REJ("R%d !read_ok (register read before it was written)", a->regno);
	case T_STACK:
		return stack_access(v, pc, st, p, a);
	case T_MAP_VALUE:
		return map_value_access(v, pc, p, a);
	case T_MEM:
		return mem_access(v, pc, p, a);
	case T_CTX:
		if (a->atomic)
			return REJ("atomic operation on ctx prohibited");
		return ctx_access(v, pc, p, a);
	default:
		return REJ("R%d invalid mem access '%s'", a->regno, vm_type_name(p->type));
	}
}

static const int sizes[4] = {4, 2, 1, 8};

static int check_ldx(struct verifier *v, uint32_t pc, const struct bpf_insn *in, struct vstate *st)
{
	if (in->dst_reg == BPF_REG_10)
		return REJ("frame pointer is read only");
	struct vreg val;
	struct access a = {.regno = in->src_reg, .off = in->off, .size = sizes[BPF_SIZE(in->code) >> 3],
			   .sx = BPF_MODE(in->code) == BPF_MEMSX, .dst = &val};
	if (a.sx && a.size == 8)
		return REJ("invalid sign-extending load of 8 bytes");
	if (check_access(v, pc, st, &a) == STEP_ERROR)
		return STEP_ERROR;
	cur(st)->regs[in->dst_reg] = val;
	return STEP_NEXT;
}

static int check_st(struct verifier *v, uint32_t pc, const struct bpf_insn *in, struct vstate *st)
{
	struct vframe *f = cur(st);
	struct vreg imm;
	vm_range_const(&imm, (uint64_t)(int64_t)in->imm);
	const struct vreg *val = &imm;
	if (BPF_CLASS(in->code) == BPF_STX) {
		if (need_init(v, pc, &f->regs[in->src_reg], in->src_reg) == STEP_ERROR)
			return STEP_ERROR;
		val = &f->regs[in->src_reg];
	}
	struct access a = {.regno = in->dst_reg, .off = in->off, .size = sizes[BPF_SIZE(in->code) >> 3],
			   .write = true, .val = val,
			   .valreg = BPF_CLASS(in->code) == BPF_STX ? in->src_reg : -1};
	return check_access(v, pc, st, &a);
}

/* Is [p + off] `size`-aligned whatever the variable part is?  Map values, stack frames and ring
 * buffer records all start 8-byte aligned. */
static bool atomic_aligned(const struct vreg *p, int16_t off, int size)
{
	if (!is_ptr(p))
		return true; /* rejected by the access check */
	uint64_t m = (uint64_t)size - 1;
	return (((uint64_t)((int64_t)p->off + off) + p->tv) & m) == 0 && (p->tm & m) == 0;
}

static int check_atomic(struct verifier *v, uint32_t pc, const struct bpf_insn *in,
			struct vstate *st)
{
	struct vframe *f = cur(st);
	int size = sizes[BPF_SIZE(in->code) >> 3];
	int32_t op = in->imm;
	int32_t base = op & ~BPF_FETCH;
	if (size != 4 && size != 8)
		return REJ("invalid atomic operand size %d", size);
	if (op != BPF_XCHG && op != BPF_CMPXCHG && base != BPF_ADD && base != BPF_OR &&
	    base != BPF_AND && base != BPF_XOR)
		return REJ("invalid atomic operation 0x%x", op);
	if (need_init(v, pc, &f->regs[in->src_reg], in->src_reg) == STEP_ERROR)
		return STEP_ERROR;
	if (is_ptr(&f->regs[in->src_reg]))
		return REJ("R%d leaks addr into memory through an atomic operation", in->src_reg);
	if (op == BPF_CMPXCHG && need_init(v, pc, &f->regs[0], 0) == STEP_ERROR)
		return STEP_ERROR;
	if (op == BPF_CMPXCHG && is_ptr(&f->regs[0]))
		return REJ("R0 leaks addr into memory through cmpxchg");
	struct vreg old;
	struct access a = {.regno = in->dst_reg, .off = in->off, .size = size, .write = true,
			   .atomic = true, .val = &f->regs[in->src_reg], .valreg = in->src_reg,
			   .dst = &old};
	if (atomic_aligned(&f->regs[in->dst_reg], in->off, size) == false)
		return REJ("misaligned atomic access: R%d%+d is not %d-byte aligned (a %d-bit atomic "
			   "must be naturally aligned; the GPU faults on a misaligned one)",
			   in->dst_reg, in->off, size, size * 8);
	if (check_access(v, pc, st, &a) == STEP_ERROR)
		return STEP_ERROR;
	load_result(&old, size, false);
	if (op == BPF_CMPXCHG)
		f->regs[0] = old;
	else if (op & BPF_FETCH)
		f->regs[in->src_reg] = old;
	return STEP_NEXT;
}

/* ---- helper calls ----------------------------------------------------------------------------- */

struct call_ctx {
	const struct vm_map_def *map;
	uint32_t map_idx;
	uint32_t alloc_size;   /* bpf_ringbuf_reserve's size */
	uint32_t release;      /* the reservation a submit/discard releases (0: none) */
};

/* Checks that R`regno` points to `size` bytes readable or writable; a write covers at least
 * `min` of them (a variable size: [min, size]), and only those count as initialised.  The
 * bounds are those of a load or store of that size (check_access): one check, one message. */
static int check_mem_arg(struct verifier *v, uint32_t pc, struct vstate *st, int regno,
			 uint64_t min, uint64_t size, bool write, bool zero_ok)
{
	struct vreg *p = &cur(st)->regs[regno];
	if (size == 0) {
		if (zero_ok)
			return STEP_NEXT;
		return REJ("R%d invalid zero-sized memory argument", regno);
	}
	if (size > (1u << 29))
		return REJ("R%d unbounded memory access: bound the size argument with 'if (n > "
			   "CONST)' or 'n &= CONST'", regno + 1);
	if (p->type != T_STACK && p->type != T_MAP_VALUE && p->type != T_MEM && p->type != T_CTX)
		return REJ("R%d type=%s expected=fp or map_value (pointer to memory)", regno,
			   vm_type_name(p->type));
	struct access a = {.regno = regno, .size = (int)size, .size_min = (int)min, .write = write,
			   .helper = true};
	return check_access(v, pc, st, &a);
}

/* The size register of argument i: the size argument before it (bpf_probe_read's r2). */
static int size_reg_before(const struct vm_helper_proto *h, int i)
{
	while (--i >= 0)
		if (h->args[i] == VM_ARG_CONST_SIZE || h->args[i] == VM_ARG_CONST_SIZE_OR_ZERO)
			return i + 1;
	return -1;
}

/* bpf_probe_read's source: a scalar is an address the helper copies from without faulting
 * (what a probe reads of the application); a pointer is one of the program's objects, read
 * through for the size's largest value, as a load of that size would be. */
static int check_read_src(struct verifier *v, uint32_t pc, struct vstate *st,
			  const struct vm_helper_proto *h, int i)
{
	int regno = i + 1, szreg = size_reg_before(h, i);
	const struct vreg *r = &cur(st)->regs[regno];
	if (!is_ptr(r))
		return STEP_NEXT;
	if (szreg < 0) /* a prototype without a size before: nothing to bound it with */
		return REJ("R%d %s reads through a pointer of unknown size", regno, h->name);
	const struct vreg *sz = &cur(st)->regs[szreg]; /* checked with the destination */
	return check_mem_arg(v, pc, st, regno, sz->umin, sz->umax, false, true);
}

static int check_map_arg(struct verifier *v, uint32_t pc, const struct vm_helper_proto *h,
			 const struct vreg *r, struct call_ctx *cc)
{
	if (r->type != T_MAP_PTR)
		return REJ("R1 type=%s expected=map_ptr (%s needs a map)", vm_type_name(r->type),
			   h->name);
	cc->map_idx = r->map;
	cc->map = &v->obj->maps[r->map];
	bool ring = cc->map->type == CUBPF_MAP_RINGBUF || cc->map->type == CUBPF_MAP_GPU_RINGBUF;
	bool wants_ring = h->id == CUBPF_FN_ringbuf_output || h->id == CUBPF_FN_ringbuf_reserve;
	if (wants_ring && !ring)
		return REJ("map '%s' is not a ring buffer (%s)", cc->map->name, h->name);
	if (!wants_ring && ring)
		return REJ("cannot use ring buffer map '%s' with %s", cc->map->name, h->name);
	if (wants_ring && cc->map->type == CUBPF_MAP_GPU_RINGBUF &&
	    ((VM_KINDS_HOST >> v->prog->kind) & 1))
		return REJ("map '%s' is a GPU ring buffer: %s programs cannot write to it (%s)",
			   cc->map->name, vm_prog_kind_name(v->prog->kind), h->name);
	if ((h->id == CUBPF_FN_map_update_elem || h->id == CUBPF_FN_map_delete_elem) &&
	    !vm_map_prog_writable(cc->map))
		return REJ("map '%s' is read-only: %s is not allowed", cc->map->name, h->name);
	return STEP_NEXT;
}

/* A constant string: read up to its NUL, which must lie inside the value (then the read of
 * that many bytes is checked as any other). */
static int check_const_str(struct verifier *v, uint32_t pc, struct vstate *st, int regno)
{
	const struct vreg *r = &cur(st)->regs[regno];
	if (r->type != T_MAP_VALUE || r->smin != r->smax)
		return REJ("R%d type=%s expected a constant string in .rodata", regno,
			   vm_type_name(r->type));
	const struct vm_map_def *m = &v->obj->maps[r->map];
	int64_t o = r->off + r->smin;
	const uint8_t *nul;
	if (vm_map_prog_writable(m) || !m->init || o < 0 || o >= (int64_t)m->value_size ||
	    !(nul = memchr(m->init + o, 0, m->value_size - (size_t)o)))
		return REJ("R%d does not point to a NUL-terminated string in read-only memory", regno);
	uint64_t n = (uint64_t)(nul - (m->init + o)) + 1;
	return check_mem_arg(v, pc, st, regno, n, n, false, false);
}

static int check_arg(struct verifier *v, uint32_t pc, struct vstate *st,
		     const struct vm_helper_proto *h, int i, struct call_ctx *cc)
{
	int regno = i + 1;
	struct vreg *r = &cur(st)->regs[regno];
	enum vm_arg_type t = h->args[i];
	if (need_init(v, pc, r, regno) == STEP_ERROR)
		return STEP_ERROR;
	if (r->type == T_CTX && gpu(v)) /* the code generator has no register holding it */
		return REJ("R%d: the context cannot be passed to helpers in %s programs (%s)", regno,
			   vm_prog_kind_name(v->prog->kind), h->name);
	switch (t) {
	case VM_ARG_CONST_MAP_PTR:
		return check_map_arg(v, pc, h, r, cc);
	case VM_ARG_PTR_TO_MAP_KEY:
	case VM_ARG_PTR_TO_MAP_VALUE:
	{
		uint32_t n = t == VM_ARG_PTR_TO_MAP_KEY ? cc->map->key_size : cc->map->value_size;
		return check_mem_arg(v, pc, st, regno, n, n, false, false);
	}
	case VM_ARG_PTR_TO_MEM:
	case VM_ARG_PTR_TO_UNINIT_MEM: {
		const struct vreg *sz = &cur(st)->regs[regno + 1];
		if (need_init(v, pc, sz, regno + 1) == STEP_ERROR)
			return STEP_ERROR;
		if (sz->type != T_SCALAR)
			return REJ("R%d type=%s expected=scalar (a size)", regno + 1, vm_type_name(sz->type));
		if (sz->smin < 0)
			return REJ("R%d min value is negative: a size must be >= 0", regno + 1);
		if (sz->umax > (1u << 29))
			return REJ("R%d unbounded memory access: bound the size argument with 'if (n > "
				   "CONST)' or 'n &= CONST'", regno + 1);
		bool zero_ok = h->args[i + 1] == VM_ARG_CONST_SIZE_OR_ZERO;
		if (sz->umin == 0 && !zero_ok)
			return REJ("R%d invalid zero-sized read (the size may be 0)", regno + 1);
		return check_mem_arg(v, pc, st, regno, sz->umin, sz->umax,
				     t == VM_ARG_PTR_TO_UNINIT_MEM, zero_ok && sz->umax == 0);
	}
	case VM_ARG_PTR_TO_CTX:
		if (r->type != T_CTX || r->off != 0)
			return REJ("R%d type=%s expected=ctx", regno, vm_type_name(r->type));
		return STEP_NEXT;
	case VM_ARG_PTR_TO_U64_OUT:
		return check_mem_arg(v, pc, st, regno, 8, 8, true, false);
	case VM_ARG_CONST_STR:
		return check_const_str(v, pc, st, regno);
	case VM_ARG_CONST_ALLOC_SIZE:
		if (!vm_range_is_const(r) || r->tv == 0 || !cc->map || r->tv > cc->map->max_entries / 2)
			return REJ("R%d must be a constant record size between 1 and %u", regno,
				   cc->map ? cc->map->max_entries / 2 : 0);
		cc->alloc_size = (uint32_t)r->tv;
		return STEP_NEXT;
	case VM_ARG_DELAY_NS: /* a GPU thread must not be held longer than this per call */
		if (r->type != T_SCALAR)
			return REJ("R%d type=%s expected=scalar (nanoseconds)", regno,
				   vm_type_name(r->type));
		if (r->umax > CUBPF_MAX_DELAY_NS)
			return REJ("R%d delay may exceed %u ns (max %llu): bound it with 'if (ns > "
				   "CONST)' or use a constant", regno, CUBPF_MAX_DELAY_NS,
				   (unsigned long long)r->umax);
		return STEP_NEXT;
	case VM_ARG_PTR_TO_ALLOC_MEM:
		if (r->type == T_MEM_OR_NULL)
			return REJ("R%d may be NULL: check the reservation before %s", regno, h->name);
		if (r->type != T_MEM)
			return REJ("R%d type=%s expected=ringbuf_mem (a record from bpf_ringbuf_reserve)",
				   regno, vm_type_name(r->type));
		if (r->off != 0 || r->smin != 0 || r->smax != 0)
			return REJ("R%d must point to the start of the reserved record", regno);
		cc->release = r->ref;
		return STEP_NEXT;
	case VM_ARG_PTR_TO_READ_SRC:
		return check_read_src(v, pc, st, h, i);
	default:
		/* a value a helper keeps, prints, compares or counts: never an address */
		if (is_ptr(r))
			return REJ("R%d leaks addr into helper %s (a %s is passed as a value)", regno,
				   h->name, vm_type_name(r->type));
		return STEP_NEXT;
	}
}

/* bpf_trace_printk's r3-r5: as many as a constant format converts up to its NUL (all three when
 * the format is not a constant), each initialised, none a pointer: the helper prints what it is
 * given, %p and %x alike.  A constant format is read with the grammar both formatters use
 * (vm/printk.c); what it does not describe is refused here, with its offset.  A constant format must have its NUL inside its map: the GPU's vprintf reads up to it
 * whatever the size argument says. */
static int check_printk(struct verifier *v, uint32_t pc, struct vstate *st)
{
	const struct vframe *f = cur(st);
	const struct vreg *fmt = &f->regs[1], *sz = &f->regs[2];
	int nargs = 3;
	if (fmt->type == T_MAP_VALUE && fmt->smin == fmt->smax && vm_range_is_const(sz)) {
		const struct vm_map_def *m = &v->obj->maps[fmt->map];
		int64_t o = fmt->off + fmt->smin;
		if (!vm_map_prog_writable(m) && m->init && o >= 0 && (uint64_t)o < m->value_size) {
			const char *text = (const char *)m->init + o;
			size_t room = m->value_size - (size_t)o;
			if (!memchr(text, 0, room))
				return REJ("bpf_trace_printk format is not NUL-terminated (no NUL before "
					   "the end of map '%s')", m->name);
			struct vm_printk_fmt pf;
			uint32_t at = 0;
			char why[128];
			if (vm_printk_parse(text, room, &pf, &at, why, sizeof(why)) < 0) {
				char shown[41]; /* the format on one log line */
				size_t k = 0;
				for (; k < sizeof(shown) - 1 && k < room && text[k]; k++)
					shown[k] = text[k] >= 0x20 && text[k] < 0x7f ? text[k] : '.';
				shown[k] = 0;
				return REJ("bpf_trace_printk format at offset %u: %s (\"%s\")", at, why,
					   shown);
			}
			nargs = (int)pf.nconv;
		}
	}
	for (int i = 0; i < nargs; i++) {
		const struct vreg *r = &f->regs[3 + i];
		if (r->type == T_NOT_INIT)
			return REJ("R%d !read_ok: bpf_trace_printk argument %d is not set (%s)", 3 + i,
				   i + 1, nargs < 3 ? "the format converts it" :
				   "a format not in .rodata takes all three arguments");
		if (is_ptr(r))
			return REJ("R%d leaks addr into helper bpf_trace_printk (a %s as argument %d)",
				   3 + i, vm_type_name(r->type), i + 1);
	}
	return STEP_NEXT;
}

/* A constant format (checked above) whose NUL lies within the size r2 gives, as the code
 * generator reads it (a size it does not know counts as the whole value). */
static bool gpu_format_ends(struct verifier *v, const struct vreg *fmt, const struct vreg *sz)
{
	const struct vm_map_def *m = &v->obj->maps[fmt->map];
	int64_t o = fmt->off + fmt->smin;
	if (o < 0 || (uint64_t)o >= m->value_size)
		return true; /* out of the value: the memory check says so */
	size_t n = m->value_size - (size_t)o;
	if (vm_range_is_const(sz) && sz->tv < n)
		n = (size_t)sz->tv;
	return memchr(m->init + o, 0, n) != NULL;
}

/* What the PTX code generator cannot compile, turned away here with a reason (GPU kinds). */
static int check_gpu_helper(struct verifier *v, uint32_t pc, struct vstate *st,
			    const struct vm_helper_proto *h, const struct call_ctx *cc)
{
	const struct vreg *r1 = &cur(st)->regs[1], *r3 = &cur(st)->regs[3];
	if (h->id == CUBPF_FN_trace_printk &&
	    (r1->type != T_MAP_VALUE || r1->smin != r1->smax ||
	     vm_map_prog_writable(&v->obj->maps[r1->map]) || !v->obj->maps[r1->map].init))
		return REJ("R1 the format of bpf_trace_printk must be a constant string in .rodata "
			   "in %s programs (bpf_printk puts it there)", vm_prog_kind_name(v->prog->kind));
	if (h->id == CUBPF_FN_trace_printk && !gpu_format_ends(v, r1, &cur(st)->regs[2]))
		return REJ("R2 the format of bpf_trace_printk has no NUL within its size in %s "
			   "programs (the GPU formats up to the size)", vm_prog_kind_name(v->prog->kind));
	if (h->id == CUBPF_FN_ringbuf_output &&
	    (!vm_range_is_const(r3) || r3->tv == 0 || r3->tv > CUBPF_RB_MAX_RECORD))
		return REJ("R3 the record size of bpf_ringbuf_output must be a constant of 1 to %u "
			   "bytes in %s programs", CUBPF_RB_MAX_RECORD,
			   vm_prog_kind_name(v->prog->kind));
	if (!cc->map || h->args[0] != VM_ARG_CONST_MAP_PTR || h->args[1] != VM_ARG_PTR_TO_MAP_KEY)
		return STEP_NEXT;
	if (cc->map->type == CUBPF_MAP_HASH &&
	    (cc->map->key_size == 0 || cc->map->key_size > CUBPF_HASH_MAX_KEY))
		return REJ("hash map '%s' has %u-byte keys: %s programs take 1 to %u", cc->map->name,
			   cc->map->key_size, vm_prog_kind_name(v->prog->kind), CUBPF_HASH_MAX_KEY);
	if (cc->map->type != CUBPF_MAP_HASH && cc->map->key_size != 4)
		return REJ("array map '%s' has %u-byte keys: %s programs take 4", cc->map->name,
			   cc->map->key_size, vm_prog_kind_name(v->prog->kind));
	return STEP_NEXT;
}

/* Ends reservation `ref`: every copy of the record pointer becomes unusable. */
static void release_ref(struct vstate *st, uint32_t ref)
{
	for (uint32_t i = 0; i < st->nrefs; i++)
		if (st->refs[i] == ref) {
			memmove(&st->refs[i], &st->refs[i + 1], (st->nrefs - i - 1) * sizeof(uint32_t));
			st->nrefs--;
			break;
		}
	for (uint32_t i = 0; i <= st->cur; i++) {
		struct vframe *f = st->fr[i];
		for (int r = 0; r < 11; r++)
			if ((f->regs[r].type == T_MEM || f->regs[r].type == T_MEM_OR_NULL) &&
			    f->regs[r].ref == ref)
				mark_uninit(&f->regs[r]);
		for (int s = 0; s < VM_STACK_SIZE / 8; s++)
			if (f->stype[s * 8] == S_SPILL && f->spill[s].ref == ref &&
			    (f->spill[s].type == T_MEM || f->spill[s].type == T_MEM_OR_NULL))
				memset(&f->stype[s * 8], S_POISON, 8); /* still the record's address */
	}
}

static int acquire_result(struct verifier *v, uint32_t pc, struct vstate *st,
			  const struct call_ctx *cc)
{
	struct vreg *r0 = &cur(st)->regs[0];
	if (st->nrefs == VM_MAX_REFS)
		return REJ("more than %d ring buffer records reserved at once", VM_MAX_REFS);
	mark_uninit(r0);
	r0->type = T_MEM_OR_NULL;
	r0->map = cc->map_idx;
	r0->id = r0->ref = ++v->next_id;
	r0->mem_size = cc->alloc_size;
	st->refs[st->nrefs++] = r0->ref;
	return STEP_NEXT;
}

static int check_helper(struct verifier *v, uint32_t pc, const struct bpf_insn *in,
			struct vstate *st)
{
	const struct vm_helper_proto *h = vm_helper_proto((uint32_t)in->imm);
	if (!h)
		return REJ("invalid func unknown#%d (no such helper)", in->imm);
	if (!((h->kinds >> v->prog->kind) & 1)) {
		/* GPU programs porting host habits get the GPU counterpart named */
		const char *hint = h->id == CUBPF_FN_ktime_get_ns ? "; use bpf_get_globaltimer"
				   : h->id == CUBPF_FN_get_smp_processor_id ? "; use bpf_get_sm_id"
				   : h->id == CUBPF_FN_get_current_pid_tgid ? "; use bpf_get_thread_idx"
									    : "";
		return REJ("helper %s#%d is not available in %s programs (%s)%s", h->name, in->imm,
			   vm_prog_kind_name(v->prog->kind),
			   (h->kinds & VM_KINDS_GPU) ? "GPU-only: kprobe, memprobe, block, sync, fentry/fexit"
						     : "host-only: uprobe/uretprobe", hint);
	}
	struct call_ctx cc = {0};
	for (int i = 0; i < 5 && h->args[i] != VM_ARG_NONE; i++)
		if (check_arg(v, pc, st, h, i, &cc) == STEP_ERROR)
			return STEP_ERROR;
	if (h->id == CUBPF_FN_trace_printk && check_printk(v, pc, st) == STEP_ERROR)
		return STEP_ERROR;
	if (gpu(v) && check_gpu_helper(v, pc, st, h, &cc) == STEP_ERROR)
		return STEP_ERROR;
	struct vframe *f = cur(st);
	if (cc.release)
		release_ref(st, cc.release);
	for (int r = 1; r <= 5; r++)
		mark_uninit(&f->regs[r]);
	if (h->ret == VM_RET_ALLOC_MEM_OR_NULL)
		return acquire_result(v, pc, st, &cc);
	if (h->ret == VM_RET_MAP_VALUE_OR_NULL) {
		mark_uninit(&f->regs[0]);
		f->regs[0].type = T_MAP_VALUE_OR_NULL;
		f->regs[0].map = cc.map_idx;
		f->regs[0].id = f->regs[0].vid = ++v->next_id;
	} else if (h->ret == VM_RET_VOID)
		mark_uninit(&f->regs[0]);
	else
		vm_range_unknown(&f->regs[0]);
	return STEP_NEXT;
}

/* ---- bpf-to-bpf calls and exit ----------------------------------------------------------------- */

static int check_call_local(struct verifier *v, uint32_t *pc, struct vstate *st)
{
	uint32_t at = *pc, target = (uint32_t)((int64_t)at + 1 + v->prog->insns[at].imm);
	if (st->cur + 1 >= VM_MAX_CALL_DEPTH)
		return vm_reject(v, at, "the call stack of %d frames is too deep (limit %d)",
				st->cur + 2, VM_MAX_CALL_DEPTH);
	struct vframe *nf = vm_frame_new();
	if (!nf)
		return vm_reject(v, at, "out of memory");
	struct vframe *f = cur(st);
	for (int r = 1; r <= 5; r++)
		nf->regs[r] = f->regs[r];
	nf->regs[10].type = T_STACK;
	nf->regs[10].frameno = (uint8_t)(st->cur + 1);
	nf->callsite = at;
	st->fr[++st->cur] = nf;
	vm_stack_new_frame(v, st->cur);
	if (st->cur + 1 > v->max_frames)
		v->max_frames = st->cur + 1;
	*pc = target;
	return STEP_JUMP;
}

/* Frame `gone` returned: pointers into its stack, wherever they were copied (the callee may
 * have stored its r10 in a caller's stack or passed it on), die with it. */
static void forget_frame(struct vstate *st, uint32_t gone)
{
	for (uint32_t i = 0; i <= st->cur; i++) {
		struct vframe *f = st->fr[i];
		for (int r = 0; r < 11; r++)
			if (f->regs[r].type == T_STACK && f->regs[r].frameno >= gone)
				mark_uninit(&f->regs[r]);
		for (int s = 0; s < VM_STACK_SIZE / 8; s++)
			if (f->stype[s * 8] == S_SPILL && f->spill[s].type == T_STACK &&
			    f->spill[s].frameno >= gone)
				memset(&f->stype[s * 8], S_POISON, 8);
	}
}

static int check_exit(struct verifier *v, uint32_t *pc, struct vstate *st)
{
	uint32_t at = *pc;
	struct vframe *f = cur(st);
	/* a function's unused result may be left unset by clang (the caller cannot read it) */
	if (f->regs[0].type == T_NOT_INIT && st->cur == 0)
		return vm_reject(v, at, "R0 !read_ok: the program exits without setting R0");
	if (st->cur == 0) {
		if (st->nrefs)
			return vm_reject(v, at, "unreleased reference id=%u: a ring buffer record is "
					"reserved but neither submitted nor discarded on this path",
					st->refs[0]);
		if (f->regs[0].type != T_SCALAR)
			return vm_reject(v, at, "R0 is a %s at program exit: returning a pointer leaks "
					"an address", vm_type_name(f->regs[0].type));
		return STEP_EXIT;
	}
	if (f->regs[0].type == T_STACK && f->regs[0].frameno == st->cur)
		return vm_reject(v, at, "cannot return a pointer to the callee's stack to the caller");
	if ((f->regs[0].type == T_CTX || f->regs[0].type == T_MAP_PTR) && gpu(v))
		return vm_reject(v, at, "R0 a function returns the %s in %s programs (the code "
				 "generator follows it only within a function and into its callees: "
				 "the caller would use a register it never set)",
				 f->regs[0].type == T_CTX ? "context pointer" : "map pointer",
				 vm_prog_kind_name(v->prog->kind));
	struct vframe *caller = st->fr[st->cur - 1];
	caller->regs[0] = f->regs[0];
	for (int r = 1; r <= 5; r++)
		mark_uninit(&caller->regs[r]);
	*pc = f->callsite + 1;
	vm_state_free_frame(st);
	forget_frame(st, st->cur + 1);
	return STEP_JUMP;
}

/* ---- conditional jumps -------------------------------------------------------------------------- */

/* One register or spill after the null check of `id`. */
static void null_checked(struct vreg *x, uint32_t id, bool is_null)
{
	if (!or_null(x->type) || x->id != id)
		return;
	if (is_null)
		vm_range_const(x, 0);
	else {
		x->type = x->type == T_MEM_OR_NULL ? T_MEM : T_MAP_VALUE;
		x->id = 0;
	}
}

static void mark_null_check(struct vstate *st, uint32_t id, bool is_null, uint32_t ref)
{
	for (uint32_t i = 0; i <= st->cur; i++) {
		struct vframe *f = st->fr[i];
		for (int r = 0; r < 11; r++)
			null_checked(&f->regs[r], id, is_null);
		for (int s = 0; s < VM_STACK_SIZE / 8; s++)
			if (f->stype[s * 8] == S_SPILL)
				null_checked(&f->spill[s], id, is_null);
	}
	if (is_null && ref)
		release_ref(st, ref); /* a failed reservation has nothing to release */
}

/* Pointer comparisons.  A null check of a *_or_null pointer; a valid pointer against 0 (a
 * known outcome); two pointers into one region, whose order is that of their offsets (known
 * when both are constant: a loop over a stack buffer is walked exactly).  Anything else would
 * let the program learn an address bit by bit, and is refused as Linux refuses it. */
static int jmp_pointer(struct verifier *v, uint32_t pc, const struct bpf_insn *in, struct vstate *st,
		       const struct vreg *src, struct vstate *other, int *known)
{
	struct vreg *dst = &cur(st)->regs[in->dst_reg];
	uint8_t op = BPF_OP(in->code);
	bool is64 = BPF_CLASS(in->code) == BPF_JMP;
	bool zero = vm_range_is_const(src) && src->tv == 0;
	*known = -1;
	if (!is64)
		return REJ("R%d 32-bit comparison of a pointer prohibited", in->dst_reg);
	if (dst->type == T_CTX && gpu(v))
		return REJ("R%d the context pointer cannot be compared in %s programs (it is never "
			   "NULL; the code generator keeps no register for it)", in->dst_reg,
			   vm_prog_kind_name(v->prog->kind));
	if (zero && (op == BPF_JEQ || op == BPF_JNE)) {
		if (or_null(dst->type)) {
			uint32_t id = dst->id, ref = dst->type == T_MEM_OR_NULL ? dst->ref : 0;
			/* taken side (other) for JEQ is the null side */
			mark_null_check(other, id, op == BPF_JEQ, ref);
			mark_null_check(st, id, op != BPF_JEQ, ref);
			return STEP_NEXT;
		}
		if (is_ptr(dst)) {
			*known = op == BPF_JNE; /* a valid pointer is never NULL */
			return STEP_NEXT;
		}
	}
	if (or_null(dst->type))
		return REJ("R%d comparison of %s with something else than 0; null-check it first",
			   in->dst_reg, vm_type_name(dst->type));
	if (!same_region(dst, src) || op == BPF_JSET)
		return REJ("R%d pointer comparison prohibited (%s against %s: only a null check, or "
			   "two pointers into one stack frame, map value or record)", in->dst_reg,
			   vm_type_name(dst->type), vm_type_name(src->type));
	if (r_is_const_off(dst) && r_is_const_off(src)) {
		/* base + a against base + b: the order of the signed offsets a and b, whether the
		 * comparison is signed or not (the region never straddles an address sign change) */
		static const uint8_t as_signed[16] = {
			[BPF_JGT >> 4] = BPF_JSGT, [BPF_JGE >> 4] = BPF_JSGE,
			[BPF_JLT >> 4] = BPF_JSLT, [BPF_JLE >> 4] = BPF_JSLE};
		uint8_t sop = as_signed[op >> 4] ? as_signed[op >> 4] : op;
		*known = vm_jmp_taken(sop, (uint64_t)((int64_t)dst->off + dst->smin),
				      (uint64_t)((int64_t)src->off + src->smin), true) ? 1 : 0;
	}
	return STEP_NEXT;
}

static int check_cond_jmp(struct verifier *v, uint32_t *pc, const struct bpf_insn *in,
			  struct vstate *st, struct vstate *other, uint32_t *other_pc)
{
	uint32_t at = *pc;
	struct vframe *f = cur(st);
	bool is64 = BPF_CLASS(in->code) == BPF_JMP;
	uint8_t op = BPF_OP(in->code);
	struct vreg src;
	if (need_init(v, at, &f->regs[in->dst_reg], in->dst_reg) == STEP_ERROR)
		return STEP_ERROR;
	if (BPF_SRC(in->code) == BPF_X) {
		if (need_init(v, at, &f->regs[in->src_reg], in->src_reg) == STEP_ERROR)
			return STEP_ERROR;
		src = f->regs[in->src_reg];
	} else
		vm_range_const(&src, is64 ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm);
	uint32_t target = (uint32_t)((int64_t)at + 1 + in->off);
	int known;
	if (is_ptr(&f->regs[in->dst_reg]) || is_ptr(&src)) {
		if (vm_state_copy(other, st) < 0)
			return vm_reject(v, at, "out of memory");
		if (jmp_pointer(v, at, in, st, &src, other, &known) == STEP_ERROR) {
			vm_state_free(other);
			return STEP_ERROR;
		}
		if (known >= 0) {
			vm_state_free(other);
			*pc = known ? target : at + 1;
			return STEP_JUMP;
		}
		*other_pc = target;
		*pc = at + 1;
		return STEP_BRANCH;
	}
	known = vm_range_branch_known(&f->regs[in->dst_reg], &src, op, is64);
	if (known >= 0) {
		*pc = known ? target : at + 1;
		return STEP_JUMP;
	}
	if (vm_state_copy(other, st) < 0)
		return vm_reject(v, at, "out of memory");
	struct vreg osrc = src;
	struct vframe *of = cur(other);
	vm_range_refine(&of->regs[in->dst_reg], BPF_SRC(in->code) == BPF_X ? &of->regs[in->src_reg] : &osrc,
		 op, is64, true);
	vm_range_refine(&f->regs[in->dst_reg], BPF_SRC(in->code) == BPF_X ? &f->regs[in->src_reg] : &src,
		 op, is64, false);
	*other_pc = target;
	*pc = at + 1;
	return STEP_BRANCH;
}

/* ---- dispatch ---------------------------------------------------------------------------------- */

static int check_jmp(struct verifier *v, uint32_t *pc, const struct bpf_insn *in, struct vstate *st,
		     struct vstate *other, uint32_t *other_pc)
{
	uint8_t op = BPF_OP(in->code);
	if (op == BPF_JA) {
		*pc = (uint32_t)((int64_t)*pc + 1 + (BPF_CLASS(in->code) == BPF_JMP ? in->off : in->imm));
		return STEP_JUMP;
	}
	if (op == BPF_EXIT)
		return check_exit(v, pc, st);
	if (op == BPF_CALL) {
		if (in->src_reg == BPF_PSEUDO_CALL)
			return check_call_local(v, pc, st);
		int rc = check_helper(v, *pc, in, st);
		if (rc == STEP_NEXT)
			(*pc)++;
		return rc == STEP_ERROR ? rc : STEP_JUMP;
	}
	return check_cond_jmp(v, pc, in, st, other, other_pc);
}

static int check_lddw(struct verifier *v, uint32_t pc, const struct bpf_insn *in, struct vstate *st)
{
	struct vreg *d = &cur(st)->regs[in->dst_reg];
	if (in->dst_reg == BPF_REG_10)
		return REJ("frame pointer is read only");
	if (in->src_reg == 0) {
		vm_range_const(d, (uint32_t)in->imm | ((uint64_t)(uint32_t)in[1].imm << 32));
		return STEP_NEXT;
	}
	mark_uninit(d);
	d->map = (uint32_t)in->imm;
	if (in->src_reg == BPF_PSEUDO_MAP_FD)
		d->type = T_MAP_PTR;
	else {
		d->type = T_MAP_VALUE;
		d->off = in[1].imm;
	}
	return STEP_NEXT;
}

int vm_verifier_step(struct verifier *v, struct vstate *st, uint32_t *pc, struct vstate *other,
	   uint32_t *other_pc)
{
	const struct bpf_insn *in = &v->prog->insns[*pc];
	int rc;
	switch (BPF_CLASS(in->code)) {
	case BPF_ALU:
	case BPF_ALU64:
		rc = check_alu(v, *pc, in, st);
		break;
	case BPF_JMP:
	case BPF_JMP32:
		return check_jmp(v, pc, in, st, other, other_pc);
	case BPF_LD:
		rc = check_lddw(v, *pc, in, st);
		if (rc == STEP_NEXT)
			*pc += 2;
		return rc == STEP_ERROR ? rc : STEP_JUMP;
	case BPF_LDX:
		rc = check_ldx(v, *pc, in, st);
		break;
	case BPF_ST:
		rc = check_st(v, *pc, in, st);
		break;
	default: /* BPF_STX */
		rc = BPF_MODE(in->code) == BPF_ATOMIC ? check_atomic(v, *pc, in, st)
						      : check_st(v, *pc, in, st);
		break;
	}
	if (rc == STEP_NEXT)
		(*pc)++;
	return rc;
}

/* ---- printing ----------------------------------------------------------------------------------- */

void vm_print_reg(struct verifier *v, const struct vreg *r)
{
	switch (r->type) {
	case T_SCALAR:
		if (vm_range_is_const(r))
			vm_log(v, "%lld", (long long)r->tv);
		else if (r->umin == 0 && r->umax == UINT64_MAX && r->smin == INT64_MIN &&
			 r->smax == INT64_MAX)
			vm_log(v, "scalar");
		else
			vm_log(v, "scalar(umin=%llu,umax=%llu,smin=%lld,smax=%lld)",
			      (unsigned long long)r->umin, (unsigned long long)r->umax,
			      (long long)r->smin, (long long)r->smax);
		break;
	case T_STACK:
		vm_log(v, "fp%d%+d", r->frameno, r->off);
		break;
	case T_CTX:
		vm_log(v, "ctx%+d", r->off);
		break;
	case T_MEM:
	case T_MEM_OR_NULL:
		vm_log(v, "%s(map=%s,size=%u,off=%d)", vm_type_name(r->type),
		      v->obj->maps[r->map].name, r->mem_size, r->off);
		break;
	case T_MAP_VALUE:
	case T_MAP_VALUE_OR_NULL:
	case T_MAP_PTR:
		vm_log(v, "%s(map=%s,off=%d", vm_type_name(r->type), v->obj->maps[r->map].name, r->off);
		if (r->type != T_MAP_PTR && !(r->smin == 0 && r->smax == 0))
			vm_log(v, ",var=[%lld,%lld]", (long long)r->smin, (long long)r->smax);
		vm_log(v, ")");
		break;
	default:
		vm_log(v, "?");
	}
}

void vm_print_state(struct verifier *v, const struct vstate *st)
{
	const struct vframe *f = st->fr[st->cur];
	vm_log(v, "  state (frame %u):", st->cur);
	for (int r = 0; r < 11; r++) {
		if (f->regs[r].type == T_NOT_INIT)
			continue;
		vm_log(v, " R%d=", r);
		vm_print_reg(v, &f->regs[r]);
	}
	vm_log(v, "\n");
}
