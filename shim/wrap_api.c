/* shim/wrap_api.c: the host timeline — copies, memsets, synchronisations, context and stream
 * creation.  With no api hook installed each wrapper is a test and the forwarded call; with one,
 * the call is timed and reported (name, stream, bytes, result, begin/end, thread). */
#include "shim/internal.h"

static inline const struct shim_hooks *api_hooks(void)
{
	const struct shim_hooks *h = shim_hooks_get();
	return h && h->api_call ? h : NULL;
}

static void api_report(const struct shim_hooks *h, enum shim_api_kind kind, unsigned idx,
		       const void *stream, uint64_t bytes, CUresult r, uint64_t t0)
{
	struct shim_api_event ev = {
		.kind = kind,
		.name = shim_names[idx],
		.func_id = idx,
		.stream = (shim_stream_t)stream,
		.bytes = bytes,
		.result = r,
		.ts_begin = t0,
		.ts_end = shim_now_ns(),
		.tid = shim_tid(),
	};
	h->api_call(&ev, h->user);
}

/* API(kind, name, stream, bytes, (parameters), (arguments)): `stream` and `bytes` are evaluated
 * after the real call (so that creation calls can report the handle they made), and only when
 * a hook listens. */
#define API(kind, name, stream, bytes, params, args)                                              \
	SHIM_API_EXPORT CUresult name params                                                      \
	{                                                                                         \
		const struct shim_hooks *h = api_hooks();                                         \
		if (__builtin_expect(!h, 1))                                                      \
			return SHIM_REAL(name) args;                                              \
		uint64_t t0 = shim_now_ns();                                                      \
		CUresult r = SHIM_REAL(name) args;                                                \
		api_report(h, kind, SHIM_IDX_##name, (const void *)(stream), (uint64_t)(bytes),   \
			   r, t0);                                                                \
		return r;                                                                         \
	}

#define CP SHIM_API_MEMCPY
#define MS SHIM_API_MEMSET
#define SY SHIM_API_SYNC
#define NONE 0

/* Linear copies. */
API(CP, cuMemcpy, NONE, n, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
API(CP, cuMemcpy_ptds, NONE, n, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
API(CP, cuMemcpyAsync, st, n, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
API(CP, cuMemcpyAsync_ptsz, st, n, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
API(CP, cuMemcpyPeer, NONE, n, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n),
    (d, dc, s, sc, n))
API(CP, cuMemcpyPeer_ptds, NONE, n,
    (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n), (d, dc, s, sc, n))
API(CP, cuMemcpyPeerAsync, st, n,
    (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st),
    (d, dc, s, sc, n, st))
API(CP, cuMemcpyPeerAsync_ptsz, st, n,
    (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st),
    (d, dc, s, sc, n, st))

/* Host <-> device, device <-> device: the legacy 32-bit forms, _v2 and per-thread _v2. */
API(CP, cuMemcpyHtoD, NONE, n, (CUdeviceptr_v1 d, const void *s, unsigned int n), (d, s, n))
API(CP, cuMemcpyHtoD_v2, NONE, n, (CUdeviceptr d, const void *s, size_t n), (d, s, n))
API(CP, cuMemcpyHtoD_v2_ptds, NONE, n, (CUdeviceptr d, const void *s, size_t n), (d, s, n))
API(CP, cuMemcpyDtoH, NONE, n, (void *d, CUdeviceptr_v1 s, unsigned int n), (d, s, n))
API(CP, cuMemcpyDtoH_v2, NONE, n, (void *d, CUdeviceptr s, size_t n), (d, s, n))
API(CP, cuMemcpyDtoH_v2_ptds, NONE, n, (void *d, CUdeviceptr s, size_t n), (d, s, n))
API(CP, cuMemcpyDtoD, NONE, n, (CUdeviceptr_v1 d, CUdeviceptr_v1 s, unsigned int n), (d, s, n))
API(CP, cuMemcpyDtoD_v2, NONE, n, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
API(CP, cuMemcpyDtoD_v2_ptds, NONE, n, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
API(CP, cuMemcpyHtoDAsync, st, n, (CUdeviceptr_v1 d, const void *s, unsigned int n, CUstream st),
    (d, s, n, st))
API(CP, cuMemcpyHtoDAsync_v2, st, n, (CUdeviceptr d, const void *s, size_t n, CUstream st),
    (d, s, n, st))
API(CP, cuMemcpyHtoDAsync_v2_ptsz, st, n, (CUdeviceptr d, const void *s, size_t n, CUstream st),
    (d, s, n, st))
API(CP, cuMemcpyDtoHAsync, st, n, (void *d, CUdeviceptr_v1 s, unsigned int n, CUstream st),
    (d, s, n, st))
API(CP, cuMemcpyDtoHAsync_v2, st, n, (void *d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
API(CP, cuMemcpyDtoHAsync_v2_ptsz, st, n, (void *d, CUdeviceptr s, size_t n, CUstream st),
    (d, s, n, st))
API(CP, cuMemcpyDtoDAsync, st, n, (CUdeviceptr_v1 d, CUdeviceptr_v1 s, unsigned int n, CUstream st),
    (d, s, n, st))
API(CP, cuMemcpyDtoDAsync_v2, st, n, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st),
    (d, s, n, st))
API(CP, cuMemcpyDtoDAsync_v2_ptsz, st, n, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st),
    (d, s, n, st))

/* 2D / 3D copies. */
#define BYTES2D(p) ((p) ? (uint64_t)(p)->WidthInBytes * (p)->Height : 0)
#define BYTES3D(p) ((p) ? (uint64_t)(p)->WidthInBytes * (p)->Height * (p)->Depth : 0)
API(CP, cuMemcpy2D_v2, NONE, BYTES2D(p), (const CUDA_MEMCPY2D *p), (p))
API(CP, cuMemcpy2D_v2_ptds, NONE, BYTES2D(p), (const CUDA_MEMCPY2D *p), (p))
API(CP, cuMemcpy2DAsync_v2, st, BYTES2D(p), (const CUDA_MEMCPY2D *p, CUstream st), (p, st))
API(CP, cuMemcpy2DAsync_v2_ptsz, st, BYTES2D(p), (const CUDA_MEMCPY2D *p, CUstream st), (p, st))
API(CP, cuMemcpy3D_v2, NONE, BYTES3D(p), (const CUDA_MEMCPY3D *p), (p))
API(CP, cuMemcpy3D_v2_ptds, NONE, BYTES3D(p), (const CUDA_MEMCPY3D *p), (p))
API(CP, cuMemcpy3DAsync_v2, st, BYTES3D(p), (const CUDA_MEMCPY3D *p, CUstream st), (p, st))
API(CP, cuMemcpy3DAsync_v2_ptsz, st, BYTES3D(p), (const CUDA_MEMCPY3D *p, CUstream st), (p, st))

/* Memsets: bytes = elements x element size. */
API(MS, cuMemsetD8, NONE, n, (CUdeviceptr_v1 d, unsigned char v, unsigned int n), (d, v, n))
API(MS, cuMemsetD8_v2, NONE, n, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n))
API(MS, cuMemsetD8_v2_ptds, NONE, n, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n))
API(MS, cuMemsetD16, NONE, 2 * (uint64_t)n, (CUdeviceptr_v1 d, unsigned short v, unsigned int n),
    (d, v, n))
API(MS, cuMemsetD16_v2, NONE, 2 * (uint64_t)n, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n))
API(MS, cuMemsetD16_v2_ptds, NONE, 2 * (uint64_t)n, (CUdeviceptr d, unsigned short v, size_t n),
    (d, v, n))
API(MS, cuMemsetD32, NONE, 4 * (uint64_t)n, (CUdeviceptr_v1 d, unsigned int v, unsigned int n),
    (d, v, n))
API(MS, cuMemsetD32_v2, NONE, 4 * (uint64_t)n, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n))
API(MS, cuMemsetD32_v2_ptds, NONE, 4 * (uint64_t)n, (CUdeviceptr d, unsigned int v, size_t n),
    (d, v, n))
API(MS, cuMemsetD8Async, st, n, (CUdeviceptr d, unsigned char v, size_t n, CUstream st),
    (d, v, n, st))
API(MS, cuMemsetD8Async_ptsz, st, n, (CUdeviceptr d, unsigned char v, size_t n, CUstream st),
    (d, v, n, st))
API(MS, cuMemsetD16Async, st, 2 * (uint64_t)n,
    (CUdeviceptr d, unsigned short v, size_t n, CUstream st), (d, v, n, st))
API(MS, cuMemsetD16Async_ptsz, st, 2 * (uint64_t)n,
    (CUdeviceptr d, unsigned short v, size_t n, CUstream st), (d, v, n, st))
API(MS, cuMemsetD32Async, st, 4 * (uint64_t)n, (CUdeviceptr d, unsigned int v, size_t n, CUstream st),
    (d, v, n, st))
API(MS, cuMemsetD32Async_ptsz, st, 4 * (uint64_t)n,
    (CUdeviceptr d, unsigned int v, size_t n, CUstream st), (d, v, n, st))
API(MS, cuMemsetD2D8_v2, NONE, (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hgt), (d, pitch, v, w, hgt))
API(MS, cuMemsetD2D8_v2_ptds, NONE, (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hgt), (d, pitch, v, w, hgt))
API(MS, cuMemsetD2D32_v2, NONE, 4 * (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hgt), (d, pitch, v, w, hgt))
API(MS, cuMemsetD2D32_v2_ptds, NONE, 4 * (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hgt), (d, pitch, v, w, hgt))
API(MS, cuMemsetD2D8Async, st, (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hgt, CUstream st),
    (d, pitch, v, w, hgt, st))
API(MS, cuMemsetD2D8Async_ptsz, st, (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hgt, CUstream st),
    (d, pitch, v, w, hgt, st))
API(MS, cuMemsetD2D32Async, st, 4 * (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hgt, CUstream st),
    (d, pitch, v, w, hgt, st))
API(MS, cuMemsetD2D32Async_ptsz, st, 4 * (uint64_t)w * hgt,
    (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hgt, CUstream st),
    (d, pitch, v, w, hgt, st))

/* Synchronisations. */
API(SY, cuCtxSynchronize, NONE, 0, (void), ())
API(SY, cuCtxSynchronize_v2, NONE, 0, (CUcontext c), (c))
API(SY, cuStreamSynchronize, st, 0, (CUstream st), (st))
API(SY, cuStreamSynchronize_ptsz, st, 0, (CUstream st), (st))
API(SY, cuEventSynchronize, NONE, 0, (CUevent e), (e))

/* Contexts and streams: `stream` reports the created handle. */
#define MADE(p) (r == CUDA_SUCCESS && (p) ? (const void *)*(p) : NULL)
API(SHIM_API_CTX_CREATE, cuCtxCreate, MADE(pc), 0, (CUcontext *pc, unsigned int f, CUdevice dev),
    (pc, f, dev))
API(SHIM_API_CTX_CREATE, cuCtxCreate_v2, MADE(pc), 0,
    (CUcontext *pc, unsigned int f, CUdevice dev), (pc, f, dev))
API(SHIM_API_CTX_CREATE, cuCtxCreate_v3, MADE(pc), 0,
    (CUcontext *pc, CUexecAffinityParam *a, int na, unsigned int f, CUdevice dev),
    (pc, a, na, f, dev))
API(SHIM_API_CTX_CREATE, cuCtxCreate_v4, MADE(pc), 0,
    (CUcontext *pc, CUctxCreateParams *cp, unsigned int f, CUdevice dev), (pc, cp, f, dev))
API(SHIM_API_CTX_CREATE, cuDevicePrimaryCtxRetain, MADE(pc), 0, (CUcontext *pc, CUdevice dev),
    (pc, dev))
API(SHIM_API_STREAM_CREATE, cuStreamCreate, MADE(ps), 0, (CUstream *ps, unsigned int f), (ps, f))
API(SHIM_API_STREAM_CREATE, cuStreamCreateWithPriority, MADE(ps), 0,
    (CUstream *ps, unsigned int f, int prio), (ps, f, prio))

/* Graph launches: counted for the summary (the kernels inside a graph are not launch calls). */
#define GRAPH_LAUNCH(name)                                                                        \
	SHIM_API_EXPORT CUresult name(CUgraphExec g, CUstream st)                                 \
	{                                                                                         \
		const struct shim_hooks *h = api_hooks();                                         \
		if (!shim_state.disabled)                                                         \
			shim_report_graph_launch();                                               \
		if (__builtin_expect(!h, 1))                                                      \
			return SHIM_REAL(name)(g, st);                                            \
		uint64_t t0 = shim_now_ns();                                                      \
		CUresult r = SHIM_REAL(name)(g, st);                                              \
		api_report(h, SHIM_API_GRAPH_LAUNCH, SHIM_IDX_##name, st, 0, r, t0);              \
		return r;                                                                         \
	}
GRAPH_LAUNCH(cuGraphLaunch)
GRAPH_LAUNCH(cuGraphLaunch_ptsz)
