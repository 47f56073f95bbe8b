// tools_bench: the workloads of tests/bench/b_tools.sh.  vecadd over 2^26 floats and a
// compute-bound kernel (2^20 threads, 4096 dependent FMAs each), each launched once to warm up
// (cubpf instruments at the first launch) then REPS times between CUDA events.
// A barrier-heavy reduction (2^26 floats, blocks of 256 threads, 8 rounds of a shared-memory
// tree: 64 barriers per block) for syncwait.  Prints "vecadd_ms X", "compute_ms Y" and
// "reduce_ms Z" (mean per launch) and a checksum.
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

__global__ void bench_reduce(const float *a, float *out, int rounds)
{
	__shared__ float s[256];
	unsigned t = threadIdx.x;
	float v = a[blockIdx.x * blockDim.x + t], total = 0;
	for (int r = 0; r < rounds; r++) {
		s[t] = v + r;
		__syncthreads();
		for (unsigned k = 128; k > 0; k >>= 1) {
			if (t < k)
				s[t] += s[t + k];
			__syncthreads();
		}
		total += s[0];
		__syncthreads();
	}
	if (t == 0)
		out[blockIdx.x] = total;
}

#include "check.h"

// Mean milliseconds per launch of REPS launches of `launch` after one warm-up launch.
template <typename F> static float timed(F launch, int reps, cudaEvent_t e0, cudaEvent_t e1)
{
	float ms;
	launch();
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaEventRecord(e0));
	for (int r = 0; r < reps; r++)
		launch();
	CHECK(cudaEventRecord(e1));
	CHECK(cudaEventSynchronize(e1));
	CHECK(cudaEventElapsedTime(&ms, e0, e1));
	return ms / reps;
}

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
	printf("vecadd_ms %.4f\n", timed([&] { bench_vecadd<<<n / 256, 256>>>(a, b, c, n); }, reps, e0, e1));
	printf("compute_ms %.4f\n", timed([&] { bench_compute<<<m / 256, 256>>>(x, 4096); }, reps, e0, e1));
	printf("reduce_ms %.4f\n", timed([&] { bench_reduce<<<n / 256, 256>>>(a, c, 8); }, reps, e0, e1));
	float h, r;
	CHECK(cudaMemcpy(&h, x, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(&r, c + 1000, sizeof(r), cudaMemcpyDeviceToHost));
	printf("checksum %.6f %.1f\n", h, r);
	return 0;
}
