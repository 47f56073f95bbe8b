// sass_gemm: cublasSgemm on N x N matrices (default 1024), for tests/gpu/t_sass.sh and
// tests/bench/b_sass.sh.  cuBLAS ships its GEMM kernels as SASS only: cubpf reaches them through
// the Sanitizer backend alone.  Prints a checksum of C (which must not change under cubpf) and,
// with a second argument R > 0, the mean time of R timed GEMMs after 3 warm-up ones.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>

#include "check.h"

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

int main(int argc, char **argv)
{
	const int n = argc > 1 ? atoi(argv[1]) : 1024, reps = argc > 2 ? atoi(argv[2]) : 0;
	const size_t bytes = (size_t)n * n * sizeof(float);
	std::vector<float> a((size_t)n * n), b((size_t)n * n), c((size_t)n * n);
	for (size_t i = 0; i < a.size(); i++) {
		a[i] = (float)(i % 13) * 0.25f;
		b[i] = (float)(i % 7) * 0.5f;
	}
	float *da, *db, *dc;
	CHECK(cudaMalloc(&da, bytes));
	CHECK(cudaMalloc(&db, bytes));
	CHECK(cudaMalloc(&dc, bytes));
	CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
	cublasHandle_t h;
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
		printf("error: cublasCreate\n");
		return 1;
	}
	const float one = 1.0f, zero = 0.0f;
	for (int i = 0; i < 1 + (reps > 0 ? 3 : 0); i++)
		if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc,
				n) != CUBLAS_STATUS_SUCCESS) {
			printf("error: cublasSgemm\n");
			return 1;
		}
	if (reps > 0) {
		cudaEvent_t t0, t1;
		CHECK(cudaEventCreate(&t0));
		CHECK(cudaEventCreate(&t1));
		CHECK(cudaEventRecord(t0));
		for (int i = 0; i < reps; i++)
			cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero,
				    dc, n);
		CHECK(cudaEventRecord(t1));
		CHECK(cudaEventSynchronize(t1));
		float ms = 0;
		CHECK(cudaEventElapsedTime(&ms, t0, t1));
		printf("ms_per_gemm %.5f reps %d\n", ms / reps, reps);
	}
	CHECK(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
	printf("sgemm n %d checksum %016llx c[0] %.3f c[last] %.3f\n", n,
	       (unsigned long long)fnv(c.data(), bytes), c[0], c[c.size() - 1]);
	cublasDestroy(h);
	return 0;
}
