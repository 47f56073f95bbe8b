// Second object of the -rdc program of tests/gpu/t_ptx_sources.sh (see sources_rdc.cu).
extern __device__ float live_rdc_twice(float v);
__device__ float live_rdc_scale(float v) { return 1.5f * v; }

extern "C" __global__ void live_rdc_lib_kernel(float *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = live_rdc_twice(p[i]);
}
