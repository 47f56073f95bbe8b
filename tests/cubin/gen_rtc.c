/* gen_rtc: builds the NVRTC and nvJitLink fixtures of tests/cubin at test time, with this
 * machine's toolkit libraries (libnvrtc, libnvJitLink), the way CuPy, JAX and Numba-like
 * programs make their cubins in-process:
 *   nvrtc_lineinfo.cubin   nvrtcGetCUBIN of a program compiled with -lineinfo -arch=sm_90
 *   nvrtc_arch.cubin       the same with -arch=sm_90 only (no line info)
 *   nvrtc_arch.ptx         nvrtcGetPTX of that program (NVRTC offers both)
 *   nvjitlink.cubin        nvJitLink of one PTX input with -lineinfo -arch=sm_90
 *   nvjitlink2.cubin       nvJitLink of two PTX inputs calling each other (-rdc NVRTC PTX)
 * Usage: gen_rtc OUTDIR.  Exits 1 with a message on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvJitLink.h>
#include <nvrtc.h>

static const char *src_a =
	"extern \"C\" __device__ float rtc_scale(float x);\n"
	"extern \"C\" __global__ void rtc_saxpy(float a, const float *x, float *y, int n)\n"
	"{\n"
	"	int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"	if (i < n)\n"
	"		y[i] = a * x[i] + y[i];\n"
	"}\n"
	"extern \"C\" __global__ void rtc_count(unsigned *c, const int *v, int n)\n"
	"{\n"
	"	int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"	if (i < n && v[i] > 0)\n"
	"		atomicAdd(c, 1u);\n"
	"}\n";

/* Two translation units for the two-input link: each calls the other's device function. */
static const char *src_b1 =
	"extern \"C\" __device__ float rtc_twice(float x);\n"
	"extern \"C\" __device__ float rtc_plus1(float x) { return x + 1.0f; }\n"
	"extern \"C\" __global__ void rtc_k1(float *y) { y[threadIdx.x] = rtc_twice(y[threadIdx.x]); }\n";
static const char *src_b2 =
	"extern \"C\" __device__ float rtc_plus1(float x);\n"
	"extern \"C\" __device__ float rtc_twice(float x) { return 2.0f * x; }\n"
	"extern \"C\" __global__ void rtc_k2(float *y) { y[threadIdx.x] = rtc_plus1(y[threadIdx.x]); }\n";

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "gen_rtc: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(1);
}

static void write_file(const char *dir, const char *name, const void *data, size_t size)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f))
		die("cannot write", path);
}

static nvrtcProgram compile(const char *src, const char **opts, int nopts)
{
	nvrtcProgram p;
	if (nvrtcCreateProgram(&p, src, "rtc.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
		die("nvrtcCreateProgram", NULL);
	if (nvrtcCompileProgram(p, nopts, opts) != NVRTC_SUCCESS) {
		size_t n = 0;
		nvrtcGetProgramLogSize(p, &n);
		char *log = calloc(1, n + 1);
		if (log)
			nvrtcGetProgramLog(p, log);
		die("nvrtcCompileProgram", log);
	}
	return p;
}

static void rtc_cubin(const char *dir, const char *name, const char **opts, int nopts,
		      const char *ptx_name)
{
	nvrtcProgram p = compile(src_a, opts, nopts);
	size_t n = 0;
	if (nvrtcGetCUBINSize(p, &n) != NVRTC_SUCCESS || !n)
		die("nvrtcGetCUBINSize", name);
	char *buf = malloc(n);
	if (!buf || nvrtcGetCUBIN(p, buf) != NVRTC_SUCCESS)
		die("nvrtcGetCUBIN", name);
	write_file(dir, name, buf, n);
	free(buf);
	if (ptx_name) {
		if (nvrtcGetPTXSize(p, &n) != NVRTC_SUCCESS || !(buf = malloc(n)) ||
		    nvrtcGetPTX(p, buf) != NVRTC_SUCCESS)
			die("nvrtcGetPTX", ptx_name);
		write_file(dir, ptx_name, buf, strlen(buf));
		free(buf);
	}
	nvrtcDestroyProgram(&p);
}

/* PTX of a source (NVRTC, relocatable, line info from .loc). */
static char *rtc_ptx(const char *src, int rdc)
{
	const char *opts[] = {"-arch=compute_90", "-lineinfo", "-rdc=true"};
	nvrtcProgram p = compile(src, opts, rdc ? 3 : 2);
	size_t n = 0;
	char *buf = NULL;
	if (nvrtcGetPTXSize(p, &n) != NVRTC_SUCCESS || !(buf = malloc(n)) ||
	    nvrtcGetPTX(p, buf) != NVRTC_SUCCESS)
		die("nvrtcGetPTX", NULL);
	nvrtcDestroyProgram(&p);
	return buf;
}

static void jit_link(const char *dir, const char *name, char **ptx, int n)
{
	const char *opts[] = {"-arch=sm_90", "-lineinfo"};
	nvJitLinkHandle h;
	if (nvJitLinkCreate(&h, 2, opts) != NVJITLINK_SUCCESS)
		die("nvJitLinkCreate", name);
	for (int i = 0; i < n; i++)
		if (nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx[i], strlen(ptx[i]), "in.ptx") !=
		    NVJITLINK_SUCCESS)
			die("nvJitLinkAddData", name);
	if (nvJitLinkComplete(h) != NVJITLINK_SUCCESS) {
		size_t ln = 0;
		nvJitLinkGetErrorLogSize(h, &ln);
		char *log = calloc(1, ln + 1);
		if (log)
			nvJitLinkGetErrorLog(h, log);
		die("nvJitLinkComplete", log);
	}
	size_t size = 0;
	char *buf = NULL;
	if (nvJitLinkGetLinkedCubinSize(h, &size) != NVJITLINK_SUCCESS || !(buf = malloc(size)) ||
	    nvJitLinkGetLinkedCubin(h, buf) != NVJITLINK_SUCCESS)
		die("nvJitLinkGetLinkedCubin", name);
	write_file(dir, name, buf, size);
	free(buf);
	nvJitLinkDestroy(&h);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		die("usage: gen_rtc OUTDIR", NULL);
	const char *lineinfo[] = {"-arch=sm_90", "-lineinfo"};
	const char *arch[] = {"-arch=sm_90"};
	rtc_cubin(argv[1], "nvrtc_lineinfo.cubin", lineinfo, 2, NULL);
	rtc_cubin(argv[1], "nvrtc_arch.cubin", arch, 1, "nvrtc_arch.ptx");
	char *one[] = {rtc_ptx(src_a, 0)};
	jit_link(argv[1], "nvjitlink.cubin", one, 1);
	char *two[] = {rtc_ptx(src_b1, 1), rtc_ptx(src_b2, 1)};
	jit_link(argv[1], "nvjitlink2.cubin", two, 2);
	free(one[0]);
	free(two[0]);
	free(two[1]);
	return 0;
}
