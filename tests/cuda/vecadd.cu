// The sample program of `make demo`: vector add plus a reduction, checked on the host.
// Prints a checksum so that runs with and without cubpf can be compared byte for byte.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void block_sum(const float *in, float *out, int n)
{
	__shared__ float part[256];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	part[threadIdx.x] = i < n ? in[i] : 0.0f;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			part[threadIdx.x] += part[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = part[0];
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : (1 << 20);
	int iters = argc > 2 ? atoi(argv[2]) : 3;
	const int threads = 256, blocks = (n + threads - 1) / threads;
	size_t bytes = (size_t)n * sizeof(float);
	float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes);
	float *sums = (float *)malloc(blocks * sizeof(float));
	for (int i = 0; i < n; i++) {
		a[i] = (float)(i % 1000) * 0.5f;
		b[i] = (float)(i % 7);
	}
	float *da, *db, *dc, *ds;
	CHECK(cudaMalloc(&da, bytes));
	CHECK(cudaMalloc(&db, bytes));
	CHECK(cudaMalloc(&dc, bytes));
	CHECK(cudaMalloc(&ds, blocks * sizeof(float)));
	CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
	for (int it = 0; it < iters; it++) {
		vec_add<<<blocks, threads>>>(da, db, dc, n);
		block_sum<<<blocks, threads>>>(dc, ds, n);
	}
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(sums, ds, blocks * sizeof(float), cudaMemcpyDeviceToHost));
	double total = 0, expect = 0;
	for (int i = 0; i < blocks; i++)
		total += sums[i];
	for (int i = 0; i < n; i++)
		expect += a[i] + b[i];
	printf("vecadd: n=%d blocks=%d launches=%d sum=%.1f expected=%.1f %s\n", n, blocks, 2 * iters,
	       total, expect, total == expect ? "OK" : "MISMATCH");
	cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(ds);
	free(a); free(b); free(sums);
	return total == expect ? 0 : 1;
}
