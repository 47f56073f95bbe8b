// Fixture: several (predicated) returns.  Thread i writes out[i] unless it leaves early.
extern "C" __global__ void early_ret(const int *in, int *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	int v = in[i];
	if (v % 3 == 0)
		return;
	if (v % 5 == 0) {
		out[i] = -v;
		return;
	}
	if (v % 7 == 0)
		return;
	out[i] = v * 2;
}
