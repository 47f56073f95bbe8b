// tools_known: kernels with answers known in advance, for tests/gpu/t_tools.sh.  Each part
// prints a checksum of its results (must not change under cubpf) and "expect" lines:
//   hist:  tools_hist, a grid-stride loop over 1000 elements launched 4 times with 8, 6, 4, 2
//          blocks of 64 threads: thread g runs it 4 times if g < 128, 3 if g < 256, 2 if g < 384,
//          1 if g < 512 (threadhist: 128 threads each).
//   slow:  tools_slow, 2 blocks of 64 threads; thread 37 of block 1 spins ~200 us before leaving
//          (kernelretsnoop: the slowest lane).
//   chain: tools_chain_a 5 times (10 x 128 threads) on stream 1, tools_chain_b 3 times
//          (3 x 256 threads) on stream 2, interleaved (kcount, launchlate: one sample a launch).
//   mem:   tools_mem, 64 blocks x 256 threads: one 4-byte global load and store per thread, one
//          4-byte shared store and load per thread (memtrace: 65536 bytes each).
// Usage: tools_known [hist|slow|chain|mem|all]
#include <cstdint>
#include <cstdio>
#include <cstring>

__global__ void tools_hist(float *x, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = x[i] * 0.5f + 1.0f;
}

__global__ void tools_slow(int *out)
{
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	if (blockIdx.x == 1 && threadIdx.x == 37) {
		long long start = clock64();
		while (clock64() - start < 400000) /* ~200 us at 2 GHz */
			;
	}
	out[t] = t * 3;
}

__global__ void tools_chain_a(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f; }
__global__ void tools_chain_b(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] *= 2.0f; }

__global__ void tools_mem(const float *a, float *b)
{
	__shared__ float s[256];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	s[threadIdx.x] = a[i];
	__syncthreads();
	b[i] = s[(threadIdx.x + 1) & 255] + 1.0f;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h = 0xcbf29ce484222325ull)
{
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

#include "check.h"

static int part_hist()
{
	static float x[1000];
	for (int i = 0; i < 1000; i++)
		x[i] = i * 0.25f;
	float *dx;
	CHECK(cudaMalloc(&dx, sizeof(x)));
	CHECK(cudaMemcpy(dx, x, sizeof(x), cudaMemcpyHostToDevice));
	const int blocks[4] = {8, 6, 4, 2};
	for (int j = 0; j < 4; j++)
		tools_hist<<<blocks[j], 64>>>(dx, 1000);
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(x, dx, sizeof(x), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(dx));
	printf("hist checksum %016llx\n", (unsigned long long)fnv(x, sizeof(x)));
	for (int c = 4; c >= 1; c--)
		printf("expect threadhist executions=%d threads=128\n", c);
	printf("expect threadhist threads=512 min=1 max=4\n");
	return 0;
}

static int part_slow()
{
	static int out[128];
	int *d;
	CHECK(cudaMalloc(&d, sizeof(out)));
	tools_slow<<<2, 64>>>(d);
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(out, d, sizeof(out), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	printf("slow checksum %016llx\n", (unsigned long long)fnv(out, sizeof(out)));
	printf("expect kernelretsnoop slowest block=(1,0,0) thread=(37,0,0) exits=128\n");
	return 0;
}

static int part_chain()
{
	static float a[1280], b[768];
	for (int i = 0; i < 1280; i++)
		a[i] = i;
	for (int i = 0; i < 768; i++)
		b[i] = i * 0.5f;
	float *da, *db;
	cudaStream_t s1, s2;
	CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CHECK(cudaMalloc(&da, sizeof(a)));
	CHECK(cudaMalloc(&db, sizeof(b)));
	CHECK(cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(db, b, sizeof(b), cudaMemcpyHostToDevice));
	for (int j = 0; j < 5; j++) {
		tools_chain_a<<<10, 128, 0, s1>>>(da);
		if (j < 3)
			tools_chain_b<<<3, 256, 0, s2>>>(db);
	}
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(a, da, sizeof(a), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(b, db, sizeof(b), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(da));
	CHECK(cudaFree(db));
	CHECK(cudaStreamDestroy(s1));
	CHECK(cudaStreamDestroy(s2));
	printf("chain checksum %016llx %016llx\n", (unsigned long long)fnv(a, sizeof(a)),
	       (unsigned long long)fnv(b, sizeof(b)));
	printf("expect kcount tools_chain_a launches=5 threads=6400\n");
	printf("expect kcount tools_chain_b launches=3 threads=2304\n");
	return 0;
}

static int part_mem()
{
	const int n = 64 * 256;
	static float a[n], b[n];
	for (int i = 0; i < n; i++)
		a[i] = i * 0.125f;
	float *da, *db;
	CHECK(cudaMalloc(&da, sizeof(a)));
	CHECK(cudaMalloc(&db, sizeof(b)));
	CHECK(cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice));
	tools_mem<<<64, 256>>>(da, db);
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(b, db, sizeof(b), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(da));
	CHECK(cudaFree(db));
	printf("mem checksum %016llx\n", (unsigned long long)fnv(b, sizeof(b)));
	printf("expect memtrace global load=65536 global store=65536 shared load=65536 "
	       "shared store=65536\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	int all = !strcmp(what, "all"), rc = 0;
	if (all || !strcmp(what, "hist"))
		rc |= part_hist();
	if (all || !strcmp(what, "slow"))
		rc |= part_slow();
	if (all || !strcmp(what, "chain"))
		rc |= part_chain();
	if (all || !strcmp(what, "mem"))
		rc |= part_mem();
	return rc;
}
