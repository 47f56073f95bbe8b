/* A small, bounds-checked BTF reader: just enough to read libbpf-style map definitions
 * (struct { __uint(type, ...); __type(key, ...); ... } name SEC(".maps")) from .BTF. */
#include <linux/btf.h>
#include <stdlib.h>
#include <string.h>

#include "vm/btf.h"

/* Bytes that follow a struct btf_type of this kind (vlen entries where the kind has them). */
static int64_t trailer_size(uint32_t kind, uint32_t vlen)
{
	switch (kind) {
	case BTF_KIND_INT: return 4;
	case BTF_KIND_ARRAY: return sizeof(struct btf_array);
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION: return (int64_t)vlen * sizeof(struct btf_member);
	case BTF_KIND_ENUM: return (int64_t)vlen * sizeof(struct btf_enum);
	case BTF_KIND_FUNC_PROTO: return (int64_t)vlen * sizeof(struct btf_param);
	case BTF_KIND_VAR: return sizeof(struct btf_var);
	case BTF_KIND_DATASEC: return (int64_t)vlen * sizeof(struct btf_var_secinfo);
	case BTF_KIND_DECL_TAG: return 4;
	case BTF_KIND_ENUM64: return (int64_t)vlen * 12;
	case BTF_KIND_PTR: case BTF_KIND_FWD: case BTF_KIND_TYPEDEF: case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST: case BTF_KIND_RESTRICT: case BTF_KIND_FUNC: case BTF_KIND_FLOAT:
	case BTF_KIND_TYPE_TAG: return 0;
	}
	return -1;
}

int vm_btf_open(struct vm_btf *btf, const uint8_t *data, size_t size, char *err, size_t errlen)
{
	struct btf_header h;
	memset(btf, 0, sizeof(*btf));
	if (size < sizeof(h)) {
		vm_errf(err, errlen, ".BTF is truncated (%zu bytes)", size);
		return -1;
	}
	memcpy(&h, data, sizeof(h));
	if (h.magic != BTF_MAGIC || h.hdr_len < sizeof(h) || h.hdr_len > size ||
	    (uint64_t)h.type_off + h.type_len > size - h.hdr_len ||
	    (uint64_t)h.str_off + h.str_len > size - h.hdr_len || h.str_len == 0) {
		vm_errf(err, errlen, ".BTF header is damaged (magic 0x%x)", h.magic);
		return -1;
	}
	btf->types = data + h.hdr_len + h.type_off;
	btf->types_len = h.type_len;
	btf->strs = (const char *)data + h.hdr_len + h.str_off;
	btf->strs_len = h.str_len;
	/* Index the types: offsets[id] for ids 1..n. */
	size_t cap = 64, n = 1, off = 0;
	btf->offsets = malloc(cap * sizeof(uint32_t));
	while (btf->offsets && off + sizeof(struct btf_type) <= btf->types_len) {
		struct btf_type t;
		memcpy(&t, btf->types + off, sizeof(t));
		int64_t extra = trailer_size(BTF_INFO_KIND(t.info), BTF_INFO_VLEN(t.info));
		if (extra < 0 || off + sizeof(t) + (uint64_t)extra > btf->types_len)
			break;
		if (n == cap) {
			uint32_t *o = realloc(btf->offsets, (cap *= 2) * sizeof(uint32_t));
			if (!o)
				break;
			btf->offsets = o;
		}
		btf->offsets[n++] = (uint32_t)off;
		off += sizeof(t) + (size_t)extra;
	}
	if (!btf->offsets || off != btf->types_len) {
		vm_errf(err, errlen, ".BTF type section is damaged near byte %zu", off);
		vm_btf_close(btf);
		return -1;
	}
	btf->count = (uint32_t)n;
	return 0;
}

void vm_btf_close(struct vm_btf *btf)
{
	free(btf->offsets);
	btf->offsets = NULL;
}

bool vm_btf_type(const struct vm_btf *btf, uint32_t id, struct btf_type *t, const uint8_t **extra)
{
	if (id == 0 || id >= btf->count)
		return false;
	memcpy(t, btf->types + btf->offsets[id], sizeof(*t));
	if (extra)
		*extra = btf->types + btf->offsets[id] + sizeof(*t);
	return true;
}

const char *vm_btf_name(const struct vm_btf *btf, uint32_t off)
{
	if (off >= btf->strs_len)
		return NULL;
	if (!memchr(btf->strs + off, 0, btf->strs_len - off))
		return NULL;
	return btf->strs + off;
}

/* Follows typedefs and qualifiers.  Returns the id of the underlying type, 0 on a loop/error. */
uint32_t vm_btf_skip_mods(const struct vm_btf *btf, uint32_t id)
{
	struct btf_type t;
	for (int depth = 0; depth < 32 && vm_btf_type(btf, id, &t, NULL); depth++) {
		uint32_t k = BTF_INFO_KIND(t.info);
		if (k != BTF_KIND_TYPEDEF && k != BTF_KIND_VOLATILE && k != BTF_KIND_CONST &&
		    k != BTF_KIND_RESTRICT && k != BTF_KIND_TYPE_TAG)
			return id;
		id = t.type;
	}
	return 0;
}

/* Size of a type: arrays multiply their element's size, found by walking the element chain
 * (not recursing: a damaged or hostile .BTF may make an array its own element, directly or
 * through typedefs and qualifiers).  The walk is bounded, and so is every product, so that any
 * cycle or absurd nesting ends in -1 rather than a stack overflow or an overflowed size. */
int64_t vm_btf_size(const struct vm_btf *btf, uint32_t id)
{
	struct btf_type t;
	const uint8_t *extra;
	uint64_t mult = 1;
	for (int depth = 0; depth < 32; depth++) {
		id = vm_btf_skip_mods(btf, id);
		if (!vm_btf_type(btf, id, &t, &extra))
			return -1;
		uint64_t size;
		switch (BTF_INFO_KIND(t.info)) {
		case BTF_KIND_INT: case BTF_KIND_STRUCT: case BTF_KIND_UNION: case BTF_KIND_ENUM:
		case BTF_KIND_ENUM64: case BTF_KIND_FLOAT: case BTF_KIND_DATASEC:
			size = t.size;
			break;
		case BTF_KIND_PTR:
			size = 8;
			break;
		case BTF_KIND_ARRAY: {
			struct btf_array a;
			memcpy(&a, extra, sizeof(a));
			if (a.nelems > (1u << 30) || (a.nelems && mult > (UINT64_C(1) << 32) / a.nelems))
				return -1;
			mult *= a.nelems;
			id = a.type;
			continue;
		}
		default:
			return -1;
		}
		/* both factors are at most 2^32: the product fits; sizes past 2^32 are refused */
		return mult * size > UINT32_MAX ? -1 : (int64_t)(mult * size);
	}
	return -1; /* a cycle, or nesting deeper than any real type */
}

/* __uint(name, N) is `int (*name)[N]`: a pointer to an array of N elements. */
static bool uint_member(const struct vm_btf *btf, uint32_t type, uint32_t *val)
{
	struct btf_type t;
	const uint8_t *extra;
	if (!vm_btf_type(btf, vm_btf_skip_mods(btf, type), &t, NULL) ||
	    BTF_INFO_KIND(t.info) != BTF_KIND_PTR)
		return false;
	if (!vm_btf_type(btf, vm_btf_skip_mods(btf, t.type), &t, &extra) ||
	    BTF_INFO_KIND(t.info) != BTF_KIND_ARRAY)
		return false;
	struct btf_array a;
	memcpy(&a, extra, sizeof(a));
	*val = a.nelems;
	return true;
}

/* __type(name, T) is `T *name`: the size of T. */
static bool type_member(const struct vm_btf *btf, uint32_t type, uint32_t *size)
{
	struct btf_type t;
	if (!vm_btf_type(btf, vm_btf_skip_mods(btf, type), &t, NULL) ||
	    BTF_INFO_KIND(t.info) != BTF_KIND_PTR)
		return false;
	int64_t s = vm_btf_size(btf, t.type);
	if (s < 0 || s > UINT32_MAX)
		return false;
	*size = (uint32_t)s;
	return true;
}

static int map_member(const struct vm_btf *btf, const struct btf_member *m, struct vm_map_def *d,
		      char *err, size_t errlen)
{
	const char *name = vm_btf_name(btf, m->name_off);
	bool ok = true;
	if (!name)
		ok = false;
	else if (!strcmp(name, "type"))
		ok = uint_member(btf, m->type, &d->type);
	else if (!strcmp(name, "max_entries"))
		ok = uint_member(btf, m->type, &d->max_entries);
	else if (!strcmp(name, "map_flags"))
		ok = uint_member(btf, m->type, &d->flags);
	else if (!strcmp(name, "key_size"))
		ok = uint_member(btf, m->type, &d->key_size);
	else if (!strcmp(name, "value_size"))
		ok = uint_member(btf, m->type, &d->value_size);
	else if (!strcmp(name, "key"))
		ok = type_member(btf, m->type, &d->key_size);
	else if (!strcmp(name, "value"))
		ok = type_member(btf, m->type, &d->value_size);
	else if (!strcmp(name, "pinning") || !strcmp(name, "numa_node"))
		ok = true; /* host-kernel notions: meaningless here, accepted */
	else {
		vm_errf(err, errlen, "map '%s': member '%s' is not supported", d->name, name);
		return -1;
	}
	if (!ok) {
		vm_errf(err, errlen, "map '%s': member '%s' is malformed in BTF (a damaged type, a "
			"type that contains itself, or a size past 4 GiB)", d->name, name ? name : "?");
		return -1;
	}
	return 0;
}

int vm_btf_map_def(const struct vm_btf *btf, uint32_t var_type, struct vm_map_def *d, char *err,
		   size_t errlen)
{
	struct btf_type t;
	const uint8_t *extra;
	uint32_t id = vm_btf_skip_mods(btf, var_type);
	if (!vm_btf_type(btf, id, &t, &extra) || BTF_INFO_KIND(t.info) != BTF_KIND_STRUCT) {
		vm_errf(err, errlen, "map '%s': its BTF type is not a struct", d->name);
		return -1;
	}
	for (uint32_t i = 0; i < BTF_INFO_VLEN(t.info); i++) {
		struct btf_member m;
		memcpy(&m, extra + i * sizeof(m), sizeof(m));
		if (map_member(btf, &m, d, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int vm_btf_find_datasec(const struct vm_btf *btf, const char *name)
{
	struct btf_type t;
	for (uint32_t id = 1; id < btf->count; id++) {
		vm_btf_type(btf, id, &t, NULL);
		const char *n = vm_btf_name(btf, t.name_off);
		if (BTF_INFO_KIND(t.info) == BTF_KIND_DATASEC && n && !strcmp(n, name))
			return (int)id;
	}
	return -1;
}
