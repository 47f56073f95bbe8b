/* tests/vm/corpus: maps and helpers shared by the regression corpus programs (issue 14).  Each
 * corpus file holds the programs of one class of verifier hole; tests/vm/test_corpus.c lists
 * every program with the reason it must be rejected, or the value it must return when run. */
#ifndef CUBPF_TESTS_VM_CORPUS_H
#define CUBPF_TESTS_VM_CORPUS_H

#include "cubpf_helpers.h"

struct val {
	__u64 w[8];
};

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct val);
} arr SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct val);
} hash SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_RINGBUF);
	__uint(max_entries, 16384);
} rb SEC(".maps");

/* Keeps a value in a register the compiler cannot see through. */
#define OPAQUE(x) asm volatile("" : "+r"(x))

#endif
