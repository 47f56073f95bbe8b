/* Warp-uniform loops of one block (issue 32: instrcount's warp-level count).  A loop of one
 * block that a thread enters at most once, only by falling into it (struct ptx_bblock
 * .self_loop), whose branch back has the same predicate in every lane that entered it together,
 * keeps those lanes together: every iteration is one warp-level execution by all of them, so
 * the warp's count of the block is the count of any one of them, and the lane elected where
 * they enter need not count per iteration (inject.c counts the warp once there and reads the
 * thread count at exit).  nvcc's loops over a parameter's trip count are this kind.
 *
 * Uniform values, sound by construction:
 * - invariant registers: exactly one definition in the function, unpredicated, a computation
 *   (below) of immediates, symbols, the kernel's parameters (ld.param of a name), %ctaid,
 *   %ntid, %nctaid, %nsmid, %gridid and invariant registers, found bottom-up (never through a
 *   cycle): every lane that runs the definition computes the same value, every time;
 * - the loop's registers: those the block defines, with at most one definition elsewhere, of
 *   an invariant value; each of their definitions in the block a computation of uniform
 *   operands, unpredicated or under a uniform predicate; found by an optimistic fixpoint (an
 *   induction variable depends on itself).  A thread enters the loop once, so at its entry
 *   such a register holds its other definition's value, the same in every lane (or is not
 *   defined yet: a program that reads it then reads an undefined value).
 * Computations: integer and floating-point arithmetic, logic, comparisons, selections, moves
 * and conversions, deterministic functions of their operands.  Loads other than of
 * parameters, atomics, warp-level operations, %tid, %laneid, clocks and anything else are not.
 * Every register of an instruction's first operand (braces, `|` pairs) counts as written by it,
 * so an instruction read wrongly can only make fewer registers uniform. */
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/internal.h"

#define UNI_MAX_INSNS 20000u /* larger kernels go without (a saving, never needed) */
#define UNI_PASSES 64u       /* bottom-up passes for invariants (stopping early is sound) */

struct ureg {
	const char *name;
	size_t len;
	uint32_t defs, defs_in;  /* definitions in the function, in the loop's block */
	bool inv, uni;
};

struct uni {
	const struct ptx_func *f;
	struct ureg *r;          /* the registers written (at most one per operand token) */
	uint32_t n, cap;
	uint32_t *slot, mask;    /* a hash of their names: index, or UINT32_MAX when free */
};

static bool tok_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '$' || c == '.';
}

/* The length of the register token at s ('%' first). */
static size_t tok_len(const char *s)
{
	size_t n = 1;
	while (tok_char(s[n]))
		n++;
	return n;
}

static bool sreg_uniform(const char *s, size_t len)
{
	static const char *const ok[] = {"%ctaid.", "%ntid.", "%nctaid.", "%nsmid", "%gridid", NULL};
	for (const char *const *p = ok; *p; p++)
		if (len >= strlen(*p) && !strncmp(s, *p, strlen(*p)))
			return true;
	return false;
}

/* The hash slot of name s: its register's, or the free one where it would go. */
static uint32_t *slot_of(const struct uni *u, const char *s, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	for (;; h++) {
		uint32_t *sl = &u->slot[h & u->mask];
		if (*sl == UINT32_MAX ||
		    (u->r[*sl].len == len && !strncmp(u->r[*sl].name, s, len)))
			return sl;
	}
}

static struct ureg *find(struct uni *u, const char *s, size_t len)
{
	uint32_t *sl = slot_of(u, s, len);
	return *sl == UINT32_MAX ? NULL : &u->r[*sl];
}

/* The register named s, added when new (the table holds one per operand token at most). */
static struct ureg *intern(struct uni *u, const char *s, size_t len)
{
	uint32_t *sl = slot_of(u, s, len);
	if (*sl != UINT32_MAX)
		return &u->r[*sl];
	if (u->n == u->cap)
		return NULL;
	u->r[u->n] = (struct ureg){.name = s, .len = len};
	*sl = u->n;
	return &u->r[u->n++];
}

/* Calls fn on every register written by instruction in (those of its first operand outside
 * brackets).  Returns -1 when fn does. */
static int each_def(struct uni *u, const struct ptx_insn *in,
		    int (*fn)(struct uni *u, struct ureg *g, void *arg), void *arg)
{
	if (!in->op_cnt)
		return 0;
	int depth = 0;
	for (const char *s = in->ops[0]; *s; s++) {
		depth += (*s == '[') - (*s == ']');
		if (*s != '%' || depth)
			continue;
		size_t len = tok_len(s);
		struct ureg *g = intern(u, s, len);
		if (!g || fn(u, g, arg))
			return -1;
		s += len - 1;
	}
	return 0;
}

static int count_def(struct uni *u, struct ureg *g, void *arg)
{
	(void)u, (void)arg;
	g->defs++;
	return 0;
}

static int count_in(struct uni *u, struct ureg *g, void *arg)
{
	(void)u, (void)arg;
	g->defs_in++;
	return 0;
}

/* Whether the opcode computes a deterministic function of its operands (ld.param aside). */
static bool computes(const char *op)
{
	static const char *const roots[] = {
		"mov", "cvt", "cvta", "add", "sub", "mul", "mad", "mul24", "mad24", "sad", "div",
		"rem", "abs", "neg", "min", "max", "fma", "and", "or", "xor", "not", "cnot", "shl",
		"shr", "shf", "lop3", "bfe", "bfi", "bfind", "brev", "prmt", "popc", "clz", "setp",
		"set", "selp", "slct", "copysign", "testp", "rcp", "sqrt", "rsqrt", "sin", "cos",
		"lg2", "ex2", "tanh", NULL};
	for (const char *const *r = roots; *r; r++) {
		size_t n = strlen(*r);
		if (!strncmp(op, *r, n) && (op[n] == 0 || op[n] == '.'))
			return true;
	}
	return false;
}

/* Whether register token s is uniform: in phase `loop`, invariant or a loop register still
 * taken as uniform; else invariant. */
static bool reg_ok(struct uni *u, const char *s, size_t len, bool loop)
{
	if (sreg_uniform(s, len))
		return true;
	const struct ureg *g = find(u, s, len);
	return g && (g->inv || (loop && g->uni));
}

/* Whether operand op ("[name]", "[name+8]") names one of the kernel's parameters: a call's
 * .param (its result) is another matter. */
static bool kernel_param(const struct ptx_func *f, const char *op)
{
	if (*op++ != '[')
		return false;
	size_t len = strcspn(op, "+]");
	for (uint32_t i = 0; i < f->param_cnt; i++)
		if (strlen(f->params[i].name) == len && !strncmp(f->params[i].name, op, len))
			return true;
	return false;
}

/* Whether instruction in computes a uniform value: a computation whose guard and operands
 * after the first are uniform, or a load of a kernel parameter (by its name). */
static bool insn_ok(struct uni *u, const struct ptx_insn *in, bool loop)
{
	bool param = !strncmp(in->opcode, "ld.param", 8);
	if (param && (!u->f->is_entry || in->op_cnt != 2 || !kernel_param(u->f, in->ops[1])))
		return false;
	if (!param && !computes(in->opcode))
		return false;
	if (in->pred && !reg_ok(u, in->pred, strlen(in->pred), loop))
		return false;
	for (uint32_t k = 1; k < in->op_cnt; k++)
		for (const char *s = in->ops[k]; *s; s++) {
			if (*s == '[' && !param)
				return false;
			if (*s != '%')
				continue;
			size_t len = tok_len(s);
			if (!reg_ok(u, s, len, loop))
				return false;
			s += len - 1;
		}
	return true;
}

static int set_inv(struct uni *u, struct ureg *g, void *arg)
{
	(void)u;
	*(bool *)arg |= !g->inv && g->defs == 1;
	g->inv |= g->defs == 1;
	return 0;
}

/* Invariant registers, bottom-up. */
static void invariants(struct uni *u)
{
	bool changed = true;
	for (uint32_t pass = 0; changed && pass < UNI_PASSES; pass++) {
		changed = false;
		for (uint32_t i = 0; i < u->f->insn_cnt; i++) {
			const struct ptx_insn *in = &u->f->insns[i];
			if (!in->pred && insn_ok(u, in, false))
				each_def(u, in, set_inv, &changed);
		}
	}
}

static int clear_uni(struct uni *u, struct ureg *g, void *arg)
{
	(void)u;
	*(bool *)arg |= g->uni;
	g->uni = false;
	return 0;
}

/* The loop's registers (block b), optimistically; a definition elsewhere must be unpredicated
 * and invariant-valued. */
static void loop_regs(struct uni *u, const struct ptx_bblock *b)
{
	for (uint32_t i = 0; i < u->n; i++)
		u->r[i].uni = u->r[i].defs_in > 0 && u->r[i].defs - u->r[i].defs_in <= 1;
	bool dummy = false;
	for (uint32_t i = 0; i < u->f->insn_cnt; i++) {
		const struct ptx_insn *in = &u->f->insns[i];
		bool inside = i >= b->first && i < b->first + b->count;
		if (!inside && (in->pred || !insn_ok(u, in, false)))
			each_def(u, in, clear_uni, &dummy);
	}
	bool changed = true;
	while (changed) { /* each pass clears at least one register: ends */
		changed = false;
		for (uint32_t i = b->first; i < b->first + b->count; i++)
			if (!insn_ok(u, &u->f->insns[i], true))
				each_def(u, &u->f->insns[i], clear_uni, &changed);
	}
}

static bool loop_uniform(struct uni *u, const struct ptx_bblock *b)
{
	for (uint32_t i = 0; i < u->n; i++)
		u->r[i].defs_in = 0;
	for (uint32_t i = b->first; i < b->first + b->count; i++)
		each_def(u, &u->f->insns[i], count_in, NULL);
	loop_regs(u, b);
	const struct ptx_insn *last = &u->f->insns[b->first + b->count - 1];
	return !last->pred || reg_ok(u, last->pred, strlen(last->pred), true);
}

void ptx_mark_uniform_loops(const struct ptx_func *f, struct ptx_bblock *v, uint32_t n)
{
	bool any = false;
	for (uint32_t b = 0; b < n; b++)
		any |= v[b].self_loop;
	if (!any || f->insn_cnt > UNI_MAX_INSNS)
		return;
	struct uni u = {.f = f};
	for (uint32_t i = 0; i < f->insn_cnt; i++) /* registers written: at most one per '%' */
		for (const char *c = f->insns[i].op_cnt ? f->insns[i].ops[0] : ""; *c; c++)
			u.cap += *c == '%';
	uint32_t size = 64;
	while (size < 2 * u.cap)
		size *= 2;
	u.r = malloc((u.cap + 1) * sizeof(*u.r));
	u.slot = malloc(size * sizeof(*u.slot));
	u.mask = size - 1;
	bool ok = u.r && u.slot;
	if (ok)
		memset(u.slot, 0xff, size * sizeof(*u.slot));
	for (uint32_t i = 0; ok && i < f->insn_cnt; i++)
		ok = !each_def(&u, &f->insns[i], count_def, NULL);
	if (ok) { /* else (out of memory) none marked */
		invariants(&u);
		for (uint32_t b = 0; b < n; b++)
			v[b].uniform = v[b].self_loop && loop_uniform(&u, &v[b]);
	}
	free(u.r);
	free(u.slot);
}
