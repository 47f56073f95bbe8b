// live_multi: the same kernel on every GPU of the machine (at most 4), with a different grid on
// each, for tests/gpu/t_live_multi.sh: device d runs live_vecadd with (d + 1) * 16 blocks of 128
// threads once.  Prints a checksum per device and the entry counts a probe must see.
#include <cstdint>
#include <cstdio>

__global__ void live_vecadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	c[i] = a[i] + b[i];
}

int main()
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
		printf("no device\n");
		return 1;
	}
	count = count > 4 ? 4 : count;
	printf("devices %d\n", count);
	for (int d = 0; d < count; d++) {
		const int blocks = (d + 1) * 16, threads = 128, n = blocks * threads - 5;
		static float h[4 * 16 * 128];
		float *a, *b, *c;
		cudaSetDevice(d);
		if (cudaMalloc(&a, n * sizeof(float)) || cudaMalloc(&b, n * sizeof(float)) ||
		    cudaMalloc(&c, n * sizeof(float))) {
			printf("error: cudaMalloc on device %d\n", d);
			return 1;
		}
		for (int i = 0; i < n; i++)
			h[i] = (float)(i % 97) * (d + 1);
		cudaMemcpy(a, h, n * sizeof(float), cudaMemcpyHostToDevice);
		cudaMemcpy(b, h, n * sizeof(float), cudaMemcpyHostToDevice);
		live_vecadd<<<blocks, threads>>>(a, b, c, n);
		if (cudaDeviceSynchronize() != cudaSuccess) {
			printf("error: launch on device %d\n", d);
			return 1;
		}
		cudaMemcpy(h, c, n * sizeof(float), cudaMemcpyDeviceToHost);
		double sum = 0;
		for (int i = 0; i < n; i++)
			sum += h[i];
		printf("device %d sum %.1f\n", d, sum);
		printf("expect device %d live_vecadd threads=%d\n", d, blocks * threads);
	}
	return 0;
}
