// Fixture: the barriers and fences nvcc emits for sm_80 (syncprobe sites, issue 32):
// __syncthreads (bar.sync 0), __syncthreads_count/_or (bar.red), __syncwarp (bar.warp.sync),
// named barriers with a literal and a register id and a thread count (bar.sync, bar.arrive,
// barrier.sync.aligned), __threadfence/_block (fence/membar), an mbarrier test_wait loop.
#include <cstdint>

__global__ void sync_reduce(const float *in, float *out, int *cnt)
{
	__shared__ float s[256];
	unsigned t = threadIdx.x;
	s[t] = in[blockIdx.x * blockDim.x + t];
	__syncthreads();
	for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
		if (t < k)
			s[t] += s[t + k];
		__syncthreads();
	}
	int n = __syncthreads_count(s[t] > 0.0f);
	if (__syncthreads_or(t == 3))
		__syncwarp();
	if (t == 0) {
		out[blockIdx.x] = s[0];
		__threadfence();
		atomicAdd(cnt, n);
	}
	__threadfence_block();
}

__global__ void sync_named(int *out, int id)
{
	unsigned t = threadIdx.x;
	if (t < 64) {
		out[t] = (int)t;
		asm volatile("bar.arrive 1, 128;" ::: "memory");
	} else {
		asm volatile("bar.sync 1, 128;" ::: "memory");
		out[t] = out[t - 64] + 1;
	}
	asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(blockDim.x) : "memory");
	asm volatile("barrier.sync.aligned 2;" ::: "memory");
}

__global__ void sync_mbarrier(int *out)
{
	__shared__ uint64_t bar;
	unsigned a = (unsigned)__cvta_generic_to_shared(&bar);
	if (threadIdx.x == 0)
		asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(a), "r"(blockDim.x) : "memory");
	__syncthreads();
	uint64_t st;
	asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(st) : "r"(a) : "memory");
	unsigned done = 0;
	while (!done)
		asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.shared.b64 p, [%1], %2;\n\t"
			     "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(a), "l"(st) : "memory");
	out[threadIdx.x] = (int)done;
}
