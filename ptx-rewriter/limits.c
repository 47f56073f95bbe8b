/* Register limits on kernels: `.maxnreg N` added to an .entry's performance directives (before
 * its body), so that ptxas keeps the kernel within N registers per thread (spilling if it must).
 * The shim uses it to keep an instrumented kernel launchable with the block sizes the original
 * allowed (shim/live/regs.c). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/internal.h"

#define BLOCK_REGS 65536u /* registers of a block (and of an SM) on sm_70..sm_90 */

uint32_t ptx_max_block(int32_t regs)
{
	if (regs <= 0)
		return 1024;
	/* registers are allocated per warp in units of 256: 8 per thread */
	uint32_t per_thread = ((uint32_t)regs + 7) & ~7u;
	uint32_t warps = BLOCK_REGS / (per_thread * 32);
	return warps >= 32 ? 1024 : warps * 32;
}

uint32_t ptx_register_limit(int32_t instrumented, int32_t original)
{
	uint32_t want = ptx_max_block(original);
	if (want <= ptx_max_block(instrumented))
		return 0;
	uint32_t r = (BLOCK_REGS / want) & ~7u;
	return r > 255 ? 255 : r;
}

/* Whether the declaration (start..body) already bounds the kernel's resources: then it is left
 * as its author wrote it (ptxas already keeps what the author asked for). */
static bool has_launch_bounds(const char *decl, size_t len)
{
	static const char *const dirs[] = { ".maxnreg", ".maxntid", ".reqntid", ".minnctapersm",
					    ".maxclusterrank", NULL };
	for (int i = 0; dirs[i]; i++)
		if (memmem(decl, len, dirs[i], strlen(dirs[i])))
			return true;
	return false;
}

static int limit_of(const char *name, const char *const *kernels, const uint32_t *maxnreg,
		    size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kernels[i], name))
			return (int)maxnreg[i];
	return 0;
}

int ptx_limit_registers(const char *text, size_t len, const char *const *kernels,
			const uint32_t *maxnreg, size_t n, char **out, size_t *out_len, char *err,
			size_t errlen)
{
	struct ptx_module *m;
	*out = NULL;
	*out_len = 0;
	if (ptx_parse(text, len, &m, err, errlen) != 0)
		return -1;
	struct ptx_buf b = { 0 };
	size_t copied = 0;
	int changed = 0;
	for (uint32_t i = 0; i < m->func_cnt; i++) {
		const struct ptx_func *f = &m->funcs[i];
		int limit = f->is_entry && f->has_body ? limit_of(f->name, kernels, maxnreg, n) : 0;
		if (limit <= 0 || has_launch_bounds(m->text + f->start, f->body_open - f->start))
			continue;
		ptx_buf_append(&b, m->text + copied, f->body_open - copied);
		ptx_buf_printf(&b, ".maxnreg %d\n", limit);
		copied = f->body_open;
		changed++;
	}
	ptx_buf_append(&b, m->text + copied, m->len - copied);
	ptx_module_free(m);
	if (b.oom) {
		ptx_buf_free(&b);
		ptx_seterr(err, errlen, "out of memory");
		return -1;
	}
	if (!changed) {
		ptx_buf_free(&b);
		return 0;
	}
	*out_len = b.len;
	*out = b.data; /* NUL-terminated by ptx_buf */
	return changed;
}
