// live_bench: vector add over 2^26 floats, timed with CUDA events (tests/bench/b_live.sh runs it
// natively and under a counting probe, in the same run).  Prints the mean time per launch and a
// checksum of the result (which must be the same both ways).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__global__ void live_bench_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void live_bench_init(float *a, float *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		a[i] = (float)(i & 1023);
		b[i] = (float)(i % 77);
	}
}

int main(int argc, char **argv)
{
	const int n = 1 << 26, block = 256, grid = (n + block - 1) / block;
	int reps = argc > 1 ? atoi(argv[1]) : 200;
	float *a, *b, *c;
	if (cudaMalloc(&a, n * sizeof(float)) || cudaMalloc(&b, n * sizeof(float)) ||
	    cudaMalloc(&c, n * sizeof(float))) {
		printf("error: cudaMalloc\n");
		return 1;
	}
	live_bench_init<<<grid, block>>>(a, b, n);
	for (int i = 0; i < 10; i++) /* warm-up: module load, JIT, clocks */
		live_bench_add<<<grid, block>>>(a, b, c, n);
	cudaEvent_t t0, t1;
	cudaEventCreate(&t0);
	cudaEventCreate(&t1);
	cudaEventRecord(t0);
	for (int i = 0; i < reps; i++)
		live_bench_add<<<grid, block>>>(a, b, c, n);
	cudaEventRecord(t1);
	if (cudaEventSynchronize(t1) != cudaSuccess) {
		printf("error: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	float ms = 0;
	cudaEventElapsedTime(&ms, t0, t1);
	static float host[1 << 16];
	cudaMemcpy(host, c + n - (1 << 16), sizeof(host), cudaMemcpyDeviceToHost);
	double sum = 0;
	for (int i = 0; i < (1 << 16); i++)
		sum += host[i];
	printf("ms_per_launch %.5f reps %d launches %d checksum %.1f\n", ms / reps, reps, reps + 10,
	       sum);
	return 0;
}
