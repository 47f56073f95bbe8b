// Fixture source for the cubin/ tests: kernels with known parameter lists, shared memory and
// an extern "C" name, built with many -gencode and --compress-mode mixes by tests/cubin/module.mk.
// test_fixtures.c checks every kernel below by name, parameter count and parameter sizes.
#include <cstdint>

struct Pair { double a; int b; };   // 16 bytes, aligned to 8

extern "C" __global__ void cubin_axpy(float a, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i];
}

// 4 KiB of static shared memory.
extern "C" __global__ void cubin_block_sum(const float *in, float *out, int n)
{
	__shared__ float part[1024];
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

// C++ (mangled) name, parameters of sizes 16, 1, 2, 8.
__global__ void cubin_mixed(Pair p, char c, short s, int64_t *out)
{
	out[threadIdx.x] = (int64_t)p.a + p.b + c + s;
}

// No parameters at all.
extern "C" __global__ void cubin_noargs(void)
{
}

// A template kernel, instantiated once.
template <typename T> __global__ void cubin_fill(T *p, T v, unsigned n)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = v;
}
template __global__ void cubin_fill<double>(double *, double, unsigned);
