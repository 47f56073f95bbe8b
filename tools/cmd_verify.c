/* cubpf verify: loads probe objects and runs the verifier on each program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/tools.h"
#include "vm/vm.h"

#define VERIFY_LOG_SIZE (1 << 22) /* -vv traces can be long */

static void verify_usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf verify [-v] [-p PROGRAM] PROG.bpf.o...\n"
		"\n"
		"Loads eBPF objects (clang -O2 -g -target bpf) and runs cubpf's verifier on every\n"
		"program, as `cubpf run` would before injecting them.  A rejection prints the\n"
		"instructions around the faulty one, the reason and the register state.\n"
		"  -v, --verbose     also print statistics for accepted programs\n"
		"  -vv, --trace      print every instruction the verifier walks, with its state\n"
		"  -p, --prog NAME   only the program with this function or section name\n"
		"  -h, --help        this text\n"
		"Exit status: 0 all verified, 1 a program was rejected or an object could not be\n"
		"loaded, 2 usage error.\n");
}

/* "FILE: PROGRAM (SECTION)": the names are the object's, escaped for the terminal. */
static void prog_head(const struct vm_object *obj, const struct vm_prog *p)
{
	char t1[TOOL_TEXT_MAX], t2[TOOL_TEXT_MAX], t3[TOOL_TEXT_MAX];
	printf("%s: %s (%s): ", tool_text(obj->name, t1, sizeof(t1)), tool_text(p->name, t2, sizeof(t2)),
	       tool_text(p->section, t3, sizeof(t3)));
}

static int verify_prog(const struct vm_object *obj, uint32_t i, int verbose, char *log)
{
	const struct vm_prog *p = &obj->progs[i];
	/* GPU kinds: code on no feasible path is dropped, as the shim drops it */
	uint8_t *dead = vm_kind_is_gpu(p->kind) ? calloc(p->insn_cnt + 1, 1) : NULL;
	struct vm_verify_opts opts = {.log_level = verbose, .dead = dead};
	struct vm_verify_info info;
	int rc = vm_verify(obj, i, &opts, &info, log, VERIFY_LOG_SIZE);
	uint32_t dropped = 0;
	for (uint32_t k = 0; rc == 0 && dead && k < p->insn_cnt; k++)
		dropped += dead[k];
	free(dead);
	if (verbose >= 2)
		tool_text_put(stdout, log, 1);
	prog_head(obj, p);
	if (rc == 0) {
		printf("OK, %u instructions", p->insn_cnt);
		if (dropped)
			printf(" (%u on no feasible path, dropped)", dropped);
		if (verbose)
			printf(", %u processed, %u states, stack %u bytes, %u frame%s",
			       info.insns_processed, info.states, info.max_stack, info.max_call_depth,
			       info.max_call_depth == 1 ? "" : "s");
		printf("\n");
		return 0;
	}
	printf("REJECTED\n");
	if (verbose < 2)
		tool_text_put(stdout, log, 1);
	return 1;
}

static int verify_file(const char *path, const char *only, int verbose, char *log)
{
	struct vm_object *obj;
	char err[VM_ERRLEN];
	if (vm_object_load_file(path, &obj, err, sizeof(err)) < 0) {
		tool_warn("cubpf verify: %s", err);
		return 1;
	}
	int rc = 0, shown = 0;
	for (uint32_t i = 0; i < obj->prog_cnt; i++) {
		const struct vm_prog *p = &obj->progs[i];
		if (only && strcmp(only, p->name) && strcmp(only, p->section))
			continue;
		shown++;
		rc |= verify_prog(obj, i, verbose, log);
	}
	if (only && !shown) {
		tool_warn("cubpf verify: %s has no program '%s'", path, only);
		rc = 1;
	}
	vm_object_free(obj);
	return rc;
}

int cmd_verify(int argc, char **argv)
{
	const char *only = NULL;
	int verbose = 0, files = 0, rc = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			verify_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose"))
			verbose = verbose < 1 ? 1 : verbose;
		else if (!strcmp(argv[i], "-vv") || !strcmp(argv[i], "--trace"))
			verbose = 2;
		else if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prog")) && i + 1 < argc)
			only = argv[++i];
		else if (argv[i][0] == '-') {
			fprintf(stderr, "cubpf verify: unknown option '%s'\n", argv[i]);
			verify_usage(stderr);
			return 2;
		}
	}
	char *log = malloc(VERIFY_LOG_SIZE);
	if (!log) {
		fprintf(stderr, "cubpf verify: out of memory\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prog")) {
			i++;
			continue;
		}
		if (argv[i][0] == '-')
			continue;
		files++;
		rc |= verify_file(argv[i], only, verbose, log);
	}
	free(log);
	if (!files) {
		verify_usage(stderr);
		return 2;
	}
	return rc;
}
