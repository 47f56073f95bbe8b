/* tests/shell.h: for the cmocka tests that run the built programs and scripts (tests/ci,
 * tests/deps, tests/dist, tests/tools): a shell command's stdout and stderr into `out` (or into
 * a buffer of the output's own size: sh_alloc), and checks on it.
 * Include after <cmocka.h>; static, so each test program has its own copy. */
#ifndef CUBPF_TESTS_SHELL_H
#define CUBPF_TESTS_SHELL_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

__attribute__((unused)) static char out[1 << 17];

/* Runs a shell command (printf-style), its stdout and stderr into out; its exit status. */
__attribute__((unused, format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
	char cmd[8192] = "{ ";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd + 2, sizeof(cmd) - 2, fmt, ap);
	va_end(ap);
	size_t n = strlen(cmd);
	snprintf(cmd + n, sizeof(cmd) - n, "\n} 2>&1");
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs a shell command (printf-style) in a subshell; its stdout and stderr, whatever their
 * length, into *buf (caller frees); its exit status. */
__attribute__((unused, format(printf, 2, 3))) static int sh_alloc(char **buf, const char *fmt, ...)
{
	char cmd[16384] = "( ";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd + 2, sizeof(cmd) - 2, fmt, ap);
	va_end(ap);
	size_t n = strlen(cmd), cap = 4096;
	snprintf(cmd + n, sizeof(cmd) - n, " ) 2>&1");
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	n = 0;
	char *b = malloc(cap);
	assert_non_null(b);
	for (size_t r; (r = fread(b + n, 1, cap - n - 1, p)) > 0;)
		if ((n += r) == cap - 1)
			assert_non_null(b = realloc(b, cap *= 2));
	b[n] = '\0';
	int st = pclose(p);
	*buf = b;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

__attribute__((unused)) static void has(const char *needle)
{
	if (!strstr(out, needle))
		fail_msg("missing \"%s\" in:\n%s", needle, out);
}

__attribute__((unused)) static void lacks(const char *needle)
{
	if (strstr(out, needle))
		fail_msg("unexpected \"%s\" in:\n%s", needle, out);
}
#endif
