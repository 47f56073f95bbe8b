/* Code generator checks that need no fixtures: alignment of generated accesses, and (issue 6)
 * the device code of the map kinds beyond plain arrays.  Generated functions are assembled with
 * ptxas (PTXAS) when it is set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptx-rewriter/ptx.h"
#include "tools/include/cubpf_abi.h"

#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), \
					       .off = (o), .imm = (i)})
#define EXIT INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define LDDW_MAP(d, m) INSN(BPF_LD | BPF_IMM | BPF_DW, d, BPF_PSEUDO_MAP_FD, 0, m), INSN(0, 0, 0, 0, 0)
#define CALL(h) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, h)
#define MOV64K(d, k) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, k)
#define MOV64X(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define ADD64K(d, k) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, k)

/* Compiles a raw program into a module (declarations + the function), assembles it with ptxas
 * when PTXAS is set, returns the text (caller frees). */
static char *gen_module(const struct bpf_insn *insns, uint32_t n, const struct vm_map_def *maps,
			uint32_t map_cnt, bool fold)
{
	struct ptx_prog p = {.name = "t", .kind = VM_PROG_RAW, .insns = insns, .insn_cnt = n};
	struct ptx_buf b = {0};
	char err[PTX_ERRLEN];
	ptx_buf_printf(&b, ".version 8.0\n.target sm_80\n.address_size 64\n");
	ptx_gen_module_decls(map_cnt, false, &b);
	if (ptx_gen_raw_func_opt(&p, maps, map_cnt, "f", fold, &b, err, sizeof(err)))
		fail_msg("not compiled: %s", err);
	ptx_buf_printf(&b, ".visible .entry k(.param .u64 m, .param .u64 o)\n{\n"
			   "\t.reg .b64 %%a<4>;\n\tld.param.u64 %%a0, [m];\n"
			   "\tld.param.u64 %%a2, [o];\n\t{\n\t.param .b64 r;\n\t.param .b64 x;\n"
			   "\t.param .b64 y;\n\tst.param.b64 [x], %%a0;\n\tst.param.b64 [y], 64;\n"
			   "\tcall.uni (r), f, (x, y);\n\tld.param.b64 %%a1, [r];\n\t}\n"
			   "\tst.global.u64 [%%a2], %%a1;\n\tret;\n}\n");
	assert_false(b.oom);
	const char *ptxas = getenv("PTXAS");
	if (ptxas && *ptxas) {
		char in[] = "/tmp/cubpf-ptxgen-XXXXXX", cmd[1024], log[4096];
		int fd = mkstemp(in);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
		close(fd);
		snprintf(cmd, sizeof(cmd), "%s -arch=sm_80 %s -o /dev/null 2>&1", ptxas, in);
		FILE *p2 = popen(cmd, "r");
		assert_non_null(p2);
		size_t k = fread(log, 1, sizeof(log) - 1, p2);
		log[k] = 0;
		int st = pclose(p2);
		unlink(in);
		if (st)
			fail_msg("does not assemble:\n%s\n%s", log, b.data);
	}
	return b.data;
}

static bool has(const char *text, const char *s)
{
	return strstr(text, s) != NULL;
}

/* ---- alignment ---- */

/* A load through a pointer of unknown provenance at an odd offset is split into bytes; the
 * same at an offset the pointer's base does not prove aligned too (r1 is any address). */
static void test_unaligned_split(void **state)
{
	(void)state;
	const struct bpf_insn p[] = {
		INSN(BPF_LDX | BPF_MEM | BPF_W, 0, 1, 2, 0),
		INSN(BPF_STX | BPF_MEM | BPF_DW, 1, 0, 3, 0),
		INSN(BPF_ST | BPF_MEM | BPF_H, 1, 0, 1, 0x1234),
		EXIT,
	};
	char *t = gen_module(p, 4, NULL, 0, false);
	assert_false(has(t, "ld.u32"));
	assert_false(has(t, "st.u64"));
	assert_false(has(t, "st.u16"));
	assert_true(has(t, "ld.u8 %__cb_u0, [%__cb_r1+2];"));
	assert_true(has(t, "ld.u8 %__cb_u1, [%__cb_r1+5];"));
	assert_true(has(t, "st.u8 [%__cb_r1+10], %__cb_u1;"));
	/* a literal's bytes are literals: 0x1234 at +1 is 0x34 then 0x12 */
	assert_true(has(t, "st.u8 [%__cb_r1+1], 52;"));
	assert_true(has(t, "st.u8 [%__cb_r1+2], 18;"));
	free(t);
}

/* Stack slots at offsets not aligned to the access size (a frame that escapes, so the stack
 * is in .local memory) are split too; aligned ones are not. */
static void test_stack_unaligned(void **state)
{
	(void)state;
	const struct bpf_insn p[] = {
		MOV64X(2, 10), /* r10 escapes: the stack stays in .local */
		INSN(BPF_STX | BPF_MEM | BPF_DW, 1, 2, 0, 0),
		INSN(BPF_ST | BPF_MEM | BPF_W, 10, 0, -6, 7),
		INSN(BPF_LDX | BPF_MEM | BPF_W, 0, 10, -6, 0),
		INSN(BPF_ST | BPF_MEM | BPF_DW, 10, 0, -16, 9),
		INSN(BPF_LDX | BPF_MEM | BPF_DW, 3, 10, -16, 0),
		EXIT,
	};
	char *t = gen_module(p, 7, NULL, 0, false);
	assert_true(has(t, "st.local.u16 [__cubpf_stack+"));
	assert_true(has(t, "ld.local.u16 %__cb_u0, [__cubpf_stack+"));
	assert_false(has(t, "ld.local.u32"));
	assert_true(has(t, "ld.local.u64 %__cb_r3, [__cubpf_stack+"));
	free(t);
}

/* Map values are 8-aligned: accesses at aligned offsets keep the single instruction, through
 * a runtime-key lookup and after constant pointer arithmetic; an odd offset is split. */
static void test_mapval_aligned(void **state)
{
	(void)state;
	struct vm_map_def m = {.name = "a", .type = CUBPF_MAP_ARRAY, .key_size = 4,
			       .value_size = 16, .max_entries = 4};
	const struct bpf_insn p[] = {
		INSN(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 0, 0),   /* runtime key from memory */
		INSN(BPF_STX | BPF_MEM | BPF_W, 10, 3, -4, 0),
		LDDW_MAP(1, 0),
		MOV64X(2, 10),
		ADD64K(2, -4),
		CALL(CUBPF_FN_map_lookup_elem),
		INSN(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 4, 0),
		ADD64K(0, 8),
		INSN(BPF_LDX | BPF_MEM | BPF_DW, 4, 0, 0, 0),  /* value + 8: aligned */
		INSN(BPF_LDX | BPF_MEM | BPF_W, 5, 0, -4, 0),  /* value + 4: aligned */
		INSN(BPF_LDX | BPF_MEM | BPF_H, 0, 0, -7, 0),  /* value + 1: split */
		EXIT,
	};
	char *t = gen_module(p, 13, &m, 1, false);
	assert_true(has(t, "ld.u64 %__cb_r4, [%__cb_r0+0];"));
	assert_true(has(t, "ld.u32 %__cb_r5, [%__cb_r0+-4];"));
	assert_false(has(t, "ld.u16"));
	assert_true(has(t, "ld.u8 %__cb_u0, [%__cb_r0+-7];"));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unaligned_split),
		cmocka_unit_test(test_stack_unaligned),
		cmocka_unit_test(test_mapval_aligned),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
