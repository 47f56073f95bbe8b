/* Differential check of the PTX code generator against the host interpreter (issue 14): one
 * verified program is run on the interpreter (checked mode) over random contexts and random
 * array-map contents, and compiled to PTX; the PTX is then run on the same inputs by the CPU
 * model tests/ptx/ptxsim.py (tests/ptx/ptxdiff.py) or by the GPU (tests/ptx/gpu/diff_run.c),
 * and r0 and every map byte must agree.
 *
 * Scope: the program's context is given as memory (it is compiled as a raw program: r1 = the
 * context bytes, r2 = their length), so that context loads are plain loads on both sides; maps
 * must be arrays (CUBPF_MAP_ARRAY, CUBPF_MAP_GPU_ARRAY, globals); helpers must be deterministic
 * (map lookup/update/delete, bpf_probe_read; no clocks, no printk).  bpf_probe_read on the GPU
 * reads only the program's stack and array maps (else -EFAULT and zeroes): a program that reads
 * other memory the host happens to map (the context, the heap) differs by design; generated
 * programs should read their stack, their maps, or addresses never mapped (NULL, small ones).  Anything else is "out of scope" (1), not a
 * failure, so that a program generator may feed any program it likes.
 *
 * Files: the module (.ptx) holds `.func ptxdiff_f` (the program) and `.entry ptxdiff_k(ctx,
 * len, ret)` (one thread calls it and stores r0); the cases file holds, per run, one line
 *     C <ctx_hex> <r0_hex> <map0_in_hex>,<map1_in_hex>,... <map0_out_hex>,...
 * and before them one line "M <count> <bytes0>,<bytes1>,..." (map images in the GPU array
 * layout: max_entries values of round8(value_size) bytes; "-" for an empty field). */
#ifndef CUBPF_TESTS_PTX_PTXDIFF_H
#define CUBPF_TESTS_PTX_PTXDIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/vm.h"

struct ptxdiff_opts {
	unsigned runs;        /* random inputs (0: 8) */
	uint64_t seed;        /* of the inputs (0: 1) */
	bool fold;            /* compile as probes are (constant folding); else as written */
	uint32_t ctx_size;    /* context bytes for raw programs (0: 64); GPU kinds use their ctx */
};

/* Runs program `prog` of `obj` (it must pass vm_verify: the caller verifies) on the
 * interpreter and writes the PTX module and the cases file.  Returns 0; 1 when the program is
 * out of the harness's scope (reason in err); -1 on an error (message in err): the generator
 * refused a verified program, or the interpreter faulted on it. */
int ptxdiff_prepare(const struct vm_object *obj, uint32_t prog, const struct ptxdiff_opts *opts,
		    const char *ptx_path, const char *cases_path, char *err, size_t errlen);

/* ptxdiff_prepare into a temporary directory, then tests/ptx/ptxdiff.py (python3, run from the
 * repository root or with CUBPF_SRC naming it) on the files.  Returns 0 when every run agrees,
 * 1 out of scope, 2 when they differ (the first difference in err), -1 on an error. */
int ptxdiff_check(const struct vm_object *obj, uint32_t prog, const struct ptxdiff_opts *opts,
		  char *err, size_t errlen);

#endif
