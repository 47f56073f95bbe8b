/* Warp-uniform loops of one block (issue 32: instrcount's warp-level count).  A loop of one
 * block that a thread enters at most once, only by falling into it (struct ptx_bblock
 * .self_loop), whose branch back has the same predicate in every lane that entered it together,
 * keeps those lanes together: every iteration is one warp-level execution by all of them, so
 * the warp's count of the block is the count of any one of them, and the lane elected where
 * they enter need not count per iteration (inject.c counts the warp once there and reads the
 * thread count at exit).  nvcc's loops over a parameter's trip count are this kind.
 *
 * Uniform values, sound by construction:
 * - a register invariant where an instruction reads it: exactly one of its definitions may
 *   reach there (by the flow graph: struct ptx_bblock.succ), unpredicated, a computation
 *   (below) of immediates, symbols, the kernel's parameters (ld.param of a name), %ctaid,
 *   %ntid, %nctaid, %nsmid, %gridid and registers invariant there in turn (to UNI_DEPTH
 *   definitions; a cycle never ends: not invariant): every lane that runs the definition
 *   computes the same value, every time;
 * - the loop's registers: those the block defines, with at most one definition elsewhere that
 *   may reach the loop, of an invariant value; each of their definitions in the block a
 *   computation of uniform operands, unpredicated or under a uniform predicate; found by an
 *   optimistic fixpoint (an induction variable depends on itself).  A thread enters the loop
 *   once, so at its entry such a register holds its other definition's value, the same in
 *   every lane (or is not defined yet: a program that reads it then reads an undefined
 *   value).
 * Computations: integer and floating-point arithmetic, logic, comparisons, selections, moves
 * and conversions, deterministic functions of their operands.  Loads other than of
 * parameters, atomics, warp-level operations, %tid, %laneid, clocks and anything else are not.
 * Every register of an instruction's first operand (braces, `|` pairs) counts as written by it,
 * so an instruction read wrongly can only make fewer registers uniform. */
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/internal.h"

#define UNI_MAX_INSNS 20000u /* larger kernels go without (a saving, never needed) */
#define UNI_MAX_BLOCKS 2048u /* (the reachability matrix: blocks^2 bits) */
#define UNI_DEPTH 16u        /* definitions followed back from a read */

struct ureg {
	const char *name;
	size_t len;
	uint32_t first, ndefs;   /* its definitions: defs[first .. first + ndefs) */
	uint32_t defs_in;        /* of which in the loop's block */
	bool uni;                /* (the loop's registers) still taken as uniform */
};

struct uni {
	const struct ptx_func *f;
	const struct ptx_bblock *v;
	uint32_t nb;
	uint32_t *blk;           /* per instruction: its block */
	uint8_t *reach;          /* bit y of row x: block y may follow block x (one edge or more) */
	size_t row;              /* bytes per row */
	struct ureg *r;          /* the registers written (at most one per '%' of first operands) */
	uint32_t n, cap;
	uint32_t *slot, mask;    /* a hash of their names: index, or UINT32_MAX when free */
	uint32_t *defs;          /* instruction indexes, by register */
	const struct ptx_bblock *loop; /* the loop whose registers are being found (or NULL) */
	bool changed;
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

static struct ureg *find(const struct uni *u, const char *s, size_t len)
{
	uint32_t *sl = slot_of(u, s, len);
	return *sl == UINT32_MAX ? NULL : &u->r[*sl];
}

/* The register named s, added when new. */
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

/* Calls fn(u, register, i) on every register instruction i writes (those of its first operand
 * outside brackets).  Returns -1 when out of room. */
static int each_def(struct uni *u, uint32_t i, void (*fn)(struct uni *u, struct ureg *g,
							   uint32_t i))
{
	const struct ptx_insn *in = &u->f->insns[i];
	int depth = 0;
	for (const char *s = in->op_cnt ? in->ops[0] : ""; *s; s++) {
		depth += (*s == '[') - (*s == ']');
		if (*s != '%' || depth)
			continue;
		size_t len = tok_len(s);
		struct ureg *g = intern(u, s, len);
		if (!g)
			return -1;
		fn(u, g, i);
		s += len - 1;
	}
	return 0;
}

static void count_def(struct uni *u, struct ureg *g, uint32_t i)
{
	(void)u, (void)i;
	g->ndefs++;
}

static void add_def(struct uni *u, struct ureg *g, uint32_t i)
{
	u->defs[g->first + g->defs_in++] = i; /* defs_in: a cursor while filling */
}

static void clear_uni(struct uni *u, struct ureg *g, uint32_t i)
{
	(void)i;
	u->changed |= g->uni;
	g->uni = false;
}

/* Whether the opcode computes a deterministic function of its operands. */
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

static bool in_loop_block(const struct uni *u, uint32_t i)
{
	return u->loop && i >= u->loop->first && i < u->loop->first + u->loop->count;
}

/* Whether definition d may reach instruction i. */
static bool reaches(const struct uni *u, uint32_t d, uint32_t i)
{
	uint32_t bd = u->blk[d], bi = u->blk[i];
	bool cycle = u->reach[(size_t)bi * u->row + bi / 8] >> (bi % 8) & 1;
	if (bd == bi)
		return d < i || cycle;
	return u->reach[(size_t)bd * u->row + bi / 8] >> (bi % 8) & 1;
}

static bool tok_ok(const struct uni *u, const char *s, size_t len, uint32_t at, uint32_t depth);

/* Whether instruction i computes a uniform value from what it reads where it is: a
 * computation whose guard and operands after the first are uniform there, or a load of a
 * kernel parameter (by its name). */
static bool insn_ok(const struct uni *u, uint32_t i, uint32_t depth)
{
	const struct ptx_insn *in = &u->f->insns[i];
	if (!strncmp(in->opcode, "ld.param", 8))
		return !in->pred && u->f->is_entry && in->op_cnt == 2 &&
		       kernel_param(u->f, in->ops[1]);
	if (!computes(in->opcode))
		return false;
	if (in->pred && !tok_ok(u, in->pred, strlen(in->pred), i, depth))
		return false;
	for (uint32_t k = 1; k < in->op_cnt; k++)
		for (const char *s = in->ops[k]; *s; s++) {
			if (*s == '[')
				return false;
			if (*s != '%')
				continue;
			size_t len = tok_len(s);
			if (!tok_ok(u, s, len, i, depth))
				return false;
			s += len - 1;
		}
	return true;
}

/* Whether register g is invariant where instruction at reads it (above). */
static bool inv_at(const struct uni *u, const struct ureg *g, uint32_t at, uint32_t depth)
{
	uint32_t d = UINT32_MAX, cnt = 0;
	for (uint32_t k = 0; k < g->ndefs && cnt < 2; k++)
		if (reaches(u, u->defs[g->first + k], at))
			d = u->defs[g->first + k], cnt++;
	return cnt == 1 && depth && !u->f->insns[d].pred && insn_ok(u, d, depth - 1);
}

/* Whether the register token at s is uniform where instruction at reads it: a uniform special
 * register, the loop's register still taken as uniform, or one invariant there. */
static bool tok_ok(const struct uni *u, const char *s, size_t len, uint32_t at, uint32_t depth)
{
	if (sreg_uniform(s, len))
		return true;
	const struct ureg *g = find(u, s, len);
	if (!g)
		return false;
	if (g->defs_in && in_loop_block(u, at))
		return g->uni;
	return inv_at(u, g, at, depth);
}

/* The loop's registers (block b), optimistically first: at most one definition outside that
 * may reach it, and of an invariant value. */
static bool loop_uniform(struct uni *u, const struct ptx_bblock *b)
{
	u->loop = NULL;
	for (uint32_t i = 0; i < u->n; i++) {
		struct ureg *g = &u->r[i];
		uint32_t out = 0, d = 0;
		g->defs_in = 0;
		for (uint32_t k = 0; k < g->ndefs; k++) {
			uint32_t x = u->defs[g->first + k];
			bool in = x >= b->first && x < b->first + b->count;
			g->defs_in += in;
			if (!in && reaches(u, x, b->first))
				out++, d = x;
		}
		g->uni = g->defs_in && (out == 0 ||
					(out == 1 && !u->f->insns[d].pred && insn_ok(u, d, UNI_DEPTH)));
	}
	u->loop = b;
	do { /* each pass clears a register or ends */
		u->changed = false;
		for (uint32_t i = b->first; i < b->first + b->count; i++)
			if (!insn_ok(u, i, UNI_DEPTH))
				each_def(u, i, clear_uni);
	} while (u->changed);
	const struct ptx_insn *last = &u->f->insns[b->first + b->count - 1];
	bool ok = !last->pred || tok_ok(u, last->pred, strlen(last->pred), b->first + b->count - 1,
					UNI_DEPTH);
	u->loop = NULL;
	return ok;
}

/* reach: from each block, the blocks a walk along succ finds. */
static int reach_all(struct uni *u)
{
	uint32_t *stack = malloc(((size_t)u->nb + 1) * sizeof(*stack));
	if (!stack)
		return -1;
	for (uint32_t x = 0; x < u->nb; x++) {
		uint8_t *row = u->reach + (size_t)x * u->row;
		uint32_t top = 0;
		stack[top++] = x;
		while (top) {
			const struct ptx_bblock *b = &u->v[stack[--top]];
			for (uint32_t k = 0; k < (b->succ_any ? u->nb : b->nsucc); k++) {
				uint32_t y = b->succ_any ? k : b->succ[k];
				if (!(row[y / 8] >> (y % 8) & 1))
					row[y / 8] |= (uint8_t)(1u << (y % 8)), stack[top++] = y;
			}
		}
	}
	free(stack);
	return 0;
}

/* The registers and their definitions. */
static int defs_all(struct uni *u)
{
	for (uint32_t i = 0; i < u->f->insn_cnt; i++)
		for (const char *c = u->f->insns[i].op_cnt ? u->f->insns[i].ops[0] : ""; *c; c++)
			u->cap += *c == '%';
	uint32_t size = 64;
	while (size < 2 * u->cap)
		size *= 2;
	u->r = malloc((u->cap + 1) * sizeof(*u->r));
	u->slot = malloc(size * sizeof(*u->slot));
	u->defs = malloc((u->cap + 1) * sizeof(*u->defs));
	u->mask = size - 1;
	if (!u->r || !u->slot || !u->defs)
		return -1;
	memset(u->slot, 0xff, size * sizeof(*u->slot));
	for (uint32_t i = 0; i < u->f->insn_cnt; i++)
		if (each_def(u, i, count_def))
			return -1;
	for (uint32_t i = 0, at = 0; i < u->n; at += u->r[i++].ndefs)
		u->r[i].first = at;
	for (uint32_t i = 0; i < u->f->insn_cnt; i++)
		each_def(u, i, add_def);
	return 0;
}

void ptx_mark_uniform_loops(const struct ptx_func *f, struct ptx_bblock *v, uint32_t n)
{
	bool any = false;
	for (uint32_t b = 0; b < n; b++)
		any |= v[b].self_loop;
	if (!any || f->insn_cnt > UNI_MAX_INSNS || n > UNI_MAX_BLOCKS)
		return;
	struct uni u = {.f = f, .v = v, .nb = n, .row = (n + 7) / 8};
	u.blk = malloc(((size_t)f->insn_cnt + 1) * sizeof(*u.blk));
	u.reach = calloc((size_t)n * u.row + 1, 1);
	bool ok = u.blk && u.reach && !reach_all(&u) && !defs_all(&u);
	for (uint32_t b = 0; ok && b < n; b++)
		for (uint32_t i = 0; i < v[b].count; i++)
			u.blk[v[b].first + i] = b;
	for (uint32_t b = 0; ok && b < n; b++) /* else (out of memory) none marked */
		v[b].uniform = v[b].self_loop && loop_uniform(&u, &v[b]);
	free(u.blk), free(u.reach), free(u.r), free(u.slot), free(u.defs);
}
