/* Basic blocks of a PTX function (bbprobe sites) and the opcode class of an instruction.
 *
 * A block starts at the function's first instruction, at every instruction that a label
 * precedes and after every branch, return and exit; it ends where the next one starts.  The
 * split only needs to be fine enough for counting: every thread that enters a block issues
 * every instruction of it, so a label nothing jumps to (or a call prototype's name) costing
 * one more block is harmless, while a missed label would count instructions that a jump
 * skips.  So any ':' between two instructions outside comments and strings counts as a
 * label.  The .loc in force at a block's first instruction names its source line.  A block on
 * a cycle of the control flow graph (branches to labels, fall-through) is `in_loop`: the only
 * kind a thread may enter more than once. */
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/internal.h"

static bool root_is(const char *op, const char *root)
{
	size_t n = strlen(root);
	return !strncmp(op, root, n) && (op[n] == 0 || op[n] == '.');
}

static bool root_in(const char *op, const char *const *roots)
{
	for (; *roots; roots++)
		if (root_is(op, *roots))
			return true;
	return false;
}

static bool ends_block(const struct ptx_insn *in)
{
	static const char *const roots[] = {"bra", "brx", "ret", "exit", "trap", NULL};
	return root_in(in->opcode, roots);
}

/* The class of an arithmetic instruction by its type suffix. */
static uint32_t arith_class(const char *op)
{
	if (strstr(op, ".f64"))
		return CUBPF_OP_FP64;
	if (strstr(op, ".f16") || strstr(op, ".bf16"))
		return CUBPF_OP_FP16;
	if (strstr(op, ".f32") || strstr(op, ".ftz") || strstr(op, ".approx"))
		return CUBPF_OP_FP32;
	return CUBPF_OP_INT;
}

static uint32_t mem_class(const struct ptx_insn *in)
{
	struct ptx_mem_access a;
	if (!ptx_insn_mem_access(in, &a))
		return CUBPF_OP_OTHER;
	if (a.op == CUBPF_MEM_ATOMIC || a.op == CUBPF_MEM_REDUCE)
		return CUBPF_OP_ATOMIC;
	switch (a.space) {
	case PTX_SPACE_SHARED: return CUBPF_OP_SHARED;
	case PTX_SPACE_LOCAL: return CUBPF_OP_LOCAL;
	case PTX_SPACE_CONST:
	case PTX_SPACE_PARAM: return CUBPF_OP_PARAM;
	case PTX_SPACE_OTHER: return CUBPF_OP_ASYNC;
	default: return a.op == CUBPF_MEM_STORE ? CUBPF_OP_ST_GLOBAL : CUBPF_OP_LD_GLOBAL;
	}
}

uint32_t ptx_insn_class(const struct ptx_insn *in)
{
	static const char *const control[] = {"bra", "brx", "call", "ret", "exit", "trap", NULL};
	static const char *const sync[] = {"bar", "barrier", "membar", "fence", "mbarrier", NULL};
	static const char *const warp[] = {"shfl", "vote", "match", "redux", "activemask", NULL};
	static const char *const tensor[] = {"mma", "wmma", "wgmma", "ldmatrix", "stmatrix", NULL};
	static const char *const async[] = {"cp", "tex", "tld4", "suld", "sust", "sured", "txq",
					    "suq", NULL};
	static const char *const sfu[] = {"sin", "cos", "ex2", "lg2", "rcp", "sqrt", "rsqrt", "tanh",
					  NULL};
	static const char *const logic[] = {"and", "or", "xor", "not", "cnot", "shl", "shr", "shf",
					    "lop3", "bfe", "bfi", "bfind", "brev", "prmt", "popc",
					    "clz", "fns", NULL};
	static const char *const cmp[] = {"setp", "set", "selp", "slct", NULL};
	static const char *const mov[] = {"mov", "cvt", "cvta", "isspacep", NULL};
	static const char *const arith[] = {"add", "sub", "mul", "mad", "fma", "div", "rem", "abs",
					    "neg", "min", "max", "sad", "mul24", "mad24", "addc",
					    "subc", "madc", "copysign", "testp", "dp4a", "dp2a", NULL};
	const char *op = in->opcode;
	if (root_in(op, control))
		return CUBPF_OP_CONTROL;
	if (root_in(op, sync))
		return CUBPF_OP_SYNC;
	if (root_in(op, warp))
		return CUBPF_OP_WARP;
	if (root_in(op, tensor))
		return CUBPF_OP_TENSOR;
	if (root_in(op, async))
		return CUBPF_OP_ASYNC;
	if (root_in(op, sfu))
		return CUBPF_OP_SFU;
	if (root_in(op, logic))
		return CUBPF_OP_LOGIC;
	if (root_in(op, cmp))
		return CUBPF_OP_CMP;
	if (root_in(op, mov))
		return CUBPF_OP_MOV;
	if (root_in(op, arith))
		return arith_class(op);
	return mem_class(in);
}

/* Labels seen between instructions: name (in the module text) -> the block they start. */
struct labels {
	struct lab {
		const char *name;
		size_t len;
		uint32_t block;
	} *v;
	size_t n, cap;
};

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '$' || c == '%' || c == '.';
}

/* The identifier before the ':' at s[i] (a label's name), recorded for block `block`. */
static int label_add(struct labels *l, const char *s, size_t b, size_t i, uint32_t block)
{
	size_t e = i;
	while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
		e--;
	size_t st = e;
	while (st > b && ident_char(s[st - 1]))
		st--;
	if (st == e || !l)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct lab *nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return -1;
		l->v = nv, l->cap = cap;
	}
	l->v[l->n++] = (struct lab){s + st, e - st, block};
	return 0;
}

/* Reads the text between two instructions: whether a label is there (each one's name goes to
 * l for block `block`), and the last .loc. */
static int gap_scan(const char *s, size_t b, size_t e, uint32_t *file, uint32_t *line,
		    struct labels *l, uint32_t block)
{
	int label = 0;
	for (size_t i = b; i < e; i++) {
		if (s[i] == '/' && i + 1 < e && s[i + 1] == '/') {
			while (i < e && s[i] != '\n')
				i++;
		} else if (s[i] == '/' && i + 1 < e && s[i + 1] == '*') {
			for (i += 2; i + 1 < e && !(s[i] == '*' && s[i + 1] == '/'); i++)
				;
			i++;
		} else if (s[i] == '"') {
			for (i++; i < e && s[i] != '"'; i++)
				;
		} else if (s[i] == ':') {
			label = 1;
			if (label_add(l, s, b, i, block))
				return -1;
		} else if (s[i] == '.' && e - i > 5 && !strncmp(s + i, ".loc", 4) &&
			   (s[i + 4] == ' ' || s[i + 4] == '\t')) {
			char *end;
			unsigned long f = strtoul(s + i + 5, &end, 10);
			unsigned long l = strtoul(end, &end, 10);
			*file = (uint32_t)f, *line = (uint32_t)l;
			i = (size_t)(end - s) - 1;
		}
	}
	return label;
}

static uint32_t count_lines(const char *s, size_t from, size_t to)
{
	uint32_t n = 0;
	for (size_t i = from; i < to; i++)
		n += s[i] == '\n';
	return n;
}

void ptx_loc_at(const struct ptx_module *m, const struct ptx_func *f, size_t off,
		struct ptx_loc_cursor *c)
{
	if (c->f != f) {
		size_t from = 0;
		uint32_t line = 1;
		if (c->f && c->off <= f->body_open) /* a later function: from where the walk is */
			from = c->off, line = c->line;
		line += count_lines(m->text, from, f->body_open);
		*c = (struct ptx_loc_cursor){.f = f, .off = f->body_open, .body = f->body_open,
					     .line = line, .body_line = line};
		gap_scan(m->text, f->start, f->body_open, &c->file, &c->src, NULL, 0);
	}
	if (off < c->off) {
		c->off = c->body, c->line = c->body_line, c->file = c->src = 0;
		gap_scan(m->text, f->start, f->body_open, &c->file, &c->src, NULL, 0);
	}
	c->line += count_lines(m->text, c->off, off);
	gap_scan(m->text, c->off, off, &c->file, &c->src, NULL, 0);
	c->off = off;
}

/* ---- loops: which blocks a thread may enter more than once ---- */

static bool uncond_end(const struct ptx_insn *in)
{
	return !in->pred && ends_block(in) && strncmp(in->opcode, "brx", 3);
}

/* Successors of block b: the next block unless it ends in an unconditional jump, return or
 * exit; a branch's target: every block a label of that name starts (inline asm scopes may
 * reuse a name: all of them, to be safe), every labelled block for brx.idx (its targets are a
 * table).  At most l->n + 1. */
static uint32_t succs(const struct ptx_func *f, const struct ptx_bblock *v, uint32_t n,
		      const struct labels *l, uint32_t b, uint32_t *out)
{
	const struct ptx_insn *last = &f->insns[v[b].first + v[b].count - 1];
	uint32_t k = 0;
	if (!uncond_end(last) && b + 1 < n)
		out[k++] = b + 1;
	bool brx = !strncmp(last->opcode, "brx", 3);
	if (!brx && (strncmp(last->opcode, "bra", 3) || last->op_cnt < 1))
		return k;
	/* brx's targets are every label; a malformed one may have no operand at all */
	const char *name = brx ? "" : last->ops[last->op_cnt - 1];
	size_t len = strlen(name);
	for (size_t i = 0; i < l->n; i++)
		if (brx || (l->v[i].len == len && !strncmp(l->v[i].name, name, len)))
			out[k++] = l->v[i].block;
	return k;
}

/* in_loop: the block reaches itself (a walk from its successors per block, each block pushed
 * once: O(blocks x edges) in all). */
static int mark_loops(const struct ptx_func *f, struct ptx_bblock *v, uint32_t n,
		      const struct labels *l)
{
	uint32_t *stack = malloc(((size_t)n + 1) * sizeof(*stack));
	uint32_t *sc = malloc((l->n + 2) * sizeof(*sc));
	bool *seen = malloc(n + 1);
	if (!stack || !sc || !seen) {
		free(stack), free(sc), free(seen);
		return -1;
	}
	for (uint32_t b = 0; b < n; b++) {
		memset(seen, 0, n);
		size_t top = 0;
		stack[top++] = b; /* its successors first; b itself is not seen until reached again */
		while (top && !v[b].in_loop) {
			uint32_t x = stack[--top], k = succs(f, v, n, l, x, sc);
			for (uint32_t i = 0; i < k && !v[b].in_loop; i++) {
				if (sc[i] == b)
					v[b].in_loop = true;
				else if (!seen[sc[i]])
					seen[sc[i]] = true, stack[top++] = sc[i];
			}
		}
	}
	free(stack), free(sc), free(seen);
	return 0;
}

/* Whether block x's last instruction branches to a label that starts block b. */
static bool branches_to(const struct ptx_func *f, const struct ptx_bblock *v,
			const struct labels *l, uint32_t x, uint32_t b)
{
	const struct ptx_insn *last = &f->insns[v[x].first + v[x].count - 1];
	if (!strncmp(last->opcode, "brx", 3))
		return true;
	if (strncmp(last->opcode, "bra", 3) || last->op_cnt < 1)
		return false;
	const char *name = last->ops[last->op_cnt - 1];
	size_t len = strlen(name);
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].block == b && l->v[i].len == len && !strncmp(l->v[i].name, name, len))
			return true;
	return false;
}

/* Whether every label named by block b's last instruction starts b. */
static bool only_to_self(const struct ptx_func *f, const struct ptx_bblock *v,
			 const struct labels *l, uint32_t b)
{
	const struct ptx_insn *last = &f->insns[v[b].first + v[b].count - 1];
	const char *name = last->ops[last->op_cnt - 1];
	size_t len = strlen(name);
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].len == len && !strncmp(l->v[i].name, name, len) && l->v[i].block != b)
			return false;
	return true;
}

/* Whether block b reaches itself other than by its own branch back (from its fall-through
 * successor): then it is on a larger cycle. */
static int on_outer_cycle(const struct ptx_func *f, const struct ptx_bblock *v, uint32_t n,
			  const struct labels *l, uint32_t b, bool *outer)
{
	uint32_t *stack = malloc(((size_t)n + 1) * sizeof(*stack));
	uint32_t *sc = malloc((l->n + 2) * sizeof(*sc));
	bool *seen = calloc(n + 1, 1);
	*outer = false;
	if (!stack || !sc || !seen) {
		free(stack), free(sc), free(seen);
		return -1;
	}
	size_t top = 0;
	uint32_t k = succs(f, v, n, l, b, sc);
	for (uint32_t i = 0; i < k; i++)
		if (sc[i] != b && !seen[sc[i]])
			seen[sc[i]] = true, stack[top++] = sc[i];
	while (top && !*outer) {
		k = succs(f, v, n, l, stack[--top], sc);
		for (uint32_t i = 0; i < k; i++) {
			*outer |= sc[i] == b;
			if (!seen[sc[i]])
				seen[sc[i]] = true, stack[top++] = sc[i];
		}
	}
	free(stack), free(sc), free(seen);
	return 0;
}

/* Where code runs on the fall-through into block b only: the start of the line after block
 * b - 1's last instruction, when b's labels all come after it; 0 when there is no such place. */
static size_t enter_offset(const struct ptx_module *m, const struct ptx_func *f,
			   const struct ptx_bblock *v, uint32_t b)
{
	const struct ptx_insn *prev = &f->insns[v[b].first - 1];
	size_t at = prev->off + prev->len, end = f->insns[v[b].first].off;
	while (at < end && m->text[at] != '\n') {
		if (m->text[at] == ':' || m->text[at] == '/')
			return 0; /* a label (or a comment that could hide one) on that line */
		at++;
	}
	return at < end ? at + 1 : 0;
}

/* self_loop (struct ptx_bblock). */
static int mark_self_loops(const struct ptx_module *m, const struct ptx_func *f,
			   struct ptx_bblock *v, uint32_t n, const struct labels *l)
{
	for (uint32_t b = 1; b < n; b++) {
		const struct ptx_insn *last = &f->insns[v[b].first + v[b].count - 1];
		const struct ptx_insn *before = &f->insns[v[b - 1].first + v[b - 1].count - 1];
		bool ok = v[b].in_loop && !strncmp(last->opcode, "bra", 3) &&
			  branches_to(f, v, l, b, b) && only_to_self(f, v, l, b) &&
			  !uncond_end(before) && !branches_to(f, v, l, b - 1, b);
		for (uint32_t i = 0; ok && i < v[b].count; i++)
			ok = strncmp(f->insns[v[b].first + i].opcode, "call", 4) != 0;
		for (uint32_t x = 0; ok && x < n; x++)
			ok = x == b || x == b - 1 || !branches_to(f, v, l, x, b);
		bool outer = true;
		if (ok && on_outer_cycle(f, v, n, l, b, &outer))
			return -1;
		v[b].enter_off = ok && !outer ? enter_offset(m, f, v, b) : 0;
		v[b].self_loop = v[b].enter_off != 0;
	}
	return 0;
}

/* succ, nsucc, succ_any (struct ptx_bblock). */
static int keep_succs(const struct ptx_func *f, struct ptx_bblock *v, uint32_t n,
		      const struct labels *l)
{
	uint32_t *sc = malloc((l->n + 2) * sizeof(*sc));
	if (!sc)
		return -1;
	for (uint32_t b = 0; b < n; b++) {
		uint32_t k = succs(f, v, n, l, b, sc);
		const struct ptx_insn *last = &f->insns[v[b].first + v[b].count - 1];
		v[b].succ_any = k > 2 || !strncmp(last->opcode, "brx", 3);
		v[b].nsucc = v[b].succ_any ? 0 : (uint8_t)k;
		for (uint32_t i = 0; i < v[b].nsucc; i++)
			v[b].succ[i] = sc[i];
	}
	free(sc);
	return 0;
}

int ptx_basic_blocks(const struct ptx_module *m, const struct ptx_func *f,
		     struct ptx_bblock **out, uint32_t *count)
{
	*out = NULL, *count = 0;
	struct ptx_bblock *v = calloc(f->insn_cnt + 1, sizeof(*v));
	struct labels l = {0};
	if (!v)
		return -1;
	uint32_t n = 0, file = 0, line = 0;
	uint32_t pline = 1 + count_lines(m->text, 0, f->body_open);
	size_t prev = f->body_open + 1, lpos = f->body_open;
	/* .loc before the body (rare) still names its first block */
	gap_scan(m->text, f->start, f->body_open, &file, &line, NULL, 0);
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		bool brk = i == 0 || ends_block(&f->insns[i - 1]);
		int label = gap_scan(m->text, prev, in->off, &file, &line, &l, n); /* starts block n */
		if (label < 0)
			goto fail;
		if (brk || label) {
			pline += count_lines(m->text, lpos, in->off);
			lpos = in->off;
			v[n++] = (struct ptx_bblock){.first = i, .line = pline, .src_file = file,
						     .src_line = line};
		}
		v[n - 1].count++;
		v[n - 1].classes[ptx_insn_class(in)]++;
		prev = in->off + in->len;
	}
	if (n && (mark_loops(f, v, n, &l) || mark_self_loops(m, f, v, n, &l) ||
		  keep_succs(f, v, n, &l)))
		goto fail;
	free(l.v);
	*out = v, *count = n;
	return 0;
fail:
	free(l.v);
	free(v);
	return -1;
}
