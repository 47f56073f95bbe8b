/* tools/tool_patch.c: a probe object with one of its .rodata constants changed, for tools that
 * take a parameter (memdelay -n NS): the constant is a `const volatile` global of the probe,
 * which the loader gives the programs as read-only data, so that the verifier sees its value
 * (and bounds the delay).  The object is copied byte for byte but for the symbol's bytes. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "tools/tools.h"
#include "vm/vm.h"

/* The file offset of the `size` bytes of symbol `sym` in section .rodata (or .rodata.*). */
static int rodata_offset(const uint8_t *img, size_t len, const char *sym, uint64_t size,
			 size_t *off, char *err, size_t errlen)
{
	struct cubin_elf elf;
	struct cubin_elf_section symtab, sec;
	if (cubin_elf_open(&elf, img, len) || cubin_elf_section_by_type(&elf, SHT_SYMTAB, &symtab)) {
		snprintf(err, errlen, "not an object with a symbol table (%s)", elf.error);
		return -1;
	}
	size_t n = cubin_elf_symbol_count(&elf, &symtab);
	for (size_t i = 0; i < n; i++) {
		struct cubin_elf_symbol s;
		if (cubin_elf_symbol(&elf, &symtab, i, &s) || strcmp(s.name, sym))
			continue;
		if (s.size != size || s.shndx == SHN_UNDEF || s.shndx >= elf.shnum ||
		    cubin_elf_section(&elf, s.shndx, &sec) || strncmp(sec.name, ".rodata", 7) ||
		    !sec.data || s.value > sec.size || sec.size - s.value < size) {
			snprintf(err, errlen, "symbol %s is not a %llu-byte constant in .rodata", sym,
				 (unsigned long long)size);
			return -1;
		}
		*off = (size_t)(sec.data - img) + (size_t)s.value;
		return 0;
	}
	snprintf(err, errlen, "no symbol %s", sym);
	return -1;
}

int tool_patch_rodata_u64(const char *in, const char *sym, uint64_t value, const char *out,
			  char *err, size_t errlen)
{
	size_t len, off;
	char verr[VM_ERRLEN];
	uint8_t *img = vm_read_file(in, &len, verr, sizeof(verr));
	if (!img) {
		snprintf(err, errlen, "%s", verr);
		return -1;
	}
	int rc = rodata_offset(img, len, sym, 8, &off, err, errlen);
	if (!rc) {
		memcpy(img + off, &value, 8); /* little-endian, as the BPF target */
		FILE *f = fopen(out, "wb");
		if (!f || fwrite(img, 1, len, f) != len) {
			snprintf(err, errlen, "cannot write %s: %s", out, strerror(errno));
			rc = -1;
		}
		if (f && fclose(f) && !rc) {
			snprintf(err, errlen, "cannot write %s: %s", out, strerror(errno));
			rc = -1;
		}
	}
	free(img);
	return rc;
}
