/* Host maps, helpers, the interpreter's own behaviour (checked mode, frames, threads) and the
 * disassembler's syntax. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/vm/tests.h"

static struct vm_runtime *runtime(struct vm_object **obj)
{
	const struct bpf_insn ret0[] = {MOV64_IMM(0, 0), EXIT()};
	char err[VM_ERRLEN];
	*obj = test_object(ret0, 2, VM_PROG_KPROBE, NULL, 0);
	struct vm_runtime *rt = vm_runtime_new(*obj, err, sizeof(err));
	if (!rt)
		fail_msg("%s", err);
	return rt;
}

static void test_hash_map(void **state)
{
	(void)state;
	struct vm_object *obj;
	struct vm_runtime *rt = runtime(&obj);
	uint32_t k;
	uint64_t v;
	for (k = 0; k < 16; k++) {
		v = k * 10;
		assert_int_equal(vm_map_update(rt, M_HASH, &k, &v, BPF_NOEXIST), 0);
	}
	k = 100, v = 1;
	assert_int_equal(vm_map_update(rt, M_HASH, &k, &v, BPF_ANY), -1); /* full */
	k = 5;
	assert_int_equal(vm_map_update(rt, M_HASH, &k, &v, BPF_NOEXIST), -1); /* exists */
	assert_int_equal(vm_map_update(rt, M_HASH, &k, &v, BPF_EXIST), 0);
	assert_int_equal(vm_map_lookup(rt, M_HASH, &k, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(vm_map_delete(rt, M_HASH, &k), 0);
	assert_int_equal(vm_map_delete(rt, M_HASH, &k), -1);
	assert_int_equal(vm_map_lookup(rt, M_HASH, &k, &v), -1);
	/* iteration visits the 15 remaining keys once each */
	uint32_t seen = 0, key, next;
	int count = 0;
	for (int rc = vm_map_next_key(rt, M_HASH, NULL, &next); rc == 0;
	     rc = vm_map_next_key(rt, M_HASH, &key, &next)) {
		assert_true(next < 16 && next != 5);
		assert_false(seen & (1u << next));
		seen |= 1u << next;
		key = next;
		count++;
	}
	assert_int_equal(count, 15);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

static void test_array_maps(void **state)
{
	(void)state;
	struct vm_object *obj;
	struct vm_runtime *rt = runtime(&obj);
	uint8_t val[16] = {1, 2, 3};
	uint32_t k = 3;
	assert_int_equal(vm_map_update(rt, M_ARRAY, &k, val, BPF_ANY), 0);
	k = 4;
	assert_int_equal(vm_map_update(rt, M_ARRAY, &k, val, BPF_ANY), -1);
	assert_int_equal(vm_map_delete(rt, M_ARRAY, &k), -1);
	k = 3;
	memset(val, 0, sizeof(val));
	assert_int_equal(vm_map_lookup(rt, M_ARRAY, &k, val), 0);
	assert_int_equal(val[2], 3);
	uint32_t next, count = 0;
	for (int rc = vm_map_next_key(rt, M_ARRAY, NULL, &next); rc == 0;
	     rc = vm_map_next_key(rt, M_ARRAY, &k, &next), count++)
		k = next;
	assert_int_equal(count, 4);
	/* .rodata has its initial contents */
	uint8_t ro[16];
	k = 0;
	assert_int_equal(vm_map_lookup(rt, M_RODATA, &k, ro), 0);
	assert_memory_equal(ro, "hello", 6);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

/* An array map moved into the caller's memory: values carried over, later updates from the
 * host API land there, and what the other side writes there is what lookups see. */
static void test_shared_array(void **state)
{
	(void)state;
	struct vm_object *obj;
	struct vm_runtime *rt = runtime(&obj);
	char err[VM_ERRLEN];
	uint32_t k = 1;
	uint64_t v[2] = {33, 0}, storage[64] = {0}; /* map "a": 4 entries of 16 bytes */
	size_t need = vm_map_array_bytes(&obj->maps[M_ARRAY]);
	assert_int_equal(need, 64);
	assert_int_equal(vm_map_update(rt, M_ARRAY, &k, v, BPF_ANY), 0);
	assert_int_equal(vm_runtime_share_array(rt, M_ARRAY, storage, need - 8, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bytes of 8-byte aligned storage"));
	assert_int_equal(vm_runtime_share_array(rt, M_HASH, storage, need, err, sizeof(err)), -1);
	assert_int_equal(vm_runtime_share_array(rt, M_ARRAY, storage, need, err, sizeof(err)), 0);
	assert_int_equal(storage[2], 33); /* carried over: key 1 at byte 16 */
	k = 2, v[0] = 44;
	assert_int_equal(vm_map_update(rt, M_ARRAY, &k, v, BPF_ANY), 0);
	assert_int_equal(storage[4], 44);
	storage[6] = 55; /* the GPU side writes key 3 */
	k = 3;
	assert_int_equal(vm_map_lookup(rt, M_ARRAY, &k, v), 0);
	assert_int_equal(v[0], 55);
	vm_runtime_free(rt); /* does not free the caller's storage (ASan would say) */
	vm_object_free(obj);
}

static void test_ringbuf_full(void **state)
{
	(void)state;
	struct vm_object *obj;
	struct vm_runtime *rt = runtime(&obj);
	/* a program writes 100-byte records until the 4096-byte ring is full */
	const struct bpf_insn prog[] = {
		MOV64_IMM(6, 0),
		ST(BPF_DW, 10, -8, 0),
		STX(BPF_DW, 10, 6, -104), ST(BPF_DW, 10, -96, 0), ST(BPF_DW, 10, -88, 0),
		ST(BPF_DW, 10, -80, 0), ST(BPF_DW, 10, -72, 0), ST(BPF_DW, 10, -64, 0),
		ST(BPF_DW, 10, -56, 0), ST(BPF_DW, 10, -48, 0), ST(BPF_DW, 10, -40, 0),
		ST(BPF_DW, 10, -32, 0), ST(BPF_DW, 10, -24, 0), ST(BPF_DW, 10, -16, 0),
		MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -104), MOV64_IMM(3, 100), LD_MAP(1, M_RING),
		MOV64_IMM(4, 0), CALL(CUBPF_FN_ringbuf_output), ALU64_IMM(BPF_ADD, 6, 1),
		JMP_IMM(BPF_JLT, 6, 50, -21), MOV64_REG(0, 6), EXIT(),
	};
	char err[VM_ERRLEN], log[4096];
	struct vm_object *p = test_object(prog, sizeof(prog) / sizeof(prog[0]), VM_PROG_KPROBE, NULL, 0);
	if (vm_verify(p, 0, NULL, NULL, log, sizeof(log)))
		fail_msg("%s", log);
	struct vm_runtime *prt = vm_runtime_new(p, err, sizeof(err));
	struct vm_exec *ex = vm_exec_new(prt, 0, err, sizeof(err));
	assert_non_null(ex);
	uint64_t r0;
	struct cubpf_kernel_ctx ctx = {0};
	assert_int_equal(vm_exec_run(ex, &ctx, sizeof(ctx), &r0, err, sizeof(err)), 0);
	assert_int_equal(r0, 50);
	/* 112 bytes each (8-byte header, padded to 8): 36 fit in 4096 */
	uint8_t rec[128];
	size_t n = 0;
	for (uint64_t i = 0; vm_ringbuf_consume(prt, M_RING, rec, sizeof(rec)) == 100; i++, n++) {
		uint64_t seq;
		memcpy(&seq, rec, 8);
		assert_int_equal(seq, i);
	}
	assert_int_equal(n, 4096 / 112);
	vm_exec_free(ex);
	vm_runtime_free(prt);
	vm_object_free(p);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

/* Reserved records: submitted ones reach the consumer in order, discarded ones never do. */
static void test_ringbuf_reserve(void **state)
{
	(void)state;
	const struct bpf_insn prog[] = {
		LD_MAP(1, M_RING), MOV64_IMM(2, 16), MOV64_IMM(3, 0), CALL(CUBPF_FN_ringbuf_reserve),
		JMP_IMM(BPF_JEQ, 0, 0, 5), ST(BPF_DW, 0, 0, 7), ST(BPF_DW, 0, 8, 8), MOV64_REG(1, 0),
		MOV64_IMM(2, 0), CALL(CUBPF_FN_ringbuf_submit),
		LD_MAP(1, M_RING), MOV64_IMM(2, 8), MOV64_IMM(3, 0), CALL(CUBPF_FN_ringbuf_reserve),
		JMP_IMM(BPF_JEQ, 0, 0, 4), ST(BPF_DW, 0, 0, 99), MOV64_REG(1, 0), MOV64_IMM(2, 0),
		CALL(CUBPF_FN_ringbuf_discard),
		MOV64_IMM(0, 0), EXIT(),
	};
	char err[VM_ERRLEN], log[4096];
	struct vm_object *obj = test_object(prog, sizeof(prog) / sizeof(prog[0]), VM_PROG_UPROBE,
					    NULL, 0);
	if (vm_verify(obj, 0, NULL, NULL, log, sizeof(log)))
		fail_msg("%s", log);
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	struct vm_exec *ex = vm_exec_new(rt, 0, err, sizeof(err));
	assert_non_null(ex);
	struct cubpf_api_ctx ctx = {0};
	uint64_t r0, rec[4];
	/* 40 bytes a run (a 24-byte record kept, a 16-byte one discarded): 200 runs overflow */
	for (int i = 0; i < 200; i++)
		assert_int_equal(vm_exec_run(ex, &ctx, sizeof(ctx), &r0, err, sizeof(err)), 0);
	size_t got = 0;
	for (size_t n; (n = vm_ringbuf_consume(rt, M_RING, rec, sizeof(rec))) != 0; got++) {
		assert_int_equal(n, 16);
		assert_int_equal(rec[0], 7);
		assert_int_equal(rec[1], 8);
	}
	assert_true(got >= 4096 / 40 - 1 && got < 200); /* the rest was dropped: the ring was full */
	for (int i = 0; i < 300; i++) { /* drained: it keeps working across wrap-arounds */
		assert_int_equal(vm_exec_run(ex, &ctx, sizeof(ctx), &r0, err, sizeof(err)), 0);
		assert_int_equal(vm_ringbuf_consume(rt, M_RING, rec, sizeof(rec)), 16);
	}
	vm_exec_free(ex);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

struct thread_arg {
	struct vm_exec *ex;
	int runs;
};

static void *hammer(void *p)
{
	struct thread_arg *a = p;
	char err[VM_ERRLEN];
	struct cubpf_kernel_ctx ctx = {0};
	uint64_t r0;
	for (int i = 0; i < a->runs; i++)
		if (vm_exec_run(a->ex, &ctx, sizeof(ctx), &r0, err, sizeof(err)))
			return (void *)1;
	return NULL;
}

/* Concurrent host probes: atomic adds on an array value and hash-map inserts stay exact. */
static void test_threads(void **state)
{
	(void)state;
	const struct bpf_insn prog[] = {
		/* a[0].u64[0] += 1 atomically */
		ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4),
		LD_MAP(1, M_ARRAY), CALL(CUBPF_FN_map_lookup_elem), JMP_IMM(BPF_JEQ, 0, 0, 2),
		MOV64_IMM(1, 1), ATOMIC(BPF_DW, BPF_ADD, 0, 1, 0),
		/* h[tid % 8] = 1 (update from many threads) */
		CALL(CUBPF_FN_get_current_pid_tgid), ALU64_IMM(BPF_AND, 0, 7), STX(BPF_W, 10, 0, -4),
		ST(BPF_DW, 10, -16, 1), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), MOV64_REG(3, 10),
		ALU64_IMM(BPF_ADD, 3, -16), LD_MAP(1, M_HASH), MOV64_IMM(4, 0),
		CALL(CUBPF_FN_map_update_elem), MOV64_IMM(0, 0), EXIT(),
	};
	char err[VM_ERRLEN], log[4096];
	struct vm_object *obj = test_object(prog, sizeof(prog) / sizeof(prog[0]), VM_PROG_UPROBE,
					    NULL, 0);
	if (vm_verify(obj, 0, NULL, NULL, log, sizeof(log)))
		fail_msg("%s", log);
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	struct vm_exec *ex = vm_exec_new(rt, 0, err, sizeof(err));
	assert_non_null(ex);
	pthread_t th[8];
	struct thread_arg a = {ex, 5000};
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hammer, &a), 0);
	for (int i = 0; i < 8; i++) {
		void *rv;
		pthread_join(th[i], &rv);
		assert_null(rv);
	}
	uint64_t val[2];
	uint32_t k = 0;
	assert_int_equal(vm_map_lookup(rt, M_ARRAY, &k, val), 0);
	assert_int_equal(val[0], 8 * 5000);
	vm_exec_free(ex);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

static void test_checked_mode(void **state)
{
	(void)state;
	char err[VM_ERRLEN];
	uint64_t r0;
	/* store past the input memory */
	const struct bpf_insn oob[] = {ST(BPF_DW, 1, 8, 1), MOV64_IMM(0, 0), EXIT()};
	uint8_t mem[8];
	assert_int_equal(vm_run_raw(oob, sizeof(oob), mem, sizeof(mem), &r0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out-of-bounds"));
	/* endless loop: the budget stops it */
	const struct bpf_insn spin[] = {JA(-1), EXIT()};
	assert_int_equal(vm_run_raw(spin, sizeof(spin), NULL, 0, &r0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "budget"));
	/* endless recursion: the frame limit stops it */
	const struct bpf_insn rec[] = {CALL_LOCAL(-1), EXIT()};
	assert_int_equal(vm_run_raw(rec, sizeof(rec), NULL, 0, &r0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "call depth"));
	/* unknown helper, bad opcode, lddw cut short */
	const struct bpf_insn h[] = {CALL(777), EXIT()};
	assert_int_equal(vm_run_raw(h, sizeof(h), NULL, 0, &r0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown helper"));
	const struct bpf_insn bad[] = {I(0xff, 0, 0, 0, 0), EXIT()};
	assert_int_equal(vm_run_raw(bad, sizeof(bad), NULL, 0, &r0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not valid"));
	const struct bpf_insn cut[] = {I(BPF_LD | BPF_DW | BPF_IMM, 0, 0, 0, 1)};
	assert_int_equal(vm_run_raw(cut, sizeof(cut), NULL, 0, &r0, err, sizeof(err)), -1);
	assert_int_equal(vm_run_raw(cut, 5, NULL, 0, &r0, err, sizeof(err)), -1);
	/* falling off the end */
	const struct bpf_insn fall[] = {MOV64_IMM(0, 1)};
	assert_int_equal(vm_run_raw(fall, sizeof(fall), NULL, 0, &r0, err, sizeof(err)), -1);
}

/* Checked mode bounds what helpers read and write through their arguments as it bounds loads
 * and stores: bpf_probe_read(fp-16, 16, mem + K) copies 16 bytes of the 16-byte input from
 * K = 0, faults from K = 8 (past its end) and K = -8; a destination past the stack's top
 * faults; an address far from the program's memory (NULL) is read as the helper reads any. */
static void test_checked_helper_args(void **state)
{
	(void)state;
	char err[VM_ERRLEN];
	uint64_t r0;
	uint8_t mem[16] = {1, 2, 3};
	static const int32_t ks[] = {0, 8, -8};
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		const struct bpf_insn rd[] = {
			MOV64_REG(3, 1), ALU64_IMM(BPF_ADD, 3, ks[i]), MOV64_REG(1, 10),
			ALU64_IMM(BPF_ADD, 1, -16), MOV64_IMM(2, 16), CALL(CUBPF_FN_probe_read),
			LDX(BPF_B, 0, 10, -15), EXIT()};
		int rc = vm_run_raw(rd, sizeof(rd), mem, sizeof(mem), &r0, err, sizeof(err));
		if (ks[i] == 0) {
			if (rc != 0)
				fail_msg("in bounds: %s", err);
			assert_int_equal(r0, 2);
		} else {
			assert_int_equal(rc, -1);
			assert_non_null(strstr(err, "out-of-bounds helper argument"));
		}
	}
	const struct bpf_insn dst[] = {
		MOV64_IMM(3, 0), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8), MOV64_IMM(2, 16),
		CALL(CUBPF_FN_probe_read), MOV64_IMM(0, 0), EXIT()};
	assert_int_equal(vm_run_raw(dst, sizeof(dst), mem, sizeof(mem), &r0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out-of-bounds helper argument"));
	const struct bpf_insn far[] = {
		MOV64_IMM(3, 0), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -16), MOV64_IMM(2, 16),
		CALL(CUBPF_FN_probe_read), EXIT()};
	if (vm_run_raw(far, sizeof(far), mem, sizeof(mem), &r0, err, sizeof(err)) != 0)
		fail_msg("NULL source: %s", err);
	assert_int_equal((int64_t)r0, -EFAULT);
}

static void dis(const struct bpf_insn *in, size_t n, size_t pc, const char *want)
{
	char buf[160];
	vm_disasm_insn_at(in, n, pc, NULL, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void test_disasm(void **state)
{
	(void)state;
	const struct bpf_insn lddw[] = {LD_IMM64(3, 0x1122334455667788ull)};
	dis(lddw, 2, 0, "r3 = 0x1122334455667788 ll");
	const struct bpf_insn map[] = {LD_MAP(1, 2)};
	dis(map, 2, 0, "r1 = map[#2] ll");
	dis((struct bpf_insn[]){LDX(BPF_W, 0, 1, 48)}, 1, 0, "r0 = *(u32 *)(r1 + 48)");
	dis((struct bpf_insn[]){STX(BPF_DW, 10, 6, -8)}, 1, 0, "*(u64 *)(r10 - 8) = r6");
	dis((struct bpf_insn[]){ST(BPF_B, 10, -1, 7)}, 1, 0, "*(u8 *)(r10 - 1) = 7");
	dis((struct bpf_insn[]){I(BPF_LDX | BPF_H | BPF_MEMSX, 2, 1, 4, 0)}, 1, 0,
	    "r2 = *(s16 *)(r1 + 4)");
	dis((struct bpf_insn[]){ALU32_REG(BPF_ADD, 1, 2)}, 1, 0, "w1 += w2");
	dis((struct bpf_insn[]){ALU64_IMM(BPF_ARSH, 1, 3)}, 1, 0, "r1 s>>= 3");
	dis((struct bpf_insn[]){I(BPF_ALU64 | BPF_DIV | BPF_X, 1, 2, 1, 0)}, 1, 0, "r1 s/= r2");
	dis((struct bpf_insn[]){I(BPF_ALU64 | BPF_MOV | BPF_X, 1, 2, 8, 0)}, 1, 0, "r1 = (s8)r2");
	dis((struct bpf_insn[]){I(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 16)}, 1, 0, "r1 = be16 r1");
	dis((struct bpf_insn[]){I(BPF_ALU64 | BPF_END, 1, 0, 0, 32)}, 1, 0, "r1 = bswap32 r1");
	dis((struct bpf_insn[]){ALU64_IMM(BPF_NEG, 4, 0)}, 1, 0, "r4 = -r4");
	dis((struct bpf_insn[]){JMP_IMM(BPF_JSGT, 1, -1, 3)}, 1, 10, "if r1 s> -1 goto +3 <14>");
	dis((struct bpf_insn[]){I(BPF_JMP32 | BPF_JLT | BPF_X, 1, 2, -2, 0)}, 1, 5,
	    "if w1 < w2 goto -2 <4>");
	dis((struct bpf_insn[]){JA(-1)}, 1, 7, "goto -1 <7>");
	dis((struct bpf_insn[]){CALL(1)}, 1, 0, "call bpf_map_lookup_elem#1");
	dis((struct bpf_insn[]){CALL(502)}, 1, 0, "call bpf_get_globaltimer#502");
	dis((struct bpf_insn[]){CALL_LOCAL(4)}, 1, 3, "call pc+4 <8>");
	dis((struct bpf_insn[]){EXIT()}, 1, 0, "exit");
	dis((struct bpf_insn[]){ATOMIC(BPF_DW, BPF_ADD, 1, 2, 0)}, 1, 0, "lock *(u64 *)(r1 + 0) += r2");
	dis((struct bpf_insn[]){ATOMIC(BPF_W, BPF_OR | BPF_FETCH, 1, 2, 4)}, 1, 0,
	    "w2 = atomic_fetch_or((u32 *)(r1 + 4), w2)");
	dis((struct bpf_insn[]){ATOMIC(BPF_DW, BPF_XCHG, 1, 2, 0)}, 1, 0, "r2 = xchg_64(r1 + 0, r2)");
	dis((struct bpf_insn[]){ATOMIC(BPF_DW, BPF_CMPXCHG, 1, 2, -8)}, 1, 0,
	    "r0 = cmpxchg_64(r1 - 8, r0, r2)");
}

static void test_helper_table(void **state)
{
	(void)state;
	size_t n;
	const struct vm_helper_proto *p = vm_helper_protos(&n);
	assert_true(n >= 20);
	for (size_t i = 0; i < n; i++) {
		assert_ptr_equal(vm_helper_proto(p[i].id), &p[i]);
		assert_non_null(p[i].name);
		assert_true(p[i].kinds != 0);
	}
	assert_null(vm_helper_proto(9999));
	assert_true(vm_helper_proto(CUBPF_FN_get_globaltimer)->kinds == VM_KINDS_GPU);
	assert_false(vm_helper_proto(CUBPF_FN_ktime_get_ns)->kinds & VM_KINDS_GPU);
	const char *attach;
	assert_int_equal(vm_prog_kind_from_section("memprobe/vec*", &attach), VM_PROG_MEMPROBE);
	assert_string_equal(attach, "vec*");
	assert_int_equal(vm_prog_kind_from_section("kprobe/", &attach), -1);
	assert_int_equal(vm_prog_kind_from_section("xdp", &attach), -1);
	assert_int_equal(vm_prog_kind_from_section("fentry/_Z3addii", &attach), VM_PROG_FENTRY);
	assert_string_equal(attach, "_Z3addii");
	assert_int_equal(vm_prog_kind_from_section("fexit/add*", &attach), VM_PROG_FEXIT);
	assert_string_equal(vm_prog_kind_name(VM_PROG_FEXIT), "fexit");
	assert_true(vm_kind_is_gpu(VM_PROG_FENTRY) && vm_kind_is_gpu(VM_PROG_FEXIT));
	assert_true(vm_helper_proto(CUBPF_FN_get_globaltimer)->kinds & VM_KIND_BIT(VM_PROG_FEXIT));
}

/* The printk grammar (vm/printk.c): what each format converts, how the host prints it, and the
 * offset and reason of each refusal; a refused format is printed verbatim, converting nothing. */
static void test_printk_grammar(void **state)
{
	(void)state;
	static const struct {
		const char *fmt;
		int nconv;                  /* -1: refused */
		uint32_t at;                /* refused: offset */
		const char *out;            /* accepted: the host's line for args 0x1234, -5, 'A' */
	} c[] = {
		{"%16lx|%d", 2, 0, "            1234|-5"},
		{"%#x %-4hd|%c", 3, 0, "0x1234 -5  |A"},
		{"%-4hhd", -1, 3, NULL}, /* hh: CUDA's printf misreads it (on an H100) */
		{"%08.3lld", 1, 0, "    4660"},
		{"%5.2s|%%|%p", 2, 0, "   (s|%|0xfffffffffffffffb"},
		{"%hu %llu", 2, 0, "4660 18446744073709551611"},
		{"100%%", 0, 0, "100%"},
		{"%a", -1, 1, NULL},
		{"x%*d", -1, 2, NULL},
		{"%.*d", -1, 2, NULL},
		{"%n", -1, 1, NULL},
		{"%o", -1, 1, NULL},
		{"%lc", -1, 0, NULL},
		{"%#d", -1, 0, NULL},
		{"%.3p", -1, 0, NULL},
		{"%65d", -1, 1, NULL},
		{"%d %d %d %d", -1, 9, NULL},
		{"ab%", -1, 2, NULL},
		{"%l", -1, 0, NULL},
	};
	const uint64_t args[3] = {0x1234, (uint64_t)-5, 'A'};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct vm_printk_fmt pf;
		uint32_t at = 99;
		char why[128], line[128];
		int rc = vm_printk_parse(c[i].fmt, strlen(c[i].fmt) + 1, &pf, &at, why, sizeof(why));
		vm_printk_format(line, sizeof(line), c[i].fmt, strlen(c[i].fmt) + 1, args);
		if (c[i].nconv < 0) {
			if (rc == 0 || at != c[i].at || !why[0])
				fail_msg("'%s': rc %d at %u (expected refused at %u)", c[i].fmt, rc, at,
					 c[i].at);
			assert_string_equal(line, c[i].fmt);
			continue;
		}
		if (rc != 0 || (int)pf.nconv != c[i].nconv)
			fail_msg("'%s': rc %d (%s), %u conversions, expected %d", c[i].fmt, rc, why,
				 pf.nconv, c[i].nconv);
		assert_string_equal(line, c[i].out);
	}
	/* the bound stops the scan as a NUL would; a cut-off conversion is refused */
	struct vm_printk_fmt pf;
	assert_int_equal(vm_printk_parse("%d %d", 2, &pf, NULL, NULL, 0), 0);
	assert_int_equal(pf.nconv, 1);
	assert_int_equal(vm_printk_parse("%ld", 2, &pf, NULL, NULL, 0), -1);
	/* vprintf's argument sizes: 4 up to int, 8 for l, ll, s, p */
	assert_int_equal(vm_printk_parse("%hd%ld%s", 16, &pf, NULL, NULL, 0), 0);
	assert_int_equal(pf.conv[0].size, 4);
	assert_int_equal(pf.conv[1].size, 8);
	assert_int_equal(pf.conv[2].size, 8);
	/* the lines tests/ptx/safety/printk_grammar.bpf.c prints on the GPU (t_ptx_safety.sh) */
	char line[128];
	const uint64_t g1[3] = {0x1234, 42, (uint64_t)-5}, g2[3] = {7, 65539, 'Z'};
	vm_printk_format(line, sizeof(line), "cubpf-printk: %16lx|%#x|%-5hd|", 64, g1);
	assert_string_equal(line, "cubpf-printk:             1234|0x2a|-5   |");
	vm_printk_format(line, sizeof(line), "cubpf-printk: %+.3lld|%08hu|%c|", 64, g2);
	assert_string_equal(line, "cubpf-printk: +007|00000003|Z|");
	/* a tiny buffer is never overrun and always terminated */
	char small[5];
	assert_int_equal(vm_printk_format(small, sizeof(small), "%16lx", 8, args), 4);
	assert_string_equal(small, "    ");
}

size_t runtime_tests(struct CMUnitTest *out, size_t cap)
{
	static const struct CMUnitTest t[] = {
		cmocka_unit_test(test_hash_map),
		cmocka_unit_test(test_array_maps),
		cmocka_unit_test(test_shared_array),
		cmocka_unit_test(test_ringbuf_full),
		cmocka_unit_test(test_ringbuf_reserve),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_checked_mode),
		cmocka_unit_test(test_checked_helper_args),
		cmocka_unit_test(test_disasm),
		cmocka_unit_test(test_helper_table),
		cmocka_unit_test(test_printk_grammar),
	};
	size_t n = sizeof(t) / sizeof(t[0]);
	if (n > cap)
		n = cap;
	memcpy(out, t, n * sizeof(t[0]));
	return n;
}
