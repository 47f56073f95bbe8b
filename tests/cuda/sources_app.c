/* sources_app: the harness of tests/gpu/t_ptx_sources.sh.  Loads live_src_add one way, runs it
 * on N elements and checks c = a + b:
 *   sources_app cubin FILE     cuModuleLoadData of a cubin (nvcc -cubin -lineinfo)
 *   sources_app link FILE.ptx  cuLinkCreate / cuLinkAddData(PTX) / cuLinkComplete, then
 *                              cuModuleLoadData of a copy of the linked cubin (as Numba does)
 *   sources_app nvrtc FILE.cu  NVRTC (dlopen'ed libnvrtc) with -lineinfo -arch=sm_XX, then
 *                              cuModuleLoadData of nvrtcGetCUBIN's cubin (as CuPy does)
 * Prints "expect live_src_add threads=T" (the launch's threads) and "result ok" or a failure.
 * Plain C against the driver API, linked with the toolkit's stub libcuda.so. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 100000
#define BLOCK 256

#define CK(x)                                                                                     \
	do {                                                                                      \
		CUresult r_ = (x);                                                                \
		if (r_ != CUDA_SUCCESS) {                                                         \
			fprintf(stderr, "%s:%d: %s: error %d\n", __FILE__, __LINE__, #x, (int)r_);  \
			exit(1);                                                                  \
		}                                                                                 \
	} while (0)

static char *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = calloc(1, (size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		exit(1);
	fclose(f);
	*size = (size_t)n;
	return buf;
}

static void *linked(const char *ptx, size_t len)
{
	CUlinkState st;
	void *out;
	size_t size;
	CK(cuLinkCreate(0, NULL, NULL, &st));
	CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx, len + 1, "sources.ptx", 0, NULL, NULL));
	CK(cuLinkComplete(st, &out, &size));
	void *copy = malloc(size);
	memcpy(copy, out, size);
	CK(cuLinkDestroy(st));
	return copy;
}

typedef int (*create_fn)(void **, const char *, const char *, int, const char **, const char **);
typedef int (*compile_fn)(void *, int, const char **);
typedef int (*size_fn)(void *, size_t *);
typedef int (*get_fn)(void *, char *);

static void *nvrtc_cubin(const char *src, int sm)
{
	void *h = dlopen("libnvrtc.so.13", RTLD_NOW);
	if (!h)
		h = dlopen("libnvrtc.so", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "no libnvrtc: %s\n", dlerror());
		exit(2);
	}
	void *prog;
	char arch[32];
	snprintf(arch, sizeof(arch), "-arch=sm_%d", sm);
	const char *opts[] = {arch, "-lineinfo"};
	if (((create_fn)dlsym(h, "nvrtcCreateProgram"))(&prog, src, "sources.cu", 0, NULL, NULL) ||
	    ((compile_fn)dlsym(h, "nvrtcCompileProgram"))(prog, 2, opts)) {
		fprintf(stderr, "nvrtc failed\n");
		exit(1);
	}
	size_t n;
	((size_fn)dlsym(h, "nvrtcGetCUBINSize"))(prog, &n);
	char *cubin = malloc(n);
	((get_fn)dlsym(h, "nvrtcGetCUBIN"))(prog, cubin);
	return cubin;
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	size_t size;
	int major, minor;
	if (argc != 3) {
		fprintf(stderr, "usage: sources_app cubin|link|nvrtc FILE\n");
		return 2;
	}
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	char *file = slurp(argv[2], &size);
	const void *image = !strcmp(argv[1], "cubin") ? file
			  : !strcmp(argv[1], "link") ? linked(file, size)
			  : nvrtc_cubin(file, major * 10 + minor);
	CK(cuModuleLoadData(&mod, image));
	CK(cuModuleGetFunction(&fn, mod, "live_src_add"));
	float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)), *c = malloc(N * sizeof(float));
	for (int i = 0; i < N; i++)
		a[i] = (float)i, b[i] = 2.0f * (float)i;
	CUdeviceptr da, db, dc;
	CK(cuMemAlloc(&da, N * sizeof(float)));
	CK(cuMemAlloc(&db, N * sizeof(float)));
	CK(cuMemAlloc(&dc, N * sizeof(float)));
	CK(cuMemcpyHtoD(da, a, N * sizeof(float)));
	CK(cuMemcpyHtoD(db, b, N * sizeof(float)));
	int n = N;
	void *args[] = {&da, &db, &dc, &n};
	unsigned grid = (N + BLOCK - 1) / BLOCK;
	CK(cuLaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoH(c, dc, N * sizeof(float)));
	int bad = 0;
	for (int i = 0; i < N; i++)
		bad += c[i] != 3.0f * (float)i;
	printf("expect live_src_add threads=%u\n", grid * BLOCK);
	printf("result %s (%d wrong)\n", bad ? "FAILED" : "ok", bad);
	CK(cuModuleUnload(mod));
	CK(cuDevicePrimaryCtxRelease(dev));
	return bad != 0;
}
