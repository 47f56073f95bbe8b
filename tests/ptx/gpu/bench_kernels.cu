// Benchmark kernels for tests/bench/b_ptx.sh: one memory-bound, one compute-bound.
extern "C" __global__ void bench_vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

#define TILE 32
// C = A * B, n x n row-major, n a multiple of TILE; block TILE x TILE.
extern "C" __global__ void bench_matmul(const float *A, const float *B, float *C, int n)
{
	__shared__ float As[TILE][TILE];
	__shared__ float Bs[TILE][TILE];
	int tx = threadIdx.x, ty = threadIdx.y;
	int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
	float acc = 0.0f;
	for (int t = 0; t < n; t += TILE) {
		As[ty][tx] = A[row * n + t + tx];
		Bs[ty][tx] = B[(t + ty) * n + col];
		__syncthreads();
#pragma unroll
		for (int k = 0; k < TILE; k++)
			acc += As[ty][k] * Bs[k][tx];
		__syncthreads();
	}
	C[row * n + col] = acc;
}
