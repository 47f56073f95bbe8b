// tools_instr: kernels whose dynamic PTX instruction counts are known from their PTX and their
// trip counts (tests/gpu/t_instr.sh computes them from the PTX nvcc emits for this file,
// build/gpu/tools_instr.ptx): a straight-line kernel (every thread issues every instruction),
// a loop run ITERS times by every thread (a do-while: no guard), and a branch taken by 8 lanes
// of each warp.  Every launch is a whole number of full warps.  Prints a checksum of each
// result, so that a run under cubpf must print the same.
#include <cstdio>
#include <cstdlib>

#include "check.h"

__global__ void instr_straight(float *x)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	x[i] = x[i] * 2.0f + 1.0f;
}

__global__ void instr_loop(float *x, int iters)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float v = x[i];
	int k = 0;
#pragma unroll 1
	do {
		v = v * 0.999f + 0.5f;
		k++;
	} while (k < iters);
	x[i] = v;
}

__global__ void instr_diverge(float *x)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if ((threadIdx.x & 31) < 8)
		x[i] = sqrtf(x[i]) * 3.0f;
}

static double checksum(const float *d, int n)
{
	float *h = (float *)malloc(n * sizeof(float));
	CHECK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
	double s = 0;
	for (int i = 0; i < n; i++)
		s += h[i];
	free(h);
	return s;
}

int main(int argc, char **argv)
{
	const int blocks = 64, threads = 256, n = blocks * threads;
	const int iters = argc > 1 ? atoi(argv[1]) : 100;
	float *x;
	CHECK(cudaMalloc(&x, n * sizeof(float)));
	CHECK(cudaMemset(x, 0, n * sizeof(float)));
	instr_straight<<<blocks, threads>>>(x);
	CHECK(cudaDeviceSynchronize());
	printf("straight %.3f\n", checksum(x, n));
	instr_loop<<<blocks, threads>>>(x, iters);
	CHECK(cudaDeviceSynchronize());
	printf("loop %.3f\n", checksum(x, n));
	instr_diverge<<<blocks, threads>>>(x);
	CHECK(cudaDeviceSynchronize());
	printf("diverge %.3f\n", checksum(x, n));
	printf("expect threads=%d warps=%d iters=%d\n", n, n / 32, iters);
	CHECK(cudaFree(x));
	return 0;
}
