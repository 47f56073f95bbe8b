// tools_rbmicro: what each step of the GPU ring buffer's producer costs (tests/bench/b_rbmicro.sh).
// A kernel of THREADS threads (256 a block) in which every warp, at its end, does one of:
//   host_batch     writes a full warp's batch of 48-byte records field-major (6 warp-wide 8-byte
//                  stores = 6 x 256 contiguous bytes, then a 16-byte header) to pinned host memory,
//                  a system fence, a commit word: what kernelretsnoop's records cost on the GPU;
//   host_nofence   the same without the fence;
//   dev_batch      the same into device memory (fence at GPU scope);
//   host_read      the leader reads one word of pinned host memory (a tail over PCIe);
//   host_atomic    the leader adds to a word of pinned host memory (a drop count, system scope);
//   dev_atomic     the leader adds to a word of device memory;
//   none           nothing (the kernel's own cost).
// Batches go to consecutive 1664-byte slots of a 64 MiB region (wrapping), as lanes would.
// Prints one line per mode: ms per launch (median of REPS) and GB/s of batch bytes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check.h"

enum { NONE, HOST_BATCH, HOST_NOFENCE, DEV_BATCH, HOST_READ, HOST_ATOMIC, DEV_ATOMIC };
static const char *names[] = { "none", "host_batch", "host_nofence", "dev_batch",
			       "host_read", "host_atomic", "dev_atomic" };

#define SLOT 1664u
#define REGION (64u << 20)
#define WORDS 6

__global__ void work(float *x, int n, int mode, unsigned long long *ring, unsigned long long *word)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += 1.0f;
	unsigned lane = threadIdx.x & 31, warp = (unsigned)i >> 5;
	switch (mode) {
	case HOST_BATCH:
	case HOST_NOFENCE:
	case DEV_BATCH: {
		unsigned long long *b = ring + (size_t)(warp % (REGION / SLOT)) * (SLOT / 8);
		for (int w = 0; w < WORDS; w++)
			b[2 + w * 32 + lane] = (unsigned long long)i * 7 + w;
		__syncwarp();
		if (lane == 0) {
			b[0] = 32ull | (48ull << 32);
			if (mode == HOST_BATCH)
				__threadfence_system();
			else if (mode == DEV_BATCH)
				__threadfence();
			*(volatile unsigned long long *)&b[1] = warp + 1;
		}
		break;
	}
	case HOST_READ:
		if (lane == 0 && *(volatile unsigned long long *)&word[warp % 4096] == 12345)
			x[0] = 0;
		break;
	case HOST_ATOMIC:
		if (lane == 0)
			atomicAdd_system(&word[warp % 4096], 32ull);
		break;
	case DEV_ATOMIC:
		if (lane == 0)
			atomicAdd(&word[warp % 4096], 32ull);
		break;
	}
}

int main(int argc, char **argv)
{
	const int n = argc > 1 ? atoi(argv[1]) : 1 << 20, reps = argc > 2 ? atoi(argv[2]) : 50;
	float *x;
	unsigned long long *hring, *hword, *dring, *dword;
	CHECK(cudaMalloc(&x, n * sizeof(float)));
	CHECK(cudaMemset(x, 0, n * sizeof(float)));
	CHECK(cudaHostAlloc(&hring, REGION, cudaHostAllocMapped | cudaHostAllocPortable));
	CHECK(cudaHostAlloc(&hword, 4096 * 8, cudaHostAllocMapped | cudaHostAllocPortable));
	memset(hring, 0, REGION);
	memset(hword, 0, 4096 * 8);
	CHECK(cudaMalloc(&dring, REGION));
	CHECK(cudaMalloc(&dword, 4096 * 8));
	unsigned long long *hring_d, *hword_d;
	CHECK(cudaHostGetDevicePointer(&hring_d, hring, 0));
	CHECK(cudaHostGetDevicePointer(&hword_d, hword, 0));
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	const int blocks = (n + 255) / 256;
	const double batch_bytes = (double)((n + 31) / 32) * (16 + WORDS * 256);
	for (int mode = NONE; mode <= DEV_ATOMIC; mode++) {
		unsigned long long *ring = mode == DEV_BATCH ? dring : hring_d;
		unsigned long long *word = mode == DEV_ATOMIC ? dword : hword_d;
		work<<<blocks, 256>>>(x, n, mode, ring, word);
		CHECK(cudaDeviceSynchronize());
		std::vector<float> t;
		for (int r = 0; r < reps; r++) {
			float ms;
			CHECK(cudaEventRecord(e0));
			work<<<blocks, 256>>>(x, n, mode, ring, word);
			CHECK(cudaEventRecord(e1));
			CHECK(cudaEventSynchronize(e1));
			CHECK(cudaEventElapsedTime(&ms, e0, e1));
			t.push_back(ms);
		}
		std::sort(t.begin(), t.end());
		float med = t[t.size() / 2];
		bool batch = mode == HOST_BATCH || mode == HOST_NOFENCE || mode == DEV_BATCH;
		printf("rbmicro %-13s %9.4f ms  %7.2f GB/s of batches\n", names[mode], med,
		       batch ? batch_bytes / (med * 1e-3) / 1e9 : 0.0);
	}
	return 0;
}
