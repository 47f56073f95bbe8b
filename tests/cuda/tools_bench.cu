// tools_bench: the workloads of tests/bench/b_tools.sh.  vecadd over 2^26 floats and a
// compute-bound kernel (2^20 threads, 4096 dependent FMAs each), each launched once to warm up
// (cubpf instruments at the first launch) then REPS times between CUDA events.
// Prints "vecadd_ms X" and "compute_ms Y" (mean per launch) and a checksum.
#include <cstdio>
#include <cstdlib>

__global__ void bench_vecadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void bench_compute(float *x, int iters)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float v = x[i];
	for (int k = 0; k < iters; k++)
		v = v * 0.999f + 0.5f;
	x[i] = v;
}

#include "check.h"

int main(int argc, char **argv)
{
	const int n = 1 << 26, m = 1 << 20, reps = argc > 1 ? atoi(argv[1]) : 20;
	float *a, *b, *c, *x;
	CHECK(cudaMalloc(&a, n * sizeof(float)));
	CHECK(cudaMalloc(&b, n * sizeof(float)));
	CHECK(cudaMalloc(&c, n * sizeof(float)));
	CHECK(cudaMalloc(&x, m * sizeof(float)));
	CHECK(cudaMemset(a, 0, n * sizeof(float)));
	CHECK(cudaMemset(b, 0, n * sizeof(float)));
	CHECK(cudaMemset(x, 0, m * sizeof(float)));
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	float ms;
	bench_vecadd<<<n / 256, 256>>>(a, b, c, n);
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaEventRecord(e0));
	for (int r = 0; r < reps; r++)
		bench_vecadd<<<n / 256, 256>>>(a, b, c, n);
	CHECK(cudaEventRecord(e1));
	CHECK(cudaEventSynchronize(e1));
	CHECK(cudaEventElapsedTime(&ms, e0, e1));
	printf("vecadd_ms %.4f\n", ms / reps);
	bench_compute<<<m / 256, 256>>>(x, 4096);
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaEventRecord(e0));
	for (int r = 0; r < reps; r++)
		bench_compute<<<m / 256, 256>>>(x, 4096);
	CHECK(cudaEventRecord(e1));
	CHECK(cudaEventSynchronize(e1));
	CHECK(cudaEventElapsedTime(&ms, e0, e1));
	printf("compute_ms %.4f\n", ms / reps);
	float h;
	CHECK(cudaMemcpy(&h, x, sizeof(h), cudaMemcpyDeviceToHost));
	printf("checksum %.6f\n", h);
	return 0;
}
