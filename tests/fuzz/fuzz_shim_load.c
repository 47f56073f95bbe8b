/* libFuzzer target: any bytes as a probe object given to the shim (CUBPF_PROGRAMS), through the
 * entry the shim itself uses (shim/live/guard.c): loaded and verified in this process (where
 * ASan sees any fault), and for one input in 16 also through the forked checker, whose verdicts
 * must be the same. */
#include <stdlib.h>
#include <string.h>

#include "shim/live/guard.h"

static int verdicts_differ(const struct vm_object *a, const struct live_verdict *va,
			   const struct vm_object *b, const struct live_verdict *vb)
{
	if (a->prog_cnt != b->prog_cnt)
		return 1;
	for (uint32_t i = 0; i < a->prog_cnt; i++)
		if (va[i].ok != vb[i].ok || strcmp(va[i].reason, vb[i].reason))
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct live_guard_opts here = {.max_processed = 20000};
	struct live_guard_opts forked = {.fork = true, .timeout_ms = 20000, .max_processed = 20000};
	struct vm_object *a = NULL, *b = NULL;
	struct live_verdict *va = NULL, *vb = NULL;
	char err_a[VM_ERRLEN], err_b[VM_ERRLEN];
	int ra = shim_live_guard_load(data, size, "fuzz.o", &here, &a, &va, err_a, sizeof(err_a));
	if ((size & 15) == 0) {
		int rb = shim_live_guard_load(data, size, "fuzz.o", &forked, &b, &vb, err_b, sizeof(err_b));
		if (ra != rb || (ra == 0 && verdicts_differ(a, va, b, vb)) ||
		    (ra != 0 && strcmp(err_a, err_b)))
			__builtin_trap(); /* the checker's report was lost or misread */
	}
	vm_object_free(a);
	vm_object_free(b);
	free(va);
	free(vb);
	return 0;
}
