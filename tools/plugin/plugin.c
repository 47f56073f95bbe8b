/* cubpf-bpf-plugin: cubpf's eBPF engines behind the bpf_conformance plugin protocol.
 * The program comes as one line of base16 on stdin, the input memory as base16 in the first
 * non-option argument; r0 is printed in hex on stdout.  Failures: a message, exit status 1. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/plugin/plugin.h"
#include "vm/vm.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf-bpf-plugin [--engine interp|gpu] [--ptx-out FILE] [MEMORY_HEX] < PROGRAM_HEX\n"
		"\n"
		"Runs one eBPF program the way the bpf_conformance runner expects:\n"
		"  stdin       the program, base16 (8 bytes per instruction, 16 for lddw)\n"
		"  MEMORY_HEX  input memory, base16; r1 points to it, r2 holds its length\n"
		"  stdout      r0 at exit, in hex\n"
		"\n"
		"  --engine interp   cubpf's host interpreter, bounds-checked (default)\n"
		"  --engine gpu      the eBPF->PTX engine on CUDA device 0 (needs libcuda.so.1)\n"
		"  --ptx-out FILE    gpu engine: also write the generated PTX module to FILE\n"
		"  -h, --help        this text\n");
}

/* Decodes base16 (whitespace ignored) into a new buffer.  Returns its length, or -1. */
static long unhex(const char *s, uint8_t **out)
{
	size_t n = strlen(s), k = 0;
	uint8_t *buf = malloc(n / 2 + 1);
	int half = -1;
	if (!buf)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i], v;
		if (isspace(c))
			continue;
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else {
			free(buf);
			return -1;
		}
		if (half < 0)
			half = v;
		else {
			buf[k++] = (uint8_t)(half << 4 | v);
			half = -1;
		}
	}
	if (half >= 0) {
		free(buf);
		return -1;
	}
	*out = buf;
	return (long)k;
}

static char *read_all(FILE *f)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
		n += got;
		if (cap - n - 1 == 0) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	if (buf)
		buf[n] = 0;
	return buf;
}

static const char *ptx_out;

static int parse_args(int argc, char **argv, const char **engine, const char **memhex)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--engine") && i + 1 < argc)
			*engine = argv[++i];
		else if (!strncmp(a, "--engine=", 9))
			*engine = a + 9;
		else if (!strcmp(a, "--ptx-out") && i + 1 < argc)
			ptx_out = argv[++i];
		else if (a[0] == '-' && a[1] == '-') {
			fprintf(stderr, "cubpf-bpf-plugin: unknown option '%s'\n", a);
			usage(stderr);
			return -1;
		} else if (!*memhex)
			*memhex = a;
	}
	return 0;
}

static void write_ptx(const void *code, size_t len)
{
	struct ptx_buf b = {0};
	char err[VM_ERRLEN];
	FILE *f = NULL;
	if (tool_plugin_gpu_ptx(code, len, &b, err, sizeof(err)) == 0 && (f = fopen(ptx_out, "w")))
		fwrite(b.data, 1, b.len, f);
	else
		fprintf(stderr, "cubpf-bpf-plugin: cannot write %s\n", ptx_out);
	if (f)
		fclose(f);
	ptx_buf_free(&b);
}

int main(int argc, char **argv)
{
	const char *engine = "interp", *memhex = NULL;
	if (parse_args(argc, argv, &engine, &memhex) < 0)
		return 2;
	bool gpu = !strcmp(engine, "gpu");
	if (!gpu && strcmp(engine, "interp")) {
		fprintf(stderr, "cubpf-bpf-plugin: unknown engine '%s' (interp or gpu)\n", engine);
		return 2;
	}
	char *text = read_all(stdin);
	uint8_t *code = NULL, *mem = NULL;
	long code_len = text ? unhex(text, &code) : -1;
	long mem_len = memhex ? unhex(memhex, &mem) : 0;
	free(text);
	if (code_len < 0 || mem_len < 0) {
		fprintf(stderr, "cubpf-bpf-plugin: %s is not valid base16\n",
			code_len < 0 ? "the program on stdin" : "the memory argument");
		free(code);
		free(mem);
		return 1;
	}
	char err[VM_ERRLEN];
	uint64_t r0;
	int rc = gpu ? tool_plugin_gpu_run(code, (size_t)code_len, mem, (size_t)mem_len, &r0, err,
				      sizeof(err))
		     : vm_run_raw(code, (size_t)code_len, mem, (size_t)mem_len, &r0, err, sizeof(err));
	if (gpu && ptx_out)
		write_ptx(code, (size_t)code_len);
	if (rc == 0)
		printf("%llx\n", (unsigned long long)r0);
	else
		fprintf(stderr, "cubpf-bpf-plugin: %s\n", err);
	free(code);
	free(mem);
	return rc == 0 ? 0 : 1;
}
