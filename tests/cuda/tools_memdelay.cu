// tools_memdelay: a memory-bound and a compute-bound kernel, each launched 6 times, for
// tests/gpu/t_memdelay.sh (memdelay -n NS, issue 32): delaying every global load must slow
// md_stream (one load per element, 2^24 elements: the loads are its time) and barely md_compute
// (one load per thread, then 2^16 dependent multiply-adds, one wave of blocks).  Prints a
// checksum of each result (must not change under cubpf).
#include <cstdint>
#include <cstdio>

#include "check.h"

__global__ void md_stream(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = x[i] * 2.0f + 1.0f;
}

__global__ void md_compute(const float *x, float *y)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float v = x[i];
#pragma unroll 1
	for (int k = 0; k < (1 << 16); k++)
		v = v * 0.9999f + 0.0001f;
	y[i] = v;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h = 0xcbf29ce484222325ull)
{
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

int main()
{
	const int n = 1 << 24, cn = 132 * 256;
	float *x, *y, *cy;
	CHECK(cudaMalloc(&x, n * sizeof(float)));
	CHECK(cudaMalloc(&y, n * sizeof(float)));
	CHECK(cudaMalloc(&cy, cn * sizeof(float)));
	static float h[1 << 24];
	for (int i = 0; i < n; i++)
		h[i] = (float)(i % 1000) * 0.001f;
	CHECK(cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice));
	for (int r = 0; r < 6; r++) {
		md_stream<<<n / 256, 256>>>(x, y, n);
		md_compute<<<cn / 256, 256>>>(x, cy);
	}
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(h, y, n * sizeof(float), cudaMemcpyDeviceToHost));
	printf("stream checksum %016llx\n", (unsigned long long)fnv(h, n * sizeof(float)));
	CHECK(cudaMemcpy(h, cy, cn * sizeof(float), cudaMemcpyDeviceToHost));
	printf("compute checksum %016llx\n", (unsigned long long)fnv(h, cn * sizeof(float)));
	return 0;
}
