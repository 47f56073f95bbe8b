// tests/cuda/rdc_app.cu: a program built with -rdc=true from two objects calling each other's
// device functions (rdc_lib.cu); the registered image is linked SASS.  Launches rdc_kernel four
// times on 128 x 256 threads and prints the checksum and the counts a probe must find.
#include <cstdio>

#include "check.h"

#define N 32768
#define BLOCK 256

__device__ float rdc_twice_plus_one(float x);

__device__ __noinline__ float rdc_plus_one(float x)
{
	return x + 1.0f;
}

__global__ void rdc_kernel(const float *a, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = rdc_twice_plus_one(a[i]);
}

int main()
{
	static float a[N], c[N];
	for (int i = 0; i < N; i++)
		a[i] = (float)(i % 777);
	float *da, *dc;
	CHECK(cudaMalloc(&da, sizeof(a)));
	CHECK(cudaMalloc(&dc, sizeof(c)));
	CHECK(cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice));
	for (int i = 0; i < 4; i++)
		rdc_kernel<<<N / BLOCK, BLOCK>>>(da, dc, N);
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(c, dc, sizeof(c), cudaMemcpyDeviceToHost));
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += c[i];
	printf("rdc_app: checksum %.3f\n", sum);
	printf("expect kcount _Z10rdc_kernelPKfPfi 4 %d\n", 4 * N);
	printf("expect memtrace global load %d\n", 4 * N * 4);
	printf("expect memtrace global store %d\n", 4 * N * 4);
	CHECK(cudaFree(da));
	CHECK(cudaFree(dc));
	return 0;
}
