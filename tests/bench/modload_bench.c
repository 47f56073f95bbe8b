/* modload_bench: the time of one cuModuleLoadData of an image file, for tests/bench/b_modload.sh.
 *
 * usage: modload_bench IMAGE [LOADS]
 *
 * Makes the primary context of device 0 current, loads a tiny warm-up module first (so that the
 * per-process and per-context work of a shim -- its cache database, its device maps, its clock
 * calibration -- is not counted in the figure), then loads IMAGE LOADS times (default 1), each
 * followed by cuModuleUnload, and prints one line per load:
 *   load_us US kernels N bytes B
 * b_modload.sh runs it in a fresh process per measurement, natively and under the shim, with
 * CUDA_MODULE_LOADING=EAGER and CUDA_CACHE_DISABLE=1.
 *
 * MODLOAD_CUBIN_FROM=DB: loads instead the largest cubin of the module cache DB (the instrumented
 * cubin a cache hit substitutes), without the shim: what the driver alone takes for the
 * instrumented code, so that a hit's cost splits into the bigger code and the cache's own work.
 *
 * MODLOAD_FAKE=1: errors of cuInit and context set-up are ignored (the fake driver of tests/shim
 * has a context already), to time the shim's own work on a machine without a GPU.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"

static const char warm_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n\n"
	".visible .entry modload_warm(\n\t.param .u64 modload_warm_param_0\n)\n{\n\tret;\n}\n";

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;
	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "modload_bench: cannot read %s\n", path);
		exit(2);
	}
	fclose(f);
	buf[n] = 0; /* a PTX image is NUL-terminated */
	*size = (size_t)n;
	return buf;
}

struct largest {
	store_key key;
	size_t size;
	int found;
};

static int pick_largest(void *ctx, const store_key *key, const struct store_cache_entry *e)
{
	struct largest *l = ctx;
	if (e->cubin_size > l->size) {
		l->key = *key;
		l->size = e->cubin_size;
		l->found = 1;
	}
	return 0;
}

/* The largest cubin in the cache database at path (malloc'ed), or exits. */
static void *cached_cubin(const char *path, size_t *size)
{
	char err[STORE_ERRLEN];
	struct store_cache *c = store_cache_open(path, NULL, err, sizeof(err));
	struct largest l = { .size = 0 };
	struct store_cache_entry e;
	if (!c || store_cache_list(c, pick_largest, &l) < 0 || !l.found ||
	    store_cache_lookup(c, &l.key, &e, STORE_CACHE_NO_PTX) != 1) {
		fprintf(stderr, "modload_bench: no cubin in the cache %s: %s\n", path,
			c ? store_cache_error(c) : err);
		exit(2);
	}
	void *cubin = e.cubin;
	*size = e.cubin_size;
	e.cubin = NULL;
	store_cache_entry_free(&e);
	store_cache_close(c);
	return cubin;
}

static int check(CUresult r, const char *what, int fake)
{
	const char *s = NULL;
	if (r == CUDA_SUCCESS || fake)
		return 0;
	cuGetErrorName(r, &s);
	fprintf(stderr, "modload_bench: %s: %s (%d)\n", what, s ? s : "?", (int)r);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: modload_bench IMAGE [LOADS]\n");
		return 2;
	}
	int loads = argc > 2 ? atoi(argv[2]) : 1;
	const char *f = getenv("MODLOAD_FAKE");
	int fake = f && *f == '1';
	size_t size;
	const char *from = getenv("MODLOAD_CUBIN_FROM");
	void *image = from && *from ? cached_cubin(from, &size) : slurp(argv[1], &size);
	CUdevice dev = 0;
	CUcontext ctx = NULL;
	CUmodule warm, mod;
	if (check(cuInit(0), "cuInit", fake) || check(cuDeviceGet(&dev, 0), "cuDeviceGet", fake) ||
	    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", fake) ||
	    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", fake) ||
	    check(cuModuleLoadData(&warm, warm_ptx), "warm-up cuModuleLoadData", 0))
		return 1;
	for (int i = 0; i < loads; i++) {
		double t0 = now_us();
		CUresult r = cuModuleLoadData(&mod, image);
		double t1 = now_us();
		if (check(r, "cuModuleLoadData", 0))
			return 1;
		unsigned n = 0;
		if (!fake && cuModuleGetFunctionCount(&n, mod) != CUDA_SUCCESS)
			n = 0;
		printf("load_us %.1f kernels %u bytes %zu\n", t1 - t0, n, size);
		if (!fake)
			cuModuleUnload(mod);
	}
	fflush(stdout);
	return 0;
}
