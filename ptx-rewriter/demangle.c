/* A small Itanium C++ demangler for kernel names, and kernel-name globbing.  It covers what
 * nvcc emits for __global__ functions: namespaces and classes, templates with type and literal
 * arguments, builtin types, pointers, references, cv-qualifiers, vector types and
 * substitutions.  The return type of function templates is not printed ("f<int>(int*)"), so a
 * glob on the name works the same for templates and plain functions. */
#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/internal.h"

#define DM_MAX_SUBS 64
#define DM_STR 512

struct dm {
	const char *p;
	bool bad;
	char subs[DM_MAX_SUBS][DM_STR];
	int nsubs;
	char targs[16][DM_STR];
	int ntargs;
};

static void cat(char *d, const char *s)
{
	size_t l = strlen(d);
	snprintf(d + l, DM_STR - l, "%s", s);
}

static void add_sub(struct dm *m, const char *s)
{
	if (m->nsubs >= DM_MAX_SUBS)
		return;
	size_t l = strnlen(s, DM_STR - 1);
	memmove(m->subs[m->nsubs], s, l);
	m->subs[m->nsubs++][l] = 0;
}

static int dm_type(struct dm *m, char *out);

static int source_name(struct dm *m, char *out)
{
	if (!isdigit((unsigned char)*m->p))
		return -1;
	char *end;
	long n = strtol(m->p, &end, 10);
	if (n <= 0 || (long)strnlen(end, (size_t)n) < n || n >= DM_STR)
		return -1;
	char id[DM_STR];
	memcpy(id, end, (size_t)n);
	id[n] = 0;
	m->p = end + n;
	if (!strncmp(id, "_GLOBAL__N", 10))
		snprintf(id, sizeof(id), "(anonymous namespace)");
	cat(out, id);
	return 0;
}

static int seq_id(struct dm *m, char term, long *v)
{
	*v = 0;
	if (*m->p == term) {
		m->p++;
		return 0;
	}
	long x = 0;
	while (isdigit((unsigned char)*m->p) || isupper((unsigned char)*m->p)) {
		x = x * 36 + (isdigit((unsigned char)*m->p) ? *m->p - '0' : *m->p - 'A' + 10);
		m->p++;
	}
	if (*m->p != term)
		return -1;
	m->p++;
	*v = x + 1;
	return 0;
}

static int substitution(struct dm *m, char *out)
{
	m->p++; /* S */
	static const struct { char c; const char *s; } std[] = {
		{'t', "std"}, {'a', "std::allocator"}, {'b', "std::basic_string"},
		{'s', "std::string"}, {'i', "std::istream"}, {'o', "std::ostream"},
		{'d', "std::iostream"},
	};
	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (*m->p == std[i].c) {
			m->p++;
			cat(out, std[i].s);
			return 0;
		}
	long v;
	if (seq_id(m, '_', &v) || v >= m->nsubs)
		return -1;
	cat(out, m->subs[v]);
	return 0;
}

static int template_args(struct dm *m, char *out, bool record)
{
	m->p++; /* I */
	cat(out, "<");
	if (record)
		m->ntargs = 0;
	bool first = true;
	while (*m->p && *m->p != 'E') {
		char a[DM_STR] = "";
		if (*m->p == 'L') {
			m->p++;
			char t[DM_STR] = "";
			if (dm_type(m, t))
				return -1;
			const char *b = m->p;
			while (*m->p && *m->p != 'E')
				m->p++;
			if (!*m->p)
				return -1;
			bool neg = *b == 'n';
			snprintf(a, sizeof(a), "%s%.*s", neg ? "-" : "", (int)(m->p - b - neg), b + neg);
			if (!strcmp(t, "bool"))
				snprintf(a, sizeof(a), "%s", b[0] == '1' ? "true" : "false");
			else if (strcmp(t, "int"))
				snprintf(a + strlen(a), sizeof(a) - strlen(a), "%s",
					 !strcmp(t, "unsigned int") ? "u" : !strcmp(t, "long") ? "l"
					 : !strcmp(t, "unsigned long") ? "ul" : "");
			m->p++;
		} else if (dm_type(m, a)) {
			return -1;
		}
		if (record && m->ntargs < 16)
			snprintf(m->targs[m->ntargs++], DM_STR, "%s", a);
		if (!first)
			cat(out, ", ");
		cat(out, a);
		first = false;
	}
	if (*m->p != 'E')
		return -1;
	m->p++;
	cat(out, out[strlen(out) - 1] == '>' ? " >" : ">");
	return 0;
}

/* N [K|V|r]* components E; returns whether the last component had template args. */
static int nested_name(struct dm *m, char *out, bool *templated)
{
	m->p++; /* N */
	while (*m->p == 'K' || *m->p == 'V' || *m->p == 'r')
		m->p++;
	char cur[DM_STR] = "";
	*templated = false;
	while (*m->p && *m->p != 'E') {
		if (*m->p == 'I') {
			if (template_args(m, cur, true))
				return -1;
			*templated = true;
		} else {
			if (cur[0])
				cat(cur, "::");
			*templated = false;
			if (*m->p == 'S') {
				if (substitution(m, cur))
					return -1;
				continue;
			}
			if (source_name(m, cur))
				return -1;
		}
		if (*m->p != 'E')
			add_sub(m, cur);
	}
	if (*m->p != 'E')
		return -1;
	m->p++;
	cat(out, cur);
	return 0;
}

static const char *builtin(char c)
{
	static const char *const names[26] = {
		['a' - 'a'] = "signed char", ['b' - 'a'] = "bool", ['c' - 'a'] = "char",
		['d' - 'a'] = "double", ['e' - 'a'] = "long double", ['f' - 'a'] = "float",
		['g' - 'a'] = "__float128", ['h' - 'a'] = "unsigned char", ['i' - 'a'] = "int",
		['j' - 'a'] = "unsigned int", ['l' - 'a'] = "long", ['m' - 'a'] = "unsigned long",
		['n' - 'a'] = "__int128", ['o' - 'a'] = "unsigned __int128", ['s' - 'a'] = "short",
		['t' - 'a'] = "unsigned short", ['v' - 'a'] = "void", ['w' - 'a'] = "wchar_t",
		['x' - 'a'] = "long long", ['y' - 'a'] = "unsigned long long", ['z' - 'a'] = "...",
	};
	return c >= 'a' && c <= 'z' ? names[c - 'a'] : NULL;
}

static int d_builtin(struct dm *m, char *out)
{
	static const struct { const char *code, *name; } d[] = {
		{"Dh", "__half"}, {"Dn", "decltype(nullptr)"}, {"Ds", "char16_t"},
		{"Di", "char32_t"}, {"Du", "char8_t"}, {"DF16_", "_Float16"},
	};
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (!strncmp(m->p, d[i].code, strlen(d[i].code))) {
			m->p += strlen(d[i].code);
			cat(out, d[i].name);
			return 0;
		}
	return -1;
}

static int qualified(struct dm *m, char *out)
{
	char q = *m->p++;
	char inner[DM_STR] = "";
	if (dm_type(m, inner))
		return -1;
	const char *suffix = q == 'P' ? "*" : q == 'R' ? "&" : q == 'O' ? "&&"
			   : q == 'K' ? " const" : q == 'V' ? " volatile" : " restrict";
	cat(inner, suffix);
	add_sub(m, inner);
	cat(out, inner);
	return 0;
}

static int dm_type(struct dm *m, char *out)
{
	char c = *m->p;
	if (!c)
		return -1;
	if (builtin(c) && c != 'u') {
		m->p++;
		cat(out, builtin(c));
		return 0;
	}
	if (c == 'D')
		return d_builtin(m, out);
	if (strchr("PROKVr", c))
		return qualified(m, out);
	if (c == 'T') {
		m->p++;
		long v;
		if (seq_id(m, '_', &v) || v >= m->ntargs)
			return -1;
		cat(out, m->targs[v]);
		add_sub(m, m->targs[v]);
		return 0;
	}
	char name[DM_STR] = "";
	bool templated = false;
	if (c == 'S') {
		if (substitution(m, name))
			return -1;
		if (*m->p == 'I') {
			if (template_args(m, name, false))
				return -1;
			add_sub(m, name);
		}
		cat(out, name);
		return 0;
	}
	if (c == 'N') {
		if (nested_name(m, name, &templated))
			return -1;
	} else if (isdigit((unsigned char)c)) {
		if (source_name(m, name))
			return -1;
		add_sub(m, name);
		if (*m->p == 'I') {
			if (template_args(m, name, false))
				return -1;
			add_sub(m, name);
		}
	} else {
		return -1;
	}
	cat(out, name);
	add_sub(m, name);
	return 0;
}

/* Function name: nested, std::, or plain (with template args). */
static int function_name(struct dm *m, char *out, bool *templated)
{
	*templated = false;
	if (*m->p == 'N')
		return nested_name(m, out, templated);
	if (!strncmp(m->p, "St", 2)) {
		m->p += 2;
		cat(out, "std::");
	}
	if (source_name(m, out))
		return -1;
	if (*m->p == 'I') {
		add_sub(m, out);
		*templated = true;
		return template_args(m, out, true);
	}
	return 0;
}

int ptx_demangle(const char *mangled, char *out, size_t outlen)
{
	if (!mangled || !out || !outlen)
		return -1;
	if (strncmp(mangled, "_Z", 2)) {
		snprintf(out, outlen, "%s", mangled);
		return 0;
	}
	struct dm *m = calloc(1, sizeof(*m));
	if (!m)
		return -1;
	m->p = mangled + 2;
	char res[DM_STR] = "";
	bool templated;
	int rc = function_name(m, res, &templated);
	if (!rc && templated && *m->p) { /* return type of a function template: not printed */
		char ret[DM_STR] = "";
		rc = dm_type(m, ret);
	}
	if (!rc) {
		cat(res, "(");
		bool first = true;
		if (!strcmp(m->p, "v"))
			m->p++;
		while (!rc && *m->p) {
			if (!first)
				cat(res, ", ");
			rc = dm_type(m, res);
			first = false;
		}
		cat(res, ")");
	}
	if (!rc && strlen(res) + 1 < outlen && strlen(res) < DM_STR - 1)
		snprintf(out, outlen, "%s", res);
	else
		rc = -1;
	free(m);
	return rc;
}

bool ptx_kernel_matches(const char *glob, const char *mangled)
{
	if (!glob || !*glob || !strcmp(glob, "*"))
		return true;
	if (!fnmatch(glob, mangled, 0))
		return true;
	char d[DM_STR];
	if (ptx_demangle(mangled, d, sizeof(d)))
		return false;
	if (!fnmatch(glob, d, 0))
		return true;
	char *paren = strchr(d, '(');
	if (paren) {
		/* the name without its parameter list ("ns::f<int>") */
		*paren = 0;
		if (!fnmatch(glob, d, 0))
			return true;
	}
	return false;
}
