/* shim/wrap_event.c: CUDA events.
 *
 * Kernel spans (shim/live/spans.c) bracket a launch with cubpf's own events.  When the
 * application times a launch itself, its start event comes just before the launch; a span that
 * begins after it would sit inside the application's pair, which would then measure cubpf's
 * event too.  Seeing the application's event records lets the span begin just before them
 * instead.  Creation and destruction are reported so that events made only for ordering
 * (CU_EVENT_DISABLE_TIMING) can be told apart.  With no event hook these are plain forwards.
 */
#include "shim/internal.h"

static inline const struct shim_hooks *event_hooks(void)
{
	const struct shim_hooks *h = shim_hooks_get();
	return h && h->event_call ? h : NULL;
}

static void report(const struct shim_hooks *h, enum shim_event_op op, unsigned idx, CUevent e,
		   CUstream stream, unsigned flags)
{
	struct shim_event_call ev = {
		.op = op,
		.api_name = shim_names[idx],
		.event = (shim_event_t)e,
		.stream = (shim_stream_t)stream,
		.flags = flags,
	};
	h->event_call(&ev, h->user);
}

SHIM_API_EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	const struct shim_hooks *h = event_hooks();
	CUresult r = SHIM_REAL(cuEventCreate)(e, flags);
	if (h && r == CUDA_SUCCESS && e)
		report(h, SHIM_EVENT_CREATED, SHIM_IDX_cuEventCreate, *e, NULL, flags);
	return r;
}

#define DESTROY(fn)                                                                               \
	SHIM_API_EXPORT CUresult fn(CUevent e)                                                    \
	{                                                                                         \
		const struct shim_hooks *h = event_hooks();                                       \
		if (h)                                                                            \
			report(h, SHIM_EVENT_DESTROYING, SHIM_IDX_##fn, e, NULL, 0);              \
		return SHIM_REAL(fn)(e);                                                          \
	}

#define RECORD(fn)                                                                                \
	SHIM_API_EXPORT CUresult fn(CUevent e, CUstream s)                                        \
	{                                                                                         \
		const struct shim_hooks *h = event_hooks();                                       \
		if (h)                                                                            \
			report(h, SHIM_EVENT_RECORDING, SHIM_IDX_##fn, e, s, 0);                  \
		return SHIM_REAL(fn)(e, s);                                                       \
	}

#define RECORD_FLAGS(fn)                                                                          \
	SHIM_API_EXPORT CUresult fn(CUevent e, CUstream s, unsigned int flags)                    \
	{                                                                                         \
		const struct shim_hooks *h = event_hooks();                                       \
		if (h)                                                                            \
			report(h, SHIM_EVENT_RECORDING, SHIM_IDX_##fn, e, s, flags);              \
		return SHIM_REAL(fn)(e, s, flags);                                                \
	}

DESTROY(cuEventDestroy)
DESTROY(cuEventDestroy_v2)
RECORD(cuEventRecord)
RECORD(cuEventRecord_ptsz)
RECORD_FLAGS(cuEventRecordWithFlags)
RECORD_FLAGS(cuEventRecordWithFlags_ptsz)
