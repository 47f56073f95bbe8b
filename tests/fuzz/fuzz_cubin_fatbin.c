/* libFuzzer target: any bytes as a file image (fatbin, wrapper, ELF, cubin, PTX), then every
 * entry decompressed and its kernels read, as `cubpf inspect` and the shim do. */
#include <stddef.h>
#include <stdint.h>

#include "cubin/cubin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cubin_image *img;
	char err[256];
	size_t extent;
	enum cubin_image_kind kind;
	(void)cubin_identify(data, size, &kind, &extent);
	if (cubin_image_open(&img, data, size, 0, err, sizeof(err)))
		return 0;
	for (size_t i = 0; i < img->entry_count; i++) {
		const uint8_t *d;
		size_t n;
		struct cubin_kernels k;
		if (cubin_entry_data(img, i, &d, &n))
			continue;
		int rc = img->entries[i].kind == CUBIN_ENTRY_ELF
				 ? cubin_elf_kernels(d, n, &k, err, sizeof(err))
				 : cubin_ptx_kernels((const char *)d, n, &k, err, sizeof(err));
		if (rc == 0)
			cubin_kernels_free(&k);
		cubin_entry_release(img, i);
	}
	(void)cubin_choose_ptx(img, SIZE_MAX, 90);
	cubin_image_free(img);
	return 0;
}
