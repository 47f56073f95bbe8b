/* shim/live/guard.h: loading and verifying a probe object behind a boundary, so that no object
 * (damaged, hostile, or one that finds a bug in the loader or the verifier) can crash or hang
 * the application.  No driver calls, no logging: the fuzz target tests/fuzz/fuzz_shim_load.c
 * runs the same entry the shim does. */
#ifndef CUBPF_SHIM_LIVE_GUARD_H
#define CUBPF_SHIM_LIVE_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "vm/vm.h"

/* The verifier's word on one program of an object. */
struct live_verdict {
	int ok;                /* 1: verified; 0: rejected */
	char reason[256];      /* the rejection, one line (vm_verify_info.reason) */
};

struct live_guard_opts {
	/* Load and verify in a forked child first, which reports the verdicts through a pipe: a
	 * crash or a child still working after timeout_ms (then killed) refuses the object.  The
	 * object is then loaded again here (the child proved that these bytes load without a
	 * crash).  false (or fork failing): both in this process. */
	bool fork;
	uint32_t timeout_ms;   /* 0: 10000 */
	uint32_t max_processed;/* the verifier's budget per program (0: its default, 1,000,000) */
};

/* Loads the object in `data` (the bytes of `name`) and verifies every program.  Returns 0 with
 * *out (free with vm_object_free) and *verdicts (obj->prog_cnt entries, free()), or -1 with one
 * line in err: the object is damaged, or verifying it crashed or timed out. */
int shim_live_guard_load(const void *data, size_t size, const char *name,
		    const struct live_guard_opts *opts, struct vm_object **out,
		    struct live_verdict **verdicts, char *err, size_t errlen);

#endif
