/* Conformance vectors (../shared/bpf_conformance) compiled to one PTX module: shared by the CPU
 * test (ptxas) and the GPU harness generator. */
#ifndef CUBPF_TESTS_PTX_CONF_H
#define CUBPF_TESTS_PTX_CONF_H

#include <stdio.h>

#include "ptx-rewriter/ptx.h"

struct conf_test {
	char name[128];
	struct bpf_insn *insns;
	uint32_t cnt;
	uint8_t *mem;
	size_t mem_len;
	uint64_t expect;
	bool compiled;          /* the generator accepted it */
	char error[PTX_ERRLEN]; /* why not */
};

/* Reads every raw/NAME.hex with its tests/NAME.data.  Returns the count, -1 on error. */
long conf_load(const char *conformance_dir, struct conf_test **out, char *err, size_t errlen);
void conf_free(struct conf_test *t, size_t n);
/* Builds a module with one .func per compiled test (tests [first, first+count)) and the kernel
 *   .entry cubpf_conformance(.param .u64 mems, .param .u64 lens, .param .u64 results,
 *                            .param .u32 n)
 * where thread i runs test first+i with r1 = mems[i], r2 = lens[i] and writes r0 to results[i].
 * Tests the generator refuses are marked (compiled = false) and left out.  fold: compile with
 * constant folding (as probes are), else every instruction is lowered as written. */
int conf_module(struct conf_test *t, size_t first, size_t count, bool fold, struct ptx_buf *out);
/* The manifest of a module built from tests [0, n): "T index name expected_hex mem_hex|-" per
 * compiled program, "X name reason" per refused one. */
void conf_manifest(const struct conf_test *t, size_t n, FILE *f);

#endif
