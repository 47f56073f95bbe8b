/* tests/vm: shared declarations of the vm/ test groups (one cmocka run, see main.c). */
#ifndef CUBPF_TESTS_VM_H
#define CUBPF_TESTS_VM_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vm/vm.h"

/* Instruction initializers ({code, dst, src, off, imm}) for arrays; (struct bpf_insn)X for one. */
#define I(code, d, s, o, i) {(code), (d), (s), (o), (i)} /* an initializer, not an expression */
#define MOV64_IMM(d, i) I(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV64_REG(d, s) I(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV32_REG(d, s) I(BPF_ALU | BPF_MOV | BPF_X, d, s, 0, 0)
#define ALU64_IMM(op, d, i) I(BPF_ALU64 | (op) | BPF_K, d, 0, 0, i)
#define ALU64_REG(op, d, s) I(BPF_ALU64 | (op) | BPF_X, d, s, 0, 0)
#define ALU32_IMM(op, d, i) I(BPF_ALU | (op) | BPF_K, d, 0, 0, i)
#define ALU32_REG(op, d, s) I(BPF_ALU | (op) | BPF_X, d, s, 0, 0)
#define LDX(sz, d, s, o) I(BPF_LDX | (sz) | BPF_MEM, d, s, o, 0)
#define STX(sz, d, s, o) I(BPF_STX | (sz) | BPF_MEM, d, s, o, 0)
#define ST(sz, d, o, i) I(BPF_ST | (sz) | BPF_MEM, d, 0, o, i)
#define ATOMIC(sz, op, d, s, o) I(BPF_STX | (sz) | BPF_ATOMIC, d, s, o, op)
#define JMP_IMM(op, d, i, o) I(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define JMP_REG(op, d, s, o) I(BPF_JMP | (op) | BPF_X, d, s, o, 0)
#define JA(o) I(BPF_JMP | BPF_JA, 0, 0, o, 0)
#define CALL(id) I(BPF_JMP | BPF_CALL, 0, 0, 0, id)
#define CALL_LOCAL(o) I(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, o)
#define EXIT() I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define LD_MAP(d, m) I(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, m), I(0, 0, 0, 0, 0)
#define LD_MAP_VALUE(d, m, o) I(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_VALUE, 0, m), I(0, 0, 0, 0, o)
#define LD_IMM64(d, v) I(BPF_LD | BPF_DW | BPF_IMM, d, 0, 0, (int32_t)(uint32_t)(v)), \
			I(0, 0, 0, 0, (int32_t)(uint32_t)((uint64_t)(v) >> 32))

/* The maps every instruction-array test object has (see tests/vm/util.c). */
enum { M_HASH, M_ARRAY, M_RODATA, M_RING, M_RDONLY, M_BSS, M_COUNT };

/* An object with one program of `kind` made of `insns`, functions starting at `subprogs` (NULL:
 * one function), and the maps above. */
struct vm_object *test_object(const struct bpf_insn *insns, uint32_t n, enum vm_prog_kind kind,
			      const uint32_t *subprogs, uint32_t nsub);

/* Paths. */
const char *test_shared_dir(void);
const char *test_build_dir(void);
/* Compiles tests/vm/progs/NAME.bpf.c (or a path ending .bpf.c) with $CLANG; returns the object
 * path (static buffer) or fails the test. */
const char *test_compile(const char *src);
uint8_t *test_read_file(const char *path, size_t *size);

/* Test groups: each appends its tests to the array and returns how many it added. */
size_t conformance_tests(struct CMUnitTest *out, size_t cap);
size_t verifier_tests(struct CMUnitTest *out, size_t cap);
size_t cprog_tests(struct CMUnitTest *out, size_t cap);
size_t loader_tests(struct CMUnitTest *out, size_t cap);
size_t runtime_tests(struct CMUnitTest *out, size_t cap);
size_t corpus_tests(struct CMUnitTest *out, size_t cap);

#endif
