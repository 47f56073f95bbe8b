// Fixture: shared-memory tree reduction with bar.sync; a template kernel.
template <unsigned BS>
__global__ void reduce_sum(const float *in, float *out, unsigned n)
{
	__shared__ float sdata[BS];
	unsigned tid = threadIdx.x;
	unsigned i = blockIdx.x * BS + tid;
	sdata[tid] = i < n ? in[i] : 0.0f;
	__syncthreads();
	for (unsigned s = BS / 2; s > 0; s >>= 1) {
		if (tid < s)
			sdata[tid] += sdata[tid + s];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = sdata[0];
}
template __global__ void reduce_sum<256>(const float *, float *, unsigned);
