/* shim/wrap_ctx.c: context teardown.
 *
 * Before a context goes away (cuCtxDestroy, or the last release / a reset of a device's primary
 * context, which the CUDA runtime does at exit), live probes read back the maps that live in
 * it: afterwards they are gone.  After the real call, live probes forget what they held for a
 * context that is gone, so that nothing of cubpf's touches it again (issue 16: the exit report
 * pushed a destroyed context and the driver crashed).  With live probes off these are plain
 * forwards.
 */
#include "shim/internal.h"

static void teardown(CUcontext ctx, CUdevice dev, int primary)
{
	shim_ensure_init();
	if (!shim_state.disabled && shim_live_teardown)
		shim_live_teardown(ctx, dev, primary);
}

static CUresult torn_down(CUcontext ctx, CUdevice dev, int primary, CUresult r)
{
	if (!shim_state.disabled && shim_live_torn_down)
		shim_live_torn_down(ctx, dev, primary, r);
	return r;
}

#define PRIMARY(fn, kind)                                                                         \
	SHIM_API_EXPORT CUresult fn(CUdevice dev)                                                 \
	{                                                                                         \
		teardown(NULL, dev, kind);                                                        \
		return torn_down(NULL, dev, kind, SHIM_REAL(fn)(dev));                            \
	}
#define DESTROY(fn)                                                                               \
	SHIM_API_EXPORT CUresult fn(CUcontext ctx)                                                \
	{                                                                                         \
		teardown(ctx, 0, 0);                                                              \
		return torn_down(ctx, 0, 0, SHIM_REAL(fn)(ctx));                                  \
	}

PRIMARY(cuDevicePrimaryCtxRelease, SHIM_PRIMARY_RELEASE)
PRIMARY(cuDevicePrimaryCtxRelease_v2, SHIM_PRIMARY_RELEASE)
PRIMARY(cuDevicePrimaryCtxReset, SHIM_PRIMARY_RESET)
PRIMARY(cuDevicePrimaryCtxReset_v2, SHIM_PRIMARY_RESET)
DESTROY(cuCtxDestroy)
DESTROY(cuCtxDestroy_v2)
