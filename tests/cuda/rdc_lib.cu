// tests/cuda/rdc_lib.cu: the second object of the -rdc program (tests/cuda/rdc_app.cu): a device
// function that calls back into the first object, so that each object needs the other's code.
__device__ float rdc_plus_one(float x);

__device__ float rdc_twice_plus_one(float x)
{
	return rdc_plus_one(2.0f * x);
}
