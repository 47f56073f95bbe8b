/* shim/live_module.c: module substitution.
 *
 * module_loading: the PTX of the image for the device (cubin/) is instrumented (ptx-rewriter/);
 * with a current context it is compiled to a cubin by the driver's JIT right away (cuLink*), so
 * that a JIT error shows here, with the JIT's log, and the original image is loaded instead.
 * Without a current context the instrumented PTX itself is substituted (the driver compiles it
 * when it loads the module).  The substitute lives until the module or library is unloaded.
 *
 * With a context, the module cache (live_cache.c) is looked up first: a hit registers the kernel
 * ids the entry was made with and substitutes its cubin (no PTX read, no rewrite, no JIT); a
 * miss instruments and compiles, and the result is put into the cache once the driver has
 * accepted it.  A cached cubin the driver refuses is dropped from the cache.
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

#include <xxhash.h>

#include "cubin/cubin.h"
#include "shim/live.h"

/* One substituted module or library. */
struct sub {
	const void *image;          /* the substitute handed to the driver (owned) */
	const void *handle;         /* CUmodule or CUlibrary once loaded */
	CUcontext ctx;              /* a module's context (a module goes with it) */
	bool library;
	CUcontext filled[8];        /* contexts whose pointers are stored (a library: several) */
	unsigned nfilled;
	char label[96];             /* first instrumented kernel, for messages */
	size_t size;                /* of image */
	bool from_cache;            /* image came from the cache: dropped there if refused */
	bool put;                   /* put into the cache once the driver accepted it */
	store_key key;
	char *ptx;                  /* for the put: the instrumented PTX, */
	size_t ptx_len;
	char *manifest;             /* the kernel ids, */
	size_t manifest_size;
	uint64_t rewrite_ns, jit_ns;/* and what it cost */
	uint32_t sm;
	struct sub *next;
};

static struct sub *subs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint nsubs;          /* launches skip everything while no library is substituted */
static atomic_uint gone_gen;       /* bumped when a context goes: the launch hook's cache is stale */

/* The substitute being loaded by this thread, between module_loading and module_loaded. */
static __thread struct sub *pending;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fallback(uint32_t reason, const char *api, const char *label, const char *why)
{
	atomic_fetch_add(&live.n.modules_fallback, 1);
	live_note(SHIM_LOG_WARN, reason, api, label, 0, 0,
		  "live: %s: %s not instrumented, the original module runs: %s", api, label, why);
}

/* ---- the PTX to instrument ---------------------------------------------------------------- */

static void note_no_ptx(const struct shim_module_event *ev, uint32_t sm)
{
	atomic_fetch_add(&live.n.modules_no_ptx, 1);
	atomic_fetch_add(&live.n.kernels_no_ptx, ev->info.nkernels);
	live_note(SHIM_LOG_INFO, STORE_NOINST_NO_PTX, ev->api_name, ev->path, ev->info.nkernels, sm,
		  "live: %s: %u kernel%s not instrumentable: no PTX for sm_%u in the image (%u "
		  "cubins, SASS only)", ev->api_name, ev->info.nkernels,
		  ev->info.nkernels == 1 ? "" : "s", sm, ev->info.ncubins);
}

/* ---- JIT ----------------------------------------------------------------------------------- */

/* Compiles PTX text (NUL-terminated) to a cubin for the current context's device.  Returns a
 * malloc'ed copy of the cubin, or NULL with the JIT's log in err. */
void *live_jit(const char *ptx, size_t len, size_t *cubin_size, char *err, size_t errlen)
{
	char log[4096] = "";
	CUjit_option opt[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *val[] = { log, (void *)(uintptr_t)sizeof(log) };
	CUlinkState st;
	void *cubin = NULL, *copy = NULL;
	size_t size = 0;
	atomic_fetch_add(&live.n.jit_compiles, 1);
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
	struct cubin_image *img;    /* the original image (headers read) */
	long ptx_entry;             /* its PTX entry for sm */
	bool cached;                /* key is valid: look up, and put what is made */
	store_key key;
	struct live_manifest manifest; /* the kernel ids the rewriter asked for */
	char *out;                  /* instrumented PTX */
	size_t out_len;
	struct ptx_inject_report rep;
	uint64_t rewrite_ns, jit_ns;
	char label[96];
	char err[LIVE_ERRLEN];
};

/* Opens the image (headers only) and finds its PTX for the device.  Returns 1, 0 when the image
 * has no usable PTX (said once), -1 on an unreadable image (w->err). */
static int open_image(struct work *w)
{
	const struct shim_module_event *ev = w->ev;
	size_t max = ev->info.size ? ev->info.size : CUBIN_SIZE_UNKNOWN;
	if (cubin_image_open(&w->img, ev->image, max, CUBIN_OPEN_IN_MEMORY, w->err, sizeof(w->err)))
		return -1;
	w->ptx_entry = cubin_choose_ptx(w->img, SIZE_MAX, w->sm);
	if (w->ptx_entry < 0) {
		note_no_ptx(ev, w->sm);
		return 0;
	}
	return 1;
}

/* The cache key of the image: its bytes; a fatbin wrapper's are the fatbins it points to (the
 * wrapper itself holds addresses), taken as the XXH3-128 of each. */
static bool image_key(struct work *w)
{
	const struct cubin_image *img = w->img;
	if (img->kind != CUBIN_IMAGE_WRAPPER)
		return img->size && img->size != CUBIN_SIZE_UNKNOWN &&
		       live_cache_key(img->data, img->size, w->sm, &w->key);
	size_t n = img->fatbin_count;
	XXH128_canonical_t *d = calloc(n + 1, sizeof(*d));
	if (!d || !n) {
		free(d);
		return false;
	}
	for (size_t i = 0; i < n; i++)
		XXH128_canonicalFromHash(&d[i], XXH3_128bits(img->fatbins[i].data, img->fatbins[i].size));
	bool ok = live_cache_key(d, n * sizeof(*d), w->sm, &w->key);
	free(d);
	return ok;
}

/* ctx->kernel_id for the rewriter: the shim's id, recorded for the cache entry. */
static uint32_t record_id(void *user, const char *mangled)
{
	struct work *w = user;
	uint32_t id = live_kernel_id(NULL, mangled);
	if (w->cached)
		live_manifest_add(&w->manifest, mangled, id);
	return id;
}

/* Instruments the image's PTX.  Returns 1 when kernels were instrumented (w->out), 0 when there
 * is nothing to do, -1 on failure (w->err). */
static int instrument(struct work *w)
{
	const uint8_t *text;
	size_t len;
	if (cubin_entry_data(w->img, (size_t)w->ptx_entry, &text, &len) != 0) {
		snprintf(w->err, sizeof(w->err), "reading the PTX: %s", w->img->error);
		return -1;
	}
	uint64_t t0 = now_ns();
	struct ptx_inject_opts o = {
		.progs = live.progs, .prog_cnt = live.nprogs, .kernel_glob = live.kernel_glob,
		.kernel_id = record_id, .user = w, .enable_words = live.enable_words,
	};
	struct vm_map_def *defs = calloc(live.nmaps + 1, sizeof(*defs));
	for (uint32_t i = 0; defs && i < live.nmaps; i++)
		defs[i] = live.maps[i].def;
	o.maps = defs, o.map_cnt = live.nmaps;
	int rc = defs ? ptx_instrument((const char *)text, len, &o, &w->out, &w->out_len, &w->rep,
				       w->err, sizeof(w->err))
		      : -1;
	free(defs);
	w->rewrite_ns = now_ns() - t0;
	if (rc == 0 && w->rep.instrumented == 0) {
		atomic_fetch_add(&live.n.modules_untouched, 1);
		free(w->out);
		w->out = NULL;
	}
	if (rc != 0 && !w->err[0])
		snprintf(w->err, sizeof(w->err), "out of memory");
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
	case SHIM_LOAD_MODULE_LOAD: /* file loads: the wrapper hands us the file's bytes */
	case SHIM_LOAD_MODULE_DATA:
	case SHIM_LOAD_MODULE_DATA_EX:
	case SHIM_LOAD_MODULE_FATBINARY:
	case SHIM_LOAD_LIBRARY_DATA:
	case SHIM_LOAD_LIBRARY_FILE:
		break;
	default:
		return false; /* link steps: not instrumented yet (LIVE.md) */
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
	s->library = w->ev->api == SHIM_LOAD_LIBRARY_DATA || w->ev->api == SHIM_LOAD_LIBRARY_FILE;
	if (!w->ctx) {
		s->image = w->out;
		*size = w->out_len + 1;
		w->out = NULL;
		return s;
	}
	uint64_t t0 = now_ns();
	void *cubin = live_jit(w->out, w->out_len, size, w->err, sizeof(w->err));
	if (cubin && live_regs_fit(w->img, w->ptx_entry, w->sm, &w->out, &w->out_len, &cubin, size,
				   w->err, sizeof(w->err)) != 0) {
		free(cubin);
		cubin = NULL;
	}
	w->jit_ns = now_ns() - t0;
	if (!cubin) {
		free(s);
		return NULL;
	}
	s->image = cubin;
	return s;
}

/* Hands the substitute to the driver in place of the application's image. */
static void substitute(struct shim_module_event *ev, struct sub *s, bool cubin)
{
	pending = s;
	ev->image = s->image;
	ev->info.kind = cubin ? SHIM_IMAGE_CUBIN : SHIM_IMAGE_PTX;
	ev->info.size = s->size;
	ev->info.ncubins = cubin ? 1 : 0; /* what the driver gets now (the load's log line) */
	ev->info.nptx = cubin ? 0 : 1;
}

/* Looks the module up in the cache.  Returns 1 when the load is settled (a hit substituted, or
 * a hit that says there is nothing to instrument, or a fallback), 0 to instrument it. */
static int cache_lookup(struct work *w, uint64_t t0)
{
	struct store_cache_entry e;
	uint64_t t1 = now_ns();
	int rc = live_cache_get(&w->key, &e);
	uint64_t t2 = now_ns();
	if (rc <= 0) {
		if (rc == 0)
			atomic_fetch_add(&live.n.cache_misses, 1);
		w->cached = rc == 0;
		return 0;
	}
	uint32_t n = 0;
	rc = live_manifest_claim(e.manifest, e.manifest_size, &n, NULL, 0);
	if (rc != 0) { /* made with other kernel ids than this process would give: a miss */
		if (rc < 0)
			live_cache_drop(&w->key);
		shim_log(SHIM_LOG_DEBUG, "live: cache entry for %s %s; instrumenting again", e.name,
			 rc < 0 ? "unreadable" : "made with other kernel ids");
		store_cache_entry_free(&e);
		atomic_fetch_add(&live.n.cache_misses, 1);
		return 0;
	}
	atomic_fetch_add(&live.n.cache_hits, 1);
	shim_log(SHIM_LOG_DEBUG, "live: cache hit: image and key %llu us, read %llu us, kernel ids "
		 "%llu us", (unsigned long long)(t1 - t0) / 1000, (unsigned long long)(t2 - t1) / 1000,
		 (unsigned long long)(now_ns() - t2) / 1000);
	snprintf(w->label, sizeof(w->label), "%s", e.name && e.name[0] ? e.name : "module");
	if (!e.cubin_size) { /* the rewriter found nothing to instrument here */
		atomic_fetch_add(&live.n.modules_untouched, 1);
		shim_log(SHIM_LOG_INFO, "live: cache hit for %s (no kernel to instrument, %llu us)",
			 w->label, (unsigned long long)(now_ns() - t0) / 1000);
		store_cache_entry_free(&e);
		return 1;
	}
	struct sub *s = NULL;
	if (!live_ctx_get(w->ctx, w->err, sizeof(w->err)))
		fallback(STORE_NOINST_MAPS, w->ev->api_name, w->label, w->err);
	else if (!(s = calloc(1, sizeof(*s))))
		fallback(STORE_NOINST_OTHER, w->ev->api_name, w->label, "out of memory");
	if (!s) {
		store_cache_entry_free(&e);
		return 1;
	}
	snprintf(s->label, sizeof(s->label), "%s", w->label);
	s->library = w->ev->api == SHIM_LOAD_LIBRARY_DATA || w->ev->api == SHIM_LOAD_LIBRARY_FILE;
	s->image = e.cubin;
	s->size = e.cubin_size;
	s->from_cache = true;
	s->key = w->key;
	e.cubin = NULL;
	store_cache_entry_free(&e);
	substitute((struct shim_module_event *)w->ev, s, true);
	atomic_fetch_add(&live.n.kernels_instrumented, n);
	shim_log(SHIM_LOG_INFO, "live: cache hit for %s (%u kernel%s, cubin %zu bytes, %llu us)",
		 w->label, n, n == 1 ? "" : "s", s->size, (unsigned long long)(now_ns() - t0) / 1000);
	return 1;
}

/* Nothing to instrument in a module the cache knows now: an entry without a cubin, so that the
 * next process skips the rewrite too. */
static void put_untouched(struct work *w)
{
	size_t msize = 0;
	char *m = live_manifest_finish(&w->manifest, &msize);
	struct store_cache_entry e = { .manifest = m, .manifest_size = msize, .name = "module",
				       .sm = w->sm, .rewrite_ns = w->rewrite_ns };
	if (m)
		live_cache_put(&w->key, &e);
	free(m);
}

/* Keeps what the put needs (after the driver accepts the cubin) in the substitute. */
static void keep_for_put(struct work *w, struct sub *s)
{
	s->manifest = live_manifest_finish(&w->manifest, &s->manifest_size);
	if (!s->manifest)
		return;
	s->put = true;
	s->key = w->key;
	s->ptx = w->out;
	s->ptx_len = w->out_len;
	w->out = NULL;
	s->rewrite_ns = w->rewrite_ns;
	s->jit_ns = w->jit_ns;
	s->sm = w->sm;
}

static void module_loading(struct shim_module_event *ev);

void live_module_loading(struct shim_module_event *ev, void *user)
{
	(void)user;
	live_kernel_module(ev->path); /* KERNEL_ID records name a file load's path */
	module_loading(ev);
	live_kernel_module(NULL);
}

static void module_loading(struct shim_module_event *ev)
{
	pending = NULL;
	if (!live.nprogs) /* host programs only */
		return;
	if (!handled(ev)) {
		if (ev->api <= SHIM_LOAD_LIBRARY_FILE)
			atomic_fetch_add(&live.n.modules_skipped, 1);
		return;
	}
	uint64_t t0 = now_ns();
	struct work w = { .ev = ev };
	if (live_cu.cuCtxGetCurrent(&w.ctx) != CUDA_SUCCESS)
		w.ctx = NULL;
	w.sm = live_ctx_sm(w.ctx);
	int rc = -1;
	if (!w.sm)
		snprintf(w.err, sizeof(w.err), "the device's compute capability is unknown");
	else if ((rc = open_image(&w)) > 0) {
		/* The cache holds cubins: only with a context (without one the PTX is substituted). */
		w.cached = w.ctx && image_key(&w);
		if (w.cached && cache_lookup(&w, t0)) {
			cubin_image_free(w.img);
			return;
		}
		rc = instrument(&w);
	}
	if (rc == 0 && w.cached && w.ptx_entry >= 0)
		put_untouched(&w);
	if (rc <= 0) {
		cubin_image_free(w.img);
		if (rc < 0)
			fallback(w.sm ? STORE_NOINST_REWRITE : STORE_NOINST_OTHER, ev->api_name,
				 "module", w.err);
		live_manifest_reset(&w.manifest);
		return;
	}
	label_of(w.out, w.out_len, w.label, sizeof(w.label));
	size_t size = 0;
	struct sub *s = NULL;
	if (w.ctx && !live_ctx_get(w.ctx, w.err, sizeof(w.err)))
		fallback(STORE_NOINST_MAPS, ev->api_name, w.label, w.err);
	else if (!(s = make_sub(&w, &size)))
		fallback(w.err[0] ? STORE_NOINST_JIT : STORE_NOINST_OTHER, ev->api_name, w.label,
			 w.err[0] ? w.err : "out of memory");
	cubin_image_free(w.img); /* (make_sub may read the original's registers) */
	if (s) {
		s->size = size;
		if (w.cached)
			keep_for_put(&w, s);
	}
	free(w.out);
	live_manifest_reset(&w.manifest);
	if (!s)
		return;
	substitute(ev, s, w.ctx != NULL);
	shim_log(SHIM_LOG_INFO, "live: %s: instrumented %u of %u kernels (%s; %u entry, %u exit, "
		 "%u memory sites), %s of %zu B for sm_%u in %llu ms", ev->api_name,
		 w.rep.instrumented, w.rep.kernels, w.label, w.rep.entry_sites, w.rep.exit_sites,
		 w.rep.mem_sites, w.ctx ? "cubin" : "PTX", size, w.sm,
		 (unsigned long long)(now_ns() - t0) / 1000000);
	if (w.cached)
		shim_log(SHIM_LOG_INFO, "live: cache miss for %s (rewrite %llu us, JIT %llu us)",
			 w.label, (unsigned long long)w.rewrite_ns / 1000,
			 (unsigned long long)w.jit_ns / 1000);
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
		live_note(SHIM_LOG_WARN, STORE_NOINST_UNREACHABLE, NULL, s->label, 0, 0,
			  "live: %s (context %p): the probes' maps are not reachable: %s", s->label,
			  (void *)ctx, err);
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
		fallback(STORE_NOINST_REFUSED, ev->api_name, s->label,
			 live_cu_error((CUresult)ev->result));
		if (s->from_cache) /* never offer it again */
			live_cache_drop(&s->key);
		free(s->ptx);
		free(s->manifest);
		free((void *)s->image);
		free(s);
		return;
	}
	if (s->put) {
		struct store_cache_entry e = {
			.ptx = s->ptx, .ptx_size = s->ptx_len, .cubin = (void *)s->image,
			.cubin_size = s->size, .manifest = s->manifest,
			.manifest_size = s->manifest_size, .name = s->label, .sm = s->sm,
			.rewrite_ns = s->rewrite_ns, .jit_ns = s->jit_ns,
		};
		live_cache_put(&s->key, &e);
		free(s->ptx);
		free(s->manifest);
		s->ptx = s->manifest = NULL;
		s->put = false;
	}
	s->handle = s->library ? (const void *)ev->library : (const void *)ev->module;
	CUcontext ctx = NULL;
	pthread_mutex_lock(&lock);
	if (live_cu.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
		fill_locked(s, ctx);
	s->ctx = ctx;
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

static void sub_free(struct sub *s)
{
	free(s->ptx);
	free(s->manifest);
	free((void *)s->image);
	free(s);
}

void live_module_ctx_gone(CUcontext ctx)
{
	if (!ctx)
		return;
	pthread_mutex_lock(&lock);
	for (struct sub **p = &subs; *p;) {
		struct sub *s = *p;
		unsigned k = 0;
		for (unsigned i = 0; i < s->nfilled; i++)
			if (s->filled[i] != ctx)
				s->filled[k++] = s->filled[i];
		s->nfilled = k;
		if (s->library || s->ctx != ctx) {
			p = &s->next;
			continue;
		}
		*p = s->next; /* the module went with its context: its handle may come back */
		sub_free(s);
	}
	atomic_fetch_add(&gone_gen, 1);
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
	uint32_t word = n % live.sample == 0 ? live_control_mask() : 0;
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
	static __thread unsigned last_gen;
	const struct shim_kernel_info *k = ev->kernel;
	CUcontext ctx = NULL;
	live_host_launch(ev, false);
	if ((live.sample > 1 || live.control_path) && k)
		sample(ev, k);
	if (!atomic_load_explicit(&nsubs, memory_order_relaxed) || !k || !k->library)
		return;
	if (live_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
		return;
	unsigned g = atomic_load(&gone_gen);
	if (k->library == last_lib && ctx == last_ctx && g == last_gen) /* filled it already */
		return;
	pthread_mutex_lock(&lock);
	for (struct sub *s = subs; s; s = s->next)
		if (s->library && s->handle == (const void *)k->library) {
			if (fill_locked(s, ctx) == 0)
				last_lib = k->library, last_ctx = ctx, last_gen = g;
			break;
		}
	pthread_mutex_unlock(&lock);
}
