/* vm/: folder-private BTF reader (btf.c). */
#ifndef CUBPF_VM_BTF_H
#define CUBPF_VM_BTF_H

#include <linux/btf.h>

#include "vm/internal.h"

struct vm_btf {
	const uint8_t *types;
	size_t types_len;
	const char *strs;
	size_t strs_len;
	uint32_t *offsets; /* offsets[id] into types, for 1 <= id < count */
	uint32_t count;
};

int vm_btf_open(struct vm_btf *btf, const uint8_t *data, size_t size, char *err, size_t errlen);
void vm_btf_close(struct vm_btf *btf);
bool vm_btf_type(const struct vm_btf *btf, uint32_t id, struct btf_type *t, const uint8_t **extra);
const char *vm_btf_name(const struct vm_btf *btf, uint32_t off);
uint32_t vm_btf_skip_mods(const struct vm_btf *btf, uint32_t id);
int64_t vm_btf_size(const struct vm_btf *btf, uint32_t id);
/* Fills type/key/value sizes/max_entries/flags of `d` from a map definition struct. */
int vm_btf_map_def(const struct vm_btf *btf, uint32_t var_type, struct vm_map_def *d, char *err,
		   size_t errlen);
/* Type id of the DATASEC called `name`, or -1. */
int vm_btf_find_datasec(const struct vm_btf *btf, const char *name);

#endif
