// live_count: kernels with thread counts known in advance, for tests/gpu/t_live_count.sh.
//   live_vecadd: 40 blocks x 256 threads over 10000 elements (240 threads return early), once;
//   live_stride: a grid-stride loop, 7 blocks x 96 threads over 5000 elements, launched three
//                times on two streams.
// It prints a checksum of every result (which must not change under cubpf) and the entry and
// exit counts a probe must see ("expect" lines).
#include <cstdint>
#include <cstdio>
#include <cstring>

__global__ void live_vecadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	c[i] = a[i] + b[i];
}

__global__ void live_stride(float *x, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = x[i] * 1.5f + 1.0f;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

#include "check.h"

int main()
{
	const int n = 10000, m = 5000;
	static float a[n], b[n], c[n], x[m], y[m];
	for (int i = 0; i < n; i++) {
		a[i] = i * 0.5f;
		b[i] = 1.0f / (i + 1);
	}
	for (int i = 0; i < m; i++)
		x[i] = y[i] = i * 0.25f;
	float *da, *db, *dc, *dx, *dy;
	CHECK(cudaMalloc(&da, sizeof(a)));
	CHECK(cudaMalloc(&db, sizeof(b)));
	CHECK(cudaMalloc(&dc, sizeof(c)));
	CHECK(cudaMalloc(&dx, sizeof(x)));
	CHECK(cudaMalloc(&dy, sizeof(y)));
	CHECK(cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(db, b, sizeof(b), cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(dx, x, sizeof(x), cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(dy, y, sizeof(y), cudaMemcpyHostToDevice));
	cudaStream_t s1, s2;
	CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	live_vecadd<<<40, 256>>>(da, db, dc, n);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	live_stride<<<7, 96, 0, s1>>>(dx, m);
	live_stride<<<7, 96, 0, s2>>>(dy, m);
	live_stride<<<7, 96, 0, s1>>>(dx, m);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(c, dc, sizeof(c), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(x, dx, sizeof(x), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(y, dy, sizeof(y), cudaMemcpyDeviceToHost));
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv(c, sizeof(c), h);
	h = fnv(x, sizeof(x), h);
	h = fnv(y, sizeof(y), h);
	printf("c[9999]=%.6f x[4999]=%.6f y[4999]=%.6f checksum=%016llx\n", c[9999], x[4999], y[4999],
	       (unsigned long long)h);
	printf("expect live_vecadd threads=%d launches=1\n", 40 * 256);
	printf("expect live_stride threads=%d launches=3\n", 3 * 7 * 96);
	return 0;
}
