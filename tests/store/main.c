/* test_store: the store/ library and the cubpf trace/cache commands. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/store/tests.h"

char *temp_dir(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/cubpf-store-XXXXXX", base && *base ? base : "/tmp");
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

void rm_tree(const char *dir)
{
	char cmd[4200];
	if (!dir || !strstr(dir, "/cubpf-store-") || strchr(dir, '\''))
		return; /* never anything but our own temp folders */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

uint8_t *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return p;
}

void spit(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, size, f), size);
	fclose(f);
}

/* Runs a shell command; returns its exit status and its output (stdout+stderr) in *out. */
int run(const char *cmd, char **out)
{
	char full[8192];
	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	FILE *f = popen(full, "r");
	assert_non_null(f);
	size_t cap = 1 << 16, n = 0, k;
	char *buf = malloc(cap);
	while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (cap - n < 4096)
			buf = realloc(buf, cap *= 2);
	}
	buf[n] = '\0';
	int st = pclose(f);
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void add(struct CMUnitTest *all, size_t *n, const struct CMUnitTest *t, size_t k)
{
	memcpy(all + *n, t, k * sizeof(*t));
	*n += k;
}

int main(void)
{
	size_t n = 0;
	alarm(600); /* a hang (a lock bug) fails the run instead of stalling everyone's make test */
	struct CMUnitTest *all =
		calloc(n_cache_tests + n_trace_tests + n_cli_tests + n_deps_tests, sizeof(*all));
	if (!all)
		return 1;
	add(all, &n, cache_tests, n_cache_tests);
	add(all, &n, trace_tests, n_trace_tests);
	add(all, &n, cli_tests, n_cli_tests);
	add(all, &n, deps_tests, n_deps_tests);
	int failed = _cmocka_run_group_tests("store", all, n, NULL, NULL);
	free(all);
	return failed ? 1 : 0;
}
