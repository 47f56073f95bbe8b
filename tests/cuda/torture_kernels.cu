// Kernels of the driver-API torture programs (tests/cuda/torture_drv.cu), built into a fatbin
// with SASS and PTX for sm_90 (nvcc -fatbin -gencode arch=compute_90,code=[sm_90,compute_90]) and
// loaded with cuModuleLoadData / cuLibraryLoadData, as a driver-API application does.
extern "C" {

__device__ int tk_global = 7;          // cuModuleGetGlobal target
__device__ unsigned int tk_barrier;    // grid barrier of the cooperative kernel

// out[i] = a * in[i] + b, staged through dynamic shared memory.
__global__ void tk_scale(const float *in, float *out, float a, float b, int n)
{
	extern __shared__ float tile[];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	tile[threadIdx.x] = i < n ? in[i] : 0.0f;
	__syncthreads();
	if (i < n)
		out[i] = a * tile[threadIdx.x] + b + (float)tk_global;
}

// Sums blocks of `in` into out[blockIdx.x] (shared-memory reduction, dynamic size).
__global__ void tk_reduce(const float *in, float *out, int n)
{
	extern __shared__ float s[];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	s[threadIdx.x] = i < n ? in[i] : 0.0f;
	__syncthreads();
	for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			s[threadIdx.x] += s[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = s[0];
}

// out[i] = i * i (integer), no shared memory.
__global__ void tk_square(int *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = i * i;
}

// Spins for `ns` nanoseconds of %globaltimer, then writes 1: a kernel still running at exit.
__global__ void tk_spin(unsigned long long ns, int *done)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while (t - t0 < ns);
	if (threadIdx.x == 0 && blockIdx.x == 0)
		*done = 1;
}

// Two phases separated by a grid-wide barrier (cooperative launch: every block resident):
// phase 1 writes out[i] = i, phase 2 reads the neighbour block's value.  `gen` is the
// barrier's generation (the launch number) so that the counter needs no reset.
__global__ void tk_coop(int *out, int *out2, unsigned gen)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	int n = gridDim.x * blockDim.x;
	out[i] = i;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) {
		atomicAdd(&tk_barrier, 1);
		while (atomicAdd(&tk_barrier, 0) < gen * gridDim.x)
			;
	}
	__syncthreads();
	out2[i] = ((volatile int *)out)[(i + blockDim.x) % n];
}

// Cluster launch check: records the cluster size the kernel sees.
__global__ void tk_cluster(int *out)
{
	unsigned nc;
	asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nc));
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	out[i] = (int)nc;
}
}
