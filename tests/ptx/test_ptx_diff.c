/* The pointer shapes of issue 14 (tests/ptx/shapes) through the differential harness
 * (tests/ptx/ptxdiff.h): interpreter and PTX (on tests/ptx/ptxsim.py) must agree on r0 and on
 * every map byte, compiled as written and folded; and the harness must see a difference.
 * Also the GPU printk rules (tests/ptx/safety/printk_cases.bpf.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptx-rewriter/ptx.h"
#include "tests/ptx/ptxdiff.h"

static struct vm_object *load(const char *rel)
{
	const char *b = getenv("CUBPF_BUILD");
	if (!b)
		fail_msg("environment variable CUBPF_BUILD is not set (run through make test)");
	char path[1024], err[256];
	snprintf(path, sizeof(path), "%s/%s", b, rel);
	struct vm_object *o;
	if (vm_object_load_file(path, &o, err, sizeof(err)))
		fail_msg("%s", err);
	return o;
}

static struct vm_object *shapes(void)
{
	return load("ptx-shapes/shapes.bpf.o");
}

static void check_all(bool fold)
{
	struct vm_object *o = shapes();
	assert_true(o->prog_cnt >= 7);
	for (uint32_t i = 0; i < o->prog_cnt; i++) {
		struct vm_verify_info info;
		if (vm_verify_sanitize(o, i, NULL, &info, NULL, 0))
			fail_msg("%s is rejected: %s", o->progs[i].name, info.reason);
		struct ptxdiff_opts opt = {.runs = 24, .seed = 7 + i, .fold = fold};
		char err[1024];
		int rc = ptxdiff_check(o, i, &opt, err, sizeof(err));
		if (rc)
			fail_msg("%s (%s): %d: %s", o->progs[i].name, fold ? "folded" : "as written", rc,
				 err);
		print_message("same: %s (%s, 24 runs)\n", o->progs[i].name, fold ? "folded" : "as written");
	}
	vm_object_free(o);
}

static void test_shapes_as_written(void **state)
{
	(void)state;
	check_all(false);
}

static void test_shapes_folded(void **state)
{
	(void)state;
	check_all(true);
}

/* The thread block probes (issue 32) on the interpreter and on the PTX path, over random
 * contexts of their kind: the same r0 and map bytes. */
static void test_block_probes(void **state)
{
	(void)state;
	struct vm_object *o = load("ptx-probes/block.bpf.o");
	assert_int_equal(o->prog_cnt, 2);
	for (uint32_t i = 0; i < o->prog_cnt; i++) {
		assert_true(o->progs[i].kind == VM_PROG_BLOCKPROBE ||
			    o->progs[i].kind == VM_PROG_BLOCKRETPROBE);
		for (int fold = 0; fold < 2; fold++) {
			struct ptxdiff_opts opt = {.runs = 16, .seed = 32 + i, .fold = fold};
			char err[1024];
			int rc = ptxdiff_check(o, i, &opt, err, sizeof(err));
			if (rc)
				fail_msg("%s: %d: %s", o->progs[i].name, rc, err);
		}
	}
	vm_object_free(o);
}

/* A stack address chosen on a branch makes the stack addressable: r10 is a generic address of
 * the .local stack, and the access goes through the chosen register. */
static void test_chosen_pointer_addressable(void **state)
{
	(void)state;
	struct vm_object *o = shapes();
	char dir[] = "/tmp/cubpf-diff-t-XXXXXX", ptx[64], cases[64], err[1024];
	assert_non_null(mkdtemp(dir));
	snprintf(ptx, sizeof(ptx), "%s/m.ptx", dir);
	snprintf(cases, sizeof(cases), "%s/m.cases", dir);
	uint32_t i = 0;
	while (i < o->prog_cnt && strcmp(o->progs[i].name, "select_stack"))
		i++;
	assert_true(i < o->prog_cnt);
	struct ptxdiff_opts opt = {.runs = 2, .fold = true};
	if (ptxdiff_prepare(o, i, &opt, ptx, cases, err, sizeof(err)))
		fail_msg("%s", err);
	FILE *f = fopen(ptx, "r");
	assert_non_null(f);
	static char text[1 << 16];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = 0;
	fclose(f);
	assert_non_null(strstr(text, "cvta.local.u64 %__cb_r10, %__cb_r10;"));
	/* the harness itself fails on a wrong expectation: r0 of the first run changed */
	f = fopen(cases, "r+");
	assert_non_null(f);
	static char c[1 << 16];
	n = fread(c, 1, sizeof(c) - 1, f);
	c[n] = 0;
	char *run = strstr(c, "\nC ");
	assert_non_null(run);
	char *r0 = strchr(run + 3, ' ') + 1; /* after the context */
	*r0 = *r0 == '1' ? '2' : '1';
	rewind(f);
	assert_int_equal(fwrite(c, 1, n, f), n);
	fclose(f);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "python3 tests/ptx/ptxdiff.py %s %s >/dev/null 2>&1", ptx, cases);
	assert_int_not_equal(system(cmd), 0);
	unlink(ptx), unlink(cases), rmdir(dir);
	vm_object_free(o);
}

/* Compiles program `name` of o (as a raw function): 0 and the text in *out, or -1 and err. */
static int compile(const struct vm_object *o, const char *name, char **out, char *err,
		   size_t errlen)
{
	for (uint32_t i = 0; i < o->prog_cnt; i++) {
		if (strcmp(o->progs[i].name, name))
			continue;
		struct ptx_prog p = {.name = name, .kind = VM_PROG_RAW, .insns = o->progs[i].insns,
				     .insn_cnt = o->progs[i].insn_cnt};
		struct ptx_buf b = {0};
		int rc = ptx_gen_raw_func_opt(&p, o->maps, o->map_cnt, "f", true, &b, err, errlen);
		*out = rc ? NULL : b.data;
		if (rc)
			ptx_buf_free(&b);
		return rc;
	}
	fail_msg("no program %s", name);
	return -1;
}

/* An atomic through a pointer that may be a stack address tests the address space at run time
 * (atomics on a generic address of local memory are undefined in PTX): ptxsim cannot tell, so
 * the form is checked here and the GPU run (t_ptx_safety.sh) checks the semantics. */
static void test_atomic_maybe_stack(void **state)
{
	(void)state;
	struct vm_object *o = shapes();
	const char *names[] = {"atomic_select", "atomic_callee"};
	for (int i = 0; i < 2; i++) {
		char err[PTX_ERRLEN], *t;
		if (compile(o, names[i], &t, err, sizeof(err)))
			fail_msg("%s: %s", names[i], err);
		const char *sp = strstr(t, "isspacep.local %__cb_g0, %__cb_t3;");
		assert_non_null(sp);
		assert_non_null(strstr(sp, "ld.u64 %__cb_t0, [%__cb_t3];"));
		free(t);
	}
	vm_object_free(o);
}

static void test_printk_rules(void **state)
{
	(void)state;
	struct vm_object *o = load("ptx-safety/printk_cases.bpf.o");
	char err[PTX_ERRLEN], *t;
	/* %s: copied byte by byte, each byte checked, into the print buffer whose address is
	 * what vprintf gets */
	if (compile(o, "printk_str", &t, err, sizeof(err)))
		fail_msg("printk_str: %s", err);
	assert_non_null(strstr(t, "st.local.u8 [%__cb_t1], %__cb_w0;"));
	assert_non_null(strstr(t, "@%__cb_g0 mov.b64 %__cb_v3, 1;"));
	assert_non_null(strstr(t, "st.local.u64 [__cubpf_pbuf+0], %__cb_v2;"));
	assert_non_null(strstr(t, "call (__cb_prv), vprintf"));
	assert_null(strstr(t, "st.local.u64 [__cubpf_pbuf+0], %__cb_r3;")); /* never the raw pointer */
	free(t);
	assert_int_equal(compile(o, "printk_no_nul", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no terminating NUL"));
	assert_int_equal(compile(o, "printk_stack_fmt", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "constant string in .rodata"));
	vm_object_free(o);
}

/* Constant folding wraps as the BPF machine does: r1 + r1 and r1 - INT64_MIN overflow int64
 * (found by sound --ptxdiff: signed overflow in the folder, undefined behaviour). */
static void test_fold_wraps(void **state)
{
	(void)state;
	const struct bpf_insn insns[] = {
		{BPF_LD | BPF_DW | BPF_IMM, 1, 0, 0, 0x7ca67df8}, {0, 0, 0, 0, 0x4a886881},
		{BPF_ALU64 | BPF_ADD | BPF_X, 1, 1, 0, 0},        /* 2 * 0x4a88...: overflows */
		{BPF_LD | BPF_DW | BPF_IMM, 2, 0, 0, 0}, {0, 0, 0, 0, (int32_t)0x80000000},
		{BPF_ALU64 | BPF_SUB | BPF_X, 1, 2, 0, 0},        /* - INT64_MIN: overflows */
		{BPF_ALU64 | BPF_MOV | BPF_X, 0, 1, 0, 0},
		{BPF_ALU64 | BPF_RSH | BPF_K, 1, 0, 0, 32},
		{BPF_ALU64 | BPF_XOR | BPF_X, 0, 1, 0, 0},
		{BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
	};
	char err[1024];
	struct vm_object *o = vm_object_from_insns(insns, sizeof(insns) / sizeof(insns[0]),
						   VM_PROG_KPROBE, err, sizeof(err));
	assert_non_null(o);
	struct vm_verify_info info;
	if (vm_verify_sanitize(o, 0, NULL, &info, NULL, 0))
		fail_msg("rejected: %s", info.reason);
	for (int fold = 0; fold < 2; fold++) {
		struct ptxdiff_opts opt = {.runs = 2, .seed = 3, .fold = fold};
		int rc = ptxdiff_check(o, 0, &opt, err, sizeof(err));
		if (rc)
			fail_msg("%s: %d: %s", fold ? "folded" : "as written", rc, err);
	}
	vm_object_free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes_as_written),
		cmocka_unit_test(test_shapes_folded),
		cmocka_unit_test(test_chosen_pointer_addressable),
		cmocka_unit_test(test_printk_rules),
		cmocka_unit_test(test_atomic_maybe_stack),
		cmocka_unit_test(test_fold_wraps),
		cmocka_unit_test(test_block_probes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
