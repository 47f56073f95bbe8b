/* A fake libcuda for the shim's tests, built from the shim's own export table.
 *
 * Every exported name is a weak function that counts its calls and returns a value of its own
 * (FAKE_BASE + its index), so a test can tell which function a call through the shim reached.
 * A few functions are strong definitions that behave like the driver (cuGetProcAddress picks a
 * variant by version and flags; module loads and handle look-ups hand out handles; launches
 * succeed), so that the shim's bookkeeping can be watched.  Linked -Bsymbolic: its references
 * to its own functions must not land in the shim, which exports the same names.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/shim/fake.h"

static int fake_unsafe(const char *name);

/* What a call with all-zero arguments returns. */
FAKE_EXPORT int fake_result(const char *name)
{
	if (!strncmp(name, "cuGetProcAddress", 16) || !strcmp(name, "cuModuleLoadData") ||
	    !strcmp(name, "cuModuleGetFunction") || !strcmp(name, "cuLibraryLoadData") ||
	    !strcmp(name, "cuLibraryGetKernel") || !strcmp(name, "cuKernelGetFunction") ||
	    !strcmp(name, "cuFuncGetModule"))
		return 1; /* CUDA_ERROR_INVALID_VALUE */
	if (!strcmp(name, "cuLaunchKernel") || !strcmp(name, "cuLaunchKernel_ptsz"))
		return 0;
	/* The functions of the live-probe section below: invalid with zero arguments, except
	 * those that have none to check. */
	static const char *const live_ok[] = { "cuCtxSynchronize", "cuCtxPushCurrent_v2",
					       "cuStreamSynchronize", "cuStreamQuery",
					       "cuDevicePrimaryCtxReset_v2",
					       "cuDevicePrimaryCtxRelease_v2",
					       "cuStreamDestroy_v2", NULL };
	static const char *const live_invalid[] = {
		"cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxPopCurrent_v2", "cuDeviceGetAttribute",
		"cuMemAlloc_v2", "cuMemAllocManaged", "cuMemFree_v2", "cuMemGetInfo_v2", "cuMemsetD8Async",
		"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuStreamCreate",
		"cuModuleGetGlobal_v2", "cuLibraryGetGlobal", "cuLinkCreate_v2", "cuLinkAddData_v2",
		"cuLinkComplete", "cuLinkDestroy", "cuGetErrorName", "cuMemHostAlloc",
		"cuMemHostGetDevicePointer_v2", "cuMemFreeHost", "cuMemsetD32Async",
		"cuMemsetD32Async_ptsz", "cuEventCreate", "cuEventDestroy", "cuEventDestroy_v2",
		"cuEventRecord", "cuEventRecord_ptsz", "cuEventRecordWithFlags",
		"cuEventRecordWithFlags_ptsz",
		"cuEventQuery", "cuEventSynchronize", "cuEventElapsedTime", "cuEventElapsedTime_v2",
		"cuStreamIsCapturing", "cuThreadExchangeStreamCaptureMode", "cuDriverGetVersion",
		"cuStreamBeginCapture", "cuStreamBeginCapture_v2", "cuStreamEndCapture", NULL };
	for (int i = 0; live_ok[i]; i++)
		if (!strcmp(name, live_ok[i]))
			return 0;
	for (int i = 0; live_invalid[i]; i++)
		if (!strcmp(name, live_invalid[i]))
			return 1;
	int i = fake_index_of(name);
	return i < 0 ? -1 : FAKE_BASE + i;
}

/* ---- cuGetProcAddress: the variant a real driver would choose ------------------------------
 * cudaVersion >= 12000 gets the highest _vN form, older versions the plain name; the
 * per-thread-default-stream flag (2) prefers a _ptsz / _ptds form of the chosen name. */

static int choose(const char *symbol, int version, uint64_t flags, char *out, size_t outlen)
{
	char base[128];
	if (strlen(symbol) + 8 > sizeof(base) || outlen < sizeof(base))
		return -1;
	strcpy(base, symbol);
	if (version >= 12000)
		for (int v = 4; v >= 2; v--) {
			char try[128];
			snprintf(try, sizeof(try), "%s_v%d", symbol, v);
			if (fake_index_of(try) >= 0) {
				strcpy(base, try);
				break;
			}
		}
	strcpy(out, base);
	if (flags & 2) {
		static const char *const sfx[] = { "_ptsz", "_ptds" };
		for (int s = 0; s < 2; s++) {
			char try[140];
			snprintf(try, sizeof(try), "%s%s", base, sfx[s]);
			if (fake_index_of(try) >= 0) {
				strcpy(out, try);
				break;
			}
		}
	}
	return fake_index_of(out);
}

static int lookup(const char *symbol, void **pfn, int version, uint64_t flags, int *status)
{
	char name[160];
	if (!symbol || !pfn)
		return 1;
	int i = choose(symbol, version, flags, name, sizeof(name));
	if (i < 0) {
		*pfn = NULL;
		if (status)
			*status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
		return 500;          /* CUDA_ERROR_NOT_FOUND */
	}
	*pfn = fake_table[i].fn;
	if (status)
		*status = 0;
	return 0;
}

FAKE_EXPORT int cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags)
{
	FAKE_HIT(cuGetProcAddress);
	return lookup(symbol, pfn, version, flags, NULL);
}

FAKE_EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
				    int *status)
{
	FAKE_HIT(cuGetProcAddress_v2);
	return lookup(symbol, pfn, version, flags, status);
}

/* ---- modules, kernels, launches ----------------------------------------------------------- */

static uintptr_t next_handle = 0x10000;

static void *new_handle(void)
{
	return (void *)__atomic_add_fetch(&next_handle, 0x10, __ATOMIC_RELAXED);
}

static char last_image[256];
static void *last_launch;

FAKE_EXPORT const char *fake_last_image(void) { return last_image; }
FAKE_EXPORT void *fake_last_launch(void) { return last_launch; }

static void remember_text(void *handle, const void *image);
static int refuse_cubin(const void *image);

FAKE_EXPORT int cuModuleLoadData(void **module, const void *image)
{
	FAKE_HIT(cuModuleLoadData);
	if (!module || !image)
		return 1;
	if (refuse_cubin(image))
		return 200; /* CUDA_ERROR_INVALID_IMAGE */
	snprintf(last_image, sizeof(last_image), "%s", (const char *)image);
	*module = new_handle();
	remember_text(*module, image);
	return 0;
}

/* A file load: with FAKE_FILE_LOADS=1 the file's text is remembered like a data load's (PTX
 * files); otherwise the function answers its own code like the generated ones. */
FAKE_EXPORT int cuModuleLoad(void **module, const char *path)
{
	FAKE_HIT(cuModuleLoad);
	if (!getenv("FAKE_FILE_LOADS"))
		return FAKE_BASE + FAKE_IDX_cuModuleLoad;
	FILE *f = module && path ? fopen(path, "rb") : NULL;
	if (!f)
		return 301; /* CUDA_ERROR_FILE_NOT_FOUND */
	char buf[4096];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	*module = new_handle();
	remember_text(*module, buf);
	return 0;
}

FAKE_EXPORT int cuLibraryLoadData(void **library, const void *code, void *o, void *v, unsigned n,
				  void *lo, void *lv, unsigned ln)
{
	(void)o, (void)v, (void)n, (void)lo, (void)lv, (void)ln;
	FAKE_HIT(cuLibraryLoadData);
	if (!library || !code)
		return 1;
	if (refuse_cubin(code))
		return 200;
	*library = new_handle();
	remember_text(*library, code);
	return 0;
}

/* The same name in the same container gives the same handle, as the driver does. */
static void *handle_for(const void *container, const char *name, uintptr_t tag)
{
	uintptr_t h = (uintptr_t)container * 31 + tag;
	for (const char *p = name; *p; p++)
		h = h * 131 + (unsigned char)*p;
	return (void *)(((h << 4) & 0xffffffffff0ull) | 0x100000000000ull);
}

/* Functions handed out by cuModuleGetFunction, for the launch observer (a fake Compute
 * Sanitizer library, tests/live/fake_sanitizer.c, which needs each launch's module and name). */
#define FAKE_FUNCS 64
static void *fake_ctx_now(void);
static struct { void *f, *module; char name[64]; } funcs[FAKE_FUNCS];
static void (*launch_observer)(void *ctx, void *module, void *f, const char *name, void *stream);

FAKE_EXPORT void fake_set_launch_observer(void (*fn)(void *, void *, void *, const char *, void *))
{
	launch_observer = fn;
}

static void observe_launch(void *f, void *stream)
{
	for (int i = 0; launch_observer && i < FAKE_FUNCS; i++)
		if (funcs[i].f == f) {
			launch_observer(fake_ctx_now(), funcs[i].module, f, funcs[i].name, stream);
			return;
		}
}

/* cuInit answers what every unwritten function does (FAKE_BASE + its index), or success with
 * FAKE_INIT_OK=1 (the Sanitizer backend's tests: it subscribes after a successful cuInit). */
FAKE_EXPORT int cuInit(unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuInit);
	const char *e = getenv("FAKE_INIT_OK");
	return e && *e == '1' ? 0 : FAKE_BASE + FAKE_IDX_cuInit;
}

/* Parameter sizes for every function: FAKE_PARAM_SIZES="8,4" (unset: the generic answer). */
FAKE_EXPORT int cuFuncGetParamInfo(void *f, size_t index, size_t *offset, size_t *size)
{
	FAKE_HIT(cuFuncGetParamInfo);
	const char *e = getenv("FAKE_PARAM_SIZES");
	if (!e || !*e) /* as every unwritten function */
		return FAKE_BASE + FAKE_IDX_cuFuncGetParamInfo;
	size_t off = 0;
	for (size_t i = 0; f && e && *e; i++) {
		size_t n = strtoul(e, (char **)&e, 10);
		if (!n)
			break;
		off = (off + n - 1) / n * n;
		if (i == index) {
			*offset = off, *size = n;
			return 0;
		}
		off += n;
		if (*e == ',')
			e++;
	}
	return 1; /* CUDA_ERROR_INVALID_VALUE: past the last */
}

/* cubpf's zero scan of its maps (shim/live/clock.c, cubpf_nonzero) runs here when launched:
 * device memory is host memory.  FAKE_SCAN=off: its launches do nothing (a kernel that did not
 * run); FAKE_SCAN=blind: it says it ran but flags nothing (a wrong scan). */
static void *scan_funcs[16];
static unsigned nscan_funcs;

static bool owned_range(uint64_t d, size_t n);

static void fake_scan(void *f, unsigned gx, void **p)
{
	const char *mode = getenv("FAKE_SCAN");
	bool known = false;
	for (unsigned i = 0; i < 16; i++)
		known |= f && scan_funcs[i] == f;
	if (!known || !p || (mode && !strcmp(mode, "off")))
		return;
	uint64_t src = *(uint64_t *)p[0], flags = *(uint64_t *)p[1];
	uint64_t blocks = *(uint64_t *)p[2], seq = *(uint64_t *)p[3];
	if (!owned_range(src, (size_t)gx * 4096) || !owned_range(flags, ((blocks + 7) & ~7ull) + 8))
		return;
	for (unsigned b = 0; b < gx; b++) {
		const uint8_t *q = (const uint8_t *)(uintptr_t)(src + (uint64_t)b * 4096);
		uint8_t any = 0;
		for (unsigned i = 0; i < 4096 && !any; i++)
			any = q[i] != 0;
		((uint8_t *)(uintptr_t)flags)[b] = mode && !strcmp(mode, "blind") ? 0 : any;
	}
	memcpy((void *)(uintptr_t)(flags + ((blocks + 7) & ~7ull)), &seq, sizeof(seq));
}

FAKE_EXPORT int cuModuleGetFunction(void **f, void *module, const char *name)
{
	FAKE_HIT(cuModuleGetFunction);
	if (!f || !module || !name)
		return 1;
	*f = handle_for(module, name, 1);
	if (!strcmp(name, "cubpf_nonzero"))
		scan_funcs[nscan_funcs++ % 16] = *f;
	for (int i = 0; i < FAKE_FUNCS; i++)
		if (!funcs[i].f || funcs[i].f == *f) {
			funcs[i].f = *f;
			funcs[i].module = module;
			snprintf(funcs[i].name, sizeof(funcs[i].name), "%s", name);
			break;
		}
	return 0;
}

FAKE_EXPORT int cuFuncGetModule(void **module, void *f)
{
	FAKE_HIT(cuFuncGetModule);
	for (int i = 0; module && f && i < FAKE_FUNCS; i++)
		if (funcs[i].f == f) {
			*module = funcs[i].module;
			return 0;
		}
	return 1;
}

FAKE_EXPORT int cuLibraryGetKernel(void **k, void *library, const char *name)
{
	FAKE_HIT(cuLibraryGetKernel);
	if (!k || !library || !name)
		return 1;
	*k = handle_for(library, name, 2);
	return 0;
}

FAKE_EXPORT int cuKernelGetFunction(void **f, void *kernel)
{
	FAKE_HIT(cuKernelGetFunction);
	if (!f || !kernel)
		return 1;
	*f = (void *)((uintptr_t)kernel ^ 0x8);
	return 0;
}

FAKE_EXPORT int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned shmem, void *s, void **p, void **e)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)s;
	(void)p, (void)e;
	last_launch = f;
	FAKE_HIT(cuLaunchKernel);
	observe_launch(f, s);
	fake_scan(f, gx, p);
	return 0;
}

FAKE_EXPORT int cuLaunchKernel_ptsz(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
				    unsigned by, unsigned bz, unsigned shmem, void *s, void **p,
				    void **e)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)s;
	(void)p, (void)e;
	FAKE_HIT(cuLaunchKernel_ptsz);
	return 0;
}

/* ---- argument passing through the lazy-init stub -------------------------------------------
 * The shim forwards cuMemsetD2D16Async with a one-jump trampoline; here it takes eight integer
 * and eight floating-point arguments (the two register files, plus two integers on the stack),
 * so a test can check that the first call, which goes through the lazy-init stub, arrives
 * intact. */
static long args_seen[8];
static double fargs_seen[8];

FAKE_EXPORT int cuMemsetD2D16Async(long a, long b, long c, long d, long e, long f, long g, long h,
				   double x0, double x1, double x2, double x3, double x4, double x5,
				   double x6, double x7)
{
	long v[8] = { a, b, c, d, e, f, g, h };
	double x[8] = { x0, x1, x2, x3, x4, x5, x6, x7 };
	memcpy(args_seen, v, sizeof(v));
	memcpy(fargs_seen, x, sizeof(x));
	FAKE_HIT(cuMemsetD2D16Async);
	return FAKE_BASE + FAKE_IDX_cuMemsetD2D16Async;
}

FAKE_EXPORT void fake_args(long *ints, double *floats)
{
	memcpy(ints, args_seen, sizeof(args_seen));
	memcpy(floats, fargs_seen, sizeof(fargs_seen));
}

/* cuFuncGetName knows one handle the shim never saw being looked up (0x5000). */
FAKE_EXPORT int cuFuncGetName(const char **name, void *f)
{
	FAKE_HIT(cuFuncGetName);
	if (name && f == (void *)0x5000) {
		*name = "discovered_kernel";
		return 0;
	}
	return FAKE_BASE + FAKE_IDX_cuFuncGetName;
}

/* ---- what live probes (shim/live/) need: a context, device memory, globals, the JIT ----------
 * Device memory is host memory (calloc), so a test can play the kernel: it finds a map through
 * the `__cubpf_map_<i>` global of the loaded module and writes counts there.  The "JIT" turns
 * PTX into "FAKECUBIN\n" + the PTX; PTX containing "fake_jit_error" fails with a log. */

static void *fake_ctx = (void *)0xC7C000;

/* Bytes asked of the memory functions (allocations, memsets, copies), per function, so that a
 * test can hold cubpf to what a context costs: fake_bytes("cuMemcpyDtoHAsync_v2"). */
static uint64_t bytes_of[FAKE_N];
#define FAKE_BYTES(name, n) __atomic_fetch_add(&bytes_of[FAKE_IDX_##name], (uint64_t)(n), __ATOMIC_RELAXED)
FAKE_EXPORT uint64_t fake_bytes(const char *name)
{
	int i = fake_index_of(name);
	return i < 0 ? 0 : __atomic_load_n(&bytes_of[i], __ATOMIC_RELAXED);
}

/* Memory the fake handed out: copies and memsets touch only these (other tests pass made-up
 * addresses, which get the generic answer). */
static struct { uintptr_t p; size_t n; } owned_mem[1024];

static void own(void *p, size_t n)
{
	for (int i = 0; i < 1024; i++)
		if (!owned_mem[i].p) {
			owned_mem[i].p = (uintptr_t)p;
			owned_mem[i].n = n;
			return;
		}
}

static void disown(void *p)
{
	for (int i = 0; i < 1024; i++)
		if (owned_mem[i].p == (uintptr_t)p)
			owned_mem[i].p = 0;
}

static int owned(uint64_t d, size_t n)
{
	for (int i = 0; i < 1024; i++)
		if (owned_mem[i].p && d >= owned_mem[i].p && d + n <= owned_mem[i].p + owned_mem[i].n)
			return 1;
	return 0;
}
static bool owned_range(uint64_t d, size_t n)
{
	return owned(d, n);
}
FAKE_EXPORT void fake_set_ctx(void *ctx) { fake_ctx = ctx; }

/* Loaded modules' text (PTX or fake cubins only: binary images are not kept). */
#define FAKE_MODS 64
static struct { void *handle; char *text; } mods[FAKE_MODS];
static struct { void *handle; char name[32]; uint64_t *storage; } globals[256];

static int text_image(const void *image)
{
	const char *s = image;
	return !strncmp(s, "FAKECUBIN", 9) || s[0] == '.' || s[0] == '/';
}

/* FAKE_REFUSE_CUBIN=1: loads of fake cubins fail, as the driver would refuse a bad image. */
static int refuse_cubin(const void *image)
{
	const char *e = getenv("FAKE_REFUSE_CUBIN");
	return e && *e == '1' && !strncmp(image, "FAKECUBIN", 9);
}

static void remember_text(void *handle, const void *image)
{
	if (!text_image(image))
		return;
	for (int i = 0; i < FAKE_MODS; i++)
		if (!mods[i].handle) {
			mods[i].handle = handle;
			mods[i].text = strdup(image);
			return;
		}
}

FAKE_EXPORT const char *fake_module_text(void *handle)
{
	for (int i = 0; i < FAKE_MODS; i++)
		if (mods[i].handle == handle)
			return mods[i].text;
	return NULL;
}

/* The 8-byte storage of global `name` of a module or library, made on first use when the
 * module's text declares it. */
static int get_global(uint64_t *dptr, size_t *bytes, void *h, const char *name)
{
	const char *text = fake_module_text(h);
	char decl[64];
	if (!dptr || !h || !name)
		return 1;
	snprintf(decl, sizeof(decl), ".u64 %s;", name);
	if (!text || !strstr(text, decl))
		return 500; /* CUDA_ERROR_NOT_FOUND */
	for (int i = 0; i < 256; i++) {
		if (globals[i].handle == h && !strcmp(globals[i].name, name)) {
			*dptr = (uintptr_t)globals[i].storage;
			if (bytes)
				*bytes = 8;
			return 0;
		}
		if (!globals[i].handle) {
			globals[i].handle = h;
			snprintf(globals[i].name, sizeof(globals[i].name), "%s", name);
			globals[i].storage = calloc(1, 8);
			own(globals[i].storage, 8);
			*dptr = (uintptr_t)globals[i].storage;
			if (bytes)
				*bytes = 8;
			return 0;
		}
	}
	return 2;
}

/* The value stored in a global (0 when it does not exist). */
FAKE_EXPORT uint64_t fake_global(void *h, const char *name)
{
	uint64_t p = 0;
	return get_global(&p, NULL, h, name) == 0 ? *(uint64_t *)(uintptr_t)p : 0;
}

FAKE_EXPORT int cuModuleGetGlobal_v2(uint64_t *dptr, size_t *bytes, void *mod, const char *name)
{
	FAKE_HIT(cuModuleGetGlobal_v2);
	return get_global(dptr, bytes, mod, name);
}

FAKE_EXPORT int cuLibraryGetGlobal(uint64_t *dptr, size_t *bytes, void *lib, const char *name)
{
	FAKE_HIT(cuLibraryGetGlobal);
	return get_global(dptr, bytes, lib, name);
}

/* ---- contexts ----------------------------------------------------------------------------------
 * The implicit context fake_ctx (0xC7C000 unless a test sets another) stands for device 0's
 * primary context: one reference held from the start, gone after a reset or its last release.
 * cuCtxCreate makes records (current on return); cuCtxDestroy kills them, and the next
 * cuCtxCreate hands the last killed one out again, as a driver reuses its handles (the same
 * with or without ASan's quarantine).  Using a destroyed context aborts with a message, where
 * the real driver crashed (issue 16).  fake_ctx_reused() counts the handles that came back. */
#define FAKE_CTX_MAGIC 0xC0DEC7C7u
struct fake_context {
	unsigned magic;
	void *prev;                 /* the current context before it was made */
};
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static void *dead_ctx[4096];
static unsigned ndead, nreused;
FAKE_EXPORT unsigned fake_ctx_reused(void) { return nreused; }
static __thread void *ctx_stack[8];
static __thread int ctx_depth;

/* After a primary context reset (or its last release) the context is gone: pushing it fails. */
static int ctx_dead;
static int primary_refs = 1;

static void ctx_check(const char *api, void *ctx)
{
	pthread_mutex_lock(&ctx_lock);
	for (unsigned i = 0; i < ndead; i++)
		if (dead_ctx[i] == ctx) {
			fprintf(stderr, "fake driver: %s on destroyed context %p\n", api, ctx);
			abort();
		}
	pthread_mutex_unlock(&ctx_lock);
}

FAKE_EXPORT int cuCtxCreate_v4(void **pctx, void *params, unsigned flags, int dev)
{
	(void)params, (void)flags, (void)dev;
	FAKE_HIT(cuCtxCreate_v4);
	if (!pctx)
		return FAKE_BASE + FAKE_IDX_cuCtxCreate_v4;
	struct fake_context *c = NULL;
	pthread_mutex_lock(&ctx_lock);
	if (ndead) /* the last handle destroyed comes back */
		c = dead_ctx[--ndead], nreused++;
	pthread_mutex_unlock(&ctx_lock);
	if (!c && !(c = malloc(sizeof(*c))))
		return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	c->magic = FAKE_CTX_MAGIC;
	c->prev = fake_ctx;
	fake_ctx = c;
	*pctx = c;
	return 0;
}

static void host_free_of(void *ctx);

FAKE_EXPORT int cuCtxDestroy_v2(void *ctx)
{
	FAKE_HIT(cuCtxDestroy_v2);
	if (!ctx)
		return FAKE_BASE + FAKE_IDX_cuCtxDestroy_v2;
	ctx_check("cuCtxDestroy", ctx);
	struct fake_context *c = ctx;
	if (c->magic != FAKE_CTX_MAGIC)
		return 201;
	if (fake_ctx == ctx)
		fake_ctx = c->prev;
	host_free_of(ctx); /* pinned memory goes with its context, as in a driver */
	pthread_mutex_lock(&ctx_lock);
	if (ndead < sizeof(dead_ctx) / sizeof(dead_ctx[0]))
		dead_ctx[ndead++] = ctx; /* kept for reuse (never freed: a test process is short) */
	pthread_mutex_unlock(&ctx_lock);
	c->magic = 0;
	return 0;
}

static void *fake_ctx_now(void)
{
	return ctx_depth ? ctx_stack[ctx_depth - 1] : fake_ctx;
}

FAKE_EXPORT int cuCtxGetCurrent(void **ctx)
{
	FAKE_HIT(cuCtxGetCurrent);
	if (!ctx)
		return 1;
	*ctx = ctx_depth ? ctx_stack[ctx_depth - 1] : fake_ctx;
	return 0;
}

FAKE_EXPORT int cuCtxGetDevice(int *dev)
{
	FAKE_HIT(cuCtxGetDevice);
	if (!dev)
		return 1;
	*dev = 0;
	return 0;
}

FAKE_EXPORT int cuCtxSynchronize(void)
{
	FAKE_HIT(cuCtxSynchronize);
	if (fake_unsafe("cuCtxSynchronize"))
		return 900;
	return 0;
}

FAKE_EXPORT int cuDevicePrimaryCtxReset_v2(int dev)
{
	(void)dev;
	FAKE_HIT(cuDevicePrimaryCtxReset_v2);
	ctx_dead = 1;
	primary_refs = 0;
	return 0;
}

FAKE_EXPORT int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
	(void)dev;
	FAKE_HIT(cuDevicePrimaryCtxGetState);
	if (!flags || !active)
		return FAKE_BASE + FAKE_IDX_cuDevicePrimaryCtxGetState;
	*flags = 0;
	*active = !ctx_dead;
	return 0;
}

FAKE_EXPORT int cuDevicePrimaryCtxRetain(void **pctx, int dev)
{
	(void)dev;
	FAKE_HIT(cuDevicePrimaryCtxRetain);
	if (!pctx)
		return FAKE_BASE + FAKE_IDX_cuDevicePrimaryCtxRetain;
	if (ctx_dead)
		ctx_dead = 0, primary_refs = 0;
	primary_refs++;
	*pctx = (void *)0xC7C000;
	return 0;
}

FAKE_EXPORT int cuDevicePrimaryCtxRelease_v2(int dev)
{
	(void)dev;
	FAKE_HIT(cuDevicePrimaryCtxRelease_v2);
	if (primary_refs <= 0)
		return 201; /* CUDA_ERROR_INVALID_CONTEXT */
	if (--primary_refs == 0)
		ctx_dead = 1;
	return 0;
}

FAKE_EXPORT int cuCtxPushCurrent_v2(void *ctx)
{
	FAKE_HIT(cuCtxPushCurrent_v2);
	ctx_check("cuCtxPushCurrent", ctx);
	if (ctx && ctx_dead && ctx == (void *)0xC7C000)
		return 201; /* CUDA_ERROR_INVALID_CONTEXT */
	if (ctx && ctx_depth < 8)
		ctx_stack[ctx_depth++] = ctx;
	return 0;
}

FAKE_EXPORT int cuCtxPopCurrent_v2(void **ctx)
{
	FAKE_HIT(cuCtxPopCurrent_v2);
	if (!ctx)
		return 1;
	*ctx = ctx_depth ? ctx_stack[--ctx_depth] : fake_ctx;
	return 0;
}

FAKE_EXPORT int cuDeviceGetAttribute(int *v, int attr, int dev)
{
	(void)dev;
	FAKE_HIT(cuDeviceGetAttribute);
	if (!v)
		return 1;
	/* compute capability 9.0, 4 SMs (FAKE_SMS=N: N, for the ring buffers' lanes), 2048 threads
	 * (64 warp slots) per SM */
	const char *sms = getenv("FAKE_SMS");
	*v = attr == 75 ? 9 : attr == 16 ? (sms ? atoi(sms) : 4) : attr == 39 ? 2048 : 0;
	return 0;
}

FAKE_EXPORT int cuMemAlloc_v2(uint64_t *p, size_t n)
{
	FAKE_HIT(cuMemAlloc_v2);
	FAKE_BYTES(cuMemAlloc_v2, n);
	if (fake_unsafe("cuMemAlloc_v2"))
		return 900;
	if (!p || !n)
		return 1;
	void *m = calloc(1, n);
	if (!m)
		return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	own(m, n);
	*p = (uintptr_t)m;
	return 0;
}

/* Managed memory: host memory here too, reachable from both sides at one address. */
FAKE_EXPORT int cuMemAllocManaged(uint64_t *p, size_t n, unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuMemAllocManaged);
	if (fake_unsafe("cuMemAllocManaged"))
		return 900;
	if (!p || !n)
		return 1;
	if (getenv("FAKE_NO_MANAGED"))
		return 801; /* CUDA_ERROR_NOT_SUPPORTED */
	void *m = calloc(1, n);
	if (!m)
		return 2;
	own(m, n);
	*p = (uintptr_t)m;
	return 0;
}

FAKE_EXPORT int cuMemFree_v2(uint64_t p)
{
	FAKE_HIT(cuMemFree_v2);
	if (fake_unsafe("cuMemFree_v2"))
		return 900;
	if (!p)
		return 1;
	disown((void *)(uintptr_t)p);
	free((void *)(uintptr_t)p);
	return 0;
}

FAKE_EXPORT int cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
	FAKE_HIT(cuMemGetInfo_v2);
	if (!free_b || !total_b)
		return 1;
	*free_b = (size_t)1 << 32;
	*total_b = (size_t)1 << 33;
	return 0;
}

FAKE_EXPORT int cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *s)
{
	(void)s;
	FAKE_HIT(cuMemsetD8Async);
	FAKE_BYTES(cuMemsetD8Async, n);
	if (!d)
		return 1;
	if (!owned(d, n))
		return FAKE_BASE + FAKE_IDX_cuMemsetD8Async;
	memset((void *)(uintptr_t)d, v, n);
	return 0;
}

FAKE_EXPORT int cuMemcpyHtoDAsync_v2(uint64_t d, const void *src, size_t n, void *s)
{
	(void)s;
	FAKE_HIT(cuMemcpyHtoDAsync_v2);
	FAKE_BYTES(cuMemcpyHtoDAsync_v2, n);
	if (!d || !src)
		return 1;
	if (!owned(d, n))
		return FAKE_BASE + FAKE_IDX_cuMemcpyHtoDAsync_v2;
	memcpy((void *)(uintptr_t)d, src, n);
	return 0;
}

FAKE_EXPORT int cuMemcpyDtoHAsync_v2(void *dst, uint64_t d, size_t n, void *s)
{
	(void)s;
	FAKE_HIT(cuMemcpyDtoHAsync_v2);
	FAKE_BYTES(cuMemcpyDtoHAsync_v2, n);
	if (!d || !dst)
		return 1;
	if (!owned(d, n))
		return FAKE_BASE + FAKE_IDX_cuMemcpyDtoHAsync_v2;
	memcpy(dst, (void *)(uintptr_t)d, n);
	return 0;
}

/* Streams made by cuStreamCreate (cubpf's own): their events are never delayed. */
static void *own_streams[64];
static unsigned nown_streams;
static void fake_stream_created(void *s)
{
	if (nown_streams < 64)
		own_streams[nown_streams++] = s;
}
static int fake_stream_is_own(void *s)
{
	for (unsigned i = 0; i < nown_streams; i++)
		if (own_streams[i] == s)
			return 1;
	return 0;
}

FAKE_EXPORT int cuStreamCreate(void **s, unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuStreamCreate);
	if (!s)
		return 1;
	*s = new_handle();
	fake_stream_created(*s);
	return 0;
}

FAKE_EXPORT int cuStreamSynchronize(void *s)
{
	(void)s;
	FAKE_HIT(cuStreamSynchronize);
	if (fake_unsafe("cuStreamSynchronize"))
		return 900;
	return 0;
}

/* Copies here are done when called: every stream is idle. */
FAKE_EXPORT int cuStreamQuery(void *s)
{
	(void)s;
	FAKE_HIT(cuStreamQuery);
	if (fake_unsafe("cuStreamQuery"))
		return 900;
	return 0;
}

struct fake_link {
	char *ptx;
	char *cubin;
	char *log;
	size_t log_size;
	char opts[128];  /* the other options, "OPTION=VALUE " each (the JIT's options) */
};

/* The JIT options of the last cuLinkCreate_v2, as "OPTION=VALUE " pairs (log buffers left out). */
static char last_jit_options[128];
FAKE_EXPORT const char *fake_last_jit_options(void) { return last_jit_options; }
/* Every PTX text added to any link of the process, one after the other. */
static char link_inputs[1 << 16];
FAKE_EXPORT const char *fake_link_inputs(void) { return link_inputs; }

FAKE_EXPORT int cuLinkCreate_v2(unsigned n, int *opts, void **vals, void **state)
{
	FAKE_HIT(cuLinkCreate_v2);
	if (!state)
		return 1;
	struct fake_link *l = calloc(1, sizeof(*l));
	for (unsigned i = 0; l && opts && vals && i < n; i++) {
		if (opts[i] == 5) /* CU_JIT_ERROR_LOG_BUFFER */
			l->log = vals[i];
		else if (opts[i] == 6) /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
			l->log_size = (size_t)(uintptr_t)vals[i];
		else
			snprintf(l->opts + strlen(l->opts), sizeof(l->opts) - strlen(l->opts),
				 "%d=%lu ", opts[i], (unsigned long)(uintptr_t)vals[i]);
	}
	snprintf(last_jit_options, sizeof(last_jit_options), "%s", l ? l->opts : "");
	*state = l;
	return l ? 0 : 2;
}

FAKE_EXPORT int cuLinkAddData_v2(void *state, int type, void *data, size_t size,
				 const char *name, unsigned n, void *o, void *v)
{
	(void)type, (void)size, (void)name, (void)n, (void)o, (void)v;
	FAKE_HIT(cuLinkAddData_v2);
	struct fake_link *l = state;
	if (!l || !data)
		return 1;
	/* FAKE_REFUSE_LINK_PROBES=1: the linker refuses instrumented kernels (a JIT error). */
	const char *refuse = getenv("FAKE_REFUSE_LINK_PROBES");
	if (refuse && *refuse == '1' && strstr(data, "__cubpf_map_0") && strstr(data, ".entry"))
		return 218; /* CUDA_ERROR_INVALID_PTX */
	/* Every input's text, for the tests of links of several inputs. */
	snprintf(link_inputs + strlen(link_inputs), sizeof(link_inputs) - strlen(link_inputs),
		 "%s\n", (const char *)data);
	free(l->ptx);
	l->ptx = strdup(data);
	return 0;
}

/* FAKE_PTXAS=path: the link runs that ptxas for sm_90 and returns its cubin. */
static int real_ptxas(struct fake_link *l, void **cubin, size_t *size)
{
	char in[] = "/tmp/cubpf-fake-jit-XXXXXX", out[64], cmd[512];
	int fd = mkstemp(in);
	if (fd < 0)
		return 2;
	size_t len = strlen(l->ptx);
	bool ok = write(fd, l->ptx, len) == (ssize_t)len;
	close(fd);
	snprintf(out, sizeof(out), "%s.cubin", in);
	/* the JIT options as ptxas spells them (line info, level, debug, registers) */
	char flags[128] = "";
	unsigned o, v;
	for (const char *p = l->opts; sscanf(p, "%u=%u", &o, &v) == 2; p = strchr(p, ' ') + 1) {
		size_t f = strlen(flags);
		if (o == 13 && v)
			snprintf(flags + f, sizeof(flags) - f, " -lineinfo");
		else if (o == 7)
			snprintf(flags + f, sizeof(flags) - f, " -O%u", v > 3 ? 3 : v);
		else if (o == 11 && v)
			snprintf(flags + f, sizeof(flags) - f, " -g");
		else if (o == 0)
			snprintf(flags + f, sizeof(flags) - f, " -maxrregcount=%u", v);
	}
	snprintf(cmd, sizeof(cmd), "'%s' -arch=sm_90%s -o %s %s 2>/dev/null", getenv("FAKE_PTXAS"),
		 flags, out, in);
	ok = ok && system(cmd) == 0;
	FILE *f = ok ? fopen(out, "rb") : NULL;
	free(l->cubin);
	l->cubin = NULL;
	long n = 0;
	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (l->cubin = malloc((size_t)n)) && fread(l->cubin, 1, (size_t)n, f) != (size_t)n) {
		free(l->cubin);
		l->cubin = NULL;
	}
	if (f)
		fclose(f);
	unlink(in);
	unlink(out);
	if (!l->cubin)
		return 218; /* CUDA_ERROR_INVALID_PTX */
	*cubin = l->cubin;
	*size = (size_t)n;
	return 0;
}

FAKE_EXPORT int cuLinkComplete(void *state, void **cubin, size_t *size)
{
	FAKE_HIT(cuLinkComplete);
	struct fake_link *l = state;
	if (!l || !cubin || !size || !l->ptx)
		return 1;
	if (strstr(l->ptx, "fake_jit_error")) {
		if (l->log && l->log_size)
			snprintf(l->log, l->log_size, "ptxas fatal   : fake error in line 1\n");
		return 218; /* CUDA_ERROR_INVALID_PTX */
	}
	if (getenv("FAKE_PTXAS")) /* a real JIT: the tests that need real register counts */
		return real_ptxas(l, cubin, size);
	size_t n = strlen(l->ptx) + 11;
	free(l->cubin);
	l->cubin = malloc(n);
	if (!l->cubin)
		return 2;
	snprintf(l->cubin, n, "FAKECUBIN\n%s", l->ptx);
	*cubin = l->cubin;
	*size = n;
	return 0;
}

FAKE_EXPORT int cuLinkDestroy(void *state)
{
	FAKE_HIT(cuLinkDestroy);
	struct fake_link *l = state;
	if (!l)
		return 1;
	free(l->ptx);
	free(l->cubin);
	free(l);
	return 0;
}

/* The version the module cache puts in its keys (FAKE_DRIVER_VERSION changes it). */
FAKE_EXPORT int cuDriverGetVersion(int *v)
{
	FAKE_HIT(cuDriverGetVersion);
	const char *e = getenv("FAKE_DRIVER_VERSION");
	if (!v)
		return 1;
	*v = e && *e ? atoi(e) : 13000;
	return 0;
}

FAKE_EXPORT int cuGetErrorName(int e, const char **s)
{
	FAKE_HIT(cuGetErrorName);
	if (!s)
		return 1;
	*s = e == 0 ? "CUDA_SUCCESS" : e == 218 ? "CUDA_ERROR_INVALID_PTX"
	   : e == 200 ? "CUDA_ERROR_INVALID_IMAGE" : "CUDA_ERROR_FAKE";
	return 0;
}

/* Pinned mapped host memory: host memory whose "device pointer" is the same address. */
static void *last_host_alloc;
FAKE_EXPORT void *fake_last_host_alloc(void) { return last_host_alloc; }

/* Pinned allocations and the context current when they were made. */
static struct { void *p, *ctx; } host_allocs[256];

static void host_free_of(void *ctx)
{
	for (int i = 0; i < 256; i++)
		if (host_allocs[i].p && host_allocs[i].ctx == ctx) {
			disown(host_allocs[i].p);
			free(host_allocs[i].p);
			host_allocs[i].p = NULL;
		}
}

FAKE_EXPORT int cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuMemHostAlloc);
	FAKE_BYTES(cuMemHostAlloc, n);
	if (fake_unsafe("cuMemHostAlloc"))
		return 900;
	if (!p || !n)
		return 1;
	*p = aligned_alloc(64, (n + 63) & ~(size_t)63);
	if (!*p)
		return 2;
	own(*p, n);
	last_host_alloc = *p;
	for (int i = 0; i < 256; i++)
		if (!host_allocs[i].p) {
			host_allocs[i].p = *p;
			host_allocs[i].ctx = ctx_depth ? ctx_stack[ctx_depth - 1] : fake_ctx;
			break;
		}
	return 0;
}

FAKE_EXPORT int cuMemHostGetDevicePointer_v2(uint64_t *d, void *p, unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuMemHostGetDevicePointer_v2);
	if (!d || !p)
		return 1;
	*d = (uintptr_t)p;
	return 0;
}

FAKE_EXPORT int cuMemFreeHost(void *p)
{
	FAKE_HIT(cuMemFreeHost);
	if (fake_unsafe("cuMemFreeHost"))
		return 900;
	if (!p)
		return 1;
	for (int i = 0; i < 256; i++)
		if (host_allocs[i].p == p)
			host_allocs[i].p = NULL;
	disown(p);
	free(p);
	return 0;
}

static int memset32(uint64_t d, unsigned v, size_t n, int idx)
{
	if (!d)
		return 1;
	if (!owned(d, n * 4))
		return FAKE_BASE + idx;
	for (size_t i = 0; i < n; i++)
		((uint32_t *)(uintptr_t)d)[i] = v;
	return 0;
}

FAKE_EXPORT int cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *s)
{
	(void)s;
	FAKE_HIT(cuMemsetD32Async);
	FAKE_BYTES(cuMemsetD32Async, n * 4);
	return memset32(d, v, n, FAKE_IDX_cuMemsetD32Async);
}

FAKE_EXPORT int cuMemsetD32Async_ptsz(uint64_t d, unsigned v, size_t n, void *s)
{
	(void)s;
	FAKE_HIT(cuMemsetD32Async_ptsz);
	return memset32(d, v, n, FAKE_IDX_cuMemsetD32Async_ptsz);
}

/* ---- events (kernel spans, shim/live/spans.c) ---------------------------------------------
 * An event holds the host CLOCK_MONOTONIC time of its last record and the stream it was
 * recorded on; it is complete at once unless fake_event_delay is set (then an event recorded on
 * an application's stream completes that long after its record, like a kernel still running;
 * those of streams made by cuStreamCreate, cubpf's own, are never delayed).  fake_events_recorded() counts records,
 * fake_event_last_stream() gives the stream of the latest one, fake_event_logged() the records
 * in order. */
#include <time.h>

struct fake_event {
	uint64_t t;
	void *stream;
	int recorded;
};
static uint64_t event_delay_ns;
static unsigned events_recorded, events_live;
static void *event_last_stream;

static uint64_t fake_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

FAKE_EXPORT void fake_event_delay(uint64_t ns) { event_delay_ns = ns; }
FAKE_EXPORT unsigned fake_events_recorded(void) { return events_recorded; }
FAKE_EXPORT unsigned fake_events_live(void) { return events_live; }
FAKE_EXPORT void *fake_event_last_stream(void) { return event_last_stream; }

FAKE_EXPORT int cuEventCreate(void **e, unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuEventCreate);
	if (!e || !(*e = calloc(1, sizeof(struct fake_event))))
		return 1;
	__atomic_fetch_add(&events_live, 1, __ATOMIC_RELAXED);
	return 0;
}

static int destroy(void *e)
{
	if (!e)
		return 1;
	free(e);
	__atomic_fetch_sub(&events_live, 1, __ATOMIC_RELAXED);
	return 0;
}

FAKE_EXPORT int cuEventDestroy(void *e)
{
	FAKE_HIT(cuEventDestroy);
	return destroy(e);
}

FAKE_EXPORT int cuEventDestroy_v2(void *e)
{
	FAKE_HIT(cuEventDestroy_v2);
	return destroy(e);
}

/* The first EVENT_LOG records on application streams in order (event, stream), for tests of
 * where spans begin (cubpf's reference events on its own stream are left out). */
#define EVENT_LOG 256
static struct {
	void *event, *stream;
} event_log[EVENT_LOG];
static unsigned event_log_n;

FAKE_EXPORT void fake_event_log_reset(void) { event_log_n = 0; }
FAKE_EXPORT unsigned fake_event_log_count(void) { return event_log_n; }
FAKE_EXPORT void *fake_event_logged(unsigned i, void **stream)
{
	*stream = i < event_log_n ? event_log[i].stream : NULL;
	return i < event_log_n ? event_log[i].event : NULL;
}

static int record(void *e, void *s)
{
	struct fake_event *ev = e;
	if (!ev)
		return 1;
	ev->t = fake_now() + (fake_stream_is_own(s) ? 0 : event_delay_ns);
	ev->stream = s;
	ev->recorded = 1;
	__atomic_fetch_add(&events_recorded, 1, __ATOMIC_RELAXED);
	event_last_stream = s;
	unsigned n = EVENT_LOG;
	if (!fake_stream_is_own(s))
		n = __atomic_fetch_add(&event_log_n, 1, __ATOMIC_RELAXED);
	if (n < EVENT_LOG)
		event_log[n].event = e, event_log[n].stream = s;
	return 0;
}

FAKE_EXPORT int cuEventRecord(void *e, void *s)
{
	FAKE_HIT(cuEventRecord);
	return record(e, s);
}

FAKE_EXPORT int cuEventRecord_ptsz(void *e, void *s)
{
	FAKE_HIT(cuEventRecord_ptsz);
	return record(e, s ? s : (void *)2 /* CU_STREAM_PER_THREAD */);
}

FAKE_EXPORT int cuEventRecordWithFlags(void *e, void *s, unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuEventRecordWithFlags);
	return record(e, s);
}

FAKE_EXPORT int cuEventRecordWithFlags_ptsz(void *e, void *s, unsigned flags)
{
	(void)flags;
	FAKE_HIT(cuEventRecordWithFlags_ptsz);
	return record(e, s ? s : (void *)2);
}

FAKE_EXPORT int cuEventQuery(void *e)
{
	FAKE_HIT(cuEventQuery);
	if (fake_unsafe("cuEventQuery"))
		return 900;
	struct fake_event *ev = e;
	if (!ev)
		return 1;
	return ev->recorded && fake_now() < ev->t ? 600 /* NOT_READY */ : 0;
}

FAKE_EXPORT int cuEventSynchronize(void *e)
{
	FAKE_HIT(cuEventSynchronize);
	if (fake_unsafe("cuEventSynchronize"))
		return 900;
	struct fake_event *ev = e;
	if (!ev)
		return 1;
	while (ev->recorded && fake_now() < ev->t)
		;
	return 0;
}

static int elapsed(float *ms, void *a, void *b)
{
	struct fake_event *x = a, *y = b;
	if (!ms || !x || !y)
		return 1;
	if (!x->recorded || !y->recorded)
		return 400;
	uint64_t now = fake_now();
	if (now < x->t || now < y->t)
		return 600;
	*ms = (float)((double)((int64_t)(y->t - x->t)) / 1e6);
	return 0;
}

FAKE_EXPORT int cuEventElapsedTime(float *ms, void *a, void *b)
{
	FAKE_HIT(cuEventElapsedTime);
	return elapsed(ms, a, b);
}

FAKE_EXPORT int cuEventElapsedTime_v2(float *ms, void *a, void *b)
{
	FAKE_HIT(cuEventElapsedTime_v2);
	return elapsed(ms, a, b);
}


FAKE_EXPORT int cuStreamDestroy_v2(void *s)
{
	(void)s;
	FAKE_HIT(cuStreamDestroy_v2);
	return 0;
}


/* ---- stream capture: what a real driver makes of "potentially unsafe" calls ------------------
 * While a stream is captured into a graph, a call that is not enqueued on a stream (an
 * allocation, a free, a synchronisation, a query) is prohibited for a thread whose capture
 * interaction mode is not relaxed when that thread captures itself (unless its capture began
 * relaxed), or when its mode is global and another thread captures in global mode.  The driver
 * then fails the call with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture,
 * which cuStreamEndCapture reports as CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.  Modelled here so
 * that the tests can see every call cubpf makes on its own behalf that would do so. */
enum { CAPTURE_GLOBAL = 0, CAPTURE_THREAD_LOCAL = 1, CAPTURE_RELAXED = 2 };
struct fake_capture {
	void *stream;
	int mode;
	pthread_t owner;
	int invalid;
};
static struct fake_capture captures[8];
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int capture_thread_mode; /* CAPTURE_GLOBAL until exchanged */
static unsigned capture_violations;
static char capture_culprit[64];

FAKE_EXPORT unsigned fake_capture_violations(void)
{
	return __atomic_load_n(&capture_violations, __ATOMIC_ACQUIRE);
}

FAKE_EXPORT const char *fake_capture_culprit(void)
{
	return capture_culprit;
}

static bool capture_prohibits(const struct fake_capture *c)
{
	if (!c->stream || capture_thread_mode == CAPTURE_RELAXED)
		return false;
	if (pthread_equal(c->owner, pthread_self()))
		return c->mode != CAPTURE_RELAXED;
	return capture_thread_mode == CAPTURE_GLOBAL && c->mode == CAPTURE_GLOBAL;
}

/* 0, or 900 (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) after invalidating the captures the call
 * of `name` breaks. */
static int fake_unsafe(const char *name)
{
	int r = 0;
	pthread_mutex_lock(&capture_lock);
	for (unsigned i = 0; i < sizeof(captures) / sizeof(captures[0]); i++)
		if (capture_prohibits(&captures[i])) {
			captures[i].invalid = 1;
			r = 900;
		}
	if (r) {
		snprintf(capture_culprit, sizeof(capture_culprit), "%s", name);
		__atomic_fetch_add(&capture_violations, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&capture_lock);
	return r;
}

static struct fake_capture *capture_of(void *s)
{
	for (unsigned i = 0; i < sizeof(captures) / sizeof(captures[0]); i++)
		if (captures[i].stream && captures[i].stream == s)
			return &captures[i];
	return NULL;
}

static int begin_capture(void *s, int mode)
{
	int r = 1;
	pthread_mutex_lock(&capture_lock);
	for (unsigned i = 0; s && !capture_of(s) && i < sizeof(captures) / sizeof(captures[0]); i++)
		if (!captures[i].stream) {
			captures[i] = (struct fake_capture){ s, mode, pthread_self(), 0 };
			r = 0;
			break;
		}
	pthread_mutex_unlock(&capture_lock);
	return r;
}

FAKE_EXPORT int cuStreamBeginCapture_v2(void *s, int mode)
{
	FAKE_HIT(cuStreamBeginCapture_v2);
	return begin_capture(s, mode);
}

FAKE_EXPORT int cuStreamBeginCapture(void *s)
{
	FAKE_HIT(cuStreamBeginCapture);
	return begin_capture(s, CAPTURE_GLOBAL);
}

FAKE_EXPORT int cuStreamEndCapture(void *s, void **graph)
{
	FAKE_HIT(cuStreamEndCapture);
	pthread_mutex_lock(&capture_lock);
	struct fake_capture *c = capture_of(s);
	int r = !c || !graph ? 1 : c->invalid ? 901 : 0; /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
	if (c)
		memset(c, 0, sizeof(*c));
	pthread_mutex_unlock(&capture_lock);
	if (r == 0)
		*graph = new_handle();
	return r;
}

FAKE_EXPORT int cuStreamIsCapturing(void *s, int *status)
{
	FAKE_HIT(cuStreamIsCapturing);
	if (!status)
		return 1;
	pthread_mutex_lock(&capture_lock);
	const struct fake_capture *c = capture_of(s);
	*status = !c ? 0 : c->invalid ? 2 : 1; /* NONE, ACTIVE, INVALIDATED */
	pthread_mutex_unlock(&capture_lock);
	return 0;
}

FAKE_EXPORT int cuThreadExchangeStreamCaptureMode(int *mode)
{
	FAKE_HIT(cuThreadExchangeStreamCaptureMode);
	if (!mode || *mode < CAPTURE_GLOBAL || *mode > CAPTURE_RELAXED)
		return 1;
	int old = capture_thread_mode;
	capture_thread_mode = *mode;
	*mode = old;
	return 0;
}
