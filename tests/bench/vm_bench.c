/* vm_bench: the host interpreter's speed (ALU loop, hash-map-heavy loop, call overhead) and the
 * verifier's time on a 4096-instruction program.  Prints RESULT lines (tests/bench/b_vm.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm/vm.h"

#define I(code, d, s, o, i) ((struct bpf_insn){(code), (d), (s), (o), (i)})

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct vm_object *object(const struct bpf_insn *p, uint32_t n, int with_hash)
{
	char err[VM_ERRLEN];
	struct vm_object *obj = vm_object_from_insns(p, n, VM_PROG_UPROBE, err, sizeof(err));
	if (!obj) {
		fprintf(stderr, "vm_bench: %s\n", err);
		exit(1);
	}
	if (with_hash) {
		obj->maps = calloc(1, sizeof(*obj->maps));
		obj->map_cnt = 1;
		snprintf(obj->maps[0].name, sizeof(obj->maps[0].name), "counts");
		obj->maps[0].type = CUBPF_MAP_HASH;
		obj->maps[0].key_size = 4;
		obj->maps[0].value_size = 8;
		obj->maps[0].max_entries = 4096;
	}
	return obj;
}

/* Runs prog `runs` times; returns seconds, r0 in *r0. */
static double run(struct vm_object *obj, int runs, uint64_t *r0)
{
	char err[VM_ERRLEN];
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	struct vm_exec *ex = rt ? vm_exec_new(rt, 0, err, sizeof(err)) : NULL;
	if (!ex) {
		fprintf(stderr, "vm_bench: %s\n", err);
		exit(1);
	}
	struct cubpf_api_ctx ctx = {0};
	double t = now();
	for (int i = 0; i < runs; i++)
		if (vm_exec_run(ex, &ctx, sizeof(ctx), r0, err, sizeof(err))) {
			fprintf(stderr, "vm_bench: %s\n", err);
			exit(1);
		}
	t = now() - t;
	vm_exec_free(ex);
	vm_runtime_free(rt);
	return t;
}

/* 10 instructions per iteration: 8 ALU operations, a decrement and a conditional jump. */
static void bench_alu(uint32_t iters)
{
	const struct bpf_insn p[] = {
		I(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1),
		I(BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, 0, (int32_t)iters),
		I(BPF_ALU64 | BPF_ADD | BPF_X, 0, 1, 0, 0),
		I(BPF_ALU64 | BPF_XOR | BPF_K, 0, 0, 0, 0x5a5a),
		I(BPF_ALU64 | BPF_LSH | BPF_K, 0, 0, 0, 3),
		I(BPF_ALU64 | BPF_RSH | BPF_K, 0, 0, 0, 1),
		I(BPF_ALU | BPF_ADD | BPF_K, 0, 0, 0, 7),
		I(BPF_ALU64 | BPF_MUL | BPF_K, 0, 0, 0, 3),
		I(BPF_ALU64 | BPF_OR | BPF_X, 0, 1, 0, 0),
		I(BPF_ALU64 | BPF_AND | BPF_K, 0, 0, 0, 0x7fffffff),
		I(BPF_ALU64 | BPF_SUB | BPF_K, 1, 0, 0, 1),
		I(BPF_JMP | BPF_JNE | BPF_K, 1, 0, -10, 0),
		I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	struct vm_object *obj = object(p, sizeof(p) / sizeof(p[0]), 0);
	uint64_t r0, insns = 3 + 10ull * iters;
	run(obj, 1, &r0); /* warm up */
	double best = 1e9;
	for (int rep = 0; rep < 5; rep++) {
		double t = run(obj, 1, &r0);
		best = t < best ? t : best;
	}
	printf("alu loop: %llu instructions in %.3f s (best of 5) = %.0f M instructions/s\n",
	       (unsigned long long)insns, best, insns / best / 1e6);
	printf("RESULT vm_alu_loop_Minsn_per_s=%.0f\n", insns / best / 1e6);
	vm_object_free(obj);
}

/* Per iteration: key = i & 1023 on the stack, lookup, +1 if found else insert 1. */
static void bench_hash(uint32_t iters)
{
	const struct bpf_insn p[] = {
		I(BPF_ALU64 | BPF_MOV | BPF_K, 6, 0, 0, 0),                  /* 0: i = 0 */
		I(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),                  /* 1: loop */
		I(BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, 1023),
		I(BPF_STX | BPF_W | BPF_MEM, 10, 1, -4, 0),
		I(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0),
		I(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -4),
		I(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, 0), I(0, 0, 0, 0, 0),
		I(BPF_JMP | BPF_CALL, 0, 0, 0, CUBPF_FN_map_lookup_elem),   /* 8 */
		I(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3, 0),                    /* 9 -> 13 */
		I(BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, 0, 1),
		I(BPF_STX | BPF_DW | BPF_ATOMIC, 0, 1, 0, BPF_ADD),
		I(BPF_JMP | BPF_JA, 0, 0, 9, 0),                             /* 12 -> 22 */
		I(BPF_ST | BPF_DW | BPF_MEM, 10, 0, -16, 1),                 /* 13: insert 1 */
		I(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0),
		I(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -4),
		I(BPF_ALU64 | BPF_MOV | BPF_X, 3, 10, 0, 0),
		I(BPF_ALU64 | BPF_ADD | BPF_K, 3, 0, 0, -16),
		I(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, 0), I(0, 0, 0, 0, 0),
		I(BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 0),
		I(BPF_JMP | BPF_CALL, 0, 0, 0, CUBPF_FN_map_update_elem),   /* 21 */
		I(BPF_ALU64 | BPF_ADD | BPF_K, 6, 0, 0, 1),                  /* 22 */
		I(BPF_JMP | BPF_JLT | BPF_K, 6, 0, -23, (int32_t)iters),     /* 23 -> 1 */
		I(BPF_ALU64 | BPF_MOV | BPF_X, 0, 6, 0, 0),
		I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	struct vm_object *obj = object(p, sizeof(p) / sizeof(p[0]), 1);
	uint64_t r0;
	double t = run(obj, 1, &r0);
	/* found path: 1..12 (11 slots executed, lddw once) + 22, 23 = 13 instructions */
	uint64_t insns = 13ull * iters;
	printf("hash map loop: %u lookups (+%u inserts) on 1024 keys in %.3f s = %.1f M lookups/s, "
	       "%.0f M instructions/s\n", iters, 1024, t, iters / t / 1e6, insns / t / 1e6);
	printf("RESULT vm_hash_Mlookups_per_s=%.1f\n", iters / t / 1e6);
	printf("RESULT vm_hash_Minsn_per_s=%.0f\n", insns / t / 1e6);
	if (r0 != iters)
		printf("hash map loop: WRONG r0 %llu\n", (unsigned long long)r0);
	vm_object_free(obj);
}

static void bench_call(int runs)
{
	const struct bpf_insn p[] = {I(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0),
				     I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)};
	struct vm_object *obj = object(p, 2, 0);
	uint64_t r0;
	double t = run(obj, runs, &r0);
	printf("empty program: %.1f ns per vm_exec_run\n", t / runs * 1e9);
	printf("RESULT vm_empty_run_ns=%.1f\n", t / runs * 1e9);
	vm_object_free(obj);
}

/* 4096 instructions of real probe shape: blocks of lookup, null check, bounded index, update. */
static void bench_verifier(void)
{
	enum { N = 4096, BLOCK = 15 };
	struct bpf_insn *p = calloc(N, sizeof(*p));
	uint32_t n = 0;
	p[n++] = I(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0);
	while (n + BLOCK + 2 <= N) {
		int32_t k = (int32_t)n;
		p[n++] = I(BPF_ST | BPF_W | BPF_MEM, 10, 0, -4, k);
		p[n++] = I(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0);
		p[n++] = I(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -4);
		p[n++] = I(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, 0);
		p[n++] = I(0, 0, 0, 0, 0);
		p[n++] = I(BPF_JMP | BPF_CALL, 0, 0, 0, CUBPF_FN_map_lookup_elem);
		p[n++] = I(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 8, 0);
		p[n++] = I(BPF_LDX | BPF_DW | BPF_MEM, 2, 6, 8 * (k % 16), 0);
		p[n++] = I(BPF_JMP | BPF_JGT | BPF_K, 2, 0, 5, 7);
		p[n++] = I(BPF_ALU64 | BPF_MOV | BPF_X, 3, 0, 0, 0);
		p[n++] = I(BPF_ALU64 | BPF_ADD | BPF_X, 3, 2, 0, 0);
		p[n++] = I(BPF_LDX | BPF_B | BPF_MEM, 4, 3, 0, 0);
		p[n++] = I(BPF_ALU64 | BPF_ADD | BPF_K, 4, 0, 0, 1);
		p[n++] = I(BPF_STX | BPF_B | BPF_MEM, 3, 4, 0, 0);
		p[n++] = I(BPF_ALU64 | BPF_MOV | BPF_K, 7, 0, 0, k);
	}
	while (n < N - 2)
		p[n++] = I(BPF_ALU64 | BPF_MOV | BPF_K, 5, 0, 0, (int32_t)n);
	p[n++] = I(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0);
	p[n++] = I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	struct vm_object *obj = object(p, n, 1);
	char *log = malloc(65536);
	struct vm_verify_info info;
	int reps = 20;
	double t = now();
	for (int i = 0; i < reps; i++)
		if (vm_verify(obj, 0, NULL, &info, log, 65536)) {
			printf("verifier: program REJECTED:\n%s", log);
			exit(1);
		}
	t = (now() - t) / reps;
	printf("verifier: %u-instruction program in %.2f ms (%u instructions processed, %u states)\n",
	       n, t * 1e3, info.insns_processed, info.states);
	printf("RESULT vm_verify_4096_ms=%.2f\n", t * 1e3);
	free(log);
	free(p);
	vm_object_free(obj);
}

int main(int argc, char **argv)
{
	double scale = argc > 1 ? atof(argv[1]) : 1.0;
	bench_alu((uint32_t)(20000000 * scale));
	bench_hash((uint32_t)(2000000 * scale));
	bench_call((int)(5000000 * scale));
	bench_verifier();
	return 0;
}
