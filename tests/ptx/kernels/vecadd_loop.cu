// Fixture: vec_add with a grid-stride loop, so that its accesses are on a cycle of the flow
// graph (deferred counters apply only there: tests/ptx/test_ptx.c test_defer_*).  A thread
// whose index reaches n at once makes no iteration; with n no larger than the grid, one each.
__global__ void vec_add_loop(const float *a, const float *b, float *c, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		c[i] = a[i] + b[i];
}
