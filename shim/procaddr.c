/* shim/procaddr.c: cuGetProcAddress and cuGetProcAddress_v2, and cuInit.
 *
 * The CUDA runtime gets every entry point through cuGetProcAddress_v2, choosing the variant by
 * version and flags (legacy or per-thread default stream, _v2/_v3 forms).  We let the real
 * driver choose, then swap its answer for our wrapper when it is one of the functions we
 * intercept: comparing addresses with the real driver's exports maps each variant to exactly
 * its own wrapper (never "the newest", which has broken other shims).  Anything else, including
 * cuGetExportTable, is returned unchanged and never passes through us again.
 */
#include <string.h>

#include "shim/internal.h"

/* Our wrapper of every intercepted name, in export-table order. */
static const struct { unsigned idx; void *wrapper; } wrappers[] = {
#define SHIM_EXPORT(i, name, intercepted) SHIM_WRAP_##intercepted(i, name)
#define SHIM_WRAP_0(i, name)
#define SHIM_WRAP_1(i, name) { i, (void *)&name },
#include "exports.def"
#undef SHIM_WRAP_1
#undef SHIM_WRAP_0
#undef SHIM_EXPORT
};
#define NWRAPPERS (sizeof(wrappers) / sizeof(wrappers[0]))

/* The real driver's address of each intercepted name (NULL when it lacks the name). */
static void *real_of[NWRAPPERS];

void shim_procaddr_setup(void)
{
	for (size_t i = 0; i < NWRAPPERS; i++)
		real_of[i] = shim_real(shim_names[wrappers[i].idx]);
}

void *shim_wrapper_for(void *real)
{
	for (size_t i = 0; i < NWRAPPERS; i++)
		if (real_of[i] == real)
			return wrappers[i].wrapper;
	return real;
}

static void log_lookup(const char *api, const char *symbol, int version, cuuint64_t flags,
		       void *real, void *given, CUresult r)
{
	if (!shim_log_enabled(SHIM_LOG_DEBUG))
		return;
	shim_log(SHIM_LOG_DEBUG, "%s(%s, %d, 0x%llx) = %d: %s", api, symbol ? symbol : "(null)",
		 version, (unsigned long long)flags, r,
		 r != CUDA_SUCCESS ? "-" : given != real ? "cubpf wrapper" : "real driver");
}

SHIM_API_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
					  cuuint64_t flags)
{
	shim_ensure_init();
	CUresult r = SHIM_REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
	if (r != CUDA_SUCCESS || !pfn || !*pfn || shim_state.disabled)
		return r;
	void *real = *pfn;
	*pfn = shim_wrapper_for(real);
	log_lookup("cuGetProcAddress", symbol, cudaVersion, flags, real, *pfn, r);
	return r;
}

SHIM_API_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
					     cuuint64_t flags,
					     CUdriverProcAddressQueryResult *symbolStatus)
{
	shim_ensure_init();
	CUresult r = SHIM_REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r != CUDA_SUCCESS || !pfn || !*pfn || shim_state.disabled)
		return r;
	void *real = *pfn;
	*pfn = shim_wrapper_for(real);
	log_lookup("cuGetProcAddress_v2", symbol, cudaVersion, flags, real, *pfn, r);
	return r;
}

SHIM_API_EXPORT CUresult cuInit(unsigned int flags)
{
	shim_ensure_init();
	CUresult r = SHIM_REAL(cuInit)(flags);
	if (r != CUDA_SUCCESS && shim_state.have_driver)
		shim_log(SHIM_LOG_DEBUG, "cuInit(%u) = %d from %s", flags, r, shim_state.real_path);
	const struct shim_hooks *h = shim_hooks_get();
	if (h && h->driver_initialized)
		h->driver_initialized((int)r, h->user);
	return r;
}
