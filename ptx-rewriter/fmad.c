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
#include <stdlib.h>
#include <string.h>

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
