/* Shared bits of the ptx GPU harnesses (driver API only; built with nvcc here). */
#ifndef CUBPF_TESTS_PTX_GPU_COMMON_H
#define CUBPF_TESTS_PTX_GPU_COMMON_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                         \
	do {                                                                             \
		CUresult rc_ = (call);                                                   \
		if (rc_ != CUDA_SUCCESS) {                                               \
			const char *s_ = NULL;                                           \
			cuGetErrorString(rc_, &s_);                                      \
			fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
				s_ ? s_ : "?");                                          \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

/* Checks of the harnesses: "ok" or "FAIL" and the description, failures counted for the exit
 * status. */
static int gpu_failures __attribute__((unused));

#define CHECK(cond, ...)                      \
	do {                                  \
		if (cond) {                   \
			printf("ok    ");         \
		} else {                      \
			printf("FAIL  ");         \
			gpu_failures++;       \
		}                             \
		printf(__VA_ARGS__);          \
		printf("\n");                 \
	} while (0)

static inline char *gpu_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *d = (char *)malloc((size_t)n + 1);
	if (!d || fread(d, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	d[n] = 0;
	fclose(f);
	return d;
}

/* Loads a PTX file; on a JIT error prints the log and exits. */
static inline CUmodule gpu_load_ptx(const char *path)
{
	char *text = gpu_read_file(path);
	static char log[16384];
	CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *val[2] = {log, (void *)(size_t)sizeof(log)};
	CUmodule m;
	log[0] = 0;
	CUresult rc = cuModuleLoadDataEx(&m, text, 2, opt, val);
	if (rc != CUDA_SUCCESS) {
		const char *s = NULL;
		cuGetErrorString(rc, &s);
		fprintf(stderr, "loading %s failed: %s\n%s\n", path, s ? s : "?", log);
		exit(1);
	}
	free(text);
	return m;
}

/* Points __cubpf_map_<i> of module m at dev (no-op when the module has no such symbol). */
static inline int gpu_bind_map(CUmodule m, unsigned i, CUdeviceptr dev)
{
	char name[64];
	snprintf(name, sizeof(name), "__cubpf_map_%u", i);
	CUdeviceptr sym;
	size_t size;
	if (cuModuleGetGlobal(&sym, &size, m, name) != CUDA_SUCCESS)
		return -1;
	unsigned long long v = (unsigned long long)dev;
	CK(cuMemcpyHtoD(sym, &v, sizeof(v)));
	return 0;
}

static inline CUcontext gpu_init(void)
{
	CUdevice dev;
	CUcontext ctx;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	char name[256];
	CK(cuDeviceGetName(name, sizeof(name), dev));
	int drv = 0;
	cuDriverGetVersion(&drv);
	printf("device: %s, driver API %d\n", name, drv);
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	return ctx;
}

#endif
