/* See conf.h. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/ptx/conf.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *d = malloc(cap);
	size_t r;
	while (d && (r = fread(d + n, 1, cap - n - 1, f)) > 0) {
		n += r;
		if (n + 1 == cap) {
			char *nd = realloc(d, cap *= 2);
			if (!nd)
				free(d);
			d = nd;
		}
	}
	fclose(f);
	if (d) {
		d[n] = 0;
		if (len)
			*len = n;
	}
	return d;
}

/* Hex bytes separated by blanks into a new buffer. */
static uint8_t *hex_bytes(const char *s, const char *end, size_t *n)
{
	uint8_t *b = malloc((size_t)(end - s) / 2 + 1);
	*n = 0;
	while (b && s < end) {
		unsigned v;
		int used;
		if (sscanf(s, " %2x%n", &v, &used) != 1)
			break;
		b[(*n)++] = (uint8_t)v;
		s += used;
		while (s < end && (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t'))
			s++;
	}
	return b;
}

/* The text of section "-- name" in a .data file, up to the next section. */
static const char *section(const char *data, const char *name, const char **end)
{
	char key[64];
	snprintf(key, sizeof(key), "-- %s\n", name);
	const char *s = strstr(data, key);
	if (!s)
		return NULL;
	s += strlen(key);
	const char *e = strstr(s, "\n-- ");
	*end = e ? e + 1 : s + strlen(s);
	return s;
}

static int load_one(const char *dir, const char *name, struct conf_test *t, char *err,
		    size_t errlen)
{
	char path[1024];
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(path, sizeof(path), "%s/raw/%s.hex", dir, name);
	size_t len;
	char *hex = slurp(path, &len);
	snprintf(path, sizeof(path), "%s/tests/%s.data", dir, name);
	char *data = slurp(path, NULL);
	if (!hex || !data) {
		free(hex), free(data);
		snprintf(err, errlen, "cannot read %s", path);
		return -1;
	}
	size_t nb;
	uint8_t *code = hex_bytes(hex, hex + len, &nb);
	t->insns = (struct bpf_insn *)code;
	t->cnt = (uint32_t)(nb / 8);
	const char *e, *s = section(data, "mem", &e);
	t->mem = s ? hex_bytes(s, e, &t->mem_len) : NULL;
	s = section(data, "result", &e);
	int rc = 0;
	if (!s) {
		snprintf(err, errlen, "%s: no result", name);
		rc = -1;
	} else {
		t->expect = strtoull(s, NULL, 0);
	}
	free(hex);
	free(data);
	return rc;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

long conf_load(const char *dir, struct conf_test **out, char *err, size_t errlen)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/raw", dir);
	DIR *d = opendir(path);
	if (!d) {
		snprintf(err, errlen, "cannot open %s", path);
		return -1;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 5 || strcmp(de->d_name + l - 4, ".hex"))
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		names[n++] = strndup(de->d_name, l - 4);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	struct conf_test *t = calloc(n ? n : 1, sizeof(*t));
	long rc = (long)n;
	for (size_t i = 0; i < n; i++)
		if (rc >= 0 && load_one(dir, names[i], &t[i], err, errlen))
			rc = -1;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (rc < 0) {
		conf_free(t, n);
		return -1;
	}
	*out = t;
	return rc;
}

void conf_free(struct conf_test *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		free(t[i].insns);
		free(t[i].mem);
	}
	free(t);
}

static void dispatcher(struct conf_test *t, size_t first, size_t count, struct ptx_buf *out)
{
	/* thread t runs program first + t, for t < n: a harness can run any range alone */
	ptx_buf_printf(out, ".visible .entry cubpf_conformance(.param .u64 mems, .param .u64 lens,\n"
			    "\t.param .u64 results, .param .u32 n, .param .u32 first)\n{\n"
			    "\t.reg .b32 %%i<4>;\n\t.reg .b64 %%a<8>;\n\t.reg .pred %%q;\n"
			    "\tmov.u32 %%i0, %%ctaid.x;\n\tmov.u32 %%i1, %%ntid.x;\n"
			    "\tmov.u32 %%i2, %%tid.x;\n\tmad.lo.u32 %%i0, %%i0, %%i1, %%i2;\n"
			    "\tld.param.u32 %%i3, [n];\n\tsetp.ge.u32 %%q, %%i0, %%i3;\n"
			    "\t@%%q bra DONE;\n\tld.param.u32 %%i3, [first];\n"
			    "\tadd.u32 %%i0, %%i0, %%i3;\n"
			    "\tld.param.u64 %%a0, [mems];\n\tld.param.u64 %%a1, [lens];\n"
			    "\tld.param.u64 %%a2, [results];\n\tmul.wide.u32 %%a3, %%i0, 8;\n"
			    "\tadd.s64 %%a0, %%a0, %%a3;\n\tadd.s64 %%a1, %%a1, %%a3;\n"
			    "\tadd.s64 %%a2, %%a2, %%a3;\n"
			    "\tcvta.to.global.u64 %%a0, %%a0;\n\tcvta.to.global.u64 %%a1, %%a1;\n"
			    "\tcvta.to.global.u64 %%a2, %%a2;\n"
			    "\tld.global.u64 %%a4, [%%a0];\n\tld.global.u64 %%a5, [%%a1];\n"
			    "\tmov.u64 %%a6, 0xDEADBEEFDEADBEEF;\n");
	for (size_t i = 0; i < count; i++) {
		if (!t[first + i].compiled)
			continue;
		ptx_buf_printf(out, "\tsetp.eq.u32 %%q, %%i0, %zu;\n\t@%%q bra T%zu;\n", i, i);
	}
	ptx_buf_printf(out, "\tbra STORE;\n");
	for (size_t i = 0; i < count; i++) {
		if (!t[first + i].compiled)
			continue;
		ptx_buf_printf(out, "T%zu:\n\t{\n\t.param .b64 p0;\n\t.param .b64 p1;\n"
				    "\t.param .b64 rv;\n\tst.param.b64 [p0], %%a4;\n"
				    "\tst.param.b64 [p1], %%a5;\n\tcall (rv), conf_%zu, (p0, p1);\n"
				    "\tld.param.b64 %%a6, [rv];\n\t}\n\tbra STORE;\n", i, i);
	}
	ptx_buf_printf(out, "STORE:\n\tst.global.u64 [%%a2], %%a6;\nDONE:\n\tret;\n}\n");
}

int conf_module(struct conf_test *t, size_t first, size_t count, bool fold, struct ptx_buf *out)
{
	ptx_buf_printf(out, ".version 8.0\n.target sm_80\n.address_size 64\n\n");
	ptx_gen_module_decls(0, true, out);
	int ok = 0;
	for (size_t i = 0; i < count; i++) {
		struct conf_test *c = &t[first + i];
		struct ptx_prog p = {.name = c->name, .kind = VM_PROG_RAW, .insns = c->insns,
				     .insn_cnt = c->cnt};
		char fname[32];
		snprintf(fname, sizeof(fname), "conf_%zu", i);
		struct ptx_buf f = {0};
		c->compiled = ptx_gen_raw_func_opt(&p, NULL, 0, fname, fold, &f, c->error,
						   sizeof(c->error)) == 0;
		if (c->compiled) {
			ptx_buf_printf(out, "// %s\n", c->name);
			ptx_buf_append(out, f.data, f.len);
			ok++;
		}
		ptx_buf_free(&f);
	}
	dispatcher(t, first, count, out);
	return ok;
}

void conf_manifest(const struct conf_test *t, size_t n, FILE *f)
{
	for (size_t i = 0; i < n; i++) {
		if (!t[i].compiled) {
			fprintf(f, "X %s %s\n", t[i].name, t[i].error);
			continue;
		}
		fprintf(f, "T %zu %s %llx ", i, t[i].name, (unsigned long long)t[i].expect);
		for (size_t k = 0; k < t[i].mem_len; k++)
			fprintf(f, "%02x", t[i].mem[k]);
		fprintf(f, "%s\n", t[i].mem_len ? "" : "-");
	}
}
