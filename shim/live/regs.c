/* shim/live/regs.c: an instrumented kernel keeps the block sizes its original could launch.
 *
 * A kernel declared without launch bounds can be launched with any block size its registers
 * allow (a block has 65536 registers on sm_70 to sm_90).  Probe code adds registers: were the
 * instrumented kernel to allow smaller blocks than the original, a launch the application makes
 * successfully would fail (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).  After the JIT, every such
 * kernel gets `.maxnreg` (the most registers that still allow the original's largest block;
 * ptx_limit_registers) and the module is compiled again: ptxas spills in the probe instead.
 * The original's registers come from its SASS for the device when the image has some (what the
 * driver would load), else from the driver's JIT of its PTX. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "ptx-rewriter/ptx.h"
#include "shim/live/internal.h"

static int32_t regs_of(const struct cubin_kernels *k, const char *name)
{
	for (size_t i = 0; i < k->count; i++)
		if (!strcmp(k->kernels[i].name, name))
			return k->kernels[i].registers;
	return -1;
}

/* The original's kernels with their registers: from the best SASS entry usable on `sm`, else
 * from a JIT of the PTX entry.  Returns 0, or -1 when neither can be had. */
static int original_kernels(struct cubin_image *img, long ptx_entry, uint32_t sm,
			    struct cubin_kernels *out)
{
	char err[LIVE_ERRLEN];
	long best = -1;
	for (size_t i = 0; i < img->entry_count; i++) {
		const struct cubin_entry *e = &img->entries[i];
		if (e->kind == CUBIN_ENTRY_ELF &&
		    cubin_sass_usable(e->sm, cubin_entry_arch_suffix(e), sm) &&
		    (best < 0 || e->sm > img->entries[best].sm))
			best = (long)i;
	}
	const uint8_t *data;
	size_t size;
	if (best >= 0 && cubin_entry_data(img, (size_t)best, &data, &size) == 0 &&
	    cubin_elf_kernels(data, size, out, err, sizeof(err)) == 0)
		return 0;
	if (ptx_entry < 0 || cubin_entry_data(img, (size_t)ptx_entry, &data, &size) != 0)
		return -1;
	size_t cubin_size;
	void *cubin = shim_live_jit((const char *)data, strnlen((const char *)data, size), &cubin_size,
			       err, sizeof(err));
	int rc = cubin ? cubin_elf_kernels(cubin, cubin_size, out, err, sizeof(err)) : -1;
	free(cubin);
	return rc;
}

/* The kernels to limit (names point into inst) and their limits; returns how many. */
static size_t choose_limits(const struct cubin_kernels *inst, struct cubin_image *img,
			    long ptx_entry, uint32_t sm, const char **names, uint32_t *limits)
{
	struct cubin_kernels orig = { 0 };
	bool have_orig = false, tried = false;
	size_t n = 0;
	for (size_t i = 0; i < inst->count; i++) {
		const struct cubin_kernel *k = &inst->kernels[i];
		if (ptx_max_block(k->registers) == 1024)
			continue;
		if (!tried) {
			have_orig = original_kernels(img, ptx_entry, sm, &orig) == 0;
			tried = true;
		}
		int32_t r0 = have_orig ? regs_of(&orig, k->name) : -1; /* unknown: any block */
		uint32_t limit = ptx_register_limit(k->registers, r0);
		if (!limit)
			continue;
		names[n] = k->name;
		limits[n++] = limit;
		shim_log(SHIM_LOG_INFO, "live: %s: the instrumented code needs %d registers (the "
			 "original %d): limited to %u so that blocks of %u threads still launch",
			 k->name, k->registers, r0, limit, ptx_max_block(r0));
	}
	if (have_orig)
		cubin_kernels_free(&orig);
	return n;
}

int shim_live_regs_fit(struct cubin_image *img, long ptx_entry, uint32_t sm, char **ptx,
		  size_t *ptx_len, void **cubin, size_t *cubin_size, char *err, size_t errlen)
{
	struct cubin_kernels inst;
	char why[LIVE_ERRLEN];
	if (cubin_elf_kernels(*cubin, *cubin_size, &inst, why, sizeof(why)) != 0)
		return 0; /* cannot tell: as compiled */
	const char **names = calloc(inst.count + 1, sizeof(*names));
	uint32_t *limits = calloc(inst.count + 1, sizeof(*limits));
	size_t n = names && limits ? choose_limits(&inst, img, ptx_entry, sm, names, limits) : 0;
	char *limited = NULL;
	size_t limited_len = 0;
	int rc = 0;
	if (n && ptx_limit_registers(*ptx, *ptx_len, names, limits, n, &limited, &limited_len, err,
				     errlen) > 0) {
		size_t size;
		void *again = shim_live_jit(limited, limited_len, &size, err, errlen);
		if (again) {
			free(*ptx), free(*cubin);
			*ptx = limited, *ptx_len = limited_len;
			*cubin = again, *cubin_size = size;
			limited = NULL;
		} else {
			rc = -1; /* the caller falls back to the original module */
		}
	}
	free(limited);
	free(names);
	free(limits);
	cubin_kernels_free(&inst);
	return rc;
}

/* The same for the objects of an -rdc program linked instrumented (shim_live_jit_parts): the limits
 * come from the linked cubin, each object's PTX gets those of its own kernels. */
int shim_live_regs_fit_parts(struct cubin_image *img, uint32_t sm, struct live_part *parts, size_t np,
			void **cubin, size_t *cubin_size, char *err, size_t errlen)
{
	struct cubin_kernels inst;
	char why[LIVE_ERRLEN];
	if (cubin_elf_kernels(*cubin, *cubin_size, &inst, why, sizeof(why)) != 0)
		return 0;
	const char **names = calloc(inst.count + 1, sizeof(*names));
	uint32_t *limits = calloc(inst.count + 1, sizeof(*limits));
	size_t n = names && limits ? choose_limits(&inst, img, -1, sm, names, limits) : 0;
	int rc = 0, changed = 0;
	for (size_t i = 0; n && rc == 0 && i < np; i++) {
		char *limited = NULL;
		size_t len = 0;
		int k = ptx_limit_registers(parts[i].out, parts[i].out_len, names, limits, n, &limited,
					    &len, err, errlen);
		if (k < 0)
			rc = -1;
		else if (k > 0)
			free(parts[i].out), parts[i].out = limited, parts[i].out_len = len, changed = 1;
	}
	if (rc == 0 && changed) {
		size_t size;
		void *again = shim_live_jit_parts(parts, np, &size, err, errlen);
		if (again)
			free(*cubin), *cubin = again, *cubin_size = size;
		else
			rc = -1;
	}
	free(names);
	free(limits);
	cubin_kernels_free(&inst);
	return rc;
}
