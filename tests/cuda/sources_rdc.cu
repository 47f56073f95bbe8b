// The -rdc program of tests/gpu/t_ptx_sources.sh, with tests/cuda/sources_rdc_lib.cu: a kernel
// in this object calls a device function of the other object and the other object's kernel
// calls one of this one (relocatable device code: the registered image is device-linked SASS).
#include <cstdio>

extern __device__ float live_rdc_scale(float v);
__device__ float live_rdc_twice(float v) { return 2.0f * v; }
extern "C" __global__ void live_rdc_lib_kernel(float *p, int n);

extern "C" __global__ void live_rdc_kernel(float *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = live_rdc_scale(live_rdc_twice(p[i]));
}

int main(void)
{
	const int n = 50000, block = 128, grid = (n + block - 1) / block;
	float *h = new float[n], *d;
	for (int i = 0; i < n; i++)
		h[i] = (float)i;
	cudaMalloc(&d, n * sizeof(float));
	cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
	live_rdc_kernel<<<grid, block>>>(d, n);     // p = 3 * p
	live_rdc_lib_kernel<<<grid, block>>>(d, n); // p = 2 * p
	cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += h[i] != 6.0f * (float)i;
	printf("expect live_rdc_kernel threads=%d\nexpect live_rdc_lib_kernel threads=%d\n",
	       grid * block, grid * block);
	printf("result %s (%d wrong) %s\n", bad ? "FAILED" : "ok", bad,
	       cudaGetErrorString(cudaGetLastError()));
	return bad != 0;
}
