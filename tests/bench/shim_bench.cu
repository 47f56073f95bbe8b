// Benchmark of the shim's overhead (tests/bench/b_shim.sh).  No CUDA runtime, no -lcuda: the
// driver is reached through dlopen, so that one process can call the same driver natively and
// through the shim, interleaved, on the same context and the same kernel.
//
//   shim_bench time REAL_LIBCUDA SHIM_LIBCUDA   launch rate and cuCtxGetCurrent cost, both ways
//   shim_bench mem LIBCUDA                      VmRSS and device memory after a fixed workload
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <ctime>
#include <dlfcn.h>
#include <algorithm>
#include <vector>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;

struct driver {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*ctx_get)(CUcontext *);
	CUresult (*ctx_sync)(void);
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
	CUresult (*mem_info)(size_t *, size_t *);
};

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry empty()\n{\n\tret;\n}\n";

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "shim_bench: %s: no %s\n", dlerror(), name);
		exit(2);
	}
	return p;
}

static void open_driver(const char *path, driver *d)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "shim_bench: cannot load %s: %s\n", path, dlerror());
		exit(2);
	}
	d->init = (CUresult (*)(unsigned))sym(h, "cuInit");
	d->device_get = (CUresult (*)(CUdevice *, int))sym(h, "cuDeviceGet");
	d->primary_retain = (CUresult (*)(CUcontext *, CUdevice))sym(h, "cuDevicePrimaryCtxRetain");
	d->ctx_set = (CUresult (*)(CUcontext))sym(h, "cuCtxSetCurrent");
	d->ctx_get = (CUresult (*)(CUcontext *))sym(h, "cuCtxGetCurrent");
	d->ctx_sync = (CUresult (*)(void))sym(h, "cuCtxSynchronize");
	d->module_load = (CUresult (*)(CUmodule *, const void *))sym(h, "cuModuleLoadData");
	d->get_function = (CUresult (*)(CUfunction *, CUmodule, const char *))sym(h, "cuModuleGetFunction");
	d->launch = (CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				  unsigned, CUstream, void **, void **))sym(h, "cuLaunchKernel");
	d->mem_info = (CUresult (*)(size_t *, size_t *))sym(h, "cuMemGetInfo_v2");
}

#define CK(x) do { CUresult r_ = (x); if (r_ != 0) { \
	fprintf(stderr, "shim_bench: %s failed: %d\n", #x, r_); exit(1); } } while (0)

static double now(void)
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Initializes the driver, makes the primary context current, loads the empty kernel.
static CUfunction setup(driver *d)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CK(d->init(0));
	CK(d->device_get(&dev, 0));
	CK(d->primary_retain(&ctx, dev));
	CK(d->ctx_set(ctx));
	CK(d->module_load(&mod, ptx));
	CK(d->get_function(&f, mod, "empty"));
	return f;
}

// Seconds for `n` launches of the empty kernel and the synchronization after them.
static double launches(driver *d, CUfunction f, int n)
{
	double t0 = now();
	for (int i = 0; i < n; i++)
		CK(d->launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
	CK(d->ctx_sync());
	return now() - t0;
}

static double ctx_calls(driver *d, int n)
{
	CUcontext c;
	double t0 = now();
	for (int i = 0; i < n; i++)
		d->ctx_get(&c);
	return now() - t0;
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

static int time_mode(const char *real_path, const char *shim_path)
{
	driver real, shim;
	open_driver(real_path, &real);
	open_driver(shim_path, &shim);
	// The kernel is loaded through the shim so that the shim knows it (the usual case).
	CUfunction f = setup(&shim);
	const int rounds = 25, nlaunch = 20000, ncalls = 2000000;
	launches(&real, f, nlaunch); // warm-up
	launches(&shim, f, nlaunch);
	std::vector<double> lr, ls, cr, cs;
	for (int r = 0; r < rounds; r++) {
		// Alternate which goes first, so that drift favours neither.
		if (r & 1) {
			ls.push_back(nlaunch / launches(&shim, f, nlaunch));
			lr.push_back(nlaunch / launches(&real, f, nlaunch));
			cs.push_back(ctx_calls(&shim, ncalls) / ncalls * 1e9);
			cr.push_back(ctx_calls(&real, ncalls) / ncalls * 1e9);
		} else {
			lr.push_back(nlaunch / launches(&real, f, nlaunch));
			ls.push_back(nlaunch / launches(&shim, f, nlaunch));
			cr.push_back(ctx_calls(&real, ncalls) / ncalls * 1e9);
			cs.push_back(ctx_calls(&shim, ncalls) / ncalls * 1e9);
		}
	}
	double lrm = median(lr), lsm = median(ls), crm = median(cr), csm = median(cs);
	printf("launch rate (empty kernel, %d launches x %d rounds, median):\n", nlaunch, rounds);
	printf("  native     %10.0f launches/s\n", lrm);
	printf("  via shim   %10.0f launches/s\n", lsm);
	printf("RESULT launch_rate_ratio %.4f (target >= 0.99)\n", lsm / lrm);
	printf("cuCtxGetCurrent (%d calls x %d rounds, median):\n", ncalls, rounds);
	printf("  native     %8.2f ns/call\n", crm);
	printf("  via shim   %8.2f ns/call\n", csm);
	printf("RESULT forwarded_call_added_ns %.2f (target <= 5)\n", csm - crm);
	return 0;
}

static long vmrss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

static int mem_mode(const char *path)
{
	driver d;
	open_driver(path, &d);
	CUfunction f = setup(&d);
	launches(&d, f, 1000);
	size_t free_b = 0, total_b = 0;
	CK(d.mem_info(&free_b, &total_b));
	printf("MEM rss_kb=%ld dev_free=%zu dev_total=%zu\n", vmrss_kb(), free_b, total_b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "time"))
		return time_mode(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "mem"))
		return mem_mode(argv[2]);
	fprintf(stderr, "usage: shim_bench time REAL_LIBCUDA SHIM_LIBCUDA | shim_bench mem LIBCUDA\n");
	return 2;
}
