/* shim/wrap_ctx.c: context teardown.
 *
 * Before a context goes away (cuCtxDestroy, or the last release / a reset of a device's primary
 * context, which the CUDA runtime does at exit), the context_ending hook may read what lives in
 * it (live probes read back their maps): afterwards it is gone.  After the real call the
 * context_ended hook hears the result, so that a plug-in forgets what it held for a context that
 * is gone and nothing of cubpf's touches it again (issue 16: the exit report pushed a destroyed
 * context and the driver crashed).  Without hooks these are plain forwards.
 */
#include "shim/internal.h"

/* The hooks in force, which hear the end too (the same ones: a plug-in that saw the context
 * ending is the one that must forget it). */
static const struct shim_hooks *ending(struct shim_context_event *ev)
{
	const struct shim_hooks *h = shim_hooks_get();
	if (h && h->context_ending)
		h->context_ending(ev, h->user);
	return h;
}

static CUresult ended(const struct shim_hooks *h, struct shim_context_event *ev, CUresult r)
{
	ev->result = r;
	if (h && h->context_ended)
		h->context_ended(ev, h->user);
	return r;
}

#define PRIMARY(fn, kind)                                                                         \
	SHIM_API_EXPORT CUresult fn(CUdevice dev)                                                 \
	{                                                                                         \
		struct shim_context_event ev = { .how = kind, .device = dev };                    \
		const struct shim_hooks *h = ending(&ev);                                         \
		return ended(h, &ev, SHIM_REAL(fn)(dev));                                         \
	}
#define DESTROY(fn)                                                                               \
	SHIM_API_EXPORT CUresult fn(CUcontext ctx)                                                \
	{                                                                                         \
		struct shim_context_event ev = { .how = SHIM_CONTEXT_DESTROY, .context = ctx };   \
		const struct shim_hooks *h = ending(&ev);                                         \
		return ended(h, &ev, SHIM_REAL(fn)(ctx));                                         \
	}

PRIMARY(cuDevicePrimaryCtxRelease, SHIM_PRIMARY_RELEASE)
PRIMARY(cuDevicePrimaryCtxRelease_v2, SHIM_PRIMARY_RELEASE)
PRIMARY(cuDevicePrimaryCtxReset, SHIM_PRIMARY_RESET)
PRIMARY(cuDevicePrimaryCtxReset_v2, SHIM_PRIMARY_RESET)
DESTROY(cuCtxDestroy)
DESTROY(cuCtxDestroy_v2)
