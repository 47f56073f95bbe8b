// Host side of the two-object -rdc fixture (rdc2_app): launches both objects' kernels, so
// that the device linker keeps them (it drops kernels the host never registers).
extern "C" __global__ void cubin_rdc_kernel(float *p, int n);
extern "C" __global__ void cubin_rdc_lib_kernel(double *p);
int main(void)
{
	cubin_rdc_kernel<<<1, 1>>>(nullptr, 0);
	cubin_rdc_lib_kernel<<<1, 1>>>(nullptr);
	return 0;
}
