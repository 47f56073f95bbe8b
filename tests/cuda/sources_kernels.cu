// Kernels of the PTX-source GPU test (tests/gpu/t_ptx_sources.sh), built three ways on the build
// machine: a cubin with line info (nvcc -cubin -lineinfo: the PTX stays in the cubin), PTX for
// the driver's linker (nvcc -ptx), and inside the harness through NVRTC at run time.  Named
// live_* so that the counting probe (tests/live/probes/count.bpf.c) instruments them.
extern "C" __global__ void live_src_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}
