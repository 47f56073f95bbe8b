/* Growing text buffer for generated PTX.  Allocation failure is sticky (b->oom) so that
 * emitters need not check every call; the final consumer checks once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/internal.h"

static bool buf_reserve(struct ptx_buf *b, size_t extra)
{
	if (b->oom)
		return false;
	if (b->len + extra + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	char *d = realloc(b->data, cap);
	if (!d) {
		b->oom = true;
		return false;
	}
	b->data = d;
	b->cap = cap;
	return true;
}

void ptx_buf_append(struct ptx_buf *b, const char *s, size_t n)
{
	if (!buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = 0;
}

void ptx_buf_puts(struct ptx_buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

void ptx_buf_printf(struct ptx_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void ptx_buf_free(struct ptx_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void ptx_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
