// tools_fentry: a device function that stays a .func (__noinline__), called a known number of
// times with known arguments, for tests/gpu/t_fentry.sh (fentry/fexit, issue 32) with
// tests/ptx/probes/func.bpf.c.  fe_kernel: G blocks of B threads, each thread calls
// fe_mix(i, c + 2^33) for c = 0..C-1 (i its global index).  It prints a checksum of the results
// (must not change under cubpf) and one line
//   expect calls=N sum0=S0 sum1=S1
// with N = G*B*C calls, S0 = C * sum(i) and S1 = G*B * sum(c + 2^33): what the probe's
// fcounts[0], [1] (entries, returns), [2], [4] (params[0] at entry and return) and [3]
// (params[1]) must hold.
#include <cstdint>
#include <cstdio>

#include "check.h"

__device__ __noinline__ unsigned fe_mix(unsigned a, unsigned long long b)
{
	if (a % 7 == 3) // two source returns (nvcc may join them: fexit sits on every ret)
		return a ^ (unsigned)b;
	return a * 2654435761u + (unsigned)(b >> 3);
}

__global__ void fe_kernel(unsigned *out, int calls)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x, acc = 0;
	for (int c = 0; c < calls; c++)
		acc += fe_mix(i, (unsigned long long)c + (1ull << 33));
	out[i] = acc;
}

int main()
{
	const unsigned G = 64, B = 256, C = 10, T = G * B;
	unsigned *d = nullptr;
	CHECK(cudaMalloc(&d, T * sizeof(unsigned)));
	fe_kernel<<<G, B>>>(d, (int)C);
	CHECK(cudaGetLastError());
	static unsigned h[T];
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	unsigned long long sum = 0;
	for (unsigned i = 0; i < T; i++)
		sum = sum * 31 + h[i];
	printf("checksum %llu\n", sum);
	unsigned long long s0 = (unsigned long long)C * ((unsigned long long)T * (T - 1) / 2);
	unsigned long long s1 = (unsigned long long)T * ((unsigned long long)C * (C - 1) / 2 +
							  (unsigned long long)C * (1ull << 33));
	unsigned long long sr = 0; /* fe_mix's results, summed as fexit's ctx->retval */
	for (unsigned i = 0; i < T; i++)
		for (unsigned c = 0; c < C; c++) {
			unsigned long long b = c + (1ull << 33);
			sr += i % 7 == 3 ? i ^ (unsigned)b : i * 2654435761u + (unsigned)(b >> 3);
		}
	printf("expect calls=%llu sum0=%llu sum1=%llu sumret=%llu\n", (unsigned long long)T * C, s0,
	       s1, sr);
	CHECK(cudaFree(d));
	return 0;
}
