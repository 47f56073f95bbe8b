/* Scalar tracking for the verifier: signed and unsigned ranges plus a tnum (known bits), the
 * same abstract domain as the Linux verifier, kept small: enough to prove map-value and stack
 * indices in bounds and loops bounded for the programs clang emits. */
#include <string.h>

#include "vm/verifier.h"

#define U32MAX 0xffffffffull

static void tnum_unknown(struct vreg *r)
{
	r->tv = 0;
	r->tm = ~0ull;
}

void vm_range_unknown(struct vreg *r)
{
	r->type = T_SCALAR;
	r->smin = INT64_MIN;
	r->smax = INT64_MAX;
	r->umin = 0;
	r->umax = UINT64_MAX;
	tnum_unknown(r);
}

void vm_range_const(struct vreg *r, uint64_t v)
{
	r->type = T_SCALAR;
	r->smin = r->smax = (int64_t)v;
	r->umin = r->umax = v;
	r->tv = v;
	r->tm = 0;
}

static uint64_t mask_upto(uint64_t v)
{
	return v ? (~0ull >> __builtin_clzll(v)) : 0;
}

void vm_range_set(struct vreg *r, uint64_t umin, uint64_t umax)
{
	vm_range_unknown(r);
	r->umin = umin;
	r->umax = umax;
	r->tm = mask_upto(umax);
	vm_range_sync(r);
}

bool vm_range_is_const(const struct vreg *r)
{
	return r->type == T_SCALAR && r->tm == 0;
}

static uint64_t umax2(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t umin2(uint64_t a, uint64_t b) { return a < b ? a : b; }
static int64_t smax2(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t smin2(int64_t a, int64_t b) { return a < b ? a : b; }

/* Tightens each of the three views with what the others know. */
void vm_range_sync(struct vreg *r)
{
	if (r->type != T_SCALAR)
		return;
	r->umin = umax2(r->umin, r->tv);
	r->umax = umin2(r->umax, r->tv | r->tm);
	if ((int64_t)r->umin <= (int64_t)r->umax) { /* no sign change inside the unsigned range */
		r->smin = smax2(r->smin, (int64_t)r->umin);
		r->smax = smin2(r->smax, (int64_t)r->umax);
	}
	if (r->smin >= 0 || r->smax < 0) {
		r->umin = umax2(r->umin, (uint64_t)r->smin);
		r->umax = umin2(r->umax, (uint64_t)r->smax);
	}
	if (r->umin == r->umax && r->umin <= r->umax) {
		r->tv = r->umin;
		r->tm = 0;
		r->smin = r->smax = (int64_t)r->umin;
	} else if (r->umin <= r->umax) {
		/* bits above the highest bit of umax are known zero */
		uint64_t m = mask_upto(r->umax);
		r->tm &= m;
		r->tv &= m;
	}
}

uint64_t vm_range_eval(uint8_t op, int16_t off, bool is64, uint64_t a, uint64_t b)
{
	if (!is64) {
		uint32_t x = (uint32_t)a, y = (uint32_t)b;
		switch (op) {
		case BPF_ADD: return (uint32_t)(x + y);
		case BPF_SUB: return (uint32_t)(x - y);
		case BPF_MUL: return (uint32_t)(x * y);
		case BPF_DIV:
			if (off)
				return y == 0 ? 0 : (int32_t)y == -1 ? (uint32_t)(0 - x)
								     : (uint32_t)((int32_t)x / (int32_t)y);
			return y ? x / y : 0;
		case BPF_MOD:
			if (off)
				return y == 0 ? x : (int32_t)y == -1 ? 0 : (uint32_t)((int32_t)x % (int32_t)y);
			return y ? x % y : x;
		case BPF_OR: return x | y;
		case BPF_AND: return x & y;
		case BPF_LSH: return (uint32_t)(x << (y & 31));
		case BPF_RSH: return x >> (y & 31);
		case BPF_ARSH: return (uint32_t)((int32_t)x >> (y & 31));
		case BPF_XOR: return x ^ y;
		case BPF_NEG: return (uint32_t)(0 - x);
		case BPF_MOV:
			return off == 8 ? (uint32_t)(int32_t)(int8_t)y
			       : off == 16 ? (uint32_t)(int32_t)(int16_t)y : y;
		}
		return 0;
	}
	switch (op) {
	case BPF_ADD: return a + b;
	case BPF_SUB: return a - b;
	case BPF_MUL: return a * b;
	case BPF_DIV:
		if (off)
			return b == 0 ? 0 : (int64_t)b == -1 ? 0 - a : (uint64_t)((int64_t)a / (int64_t)b);
		return b ? a / b : 0;
	case BPF_MOD:
		if (off)
			return b == 0 ? a : (int64_t)b == -1 ? 0 : (uint64_t)((int64_t)a % (int64_t)b);
		return b ? a % b : a;
	case BPF_OR: return a | b;
	case BPF_AND: return a & b;
	case BPF_LSH: return a << (b & 63);
	case BPF_RSH: return a >> (b & 63);
	case BPF_ARSH: return (uint64_t)((int64_t)a >> (b & 63));
	case BPF_XOR: return a ^ b;
	case BPF_NEG: return 0 - a;
	case BPF_MOV:
		return off == 8 ? (uint64_t)(int8_t)b : off == 16 ? (uint64_t)(int16_t)b
		       : off == 32 ? (uint64_t)(int32_t)b : b;
	}
	return 0;
}

/* The low 32 bits of a scalar, as ALU32 operations see them. */
static void trunc32(struct vreg *r)
{
	if (r->umax <= U32MAX)
		return;
	if (vm_range_is_const(r)) {
		vm_range_const(r, (uint32_t)r->tv);
		return;
	}
	uint64_t tv = r->tv & U32MAX, tm = r->tm & U32MAX;
	vm_range_unknown(r);
	r->tv = tv;
	r->tm = tm;
	r->umax = U32MAX;
	vm_range_sync(r);
}

static void alu_add(struct vreg *d, const struct vreg *a, const struct vreg *b)
{
	uint64_t sm = a->tm + b->tm, sv = a->tv + b->tv, chi = (sm + sv) ^ sv;
	uint64_t mu = chi | a->tm | b->tm;
	d->tv = sv & ~mu;
	d->tm = mu;
	if (__builtin_add_overflow(a->smin, b->smin, &d->smin) ||
	    __builtin_add_overflow(a->smax, b->smax, &d->smax))
		d->smin = INT64_MIN, d->smax = INT64_MAX;
	if (__builtin_add_overflow(a->umin, b->umin, &d->umin) ||
	    __builtin_add_overflow(a->umax, b->umax, &d->umax))
		d->umin = 0, d->umax = UINT64_MAX;
}

static void alu_sub(struct vreg *d, const struct vreg *a, const struct vreg *b)
{
	uint64_t dv = a->tv - b->tv, alpha = dv + a->tm, beta = dv - b->tm;
	uint64_t mu = (alpha ^ beta) | a->tm | b->tm;
	d->tv = dv & ~mu;
	d->tm = mu;
	if (__builtin_sub_overflow(a->smin, b->smax, &d->smin) ||
	    __builtin_sub_overflow(a->smax, b->smin, &d->smax))
		d->smin = INT64_MIN, d->smax = INT64_MAX;
	if (a->umin < b->umax)
		d->umin = 0, d->umax = UINT64_MAX;
	else
		d->umin = a->umin - b->umax, d->umax = a->umax - b->umin;
}

static void alu_bits(struct vreg *d, const struct vreg *a, const struct vreg *b, uint8_t op)
{
	if (op == BPF_AND) {
		uint64_t v = a->tv & b->tv;
		d->tv = v;
		d->tm = (a->tv | a->tm) & (b->tv | b->tm) & ~v;
		d->umax = umin2(a->umax, b->umax);
	} else if (op == BPF_OR) {
		d->tv = a->tv | b->tv;
		d->tm = (a->tm | b->tm) & ~d->tv;
		d->umin = umax2(a->umin, b->umin);
	} else {
		d->tm = a->tm | b->tm;
		d->tv = (a->tv ^ b->tv) & ~d->tm;
	}
}

static void alu_shift(struct vreg *d, const struct vreg *a, const struct vreg *b, uint8_t op,
		      bool is64)
{
	if (!vm_range_is_const(b)) {
		if (op == BPF_RSH)
			d->umax = a->umax;
		return;
	}
	unsigned k = (unsigned)(b->tv & (is64 ? 63 : 31));
	if (op == BPF_LSH) {
		if (a->umax <= (UINT64_MAX >> k)) {
			d->umin = a->umin << k;
			d->umax = a->umax << k;
		}
		d->tv = a->tv << k;
		d->tm = a->tm << k;
	} else if (op == BPF_RSH) {
		d->umin = a->umin >> k;
		d->umax = a->umax >> k;
		d->tv = a->tv >> k;
		d->tm = a->tm >> k;
	} else if (is64) {
		d->smin = a->smin >> k;
		d->smax = a->smax >> k;
		d->tv = (uint64_t)((int64_t)a->tv >> k);
		d->tm = (uint64_t)((int64_t)a->tm >> k);
	} else if (a->umax <= 0x7fffffff) { /* non-negative as 32 bits: same as a logical shift */
		d->umin = a->umin >> k;
		d->umax = a->umax >> k;
	}
}

/* How many low bits of r are known to be 0. */
static uint32_t known_low_zeros(const struct vreg *r)
{
	uint64_t x = r->tv | r->tm;
	return x ? (uint32_t)__builtin_ctzll(x) : 64;
}

static void alu_muldiv(struct vreg *d, const struct vreg *a, const struct vreg *b, uint8_t op,
		       int16_t off)
{
	if (off)
		return; /* signed division: unknown */
	if (op == BPF_MUL) {
		/* a product has the low zero bits of both factors (i * 48: 4 of them), which
		 * atomics' alignment checks rely on */
		uint32_t k = known_low_zeros(a) + known_low_zeros(b);
		uint64_t low = k >= 64 ? ~0ull : (1ull << k) - 1;
		d->tv &= ~low;
		d->tm &= ~low;
	}
	if (op == BPF_MUL && a->umax <= U32MAX && b->umax <= U32MAX) {
		d->umin = a->umin * b->umin;
		d->umax = a->umax * b->umax;
	} else if (op == BPF_DIV) {
		d->umax = a->umax;
		if (vm_range_is_const(b) && b->tv) {
			d->umin = a->umin / b->tv;
			d->umax = a->umax / b->tv;
		}
	} else if (op == BPF_MOD) {
		d->umax = a->umax;
		if (vm_range_is_const(b) && b->tv)
			d->umax = umin2(a->umax, b->tv - 1);
	}
}

static void alu_mov(struct vreg *d, const struct vreg *b, int16_t off, bool is64)
{
	if (!off) {
		*d = *b;
		return;
	}
	if (is64) {
		int64_t lim = off == 8 ? 127 : off == 16 ? 32767 : 2147483647;
		d->smin = -lim - 1;
		d->smax = lim;
		if (b->umax <= (uint64_t)lim) /* the sign bit is clear: a plain copy */
			*d = *b;
	} else if (b->umax <= (off == 8 ? 127u : 32767u))
		*d = *b;
}

void vm_range_alu(struct vreg *dst, const struct vreg *src, uint8_t op, int16_t off, bool is64)
{
	if (vm_range_is_const(dst) && vm_range_is_const(src)) {
		vm_range_const(dst, vm_range_eval(op, off, is64, dst->tv, src->tv));
		return;
	}
	struct vreg a = *dst, b = *src, d = {0};
	if (!is64) {
		trunc32(&a);
		trunc32(&b);
	}
	vm_range_unknown(&d);
	switch (op) {
	case BPF_ADD: alu_add(&d, &a, &b); break;
	case BPF_SUB: alu_sub(&d, &a, &b); break;
	case BPF_MUL: case BPF_DIV: case BPF_MOD: alu_muldiv(&d, &a, &b, op, off); break;
	case BPF_AND: case BPF_OR: case BPF_XOR: alu_bits(&d, &a, &b, op); break;
	case BPF_LSH: case BPF_RSH: case BPF_ARSH: alu_shift(&d, &a, &b, op, is64); break;
	case BPF_MOV: alu_mov(&d, &b, off, is64); break;
	default: break; /* NEG and the rest: unknown */
	}
	d.type = T_SCALAR;
	vm_range_sync(&d);
	if (!is64 && (d.umax > U32MAX || d.umin > d.umax)) {
		/* may have wrapped around 2^32: keep only what the low 32 bits say */
		uint64_t tv = d.tv & U32MAX, tm = d.tm & U32MAX;
		vm_range_unknown(&d);
		d.tv = tv, d.tm = tm, d.umax = U32MAX;
		vm_range_sync(&d);
	}
	*dst = d;
}

/* ---- branches ---------------------------------------------------------------------------------- */

/* Can a 32-bit comparison be decided on the 64-bit ranges? */
static bool cmp32_as64(const struct vreg *a, const struct vreg *b, uint8_t op)
{
	bool sign = op == BPF_JSGT || op == BPF_JSGE || op == BPF_JSLT || op == BPF_JSLE;
	uint64_t lim = sign ? 0x7fffffff : U32MAX;
	return a->umax <= lim && b->umax <= lim;
}

static int known64(const struct vreg *a, const struct vreg *b, uint8_t op)
{
	switch (op) {
	case BPF_JEQ:
	case BPF_JNE: {
		int eq = -1;
		if (vm_range_is_const(a) && vm_range_is_const(b))
			eq = a->tv == b->tv;
		else if (a->umin > b->umax || a->umax < b->umin || a->smin > b->smax ||
			 a->smax < b->smin || ((a->tv ^ b->tv) & ~(a->tm | b->tm)))
			eq = 0;
		return eq < 0 ? -1 : op == BPF_JEQ ? eq : !eq;
	}
	case BPF_JGT: return a->umin > b->umax ? 1 : a->umax <= b->umin ? 0 : -1;
	case BPF_JGE: return a->umin >= b->umax ? 1 : a->umax < b->umin ? 0 : -1;
	case BPF_JLT: return a->umax < b->umin ? 1 : a->umin >= b->umax ? 0 : -1;
	case BPF_JLE: return a->umax <= b->umin ? 1 : a->umin > b->umax ? 0 : -1;
	case BPF_JSGT: return a->smin > b->smax ? 1 : a->smax <= b->smin ? 0 : -1;
	case BPF_JSGE: return a->smin >= b->smax ? 1 : a->smax < b->smin ? 0 : -1;
	case BPF_JSLT: return a->smax < b->smin ? 1 : a->smin >= b->smax ? 0 : -1;
	case BPF_JSLE: return a->smax <= b->smin ? 1 : a->smin > b->smax ? 0 : -1;
	case BPF_JSET:
		if (a->tv & b->tv)
			return 1;
		if (!((a->tv | a->tm) & (b->tv | b->tm)))
			return 0;
		return -1;
	}
	return -1;
}

int vm_range_branch_known(const struct vreg *a, const struct vreg *b, uint8_t op, bool is64)
{
	if (vm_range_is_const(a) && vm_range_is_const(b))
		return vm_jmp_taken(op, a->tv, b->tv, is64);
	if (!is64 && !cmp32_as64(a, b, op))
		return -1;
	return known64(a, b, op);
}

static uint8_t negate(uint8_t op)
{
	switch (op) {
	case BPF_JEQ: return BPF_JNE;
	case BPF_JNE: return BPF_JEQ;
	case BPF_JGT: return BPF_JLE;
	case BPF_JGE: return BPF_JLT;
	case BPF_JLT: return BPF_JGE;
	case BPF_JLE: return BPF_JGT;
	case BPF_JSGT: return BPF_JSLE;
	case BPF_JSGE: return BPF_JSLT;
	case BPF_JSLT: return BPF_JSGE;
	case BPF_JSLE: return BPF_JSGT;
	}
	return 0;
}

static void refine_ne(struct vreg *a, const struct vreg *b)
{
	if (!vm_range_is_const(b))
		return;
	if (a->umin == b->tv && a->umin < a->umax)
		a->umin++;
	else if (a->umax == b->tv && a->umin < a->umax)
		a->umax--;
	if (a->smin == (int64_t)b->tv && a->smin < a->smax)
		a->smin++;
	else if (a->smax == (int64_t)b->tv && a->smin < a->smax)
		a->smax--;
}

static void refine_eq(struct vreg *a, struct vreg *b)
{
	a->umin = b->umin = umax2(a->umin, b->umin);
	a->umax = b->umax = umin2(a->umax, b->umax);
	a->smin = b->smin = smax2(a->smin, b->smin);
	a->smax = b->smax = smin2(a->smax, b->smax);
	if (vm_range_is_const(b))
		a->tv = b->tv, a->tm = 0;
	else if (vm_range_is_const(a))
		b->tv = a->tv, b->tm = 0;
}

/* a OP b holds: narrow both. */
static void refine_true(struct vreg *a, struct vreg *b, uint8_t op)
{
	switch (op) {
	case BPF_JEQ: refine_eq(a, b); break;
	case BPF_JNE: refine_ne(a, b); refine_ne(b, a); break;
	case BPF_JGT:
		if (b->umin < UINT64_MAX) a->umin = umax2(a->umin, b->umin + 1);
		if (a->umax > 0) b->umax = umin2(b->umax, a->umax - 1);
		break;
	case BPF_JGE:
		a->umin = umax2(a->umin, b->umin);
		b->umax = umin2(b->umax, a->umax);
		break;
	case BPF_JLT: refine_true(b, a, BPF_JGT); break;
	case BPF_JLE: refine_true(b, a, BPF_JGE); break;
	case BPF_JSGT:
		if (b->smin < INT64_MAX) a->smin = smax2(a->smin, b->smin + 1);
		if (a->smax > INT64_MIN) b->smax = smin2(b->smax, a->smax - 1);
		break;
	case BPF_JSGE:
		a->smin = smax2(a->smin, b->smin);
		b->smax = smin2(b->smax, a->smax);
		break;
	case BPF_JSLT: refine_true(b, a, BPF_JSGT); break;
	case BPF_JSLE: refine_true(b, a, BPF_JSGE); break;
	}
}

/* `if a & b goto`: on the fall-through every bit known set in one operand is clear in the other
 * (`if r1 & ~63 goto out` leaves r1 in [0, 63]); when taken and one operand is a single known
 * bit, that bit is set in the other.  A 32-bit test says so of the low 32 bits only. */
static void refine_jset_side(struct vreg *a, const struct vreg *b, bool is64, bool taken)
{
	uint64_t bits = is64 ? b->tv : b->tv & U32MAX;
	if (!taken) {
		a->tv &= ~bits;
		a->tm &= ~bits;
	} else if (vm_range_is_const(b) && bits && !(bits & (bits - 1))) {
		a->tv |= bits;
		a->tm &= ~bits;
	}
}

static void refine_jset(struct vreg *a, struct vreg *b, bool is64, bool taken)
{
	struct vreg a0 = *a;
	refine_jset_side(a, b, is64, taken);
	refine_jset_side(b, &a0, is64, taken);
	/* the ranges learn from the narrower bits; what they knew before holds as well */
	vm_range_sync(a);
	vm_range_sync(b);
}

void vm_range_refine(struct vreg *a, struct vreg *b, uint8_t op, bool is64, bool taken)
{
	if (a->type != T_SCALAR || b->type != T_SCALAR)
		return;
	if (op == BPF_JSET) {
		refine_jset(a, b, is64, taken);
		return;
	}
	if (!is64 && !cmp32_as64(a, b, op))
		return;
	refine_true(a, b, taken ? op : negate(op));
	vm_range_sync(a);
	vm_range_sync(b);
}

bool vm_range_covers(const struct vreg *old, const struct vreg *cur)
{
	return old->smin <= cur->smin && old->smax >= cur->smax && old->umin <= cur->umin &&
	       old->umax >= cur->umax && (cur->tm & ~old->tm) == 0 &&
	       (cur->tv & ~old->tm) == old->tv;
}
