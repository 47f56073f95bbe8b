/* libFuzzer target: any bytes as PTX text (header and .entry parameter lists). */
#include <stddef.h>
#include <stdint.h>

#include "cubin/cubin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cubin_kernels k;
	char err[256];
	if (cubin_ptx_kernels((const char *)data, size, &k, err, sizeof(err)) == 0)
		cubin_kernels_free(&k);
	return 0;
}
