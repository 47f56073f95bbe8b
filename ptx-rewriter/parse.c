/* PTX reader.  It records where things are (byte offsets into the caller's text) rather than
 * rebuilding the text, so an editor can change a few spots and copy everything else byte for
 * byte.  It understands statements at module level (directives, variables with initialisers,
 * .section blocks of debug builds, function prototypes and definitions) and inside bodies
 * (declarations, labels, nested blocks of inline asm, predicated instructions, operands with
 * vectors, brackets and call argument lists).  Blanks, comments, strings and the ends of
 * statements and blocks are found with cubin's PTX lexer (cubin_ptx_lex_*), the one that also
 * lists a module's entries, so the two can never disagree on where a statement ends. */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "ptx-rewriter/internal.h"

struct rd {
	const char *s;
	size_t n, i;
	struct cubin_ptx_lexer lx; /* over [s, s + n): copied to scan from an offset */
	char *err;
	size_t errlen;
};

/* The lexer of r's text, at offset `at`. */
static struct cubin_ptx_lexer lexer_at(const struct rd *r, size_t at)
{
	struct cubin_ptx_lexer lx = r->lx;
	lx.at = at;
	lx.depth = 0;
	return lx;
}

static int line_of(const struct rd *r, size_t off)
{
	int line = 1;
	for (size_t k = 0; k < off && k < r->n; k++)
		line += r->s[k] == '\n';
	return line;
}

static int rd_fail(struct rd *r, size_t off, const char *what)
{
	ptx_seterr(r->err, r->errlen, "line %d: %s", line_of(r, off), what);
	return -1;
}

/* Skips blanks and comments. */
static void skip_ws(struct rd *r)
{
	struct cubin_ptx_lexer lx = lexer_at(r, r->i);
	cubin_ptx_lex_skip(&lx);
	r->i = lx.at;
}

static bool is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '%' || c == '.';
}

/* Finds the end of a statement starting at i: the ';' (or '{' when stop_brace) outside
 * strings, comments, parentheses and initialiser braces.  Returns its offset or n. */
static size_t stmt_end(const struct rd *r, size_t i, bool stop_brace)
{
	struct cubin_ptx_lexer lx = lexer_at(r, i);
	struct cubin_ptx_token t;
	int paren = 0, brace = 0;
	bool init = false;
	while (cubin_ptx_lex_next(&lx, &t)) {
		if (t.len != 1) /* words, numbers and strings hold none of these */
			continue;
		char c = t.p[0];
		if (c == '(') {
			paren++;
		} else if (c == ')') {
			paren--;
		} else if (c == '=') {
			init = true;
		} else if (c == '{') {
			if (stop_brace && !init && paren == 0 && brace == 0)
				return (size_t)(t.p - r->s);
			brace++;
		} else if (c == '}') {
			brace--;
		} else if (c == ';' && paren <= 0 && brace <= 0) {
			return (size_t)(t.p - r->s);
		}
	}
	return r->n;
}

/* Directives that end at the end of their line (no ';'). */
static bool line_directive(const char *s, size_t n)
{
	static const char *const names[] = {".version", ".target", ".address_size", ".file", ".loc",
					    ".section_end"};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		size_t l = strlen(names[k]);
		if (n >= l && !strncmp(s, names[k], l) && (n == l || !is_ident(s[l])))
			return true;
	}
	return false;
}

static size_t line_end(const struct rd *r, size_t i)
{
	while (i < r->n && r->s[i] != '\n')
		i++;
	return i;
}

/* Matching close brace of the '{' at i, or n. */
static size_t match_brace(const struct rd *r, size_t i)
{
	struct cubin_ptx_lexer lx = lexer_at(r, i);
	struct cubin_ptx_token t;
	int depth = 0;
	while (cubin_ptx_lex_next(&lx, &t)) {
		if (cubin_ptx_tok_is(&t, "{"))
			depth++;
		else if (cubin_ptx_tok_is(&t, "}") && --depth == 0)
			return (size_t)(t.p - r->s);
	}
	return r->n;
}

static char *dup_trim(const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	return strndup(s, n);
}

/* The first ".entry" and the first ".func" of the statement [b, end) outside parentheses, as
 * whole words (not part of "x.entry" or ".entry.x"); NULL when absent. */
static void find_keywords(const struct rd *r, size_t b, size_t end, const char **entry,
			  const char **func)
{
	struct cubin_ptx_lexer lx = lexer_at(r, b);
	struct cubin_ptx_token t;
	int paren = 0;
	lx.n = end;
	*entry = *func = NULL;
	while (cubin_ptx_lex_next(&lx, &t)) {
		if (t.p[0] == '(' || t.p[0] == ')') {
			paren += t.p[0] == '(' ? 1 : -1;
			continue;
		}
		if (t.p[0] != '.' || (t.len != 6 && t.len != 5)) /* cheap test first */
			continue;
		bool is_entry = cubin_ptx_tok_is(&t, ".entry");
		if (paren || !(is_entry || cubin_ptx_tok_is(&t, ".func")) ||
		    (t.p > r->s + b && is_ident(t.p[-1])) || (lx.at < end && is_ident(r->s[lx.at])))
			continue;
		if (is_entry && !*entry)
			*entry = t.p;
		else if (!is_entry && !*func)
			*func = t.p;
	}
}

/* ---- parameters ---- */

static uint32_t type_size(const char *t)
{
	size_t l = strlen(t);
	if (l >= 3 && l < 16 && !strcmp(t + l - 2, "x2")) { /* f16x2, bf16x2, e4m3x2 */
		char base[16];
		snprintf(base, sizeof(base), "%.*s", (int)(l - 2), t);
		return 2 * type_size(base);
	}
	if (!strcmp(t, "pred"))
		return 1;
	int bits = 0;
	for (const char *p = t; *p; p++)
		if (isdigit((unsigned char)*p)) {
			bits = atoi(p);
			break;
		}
	if (!strncmp(t, "e4m3", 4) || !strncmp(t, "e5m2", 4))
		return 1;
	return bits >= 8 ? (uint32_t)bits / 8 : 0;
}

static int parse_param(char *txt, struct ptx_param *p)
{
	memset(p, 0, sizeof(*p));
	char *save = NULL, *tok;
	uint32_t count = 1;
	for (tok = strtok_r(txt, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
		if (!strcmp(tok, ".reg"))
			p->is_reg = true;
		if (!strcmp(tok, ".param") || !strcmp(tok, ".reg") || !strcmp(tok, ".global") ||
		    !strcmp(tok, ".const") || !strcmp(tok, ".shared") || !strcmp(tok, ".local"))
			continue;
		if (!strcmp(tok, ".ptr")) {
			p->is_ptr_attr = true;
		} else if (!strcmp(tok, ".align")) {
			tok = strtok_r(NULL, " \t\r\n", &save);
			if (!tok)
				return -1;
			if (!p->align || !p->type[0])
				p->align = (uint32_t)atoi(tok);
		} else if (tok[0] == '.') {
			snprintf(p->type, sizeof(p->type), "%s", tok + 1);
		} else {
			char *br = strchr(tok, '[');
			if (br) {
				count = (uint32_t)strtoul(br + 1, NULL, 10);
				*br = 0;
			}
			free(p->name);
			p->name = strdup(tok);
		}
	}
	if (!p->name || !p->type[0])
		return -1;
	p->size = type_size(p->type) * (count ? count : 1);
	if (!p->align)
		p->align = type_size(p->type);
	return 0;
}

/* Splits "(a, b, c)" at top-level commas into params. */
static int parse_params(const char *s, size_t n, struct ptx_func *f)
{
	size_t start = 0;
	int depth = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && (s[i] == '[' || s[i] == '('))
			depth++;
		if (i < n && (s[i] == ']' || s[i] == ')'))
			depth--;
		if (i == n || (s[i] == ',' && depth == 0)) {
			char *txt = dup_trim(s + start, i - start);
			if (txt && *txt) {
				struct ptx_param *np = realloc(f->params, (f->param_cnt + 1) * sizeof(*np));
				if (!np) {
					free(txt);
					return -1;
				}
				f->params = np;
				if (parse_param(txt, &f->params[f->param_cnt])) {
					free(f->params[f->param_cnt].name);
					free(txt);
					return -1;
				}
				f->param_cnt++;
			}
			free(txt);
			start = i + 1;
		}
	}
	return 0;
}

/* Offset just past the ')' matching the '(' at i, or 0 when there is none before n. */
static size_t match_paren(const char *s, size_t n, size_t i)
{
	int depth = 0;
	for (; i < n; i++) {
		if (s[i] == '(')
			depth++;
		else if (s[i] == ')' && --depth == 0)
			return i + 1;
	}
	return 0;
}

/* Reads "... .entry NAME (params) ..." or "... .func (ret) NAME (params) ...". */
static int parse_header(struct rd *r, size_t start, size_t end, const char *kw, struct ptx_func *f)
{
	const char *s = r->s;
	size_t i = (size_t)(kw - s) + (f->is_entry ? 6 : 5);
	while (i < end && isspace((unsigned char)s[i]))
		i++;
	if (i < end && s[i] == '(') { /* a .func's return parameters */
		size_t open = i;
		i = match_paren(s, end, i);
		if (!i)
			return rd_fail(r, start, "unbalanced parentheses in a function header");
		struct ptx_func rf = {0};
		int rc = parse_params(s + open + 1, i - open - 2, &rf);
		f->rets = rf.params, f->ret_cnt = rf.param_cnt; /* free_func frees them */
		if (rc)
			return rd_fail(r, open, "cannot read the return parameters");
		while (i < end && isspace((unsigned char)s[i]))
			i++;
	}
	size_t nb = i;
	while (i < end && is_ident(s[i]) && s[i] != '.')
		i++;
	if (i == nb)
		return rd_fail(r, start, "function without a name");
	f->name = strndup(s + nb, i - nb);
	while (i < end && isspace((unsigned char)s[i]))
		i++;
	if (i < end && s[i] == '(') {
		size_t close = match_paren(s, end, i);
		if (!close)
			return rd_fail(r, i, "unbalanced parentheses in a parameter list");
		if (parse_params(s + i + 1, close - i - 2, f))
			return rd_fail(r, i, "cannot read the parameter list");
	}
	return 0;
}

/* ---- bodies ---- */

/* Grows an array geometrically when count reaches a power of two (amortised O(1)). */
static void *grow(void *arr, uint32_t count, size_t elem)
{
	if (count & (count - 1) || count == 0) {
		if (count == 0)
			return realloc(arr, elem);
		return arr;
	}
	return realloc(arr, (size_t)count * 2 * elem);
}

static int add_insn(struct ptx_func *f, struct ptx_insn *in)
{
	struct ptx_insn *ni = grow(f->insns, f->insn_cnt, sizeof(*ni));
	if (!ni)
		return -1;
	f->insns = ni;
	f->insns[f->insn_cnt++] = *in;
	return 0;
}

static int add_reg(struct ptx_func *f, const char *type, const char *name)
{
	struct ptx_regdecl d = {0};
	snprintf(d.type, sizeof(d.type), "%s", type);
	const char *lt = strchr(name, '<');
	d.name = lt ? strndup(name, (size_t)(lt - name)) : strdup(name);
	d.count = lt ? (uint32_t)strtoul(lt + 1, NULL, 10) : 0;
	struct ptx_regdecl *nr = realloc(f->regs, (f->reg_cnt + 1) * sizeof(*nr));
	if (!d.name || !nr) {
		free(d.name);
		free(nr == f->regs ? NULL : nr);
		return -1;
	}
	f->regs = nr;
	f->regs[f->reg_cnt++] = d;
	return 0;
}

/* ".reg .b32 %r<5>, %x;" -> regs. */
static int parse_regdecl(const char *s, size_t n, struct ptx_func *f)
{
	char *txt = strndup(s, n), *save = NULL, type[12] = "";
	if (!txt)
		return -1;
	int rc = 0;
	for (char *tok = strtok_r(txt + 4, " \t\r\n,", &save); tok && !rc;
	     tok = strtok_r(NULL, " \t\r\n,", &save)) {
		if (tok[0] == '.' && strncmp(tok, ".v", 2))
			snprintf(type, sizeof(type), "%s", tok + 1);
		else if (tok[0] != '.')
			rc = add_reg(f, type, tok);
	}
	free(txt);
	return rc;
}

/* Splits operands at top-level commas. */
static int split_ops(const char *s, size_t n, struct ptx_insn *in)
{
	size_t start = 0;
	int depth = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && strchr("[({", s[i]))
			depth++;
		if (i < n && strchr("])}", s[i]))
			depth--;
		if (i == n || (s[i] == ',' && depth == 0)) {
			char *op = dup_trim(s + start, i - start);
			if (!op)
				return -1;
			if (!*op && i == n && in->op_cnt == 0) {
				free(op);
				break;
			}
			char **no = realloc(in->ops, (in->op_cnt + 1) * sizeof(*no));
			if (!no) {
				free(op);
				return -1;
			}
			in->ops = no;
			in->ops[in->op_cnt++] = op;
			start = i + 1;
		}
	}
	return 0;
}

static int parse_insn(struct rd *r, size_t off, size_t end, uint32_t depth, struct ptx_func *f)
{
	const char *s = r->s;
	struct ptx_insn in = {.off = off, .len = end + 1 - off, .depth = depth};
	size_t ls = off;
	while (ls > 0 && s[ls - 1] != '\n')
		ls--;
	in.line_off = ls;
	size_t i = off;
	if (s[i] == '@') {
		i++;
		if (i < end && s[i] == '!')
			in.pred_neg = true, i++;
		size_t b = i;
		while (i < end && is_ident(s[i]))
			i++;
		in.pred = strndup(s + b, i - b);
		while (i < end && isspace((unsigned char)s[i]))
			i++;
	}
	size_t ob = i;
	while (i < end && !isspace((unsigned char)s[i]) && s[i] != ';')
		i++;
	in.opcode = strndup(s + ob, i - ob);
	if (!in.opcode || split_ops(s + i, end - i, &in) || add_insn(f, &in)) {
		free(in.opcode);
		free(in.pred);
		return rd_fail(r, off, "out of memory");
	}
	return 0;
}

/* One statement inside a body at r->i.  Updates depth; returns 1 at the body's end. */
static int body_stmt(struct rd *r, struct ptx_func *f, uint32_t *depth, bool *decls_done)
{
	const char *s = r->s;
	size_t b = r->i;
	if (s[b] == '{') {
		(*depth)++;
		r->i++;
		return 0;
	}
	if (s[b] == '}') {
		r->i++;
		if (*depth == 0) {
			f->body_close = b;
			return 1;
		}
		(*depth)--;
		return 0;
	}
	size_t e = b;
	while (e < r->n && is_ident(s[e]) && s[e] != '.' && s[e] != '%')
		e++;
	size_t c = e;
	while (c < r->n && (s[c] == ' ' || s[c] == '\t'))
		c++;
	if (e > b && c < r->n && s[c] == ':') { /* label, or "name: .callprototype ..." */
		e = c;
		if (!*decls_done)
			f->first_insn_line = b, *decls_done = true;
		r->i = e + 1;
		return 0;
	}
	if (s[b] == '.' && line_directive(s + b, r->n - b)) {
		r->i = line_end(r, b);
		return 0;
	}
	size_t end = stmt_end(r, b, false);
	if (end >= r->n)
		return rd_fail(r, b, "statement without ';' in a function body");
	r->i = end + 1;
	if (s[b] == '.') {
		if (!strncmp(s + b, ".reg", 4) && isspace((unsigned char)s[b + 4]))
			return parse_regdecl(s + b, end - b, f) ? rd_fail(r, b, "out of memory") : 0;
		return 0; /* other declarations and directives: kept as they are */
	}
	if (!*decls_done)
		f->first_insn_line = b, *decls_done = true;
	return parse_insn(r, b, end, *depth, f);
}

static int parse_body(struct rd *r, struct ptx_func *f)
{
	uint32_t depth = 0;
	bool decls_done = false;
	r->i = f->body_open + 1;
	for (;;) {
		skip_ws(r);
		if (r->i >= r->n)
			return rd_fail(r, f->body_open, "function body without its closing '}'");
		int rc = body_stmt(r, f, &depth, &decls_done);
		if (rc < 0)
			return -1;
		if (rc == 1)
			break;
	}
	if (!decls_done)
		f->first_insn_line = f->body_close;
	return 0;
}

/* ---- module level ---- */

static void header_directive(struct ptx_module *m, const char *s, size_t n, size_t end)
{
	char val[64] = "";
	size_t l = strcspn(s, " \t");
	size_t k = l;
	while (k < n && (s[k] == ' ' || s[k] == '\t'))
		k++;
	snprintf(val, sizeof(val), "%.*s", (int)(n - k < 63 ? n - k : 63), s + k);
	val[strcspn(val, "\r\n/")] = 0;
	while (*val && isspace((unsigned char)val[strlen(val) - 1]))
		val[strlen(val) - 1] = 0;
	if (!strncmp(s, ".version", 8))
		snprintf(m->version, sizeof(m->version), "%s", val);
	else if (!strncmp(s, ".target", 7))
		snprintf(m->target, sizeof(m->target), "%s", val);
	else if (!strncmp(s, ".address_size", 13))
		m->address_size = (uint32_t)atoi(val);
	else
		return;
	m->header_end = end;
}

static int add_func(struct ptx_module *m, struct ptx_func *f)
{
	struct ptx_func *nf = realloc(m->funcs, (m->func_cnt + 1) * sizeof(*nf));
	if (!nf)
		return -1;
	m->funcs = nf;
	m->funcs[m->func_cnt++] = *f;
	return 0;
}

static void free_func(struct ptx_func *f)
{
	free(f->name);
	for (uint32_t i = 0; i < f->param_cnt; i++)
		free(f->params[i].name);
	free(f->params);
	for (uint32_t i = 0; i < f->ret_cnt; i++)
		free(f->rets[i].name);
	free(f->rets);
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		free(f->insns[i].pred);
		free(f->insns[i].opcode);
		for (uint32_t k = 0; k < f->insns[i].op_cnt; k++)
			free(f->insns[i].ops[k]);
		free(f->insns[i].ops);
	}
	free(f->insns);
	for (uint32_t i = 0; i < f->reg_cnt; i++)
		free(f->regs[i].name);
	free(f->regs);
}

static int module_func(struct rd *r, struct ptx_module *m, size_t b, size_t end, const char *kw,
		       bool is_entry)
{
	struct ptx_func f = {.is_entry = is_entry, .start = b};
	if (parse_header(r, b, end, kw, &f)) {
		free_func(&f);
		return -1;
	}
	if (end < r->n && r->s[end] == '{') {
		f.has_body = true;
		f.body_open = end;
		if (parse_body(r, &f)) {
			free_func(&f);
			return -1;
		}
	} else {
		r->i = end + 1;
	}
	if (add_func(m, &f)) {
		free_func(&f);
		return rd_fail(r, b, "out of memory");
	}
	return 0;
}

static int module_stmt(struct rd *r, struct ptx_module *m)
{
	const char *s = r->s;
	size_t b = r->i;
	if (s[b] == '.' && line_directive(s + b, r->n - b)) {
		size_t e = line_end(r, b);
		header_directive(m, s + b, e - b, e);
		r->i = e;
		return 0;
	}
	size_t end = stmt_end(r, b, true);
	const char *entry, *func;
	find_keywords(r, b, end, &entry, &func);
	if (entry)
		return module_func(r, m, b, end, entry, true);
	if (func)
		return module_func(r, m, b, end, func, false);
	if (end < r->n && s[end] == '{') { /* .section and other blocks */
		size_t close = match_brace(r, end);
		if (close >= r->n)
			return rd_fail(r, b, "block without its closing '}'");
		r->i = close + 1;
		return 0;
	}
	if (end >= r->n) {
		/* trailing text without ';': tolerated only if it is blank */
		return rd_fail(r, b, "statement without ';' at module level");
	}
	r->i = end + 1;
	return 0;
}

static atomic_ulong parses;

unsigned long ptx_parses(void)
{
	return atomic_load_explicit(&parses, memory_order_relaxed);
}

int ptx_parse(const char *text, size_t len, struct ptx_module **out, char *err, size_t errlen)
{
	atomic_fetch_add_explicit(&parses, 1, memory_order_relaxed);
	/* PTX taken from fatbins is often followed by NUL padding: the text ends at the first NUL */
	len = strnlen(text, len);
	struct ptx_module *m = calloc(1, sizeof(*m));
	if (!m || !(m->text = malloc(len + 1))) {
		free(m);
		ptx_seterr(err, errlen, "out of memory");
		return -1;
	}
	memcpy(m->text, text, len);
	m->text[len] = 0;
	if (!strstr(m->text, ".version") || !strstr(m->text, ".target")) {
		ptx_module_free(m);
		ptx_seterr(err, errlen, "not PTX: no .version or .target directive");
		return -1;
	}
	m->len = len;
	m->address_size = 64;
	struct rd r = {.s = m->text, .n = len, .err = err, .errlen = errlen};
	cubin_ptx_lex_start(&r.lx, m->text, len);
	for (;;) {
		skip_ws(&r);
		if (r.i >= r.n)
			break;
		if (module_stmt(&r, m)) {
			ptx_module_free(m);
			return -1;
		}
	}
	if (!m->version[0] || !m->target[0]) {
		ptx_module_free(m);
		ptx_seterr(err, errlen, "not PTX: no .version or .target directive");
		return -1;
	}
	*out = m;
	return 0;
}

void ptx_module_free(struct ptx_module *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < m->func_cnt; i++)
		free_func(&m->funcs[i]);
	free(m->funcs);
	free(m->text);
	free(m);
}

const struct ptx_func *ptx_find_func(const struct ptx_module *m, const char *name)
{
	for (uint32_t i = 0; i < m->func_cnt; i++)
		if (!strcmp(m->funcs[i].name, name) && m->funcs[i].has_body)
			return &m->funcs[i];
	for (uint32_t i = 0; i < m->func_cnt; i++)
		if (!strcmp(m->funcs[i].name, name))
			return &m->funcs[i];
	return NULL;
}
