// Fixture: a kernel calling non-inlined device functions (.func with parameters and results).
__device__ __noinline__ float scale(float x, float k)
{
	return x * k + 1.0f;
}

__device__ __noinline__ void store_pair(float *p, float a, float b)
{
	p[0] = a;
	p[1] = b;
}

extern "C" __global__ void calls(const float *in, float *out, float k, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float v = in[i];
		store_pair(out + 2 * i, scale(v, k), scale(v, -k));
	}
}
