/* PTX tokens: the one lexer of PTX text in cubpf.  cubin's entry listing (ptx.c) and the
 * rewriter's parser (ptx-rewriter/parse.c) both walk text with it, so that blanks, comments,
 * strings and token boundaries are read the same way everywhere.  It copies nothing: a token
 * points into the caller's text, and every read stays below the length it was given. */
#include <stdatomic.h>
#include <string.h>

#include "cubin/cubin.h"

static atomic_ulong passes;

unsigned long cubin_ptx_lexes(void)
{
	return atomic_load_explicit(&passes, memory_order_relaxed);
}

void cubin_ptx_lex_start(struct cubin_ptx_lexer *lx, const char *text, size_t len)
{
	atomic_fetch_add_explicit(&passes, 1, memory_order_relaxed);
	*lx = (struct cubin_ptx_lexer){.s = text, .n = len};
}

/* Character classes by table: the lexer runs over every byte of every module the application
 * loads, and a table lookup is cheaper than the <ctype.h> calls (and does not follow the
 * application's locale). */
enum { SPACE = 1, DIGIT = 2, IDENT = 4 };

static const unsigned char cls[256] = {
	[' '] = SPACE, ['\t'] = SPACE, ['\n'] = SPACE, ['\v'] = SPACE, ['\f'] = SPACE, ['\r'] = SPACE,
	['0' ... '9'] = DIGIT | IDENT, ['a' ... 'z'] = IDENT, ['A' ... 'Z'] = IDENT,
	['_'] = IDENT, ['$'] = IDENT,
};

static inline int ident_char(unsigned char c)
{
	return cls[c] & IDENT;
}

/* Past a comment starting at `at`, or `at` when none starts there. */
static size_t past_comment(const char *s, size_t n, size_t at)
{
	if (at + 1 >= n || s[at] != '/')
		return at;
	if (s[at + 1] == '/') {
		const char *nl = memchr(s + at, '\n', n - at);
		return nl ? (size_t)(nl - s) + 1 : n;
	}
	if (s[at + 1] != '*')
		return at;
	size_t i = at + 2;
	while (i + 1 < n && !(s[i] == '*' && s[i + 1] == '/'))
		i++;
	return i + 2 <= n ? i + 2 : n; /* an unclosed comment runs to the end */
}

void cubin_ptx_lex_skip(struct cubin_ptx_lexer *lx)
{
	while (lx->at < lx->n) {
		char c = lx->s[lx->at];
		if (cls[(unsigned char)c] & SPACE) {
			lx->at++;
			continue;
		}
		if (c != '/')
			return;
		size_t past = past_comment(lx->s, lx->n, lx->at);
		if (past == lx->at)
			return;
		lx->at = past;
	}
}

/* Length of the token at s (left > 0 bytes). */
static size_t token_len(const char *s, size_t left)
{
	size_t len = 1;
	if (*s == '"') { /* a backslash escapes the next character (.file "a\"b") */
		while (len < left && s[len] != '"')
			len += s[len] == '\\' ? 2 : 1;
		return len < left ? len + 1 : left;
	}
	if (cls[(unsigned char)*s] & DIGIT) {
		while (len < left && (ident_char((unsigned char)s[len]) || s[len] == '.'))
			len++;
	} else if (ident_char((unsigned char)*s) || *s == '.' || *s == '%') {
		while (len < left && ident_char((unsigned char)s[len]))
			len++;
	}
	return len;
}

int cubin_ptx_lex_next(struct cubin_ptx_lexer *lx, struct cubin_ptx_token *t)
{
	cubin_ptx_lex_skip(lx);
	if (lx->at >= lx->n)
		return 0;
	const char *s = lx->s + lx->at;
	size_t len = token_len(s, lx->n - lx->at);
	if (*s == '{')
		lx->depth++;
	else if (*s == '}' && lx->depth > 0)
		lx->depth--;
	t->p = s;
	t->len = len;
	lx->at += len;
	return 1;
}

int cubin_ptx_tok_is(const struct cubin_ptx_token *t, const char *word)
{
	return t->len == strlen(word) && !memcmp(t->p, word, t->len);
}
