// tools_blocks: thread blocks whose threads leave in every way a kernel can, for
// tests/gpu/t_blocks.sh (blockprobe/blockretprobe, issue 32) and the blocklat tool.  Each part
// prints a checksum of its results (must not change under cubpf) and one line
//   expect blocks=B linear_sum=S
// where B is the number of blocks launched and S the sum over launches of n(n+1)/2 for n blocks
// (each block counted by its linear index + 1, as tests/ptx/probes/block.bpf.c does).
//   early:  blk_early, 37 x 96: a third of the threads return at once, then the rest of every
//           fifth block but 11 threads; blk_warps, 16 x 128: warps 1 and 2 leave at once, warp 3
//           after a spin, warp 0 after work; blk_exit, 8 x 64: odd lanes leave through `exit`
//           in divergent code; blk_3d, (4,3,2) x (8,4,2): threads with tid.y odd return early;
//           blk_one, 5 x 256: every thread but 200 leaves at once, 200 spins ~50 us.
//   tail:   blk_tail, 264 x 128: block b works about b % 8 + 1 units, block 263 about 40
//           (a straggler the blocklat tool must name).
// Usage: tools_blocks [early|tail|all]
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "check.h"

__device__ static void spin(long long cycles)
{
	long long start = clock64();
	while (clock64() - start < cycles)
		;
}

__global__ void blk_early(int *out)
{
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	if (threadIdx.x % 3 == 0)
		return;
	out[t] = t;
	if (blockIdx.x % 5 == 0 && threadIdx.x > 10)
		return;
	out[t] += 1;
}

__global__ void blk_warps(int *out)
{
	int w = threadIdx.x / 32, t = blockIdx.x * blockDim.x + threadIdx.x;
	if (w == 1 || w == 2)
		return;
	if (w == 3)
		spin(20000);
	out[t] = t * 2;
}

__global__ void blk_exit(int *out)
{
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	if (threadIdx.x & 1) {
		out[t] = -t;
		asm volatile("exit;");
	}
	out[t] = t;
}

__global__ void blk_3d(int *out)
{
	int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
	int i = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
	if (threadIdx.y & 1)
		return;
	out[b * 64 + i] = b;
}

__global__ void blk_one(int *out)
{
	if (threadIdx.x != 200)
		return;
	spin(100000);
	out[blockIdx.x] = blockIdx.x;
}

__global__ void blk_tail(float *x, int units)
{
	int n = blockIdx.x == gridDim.x - 1 ? 40 : blockIdx.x % 8 + 1;
	float v = x[blockIdx.x * blockDim.x + threadIdx.x];
	for (int k = 0; k < n * units; k++)
		v = v * 0.999f + 0.5f;
	x[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h = 0xcbf29ce484222325ull)
{
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t blocks_total, linear_sum;

static void launched(uint64_t n)
{
	blocks_total += n;
	linear_sum += n * (n + 1) / 2;
}

static int part_early()
{
	const int N = 1 << 14;
	int *d, h[N];
	CHECK(cudaMalloc(&d, N * sizeof(int)));
	CHECK(cudaMemset(d, 0, N * sizeof(int)));
	blk_early<<<37, 96>>>(d);
	launched(37);
	blk_warps<<<16, 128>>>(d);
	launched(16);
	blk_exit<<<8, 64>>>(d);
	launched(8);
	blk_3d<<<dim3(4, 3, 2), dim3(8, 4, 2)>>>(d);
	launched(24);
	blk_one<<<5, 256>>>(d);
	launched(5);
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	printf("early checksum %016llx\n", (unsigned long long)fnv(h, sizeof(h)));
	return 0;
}

static int part_tail()
{
	const int B = 264, T = 128;
	static float h[B * T];
	for (int i = 0; i < B * T; i++)
		h[i] = (float)(i % 97);
	float *d;
	CHECK(cudaMalloc(&d, sizeof(h)));
	CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
	blk_tail<<<B, T>>>(d, 2000);
	launched(B);
	CHECK(cudaGetLastError());
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	printf("tail checksum %016llx\n", (unsigned long long)fnv(h, sizeof(h)));
	return 0;
}

int main(int argc, char **argv)
{
	const char *part = argc > 1 ? argv[1] : "all";
	bool all = !strcmp(part, "all");
	if ((all || !strcmp(part, "early")) && part_early())
		return 1;
	if ((all || !strcmp(part, "tail")) && part_tail())
		return 1;
	printf("expect blocks=%llu linear_sum=%llu\n", (unsigned long long)blocks_total,
	       (unsigned long long)linear_sum);
	return 0;
}
