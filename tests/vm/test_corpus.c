/* The issue-14 regression corpus: programs that once got past the verifier (or crashed it) and
 * must now be rejected with a reason, and safe shapes that must be accepted (and are run on the
 * interpreter, whose result is compared).  Programs in C live in tests/vm/corpus/, one file
 * per class of hole (cNN_what.bpf.c), built at test time with clang; shapes C cannot express
 * are instruction arrays below.  Every program of a corpus file must be listed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/vm/tests.h"

/* ---- programs in C ------------------------------------------------------------------------------ */

#define NO_RUN UINT64_MAX

struct ccase {
	const char *file, *prog;
	const char *expect;      /* substring of the rejection; NULL: must verify */
	uint64_t result;         /* accepted programs: r0 on a zeroed context (NO_RUN: not run) */
};

static const struct ccase ccases[] = {
	/* 1: pointer arithmetic */
	{"c01_ptr_arith", "rej_sub_two_values", "subtraction of unrelated pointers", 0},
	{"c01_ptr_arith", "rej_sub_value_stack", "subtraction of unrelated pointers", 0},
	{"c01_ptr_arith", "rej_unchecked_offset", "min value is negative", 0},
	{"c01_ptr_arith", "ok_sub_same_value", NULL, 64},
	{"c01_ptr_arith", "ok_bounded_offset", NULL, 7},
	/* 2: pointer leaks */
	{"c02_leaks", "rej_printk_pointer", "leaks addr into helper bpf_trace_printk", 0},
	{"c02_leaks", "rej_warp_unique_pointer", "leaks addr into helper bpf_warp_count_unique", 0},
	{"c02_leaks", "rej_compare_pointer", "pointer comparison prohibited", 0},
	{"c02_leaks", "rej_ringbuf_after_submit", "no longer valid", 0},
	{"c02_leaks", "rej_partial_overwrite", "no longer valid", 0},
	{"c02_leaks", "ok_scalars_out", NULL, NO_RUN},
	/* 3: uninitialised reads */
	{"c03_uninit", "rej_probe_read_var_size", "fp-72 is not initialised", 0},
	{"c03_uninit", "rej_printk_unset_arg", "bpf_trace_printk argument 2 is not set", 0},
	{"c03_uninit", "rej_partly_written", "fp-56 is not initialised", 0},
	{"c03_uninit", "ok_probe_read_min_size", NULL, 0},
	/* 4: frame lifetimes */
	{"c04_frames", "rej_stale_frame", "the stack of a function that returned", 0},
	{"c04_frames", "ok_callee_writes_caller", NULL, 42},
	/* 5: atomics */
	{"c05_atomics", "rej_atomic64_off4", "R0+4 is not 8-byte aligned", 0},
	{"c05_atomics", "rej_atomic64_var4", "is not 8-byte aligned", 0},
	{"c05_atomics", "rej_atomic32_off2", "R0+2 is not 4-byte aligned", 0},
	{"c05_atomics", "ok_atomics_aligned", NULL, 3},
	/* 9: per-kind rules */
	{"c09_gpu_rules", "rej_gpu_record_too_big", "must be a constant of 1 to 4096 bytes", 0},
	{"c09_gpu_rules", "rej_gpu_record_var_size", "must be a constant of 1 to 4096 bytes", 0},
	{"c09_gpu_rules", "rej_gpu_ctx_spill", "context pointer cannot be spilled", 0},
	{"c09_gpu_rules", "rej_gpu_hash_key_80", "80-byte keys: kprobe programs take 1 to 64", 0},
	{"c09_gpu_rules", "rej_host_reserve_gpu_ring", "is a GPU ring buffer: uprobe programs", 0},
	{"c09_gpu_rules", "ok_gpu_record_4096", NULL, 1},
	/* 11: printk formats, one grammar (issue 27) */
	{"c11_printk", "rej_printk_width_ptr", "leaks addr into helper bpf_trace_printk", 0},
	{"c11_printk", "rej_printk_alt_ptr", "leaks addr into helper bpf_trace_printk", 0},
	{"c11_printk", "rej_printk_p_ptr", "leaks addr into helper bpf_trace_printk", 0},
	{"c11_printk", "rej_printk_h_unset", "bpf_trace_printk argument 1 is not set", 0},
	{"c11_printk", "rej_printk_float", "format at offset 3: '%a' is not a printk conversion", 0},
	{"c11_printk", "rej_printk_star", "format at offset 1: '*' width", 0},
	{"c11_printk", "rej_printk_n", "format at offset 3: '%n' is not a printk conversion", 0},
	{"c11_printk", "rej_printk_lc", "format at offset 0: a length modifier on %c", 0},
	{"c11_printk", "rej_printk_wide", "format at offset 1: width above 64", 0},
	{"c11_printk", "rej_printk_four", "format at offset 9: more than 3 conversions", 0},
	{"c11_printk", "rej_printk_trailing", "format at offset 4: the conversion at the end", 0},
	{"c11_printk", "ok_printk_shapes", NULL, 0},
	/* 12: loops with branches, slot liveness in pruning (issue 27) */
	{"c12_loops", "ok_loop_cond_update", NULL, 0},
	{"c12_loops", "ok_loop_lookup_or_print", NULL, 1},
	/* 10: precision */
	{"c10_precision", "ok_zero_loop", NULL, 5},
	{"c10_precision", "ok_pointer_walk", NULL, 18},
	{"c10_precision", "ok_value_loop", NULL, 28},
	/* 11: helper arguments against their objects */
	{"c11_helper_args", "rej_read_ctx_past_end", "invalid bpf_context access off=152 size=16", 0},
	{"c11_helper_args", "rej_read_value_minus_8", "invalid access to map value, value_size=64 "
	 "off=-8 size=8", 0},
	{"c11_helper_args", "rej_read_record_past_end", "invalid access to ring buffer record, "
	 "size=16 off=8 size=16", 0},
	{"c11_helper_args", "rej_read_var_size_past_value", "invalid access to map value, "
	 "value_size=64 off=8 size=64", 0},
	{"c11_helper_args", "rej_write_record_past_end", "invalid access to ring buffer record, "
	 "size=16 off=8 size=16", 0},
	{"c11_helper_args", "rej_output_ctx_tail", "invalid bpf_context access off=152 size=16", 0},
	{"c11_helper_args", "rej_update_value_tail", "invalid access to map value, value_size=64 "
	 "off=32 size=64", 0},
	{"c11_helper_args", "ok_reads_inside", NULL, 12},
};

#define NCCASES (sizeof(ccases) / sizeof(ccases[0]))

static int find_prog(const struct vm_object *obj, const char *name)
{
	for (uint32_t i = 0; i < obj->prog_cnt; i++)
		if (!strcmp(obj->progs[i].name, name))
			return (int)i;
	return -1;
}

static uint64_t run_prog(const struct vm_object *obj, uint32_t prog)
{
	char err[VM_ERRLEN];
	uint64_t r0 = 0;
	struct cubpf_kernel_ctx kctx = {0};
	struct cubpf_api_ctx actx = {0};
	bool host = obj->progs[prog].kind == VM_PROG_UPROBE ||
		    obj->progs[prog].kind == VM_PROG_URETPROBE;
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	if (!rt)
		fail_msg("%s: %s", obj->progs[prog].name, err);
	struct vm_exec *ex = vm_exec_new(rt, prog, err, sizeof(err));
	if (!ex)
		fail_msg("%s: %s", obj->progs[prog].name, err);
	int rc = host ? vm_exec_run(ex, &actx, sizeof(actx), &r0, err, sizeof(err))
		      : vm_exec_run(ex, &kctx, sizeof(kctx), &r0, err, sizeof(err));
	if (rc != 0)
		fail_msg("%s: %s", obj->progs[prog].name, err);
	vm_exec_free(ex);
	vm_runtime_free(rt);
	return r0;
}

static void check_c_file(const char *file)
{
	char path[256], err[VM_ERRLEN];
	snprintf(path, sizeof(path), "tests/vm/corpus/%s.bpf.c", file);
	struct vm_object *obj;
	const char *o = test_compile(path);
	if (vm_object_load_file(o, &obj, err, sizeof(err)) < 0)
		fail_msg("%s: %s", o, err);
	char *log = malloc(1 << 16);
	assert_non_null(log);
	uint32_t listed = 0;
	for (size_t i = 0; i < NCCASES; i++) {
		const struct ccase *c = &ccases[i];
		if (strcmp(c->file, file))
			continue;
		int p = find_prog(obj, c->prog);
		if (p < 0)
			fail_msg("%s has no program '%s'", file, c->prog);
		listed++;
		int rc = vm_verify(obj, (uint32_t)p, NULL, NULL, log, 1 << 16);
		if (c->expect && rc == 0)
			fail_msg("%s/%s: accepted, expected rejection with '%s'", file, c->prog, c->expect);
		if (c->expect && !strstr(log, c->expect))
			fail_msg("%s/%s: rejected, but the log lacks '%s':\n%s", file, c->prog, c->expect,
				 log);
		if (!c->expect && rc != 0)
			fail_msg("%s/%s: rejected:\n%s", file, c->prog, log);
		if (!c->expect && c->result != NO_RUN) {
			uint64_t r0 = run_prog(obj, (uint32_t)p);
			if (r0 != c->result)
				fail_msg("%s/%s: returned %llu, expected %llu", file, c->prog,
					 (unsigned long long)r0, (unsigned long long)c->result);
		}
	}
	/* a program added to a corpus file without an expectation would test nothing */
	if (listed != obj->prog_cnt)
		fail_msg("%s: %u programs, %u listed in tests/vm/test_corpus.c", file, obj->prog_cnt,
			 listed);
	free(log);
	vm_object_free(obj);
}

static void test_c_corpus(void **state)
{
	check_c_file(*state);
}

/* ---- instruction arrays -------------------------------------------------------------------------- */

struct acase {
	const char *name;
	enum vm_prog_kind kind;
	const char *expect;            /* NULL: must verify and return `result` */
	const struct bpf_insn *insns;
	uint32_t n;
	const uint32_t *subprogs;
	uint32_t nsub;
	uint64_t result;
};

#define INSNS(...) (const struct bpf_insn[]){__VA_ARGS__}, \
	sizeof((const struct bpf_insn[]){__VA_ARGS__}) / sizeof(struct bpf_insn)
#define SUBS(...) (const uint32_t[]){__VA_ARGS__}, \
	sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)
#define REJECT(nm, k, why, ...) {nm, k, why, INSNS(__VA_ARGS__), NULL, 0, 0}
#define PASS_RUN(nm, k, res, ...) {nm, k, NULL, INSNS(__VA_ARGS__), NULL, 0, res}

#define KP VM_PROG_KPROBE
#define UP VM_PROG_UPROBE

/* r0 = bpf_map_lookup_elem(m, &(u32)K at fp-4) */
#define LOOKUP_K(m, k) ST(BPF_W, 10, -4, k), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), \
		       LD_MAP(1, m), CALL(CUBPF_FN_map_lookup_elem)
#define RET0 MOV64_IMM(0, 0), EXIT()

static const struct acase acases[] = {
	/* 1: two lookups of one hash map are two values: no difference between them */
	REJECT("a1_sub_two_lookups", KP, "subtraction of unrelated pointers",
	       LOOKUP_K(M_HASH, 0), JMP_IMM(BPF_JEQ, 0, 0, 9), MOV64_REG(6, 0),
	       LOOKUP_K(M_HASH, 1), JMP_IMM(BPF_JEQ, 0, 0, 2), ALU64_REG(BPF_SUB, 6, 0), RET0),
	/* 1: r7 is r6 on one path, another lookup on the other: the path through the other
	 * lookup must not be pruned by the state of the first (the join at 21 compares which
	 * value each pointer points into) */
	REJECT("a1_sub_after_join", KP, "subtraction of unrelated pointers", MOV64_REG(9, 1),
	       LOOKUP_K(M_HASH, 0), JMP_IMM(BPF_JEQ, 0, 0, 15), MOV64_REG(6, 0),
	       LDX(BPF_W, 2, 9, 0), JMP_IMM(BPF_JNE, 2, 0, 2), MOV64_REG(7, 6), JA(8),
	       LOOKUP_K(M_HASH, 1), JMP_IMM(BPF_JEQ, 0, 0, 3), MOV64_REG(7, 0),
	       ALU64_REG(BPF_SUB, 6, 7), MOV64_IMM(0, 0), EXIT()),
	/* 1: a stack difference is an offset: fp-8 - fp-24 = 16 */
	PASS_RUN("a1_sub_same_frame", KP, 16, MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8),
		 MOV64_REG(3, 10), ALU64_IMM(BPF_ADD, 3, -24), ALU64_REG(BPF_SUB, 2, 3),
		 MOV64_REG(0, 2), EXIT()),
	/* 2: 4 bytes of a spilled pointer overwritten, the other 4 read */
	REJECT("a2_partial_overwrite", KP, "no longer valid", MOV64_REG(2, 10),
	       ALU64_IMM(BPF_ADD, 2, -16), STX(BPF_DW, 10, 2, -8), ST(BPF_W, 10, -8, 0),
	       LDX(BPF_W, 0, 10, -4), EXIT()),
	/* 2: the slot written whole again is plain data */
	PASS_RUN("a2_overwrite_whole", KP, 9, MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -16),
		 STX(BPF_DW, 10, 2, -8), ST(BPF_W, 10, -8, 0), ST(BPF_W, 10, -4, 9),
		 LDX(BPF_W, 0, 10, -4), EXIT()),
	/* 2: the slot is rewritten whole on one path, in part on the other: the join at 10 must
	 * not let the partly overwritten pointer through on the strength of the first path */
	REJECT("a2_poison_after_join", KP, "no longer valid", MOV64_REG(9, 1), MOV64_REG(2, 10),
	       ALU64_IMM(BPF_ADD, 2, -16), STX(BPF_DW, 10, 2, -8), LDX(BPF_W, 3, 9, 0),
	       JMP_IMM(BPF_JNE, 3, 0, 3), ST(BPF_W, 10, -8, 0), ST(BPF_W, 10, -4, 1), JA(1),
	       ST(BPF_W, 10, -8, 0), LDX(BPF_W, 0, 10, -4), EXIT()),
	/* 3 (issue 27): `if r7 & ~15 goto out` leaves r7 in [0, 15] on the fall-through: an offset
	 * into a 16-byte value; ~31 leaves [0, 31], past its end; a 32-bit test says nothing of the
	 * high half, so the 64-bit r7 stays unbounded */
#define JSET_VALUE(test) MOV64_REG(6, 1), LOOKUP_K(M_ARRAY, 0), JMP_IMM(BPF_JEQ, 0, 0, 5), \
		LDX(BPF_DW, 7, 6, 0), test, ALU64_REG(BPF_ADD, 0, 7), LDX(BPF_B, 0, 0, 0), EXIT(), RET0
	PASS_RUN("a3_jset_bounds", UP, 0, JSET_VALUE(JMP_IMM(BPF_JSET, 7, ~15, 3))),
	REJECT("a3_jset_too_wide", UP, "invalid access to map value",
	       JSET_VALUE(JMP_IMM(BPF_JSET, 7, ~31, 3))),
	REJECT("a3_jset32_high_half", UP, "min value is negative",
	       JSET_VALUE(I(BPF_JMP32 | BPF_JSET | BPF_K, 7, 0, 3, ~15))),
	/* 12 (issue 27): pruning compares only the stack bytes read later, so a byte read after a
	 * join must be marked read in the state kept there.  The path explored first leaves 0 in
	 * fp-8, the second 100 (or a pointer); the second must not be pruned by the first, whether
	 * the byte is read directly, by a helper or by a callee through a pointer */
#define JOIN_PROLOGUE(second) MOV64_REG(9, 1), ST(BPF_DW, 10, -8, 0), LDX(BPF_W, 2, 9, 0), \
		JMP_IMM(BPF_JNE, 2, 0, 1), JA(2), second, MOV64_IMM(2, 0) /* r2 alike at the join */
#define INDEX_R6 LOOKUP_K(M_ARRAY, 0), JMP_IMM(BPF_JEQ, 0, 0, 3), ALU64_REG(BPF_ADD, 0, 6), \
		LDX(BPF_B, 0, 0, 0), EXIT(), RET0
	REJECT("a12_live_read_after_join", KP, "invalid access to map value",
	       JOIN_PROLOGUE(ST(BPF_DW, 10, -8, 100)), LDX(BPF_DW, 6, 10, -8), INDEX_R6),
	REJECT("a12_live_helper_read", KP, "stack slot fp-8 holds a pointer",
	       JOIN_PROLOGUE(STX(BPF_DW, 10, 10, -8)), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8),
	       LD_MAP(1, M_HASH), CALL(CUBPF_FN_map_lookup_elem), RET0),
	{"a12_live_callee_read", KP, "invalid access to map value",
	 INSNS(JOIN_PROLOGUE(ST(BPF_DW, 10, -8, 100)), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8),
	       CALL_LOCAL(13), MOV64_REG(6, 0), INDEX_R6,
	       LDX(BPF_DW, 0, 1, 0), EXIT()),
	 SUBS(0, 23), 0},
	/* 12: the same shape with the second path's value in bounds is accepted (and run) */
	PASS_RUN("a12_live_join_ok", KP, 0,
		 JOIN_PROLOGUE(ST(BPF_DW, 10, -8, 15)), LDX(BPF_DW, 6, 10, -8), INDEX_R6),
	/* 2: a pointer tested bit by bit */
	REJECT("a2_jset_pointer", KP, "pointer comparison prohibited", MOV64_REG(2, 10),
	       MOV64_IMM(0, 0), JMP_IMM(BPF_JSET, 2, 0x1000, 1), MOV64_IMM(0, 1), EXIT()),
	REJECT("a2_jmp32_pointer", KP, "32-bit comparison of a pointer", MOV64_REG(2, 10),
	       MOV64_IMM(0, 0), I(BPF_JMP32 | BPF_JEQ | BPF_K, 2, 0, 1, 0), MOV64_IMM(0, 1), EXIT()),
	REJECT("a2_pointer_vs_scalar", KP, "pointer comparison prohibited", MOV64_REG(2, 10),
	       LDX(BPF_W, 3, 1, 0), MOV64_IMM(0, 0), JMP_REG(BPF_JGT, 2, 3, 1), MOV64_IMM(0, 1),
	       EXIT()),
	/* 2: a record pointer spilled, the record submitted, the spill read back */
	REJECT("a2_spill_after_submit", UP, "no longer valid", LD_MAP(1, M_RING), MOV64_IMM(2, 16),
	       MOV64_IMM(3, 0), CALL(CUBPF_FN_ringbuf_reserve), JMP_IMM(BPF_JEQ, 0, 0, 6),
	       STX(BPF_DW, 10, 0, -8), MOV64_REG(1, 0), MOV64_IMM(2, 0),
	       CALL(CUBPF_FN_ringbuf_submit), LDX(BPF_DW, 0, 10, -8), EXIT(), RET0),
	/* 2: bpf_probe_read copying a spilled pointer from the stack into a map value */
	REJECT("a2_probe_read_from_stack", UP, "leaks a pointer: stack slot fp-16 holds a pointer",
	       LOOKUP_K(M_ARRAY, 0), JMP_IMM(BPF_JEQ, 0, 0, 7), STX(BPF_DW, 10, 0, -16),
	       MOV64_REG(1, 0), MOV64_IMM(2, 8), MOV64_REG(3, 10), ALU64_IMM(BPF_ADD, 3, -16),
	       CALL(CUBPF_FN_probe_read), RET0),
	/* 3: a format on the stack (content unknown) with only r3 set */
	REJECT("a3_printk_stack_fmt_args", KP, "a format not in .rodata takes all three",
	       ST(BPF_DW, 10, -8, 0x7825), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8),
	       MOV64_IMM(2, 8), MOV64_IMM(3, 1), CALL(CUBPF_FN_trace_printk), RET0),
	/* 3: bpf_probe_read of 0..15 bytes, then 8 bytes read from the buffer */
	REJECT("a3_probe_read_maybe_empty", UP, "fp-16 is not initialised", LDX(BPF_DW, 2, 1, 0),
	       ALU64_IMM(BPF_AND, 2, 15), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -16),
	       MOV64_IMM(3, 0), CALL(CUBPF_FN_probe_read), LDX(BPF_DW, 0, 10, -16), EXIT()),
	/* 4: the callee stores its r10 - 8 into the caller's fp-8; the caller dereferences it
	 * (this shape crashed the verifier: a NULL frame) */
	{"a4_stale_frame_deref", KP, "the stack of a function that returned",
	 INSNS(ST(BPF_DW, 10, -8, 0), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8), CALL_LOCAL(3),
	       LDX(BPF_DW, 1, 10, -8), LDX(BPF_DW, 0, 1, 0), EXIT(),
	       ST(BPF_DW, 10, -8, 7), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8),
	       STX(BPF_DW, 1, 2, 0), MOV64_IMM(0, 0), EXIT()),
	 SUBS(0, 7), 0},
	/* 4: the same through two levels: the innermost frame's pointer, stored in frame 0 */
	{"a4_stale_frame_nested", KP, "the stack of a function that returned",
	 INSNS(ST(BPF_DW, 10, -8, 0), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8), CALL_LOCAL(3),
	       LDX(BPF_DW, 1, 10, -8), LDX(BPF_DW, 0, 1, 0), EXIT(),
	       CALL_LOCAL(1), EXIT(),
	       ST(BPF_DW, 10, -8, 7), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8),
	       STX(BPF_DW, 1, 2, 0), MOV64_IMM(0, 0), EXIT()),
	 SUBS(0, 7, 9), 0},
	/* 4: a function without a result (clang drops unused ones): fine while r0 is unread */
	{"a4_void_function", KP, NULL,
	 INSNS(CALL_LOCAL(2), MOV64_IMM(0, 5), EXIT(), MOV64_IMM(1, 1), EXIT()), SUBS(0, 3), 5},
	{"a4_void_function_read", KP, "R0 !read_ok",
	 INSNS(CALL_LOCAL(1), EXIT(), MOV64_IMM(1, 1), EXIT()), SUBS(0, 2), 0},
	/* 5: a 64-bit atomic at fp-12 */
	REJECT("a5_atomic_stack_misaligned", KP, "is not 8-byte aligned", ST(BPF_DW, 10, -16, 0),
	       ST(BPF_DW, 10, -8, 0), MOV64_IMM(1, 1), ATOMIC(BPF_DW, BPF_ADD, 10, 1, -12), RET0),
	PASS_RUN("a5_atomic_stack_aligned", KP, 1, ST(BPF_DW, 10, -8, 0), MOV64_IMM(1, 1),
		 ATOMIC(BPF_DW, BPF_ADD, 10, 1, -8), LDX(BPF_DW, 0, 10, -8), EXIT()),
	/* 9: a sign-extending context load in a GPU program */
	REJECT("a9_gpu_ctx_ldsx", KP, "sign-extending context loads are not supported",
	       I(BPF_LDX | BPF_W | BPF_MEMSX, 0, 1, 0, 0), EXIT()),
	/* 9: the context given to a helper in a GPU program */
	REJECT("a9_gpu_ctx_to_helper", KP, "the context cannot be passed to helpers",
	       MOV64_REG(3, 1), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8), MOV64_IMM(2, 8),
	       CALL(CUBPF_FN_probe_read), RET0),
	/* 9: a context pointer spilled in a GPU program */
	REJECT("a9_gpu_ctx_spill", KP, "context pointer cannot be spilled",
	       STX(BPF_DW, 10, 1, -8), RET0),
	/* 9: the context compared with 0 in a GPU program; on the host the outcome is known */
	REJECT("a9_gpu_ctx_null_check", KP, "context pointer cannot be compared",
	       MOV64_IMM(0, 0), JMP_IMM(BPF_JNE, 1, 0, 1), MOV64_IMM(0, 1), EXIT()),
	PASS_RUN("a9_host_ctx_null_check", UP, 0, MOV64_IMM(0, 0), JMP_IMM(BPF_JNE, 1, 0, 1),
		 MOV64_IMM(0, 1), EXIT()),
	/* 9 (issue 27): the context plus a constant, read back (ntid_z at 8 + 12): verified and
	 * compiled (tests/ptx/test_ptx_refusals.c; the code generator refused the addition) */
	PASS_RUN("a9_gpu_ctx_plus_k", KP, 0, ALU64_IMM(BPF_ADD, 1, 8), LDX(BPF_W, 0, 1, 12), EXIT()),
	/* 9: the context plus a register the verifier knows constant, the code generator not */
	REJECT("a9_gpu_ctx_plus_reg", KP, "context pointer + register is not compiled",
	       LDX(BPF_W, 2, 1, 0), JMP_IMM(BPF_JNE, 2, 8, 3), ALU64_REG(BPF_ADD, 1, 2),
	       LDX(BPF_W, 0, 1, 0), EXIT(), RET0),
	PASS_RUN("a9_host_ctx_plus_reg", UP, 0, LDX(BPF_DW, 2, 1, 0), JMP_IMM(BPF_JNE, 2, 8, 3),
		 ALU64_REG(BPF_ADD, 1, 2), LDX(BPF_DW, 0, 1, 0), EXIT(), RET0),
	/* 9: a function returning the context, or a map, to its caller (the caller loaded
	 * through a register the generated code never set) */
	{"a9_gpu_returns_ctx", KP, "a function returns the context pointer",
	 INSNS(CALL_LOCAL(2), LDX(BPF_W, 0, 0, 0), EXIT(), MOV64_REG(0, 1), EXIT()), SUBS(0, 3), 0},
	{"a9_gpu_returns_map", KP, "a function returns the map pointer",
	 INSNS(CALL_LOCAL(7), MOV64_REG(1, 0), ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10),
	       ALU64_IMM(BPF_ADD, 2, -4), CALL(CUBPF_FN_map_lookup_elem), RET0, LD_MAP(0, M_ARRAY),
	       EXIT()), SUBS(0, 8), 0},
	{"a9_host_returns_ctx", UP, NULL,
	 INSNS(CALL_LOCAL(2), LDX(BPF_DW, 0, 0, 0), EXIT(), MOV64_REG(0, 1), EXIT()), SUBS(0, 3), 0},
	/* 9: code behind a branch the walk proved never taken (r2 & 1 > 1): the code generator
	 * compiles it all the same, with none of the walk's rules applied (here r1 = 5, loaded) */
	REJECT("a9_gpu_ctx_dead_branch", KP, "no path the verifier walks reaches this instruction",
	       LDX(BPF_W, 2, 1, 0), ALU64_IMM(BPF_AND, 2, 1), JMP_IMM(BPF_JGT, 2, 1, 1), JA(1),
	       MOV64_IMM(1, 5), LDX(BPF_W, 0, 1, 0), EXIT()),
	/* 9: every instruction walked, but the never-taken edge 3 -> 6 brings r6 = 5 to the join
	 * where the walk's path brings the context: the generator's join mixes them */
	REJECT("a9_gpu_ctx_dead_edge", KP, "the code generator joins here", LDX(BPF_W, 2, 1, 0),
	       ALU64_IMM(BPF_AND, 2, 1), MOV64_IMM(6, 5), JMP_IMM(BPF_JGT, 2, 1, 2), MOV64_REG(6, 1),
	       MOV64_IMM(0, 0), LDX(BPF_W, 0, 6, 0), EXIT()),
	/* 9: a record size constant to the walk's ranges (r0 narrowed to 5), not to the generator */
	REJECT("a9_gpu_record_size_by_range", KP, "a constant the code generator sees",
	       LDX(BPF_W, 3, 1, 0), JMP_IMM(BPF_JNE, 3, 5, 7), ST(BPF_DW, 10, -8, 0),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8), LD_MAP(1, M_RING), MOV64_IMM(4, 0),
	       CALL(CUBPF_FN_ringbuf_output), RET0),
	PASS_RUN("a9_host_ctx_dead_branch", UP, 0, LDX(BPF_DW, 2, 1, 0), ALU64_IMM(BPF_AND, 2, 1),
		 JMP_IMM(BPF_JGT, 2, 1, 1), JA(1), MOV64_IMM(1, 5), LDX(BPF_DW, 0, 1, 0), EXIT()),
	/* 9: a map pointer spilled and filled before its call */
	REJECT("a9_gpu_map_ptr_spill", KP, "a map pointer cannot be spilled", LD_MAP(6, M_ARRAY),
	       STX(BPF_DW, 10, 6, -16), ST(BPF_W, 10, -4, 0), LDX(BPF_DW, 1, 10, -16),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), CALL(CUBPF_FN_map_lookup_elem), RET0),
	/* 9: a printk format on the stack (its conversions unknown when the code is generated) */
	REJECT("a9_gpu_printk_stack_fmt", KP, "format of bpf_trace_printk must be a constant",
	       ST(BPF_DW, 10, -8, 0x6968), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8),
	       MOV64_IMM(2, 8), MOV64_IMM(3, 0), MOV64_IMM(4, 0), MOV64_IMM(5, 0),
	       CALL(CUBPF_FN_trace_printk), RET0),
	/* 9: scalar + context in a GPU program */
	REJECT("a9_gpu_scalar_plus_ctx", KP, "scalar + context pointer", MOV64_IMM(2, 4),
	       ALU64_REG(BPF_ADD, 2, 1), LDX(BPF_W, 0, 2, 0), EXIT()),
	/* 9: a register that is the context on one path and a map value on the other, read
	 * after the join (the code generator's analysis joins paths); the host has no such rule */
	REJECT("a9_gpu_ctx_or_value", KP, "R6 is the context pointer on one path and a map_value",
	       MOV64_REG(9, 1), LD_MAP_VALUE(6, M_BSS, 0), LDX(BPF_W, 2, 9, 0),
	       JMP_IMM(BPF_JNE, 2, 0, 1), MOV64_REG(6, 9), LDX(BPF_W, 0, 6, 0), EXIT()),
	PASS_RUN("a9_host_ctx_or_value", UP, 0, MOV64_REG(9, 1), LD_MAP_VALUE(6, M_BSS, 0),
		 LDX(BPF_DW, 2, 9, 0), JMP_IMM(BPF_JNE, 2, 0, 1), MOV64_REG(6, 9),
		 LDX(BPF_DW, 0, 6, 0), EXIT()),
	/* 9: a lookup in one of two maps chosen on a branch */
	REJECT("a9_gpu_map_chosen", KP, "must name one map per call",
	       LDX(BPF_W, 2, 1, 0), LD_MAP(1, M_ARRAY), JMP_IMM(BPF_JNE, 2, 0, 2), LD_MAP(1, M_BSS),
	       ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4),
	       CALL(CUBPF_FN_map_lookup_elem), RET0),
	/* 9: the context at two offsets in one register after a join */
	REJECT("a9_gpu_ctx_two_offsets", KP, "the context pointer at two offsets",
	       MOV64_REG(6, 1), LDX(BPF_W, 2, 1, 0), JMP_IMM(BPF_JNE, 2, 0, 1),
	       ALU64_IMM(BPF_ADD, 6, 4), LDX(BPF_W, 0, 6, 0), EXIT()),
	/* 10: a pointer loop over a stack buffer, compared with its end */
	PASS_RUN("a10_pointer_loop", KP, 4, MOV64_REG(1, 10), MOV64_REG(2, 10),
		 ALU64_IMM(BPF_ADD, 2, -32), ST(BPF_DW, 2, 0, 1), ALU64_IMM(BPF_ADD, 2, 8),
		 JMP_REG(BPF_JGT, 1, 2, -3), LDX(BPF_DW, 0, 10, -32), LDX(BPF_DW, 3, 10, -24),
		 ALU64_REG(BPF_ADD, 0, 3), LDX(BPF_DW, 3, 10, -16), ALU64_REG(BPF_ADD, 0, 3),
		 LDX(BPF_DW, 3, 10, -8), ALU64_REG(BPF_ADD, 0, 3), EXIT()),
};

#define NACASES (sizeof(acases) / sizeof(acases[0]))

static void test_asm_case(void **state)
{
	const struct acase *c = *state;
	struct vm_object *obj = test_object(c->insns, c->n, c->kind, c->subprogs, c->nsub);
	char log[8192];
	int rc = vm_verify(obj, 0, NULL, NULL, log, sizeof(log));
	if (c->expect && rc == 0)
		fail_msg("%s: accepted, expected rejection with '%s'", c->name, c->expect);
	if (c->expect && !strstr(log, c->expect))
		fail_msg("%s: rejected, but the log lacks '%s':\n%s", c->name, c->expect, log);
	if (!c->expect) {
		if (rc != 0)
			fail_msg("%s: rejected:\n%s", c->name, log);
		uint64_t r0 = run_prog(obj, 0);
		if (r0 != c->result)
			fail_msg("%s: returned %llu, expected %llu", c->name, (unsigned long long)r0,
				 (unsigned long long)c->result);
	}
	vm_object_free(obj);
}

/* 3 (and 6): a constant format with no NUL in its map: the GPU's vprintf would read past it. */
static void test_printk_no_nul(void **state)
{
	(void)state;
	const struct bpf_insn insns[] = {LD_MAP_VALUE(1, M_RODATA, 4), MOV64_IMM(2, 4),
					 CALL(CUBPF_FN_trace_printk), RET0};
	struct vm_object *obj = test_object(insns, sizeof(insns) / sizeof(insns[0]), KP, NULL, 0);
	char log[8192];
	/* "hello\0..." has its NUL: accepted; 16 bytes of '%' have none: rejected */
	if (vm_verify(obj, 0, NULL, NULL, log, sizeof(log)) != 0)
		fail_msg("rejected:\n%s", log);
	memset(obj->maps[M_RODATA].init, '%', obj->maps[M_RODATA].value_size);
	assert_int_equal(vm_verify(obj, 0, NULL, NULL, log, sizeof(log)), -1);
	if (!strstr(log, "format is not NUL-terminated"))
		fail_msg("the log lacks the reason:\n%s", log);
	vm_object_free(obj);
}

static const char *const cfiles[] = {"c01_ptr_arith", "c02_leaks", "c03_uninit", "c04_frames",
				     "c05_atomics", "c09_gpu_rules", "c10_precision",
				     "c11_helper_args",
				     "c11_printk", "c12_loops"};

size_t corpus_tests(struct CMUnitTest *out, size_t cap)
{
	static char names[NACASES + sizeof(cfiles) / sizeof(cfiles[0])][96];
	size_t n = 0, k = 0;
	for (size_t i = 0; i < sizeof(cfiles) / sizeof(cfiles[0]) && n < cap; i++, k++) {
		snprintf(names[k], sizeof(names[k]), "corpus/c/%s", cfiles[i]);
		out[n++] = (struct CMUnitTest){names[k], test_c_corpus, NULL, NULL, (void *)cfiles[i]};
	}
	out[n++] = (struct CMUnitTest){"corpus/asm/reject/a3_printk_no_nul", test_printk_no_nul,
				       NULL, NULL, NULL};
	for (size_t i = 0; i < NACASES && n < cap; i++, k++) {
		snprintf(names[k], sizeof(names[k]), "corpus/asm/%s/%s",
			 acases[i].expect ? "reject" : "pass", acases[i].name);
		out[n++] = (struct CMUnitTest){names[k], test_asm_case, NULL, NULL, (void *)&acases[i]};
	}
	return n;
}
