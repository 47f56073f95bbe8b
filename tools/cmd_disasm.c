/* cubpf disasm: the maps and programs of a probe object, after loading and relocation. */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/tools.h"
#include "vm/vm.h"

static void disasm_usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf disasm [-p PROGRAM] [--bytes] PROG.bpf.o...\n"
		"\n"
		"Prints the maps and the programs of eBPF objects (clang -O2 -g -target bpf) as\n"
		"cubpf loads them: map references resolved, called functions appended.\n"
		"  -p, --prog NAME   only the program with this function or section name\n"
		"  --bytes           show each instruction's bytes too\n"
		"  -h, --help        this text\n");
}

static const char *map_type_name(uint32_t t)
{
	switch (t) {
	case CUBPF_MAP_HASH: return "hash";
	case CUBPF_MAP_ARRAY: return "array";
	case CUBPF_MAP_PERCPU_ARRAY: return "percpu_array";
	case CUBPF_MAP_RINGBUF: return "ringbuf";
	case CUBPF_MAP_PERTHREAD_ARRAY: return "perthread_array";
	case CUBPF_MAP_GPU_ARRAY: return "gpu_array";
	case CUBPF_MAP_GPU_RINGBUF: return "gpu_ringbuf";
	}
	return "unknown";
}

static void print_maps(const struct vm_object *obj)
{
	if (!obj->map_cnt)
		return;
	printf("maps:\n");
	for (uint32_t i = 0; i < obj->map_cnt; i++) {
		const struct vm_map_def *m = &obj->maps[i];
		char t[TOOL_TEXT_MAX];
		printf("  #%-2u %-20s %-15s key %-4u value %-6u entries %-8u%s\n", i,
		       tool_text(m->name, t, sizeof(t)),
		       map_type_name(m->type), m->key_size, m->value_size, m->max_entries,
		       vm_map_prog_writable(m) ? "" : " read-only");
	}
	printf("\n");
}

static bool is_subprog_start(const struct vm_prog *p, uint32_t pc, uint32_t *which)
{
	for (uint32_t s = 1; s < p->subprog_cnt; s++)
		if (p->subprogs[s] == pc) {
			*which = s;
			return true;
		}
	return false;
}

static void print_prog(const struct vm_object *obj, const struct vm_prog *p, bool bytes)
{
	char t1[TOOL_TEXT_MAX], t2[TOOL_TEXT_MAX], t3[TOOL_TEXT_MAX]; /* the object's names */
	printf("%s: section %s, %s probe on \"%s\", %u instructions\n", tool_text(p->name, t1, sizeof(t1)),
	       tool_text(p->section, t2, sizeof(t2)), vm_prog_kind_name(p->kind),
	       tool_text(p->attach, t3, sizeof(t3)), p->insn_cnt);
	for (uint32_t pc = 0; pc < p->insn_cnt;) {
		char text[160];
		uint32_t sub;
		if (is_subprog_start(p, pc, &sub))
			printf("; function #%u\n", sub);
		int n = vm_disasm_insn_at(&p->insns[pc], p->insn_cnt - pc, pc, obj, text, sizeof(text));
		printf("%6u:", pc);
		if (bytes) {
			const uint8_t *b = (const uint8_t *)&p->insns[pc];
			for (int i = 0; i < 8 * n; i++)
				printf(" %02x", b[i]);
			printf("%*s", n == 1 ? 26 : 2, "");
		}
		putchar('\t'); /* the text may name a map */
		tool_text_put(stdout, text, 0);
		putchar('\n');
		pc += (uint32_t)n;
	}
	printf("\n");
}

static int disasm_file(const char *path, const char *only, bool bytes)
{
	struct vm_object *obj;
	char err[VM_ERRLEN];
	if (vm_object_load_file(path, &obj, err, sizeof(err)) < 0) {
		tool_warn("cubpf disasm: %s", err);
		return 1;
	}
	char t1[TOOL_TEXT_MAX], t2[TOOL_TEXT_MAX];
	printf("%s: %u program%s, %u map%s, license \"%s\"\n\n", tool_text(obj->name, t1, sizeof(t1)),
	       obj->prog_cnt, obj->prog_cnt == 1 ? "" : "s", obj->map_cnt,
	       obj->map_cnt == 1 ? "" : "s", tool_text(obj->license, t2, sizeof(t2)));
	print_maps(obj);
	int shown = 0;
	for (uint32_t i = 0; i < obj->prog_cnt; i++) {
		const struct vm_prog *p = &obj->progs[i];
		if (only && strcmp(only, p->name) && strcmp(only, p->section))
			continue;
		print_prog(obj, p, bytes);
		shown++;
	}
	vm_object_free(obj);
	if (only && !shown) {
		tool_warn("cubpf disasm: %s has no program '%s'", path, only);
		return 1;
	}
	return 0;
}

int cmd_disasm(int argc, char **argv)
{
	const char *only = NULL;
	bool bytes = false;
	int files = 0, rc = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			disasm_usage(stdout);
			return 0;
		}
		if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prog")) && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--bytes"))
			bytes = true;
		else if (argv[i][0] == '-') {
			fprintf(stderr, "cubpf disasm: unknown option '%s'\n", argv[i]);
			disasm_usage(stderr);
			return 2;
		}
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prog")) {
			i++;
			continue;
		}
		if (argv[i][0] == '-')
			continue;
		files++;
		rc |= disasm_file(argv[i], only, bytes);
	}
	if (!files) {
		disasm_usage(stderr);
		return 2;
	}
	return rc;
}
