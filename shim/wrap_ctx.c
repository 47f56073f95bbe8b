/* shim/wrap_ctx.c: context teardown.
 *
 * Before a context goes away (cuCtxDestroy, or the last release / a reset of a device's primary
 * context, which the CUDA runtime does at exit), live probes read back the maps that live in
 * it: afterwards they are gone.  Nothing else happens here; with live probes off these are
 * plain forwards.
 */
#include "shim/internal.h"

static void teardown(CUcontext ctx, CUdevice dev, int primary)
{
	shim_ensure_init();
	if (!shim_state.disabled && shim_live_teardown)
		shim_live_teardown(ctx, dev, primary);
}

#define PRIMARY(fn)                                                                               \
	SHIM_API_EXPORT CUresult fn(CUdevice dev)                                                 \
	{                                                                                         \
		teardown(NULL, dev, 1);                                                           \
		return SHIM_REAL(fn)(dev);                                                        \
	}
#define DESTROY(fn)                                                                               \
	SHIM_API_EXPORT CUresult fn(CUcontext ctx)                                                \
	{                                                                                         \
		teardown(ctx, 0, 0);                                                              \
		return SHIM_REAL(fn)(ctx);                                                        \
	}

PRIMARY(cuDevicePrimaryCtxRelease)
PRIMARY(cuDevicePrimaryCtxRelease_v2)
PRIMARY(cuDevicePrimaryCtxReset)
PRIMARY(cuDevicePrimaryCtxReset_v2)
DESTROY(cuCtxDestroy)
DESTROY(cuCtxDestroy_v2)
