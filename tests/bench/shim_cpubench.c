/* CPU-only cost of the shim per call (no GPU needed): the fake driver of tests/shim stands in
 * for the real one, so the figures are what the shim adds to a call, without the driver's own
 * time.  Direct calls to the fake and calls through the shim are interleaved in one process.
 *   shim_cpubench SHIM FAKE
 * Prints ns per call for: a trampoline-forwarded function (cuCtxGetCurrent), the
 * cuLaunchKernel wrapper with a registered kernel, and the cuMemcpyHtoDAsync_v2 wrapper. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tests/bench/median.h"

typedef int (*ctx_t)(void **);
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			unsigned, void *, void **, void **);
typedef int (*copy_t)(unsigned long long, const void *, size_t, void *);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define N 5000000

static double time_ctx(ctx_t f)
{
	void *c;
	double t = now();
	for (int i = 0; i < N; i++)
		f(&c);
	return (now() - t) / N * 1e9;
}

static double time_launch(launch_t f, void *k)
{
	double t = now();
	for (int i = 0; i < N; i++)
		f(k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	return (now() - t) / N * 1e9;
}

static double time_copy(copy_t f)
{
	static char buf[64];
	double t = now();
	for (int i = 0; i < N; i++)
		f(0x1000, buf, sizeof(buf), NULL);
	return (now() - t) / N * 1e9;
}

#define ROUNDS 5
static double median(double *v)
{
	return bench_median(v, ROUNDS);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: shim_cpubench SHIM_LIBCUDA FAKE_LIBCUDA\n");
		return 2;
	}
	setenv("CUBPF_REAL_LIBCUDA", argv[2], 1);
	void *shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	void *fake = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	if (!shim || !fake) {
		fprintf(stderr, "shim_cpubench: %s\n", dlerror());
		return 2;
	}
	/* A kernel registered through the shim (the usual case for launches). */
	void *mod = NULL, *k = NULL;
	static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				  ".visible .entry empty()\n{\n\tret;\n}\n";
	((int (*)(void **, const void *))dlsym(shim, "cuModuleLoadData"))(&mod, ptx);
	((int (*)(void **, void *, const char *))dlsym(shim, "cuModuleGetFunction"))(&k, mod, "empty");
	if (!k) {
		fprintf(stderr, "shim_cpubench: the fake driver gave no kernel\n");
		return 1;
	}
	ctx_t ctx_d = (ctx_t)dlsym(fake, "cuCtxGetCurrent"), ctx_s = (ctx_t)dlsym(shim, "cuCtxGetCurrent");
	launch_t l_d = (launch_t)dlsym(fake, "cuLaunchKernel"), l_s = (launch_t)dlsym(shim, "cuLaunchKernel");
	copy_t c_d = (copy_t)dlsym(fake, "cuMemcpyHtoDAsync_v2"), c_s = (copy_t)dlsym(shim, "cuMemcpyHtoDAsync_v2");
	double cd[ROUNDS], cs[ROUNDS], ld[ROUNDS], ls[ROUNDS], md[ROUNDS], ms[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		cd[r] = time_ctx(ctx_d);
		cs[r] = time_ctx(ctx_s);
		ld[r] = time_launch(l_d, k);
		ls[r] = time_launch(l_s, k);
		md[r] = time_copy(c_d);
		ms[r] = time_copy(c_s);
	}
	double a = median(cd), b = median(cs), c = median(ld), d = median(ls), e = median(md), f = median(ms);
	printf("per call, median of %d rounds x %d calls (fake driver: the shim's own cost)\n", ROUNDS, N);
	printf("  cuCtxGetCurrent      direct %6.2f ns  via shim %6.2f ns  added %5.2f ns (trampoline)\n", a, b, b - a);
	printf("  cuLaunchKernel       direct %6.2f ns  via shim %6.2f ns  added %5.2f ns (wrapper, registered kernel)\n", c, d, d - c);
	printf("  cuMemcpyHtoDAsync_v2 direct %6.2f ns  via shim %6.2f ns  added %5.2f ns (wrapper, no hooks)\n", e, f, f - e);
	printf("RESULT shim_cpu trampoline_added_ns %.2f launch_added_ns %.2f copy_added_ns %.2f\n", b - a, d - c, f - e);
	return 0;
}
