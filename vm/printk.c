/* bpf_trace_printk's format grammar, the one description its three readers share: the verifier
 * counts and types the arguments with vm_printk_parse, the host helper formats with
 * vm_printk_format, and the PTX code generator packs vprintf's arguments from the same parse.
 * Before, each had its own scanner and they disagreed ("%16lx" converted nothing for the
 * verifier and one argument for the GPU, which then printed a register nobody checked).  The
 * grammar is a strict subset of C's printf, so CUDA's vprintf reads exactly what it says. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "vm/internal.h"

struct pscan {
	const char *f;
	size_t n;              /* bytes before the NUL or the bound */
	size_t i;
	uint32_t *errpos;
	char *err;
	size_t errlen;
};

static int perr(struct pscan *s, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int perr(struct pscan *s, size_t at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (s->err && s->errlen)
		vsnprintf(s->err, s->errlen, fmt, ap);
	va_end(ap);
	if (s->errpos)
		*s->errpos = (uint32_t)at;
	return -1;
}

static uint8_t flag_bit(char c)
{
	switch (c) {
	case '#': return VM_PF_ALT;
	case '0': return VM_PF_ZERO;
	case '-': return VM_PF_LEFT;
	case '+': return VM_PF_PLUS;
	case ' ': return VM_PF_SPACE;
	default: return 0;
	}
}

/* A decimal field (width or precision): -1 when absent.  '*' would make vprintf read an
 * argument the count does not include. */
static int number(struct pscan *s, int *val, const char *what)
{
	size_t at = s->i;
	*val = -1;
	if (s->i < s->n && s->f[s->i] == '*')
		return perr(s, at, "'*' %s: the %s must be written in the format", what, what);
	int v = 0;
	while (s->i < s->n && s->f[s->i] >= '0' && s->f[s->i] <= '9') {
		v = v * 10 + (s->f[s->i++] - '0');
		if (v > VM_PRINTK_MAX_WIDTH)
			return perr(s, at, "%s above %d", what, VM_PRINTK_MAX_WIDTH);
	}
	if (s->i > at)
		*val = v;
	return 0;
}

static uint8_t length_mod(struct pscan *s)
{
	const char *f = s->f + s->i;
	size_t left = s->n - s->i;
	if (left >= 2 && f[0] == 'h' && f[1] == 'h')
		return s->i += 2, VM_PL_HH;
	if (left >= 2 && f[0] == 'l' && f[1] == 'l')
		return s->i += 2, VM_PL_LL;
	if (left >= 1 && f[0] == 'h')
		return s->i += 1, VM_PL_H;
	if (left >= 1 && f[0] == 'l')
		return s->i += 1, VM_PL_L;
	return VM_PL_NONE;
}

/* Which parts each conversion takes (C leaves the others undefined; vprintf may differ). */
static int check_conv(struct pscan *s, size_t at, const struct vm_printk_conv *c)
{
	bool integer = strchr("diuxX", c->conv) != NULL;
	if (!integer && c->length != VM_PL_NONE)
		return perr(s, at, "a length modifier on %%%c", c->conv);
	if (!integer && (c->flags & ~VM_PF_LEFT))
		return perr(s, at, "flags other than '-' on %%%c", c->conv);
	if ((c->flags & VM_PF_ALT) && c->conv != 'x' && c->conv != 'X')
		return perr(s, at, "'#' on %%%c (only %%x and %%X take it)", c->conv);
	if (c->prec >= 0 && (c->conv == 'c' || c->conv == 'p'))
		return perr(s, at, "a precision on %%%c", c->conv);
	return 0;
}

/* One spec from its '%' (s->i) to its conversion; *c filled, or nothing for %%. */
static int spec(struct pscan *s, struct vm_printk_conv *c, bool *is_conv)
{
	size_t at = s->i++;
	*is_conv = false;
	if (s->i < s->n && s->f[s->i] == '%') {
		s->i++;
		return 0;
	}
	memset(c, 0, sizeof(*c));
	c->pos = (uint32_t)at;
	c->width = c->prec = -1;
	for (uint8_t b; s->i < s->n && (b = flag_bit(s->f[s->i])); s->i++)
		c->flags |= b;
	if (number(s, &c->width, "width") < 0)
		return -1;
	if (s->i < s->n && s->f[s->i] == '.') {
		s->i++;
		if (number(s, &c->prec, "precision") < 0)
			return -1;
		if (c->prec < 0)
			c->prec = 0; /* "%.d": C reads it as precision 0 */
	}
	size_t lat = s->i;
	c->length = length_mod(s);
	/* CUDA's vprintf misreads 'hh' (on an H100 "%-5hhd" of -5 printed a byte of the format
	 * itself, 99): the one grammar leaves it out, so no engine is asked to print it */
	if (c->length == VM_PL_HH)
		return perr(s, lat, "'hh' is not a printk length modifier (h l ll are; CUDA's "
			    "printf misreads hh)");
	if (s->i >= s->n)
		return perr(s, at, "the conversion at the end of the format is incomplete");
	char ch = s->f[s->i];
	if (!strchr("diuxXcsp", ch) || !ch)
		return perr(s, s->i, "'%%%c' is not a printk conversion (d i u x X c s p)", ch);
	c->conv = ch;
	c->size = (c->length >= VM_PL_L || ch == 's' || ch == 'p') ? 8 : 4;
	c->len = (uint32_t)(++s->i - at);
	*is_conv = true;
	return check_conv(s, at, c);
}

int vm_printk_parse(const char *fmt, size_t bound, struct vm_printk_fmt *out, uint32_t *errpos,
		    char *err, size_t errlen)
{
	const char *nul = memchr(fmt, 0, bound);
	struct pscan s = {fmt, nul ? (size_t)(nul - fmt) : bound, 0, errpos, err, errlen};
	memset(out, 0, sizeof(*out));
	out->len = (uint32_t)s.n;
	if (err && errlen)
		err[0] = 0;
	while (s.i < s.n) {
		if (fmt[s.i] != '%') {
			s.i++;
			continue;
		}
		struct vm_printk_conv c;
		bool is_conv;
		size_t at = s.i;
		if (spec(&s, &c, &is_conv) < 0)
			return -1;
		if (!is_conv)
			continue;
		if (out->nconv == VM_PRINTK_MAX_ARGS)
			return perr(&s, at, "more than %d conversions", VM_PRINTK_MAX_ARGS);
		out->conv[out->nconv++] = c;
	}
	return 0;
}

/* C's spec for one conversion of a value already cut to its length ("%-08llx"). */
static void c_spec(const struct vm_printk_conv *c, char *spec, size_t cap, const char *len,
		   char conv)
{
	int n = snprintf(spec, cap, "%%%s%s%s%s%s", c->flags & VM_PF_ALT ? "#" : "",
			 c->flags & VM_PF_ZERO ? "0" : "", c->flags & VM_PF_LEFT ? "-" : "",
			 c->flags & VM_PF_PLUS ? "+" : "", c->flags & VM_PF_SPACE ? " " : "");
	if (c->width >= 0)
		n += snprintf(spec + n, cap - (size_t)n, "%d", c->width);
	if (c->prec >= 0)
		n += snprintf(spec + n, cap - (size_t)n, ".%d", c->prec);
	snprintf(spec + n, cap - (size_t)n, "%s%c", len, conv);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral" /* the spec is built from the parse */
static int one(char *out, size_t cap, const struct vm_printk_conv *c, uint64_t v)
{
	char spec[40];
	bool sgn = c->conv == 'd' || c->conv == 'i';
	switch (c->conv) {
	case 'c':
		c_spec(c, spec, sizeof(spec), "", 'c');
		return snprintf(out, cap, spec, (int)(unsigned char)v);
	case 's':
		c_spec(c, spec, sizeof(spec), "", 's');
		return snprintf(out, cap, spec, "(str)");
	case 'p': {
		char hex[24];
		snprintf(hex, sizeof(hex), "0x%" PRIx64, v);
		c_spec(c, spec, sizeof(spec), "", 's');
		return snprintf(out, cap, spec, hex);
	}
	}
	switch (c->length) { /* the value as vprintf would see it after C's conversions */
	case VM_PL_HH: v = sgn ? (uint64_t)(int64_t)(int8_t)v : (uint8_t)v; break;
	case VM_PL_H: v = sgn ? (uint64_t)(int64_t)(int16_t)v : (uint16_t)v; break;
	case VM_PL_NONE: v = sgn ? (uint64_t)(int64_t)(int32_t)v : (uint32_t)v; break;
	default: break;
	}
	c_spec(c, spec, sizeof(spec), "ll", c->conv);
	return sgn ? snprintf(out, cap, spec, (long long)v) : snprintf(out, cap, spec,
								   (unsigned long long)v);
}
#pragma GCC diagnostic pop

static size_t put(char *out, size_t cap, size_t o, const char *src, size_t n)
{
	if (o + 1 >= cap)
		return o;
	if (n > cap - 1 - o)
		n = cap - 1 - o;
	memcpy(out + o, src, n);
	return o + n;
}

size_t vm_printk_format(char *out, size_t cap, const char *fmt, size_t bound,
			const uint64_t args[VM_PRINTK_MAX_ARGS])
{
	struct vm_printk_fmt pf;
	size_t o = 0, from = 0;
	if (!cap)
		return 0;
	if (vm_printk_parse(fmt, bound, &pf, NULL, NULL, 0) < 0) {
		o = put(out, cap, 0, fmt, strnlen(fmt, bound)); /* refused: nothing converted */
		out[o] = 0;
		return o;
	}
	for (uint32_t k = 0; k <= pf.nconv; k++) {
		size_t to = k < pf.nconv ? pf.conv[k].pos : pf.len;
		/* the literal text between conversions, %% as one % */
		for (size_t i = from; i < to; i++) {
			o = put(out, cap, o, &fmt[i], 1);
			if (fmt[i] == '%' && i + 1 < to && fmt[i + 1] == '%')
				i++;
		}
		if (k == pf.nconv)
			break;
		char tmp[160];
		int n = one(tmp, sizeof(tmp), &pf.conv[k], args[k]);
		o = put(out, cap, o, tmp, n > 0 ? (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1
						: 0);
		from = pf.conv[k].pos + pf.conv[k].len;
	}
	out[o] = 0;
	return o;
}
