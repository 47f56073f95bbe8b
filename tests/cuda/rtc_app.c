/* tests/cuda/rtc_app.c: kernels compiled while the program runs, loaded three ways, for the
 * framework tests (tests/gpu/t_frameworks.sh):
 *   rtc_app nvrtc     NVRTC to a cubin (-arch=sm_XY, nvrtcGetCUBIN), cuModuleLoadData
 *   rtc_app jitlink   NVRTC to PTX, nvJitLink to a cubin, cuModuleLoadData
 *   rtc_app culink    NVRTC to PTX, the driver's linker (cuLinkCreate/AddData/Complete)
 * Each launches rtc_add twice and rtc_scale three times on 256 x 256 threads (n = 65536 floats)
 * and prints the result's checksum and what the counts must be (kcount threads per kernel,
 * memtrace bytes per space and op), so that a test can check a probe's figures exactly.
 * Built against the toolkit's libnvrtc.so.13 and libnvJitLink.so.13 (RUNPATH, which
 * LD_LIBRARY_PATH overrides: cubpf's drop-ins come first under cubpf run).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#define N 65536
#define BLOCK 256

static const char source[] =
	"extern \"C\" __global__ void rtc_add(const float *a, const float *b, float *c, int n)\n"
	"{\n"
	"	int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"	if (i < n)\n"
	"		c[i] = a[i] + b[i];\n"
	"}\n"
	"extern \"C\" __global__ void rtc_scale(float *c, float s, int n)\n"
	"{\n"
	"	int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"	if (i < n)\n"
	"		c[i] = c[i] * s;\n"
	"}\n";

#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_ = "?"; \
	cuGetErrorString(r_, &s_); fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_); \
	return -1; } } while (0)
#define RTC(x) do { nvrtcResult r_ = (x); if (r_ != NVRTC_SUCCESS) { fprintf(stderr, \
	"%s:%d: %s: %s\n", __FILE__, __LINE__, #x, nvrtcGetErrorString(r_)); return -1; } } while (0)
#define JL(x) do { nvJitLinkResult r_ = (x); if (r_ != NVJITLINK_SUCCESS) { fprintf(stderr, \
	"%s:%d: %s: %d\n", __FILE__, __LINE__, #x, (int)r_); return -1; } } while (0)

/* NVRTC: the program compiled for sm_XY (cubin) or compute_XY (PTX); *out is malloc'd. */
static int compile(int cc, int want_cubin, char **out, size_t *size)
{
	nvrtcProgram prog;
	char arch[32];
	snprintf(arch, sizeof(arch), "-arch=%s_%d", want_cubin ? "sm" : "compute", cc);
	const char *opts[] = { arch, "--std=c++17" };
	RTC(nvrtcCreateProgram(&prog, source, "rtc_app.cu", 0, NULL, NULL));
	nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
	if (r != NVRTC_SUCCESS) {
		size_t n = 0;
		nvrtcGetProgramLogSize(prog, &n);
		char *log = calloc(1, n + 1);
		if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
			fprintf(stderr, "%s\n", log);
		free(log);
		RTC(r);
	}
	if (want_cubin)
		RTC(nvrtcGetCUBINSize(prog, size));
	else
		RTC(nvrtcGetPTXSize(prog, size));
	*out = malloc(*size);
	if (!*out)
		return -1;
	if (want_cubin)
		RTC(nvrtcGetCUBIN(prog, *out));
	else
		RTC(nvrtcGetPTX(prog, *out));
	RTC(nvrtcDestroyProgram(&prog));
	return 0;
}

static int link_jitlink(int cc, const char *ptx, size_t size, CUmodule *mod)
{
	nvJitLinkHandle h;
	char arch[32];
	snprintf(arch, sizeof(arch), "-arch=sm_%d", cc);
	const char *opts[] = { arch };
	JL(nvJitLinkCreate(&h, 1, opts));
	JL(nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx, size, "rtc_app.ptx"));
	JL(nvJitLinkComplete(h));
	size_t n;
	JL(nvJitLinkGetLinkedCubinSize(h, &n));
	void *cubin = malloc(n);
	if (!cubin)
		return -1;
	JL(nvJitLinkGetLinkedCubin(h, cubin));
	JL(nvJitLinkDestroy(&h));
	CU(cuModuleLoadData(mod, cubin));
	free(cubin);
	return 0;
}

static int link_driver(const char *ptx, size_t size, CUmodule *mod)
{
	CUlinkState st;
	void *cubin;
	size_t n;
	CU(cuLinkCreate(0, NULL, NULL, &st));
	CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx, size, "rtc_app.ptx", 0, NULL, NULL));
	CU(cuLinkComplete(st, &cubin, &n));
	CU(cuModuleLoadData(mod, cubin));
	CU(cuLinkDestroy(st));
	return 0;
}

static int load(const char *mode, int cc, CUmodule *mod)
{
	char *img;
	size_t size;
	int cubin = !strcmp(mode, "nvrtc");
	if (compile(cc, cubin, &img, &size) != 0)
		return -1;
	int rc = -1;
	if (cubin) {
		CU(cuModuleLoadData(mod, img));
		rc = 0;
	} else if (!strcmp(mode, "jitlink")) {
		rc = link_jitlink(cc, img, size, mod);
	} else {
		rc = link_driver(img, size, mod);
	}
	free(img);
	return rc;
}

static int run(const char *mode)
{
	CUdevice dev;
	CUcontext ctx;
	int major, minor;
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CUmodule mod;
	if (load(mode, major * 10 + minor, &mod) != 0)
		return -1;
	CUfunction add, scale;
	CU(cuModuleGetFunction(&add, mod, "rtc_add"));
	CU(cuModuleGetFunction(&scale, mod, "rtc_scale"));
	static float a[N], b[N], c[N];
	for (int i = 0; i < N; i++) {
		a[i] = (float)(i % 1000);
		b[i] = (float)((i * 7) % 333);
	}
	CUdeviceptr da, db, dc;
	CU(cuMemAlloc(&da, sizeof(a)));
	CU(cuMemAlloc(&db, sizeof(b)));
	CU(cuMemAlloc(&dc, sizeof(c)));
	CU(cuMemcpyHtoD(da, a, sizeof(a)));
	CU(cuMemcpyHtoD(db, b, sizeof(b)));
	int n = N;
	float s = 0.5f;
	void *add_args[] = { &da, &db, &dc, &n };
	void *scale_args[] = { &dc, &s, &n };
	for (int i = 0; i < 2; i++)
		CU(cuLaunchKernel(add, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, add_args, NULL));
	for (int i = 0; i < 3; i++)
		CU(cuLaunchKernel(scale, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, scale_args, NULL));
	CU(cuMemcpyDtoH(c, dc, sizeof(c)));
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += c[i];
	printf("rtc_app %s: checksum %.3f\n", mode, sum);
	/* what the probes must count: threads per kernel, bytes per space and op */
	printf("expect kcount rtc_add 2 %d\n", 2 * N);
	printf("expect kcount rtc_scale 3 %d\n", 3 * N);
	printf("expect memtrace global load %d\n", (2 * 2 + 3) * N * 4);
	printf("expect memtrace global store %d\n", (2 + 3) * N * 4);
	CU(cuMemFree(da));
	CU(cuMemFree(db));
	CU(cuMemFree(dc));
	CU(cuModuleUnload(mod));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "nvrtc") && strcmp(argv[1], "jitlink") &&
			  strcmp(argv[1], "culink"))) {
		fprintf(stderr, "usage: rtc_app nvrtc|jitlink|culink\n");
		return 2;
	}
	return run(argv[1]) == 0 ? 0 : 1;
}
