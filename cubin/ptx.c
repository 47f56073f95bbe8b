/* PTX header and kernel list: .version, .target, .address_size and every .entry with its
 * parameters.  The PTX lexer (lex.c) walks the text once; function bodies are skipped by brace
 * depth, so the cost is one pass over the bytes whatever the module's size. */
#include <ctype.h>
#include <stdlib.h>

#include "cubin/cubin.h"
#include "cubin/internal.h"

/* Short names for the lexer's calls, which this file makes on nearly every line. */
static inline int next(struct cubin_ptx_lexer *lx, struct cubin_ptx_token *t)
{
	return cubin_ptx_lex_next(lx, t);
}

static inline int tok_is(const struct cubin_ptx_token *t, const char *word)
{
	return cubin_ptx_tok_is(t, word);
}

static int is_ident(int c)
{
	return isalnum(c) || c == '_' || c == '$';
}

static uint64_t tok_number(const struct cubin_ptx_token *t)
{
	char buf[32];
	size_t n = t->len < sizeof(buf) - 1 ? t->len : sizeof(buf) - 1;
	memcpy(buf, t->p, n);
	buf[n] = 0;
	char *dot = strchr(buf, '.');
	if (dot)
		*dot = 0; /* "9.0" -> 9 */
	return strtoull(buf, NULL, 0);
}

/* Size in bytes of a PTX fundamental type directive, 0 when it is not one. */
static uint32_t type_size(const struct cubin_ptx_token *t)
{
	static const struct { const char *name; uint32_t size; } types[] = {
		{".b8", 1}, {".u8", 1}, {".s8", 1}, {".b16", 2}, {".u16", 2}, {".s16", 2},
		{".f16", 2}, {".bf16", 2}, {".b32", 4}, {".u32", 4}, {".s32", 4}, {".f32", 4},
		{".f16x2", 4}, {".bf16x2", 4}, {".b64", 8}, {".u64", 8}, {".s64", 8}, {".f64", 8},
		{".b128", 16}, {".pred", 1}, {".texref", 8}, {".samplerref", 8}, {".surfref", 8},
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (tok_is(t, types[i].name))
			return types[i].size;
	return 0;
}

struct ctx {
	struct cubin_ptx_lexer lx;
	struct cubin_kernels *out;
	size_t cap;
	char *err;
	size_t errlen;
};

#define PFAIL(c, ...) cubin_fail((c)->err, (c)->errlen, __VA_ARGS__)

static int line_of(const struct ctx *c)
{
	int line = 1;
	for (size_t i = 0; i < c->lx.at; i++)
		line += c->lx.s[i] == '\n';
	return line;
}

/* One ".param ... name[N]" up to the ',' or ')' that ends it (consumed, returned in *end). */
static int parse_param(struct ctx *c, struct cubin_kernel *k, struct cubin_ptx_token *end)
{
	struct cubin_ptx_token t;
	uint32_t size = 0, align = 0, count = 1;
	int is_ptr = 0, named = 0;
	while (next(&c->lx, &t)) {
		if (tok_is(&t, ",") || tok_is(&t, ")")) {
			*end = t;
			break;
		}
		if (tok_is(&t, ".ptr")) {
			is_ptr = 1;
		} else if (tok_is(&t, ".align")) {
			/* after .ptr it is the pointee's alignment (LLVM writes `.param .u64
			 * .ptr .global .align 1 p`): the parameter itself stays naturally aligned */
			if (!next(&c->lx, &t))
				break;
			if (!is_ptr)
				align = (uint32_t)tok_number(&t);
		} else if (type_size(&t)) {
			size = type_size(&t);
		} else if (tok_is(&t, "[")) {
			if (!next(&c->lx, &t))
				break;
			count = (uint32_t)tok_number(&t);
			if (!next(&c->lx, &t) || !tok_is(&t, "]"))
				return PFAIL(c, "PTX line %d: bad array parameter of %s", line_of(c), k->name);
		} else if (t.p[0] != '.') {
			named = 1;
		}
	}
	if (!size || !named || (!tok_is(end, ",") && !tok_is(end, ")")))
		return PFAIL(c, "PTX line %d: malformed parameter of .entry %s", line_of(c), k->name);
	struct cubin_param *p = realloc(k->params, (k->param_count + 1) * sizeof(*p));
	if (!p)
		return PFAIL(c, "out of memory");
	k->params = p;
	p += k->param_count++;
	p->align = align ? align : size;
	p->size = (uint32_t)((uint64_t)size * count > UINT32_MAX ? UINT32_MAX : size * count);
	p->offset = (k->param_bytes + p->align - 1) / p->align * p->align;
	p->is_pointer = is_ptr;
	k->param_bytes = p->offset + p->size;
	return 0;
}

static int parse_params(struct ctx *c, struct cubin_kernel *k)
{
	struct cubin_ptx_token t = {0};
	while (1) {
		if (!next(&c->lx, &t))
			return PFAIL(c, "PTX: parameter list of .entry %s is not closed", k->name);
		if (tok_is(&t, ")"))
			return 0; /* empty list */
		if (!tok_is(&t, ".param"))
			return PFAIL(c, "PTX line %d: expected .param in .entry %s", line_of(c), k->name);
		if (parse_param(c, k, &t))
			return -1;
		if (tok_is(&t, ")"))
			return 0;
	}
}

/* Performance directives between the parameter list and the body. */
static void parse_tuning(struct ctx *c, struct cubin_kernel *k)
{
	struct cubin_ptx_lexer save = c->lx;
	struct cubin_ptx_token t;
	while (next(&c->lx, &t) && !tok_is(&t, "{") && !tok_is(&t, ";")) {
		if (tok_is(&t, ".maxntid") || tok_is(&t, ".reqntid")) {
			int64_t prod = 1;
			while (next(&c->lx, &t) && isdigit((unsigned char)t.p[0])) {
				uint64_t v = tok_number(&t);
				/* Saturate: a damaged file must not overflow (the real limit is 1024). */
				prod = v > INT32_MAX || prod * (int64_t)v > INT32_MAX ? INT32_MAX
										  : prod * (int64_t)v;
				save = c->lx;
				if (!next(&c->lx, &t) || !tok_is(&t, ","))
					break;
			}
			k->max_threads = prod;
		}
		save = c->lx;
	}
	c->lx = save; /* leave '{' / ';' to the main loop, which tracks the depth */
}

static int parse_entry(struct ctx *c)
{
	struct cubin_ptx_token name, t;
	if (!next(&c->lx, &name) || !(is_ident((unsigned char)name.p[0]) || name.p[0] == '$'))
		return PFAIL(c, "PTX line %d: .entry without a name", line_of(c));
	struct cubin_kernels *out = c->out;
	if (out->count == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16;
		struct cubin_kernel *n = realloc(out->kernels, ncap * sizeof(*n));
		if (!n)
			return PFAIL(c, "out of memory");
		out->kernels = n;
		c->cap = ncap;
	}
	struct cubin_kernel *k = &out->kernels[out->count];
	memset(k, 0, sizeof(*k));
	k->registers = -1;
	k->shared_bytes = -1;
	k->stack_bytes = -1;
	k->max_threads = -1;
	if (!(k->name = strndup(name.p, name.len)))
		return PFAIL(c, "out of memory");
	out->count++;
	struct cubin_ptx_lexer save = c->lx;
	if (next(&c->lx, &t) && tok_is(&t, "(")) {
		if (parse_params(c, k))
			return -1;
	} else {
		c->lx = save;
	}
	parse_tuning(c, k);
	return 0;
}

static void parse_target(struct ctx *c)
{
	struct cubin_ptx_token t;
	struct cubin_ptx_lexer save = c->lx;
	size_t used = 0;
	while (next(&c->lx, &t) && (t.p[0] != '.' || t.len == 1) && c->lx.depth == 0) {
		if (tok_is(&t, ","))
			goto keep;
		if (!c->out->sm && (t.len > 3 && (!memcmp(t.p, "sm_", 3) ||
						  (t.len > 8 && !memcmp(t.p, "compute_", 8))))) {
			const char *d = t.p + (t.p[0] == 's' ? 3 : 8), *e = t.p + t.len;
			uint32_t sm = 0;
			while (d < e && isdigit((unsigned char)*d))
				sm = sm * 10 + (uint32_t)(*d++ - '0');
			c->out->sm = sm;
			c->out->suffix = d < e && (*d == 'a' || *d == 'f') ? *d : 0;
		}
		if (used + t.len + 2 < sizeof(c->out->target)) {
			if (used)
				c->out->target[used++] = ',';
			memcpy(c->out->target + used, t.p, t.len);
			used += t.len;
			c->out->target[used] = 0;
		}
keep:
		save = c->lx;
	}
	c->lx = save;
}

static int parse_top(struct ctx *c)
{
	struct cubin_ptx_token t;
	int have_version = 0;
	while (next(&c->lx, &t)) {
		if (c->lx.depth > 0 || t.p[0] == '}')
			continue; /* inside a body: skipped */
		if (tok_is(&t, ".version")) {
			if (!next(&c->lx, &t) || !isdigit((unsigned char)t.p[0]))
				return PFAIL(c, "PTX line %d: .version without a number", line_of(c));
			/* Digits of the token only: the text need not be NUL-terminated. */
			const char *dot = memchr(t.p, '.', t.len);
			struct cubin_ptx_token minor = {dot ? dot + 1 : t.p + t.len,
							dot ? t.len - (size_t)(dot + 1 - t.p) : 0};
			c->out->ptx_major = (uint16_t)tok_number(&t);
			c->out->ptx_minor = (uint16_t)tok_number(&minor);
			have_version = 1;
		} else if (tok_is(&t, ".target")) {
			parse_target(c);
		} else if (tok_is(&t, ".address_size")) {
			if (next(&c->lx, &t))
				c->out->address_size = (uint16_t)tok_number(&t);
		} else if (tok_is(&t, ".entry")) {
			if (parse_entry(c))
				return -1;
		}
	}
	if (!have_version || !c->out->sm)
		return PFAIL(c, "not PTX: no %s directive", have_version ? ".target sm_NN" : ".version");
	return 0;
}

int cubin_ptx_kernels(const char *text, size_t len, struct cubin_kernels *out, char *err,
		      size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!text)
		return cubin_fail(err, errlen, "not PTX: no text");
	const char *nul = memchr(text, 0, len);
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	cubin_ptx_lex_start(&c.lx, text, nul ? (size_t)(nul - text) : len);
	out->address_size = 32; /* the PTX ISA default when .address_size is absent */
	if (parse_top(&c)) {
		cubin_kernels_free(out);
		return -1;
	}
	return 0;
}
