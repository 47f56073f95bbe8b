// First translation unit of the -rdc fixture: an external device function and its own kernel.
__device__ float cubin_rdc_scale(float v)
{
	return v * 0.5f;
}

extern "C" __global__ void cubin_rdc_lib_kernel(double *p)
{
	p[threadIdx.x] = cubin_rdc_scale((float)p[threadIdx.x]);
}
