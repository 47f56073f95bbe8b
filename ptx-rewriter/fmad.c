/* ptx_no_contraction: what ptxas -fmad=false does, written into the PTX itself.
 *
 * ptxas may fuse a multiply and an add into one FMA only when both carry no rounding modifier
 * (PTX ISA: "add/sub/mul with an explicit rounding modifier are treated conservatively by the
 * code optimizer"); -fmad=false turns that fusion off.  The driver's JIT has no such option for
 * PTX (CU_JIT_FMA applies to LTO-IR only), so code ptxas assembled with -fmad false is compiled
 * back as ptxas did by giving every floating-point add, sub and mul without a rounding modifier
 * the default one, .rn: the same rounding, no fusion.  Checked on this toolkit: ptxas -fmad=false
 * on a module and ptxas (fmad on) on the module with .rn added give identical machine code
 * (tests/cubin/test_embedded.c).  One pass over the text; instructions are found where a
 * statement starts (after `{`, `;`, `:` or a line start, and an optional `@%p` / `@!%p` guard).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "ptx-rewriter/ptx.h"

static const char *const float_types[] = {".f32", ".f64", ".f16", ".f16x2", ".bf16", ".bf16x2"};
static const char *const roundings[] = {".rn", ".rz", ".rm", ".rp"};

static bool is_word(int c)
{
	return isalnum(c) || c == '_' || c == '.' || c == '$' || c == '%';
}

static bool in_list(const char *p, size_t n, const char *const *list, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (strlen(list[i]) == n && !memcmp(p, list[i], n))
			return true;
	return false;
}

/* Whether the instruction at p (an opcode with its modifiers, up to the next blank) is a
 * floating-point add, sub or mul without a rounding modifier; *at: where .rn goes. */
static bool needs_rn(const char *p, const char *end, const char **at)
{
	size_t op = 0;
	while (p + op < end && isalpha((unsigned char)p[op]))
		op++;
	if (!((op == 3 && (!memcmp(p, "add", 3) || !memcmp(p, "sub", 3) || !memcmp(p, "mul", 3)))))
		return false;
	bool fp = false;
	const char *m = p + op;
	*at = m;
	while (m < end && *m == '.') {
		size_t n = 1;
		while (m + n < end && (isalnum((unsigned char)m[n]) || m[n] == '_'))
			n++;
		if (in_list(m, n, roundings, sizeof(roundings) / sizeof(roundings[0])))
			return false;
		fp |= in_list(m, n, float_types, sizeof(float_types) / sizeof(float_types[0]));
		m += n;
	}
	return fp && m < end && isspace((unsigned char)*m);
}

/* The start of the statement's opcode at p (after blanks and a predicate guard), or NULL. */
static const char *opcode_at(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p < end && *p == '@') {
		while (p < end && !isspace((unsigned char)*p))
			p++;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
	}
	return p < end && isalpha((unsigned char)*p) ? p : NULL;
}

int ptx_no_contraction(const char *text, size_t len, char **out, size_t *out_len)
{
	const char *end = text + len;
	size_t cap = len + len / 8 + 16, n = 0, changed = 0;
	char *o = malloc(cap);
	if (!o)
		return -1;
	const char *copied = text;
	bool start = true;   /* at the start of a statement */
	for (const char *p = text; p < end; p++) {
		if (p[0] == '/' && p + 1 < end && p[1] == '/') { /* a comment: to the end of line */
			while (p + 1 < end && p[1] != '\n')
				p++;
			continue;
		}
		const char *op, *at;
		if (start && (op = opcode_at(p, end)) && needs_rn(op, end, &at)) {
			if (n + (size_t)(at - copied) + 4 + (size_t)(end - at) >= cap) {
				cap = (n + (size_t)(end - copied) + 4) * 2;
				char *g = realloc(o, cap);
				if (!g)
					return free(o), -1;
				o = g;
			}
			memcpy(o + n, copied, (size_t)(at - copied));
			n += (size_t)(at - copied);
			memcpy(o + n, ".rn", 3);
			n += 3;
			copied = at;
			changed++;
			p = at;
		}
		start = *p == '\n' || *p == ';' || *p == '{' || *p == '}' || *p == ':';
		if (!start && is_word((unsigned char)*p))
			start = false;
	}
	if (n + (size_t)(end - copied) + 1 > cap) {
		char *g = realloc(o, n + (size_t)(end - copied) + 1);
		if (!g)
			return free(o), -1;
		o = g;
	}
	memcpy(o + n, copied, (size_t)(end - copied));
	n += (size_t)(end - copied);
	o[n] = 0;
	*out = o;
	*out_len = n;
	return (int)(changed > 0x7fffffff ? 0x7fffffff : changed);
}

/* ---- ptx_fusable_adds: whether -fmad can change a kernel at all ----------------------------
 * ptxas fuses an add or sub with a multiply only when the multiply's result is one of its
 * operands (a*b + c, a*b - c, c - a*b), both without a rounding modifier.  So the registers that
 * may hold such a product are followed: the destinations of unrounded float muls, and whatever a
 * copy of one makes (mov, including packing and unpacking, selp, neg, abs, cvt, shfl: ptxas may
 * see through them), and every load from memory the kernel can write once such a value was
 * stored anywhere (ptxas may forward a store to a load of the same address).
 * Register names are taken for the whole text (several functions share none of their meaning,
 * so this only follows more than needed), and the rules run until nothing changes (loops). */

struct fus_stmt {
	const char *op;             /* the opcode with its modifiers */
	size_t op_len;
	const char *args;           /* the operands, up to the ';' */
	size_t args_len;
};

struct fus_regs {
	char **names;
	size_t n, cap;
};

static bool fus_has(const struct fus_regs *r, const char *name, size_t len)
{
	for (size_t i = 0; i < r->n; i++)
		if (strlen(r->names[i]) == len && !memcmp(r->names[i], name, len))
			return true;
	return false;
}

/* Adds a register; returns 1 when new, 0 when known, -1 out of memory. */
static int fus_add(struct fus_regs *r, const char *name, size_t len)
{
	if (fus_has(r, name, len))
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		char **g = realloc(r->names, cap * sizeof(*g));
		if (!g)
			return -1;
		r->names = g, r->cap = cap;
	}
	if (!(r->names[r->n] = strndup(name, len)))
		return -1;
	r->n++;
	return 1;
}

static bool op_is(const struct fus_stmt *s, const char *base)
{
	size_t n = strlen(base);
	return s->op_len >= n && !memcmp(s->op, base, n) && (s->op_len == n || s->op[n] == '.');
}

static bool op_has(const struct fus_stmt *s, const char *mod)
{
	size_t n = strlen(mod);
	for (const char *p = s->op; p + n <= s->op + s->op_len; p++)
		if (!memcmp(p, mod, n) && (p + n == s->op + s->op_len || p[n] == '.'))
			return true;
	return false;
}

/* A float add, sub or mul without a rounding modifier (what ptxas may contract). */
static bool unrounded_float(const struct fus_stmt *s)
{
	const char *at;
	char buf[96];
	if (s->op_len + 2 > sizeof(buf))
		return false;
	memcpy(buf, s->op, s->op_len);
	buf[s->op_len] = ' ';
	buf[s->op_len + 1] = 0;
	return needs_rn(buf, buf + s->op_len + 1, &at);
}

/* Calls fn for each register named in operands [p, end): returns what fn returned first
 * non-zero, else 0.  `first` says whether a name is in the first operand (the destination). */
typedef int (*fus_reg_fn)(const char *name, size_t len, bool first, void *arg);
static int fus_each_reg(const char *p, const char *end, fus_reg_fn fn, void *arg)
{
	bool first = true;
	int depth = 0;
	while (p < end) {
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && depth > 0)
			depth--;
		else if (*p == ',' && depth == 0)
			first = false;
		if (*p == '%') {
			size_t n = 1;
			while (p + n < end && (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '$'))
				n++;
			int r = fn(p, n, first, arg);
			if (r)
				return r;
			p += n;
			continue;
		}
		p++;
	}
	return 0;
}

struct fus_pass {
	struct fus_regs *tainted;
	bool source_tainted;
	int added;
};

static int fus_source(const char *name, size_t len, bool first, void *arg)
{
	struct fus_pass *f = arg;
	if (!first && fus_has(f->tainted, name, len))
		f->source_tainted = true;
	return 0;
}

static int fus_dest(const char *name, size_t len, bool first, void *arg)
{
	struct fus_pass *f = arg;
	if (!first)
		return 0;
	int r = fus_add(f->tainted, name, len);
	if (r < 0)
		return -1;
	f->added += r;
	return 0;
}

typedef int (*fus_stmt_fn)(const struct fus_stmt *s, void *arg);

/* Where the statement that began at p really starts: after its labels and earlier lines. */
static const char *stmt_text(const char *p, const char *end)
{
	const char *s = p;
	for (const char *c = p; c < end; c++)
		if (*c == ':' || *c == '\n')
			s = c + 1;
	return s;
}

/* Past a comment at p (// or a block comment), or p itself when none starts there. */
static const char *past_comment(const char *p, const char *end)
{
	if (p + 1 >= end || p[0] != '/')
		return p;
	if (p[1] == '/') {
		while (p < end && *p != '\n')
			p++;
		return p;
	}
	if (p[1] != '*')
		return p;
	for (const char *c = p + 2; c + 1 < end; c++)
		if (c[0] == '*' && c[1] == '/')
			return c + 2;
	return end;
}

static int fus_emit(const char *from, const char *semi, fus_stmt_fn fn, void *arg)
{
	const char *s = stmt_text(from, semi), *op = opcode_at(s, semi), *e = op;
	if (!op)
		return 0;
	while (e < semi && !isspace((unsigned char)*e))
		e++;
	struct fus_stmt st = { op, (size_t)(e - op), e, (size_t)(semi - e) };
	return fn(&st, arg);
}

/* Statements of the text, one call each; returns -1 when fn did, else 0.  A brace is a block's
 * when no instruction precedes it in its statement, else an operand's (a vector: {%f1, %f2}). */
static int fus_each_stmt(const char *text, size_t len, fus_stmt_fn fn, void *arg)
{
	const char *end = text + len, *from = text;
	int operand = 0;
	for (const char *p = text; p < end; p++) {
		const char *q = past_comment(p, end);
		if (q != p) {
			p = q - 1;
			continue;
		}
		if (*p == '{' && !operand && !opcode_at(stmt_text(from, p), p))
			from = p + 1;
		else if (*p == '{')
			operand++;
		else if (*p == '}' && operand)
			operand--;
		else if (*p == '}')
			from = p + 1;
		else if (*p == ';' && !operand) {
			if (fus_emit(from, p, fn, arg) < 0)
				return -1;
			from = p + 1;
		}
	}
	return 0;
}

struct fus_state {
	struct fus_regs tainted;
	bool memory;   /* a possible product was stored to local or generic memory */
	int changed;   /* registers added in this pass */
	int adds;      /* in the counting pass: adds and subs that take a possible product */
	bool counting;
};

/* Memory a kernel writes: ptxas may forward a store to a later load of the same address. */
static bool writable_space(const struct fus_stmt *s)
{
	return !op_has(s, ".param") && !op_has(s, ".const");
}

static int fus_visit(const struct fus_stmt *s, void *arg)
{
	struct fus_state *st = arg;
	struct fus_pass f = { &st->tainted, false, 0 };
	const char *end = s->args + s->args_len;
	bool mul = unrounded_float(s) && op_is(s, "mul");
	bool add = unrounded_float(s) && (op_is(s, "add") || op_is(s, "sub"));
	bool copy = op_is(s, "mov") || op_is(s, "selp") || op_is(s, "neg") || op_is(s, "abs") ||
		    op_is(s, "cvt") || op_is(s, "shfl");
	bool load = (op_is(s, "ld") || op_is(s, "ldu") || op_is(s, "atom")) && writable_space(s);
	fus_each_reg(s->args, end, fus_source, &f);
	if (st->counting) {
		st->adds += add && f.source_tainted;
		return 0;
	}
	if ((op_is(s, "st") || op_is(s, "atom") || op_is(s, "red")) && f.source_tainted)
		st->memory = true;
	if (mul || (load && st->memory) || (copy && f.source_tainted))
		if (fus_each_reg(s->args, end, fus_dest, &f) < 0)
			return -1;
	st->changed += f.added;
	return 0;
}

int ptx_fusable_adds(const char *text, size_t len)
{
	struct fus_state st = { 0 };
	int rc = 0;
	do {
		st.changed = 0;
		bool memory = st.memory;
		if (fus_each_stmt(text, len, fus_visit, &st) < 0) {
			rc = -1;
			break;
		}
		st.changed += st.memory != memory;
	} while (st.changed);
	if (rc == 0) {
		st.counting = true;
		fus_each_stmt(text, len, fus_visit, &st);
		rc = st.adds;
	}
	for (size_t i = 0; i < st.tainted.n; i++)
		free(st.tainted.names[i]);
	free(st.tainted.names);
	return rc;
}

/* ---- ptx_embedded_verdict -------------------------------------------------------------------- */

int ptx_embedded_verdict(const void *cubin, size_t size, const struct cubin_embedded_ptx *e,
			 char *why, size_t n)
{
	if (!e->sections)
		return snprintf(why, n, "its cubin keeps no PTX (assembled without line info)"), 0;
	if (!e->text) /* a link of several PTX inputs: each is checked when it is linked again */
		return e->has_options ? 1
				      : (snprintf(why, n, "its cubin keeps PTX but not the options it "
						      "was assembled with (no .note.nv.tkinfo)"), 0);
	char mismatch[160];
	if (cubin_embedded_ptx_matches(cubin, size, e->text, e->len, mismatch, sizeof(mismatch)))
		return snprintf(why, n, "the PTX kept in its cubin is not that cubin's code: %s",
				mismatch), 0;
	if (e->has_options)
		return 1;
	int fusable = ptx_fusable_adds(e->text, e->len);
	if (fusable < 0)
		return -1;
	if (fusable > 0)
		return snprintf(why, n, "its cubin keeps PTX but not the options it was assembled "
				"with (no .note.nv.tkinfo), and %d float adds or subs in it take a "
				"product that -fmad may have fused with them or not", fusable),
		       PTX_EMBEDDED_FMAD_UNKNOWN;
	return 1;
}
