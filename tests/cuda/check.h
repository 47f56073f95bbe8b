// The runtime-call check of the repo's CUDA test programs: on an error, print it with the
// place and return 1 from the calling function (main reports failure through its exit status).
#ifndef CUBPF_TESTS_CUDA_CHECK_H
#define CUBPF_TESTS_CUDA_CHECK_H
#include <cstdio>

#define CHECK(x)                                                                               \
	do {                                                                                   \
		cudaError_t e_ = (x);                                                          \
		if (e_ != cudaSuccess) {                                                       \
			printf("error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
			return 1;                                                              \
		}                                                                              \
	} while (0)

#endif
