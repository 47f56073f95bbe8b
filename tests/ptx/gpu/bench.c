/* Probe overhead benchmark (tests/bench/b_ptx.sh): native kernels vs the same PTX with empty
 * entry+exit probes vs probes that read the thread index and %globaltimer and do some stack
 * arithmetic.  All variants run in this one process, interleaved launch by launch, each launch
 * timed with CUDA events; the figure is the median of RUNS launches after WARMUP.
 * usage: ptx_bench GPU_DIR [RUNS] */
#include <stdint.h>

#include "tests/ptx/gpu/common.h"

/* work_notimer and work_timer split the work probe's cost (diagnostics, no target) */
#define NV 5
static const char *variant[NV] = {"native", "empty", "work", "work_notimer", "work_timer"};

struct kern {
	const char *name;
	unsigned grid[2], block[2];
	int n;
	size_t bytes[3];
};

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: ptx_bench GPU_DIR [RUNS]\n");
		return 2;
	}
	int runs = argc > 2 ? atoi(argv[2]) : 31, warmup = 5;
	gpu_init();
	CUmodule mod[NV];
	CUdeviceptr sink;
	CK(cuMemAlloc(&sink, 4096));
	CK(cuMemsetD8(sink, 0, 4096));
	for (int v = 0; v < NV; v++) {
		char path[1024];
		snprintf(path, sizeof(path), v ? "%s/ptx_bench.%s.ptx" : "%s/ptx_bench.ptx", argv[1],
			 variant[v]);
		mod[v] = gpu_load_ptx(path);
		gpu_bind_map(mod[v], 0, sink);
	}
	const int nv = 1 << 26, nm = 4096;
	struct kern ks[2] = {
		{"bench_vec_add", {nv / 256, 1}, {256, 1}, nv, {4ull * nv, 4ull * nv, 4ull * nv}},
		{"bench_matmul", {nm / 32, nm / 32}, {32, 32}, nm,
		 {4ull * nm * nm, 4ull * nm * nm, 4ull * nm * nm}},
	};
	printf("runs %d (median), warm-up %d, variants interleaved launch by launch\n", runs, warmup);
	printf("%-14s %-12s %5s %6s %11s %7s\n", "kernel", "probes", "regs", "local", "median_ms",
	       "ratio");
	int bad = 0;
	for (int k = 0; k < 2; k++) {
		CUdeviceptr d[3];
		for (int i = 0; i < 3; i++) {
			CK(cuMemAlloc(&d[i], ks[k].bytes[i]));
			CK(cuMemsetD32(d[i], 0x3f800000u, ks[k].bytes[i] / 4)); /* 1.0f */
		}
		CUfunction fn[NV];
		int regs[NV], local[NV];
		for (int v = 0; v < NV; v++) {
			CK(cuModuleGetFunction(&fn[v], mod[v], ks[k].name));
			CK(cuFuncGetAttribute(&regs[v], CU_FUNC_ATTRIBUTE_NUM_REGS, fn[v]));
			CK(cuFuncGetAttribute(&local[v], CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn[v]));
		}
		int n = ks[k].n;
		void *args[] = {&d[0], &d[1], &d[2], &n};
		CUevent e0, e1;
		CK(cuEventCreate(&e0, 0));
		CK(cuEventCreate(&e1, 0));
		float *ms = calloc((size_t)NV * runs, sizeof(float));
		for (int r = -warmup; r < runs; r++)
			for (int v = 0; v < NV; v++) {
				CK(cuEventRecord(e0, NULL));
				CK(cuLaunchKernel(fn[v], ks[k].grid[0], ks[k].grid[1], 1, ks[k].block[0],
						  ks[k].block[1], 1, 0, NULL, args, NULL));
				CK(cuEventRecord(e1, NULL));
				CK(cuEventSynchronize(e1));
				if (r >= 0)
					CK(cuEventElapsedTime(&ms[v * runs + r], e0, e1));
			}
		float med[NV];
		for (int v = 0; v < NV; v++) {
			qsort(ms + v * runs, runs, sizeof(float), cmp_float);
			med[v] = ms[v * runs + runs / 2];
			printf("%-14s %-12s %5d %6d %11.4f %6.3fx\n", ks[k].name, variant[v], regs[v],
			       local[v], med[v], med[v] / med[0]);
			printf("RESULT ptx_bench %s %s regs=%d ratio=%.3f\n", ks[k].name, variant[v],
			       regs[v], med[v] / med[0]);
		}
		printf("%-14s target empty <= 1.02x: %s; work <= 1.05x: %s\n", ks[k].name,
		       med[1] / med[0] <= 1.02f ? "met" : "MISSED", med[2] / med[0] <= 1.05f ? "met" : "MISSED");
		bad += med[1] / med[0] > 1.02f || med[2] / med[0] > 1.05f;
		free(ms);
		for (int i = 0; i < 3; i++)
			CK(cuMemFree(d[i]));
	}
	printf("ptx bench: %s\n", bad ? "some targets missed" : "all targets met");
	return 0;
}
