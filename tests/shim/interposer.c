/* A second interposer of the driver, for chaining tests (tests/dist/test_dist.c): a library with
 * the soname libcuda.so.1 (as another drop-in driver would have) exporting the calls of
 * tests/tools/fake_app.c, each counted and forwarded to the next definition in the process
 * (dlsym(RTLD_NEXT)).  At exit it prints "interposer: N calls, L launches" on stderr, or
 * "interposer: NAME: no next definition" when a forward finds none. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

static atomic_int calls, launches;

static void *next(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (!f)
		fprintf(stderr, "interposer: %s: no next definition\n", name);
	return f;
}

EXPORT int cuModuleLoadData(void **mod, const void *image)
{
	int (*f)(void **, const void *) = (int (*)(void **, const void *))next("cuModuleLoadData");
	atomic_fetch_add(&calls, 1);
	return f ? f(mod, image) : 999;
}

EXPORT int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
	int (*f)(void **, void *, const char *) =
		(int (*)(void **, void *, const char *))next("cuModuleGetFunction");
	atomic_fetch_add(&calls, 1);
	return f ? f(fn, mod, name) : 999;
}

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);
EXPORT int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			  unsigned bz, unsigned shmem, void *stream, void **params, void **extra)
{
	launch_fn n = (launch_fn)next("cuLaunchKernel");
	atomic_fetch_add(&calls, 1);
	atomic_fetch_add(&launches, 1);
	return n ? n(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra) : 999;
}

__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "interposer: %d calls, %d launches\n", atomic_load(&calls),
		atomic_load(&launches));
}
