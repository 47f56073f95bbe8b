// Driver-API torture program (issue 16): each mode walks one driver-API pattern an application
// may use, prints what it computed (stdout, deterministic: the GPU test compares it between a
// native run and runs under every cubpf tool) and exits 0, or prints an error and exits 1.
// Figures that differ from run to run (memory, handles) go to stderr as "FIGURE" lines.
// Kernels: tests/cuda/torture_kernels.cu, a fatbin next to this binary (torture_kernels.fatbin)
// or at $TORTURE_FATBIN.  Usage: torture_drv MODE [N].
#include <cuda.h>
#include <cuda_runtime.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                                   \
	do {                                                                                    \
		CUresult r_ = (x);                                                              \
		if (r_ != CUDA_SUCCESS) {                                                       \
			const char *s_ = "?";                                                   \
			cuGetErrorName(r_, &s_);                                                \
			printf("error %s (%d) at line %d: %s\n", s_, (int)r_, __LINE__, #x);    \
			fflush(stdout);                                                         \
			exit(1);                                                                \
		}                                                                               \
	} while (0)

static std::vector<char> fatbin;

static void read_fatbin(const char *argv0)
{
	char path[4096];
	const char *env = getenv("TORTURE_FATBIN");
	if (env)
		snprintf(path, sizeof(path), "%s", env);
	else {
		snprintf(path, sizeof(path), "%s", argv0);
		char *slash = strrchr(path, '/');
		snprintf(slash ? slash + 1 : path, sizeof(path) - (slash ? slash + 1 - path : 0),
			 "torture_kernels.fatbin");
	}
	FILE *f = fopen(path, "rb");
	if (!f) {
		printf("cannot open %s\n", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	fatbin.resize((size_t)n);
	if (fread(fatbin.data(), 1, (size_t)n, f) != (size_t)n) {
		printf("cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
}

// ---- figures: host memory, device memory, handles ----------------------------------------

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2;
}

static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2;
}

static size_t dev_used(void)
{
	size_t fr = 0, tot = 0;
	cuMemGetInfo(&fr, &tot);
	return tot - fr;
}

/* FIGURE lines are checked by t_torture; progress lines (the same figures between the checked
 * cycles) say how far a run cut short by a time limit got. */
static void figures(const char *tag, const char *mode, int cycle)
{
	fprintf(stderr, "%s %s cycle=%d rss_kb=%ld fds=%d threads=%d dev_used_mb=%zu\n", tag, mode,
		cycle, rss_kb(), fd_count(), thread_count(), dev_used() >> 20);
}

static void figure(const char *mode, int cycle)
{
	figures("FIGURE", mode, cycle);
}

static void progress(const char *mode, int cycle)
{
	figures("progress", mode, cycle);
}

// ---- helpers -------------------------------------------------------------------------------

static CUdevice dev0;

static void init(void)
{
	CK(cuInit(0));
	CK(cuDeviceGet(&dev0, 0));
}

static CUcontext ctx_create(CUdevice d)
{
	CUcontext c;
	CUctxCreateParams p;
	memset(&p, 0, sizeof(p));
	CK(cuCtxCreate(&c, &p, 0, d));
	return c;
}

struct mod3 {
	CUmodule mod;
	CUfunction scale, reduce, square;
};

static mod3 load3(void)
{
	mod3 m;
	CK(cuModuleLoadData(&m.mod, fatbin.data()));
	CK(cuModuleGetFunction(&m.scale, m.mod, "tk_scale"));
	CK(cuModuleGetFunction(&m.reduce, m.mod, "tk_reduce"));
	CK(cuModuleGetFunction(&m.square, m.mod, "tk_square"));
	return m;
}

// scale: out = 2*in + 1 + tk_global over n floats, block 128 with 128 floats of dynamic smem.
// Returns the sum of out (exact in float for the sizes used).
static double run_scale(CUfunction f, int n, CUstream s, int via_extra)
{
	std::vector<float> h(n);
	for (int i = 0; i < n; i++)
		h[i] = (float)(i % 97);
	CUdeviceptr din, dout;
	CK(cuMemAlloc(&din, n * sizeof(float)));
	CK(cuMemAlloc(&dout, n * sizeof(float)));
	CK(cuMemcpyHtoD(din, h.data(), n * sizeof(float)));
	float a = 2.0f, b = 1.0f;
	unsigned bs = 128, gs = (n + bs - 1) / bs;
	if (via_extra) {
		struct {
			CUdeviceptr in, out;
			float a, b;
			int n;
		} __attribute__((packed, aligned(8))) args;
		// the kernel's parameter layout: two pointers, two floats, an int
		char buf[32];
		size_t sz = 0;
		memcpy(buf + 0, &din, 8);
		memcpy(buf + 8, &dout, 8);
		memcpy(buf + 16, &a, 4);
		memcpy(buf + 20, &b, 4);
		memcpy(buf + 24, &n, 4);
		sz = 28;
		(void)args;
		void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE,
				  &sz, CU_LAUNCH_PARAM_END };
		CK(cuLaunchKernel(f, gs, 1, 1, bs, 1, 1, bs * sizeof(float), s, NULL, extra));
	} else {
		void *params[] = { &din, &dout, &a, &b, &n };
		CK(cuLaunchKernel(f, gs, 1, 1, bs, 1, 1, bs * sizeof(float), s, params, NULL));
	}
	CK(cuStreamSynchronize(s));
	CK(cuMemcpyDtoH(h.data(), dout, n * sizeof(float)));
	CK(cuMemFree(din));
	CK(cuMemFree(dout));
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += h[i];
	return sum;
}

static long long run_square(CUfunction f, int n, CUstream s)
{
	CUdeviceptr d;
	CK(cuMemAlloc(&d, n * sizeof(int)));
	void *params[] = { &d, &n };
	CK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, params, NULL));
	std::vector<int> h(n);
	CK(cuStreamSynchronize(s));
	CK(cuMemcpyDtoH(h.data(), d, n * sizeof(int)));
	CK(cuMemFree(d));
	long long sum = 0;
	for (int i = 0; i < n; i++)
		sum += h[i];
	return sum;
}

// ---- modes ---------------------------------------------------------------------------------

// The issue's program: own context with CUctxCreateParams, fatbin, three kernels, occupancy,
// a launch with dynamic shared memory and a parameter array, copy back, free, destroy.
static int m_repro(int)
{
	init();
	CUcontext c = ctx_create(dev0);
	mod3 m = load3();
	CUfunction fs[3] = { m.scale, m.reduce, m.square };
	const char *names[3] = { "tk_scale", "tk_reduce", "tk_square" };
	for (int i = 0; i < 3; i++) {
		int grid = 0, block = 0;
		CK(cuOccupancyMaxPotentialBlockSize(&grid, &block, fs[i], NULL, 0, 0));
		// the answer describes the kernel that runs: a figure (README limitations)
		fprintf(stderr, "FIGURE repro %s potential_block=%d\n", names[i], block);
		printf("occupancy %s: block > 0: %d, grid > 0: %d\n", names[i], block > 0, grid > 0);
	}
	int n = 1 << 16;
	std::vector<float> h(n);
	for (int i = 0; i < n; i++)
		h[i] = 1.0f;
	CUdeviceptr din, dout;
	unsigned bs = 256, gs = n / bs;
	CK(cuMemAlloc(&din, n * sizeof(float)));
	CK(cuMemAlloc(&dout, gs * sizeof(float)));
	CK(cuMemcpyHtoD(din, h.data(), n * sizeof(float)));
	void *params[] = { &din, &dout, &n };
	CK(cuLaunchKernel(m.reduce, gs, 1, 1, bs, 1, 1, bs * sizeof(float), NULL, params, NULL));
	std::vector<float> r(gs);
	CK(cuMemcpyDtoH(r.data(), dout, gs * sizeof(float)));
	double sum = 0;
	for (unsigned i = 0; i < gs; i++)
		sum += r[i];
	printf("reduce sum %.0f (expect %d)\n", sum, n);
	printf("scale sum %.0f\n", run_scale(m.scale, 4096, NULL, 0));
	CK(cuMemFree(din));
	CK(cuMemFree(dout));
	CK(cuCtxDestroy(c));
	printf("done\n");
	return sum == n ? 0 : 1;
}

// Contexts created and destroyed in a loop, a module, an allocation and launches in each.
static int m_ctxloop(int cycles)
{
	init();
	long long total = 0;
	double stotal = 0;
	for (int i = 0; i < cycles; i++) {
		CUcontext c = ctx_create(dev0);
		mod3 m = load3();
		total += run_square(m.square, 1000, NULL);
		stotal += run_scale(m.scale, 512, NULL, 0);
		if (i == 10 || i == cycles - 1)
			figure("ctxloop", i + 1);
		else if ((i + 1) % 100 == 0) /* progress, for a run cut short by a time limit */
			progress("ctxloop", i + 1);
		CK(cuModuleUnload(m.mod));
		CK(cuCtxDestroy(c));
	}
	printf("ctxloop %d cycles: square total %lld scale total %.0f\n", cycles, total, stotal);
	return 0;
}

// Threads switching contexts (push/pop/set) and launching at once.
static CUcontext shared_ctx[2];
static mod3 shared_mod[2];
static long long thread_sums[8];

static void *switcher(void *arg)
{
	long t = (long)arg;
	long long sum = 0;
	for (int i = 0; i < 50; i++) {
		int k = (int)((t + i) & 1);
		if (i % 3 == 0) {
			CK(cuCtxSetCurrent(shared_ctx[k]));
		} else {
			CK(cuCtxPushCurrent(shared_ctx[k]));
		}
		sum += run_square(shared_mod[k].square, 300 + (int)t, NULL);
		if (i % 3 != 0) {
			CUcontext popped;
			CK(cuCtxPopCurrent(&popped));
			if (popped != shared_ctx[k]) {
				printf("popped the wrong context\n");
				exit(1);
			}
		}
	}
	thread_sums[t] = sum;
	return NULL;
}

static int m_threads(int)
{
	init();
	int ndev = 0;
	CK(cuDeviceGetCount(&ndev));
	for (int k = 0; k < 2; k++) {
		CUdevice d;
		CK(cuDeviceGet(&d, k % ndev)); // two devices when there are two
		shared_ctx[k] = ctx_create(d);
		shared_mod[k] = load3();
		CUcontext popped;
		CK(cuCtxPopCurrent(&popped));
	}
	pthread_t th[8];
	for (long t = 0; t < 8; t++)
		pthread_create(&th[t], NULL, switcher, (void *)t);
	for (int t = 0; t < 8; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < 8; t++)
		printf("thread %d sum %lld\n", t, thread_sums[t]);
	for (int k = 0; k < 2; k++)
		CK(cuCtxDestroy(shared_ctx[k]));
	printf("done\n");
	return 0;
}

// Primary context released to zero and retained again, a module and launches each time; then
// cuDevicePrimaryCtxReset while the maps exist, and work after it.
static int m_primary(int cycles)
{
	init();
	long long total = 0;
	for (int i = 0; i < cycles; i++) {
		CUcontext c;
		CK(cuDevicePrimaryCtxRetain(&c, dev0));
		CK(cuCtxSetCurrent(c));
		mod3 m = load3();
		total += run_square(m.square, 777, NULL);
		if (i % 2 == 0) {
			CK(cuModuleUnload(m.mod));
		}
		if (i == 2) { // reset while the module and cubpf's maps exist
			CK(cuDevicePrimaryCtxReset(dev0));
		}
		CK(cuDevicePrimaryCtxRelease(dev0));
		unsigned flags;
		int active = -1;
		CK(cuDevicePrimaryCtxGetState(dev0, &flags, &active));
		if (i == cycles - 1)
			printf("primary active after release: %d\n", active);
	}
	printf("primary %d cycles: total %lld\n", cycles, total);
	return 0;
}

// Modules loaded, unloaded and loaded again; cuModuleGetGlobal written between launches.
static int m_modules(int cycles)
{
	init();
	CUcontext c = ctx_create(dev0);
	double total = 0;
	for (int i = 0; i < cycles; i++) {
		mod3 m = load3();
		CUdeviceptr g;
		size_t gsz;
		CK(cuModuleGetGlobal(&g, &gsz, m.mod, "tk_global"));
		int v = i % 5;
		CK(cuMemcpyHtoD(g, &v, sizeof(v)));
		total += run_scale(m.scale, 256, NULL, 0);
		int back = -1;
		CK(cuMemcpyDtoH(&back, g, sizeof(back)));
		if (back != v || gsz != sizeof(int)) {
			printf("global %d size %zu, expected %d\n", back, gsz, v);
			return 1;
		}
		CK(cuModuleUnload(m.mod));
	}
	printf("modules %d cycles: scale total %.0f\n", cycles, total);
	CK(cuCtxDestroy(c));
	return 0;
}

// Libraries: one cuLibraryLoadData, kernels taken with cuLibraryGetKernel and turned into
// functions in two contexts (cuKernelGetFunction), launched as CUfunction and as CUkernel.
static int m_library(int)
{
	init();
	CUlibrary lib;
	CK(cuLibraryLoadData(&lib, fatbin.data(), NULL, NULL, 0, NULL, NULL, 0));
	CUkernel k;
	CK(cuLibraryGetKernel(&k, lib, "tk_square"));
	CUcontext c[2];
	for (int i = 0; i < 2; i++) {
		c[i] = ctx_create(dev0);
		CUfunction f;
		CK(cuKernelGetFunction(&f, k));
		printf("library ctx %d function: %lld\n", i, run_square(f, 1000 + i, NULL));
		printf("library ctx %d kernel: %lld\n", i, run_square((CUfunction)k, 2000 + i, NULL));
		CUcontext p;
		CK(cuCtxPopCurrent(&p));
	}
	for (int i = 0; i < 2; i++) {
		CK(cuCtxPushCurrent(c[i]));
		printf("library ctx %d again: %lld\n", i, run_square((CUfunction)k, 3000 + i, NULL));
		CUcontext p;
		CK(cuCtxPopCurrent(&p));
	}
	for (int i = 0; i < 2; i++)
		CK(cuCtxDestroy(c[i]));
	CK(cuLibraryUnload(lib));
	printf("done\n");
	return 0;
}

// Attribute queries and settings on the application's kernels.
static int m_attrs(int)
{
	init();
	CUcontext c = ctx_create(dev0);
	mod3 m = load3();
	int v = 0;
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, m.scale));
	printf("scale max threads per block %d\n", v);
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, m.scale));
	fprintf(stderr, "FIGURE attrs scale_regs=%d\n", v);
	printf("scale registers > 0: %d\n", v > 0);
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, m.scale));
	printf("scale max dynamic smem before %d\n", v);
	int want = 100 * 1024;
	CK(cuFuncSetAttribute(m.scale, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, want));
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, m.scale));
	printf("scale max dynamic smem after %d\n", v);
	CK(cuFuncSetAttribute(m.scale, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, m.scale));
	printf("scale carveout %d\n", v);
	CK(cuFuncSetCacheConfig(m.reduce, CU_FUNC_CACHE_PREFER_SHARED));
	// a launch that needs the raised limit: 100 KiB of dynamic shared memory
	int n = 1024;
	CUdeviceptr din, dout;
	CK(cuMemAlloc(&din, n * sizeof(float)));
	CK(cuMemAlloc(&dout, n * sizeof(float)));
	CK(cuMemsetD32(din, 0x3f800000, n));
	float a = 3, b = 0;
	void *params[] = { &din, &dout, &a, &b, &n };
	CK(cuLaunchKernel(m.scale, n / 128, 1, 1, 128, 1, 1, want, NULL, params, NULL));
	std::vector<float> h(n);
	CK(cuMemcpyDtoH(h.data(), dout, n * sizeof(float)));
	printf("big smem launch out[5] %.0f\n", h[5]);
	// Opting in to all the shared memory a block may have (flash-attention style: the device's
	// opt-in maximum less the kernel's static size), then a launch that uses all of it: cubpf
	// must add no shared memory of its own, or the setting fails.
	int optin = 0, stat = 0;
	CK(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev0));
	CK(cuFuncGetAttribute(&stat, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, m.scale));
	printf("scale static smem %d\n", stat);
	CK(cuFuncSetAttribute(m.scale, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - stat));
	CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, m.scale));
	printf("scale max dynamic smem all = opt-in - static: %d\n", v == optin - stat);
	CK(cuLaunchKernel(m.scale, n / 128, 1, 1, 128, 1, 1, optin - stat, NULL, params, NULL));
	CK(cuMemcpyDtoH(h.data(), dout, n * sizeof(float)));
	printf("all smem launch out[5] %.0f\n", h[5]);
	// Occupancy answers describe the kernel that runs (under probes it may hold more
	// registers than the original: README): they are figures, and what must hold is that
	// launches sized by them work, a cooperative grid of every SM full included.
	CUfunction fs[3] = { m.scale, m.reduce, m.square };
	const char *names[3] = { "tk_scale", "tk_reduce", "tk_square" };
	for (int i = 0; i < 3; i++) {
		int grid = 0, block = 0, blocks = 0;
		CK(cuOccupancyMaxPotentialBlockSize(&grid, &block, fs[i], NULL, 1024, 0));
		CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fs[i], 256, 1024));
		CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fs[i]));
		fprintf(stderr, "FIGURE attrs %s potential_block=%d active_blocks_256=%d\n", names[i],
			block, blocks);
		printf("%s: max threads %d, potential block > 0: %d, active blocks > 0: %d\n",
		       names[i], v, block > 0, blocks > 0);
	}
	int grid = 0, block = 0;
	CK(cuOccupancyMaxPotentialBlockSize(&grid, &block, m.scale, NULL, 0, 0));
	float a2 = 1, b2 = 0;
	void *p2[] = { &din, &dout, &a2, &b2, &n };
	CK(cuLaunchKernel(m.scale, (n + block - 1) / block, 1, 1, block, 1, 1, block * 4, NULL, p2,
			  NULL));
	CK(cuCtxSynchronize());
	printf("launch with the potential block size: ok\n");
	CUfunction coop;
	CK(cuModuleGetFunction(&coop, m.mod, "tk_coop"));
	int nb = 0, sms = 0;
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, coop, 128, 0));
	CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev0));
	int cb = nb * sms, cn = cb * 128;
	CUdeviceptr o1, o2, bar;
	size_t bsz;
	CK(cuMemAlloc(&o1, cn * 4));
	CK(cuMemAlloc(&o2, cn * 4));
	CK(cuModuleGetGlobal(&bar, &bsz, m.mod, "tk_barrier"));
	CK(cuMemsetD32(bar, 0, 1));
	unsigned gen = 1;
	void *cp[] = { &o1, &o2, &gen };
	CK(cuLaunchCooperativeKernel(coop, cb, 1, 1, 128, 1, 1, 0, NULL, cp));
	CK(cuCtxSynchronize());
	std::vector<int> ch(cn);
	CK(cuMemcpyDtoH(ch.data(), o2, cn * 4));
	long long cs = 0;
	for (int i = 0; i < cn; i++)
		cs += ch[i];
	fprintf(stderr, "FIGURE attrs cooperative_blocks=%d\n", cb);
	printf("cooperative grid of every SM full: %s\n",
	       cs == (long long)cn * (cn - 1) / 2 ? "ok" : "WRONG");
	CK(cuMemFree(o1));
	CK(cuMemFree(o2));
	CK(cuMemFree(din));
	CK(cuMemFree(dout));
	CK(cuCtxDestroy(c));
	return 0;
}

// Launch forms: `extra` buffer, cuLaunchKernelEx with attributes, cooperative with grid sync.
static int m_launch(int)
{
	init();
	CUcontext c = ctx_create(dev0);
	mod3 m = load3();
	printf("extra: %.0f\n", run_scale(m.scale, 1000, NULL, 1));
	printf("params: %.0f\n", run_scale(m.scale, 1000, NULL, 0));
	CUmodule mod = m.mod;
	CUfunction coop, clus;
	CK(cuModuleGetFunction(&coop, mod, "tk_coop"));
	CK(cuModuleGetFunction(&clus, mod, "tk_cluster"));
	int nb = 0;
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, coop, 128, 0));
	int blocks = 16; // far below SMs x nb on any GPU this runs on
	int n = blocks * 128;
	CUdeviceptr o1, o2, bar;
	size_t bsz;
	CK(cuMemAlloc(&o1, n * 4));
	CK(cuMemAlloc(&o2, n * 4));
	CK(cuModuleGetGlobal(&bar, &bsz, mod, "tk_barrier"));
	CK(cuMemsetD32(bar, 0, 1));
	for (unsigned gen = 1; gen <= 3; gen++) {
		void *params[] = { &o1, &o2, &gen };
		if (gen == 3) { // cooperative through cuLaunchKernelEx
			CUlaunchAttribute at[2];
			at[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
			at[0].value.cooperative = 1;
			at[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
			at[1].value.priority = 0;
			CUlaunchConfig cfg;
			memset(&cfg, 0, sizeof(cfg));
			cfg.gridDimX = blocks, cfg.gridDimY = 1, cfg.gridDimZ = 1;
			cfg.blockDimX = 128, cfg.blockDimY = 1, cfg.blockDimZ = 1;
			cfg.attrs = at, cfg.numAttrs = 2;
			CK(cuLaunchKernelEx(&cfg, coop, params, NULL));
		} else {
			CK(cuLaunchCooperativeKernel(coop, blocks, 1, 1, 128, 1, 1, 0, NULL, params));
		}
		CK(cuCtxSynchronize());
	}
	std::vector<int> h(n);
	CK(cuMemcpyDtoH(h.data(), o2, n * 4));
	long long s = 0;
	for (int i = 0; i < n; i++)
		s += h[i];
	printf("cooperative grid sync sum %lld (active blocks per SM > 0: %d)\n", s, nb > 0);
	// cluster dimensions
	CUlaunchAttribute at;
	at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at.value.clusterDim.x = 2, at.value.clusterDim.y = 1, at.value.clusterDim.z = 1;
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = 8, cfg.gridDimY = 1, cfg.gridDimZ = 1;
	cfg.blockDimX = 64, cfg.blockDimY = 1, cfg.blockDimZ = 1;
	cfg.attrs = &at, cfg.numAttrs = 1;
	void *p2[] = { &o1 };
	CK(cuLaunchKernelEx(&cfg, clus, p2, NULL));
	CK(cuMemcpyDtoH(h.data(), o1, 8 * 64 * 4));
	printf("cluster size seen %d %d\n", h[0], h[511]);
	CK(cuMemFree(o1));
	CK(cuMemFree(o2));
	CK(cuCtxDestroy(c));
	return 0;
}

// Graphs: stream capture of launches, a graph launched many times, the kernel node's
// parameters changed in the executable graph, and cuGraphExecUpdate.
static int m_graph(int launches)
{
	init();
	CUcontext c = ctx_create(dev0);
	mod3 m = load3();
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	int n = 1024;
	CUdeviceptr d, d2;
	CK(cuMemAlloc(&d, n * 4));
	CK(cuMemAlloc(&d2, n * 4));
	CK(cuMemsetD32(d, 0, n));
	CK(cuMemsetD32(d2, 0, n));
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	void *params[] = { &d, &n };
	CK(cuLaunchKernel(m.square, n / 256, 1, 1, 256, 1, 1, 0, s, params, NULL));
	CUgraph g;
	CK(cuStreamEndCapture(s, &g));
	CUgraphExec ge;
	CK(cuGraphInstantiate(&ge, g, 0));
	for (int i = 0; i < launches; i++)
		CK(cuGraphLaunch(ge, s));
	CK(cuStreamSynchronize(s));
	std::vector<int> h(n);
	CK(cuMemcpyDtoH(h.data(), d, n * 4));
	long long sum = 0;
	for (int i = 0; i < n; i++)
		sum += h[i];
	printf("graph %d launches: sum %lld\n", launches, sum);
	// change the node's parameters in the executable graph: it writes d2 now, half of it
	size_t nn = 0;
	CK(cuGraphGetNodes(g, NULL, &nn));
	std::vector<CUgraphNode> nodes(nn);
	CK(cuGraphGetNodes(g, nodes.data(), &nn));
	CUDA_KERNEL_NODE_PARAMS kp;
	CK(cuGraphKernelNodeGetParams(nodes[0], &kp));
	int half = n / 2;
	void *p2[] = { &d2, &half };
	kp.kernelParams = p2;
	kp.extra = NULL;
	CK(cuGraphExecKernelNodeSetParams(ge, nodes[0], &kp));
	CK(cuGraphLaunch(ge, s));
	CK(cuStreamSynchronize(s));
	CK(cuMemcpyDtoH(h.data(), d2, n * 4));
	sum = 0;
	for (int i = 0; i < n; i++)
		sum += h[i];
	printf("exec node set params: sum %lld\n", sum);
	// a second capture of the same shape, another argument: cuGraphExecUpdate
	CK(cuMemsetD32(d, 0, n));
	int quarter = n / 4;
	void *p3[] = { &d, &quarter };
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuLaunchKernel(m.square, n / 256, 1, 1, 256, 1, 1, 0, s, p3, NULL));
	CUgraph g2;
	CK(cuStreamEndCapture(s, &g2));
	CUgraphExecUpdateResultInfo info;
	CK(cuGraphExecUpdate(ge, g2, &info));
	printf("exec update result %d\n", (int)info.result);
	CK(cuGraphLaunch(ge, s));
	CK(cuStreamSynchronize(s));
	CK(cuMemcpyDtoH(h.data(), d, n * 4));
	sum = 0;
	for (int i = 0; i < n; i++)
		sum += h[i];
	printf("exec update: sum %lld\n", sum);
	CK(cuGraphExecDestroy(ge));
	CK(cuGraphDestroy(g));
	CK(cuGraphDestroy(g2));
	CK(cuMemFree(d));
	CK(cuMemFree(d2));
	CK(cuStreamDestroy(s));
	CK(cuCtxDestroy(c));
	return 0;
}

// Stream capture from several threads at once, in global, thread-local and relaxed mode (issue
// 28): cubpf's own driver calls (ring-buffer drains, map snapshots, span queries, a library's
// first launch in the context, made inside a capture) must never invalidate one.  Each round has
// two phases separated by barriers, so that the program itself makes no "unsafe" call while a
// global-mode capture runs: (1) every thread captures a graph on its own stream (a memset and two
// kernels, the library kernel's first launch in round 0), held open for 20 ms while kernels
// launched before on a stream of their own still run and make records; (2) every thread
// instantiates, launches and checks its graph.
static CUfunction spin_fn;
static CUdeviceptr spin_done;

enum { CAP_THREADS = 3 };
static pthread_barrier_t cap_barrier;
static CUcontext cap_ctx;
static CUfunction cap_square;
static CUkernel cap_lib_square;
static CUdeviceptr cap_buf[CAP_THREADS];
static long long cap_sum[CAP_THREADS][64];
static int cap_rounds;
static const CUstreamCaptureMode cap_modes[CAP_THREADS] = {
	CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
	CU_STREAM_CAPTURE_MODE_RELAXED
};

static void *capturer(void *arg)
{
	int t = (int)(long)arg, n = 4096;
	CK(cuCtxSetCurrent(cap_ctx));
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	std::vector<int> h(n);
	for (int r = 0; r < cap_rounds; r++) {
		pthread_barrier_wait(&cap_barrier); // phase 1: everyone captures
		int m = 1024 + 256 * r + 64 * t;
		CK(cuStreamBeginCapture(s, cap_modes[t]));
		CK(cuMemsetD32Async(cap_buf[t], 0, n, s));
		void *params[] = { &cap_buf[t], &m };
		CUfunction f = t == 0 && r % 2 == 0 ? (CUfunction)cap_lib_square : cap_square;
		CK(cuLaunchKernel(f, (m + 255) / 256, 1, 1, 256, 1, 1, 0, s, params, NULL));
		usleep(20000);
		CK(cuLaunchKernel(cap_square, (m + 255) / 256, 1, 1, 256, 1, 1, 0, s, params, NULL));
		CUgraph g;
		CK(cuStreamEndCapture(s, &g));
		pthread_barrier_wait(&cap_barrier); // phase 2: run and check
		CUgraphExec ge;
		CK(cuGraphInstantiate(&ge, g, 0));
		CK(cuGraphLaunch(ge, s));
		CK(cuStreamSynchronize(s));
		CK(cuMemcpyDtoH(h.data(), cap_buf[t], n * sizeof(int)));
		long long sum = 0;
		for (int i = 0; i < n; i++)
			sum += h[i];
		cap_sum[t][r] = sum;
		CK(cuGraphExecDestroy(ge));
		CK(cuGraphDestroy(g));
		pthread_barrier_wait(&cap_barrier); // nobody captures while the next spin is launched
	}
	CK(cuStreamDestroy(s));
	return NULL;
}

static int m_capture(int rounds)
{
	init();
	cap_rounds = rounds < 1 ? 1 : rounds > 64 ? 64 : rounds;
	CK(cuDevicePrimaryCtxRetain(&cap_ctx, dev0));
	CK(cuCtxSetCurrent(cap_ctx));
	mod3 m = load3();
	cap_square = m.square;
	CUlibrary lib;
	CK(cuLibraryLoadData(&lib, fatbin.data(), NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&cap_lib_square, lib, "tk_square"));
	CUmodule spin_mod;
	CK(cuModuleLoadData(&spin_mod, fatbin.data()));
	CK(cuModuleGetFunction(&spin_fn, spin_mod, "tk_spin"));
	CK(cuMemAlloc(&spin_done, sizeof(int)));
	for (int t = 0; t < CAP_THREADS; t++)
		CK(cuMemAlloc(&cap_buf[t], 4096 * sizeof(int)));
	CUstream busy;
	CK(cuStreamCreate(&busy, CU_STREAM_NON_BLOCKING));
	pthread_barrier_init(&cap_barrier, NULL, CAP_THREADS + 1);
	pthread_t th[CAP_THREADS];
	for (int t = 0; t < CAP_THREADS; t++)
		pthread_create(&th[t], NULL, capturer, (void *)(long)t);
	for (int r = 0; r < cap_rounds; r++) {
		// kernels that run (and end, making records) while the others capture
		unsigned long long ns = 2000000;
		void *params[] = { &ns, &spin_done };
		for (int k = 0; k < 8; k++)
			CK(cuLaunchKernel(spin_fn, 4, 1, 1, 32, 1, 1, 0, busy, params, NULL));
		pthread_barrier_wait(&cap_barrier); // phase 1
		pthread_barrier_wait(&cap_barrier); // phase 2
		CK(cuStreamSynchronize(busy));
		pthread_barrier_wait(&cap_barrier);
	}
	for (int t = 0; t < CAP_THREADS; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < CAP_THREADS; t++)
		for (int r = 0; r < cap_rounds; r++)
			printf("capture thread %d (mode %d) round %d: sum %lld\n", t, (int)cap_modes[t],
			       r, cap_sum[t][r]);
	CK(cuStreamDestroy(busy));
	for (int t = 0; t < CAP_THREADS; t++)
		CK(cuMemFree(cap_buf[t]));
	CK(cuMemFree(spin_done));
	CK(cuModuleUnload(spin_mod));
	CK(cuModuleUnload(m.mod));
	CK(cuLibraryUnload(lib));
	CK(cuDevicePrimaryCtxRelease(dev0));
	printf("done\n");
	return 0;
}

// The process ends while a kernel still runs: exit() from another thread, SIGINT, SIGTERM.

static void launch_spin(unsigned long long ns)
{
	void *params[] = { &ns, &spin_done };
	CK(cuLaunchKernel(spin_fn, 4, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
}

static void *exiter(void *)
{
	usleep(200000);
	printf("exiting from a thread\n");
	fflush(stdout);
	exit(3);
}

static int m_ending(const char *how)
{
	init();
	CUcontext c = ctx_create(dev0);
	(void)c;
	mod3 m = load3();
	CK(cuModuleGetFunction(&spin_fn, m.mod, "tk_spin"));
	CK(cuMemAlloc(&spin_done, 4));
	printf("square %lld\n", run_square(m.square, 500, NULL));
	fflush(stdout);
	launch_spin(3000000000ull); // 3 s
	if (!strcmp(how, "exit")) {
		pthread_t t;
		pthread_create(&t, NULL, exiter, NULL);
		pause();
	}
	usleep(200000);
	raise(!strcmp(how, "sigint") ? SIGINT : SIGTERM);
	pause();
	return 0;
}

// fork() after cuInit, a child that does not use CUDA.
static int m_fork(int)
{
	init();
	CUcontext c = ctx_create(dev0);
	mod3 m = load3();
	long long before = run_square(m.square, 600, NULL);
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		printf("child %d\n", 6 * 7);
		fflush(stdout);
		_exit(5);
	}
	int st = 0;
	waitpid(p, &st, 0);
	printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	printf("square before %lld after %lld\n", before, run_square(m.square, 600, NULL));
	CK(cuCtxDestroy(c));
	return 0;
}

// cuInit with no device visible: the driver's own error reaches the application.
static int m_noinit(int)
{
	CUresult r = cuInit(0);
	const char *s = "?";
	cuGetErrorName(r, &s);
	printf("cuInit: %s (%d)\n", s, (int)r);
	int n = -1;
	r = cuDeviceGetCount(&n);
	printf("cuDeviceGetCount: %d count %d\n", (int)r, n);
	return r == CUDA_SUCCESS ? 0 : 2;
}

// cudaMemcpyToSymbol on a kernel of the program itself (the runtime's lazy library).
__device__ int rt_sym[4];
__global__ void rt_add(int *out)
{
	out[threadIdx.x] = rt_sym[threadIdx.x] + (int)threadIdx.x;
}

static int m_symbol(int)
{
	int h[4] = { 10, 20, 30, 40 }, back[4] = { 0 };
	if (cudaMemcpyToSymbol(rt_sym, h, sizeof(h)) != cudaSuccess)
		return printf("cudaMemcpyToSymbol failed\n"), 1;
	int *d;
	cudaMalloc(&d, sizeof(h));
	rt_add<<<1, 4>>>(d);
	cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost);
	int sym[4];
	cudaMemcpyFromSymbol(sym, rt_sym, sizeof(sym));
	printf("symbol out %d %d %d %d sym %d %d\n", back[0], back[1], back[2], back[3], sym[0],
	       sym[3]);
	cudaFree(d);
	return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s MODE [N]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *mode = argv[1];
	int n = argc > 2 ? atoi(argv[2]) : 0;
	if (strcmp(mode, "noinit") && strcmp(mode, "symbol"))
		read_fatbin(argv[0]);
	if (!strcmp(mode, "repro"))
		return m_repro(n);
	if (!strcmp(mode, "ctxloop"))
		return m_ctxloop(n ? n : 1000);
	if (!strcmp(mode, "threads"))
		return m_threads(n);
	if (!strcmp(mode, "primary"))
		return m_primary(n ? n : 6);
	if (!strcmp(mode, "modules"))
		return m_modules(n ? n : 100);
	if (!strcmp(mode, "library"))
		return m_library(n);
	if (!strcmp(mode, "attrs"))
		return m_attrs(n);
	if (!strcmp(mode, "launch"))
		return m_launch(n);
	if (!strcmp(mode, "graph"))
		return m_graph(n ? n : 1000);
	if (!strcmp(mode, "exit") || !strcmp(mode, "sigint") || !strcmp(mode, "sigterm"))
		return m_ending(mode);
	if (!strcmp(mode, "fork"))
		return m_fork(n);
	if (!strcmp(mode, "capture"))
		return m_capture(n ? n : 8);
	if (!strcmp(mode, "noinit"))
		return m_noinit(n);
	if (!strcmp(mode, "symbol"))
		return m_symbol(n);
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}
