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
#include "ptx-rewriter/layout.h"

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

static int count(const char *text, const char *s)
{
	int n = 0;
	for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
		n++;
	return n;
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
	/* map values are global memory: the state space is named (no generic-address test) */
	assert_true(has(t, "ld.global.u64 %__cb_r4, [%__cb_r0+0];"));
	assert_true(has(t, "ld.global.u32 %__cb_r5, [%__cb_r0+-4];"));
	assert_false(has(t, "ld.u16"));
	assert_true(has(t, "ld.global.u8 %__cb_u0, [%__cb_r0+-7];"));
	free(t);
}

/* ---- map kinds (issue 6) ---- */

#define ST_W(d, o, k) INSN(BPF_ST | BPF_MEM | BPF_W, d, 0, o, k)
#define ST_DW(d, o, k) INSN(BPF_ST | BPF_MEM | BPF_DW, d, 0, o, k)
#define STX_DW(d, s, o) INSN(BPF_STX | BPF_MEM | BPF_DW, d, s, o, 0)
#define XADD_DW(d, s) INSN(BPF_STX | BPF_ATOMIC | BPF_DW, d, s, 0, BPF_ADD)
#define JEQ_K(d, k, o) INSN(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, k)

/* lookup(map 0, key = r1's first u32 at fp-4), atomic add 1 to the value. */
static const struct bpf_insn count_prog[] = {
	INSN(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 0, 0),
	INSN(BPF_STX | BPF_MEM | BPF_W, 10, 3, -4, 0),
	LDDW_MAP(1, 0),
	MOV64X(2, 10),
	ADD64K(2, -4),
	CALL(CUBPF_FN_map_lookup_elem),
	JEQ_K(0, 0, 2),
	MOV64K(1, 1),
	XADD_DW(0, 1),
	MOV64K(0, 0),
	EXIT,
};
#define COUNT_N (sizeof(count_prog) / sizeof(count_prog[0]))

static void test_percpu_lookup(void **state)
{
	(void)state;
	struct vm_map_def m = {.name = "pc", .type = CUBPF_MAP_PERCPU_ARRAY, .key_size = 4,
			       .value_size = 8, .max_entries = 3};
	char *t = gen_module(count_prog, COUNT_N, &m, 1, true);
	assert_true(has(t, "%smid"));
	assert_true(has(t, "and.b32 %__cb_x1, %__cb_x1, 255;"));
	assert_true(has(t, "mul.wide.u32 %__cb_m1, %__cb_x0, 256;"));
	assert_true(has(t, "setp.lt.u32 %__cb_q0, %__cb_x0, 3;"));
	/* the value is 8-aligned: the counter stays one atomic */
	assert_true(has(t, "red.global.add.u64 [%__cb_r0+0], %__cb_r1;"));
	free(t);
	assert_int_equal(CUBPF_PERCPU_OFFSET(2, 5, 12), (2 * 256 + 5) * 16);
	assert_int_equal(CUBPF_PERCPU_MAP_BYTES(3, 8), 3 * 256 * 8);
}

static void test_perthread_lookup(void **state)
{
	(void)state;
	struct vm_map_def m = {.name = "pt", .type = CUBPF_MAP_PERTHREAD_ARRAY, .key_size = 4,
			       .value_size = 8, .max_entries = 2};
	char *t = gen_module(count_prog, COUNT_N, &m, 1, true);
	assert_true(has(t, "%nctaid.y"));
	assert_true(has(t, "ld.global.u64 %__cb_m2, [%__cb_m0];")); /* header: threads */
	assert_true(has(t, "and.pred %__cb_q0, %__cb_q0, %__cb_q1;"));
	assert_true(has(t, "add.s64 %__cb_m0, %__cb_m0, 64;"));
	free(t);
	assert_int_equal(CUBPF_PERTHREAD_OFFSET(1, 7, 100, 4), 64 + (100 + 7) * 8);
	assert_int_equal(CUBPF_PERTHREAD_MAP_BYTES(2, 100, 8), 64 + 200 * 8);
}

/* key: a u64 at fp-8 (from r1), value u64: lookup; if absent insert 0 with BPF_NOEXIST and
 * look up again; add 1; then delete a key that is not there. */
static const struct bpf_insn hash_prog[] = {
	INSN(BPF_LDX | BPF_MEM | BPF_DW, 6, 1, 0, 0),
	STX_DW(10, 6, -8),
	ST_DW(10, -16, 0),
	LDDW_MAP(1, 0),
	MOV64X(2, 10),
	ADD64K(2, -8),
	CALL(CUBPF_FN_map_lookup_elem),
	JEQ_K(0, 0, 1),
	INSN(BPF_JMP | BPF_JA, 0, 0, 14, 0), /* found: to the add */
	LDDW_MAP(1, 0),
	MOV64X(2, 10),
	ADD64K(2, -8),
	MOV64X(3, 10),
	ADD64K(3, -16),
	MOV64K(4, BPF_NOEXIST),
	CALL(CUBPF_FN_map_update_elem),
	LDDW_MAP(1, 0),
	MOV64X(2, 10),
	ADD64K(2, -8),
	CALL(CUBPF_FN_map_lookup_elem),
	JEQ_K(0, 0, 2),
	MOV64K(1, 1),
	XADD_DW(0, 1),
	LDDW_MAP(1, 0),
	ST_DW(10, -8, 12345),
	MOV64X(2, 10),
	ADD64K(2, -8),
	CALL(CUBPF_FN_map_delete_elem),
	EXIT,
};
#define HASH_N (sizeof(hash_prog) / sizeof(hash_prog[0]))

static void test_hash_ops(void **state)
{
	(void)state;
	struct vm_map_def m = {.name = "h", .type = CUBPF_MAP_HASH, .key_size = 8,
			       .value_size = 8, .max_entries = 100};
	char *t = gen_module(hash_prog, HASH_N, &m, 1, true);
	/* capacity 128, slots of 8 + 8 + 8 bytes */
	assert_true(has(t, "and.b32 %__cb_x1, %__cb_x1, 127;"));
	assert_true(has(t, "mad.wide.u32 %__cb_m0, %__cb_x1, 24, %__cb_m1;"));
	assert_true(has(t, "atom.global.cas.b32 %__cb_x3, [%__cb_m0], 0, 1;"));
	assert_true(has(t, "atom.global.cas.b32 %__cb_x3, [%__cb_m0], 2, 3;"));
	assert_true(has(t, "st.volatile.global.u32 [%__cb_m0+-16], 2;"));
	assert_true(has(t, "red.global.add.u64 [%__cb_r0+0], %__cb_r1;"));
	free(t);
	assert_int_equal(cubpf_hash_capacity(100), 128);
	assert_int_equal(cubpf_hash_capacity(1), 1);
	assert_int_equal(CUBPF_HASH_SLOT_BYTES(12, 4), 8 + 16 + 8);
}

/* A 12-byte key written as three u32: read back in 4-byte chunks into two words. */
static void test_hash_key_chunks(void **state)
{
	(void)state;
	struct vm_map_def m = {.name = "h", .type = CUBPF_MAP_HASH, .key_size = 12,
			       .value_size = 4, .max_entries = 8};
	const struct bpf_insn p[] = {
		ST_W(10, -12, 1), ST_W(10, -8, 2), ST_W(10, -4, 3),
		LDDW_MAP(1, 0),
		MOV64X(2, 10),
		ADD64K(2, -12),
		CALL(CUBPF_FN_map_lookup_elem),
		JEQ_K(0, 0, 1),
		INSN(BPF_LDX | BPF_MEM | BPF_W, 0, 0, 0, 0),
		EXIT,
	};
	char *t = gen_module(p, sizeof(p) / sizeof(p[0]), &m, 1, true);
	assert_true(has(t, "shl.b64 %__cb_t3, %__cb_t3, 32;"));
	assert_true(has(t, "setp.ne.u64 %__cb_q1, %__cb_m2, %__cb_h1;"));
	assert_false(has(t, "__cubpf_stack")); /* the key stays in registers */
	free(t);
}

static void test_ringbuf_output(void **state)
{
	(void)state;
	struct vm_map_def m = {.name = "rb", .type = CUBPF_MAP_RINGBUF, .max_entries = 1 << 16};
	const struct bpf_insn p[] = {
		ST_DW(10, -16, 7), ST_W(10, -8, 9),
		LDDW_MAP(1, 0),
		MOV64X(2, 10),
		ADD64K(2, -16),
		MOV64K(3, 12),
		MOV64K(4, 0),
		CALL(CUBPF_FN_ringbuf_output),
		EXIT,
	};
	char *t = gen_module(p, sizeof(p) / sizeof(p[0]), &m, 1, true);
	/* the lane of the warp slot: %smid x warps + %warpid, modulo the lanes */
	assert_true(has(t, "mov.u32 %__cb_x3, %warpid;"));
	assert_true(has(t, "mad.lo.u32 %__cb_x6, %__cb_x6, %__cb_x1, %__cb_x3;"));
	assert_true(has(t, "rem.u32 %__cb_x6, %__cb_x6, %__cb_x0;"));
	/* one reservation per warp, checked against the device copy of the tail: nothing of the
	 * reservation or of a drop crosses PCIe (no system scope) */
	assert_true(has(t, "activemask.b32 %__cb_x2;"));
	assert_true(has(t, "ld.global.nc.u64 %__cb_m0, [%__cb_m2+16];")); /* heads */
	assert_true(has(t, "ld.global.nc.u64 %__cb_m8, [%__cb_m2+24];")); /* tails */
	assert_true(has(t, "ld.global.nc.u64 %__cb_m7, [%__cb_m2+32];")); /* drops */
	assert_true(has(t, "atom.global.cas.b64 %__cb_m7, [%__cb_m0], %__cb_m3, %__cb_m6;"));
	assert_true(has(t, "ld.volatile.global.u64 %__cb_m7, [%__cb_m8];"));
	assert_false(has(t, ".sys."));
	assert_true(has(t, "shfl.sync.idx.b32 %__cb_x7, %__cb_x7, %__cb_x5, 31, %__cb_x2;"));
	/* the batch: 16 + k x 16 bytes, rounded to 16 */
	assert_true(has(t, "mul.wide.u32 %__cb_m5, %__cb_x4, 16;"));
	assert_true(has(t, "add.s64 %__cb_m5, %__cb_m5, 31;"));
	/* field-major: rank r's word at r x 8, each word's row k x 8 further on */
	assert_true(has(t, "mul.wide.u32 %__cb_m5, %__cb_x3, 8;"));
	assert_true(has(t, "mul.wide.u32 %__cb_m9, %__cb_x4, 8;"));
	assert_int_equal(count(t, "st.global.u64 [%__cb_m5+16], %__cb_m8;"), 2);
	assert_int_equal(count(t, "add.s64 %__cb_m5, %__cb_m5, %__cb_m9;"), 1);
	/* commit: bar.warp.sync, then one fence and the commit words, by the leader */
	const char *bar = strstr(t, "bar.warp.sync %__cb_x2;"), *fence = strstr(t, "membar.sys;");
	assert_non_null(bar);
	assert_non_null(fence);
	assert_true(bar < fence);
	assert_int_equal(count(t, "membar.sys;"), 1);
	assert_true(has(t, "@%__cb_q0 st.volatile.global.v2.u32 [%__cb_m6], {%__cb_x4, 12};"));
	assert_true(has(t, "@%__cb_q0 st.volatile.global.u64 [%__cb_m6+8], %__cb_m8;"));
	assert_true(strstr(t, "@%__cb_q0 st.volatile.global.u64 [%__cb_m6+8], %__cb_m8;") > fence);
	/* the padding's commit word, and a dropped batch's records counted once, by the leader */
	assert_true(has(t, "@%__cb_q1 st.volatile.global.u64 [%__cb_m5+8], %__cb_m8;"));
	assert_true(has(t, "@%__cb_q0 red.global.add.u64 [%__cb_m7], %__cb_m6;"));
	free(t);
}

/* kernelretsnoop's record (48 bytes): six contiguous warp-wide stores, still one fence. */
static void test_ringbuf_output_48(void **state)
{
	(void)state;
	struct vm_map_def m = {.name = "rb", .type = CUBPF_MAP_GPU_RINGBUF, .max_entries = 1 << 22};
	const struct bpf_insn p[] = {
		ST_DW(10, -48, 1), ST_DW(10, -40, 2), ST_DW(10, -32, 3),
		ST_DW(10, -24, 4), ST_DW(10, -16, 5), ST_DW(10, -8, 6),
		LDDW_MAP(1, 0),
		MOV64X(2, 10),
		ADD64K(2, -48),
		MOV64K(3, 48),
		MOV64K(4, 0),
		CALL(CUBPF_FN_ringbuf_output),
		EXIT,
	};
	char *t = gen_module(p, sizeof(p) / sizeof(p[0]), &m, 1, true);
	assert_true(has(t, "mul.wide.u32 %__cb_m5, %__cb_x4, 48;"));
	assert_int_equal(count(t, "st.global.u64 [%__cb_m5+16], %__cb_m8;"), 6);
	assert_int_equal(count(t, "add.s64 %__cb_m5, %__cb_m5, %__cb_m9;"), 5);
	assert_int_equal(count(t, "membar.sys;"), 1);
	assert_int_equal(count(t, "bar.warp.sync"), 1);
	free(t);
}

/* The register file arithmetic behind the launchability limit (sm_70..sm_90: 65536 registers
 * per block, 8 per thread granularity). */
static void test_register_limits(void **state)
{
	(void)state;
	assert_int_equal(ptx_max_block(0), 1024);
	assert_int_equal(ptx_max_block(64), 1024);
	assert_int_equal(ptx_max_block(65), 896);  /* 72 per thread: 28 warps */
	assert_int_equal(ptx_max_block(128), 512);
	assert_int_equal(ptx_max_block(255), 256);
	assert_int_equal(ptx_register_limit(40, 32), 0);   /* both allow 1024 */
	assert_int_equal(ptx_register_limit(70, 60), 64);  /* the original allowed 1024 */
	assert_int_equal(ptx_register_limit(70, -1), 64);  /* unknown original: any block */
	assert_int_equal(ptx_register_limit(130, 100), 104); /* 608 threads: 104 per thread at most */
	assert_int_equal(ptx_register_limit(130, 128), 128);
	assert_int_equal(ptx_register_limit(127, 121), 0); /* both round to 128: 512 threads */
	assert_int_equal(ptx_register_limit(129, 121), 128); /* 136 per thread: 480 threads */
}

static void test_map_refusals(void **state)
{
	(void)state;
	struct vm_map_def rb = {.name = "rb", .type = CUBPF_MAP_RINGBUF, .max_entries = 4096};
	const struct bpf_insn p[] = {
		INSN(BPF_LDX | BPF_MEM | BPF_DW, 3, 1, 0, 0), /* runtime size */
		ST_DW(10, -8, 7),
		LDDW_MAP(1, 0),
		MOV64X(2, 10),
		ADD64K(2, -8),
		MOV64K(4, 0),
		CALL(CUBPF_FN_ringbuf_output),
		EXIT,
	};
	struct ptx_prog pp = {.name = "t", .kind = VM_PROG_RAW, .insns = p, .insn_cnt = 9};
	struct ptx_buf b = {0};
	char err[PTX_ERRLEN];
	assert_int_equal(ptx_gen_raw_func(&pp, &rb, 1, "f", &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "record size must be a constant"));
	ptx_buf_free(&b);
	struct vm_map_def h = {.name = "h", .type = CUBPF_MAP_HASH, .key_size = 72,
			       .value_size = 8, .max_entries = 4};
	pp.insns = count_prog, pp.insn_cnt = COUNT_N;
	assert_int_equal(ptx_gen_raw_func(&pp, &h, 1, "f", &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "1 to 64 bytes"));
	ptx_buf_free(&b);
}

/* ---- enable words ---- */

static const char kernel_ptx[] =
	".version 8.0\n.target sm_80\n.address_size 64\n\n"
	".visible .entry k(.param .u64 out)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
	"\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
	"\tmov.u32 %r1, %tid.x;\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";

static uint32_t fixed_id(void *user, const char *mangled)
{
	(void)user, (void)mangled;
	return 5;
}

static void assemble(const char *text, size_t len)
{
	const char *ptxas = getenv("PTXAS");
	if (!ptxas || !*ptxas)
		return;
	char in[] = "/tmp/cubpf-ptxgen-XXXXXX", cmd[1024], log[4096];
	int fd = mkstemp(in);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s -arch=sm_90 %s -o /dev/null 2>&1", ptxas, in);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t k = fread(log, 1, sizeof(log) - 1, p);
	log[k] = 0;
	int st = pclose(p);
	unlink(in);
	if (st)
		fail_msg("does not assemble:\n%s\n%s", log, text);
}

/* Two entry probes and one exit probe: one load of the kernel's word per site, one bit test per
 * program (bit = the program's index), the symbol declared once. */
static void test_enable_words(void **state)
{
	(void)state;
	const struct bpf_insn ret0[] = {MOV64K(0, 0), EXIT};
	struct ptx_prog progs[3] = {
		{.name = "a", .kind = VM_PROG_KPROBE, .attach = "*", .insns = ret0, .insn_cnt = 2},
		{.name = "b", .kind = VM_PROG_KPROBE, .attach = "*", .insns = ret0, .insn_cnt = 2},
		{.name = "c", .kind = VM_PROG_KRETPROBE, .attach = "*", .insns = ret0, .insn_cnt = 2},
	};
	struct ptx_inject_opts o = {.progs = progs, .prog_cnt = 3, .kernel_id = fixed_id,
				    .enable_words = true};
	char *out, err[PTX_ERRLEN];
	size_t n;
	struct ptx_inject_report rep;
	if (ptx_instrument(kernel_ptx, sizeof(kernel_ptx) - 1, &o, &out, &n, &rep, err, sizeof(err)))
		fail_msg("%s", err);
	const char *decl = ".visible .const .align 8 .u64 __cubpf_enable;";
	assert_non_null(strstr(out, decl));
	assert_null(strstr(strstr(out, decl) + 1, decl));
	int loads = 0;
	for (const char *q = out; (q = strstr(q, "ld.global.u32 %__cb_en, [%__cb_t0+20];")); q++)
		loads++;
	assert_int_equal(loads, 2); /* entry site, exit site */
	assert_true(has(out, "and.b32 %__cb_w0, %__cb_en, 1;"));
	assert_true(has(out, "and.b32 %__cb_w0, %__cb_en, 2;"));
	assert_true(has(out, "and.b32 %__cb_w0, %__cb_en, 4;"));
	assemble(out, n);
	free(out);
	/* off by default: nothing reads the words */
	o.enable_words = false;
	if (ptx_instrument(kernel_ptx, sizeof(kernel_ptx) - 1, &o, &out, &n, &rep, err, sizeof(err)))
		fail_msg("%s", err);
	assert_null(strstr(out, "__cubpf_enable"));
	free(out);
}

/* ---- warp-level helpers ---- */

/* get_active_count, is_warp_leader, warp_count_unique (a fast path, then match.any): the
 * warp-level instructions, each result in r0, and the whole assembles (ptxas, sm_80). */
static void test_warp_helpers(void **state)
{
	(void)state;
	const struct bpf_insn prog[] = {
		CALL(CUBPF_FN_get_active_count), MOV64X(6, 0),
		CALL(CUBPF_FN_is_warp_leader), ADD64K(0, 0), INSN(BPF_ALU64 | BPF_ADD | BPF_X, 6, 0, 0, 0),
		MOV64X(1, 6), CALL(CUBPF_FN_warp_count_unique),
		INSN(BPF_ALU64 | BPF_ADD | BPF_X, 0, 6, 0, 0), EXIT,
	};
	char *t = gen_module(prog, sizeof(prog) / sizeof(prog[0]), NULL, 0, false);
	assert_true(has(t, "popc.b32 %__cb_w0, %__cb_w0;"));
	assert_true(has(t, "mov.u32 %__cb_w1, %lanemask_lt;"));
	assert_true(has(t, "selp.u64 %__cb_r0, 1, 0, %__cb_p1;"));
	assert_true(has(t, "match.any.sync.b64 %__cb_w1, %__cb_r1, %__cb_w0;"));
	assert_true(has(t, "vote.sync.ballot.b32 %__cb_w3, %__cb_p1, %__cb_w0;"));
	/* warp_count_unique's fast path for whole warps of rising values, before match.any */
	const char *fast = strstr(t, "shfl.sync.up.b32 %__cb_w3, %__cb_w1, 1, 0, 0xffffffff;");
	assert_non_null(fast);
	assert_true(has(fast, "vote.sync.all.pred %__cb_p1, %__cb_p1, 0xffffffff;"));
	assert_true(has(fast, "match.any.sync.b64"));
	free(t);
}

/* ---- the map programs on tests/ptx/ptxsim_maps.py (semantics, one thread at a time) ---- */

static void add_func(struct ptx_buf *b, const char *name, const struct bpf_insn *insns,
		     uint32_t n, const struct vm_map_def *m)
{
	struct ptx_prog p = {.name = name, .kind = VM_PROG_RAW, .insns = insns, .insn_cnt = n};
	char err[PTX_ERRLEN];
	if (ptx_gen_raw_func_opt(&p, m, 1, name, true, b, err, sizeof(err)))
		fail_msg("%s: %s", name, err);
}

static void test_ptxsim_maps(void **state)
{
	(void)state;
	struct vm_map_def pc = {.name = "pc", .type = CUBPF_MAP_PERCPU_ARRAY, .key_size = 4,
				.value_size = 8, .max_entries = 3};
	struct vm_map_def pt = {.name = "pt", .type = CUBPF_MAP_PERTHREAD_ARRAY, .key_size = 4,
				.value_size = 8, .max_entries = 2};
	struct vm_map_def h = {.name = "h", .type = CUBPF_MAP_HASH, .key_size = 8,
			       .value_size = 8, .max_entries = 100};
	struct vm_map_def hs = h;
	hs.max_entries = 2;
	struct vm_map_def rb = {.name = "rb", .type = CUBPF_MAP_RINGBUF, .max_entries = 4096};
	const struct bpf_insn rbp[] = {
		ST_DW(10, -16, 7), ST_W(10, -8, 9),
		LDDW_MAP(1, 0), MOV64X(2, 10), ADD64K(2, -16), MOV64K(3, 12), MOV64K(4, 0),
		CALL(CUBPF_FN_ringbuf_output),
		EXIT,
	};
	struct ptx_buf b = {0};
	ptx_buf_printf(&b, ".version 8.0\n.target sm_80\n.address_size 64\n");
	ptx_gen_module_decls(1, false, &b);
	add_func(&b, "percpu", count_prog, COUNT_N, &pc);
	add_func(&b, "perthread", count_prog, COUNT_N, &pt);
	add_func(&b, "hash", hash_prog, HASH_N, &h);
	add_func(&b, "hash_small", hash_prog, HASH_N, &hs);
	add_func(&b, "ringbuf", rbp, sizeof(rbp) / sizeof(rbp[0]), &rb);
	assert_false(b.oom);
	char tmp[] = "/tmp/cubpf-ptxsim-maps-XXXXXX", cmd[256], line[512], last[512] = "";
	int fd = mkstemp(tmp);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "python3 tests/ptx/ptxsim_maps.py %s 2>&1", tmp);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		print_message("%s", line);
		snprintf(last, sizeof(last), "%s", line);
	}
	int st = pclose(p);
	unlink(tmp);
	ptx_buf_free(&b);
	if (st != 0 || !strstr(last, " passed, 0 failed"))
		fail_msg("ptxsim_maps (needs python3): %s", last[0] ? last : "no output");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unaligned_split),
		cmocka_unit_test(test_stack_unaligned),
		cmocka_unit_test(test_mapval_aligned),
		cmocka_unit_test(test_percpu_lookup),
		cmocka_unit_test(test_perthread_lookup),
		cmocka_unit_test(test_hash_ops),
		cmocka_unit_test(test_hash_key_chunks),
		cmocka_unit_test(test_ringbuf_output),
		cmocka_unit_test(test_ringbuf_output_48),
		cmocka_unit_test(test_map_refusals),
		cmocka_unit_test(test_register_limits),
		cmocka_unit_test(test_enable_words),
		cmocka_unit_test(test_warp_helpers),
		cmocka_unit_test(test_ptxsim_maps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
