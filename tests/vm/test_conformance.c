/* The 313 bpf_conformance vectors on the interpreter (one test each, through vm_run_raw) and all
 * of them again through build/bin/cubpf-bpf-plugin, the suite's plugin protocol. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/vm/tests.h"

#define EXPECTED_VECTORS 313

struct vector {
	char name[128];
	uint8_t *code, *mem;
	size_t code_len, mem_len;
	uint64_t result;
	char *code_hex, *mem_hex;
};

/* Hex bytes separated by blanks into buf; returns the count. */
static size_t parse_hex(const char *s, uint8_t *buf, size_t cap)
{
	size_t n = 0;
	while (*s && n < cap) {
		char *end;
		unsigned long v = strtoul(s, &end, 16);
		if (end == s) {
			s++;
			continue;
		}
		buf[n++] = (uint8_t)v;
		s = end;
	}
	return n;
}

/* The text of section `-- name` of a .data file (comments removed), or NULL. */
static char *section(const char *text, const char *name)
{
	char marker[64];
	snprintf(marker, sizeof(marker), "-- %s", name);
	const char *p = strstr(text, marker);
	if (!p)
		return NULL;
	p = strchr(p, '\n');
	if (!p)
		return calloc(1, 1);
	const char *end = strstr(p, "\n--");
	size_t n = end ? (size_t)(end - p) : strlen(p);
	char *out = calloc(1, n + 1);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '#')
			while (i < n && p[i] != '\n')
				i++;
		if (i < n)
			out[o++] = p[i];
	}
	return out;
}

static char *to_hex(const uint8_t *b, size_t n)
{
	char *s = malloc(n * 2 + 1);
	for (size_t i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", b[i]);
	s[n * 2] = 0;
	return s;
}

static struct vector *load_vector(const char *dir, const char *name)
{
	char path[4096];
	size_t size;
	struct vector *v = calloc(1, sizeof(*v));
	snprintf(v->name, sizeof(v->name), "conformance/%.*s", (int)(strlen(name) - 5), name);
	snprintf(path, sizeof(path), "%s/tests/%s", dir, name);
	char *text = (char *)test_read_file(path, &size);
	snprintf(path, sizeof(path), "%s/raw/%.*s.hex", dir, (int)(strlen(name) - 5), name);
	char *raw = (char *)test_read_file(path, &size);
	if (!text || !raw) {
		free(text);
		free(raw);
		return v; /* code == NULL: the test fails saying so */
	}
	v->code = malloc(size / 2 + 8);
	v->code_len = parse_hex(raw, v->code, size / 2 + 8);
	char *mem = section(text, "mem"), *res = section(text, "result");
	if (mem) {
		v->mem = malloc(strlen(mem) / 2 + 8);
		v->mem_len = parse_hex(mem, v->mem, strlen(mem) / 2 + 8);
	}
	v->result = res ? strtoull(res + strspn(res, " \n\t"), NULL, 0) : 0;
	v->code_hex = to_hex(v->code, v->code_len);
	v->mem_hex = to_hex(v->mem ? v->mem : (uint8_t *)"", v->mem_len);
	free(mem);
	free(res);
	free(text);
	free(raw);
	return v;
}

static struct vector **vectors;
static size_t nvectors;

static void test_vector(void **state)
{
	struct vector *v = *state;
	char err[VM_ERRLEN];
	uint64_t r0 = 0;
	if (!v->code)
		fail_msg("%s: cannot read its .data or .hex file", v->name);
	uint8_t *mem = v->mem_len ? malloc(v->mem_len) : NULL;
	if (mem)
		memcpy(mem, v->mem, v->mem_len);
	int rc = vm_run_raw(v->code, v->code_len, mem, v->mem_len, &r0, err, sizeof(err));
	free(mem);
	if (rc != 0)
		fail_msg("%s: %s", v->name, err);
	if (r0 != v->result)
		fail_msg("%s: r0 = 0x%llx, expected 0x%llx", v->name, (unsigned long long)r0,
			 (unsigned long long)v->result);
}

static void test_vector_count(void **state)
{
	(void)state;
	if (nvectors != EXPECTED_VECTORS)
		fail_msg("found %zu vectors in %s/bpf_conformance/tests, expected %d", nvectors,
			 test_shared_dir(), EXPECTED_VECTORS);
}

static const char *plugin_path(void)
{
	static char path[1024];
	snprintf(path, sizeof(path), "%s/bin/cubpf-bpf-plugin", test_build_dir());
	return path;
}

/* Runs the plugin; returns its exit status and its stdout+stderr in out. */
static int run_plugin(const char *prog_hex, const char *args, char *out, size_t cap)
{
	char *cmd = malloc(strlen(prog_hex) + strlen(args) + 2048);
	sprintf(cmd, "echo '%s' | %s %s 2>&1", prog_hex, plugin_path(), args);
	FILE *p = popen(cmd, "r");
	free(cmd);
	assert_non_null(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_plugin_all(void **state)
{
	(void)state;
	size_t ok = 0;
	char out[512];
	if (!nvectors)
		fail_msg("no conformance vectors found");
	for (size_t i = 0; i < nvectors; i++) {
		struct vector *v = vectors[i];
		if (!v->code)
			continue;
		int rc = run_plugin(v->code_hex, v->mem_hex, out, sizeof(out));
		unsigned long long got = strtoull(out, NULL, 16);
		if (rc == 0 && got == v->result)
			ok++;
		else
			print_message("plugin %s: exit %d, output '%s', expected %llx\n", v->name, rc,
				      out, (unsigned long long)v->result);
	}
	assert_int_equal(ok, nvectors);
}

static void test_plugin_errors(void **state)
{
	(void)state;
	char out[512];
	/* r0 = exit: "b7 00 00 00 2a 00 00 00 95 ..." returns 42 */
	const char *prog = "b70000002a0000009500000000000000";
	/* gpu engine: runs where a driver is, says why not elsewhere; --ptx-out works either way */
	char args[1200];
	snprintf(args, sizeof(args), "--engine gpu --ptx-out %s/tests/plugin.ptx", test_build_dir());
	int rc = run_plugin(prog, args, out, sizeof(out));
	if (rc == 0)
		assert_string_equal(out, "2a\n");
	else
		assert_non_null(strstr(out, "gpu engine needs the CUDA driver"));
	snprintf(args, sizeof(args), "%s/tests/plugin.ptx", test_build_dir());
	size_t size;
	char *ptx = (char *)test_read_file(args, &size);
	assert_non_null(ptx);
	assert_non_null(strstr(ptx, ".visible .entry cubpf_plugin("));
	assert_non_null(strstr(ptx, "mov.b64 %__cb_r0, 42;"));
	free(ptx);
	assert_int_not_equal(run_plugin("zz", "", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "base16"));
	assert_int_equal(run_plugin(prog, "--bogus", out, sizeof(out)), 2);
	/* ldxdw r0, [r1+4096] with no memory: a clear fault, not a crash */
	assert_int_equal(run_plugin("79100010000000009500000000000000", "", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "out-of-bounds"));
	assert_int_equal(run_plugin("b70000002a0000009500000000000000", "", out, sizeof(out)), 0);
	assert_string_equal(out, "2a\n");
}

static void free_vectors(void)
{
	for (size_t i = 0; i < nvectors; i++) {
		free(vectors[i]->code);
		free(vectors[i]->mem);
		free(vectors[i]->code_hex);
		free(vectors[i]->mem_hex);
		free(vectors[i]);
	}
	free(vectors);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t conformance_tests(struct CMUnitTest *out, size_t cap)
{
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/bpf_conformance", test_shared_dir());
	char tdir[1100];
	snprintf(tdir, sizeof(tdir), "%s/tests", dir);
	DIR *d = opendir(tdir);
	char *names[1024];
	size_t nn = 0, n = 0;
	for (struct dirent *e; d && (e = readdir(d)) && nn < 1024;) {
		size_t l = strlen(e->d_name);
		if (l > 5 && !strcmp(e->d_name + l - 5, ".data"))
			names[nn++] = strdup(e->d_name);
	}
	if (d)
		closedir(d);
	qsort(names, nn, sizeof(names[0]), cmp_names);
	vectors = calloc(nn + 1, sizeof(*vectors));
	atexit(free_vectors);
	for (size_t i = 0; i < nn; i++) {
		vectors[nvectors++] = load_vector(dir, names[i]);
		free(names[i]);
	}
	out[n++] = (struct CMUnitTest){"conformance/count", test_vector_count, NULL, NULL, NULL};
	for (size_t i = 0; i < nvectors && n + 3 < cap; i++)
		out[n++] = (struct CMUnitTest){vectors[i]->name, test_vector, NULL, NULL, vectors[i]};
	out[n++] = (struct CMUnitTest){"conformance/plugin_all_vectors", test_plugin_all, NULL, NULL,
				       NULL};
	out[n++] = (struct CMUnitTest){"conformance/plugin_errors", test_plugin_errors, NULL, NULL,
				       NULL};
	return n;
}
