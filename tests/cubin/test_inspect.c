/* `cubpf inspect` as users run it: table, JSON (checked by a small validating parser), exit
 * status and the one-line error on damaged or unknown input. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cubin/fixtures.h"

/* Runs `cubpf ARGS`; returns its exit status, stdout in *out, stderr in *err (malloc'd). */
static int run_cubpf(const char *args, char **out, char **err)
{
	const char *build = getenv("CUBPF_BUILD");
	const char *fix = getenv("CUBPF_FIXTURES");
	char cmd[4096], errpath[] = "/tmp/cubpf-inspect-XXXXXX";
	int fd = mkstemp(errpath);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "cd %s/cubin && %s/bin/cubpf %s 2>%s", fix && *fix ? fix : "build/fixtures",
		 build && *build ? build : "$PWD/build", args, errpath);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
		if ((len += n) + 1 == cap)
			buf = realloc(buf, cap *= 2);
	buf[len] = 0;
	int st = pclose(p);
	*out = buf;
	size_t elen;
	*err = (char *)read_file_or_fail(errpath, &elen);
	*err = realloc(*err, elen + 1);
	(*err)[elen] = 0;
	remove(errpath);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- a minimal JSON validator (RFC 8259 structure; numbers loosely) ------------------------- */
static const char *json_value(const char *p);
static const char *ws(const char *p) { while (*p && isspace((unsigned char)*p)) p++; return p; }
static const char *json_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (; *p && *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\' && !*++p)
			return NULL;
	}
	return *p == '"' ? p + 1 : NULL;
}
static const char *json_seq(const char *p, char close, int object)
{
	p = ws(p + 1);
	if (*p == close)
		return p + 1;
	while (p) {
		if (object) {
			p = json_string(ws(p));
			if (!p || *(p = ws(p)) != ':')
				return NULL;
			p++;
		}
		p = json_value(p);
		if (!p)
			return NULL;
		p = ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
	return NULL;
}
static const char *json_value(const char *p)
{
	p = ws(p);
	if (*p == '{')
		return json_seq(p, '}', 1);
	if (*p == '[')
		return json_seq(p, ']', 0);
	if (*p == '"')
		return json_string(p);
	if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	const char *s = p;
	if (*p == '-')
		p++;
	while (isdigit((unsigned char)*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')
		p++;
	return p > s ? p : NULL;
}
static int json_valid(const char *text)
{
	const char *end = json_value(text);
	return end && !*ws(end);
}

static void table(void **s)
{
	(void)s;
	size_t n;
	free(fixture("app", &n)); /* fails with the reason when the fixture is missing */
	char *out, *err;
	assert_int_equal(run_cubpf("inspect app kernels.ptx", &out, &err), 0);
	assert_non_null(strstr(out, "app: host ELF"));
	assert_non_null(strstr(out, "kernels.ptx: PTX"));
	assert_non_null(strstr(out, "cubin_block_sum"));
	assert_non_null(strstr(out, "cubin_mixed(Pair, char, short, long*)")); /* demangled */
	assert_non_null(strstr(out, "sm_80,sm_90"));
	assert_non_null(strstr(out, "compute_90"));
	assert_string_equal(err, "");
	free(out);
	free(err);
	assert_int_equal(run_cubpf("inspect --mangled --sm 80 sass_only.fatbin", &out, &err), 0);
	assert_non_null(strstr(out, "_Z11cubin_mixed4PaircsPl"));
	assert_non_null(strstr(out, "PTX usable on sm_80 for 0 of them"));
	assert_non_null(strstr(out, "cannot be instrumented at PTX level"));
	free(out);
	free(err);
}

static void json(void **s)
{
	(void)s;
	size_t n;
	free(fixture("rdc_app", &n));
	char *out, *err;
	assert_int_equal(run_cubpf("inspect --json rdc_app multi.fatbin kernels.cubin kernels.ptx libkernels.so", &out, &err), 0);
	if (!json_valid(out))
		fail_msg("invalid JSON:\n%.2000s", out);
	assert_non_null(strstr(out, "\"path\":\"rdc_app\""));
	assert_non_null(strstr(out, "\"section\":\"__nv_relfatbin\""));
	assert_non_null(strstr(out, "\"arch\":\"sm_90a\""));
	assert_non_null(strstr(out, "\"arch\":\"sm_100f\""));
	assert_non_null(strstr(out, "\"demangled\":\"cubin_fill<double>(double*, double, unsigned int)\""));
	assert_non_null(strstr(out, "\"ptx_usable\":true"));
	assert_non_null(strstr(out, "\"device_sm\":90"));
	free(out);
	free(err);
	assert_int_equal(run_cubpf("inspect --json --summary sass_only.fatbin", &out, &err), 0);
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"kernels_with_usable_ptx\":0"));
	free(out);
	free(err);
}

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void errors(void **s)
{
	(void)s;
	size_t n;
	uint8_t *buf = fixture("mode_size.fatbin", &n);
	FILE *f = fopen("/tmp/cubpf-truncated.fatbin", "wb");
	fwrite(buf, 1, n / 2, f);
	fclose(f);
	free(buf);
	char *out, *err;
	assert_int_equal(run_cubpf("inspect /tmp/cubpf-truncated.fatbin", &out, &err), 1);
	assert_int_equal(lines(err), 1);
	assert_non_null(strstr(err, "cubpf inspect: /tmp/cubpf-truncated.fatbin: "));
	assert_string_equal(out, "");
	free(out);
	free(err);
	remove("/tmp/cubpf-truncated.fatbin");
	/* Unknown content, a missing file, with a good one: both reported, the good one listed. */
	f = fopen("/tmp/cubpf-text.txt", "w");
	fputs("just some text\n", f);
	fclose(f);
	assert_int_equal(run_cubpf("inspect /tmp/cubpf-text.txt no-such-file kernels.cubin", &out, &err), 1);
	remove("/tmp/cubpf-text.txt");
	assert_int_equal(lines(err), 2);
	assert_non_null(strstr(err, "not a fatbin, fatbin wrapper, ELF file, static library or PTX text"));
	assert_non_null(strstr(err, "No such file"));
	assert_non_null(strstr(out, "kernels.cubin: cubin"));
	free(out);
	free(err);
	assert_int_equal(run_cubpf("inspect --bogus app", &out, &err), 2);
	assert_non_null(strstr(err, "unknown option '--bogus'"));
	free(out);
	free(err);
	assert_int_equal(run_cubpf("inspect --help", &out, &err), 0);
	assert_non_null(strstr(out, "--json"));
	free(out);
	free(err);
}

/* PTX kept in cubins is its own kind, with the assembler's recorded options; a cubin without it
 * says it has no line info. */
static void embedded(void **s)
{
	(void)s;
	size_t n;
	free(fixture("lineinfo.cubin", &n));
	char *out, *err;
	assert_int_equal(run_cubpf("inspect lineinfo.cubin nvrtc_arch.cubin nvjitlink2.cubin",
				   &out, &err), 0);
	assert_non_null(strstr(out, "embedded PTX: 1 of 1 cubins keep the PTX"));
	assert_non_null(strstr(out, "embedded PTX: 1 section, "));
	assert_non_null(strstr(out, "; ptxas -lineinfo  -arch sm_90"));
	assert_non_null(strstr(out, "no embedded PTX (ptxas -arch sm_90: no line info)"));
	assert_non_null(strstr(out, "embedded PTX: 2 sections (one per linked input)"));
	free(out);
	free(err);
	assert_int_equal(run_cubpf("inspect --json lineinfo.cubin ptxas_loc.cubin kernels.cubin",
				   &out, &err), 0);
	if (!json_valid(out))
		fail_msg("invalid JSON:\n%.2000s", out);
	assert_non_null(strstr(out, "\"embedded_ptx\":{\"kind\":\"embedded PTX\",\"sections\":1,"));
	assert_non_null(strstr(out, "\"options\":\"-O 2 -arch sm_90 -fmad false\""));
	assert_non_null(strstr(out, "\"cubins_with_embedded_ptx\":1"));
	assert_non_null(strstr(out, "\"embedded_ptx\":null")); /* kernels.cubin */
	free(out);
	free(err);
	/* issue 30: a kernel the shim instruments from its cubin's kept PTX is shown and counted as
	 * such (Triton's x + y without ptxas's note); one it refuses says why */
	assert_int_equal(run_cubpf("inspect notk_fadd.cubin notk_mul.cubin", &out, &err), 0);
	assert_non_null(strstr(out, "PTX usable on sm_90 for 1 of them (usable PTX entries: 0; 1 "
				    "through the PTX their cubin keeps)"));
	assert_non_null(strstr(out, "sm_90 embedded  fadd"));
	assert_non_null(strstr(out, "sm_90 embedded? nofma_k"));
	assert_non_null(strstr(out, "instrumented from it if the driver's JIT reproduces its "
				    "machine code with -fmad=true or false: its cubin keeps PTX but "
				    "not the options it was assembled with (no .note.nv.tkinfo), and 2 "
				    "float adds or subs in it take a product"));
	free(out);
	free(err);
	assert_int_equal(run_cubpf("inspect --json notk_fadd.cubin", &out, &err), 0);
	if (!json_valid(out))
		fail_msg("invalid JSON:\n%.2000s", out);
	assert_non_null(strstr(out, "\"kernels_with_usable_ptx\":1"));
	assert_non_null(strstr(out, "\"kernels_through_embedded_ptx\":1"));
	assert_non_null(strstr(out, "\"ptx_usable\":true,\"ptx_source\":\"embedded\""));
	free(out);
	free(err);
}

size_t inspect_tests(struct CMUnitTest *out)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table),
		cmocka_unit_test(json),
		cmocka_unit_test(errors),
		cmocka_unit_test(embedded),
	};
	memcpy(out, tests, sizeof(tests));
	return sizeof(tests) / sizeof(tests[0]);
}
