// tools_sync: barriers and fences with counts known in advance, for tests/gpu/t_sync.sh
// (syncprobe, issue 32) and the syncwait tool.  Each part prints a checksum of its results (must
// not change under cubpf) and "expect" lines with the number of threads that pass each kind of
// barrier (enum cubpf_sync_kind) and the sum of the barrier ids they name:
//   reduce: sync_reduce, 64 x 256: one __syncthreads after the load and one per halving step
//           (8), one __syncthreads_count, one __syncwarp, one __threadfence by thread 0;
//           sync_named, 8 x 128: bar.sync 1 (literal id) and bar.sync with id 2 in a register.
//   late:   sync_late, 32 x 256: warp 7 of every block spins ~100 us before a __syncthreads, so
//           the other seven warps wait about that long there (syncwait: the site's wait).
// Usage: tools_sync [reduce|late|all]
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "check.h"

__global__ void sync_reduce(const float *in, float *out, int *cnt)
{
	__shared__ float s[256];
	unsigned t = threadIdx.x;
	s[t] = in[blockIdx.x * blockDim.x + t];
	__syncthreads();
#pragma unroll 1
	for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
		if (t < k)
			s[t] += s[t + k];
		__syncthreads();
	}
	int n = __syncthreads_count(s[t] > 0.0f);
	__syncwarp();
	if (t == 0) {
		out[blockIdx.x] = s[0];
		__threadfence();
		atomicAdd(cnt, n);
	}
}

__global__ void sync_named(int *out, int id)
{
	unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
	out[t] = (int)t;
	asm volatile("bar.sync 1, 128;" ::: "memory");
	out[t] += 1;
	asm volatile("bar.sync %0;" ::"r"(id) : "memory");
	out[t] += 2;
}

__global__ void sync_late(float *x)
{
	unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
	if (threadIdx.x / 32 == 7) {
		long long start = clock64();
		while (clock64() - start < 200000) /* ~100 us at 2 GHz */
			;
	}
	__syncthreads();
	x[t] = x[t] * 2.0f + 1.0f;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h = 0xcbf29ce484222325ull)
{
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t bar_threads, bar_ids, red_threads, warp_threads, fence_threads;

static int part_reduce()
{
	const int B = 64, T = 256;
	static float h[B * T], o[B];
	for (int i = 0; i < B * T; i++)
		h[i] = (float)((i * 7) % 13) - 6.0f;
	float *d, *dout;
	int *cnt, *named, hn[8 * 128], c;
	CHECK(cudaMalloc(&d, sizeof(h)));
	CHECK(cudaMalloc(&dout, sizeof(o)));
	CHECK(cudaMalloc(&cnt, sizeof(int)));
	CHECK(cudaMalloc(&named, sizeof(hn)));
	CHECK(cudaMemset(cnt, 0, sizeof(int)));
	CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
	sync_reduce<<<B, T>>>(d, dout, cnt);
	bar_threads += 9ull * B * T;
	red_threads += (uint64_t)B * T;
	warp_threads += (uint64_t)B * T;
	fence_threads += B;
	sync_named<<<8, 128>>>(named, 2);
	bar_threads += 2ull * 8 * 128;
	bar_ids += 3ull * 8 * 128;
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(o, dout, sizeof(o), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(&c, cnt, sizeof(int), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(hn, named, sizeof(hn), cudaMemcpyDeviceToHost));
	printf("reduce checksum %016llx count %d named %016llx\n",
	       (unsigned long long)fnv(o, sizeof(o)), c, (unsigned long long)fnv(hn, sizeof(hn)));
	CHECK(cudaFree(d));
	CHECK(cudaFree(dout));
	CHECK(cudaFree(cnt));
	CHECK(cudaFree(named));
	return 0;
}

static int part_late()
{
	const int B = 32, T = 256;
	static float h[B * T];
	for (int i = 0; i < B * T; i++)
		h[i] = (float)i;
	float *d;
	CHECK(cudaMalloc(&d, sizeof(h)));
	CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
	sync_late<<<B, T>>>(d);
	bar_threads += (uint64_t)B * T;
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	printf("late checksum %016llx\n", (unsigned long long)fnv(h, sizeof(h)));
	return 0;
}

int main(int argc, char **argv)
{
	const char *part = argc > 1 ? argv[1] : "all";
	bool all = !strcmp(part, "all");
	if ((all || !strcmp(part, "reduce")) && part_reduce())
		return 1;
	if ((all || !strcmp(part, "late")) && part_late())
		return 1;
	printf("expect bar=%llu bar_ids=%llu red=%llu warp=%llu fence=%llu\n",
	       (unsigned long long)bar_threads, (unsigned long long)bar_ids,
	       (unsigned long long)red_threads, (unsigned long long)warp_threads,
	       (unsigned long long)fence_threads);
	return 0;
}
