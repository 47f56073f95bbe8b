/* shim/wrap_launch.c: kernel launches and kernel nodes of CUDA graphs.
 *
 * The launch path is the hot one: with no hooks installed a launch costs a lock-free look-up
 * of the handle (a CUfunction or a CUkernel: the registry knows both), a relaxed counter
 * increment and the forwarded call.  With hooks the event is built on the stack and the hooks
 * may substitute the function and the parameter array before the real call.
 */
#include <string.h>

#include "shim/internal.h"

/* Counts the launch and returns the hooks to call, or NULL for the fast path. */
static inline const struct shim_hooks *launch_count(const void *func,
						    struct shim_kernel_info **kernel)
{
	shim_ensure_init();
	if (__builtin_expect(shim_state.disabled, 0))
		return NULL;
	struct shim_kernel_info *k = shim_kernel_find(func);
	if (__builtin_expect(k == NULL, 0))
		k = shim_kernel_discover(func);
	if (__builtin_expect(k != NULL, 1))
		__atomic_fetch_add(&k->launches, 1, __ATOMIC_RELAXED);
	else
		shim_count_unknown_launch();
	*kernel = shim_kernel_is_unknown(k) ? NULL : k;
	const struct shim_hooks *h = atomic_load_explicit(&shim_hooks_now, memory_order_acquire);
	return h && (h->launching || h->launched) ? h : NULL;
}

static void event_init(struct shim_launch_event *ev, enum shim_launch_api api, const char *name,
		       const void *func, const struct shim_kernel_info *k)
{
	memset(ev, 0, sizeof(*ev));
	ev->api = api;
	ev->api_name = name;
	ev->func = func;
	ev->kernel = k;
	ev->tid = shim_tid();
}

static void set_dims(struct shim_launch_event *ev, unsigned gx, unsigned gy, unsigned gz,
		     unsigned bx, unsigned by, unsigned bz, unsigned shmem)
{
	ev->grid[0] = gx, ev->grid[1] = gy, ev->grid[2] = gz;
	ev->block[0] = bx, ev->block[1] = by, ev->block[2] = bz;
	ev->shared_bytes = shmem;
}

static void before(const struct shim_hooks *h, struct shim_launch_event *ev)
{
	if (h->launching)
		h->launching(ev, h->user);
	/* A substituted function may be another registered kernel (the instrumented copy). */
	if (ev->func && (!ev->kernel || ev->kernel->handle != ev->func)) {
		const struct shim_kernel_info *k = shim_kernel_find(ev->func);
		ev->kernel = k ? k : ev->kernel;
	}
	ev->ts_begin = h->launch_untimed ? 0 : shim_now_ns();
}

static CUresult after(const struct shim_hooks *h, struct shim_launch_event *ev, CUresult r)
{
	ev->ts_end = h->launch_untimed ? 0 : shim_now_ns();
	ev->result = r;
	if (h->launched)
		h->launched(ev, h->user);
	return r;
}

/* ---- cuLaunchKernel, cuLaunchCooperativeKernel (and _ptsz) ------------------------------- */

static CUresult launch_hooked(const struct shim_hooks *h, struct shim_kernel_info *k,
			      unsigned idx, enum shim_launch_api api, CUfunction f, unsigned gx,
			      unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			      unsigned shmem, CUstream s, void **params, void **extra)
{
	struct shim_launch_event ev;
	event_init(&ev, api, shim_names[idx], f, k);
	set_dims(&ev, gx, gy, gz, bx, by, bz, shmem);
	ev.stream = (shim_stream_t)s;
	ev.params = params;
	ev.extra = extra;
	before(h, &ev);
	CUresult r;
	if (api == SHIM_LAUNCH_COOPERATIVE)
		r = ((__typeof__(&cuLaunchCooperativeKernel))shim_slots[idx])(
			(CUfunction)ev.func, gx, gy, gz, bx, by, bz, shmem, s, ev.params);
	else
		r = ((__typeof__(&cuLaunchKernel))shim_slots[idx])(
			(CUfunction)ev.func, gx, gy, gz, bx, by, bz, shmem, s, ev.params, ev.extra);
	return after(h, &ev, r);
}

#define LAUNCH_KERNEL(fn)                                                                         \
	SHIM_API_EXPORT CUresult fn(CUfunction f, unsigned gx, unsigned gy, unsigned gz,          \
				    unsigned bx, unsigned by, unsigned bz, unsigned shmem,        \
				    CUstream s, void **params, void **extra)                      \
	{                                                                                         \
		struct shim_kernel_info *k;                                                       \
		const struct shim_hooks *h = launch_count(f, &k);                                 \
		if (__builtin_expect(!h, 1))                                                      \
			return SHIM_REAL(fn)(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra); \
		return launch_hooked(h, k, SHIM_IDX_##fn, SHIM_LAUNCH_KERNEL, f, gx, gy, gz, bx,  \
				     by, bz, shmem, s, params, extra);                            \
	}
#define LAUNCH_COOPERATIVE(fn)                                                                    \
	SHIM_API_EXPORT CUresult fn(CUfunction f, unsigned gx, unsigned gy, unsigned gz,          \
				    unsigned bx, unsigned by, unsigned bz, unsigned shmem,        \
				    CUstream s, void **params)                                    \
	{                                                                                         \
		struct shim_kernel_info *k;                                                       \
		const struct shim_hooks *h = launch_count(f, &k);                                 \
		if (__builtin_expect(!h, 1))                                                      \
			return SHIM_REAL(fn)(f, gx, gy, gz, bx, by, bz, shmem, s, params);        \
		return launch_hooked(h, k, SHIM_IDX_##fn, SHIM_LAUNCH_COOPERATIVE, f, gx, gy, gz, \
				     bx, by, bz, shmem, s, params, NULL);                         \
	}

LAUNCH_KERNEL(cuLaunchKernel)
LAUNCH_KERNEL(cuLaunchKernel_ptsz)
LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel)
LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel_ptsz)

/* ---- cuLaunchKernelEx (and _ptsz) --------------------------------------------------------- */

static CUresult launch_ex_hooked(const struct shim_hooks *h, struct shim_kernel_info *k,
				 unsigned idx, const CUlaunchConfig *config, CUfunction f,
				 void **params, void **extra)
{
	struct shim_launch_event ev;
	event_init(&ev, SHIM_LAUNCH_KERNEL_EX, shim_names[idx], f, k);
	if (config) {
		set_dims(&ev, config->gridDimX, config->gridDimY, config->gridDimZ,
			 config->blockDimX, config->blockDimY, config->blockDimZ,
			 config->sharedMemBytes);
		ev.stream = (shim_stream_t)config->hStream;
	}
	ev.params = params;
	ev.extra = extra;
	ev.config = config;
	before(h, &ev);
	CUresult r = ((__typeof__(&cuLaunchKernelEx))shim_slots[idx])(config, (CUfunction)ev.func,
								       ev.params, ev.extra);
	return after(h, &ev, r);
}

#define LAUNCH_KERNEL_EX(fn)                                                                      \
	SHIM_API_EXPORT CUresult fn(const CUlaunchConfig *config, CUfunction f, void **params,    \
				    void **extra)                                                 \
	{                                                                                         \
		struct shim_kernel_info *k;                                                       \
		const struct shim_hooks *h = launch_count(f, &k);                                 \
		if (__builtin_expect(!h, 1))                                                      \
			return SHIM_REAL(fn)(config, f, params, extra);                           \
		return launch_ex_hooked(h, k, SHIM_IDX_##fn, config, f, params, extra);           \
	}

LAUNCH_KERNEL_EX(cuLaunchKernelEx)
LAUNCH_KERNEL_EX(cuLaunchKernelEx_ptsz)

/* ---- deprecated launch forms: counted and reported, never substituted ----------------------- */

/* Reports a launch whose function cannot be substituted (the hooks see it, nothing more). */
static void launch_report_only(const struct shim_hooks *h, struct shim_kernel_info *k,
			       unsigned idx, enum shim_launch_api api, CUfunction f, unsigned gx,
			       unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			       unsigned shmem, CUstream s, void **params)
{
	struct shim_launch_event ev;
	event_init(&ev, api, shim_names[idx], f, k);
	set_dims(&ev, gx, gy, gz, bx, by, bz, shmem);
	ev.stream = (shim_stream_t)s;
	ev.params = params;
	if (h->launching)
		h->launching(&ev, h->user);
	ev.func = f;
	ev.kernel = k;
	ev.ts_begin = h->launch_untimed ? 0 : shim_now_ns();
}

SHIM_API_EXPORT CUresult cuLaunch(CUfunction f)
{
	struct shim_kernel_info *k;
	const struct shim_hooks *h = launch_count(f, &k);
	if (h)
		launch_report_only(h, k, SHIM_IDX_cuLaunch, SHIM_LAUNCH_LEGACY, f, 1, 1, 1, 0, 0, 0, 0,
				   NULL, NULL);
	return SHIM_REAL(cuLaunch)(f);
}

SHIM_API_EXPORT CUresult cuLaunchGrid(CUfunction f, int w, int hgt)
{
	struct shim_kernel_info *k;
	const struct shim_hooks *h = launch_count(f, &k);
	if (h)
		launch_report_only(h, k, SHIM_IDX_cuLaunchGrid, SHIM_LAUNCH_LEGACY, f, (unsigned)w,
				   (unsigned)hgt, 1, 0, 0, 0, 0, NULL, NULL);
	return SHIM_REAL(cuLaunchGrid)(f, w, hgt);
}

SHIM_API_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int w, int hgt, CUstream s)
{
	struct shim_kernel_info *k;
	const struct shim_hooks *h = launch_count(f, &k);
	if (h)
		launch_report_only(h, k, SHIM_IDX_cuLaunchGridAsync, SHIM_LAUNCH_LEGACY, f,
				   (unsigned)w, (unsigned)hgt, 1, 0, 0, 0, 0, s, NULL);
	return SHIM_REAL(cuLaunchGridAsync)(f, w, hgt, s);
}

SHIM_API_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list,
							      unsigned int n, unsigned int flags)
{
	for (unsigned i = 0; list && i < n; i++) {
		const CUDA_LAUNCH_PARAMS *p = &list[i];
		struct shim_kernel_info *k;
		const struct shim_hooks *h = launch_count(p->function, &k);
		if (h)
			launch_report_only(h, k, SHIM_IDX_cuLaunchCooperativeKernelMultiDevice,
					   SHIM_LAUNCH_MULTI_DEVICE, p->function, p->gridDimX,
					   p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
					   p->blockDimZ, p->sharedMemBytes, p->hStream,
					   p->kernelParams);
	}
	return SHIM_REAL(cuLaunchCooperativeKernelMultiDevice)(list, n, flags);
}

/* ---- graph kernel nodes --------------------------------------------------------------------
 * A node is not a launch (a graph may run many times, or never): it is reported as a
 * SHIM_LAUNCH_GRAPH_NODE event so that a hook can substitute the function in the node, and it
 * does not count as a launch of the kernel.  The three parameter layouts (v1, v2, v3) share
 * their first fields; v2 and v3 add a CUkernel used when func is NULL. */

struct node_view {
	CUfunction *func;       /* in the caller's copy of the parameters */
	void ***params;
	CUkernel kern;
};

/* Runs the hooks on a node's parameters (a private copy the caller passes to the driver). */
static void node_hooks(unsigned idx, const struct node_view *v, const void *p, unsigned gx,
		       unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		       unsigned shmem)
{
	shim_ensure_init();
	const struct shim_hooks *h = atomic_load_explicit(&shim_hooks_now, memory_order_acquire);
	if (!h || shim_state.disabled || !h->launching)
		return;
	const void *func = *v->func ? (const void *)*v->func : (const void *)v->kern;
	struct shim_launch_event ev;
	event_init(&ev, SHIM_LAUNCH_GRAPH_NODE, shim_names[idx], func, shim_kernel_find(func));
	set_dims(&ev, gx, gy, gz, bx, by, bz, shmem);
	ev.params = *v->params;
	ev.config = p;
	h->launching(&ev, h->user);
	if (ev.func != func)
		*v->func = (CUfunction)ev.func;
	*v->params = ev.params;
}

#define NODE_HOOKS(idx, v, p)                                                                     \
	node_hooks(idx, v, p, (p)->gridDimX, (p)->gridDimY, (p)->gridDimZ, (p)->blockDimX,        \
		   (p)->blockDimY, (p)->blockDimZ, (p)->sharedMemBytes)

SHIM_API_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					      const CUgraphNode *deps, size_t ndeps,
					      const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	if (!p)
		return SHIM_REAL(cuGraphAddKernelNode)(phGraphNode, hGraph, deps, ndeps, p);
	CUDA_KERNEL_NODE_PARAMS_v1 c = *p;
	struct node_view v = { &c.func, &c.kernelParams, NULL };
	NODE_HOOKS(SHIM_IDX_cuGraphAddKernelNode, &v, &c);
	return SHIM_REAL(cuGraphAddKernelNode)(phGraphNode, hGraph, deps, ndeps, &c);
}

SHIM_API_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
						 const CUgraphNode *deps, size_t ndeps,
						 const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!p)
		return SHIM_REAL(cuGraphAddKernelNode_v2)(phGraphNode, hGraph, deps, ndeps, p);
	CUDA_KERNEL_NODE_PARAMS c = *p;
	struct node_view v = { &c.func, &c.kernelParams, c.kern };
	NODE_HOOKS(SHIM_IDX_cuGraphAddKernelNode_v2, &v, &c);
	return SHIM_REAL(cuGraphAddKernelNode_v2)(phGraphNode, hGraph, deps, ndeps, &c);
}

SHIM_API_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode,
						    const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	if (!p)
		return SHIM_REAL(cuGraphKernelNodeSetParams)(hNode, p);
	CUDA_KERNEL_NODE_PARAMS_v1 c = *p;
	struct node_view v = { &c.func, &c.kernelParams, NULL };
	NODE_HOOKS(SHIM_IDX_cuGraphKernelNodeSetParams, &v, &c);
	return SHIM_REAL(cuGraphKernelNodeSetParams)(hNode, &c);
}

SHIM_API_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
						       const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!p)
		return SHIM_REAL(cuGraphKernelNodeSetParams_v2)(hNode, p);
	CUDA_KERNEL_NODE_PARAMS c = *p;
	struct node_view v = { &c.func, &c.kernelParams, c.kern };
	NODE_HOOKS(SHIM_IDX_cuGraphKernelNodeSetParams_v2, &v, &c);
	return SHIM_REAL(cuGraphKernelNodeSetParams_v2)(hNode, &c);
}

SHIM_API_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hExec, CUgraphNode hNode,
							const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	if (!p)
		return SHIM_REAL(cuGraphExecKernelNodeSetParams)(hExec, hNode, p);
	CUDA_KERNEL_NODE_PARAMS_v1 c = *p;
	struct node_view v = { &c.func, &c.kernelParams, NULL };
	NODE_HOOKS(SHIM_IDX_cuGraphExecKernelNodeSetParams, &v, &c);
	return SHIM_REAL(cuGraphExecKernelNodeSetParams)(hExec, hNode, &c);
}

SHIM_API_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hExec, CUgraphNode hNode,
							   const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!p)
		return SHIM_REAL(cuGraphExecKernelNodeSetParams_v2)(hExec, hNode, p);
	CUDA_KERNEL_NODE_PARAMS c = *p;
	struct node_view v = { &c.func, &c.kernelParams, c.kern };
	NODE_HOOKS(SHIM_IDX_cuGraphExecKernelNodeSetParams_v2, &v, &c);
	return SHIM_REAL(cuGraphExecKernelNodeSetParams_v2)(hExec, hNode, &c);
}

/* cuGraphAddNode: only kernel nodes concern us; other node types pass untouched. */
static const CUgraphNodeParams *node_params(unsigned idx, const CUgraphNodeParams *p,
					    CUgraphNodeParams *copy)
{
	if (!p || p->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return p;
	*copy = *p;
	CUDA_KERNEL_NODE_PARAMS_v3 *k = &copy->kernel;
	struct node_view v = { &k->func, &k->kernelParams, k->kern };
	NODE_HOOKS(idx, &v, k);
	/* The driver may write output fields of other node types into *p: hand it the caller's
	 * own structure unless a hook changed the kernel node. */
	if (k->func == p->kernel.func && k->kernelParams == p->kernel.kernelParams)
		return p;
	return copy;
}

SHIM_API_EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					const CUgraphNode *deps, size_t ndeps, CUgraphNodeParams *p)
{
	CUgraphNodeParams copy;
	const CUgraphNodeParams *use = node_params(SHIM_IDX_cuGraphAddNode, p, &copy);
	return SHIM_REAL(cuGraphAddNode)(phGraphNode, hGraph, deps, ndeps,
					 (CUgraphNodeParams *)use);
}

SHIM_API_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
					   const CUgraphNode *deps,
					   const CUgraphEdgeData *edges, size_t ndeps,
					   CUgraphNodeParams *p)
{
	CUgraphNodeParams copy;
	const CUgraphNodeParams *use = node_params(SHIM_IDX_cuGraphAddNode_v2, p, &copy);
	return SHIM_REAL(cuGraphAddNode_v2)(phGraphNode, hGraph, deps, edges, ndeps,
					    (CUgraphNodeParams *)use);
}
