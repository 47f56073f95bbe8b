// Fixture: the memory-bound classic.  C++ linkage on purpose (mangled name).
__global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

// A second kernel, so that tests can select one and check the other stays byte-identical.
__global__ void vec_scale(float *x, float k, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= k;
}
