/* shim/live_module.c: module substitution.
 *
 * module_loading: the PTX of the image for the device (cubin/) is instrumented (ptx-rewriter/);
 * with a current context it is compiled to a cubin by the driver's JIT right away (cuLink*), so
 * that a JIT error shows here, with the JIT's log, and the original image is loaded instead.
 * Without a current context the instrumented PTX itself is substituted (the driver compiles it
 * when it loads the module).  The substitute lives until the module or library is unloaded.
 *
 * module_loaded: the maps' device addresses are stored in the module's `__cubpf_map_<i>`
 * globals.  A library (cuLibraryLoadData) is loaded per context, lazily: its pointers are
 * stored in each context where it is first launched (launching hook), before that launch.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubin/cubin.h"
#include "shim/live.h"

/* One substituted module or library. */
struct sub {
	const void *image;          /* the substitute handed to the driver (owned) */
	const void *handle;         /* CUmodule or CUlibrary once loaded */
	bool library;
	CUcontext filled[8];        /* contexts whose pointers are stored (a library: several) */
	unsigned nfilled;
	char label[96];             /* first instrumented kernel, for messages */
	struct sub *next;
};

static struct sub *subs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint nsubs;          /* launches skip everything while no library is substituted */

/* The substitute being loaded by this thread, between module_loading and module_loaded. */
static __thread struct sub *pending;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void fallback(const char *api, const char *label, const char *why)
{
	atomic_fetch_add(&live.n.modules_fallback, 1);
	shim_log(SHIM_LOG_WARN, "live: %s: %s not instrumented, the original module runs: %s", api,
		 label, why);
}

/* ---- the PTX to instrument ---------------------------------------------------------------- */

/* Finds the PTX for a device of capability `sm` in an image.  Returns 1 with text/len (valid
 * while img lives), 0 when the image has no usable PTX, -1 on an unreadable image. */
static int image_ptx(struct cubin_image *img, uint32_t sm, const char **text, size_t *len)
{
	long e = cubin_choose_ptx(img, SIZE_MAX, sm);
	const uint8_t *data;
	if (e < 0)
		return 0;
	if (cubin_entry_data(img, (size_t)e, &data, len) != 0)
		return -1;
	*text = (const char *)data;
	return 1;
}

static void note_no_ptx(const struct shim_module_event *ev, uint32_t sm)
{
	atomic_fetch_add(&live.n.modules_no_ptx, 1);
	atomic_fetch_add(&live.n.kernels_no_ptx, ev->info.nkernels);
	shim_log(SHIM_LOG_INFO, "live: %s: %u kernel%s not instrumentable: no PTX for sm_%u in "
		 "the image (%u cubins, SASS only)", ev->api_name, ev->info.nkernels,
		 ev->info.nkernels == 1 ? "" : "s", sm, ev->info.ncubins);
}

/* ---- JIT ----------------------------------------------------------------------------------- */

/* Compiles PTX text (NUL-terminated) to a cubin for the current context's device.  Returns a
 * malloc'ed copy of the cubin, or NULL with the JIT's log in err. */
static void *jit(const char *ptx, size_t len, size_t *cubin_size, char *err, size_t errlen)
{
	char log[4096] = "";
	CUjit_option opt[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *val[] = { log, (void *)(uintptr_t)sizeof(log) };
	CUlinkState st;
	void *cubin = NULL, *copy = NULL;
	size_t size = 0;
	CUresult r = live_cu.cuLinkCreate_v2(2, opt, val, &st);
	if (r != CUDA_SUCCESS) {
		snprintf(err, errlen, "cuLinkCreate: %s", live_cu_error(r));
		return NULL;
	}
	r = live_cu.cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, (void *)ptx, len + 1, "cubpf.ptx", 0,
				     NULL, NULL);
	if (r == CUDA_SUCCESS)
		r = live_cu.cuLinkComplete(st, &cubin, &size);
	if (r == CUDA_SUCCESS && (copy = malloc(size ? size : 1)))
		memcpy(copy, cubin, size);
	else if (r == CUDA_SUCCESS)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	live_cu.cuLinkDestroy(st);
	if (r != CUDA_SUCCESS) {
		log[sizeof(log) - 1] = 0;
		for (char *p = log; *p; p++)
			*p = *p == '\n' ? ' ' : *p;
		snprintf(err, errlen, "the driver's JIT refused the instrumented PTX (%s): %s",
			 live_cu_error(r), log);
		return NULL;
	}
	*cubin_size = size;
	return copy;
}

/* ---- module_loading ------------------------------------------------------------------------ */

struct work {
	const struct shim_module_event *ev;
	CUcontext ctx;
	uint32_t sm;
	char *out;                  /* instrumented PTX */
	size_t out_len;
	struct ptx_inject_report rep;
	char label[96];
	char err[LIVE_ERRLEN];
};

/* Instruments the image's PTX.  Returns 1 when kernels were instrumented (w->out), 0 when there
 * is nothing to do, -1 on failure (w->err). */
static int instrument(struct work *w)
{
	const struct shim_module_event *ev = w->ev;
	struct cubin_image *img;
	const char *text;
	size_t len;
	size_t max = ev->info.size ? ev->info.size : CUBIN_SIZE_UNKNOWN;
	if (cubin_image_open(&img, ev->image, max, CUBIN_OPEN_IN_MEMORY, w->err, sizeof(w->err)))
		return -1;
	int rc = image_ptx(img, w->sm, &text, &len);
	if (rc <= 0) {
		if (rc < 0)
			snprintf(w->err, sizeof(w->err), "reading the PTX: %s", img->error);
		else
			note_no_ptx(ev, w->sm);
		cubin_image_free(img);
		return rc;
	}
	struct ptx_inject_opts o = {
		.progs = live.progs, .prog_cnt = live.nprogs, .kernel_glob = live.kernel_glob,
		.kernel_id = live_kernel_id, .enable_words = live.enable_words,
	};
	struct vm_map_def *defs = calloc(live.nmaps + 1, sizeof(*defs));
	for (uint32_t i = 0; defs && i < live.nmaps; i++)
		defs[i] = live.maps[i].def;
	o.maps = defs, o.map_cnt = live.nmaps;
	rc = defs ? ptx_instrument(text, len, &o, &w->out, &w->out_len, &w->rep, w->err,
				   sizeof(w->err))
		  : -1;
	free(defs);
	if (rc == 0 && w->rep.instrumented == 0) {
		atomic_fetch_add(&live.n.modules_untouched, 1);
		free(w->out);
		w->out = NULL;
	}
	if (rc != 0 && !w->err[0])
		snprintf(w->err, sizeof(w->err), "out of memory");
	cubin_image_free(img);
	return rc != 0 ? -1 : w->out != NULL;
}

/* The first kernel of the instrumented text, to name the module in messages. */
static void label_of(const char *ptx, size_t len, char *label, size_t n)
{
	struct cubin_kernels k;
	char err[CUBIN_ERRLEN];
	snprintf(label, n, "module");
	if (cubin_ptx_kernels(ptx, len, &k, err, sizeof(err)) == 0) {
		if (k.count)
			snprintf(label, n, "%s%s", k.kernels[0].name, k.count > 1 ? ", ..." : "");
		cubin_kernels_free(&k);
	}
}

static bool handled(const struct shim_module_event *ev)
{
	switch (ev->api) {
	case SHIM_LOAD_MODULE_DATA:
	case SHIM_LOAD_MODULE_DATA_EX:
	case SHIM_LOAD_MODULE_FATBINARY:
	case SHIM_LOAD_LIBRARY_DATA:
		break;
	default:
		return false; /* file loads and link steps: not instrumented yet (LIVE.md) */
	}
	return ev->image && (ev->info.kind == SHIM_IMAGE_PTX || ev->info.kind == SHIM_IMAGE_FATBIN ||
			     ev->info.kind == SHIM_IMAGE_FATBIN_WRAPPER ||
			     ev->info.kind == SHIM_IMAGE_CUBIN);
}

/* Makes the substitute: the cubin the JIT made (with a context) or the PTX. */
static struct sub *make_sub(struct work *w, size_t *size)
{
	struct sub *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->label, sizeof(s->label), "%s", w->label);
	s->library = w->ev->api == SHIM_LOAD_LIBRARY_DATA;
	if (!w->ctx) {
		s->image = w->out;
		*size = w->out_len + 1;
		w->out = NULL;
		return s;
	}
	s->image = jit(w->out, w->out_len, size, w->err, sizeof(w->err));
	if (!s->image) {
		free(s);
		return NULL;
	}
	return s;
}

void live_module_loading(struct shim_module_event *ev, void *user)
{
	(void)user;
	pending = NULL;
	if (!live.nprogs) /* host programs only */
		return;
	if (!handled(ev)) {
		if (ev->api <= SHIM_LOAD_LIBRARY_FILE)
			atomic_fetch_add(&live.n.modules_skipped, 1);
		return;
	}
	uint64_t t0 = now_ms();
	struct work w = { .ev = ev };
	if (live_cu.cuCtxGetCurrent(&w.ctx) != CUDA_SUCCESS)
		w.ctx = NULL;
	w.sm = live_ctx_sm(w.ctx);
	int rc = w.sm ? instrument(&w) : -1;
	if (!w.sm)
		snprintf(w.err, sizeof(w.err), "the device's compute capability is unknown");
	if (rc == 0)
		return;
	if (rc < 0) {
		fallback(ev->api_name, "module", w.err);
		return;
	}
	label_of(w.out, w.out_len, w.label, sizeof(w.label));
	size_t size = 0;
	struct sub *s = NULL;
	if (w.ctx && !live_ctx_get(w.ctx, w.err, sizeof(w.err)))
		fallback(ev->api_name, w.label, w.err);
	else if (!(s = make_sub(&w, &size)))
		fallback(ev->api_name, w.label, w.err[0] ? w.err : "out of memory");
	free(w.out);
	if (!s)
		return;
	pending = s;
	ev->image = s->image;
	ev->info.kind = w.ctx ? SHIM_IMAGE_CUBIN : SHIM_IMAGE_PTX;
	ev->info.size = size;
	ev->info.ncubins = w.ctx ? 1 : 0; /* what the driver gets now (the load's log line) */
	ev->info.nptx = w.ctx ? 0 : 1;
	shim_log(SHIM_LOG_INFO, "live: %s: instrumented %u of %u kernels (%s; %u entry, %u exit, "
		 "%u memory sites), %s of %zu B for sm_%u in %llu ms", ev->api_name,
		 w.rep.instrumented, w.rep.kernels, w.label, w.rep.entry_sites, w.rep.exit_sites,
		 w.rep.mem_sites, w.ctx ? "cubin" : "PTX", size, w.sm,
		 (unsigned long long)(now_ms() - t0));
	atomic_fetch_add(&live.n.kernels_instrumented, w.rep.instrumented);
}

/* ---- module_loaded ------------------------------------------------------------------------- */

/* Stores the pointers in the current context if not done yet.  Lock held. */
static int fill_locked(struct sub *s, CUcontext ctx)
{
	char err[LIVE_ERRLEN] = "";
	for (unsigned i = 0; i < s->nfilled; i++)
		if (s->filled[i] == ctx)
			return 0;
	struct live_ctx *c = live_ctx_get(ctx, err, sizeof(err));
	if (!c || live_fill(c, s->library ? NULL : (CUmodule)s->handle,
			    s->library ? (CUlibrary)s->handle : NULL, err, sizeof(err)) != 0) {
		atomic_fetch_add(&live.n.fill_failures, 1);
		shim_log(SHIM_LOG_WARN, "live: %s (context %p): the probes' maps are not reachable: "
			 "%s", s->label, (void *)ctx, err);
		return -1;
	}
	if (s->nfilled < sizeof(s->filled) / sizeof(s->filled[0]))
		s->filled[s->nfilled++] = ctx;
	return 0;
}

void live_module_loaded(const struct shim_module_event *ev, void *user)
{
	(void)user;
	struct sub *s = pending;
	if (!s || ev->image != s->image)
		return;
	pending = NULL;
	if (ev->result != CUDA_SUCCESS) { /* the wrapper loads the original image next */
		fallback(ev->api_name, s->label, live_cu_error((CUresult)ev->result));
		free((void *)s->image);
		free(s);
		return;
	}
	s->handle = s->library ? (const void *)ev->library : (const void *)ev->module;
	CUcontext ctx = NULL;
	pthread_mutex_lock(&lock);
	if (live_cu.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
		fill_locked(s, ctx);
	s->next = subs;
	subs = s;
	pthread_mutex_unlock(&lock);
	atomic_fetch_add(&live.n.modules_instrumented, 1);
	if (s->library)
		atomic_fetch_add(&nsubs, 1);
}

void live_module_unloaded(shim_module_t module, shim_library_t library, int result, void *user)
{
	(void)user;
	const void *h = module ? (const void *)module : (const void *)library;
	if (result != CUDA_SUCCESS || !h)
		return;
	pthread_mutex_lock(&lock);
	for (struct sub **p = &subs; *p; p = &(*p)->next)
		if ((*p)->handle == h) {
			struct sub *s = *p;
			*p = s->next;
			if (s->library)
				atomic_fetch_sub(&nsubs, 1);
			free((void *)s->image);
			free(s);
			break;
		}
	pthread_mutex_unlock(&lock);
}

/* ---- launches: a library's first launch in a context --------------------------------------- */

/* Launch sampling: the kernel's enable word is set on the launch's own stream, before the launch,
 * to all-on for every Nth launch and all-off for the others (only when it changes). */
static void sample(const struct shim_launch_event *ev, const struct shim_kernel_info *k)
{
	CUcontext ctx = NULL;
	uint64_t n = 0;
	struct live_ctx *c;
	if (ev->api == SHIM_LAUNCH_GRAPH_NODE || ev->api == SHIM_LAUNCH_LEGACY ||
	    ev->api == SHIM_LAUNCH_MULTI_DEVICE)
		return; /* not a launch on a stream we can order against */
	if (live_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx || !(c = live_ctx_find(ctx)))
		return;
	uint32_t id = live_kernel_launch(k->name, &n);
	if (!id || id >= CUBPF_ENABLE_WORDS)
		return;
	uint32_t word = n % live.sample == 0 ? ~0u : 0;
	if (__atomic_exchange_n(&c->enable_set[id], word, __ATOMIC_RELAXED) == word)
		return;
	size_t len = strlen(ev->api_name);
	bool ptsz = len > 5 && !strcmp(ev->api_name + len - 5, "_ptsz");
	CUresult r = (ptsz ? live_cu.cuMemsetD32Async_ptsz : live_cu.cuMemsetD32Async)(
		c->enable + id * sizeof(uint32_t), word, 1, (CUstream)ev->stream);
	if (r != CUDA_SUCCESS)
		shim_log(SHIM_LOG_DEBUG, "live: sampling %s: %s", k->name, live_cu_error(r));
}

void live_launching(struct shim_launch_event *ev, void *user)
{
	(void)user;
	static __thread const void *last_lib;
	static __thread CUcontext last_ctx;
	const struct shim_kernel_info *k = ev->kernel;
	CUcontext ctx = NULL;
	live_host_launch(ev, false);
	if (live.sample > 1 && k)
		sample(ev, k);
	if (!atomic_load_explicit(&nsubs, memory_order_relaxed) || !k || !k->library)
		return;
	if (live_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
		return;
	if (k->library == last_lib && ctx == last_ctx) /* this thread filled it already */
		return;
	pthread_mutex_lock(&lock);
	for (struct sub *s = subs; s; s = s->next)
		if (s->library && s->handle == (const void *)k->library) {
			if (fill_locked(s, ctx) == 0)
				last_lib = k->library, last_ctx = ctx;
			break;
		}
	pthread_mutex_unlock(&lock);
}
