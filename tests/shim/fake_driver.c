/* A fake libcuda for the shim's tests, built from the shim's own export table.
 *
 * Every exported name is a weak function that counts its calls and returns a value of its own
 * (FAKE_BASE + its index), so a test can tell which function a call through the shim reached.
 * A few functions are strong definitions that behave like the driver (cuGetProcAddress picks a
 * variant by version and flags; module loads and handle look-ups hand out handles; launches
 * succeed), so that the shim's bookkeeping can be watched.  Linked -Bsymbolic: its references
 * to its own functions must not land in the shim, which exports the same names.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/shim/fake.h"

/* What a call with all-zero arguments returns. */
FAKE_EXPORT int fake_result(const char *name)
{
	if (!strncmp(name, "cuGetProcAddress", 16) || !strcmp(name, "cuModuleLoadData") ||
	    !strcmp(name, "cuModuleGetFunction") || !strcmp(name, "cuLibraryLoadData") ||
	    !strcmp(name, "cuLibraryGetKernel") || !strcmp(name, "cuKernelGetFunction"))
		return 1; /* CUDA_ERROR_INVALID_VALUE */
	if (!strcmp(name, "cuLaunchKernel") || !strcmp(name, "cuLaunchKernel_ptsz"))
		return 0;
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

FAKE_EXPORT int cuModuleLoadData(void **module, const void *image)
{
	FAKE_HIT(cuModuleLoadData);
	if (!module || !image)
		return 1;
	snprintf(last_image, sizeof(last_image), "%s", (const char *)image);
	*module = new_handle();
	return 0;
}

FAKE_EXPORT int cuLibraryLoadData(void **library, const void *code, void *o, void *v, unsigned n,
				  void *lo, void *lv, unsigned ln)
{
	(void)o, (void)v, (void)n, (void)lo, (void)lv, (void)ln;
	FAKE_HIT(cuLibraryLoadData);
	if (!library || !code)
		return 1;
	*library = new_handle();
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

FAKE_EXPORT int cuModuleGetFunction(void **f, void *module, const char *name)
{
	FAKE_HIT(cuModuleGetFunction);
	if (!f || !module || !name)
		return 1;
	*f = handle_for(module, name, 1);
	return 0;
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
