// Host side of the executable fixtures: only links (the tests never run it, no GPU needed).
#include <cstdio>

extern "C" __global__ void cubin_axpy(float a, const float *x, float *y, int n);

int main(void)
{
	cubin_axpy<<<1, 1>>>(2.0f, nullptr, nullptr, 0);
	printf("launched\n");
	return 0;
}
