// Second translation unit of the -rdc fixture: a kernel that calls a device function defined
// in this unit and one defined in rdc_lib.cu, so that device linking is required.
extern __device__ float cubin_rdc_scale(float v);

__device__ float cubin_rdc_twice(float v)
{
	return 2.0f * v;
}

extern "C" __global__ void cubin_rdc_kernel(float *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = cubin_rdc_scale(cubin_rdc_twice(p[i]));
}
