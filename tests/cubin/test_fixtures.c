/* Images built by nvcc at test time (tests/cubin/module.mk): every entry and every kernel is
 * checked against what that build must contain. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cubin/fixtures.h"

uint8_t *fixture(const char *name, size_t *size)
{
	const char *dir = getenv("CUBPF_FIXTURES");
	char path[1024];
	snprintf(path, sizeof(path), "%s/cubin/%s", dir && *dir ? dir : "build/fixtures", name);
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("fixture %s is missing: nvcc did not build it (see %s.log, or is nvcc "
			 "installed? NVCC=%s)", path, path, getenv("NVCC") ? getenv("NVCC") : "unset");
	fclose(f);
	uint8_t *buf = read_file_or_fail(path, size);
	uint8_t *n = realloc(buf, *size + 1);
	assert_non_null(n);
	n[*size] = 0;
	return n;
}

struct cubin_image *open_fixture(const char *name, uint8_t **buf, size_t *size)
{
	struct cubin_image *img;
	char err[256];
	*buf = fixture(name, size);
	if (cubin_image_open(&img, *buf, *size, 0, err, sizeof(err)))
		fail_msg("%s: %s", name, err);
	return img;
}

/* ---- what tests/cubin/kernels.cu must contain ------------------------------------------ */

struct want_kernel {
	const char *name;
	uint32_t count;
	uint32_t sizes[4];
	int shared; /* bytes of static shared memory at least this (0: exactly 0) */
};

static const struct want_kernel kernels_cu[] = {
	{"cubin_axpy", 4, {4, 8, 8, 4}, 0},
	{"cubin_block_sum", 3, {8, 8, 4}, 4096},
	{"_Z11cubin_mixed4PaircsPl", 4, {16, 1, 2, 8}, 0},
	{"cubin_noargs", 0, {0}, 0},
	{"_Z10cubin_fillIdEvPT_S0_j", 3, {8, 8, 4}, 0},
};
#define N_KERNELS_CU (sizeof(kernels_cu) / sizeof(kernels_cu[0]))

static void check_kernel(const struct cubin_kernel *k, const struct want_kernel *w, int is_elf)
{
	if (k->param_count != w->count)
		fail_msg("%s: %u parameters, expected %u", k->name, k->param_count, w->count);
	uint32_t end = 0;
	for (uint32_t i = 0; i < w->count; i++) {
		if (k->params[i].size != w->sizes[i])
			fail_msg("%s: parameter %u has %u bytes, expected %u", k->name, i,
				 k->params[i].size, w->sizes[i]);
		assert_true(k->params[i].offset >= end); /* in order, not overlapping */
		end = k->params[i].offset + k->params[i].size;
	}
	assert_int_equal(k->param_bytes, end);
	if (!is_elf)
		return;
	assert_true(k->registers > 0 && k->registers <= 255);
	if (w->shared)
		assert_true(k->shared_bytes >= w->shared);
	else
		assert_int_equal(k->shared_bytes, 0);
}

/* The kernel list of an entry is exactly kernels.cu's. */
static void check_kernels_cu(const struct cubin_kernels *list, int is_elf)
{
	assert_int_equal(list->count, N_KERNELS_CU);
	for (size_t w = 0; w < N_KERNELS_CU; w++) {
		const struct cubin_kernel *found = NULL;
		for (size_t i = 0; i < list->count; i++)
			if (!strcmp(list->kernels[i].name, kernels_cu[w].name))
				found = &list->kernels[i];
		if (!found)
			fail_msg("kernel %s is missing", kernels_cu[w].name);
		check_kernel(found, &kernels_cu[w], is_elf);
	}
}

static void entry_kernels(struct cubin_image *img, size_t i, struct cubin_kernels *out)
{
	const uint8_t *data;
	size_t size;
	char err[256];
	if (cubin_entry_data(img, i, &data, &size))
		fail_msg("entry %zu: %s", i, img->error);
	assert_int_equal(size, img->entries[i].size);
	int rc = img->entries[i].kind == CUBIN_ENTRY_ELF
			 ? cubin_elf_kernels(data, size, out, err, sizeof(err))
			 : cubin_ptx_kernels((const char *)data, size, out, err, sizeof(err));
	if (rc)
		fail_msg("entry %zu: %s", i, err);
}

/* ---- entry sets ------------------------------------------------------------------------------ */

struct want_entry {
	uint16_t kind;
	uint32_t sm;
	char suffix;
	enum cubin_compression comp;
};

/* The entries [first, first+count) are exactly `want` (in any order), and each holds
 * kernels.cu's kernels. */
static void check_entries(struct cubin_image *img, size_t first, size_t count,
			  const struct want_entry *want, size_t nwant)
{
	int used[16] = {0};
	assert_int_equal(count, nwant);
	for (size_t i = first; i < first + count; i++) {
		const struct cubin_entry *e = &img->entries[i];
		size_t w;
		for (w = 0; w < nwant; w++)
			if (!used[w] && want[w].kind == e->kind && want[w].sm == e->sm &&
			    want[w].suffix == cubin_entry_arch_suffix(e) && want[w].comp == e->compression)
				break;
		if (w == nwant)
			fail_msg("unexpected entry %zu: %s sm %u%c %s", i, cubin_entry_kind_name(e->kind),
				 e->sm, cubin_entry_arch_suffix(e) ? cubin_entry_arch_suffix(e) : ' ',
				 cubin_compression_name(e->compression));
		used[w] = 1;
		struct cubin_kernels k;
		entry_kernels(img, i, &k);
		if (e->kind == CUBIN_ENTRY_ELF)
			assert_int_equal(k.sm, e->sm); /* e_flags agree with the entry header */
		check_kernels_cu(&k, e->kind == CUBIN_ENTRY_ELF);
		cubin_kernels_free(&k);
	}
}

static void check_fatbin_file(const char *name, const struct want_entry *want, size_t nwant)
{
	uint8_t *buf;
	size_t size;
	struct cubin_image *img = open_fixture(name, &buf, &size);
	assert_int_equal(img->kind, CUBIN_IMAGE_FATBIN);
	assert_int_equal(img->fatbin_count, 1);
	assert_int_equal(img->fatbins[0].size, size);
	check_entries(img, 0, img->entry_count, want, nwant);
	cubin_image_free(img);
	free(buf);
}

#define ENTRIES(...) ((const struct want_entry[]){__VA_ARGS__}), \
	sizeof((const struct want_entry[]){__VA_ARGS__}) / sizeof(struct want_entry)
#define ELF_(sm, sfx, c) {CUBIN_ENTRY_ELF, sm, sfx, c}
#define PTX_(sm, sfx, c) {CUBIN_ENTRY_PTX, sm, sfx, c}

static void sass_only(void **s) { (void)s; check_fatbin_file("sass_only.fatbin", ENTRIES(ELF_(80, 0, CUBIN_RAW), ELF_(90, 0, CUBIN_RAW))); }
static void ptx_only(void **s) { (void)s; check_fatbin_file("ptx_only.fatbin", ENTRIES(PTX_(80, 0, CUBIN_ZSTD), PTX_(90, 0, CUBIN_ZSTD))); }
static void several_sms(void **s) { (void)s; check_fatbin_file("multi.fatbin", ENTRIES(ELF_(75, 0, CUBIN_RAW), ELF_(90, 'a', CUBIN_RAW), ELF_(100, 'f', CUBIN_RAW), PTX_(120, 0, CUBIN_ZSTD))); }
static void mode_default(void **s) { (void)s; check_fatbin_file("mode_default.fatbin", ENTRIES(ELF_(90, 0, CUBIN_RAW), PTX_(90, 0, CUBIN_ZSTD))); }
static void mode_speed(void **s) { (void)s; check_fatbin_file("mode_speed.fatbin", ENTRIES(ELF_(90, 0, CUBIN_RAW), PTX_(90, 0, CUBIN_LZ4))); }
static void mode_size(void **s) { (void)s; check_fatbin_file("mode_size.fatbin", ENTRIES(ELF_(90, 0, CUBIN_ZSTD), PTX_(90, 0, CUBIN_ZSTD))); }
static void mode_none(void **s) { (void)s; check_fatbin_file("mode_none.fatbin", ENTRIES(ELF_(90, 0, CUBIN_RAW), PTX_(90, 0, CUBIN_RAW))); }

static void standalone_cubin(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size;
	struct cubin_image *img = open_fixture("kernels.cubin", &buf, &size);
	assert_int_equal(img->kind, CUBIN_IMAGE_CUBIN);
	assert_int_equal(img->elf_machine, EM_CUDA);
	check_entries(img, 0, img->entry_count, ENTRIES(ELF_(90, 0, CUBIN_RAW)));
	assert_ptr_equal(img->entries[0].data, buf); /* raw: no copy */
	cubin_image_free(img);
	free(buf);
}

static void standalone_ptx(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size;
	struct cubin_kernels k;
	char err[256];
	struct cubin_image *img = open_fixture("kernels.ptx", &buf, &size);
	assert_int_equal(img->kind, CUBIN_IMAGE_PTX);
	check_entries(img, 0, img->entry_count, ENTRIES(PTX_(90, 0, CUBIN_RAW)));
	assert_int_equal(cubin_ptx_kernels((const char *)buf, size, &k, err, sizeof(err)), 0);
	assert_int_equal(k.ptx_major, img->entries[0].major);
	assert_true(k.ptx_major >= 8); /* CUDA 13 writes ISA 9.x */
	assert_int_equal(k.address_size, 64);
	assert_string_equal(k.target, "sm_90");
	cubin_kernels_free(&k);
	cubin_image_free(img);
	free(buf);
}

/* A host object: its .nv_fatbin holds the fatbin nvcc made, with one wrapper. */
static void host_object(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size;
	struct cubin_image *img = open_fixture("kernels.o", &buf, &size);
	assert_int_equal(img->kind, CUBIN_IMAGE_HOST_ELF);
	assert_int_equal(img->fatbin_count, 1);
	assert_int_equal(img->wrapper_count, 1);
	assert_string_equal(img->fatbins[0].section, ".nv_fatbin");
	check_entries(img, 0, img->entry_count, ENTRIES(ELF_(90, 0, CUBIN_RAW), PTX_(90, 0, CUBIN_ZSTD)));
	cubin_image_free(img);
	free(buf);
}

/* The fatbin of `img` holding kernels.cu's kernels: exactly one must. */
static size_t fatbin_with(struct cubin_image *img, const char *kernel)
{
	size_t found = SIZE_MAX;
	for (size_t f = 0; f < img->fatbin_count; f++) {
		for (size_t i = img->fatbins[f].first_entry;
		     i < img->fatbins[f].first_entry + img->fatbins[f].entry_count; i++) {
			struct cubin_kernels k;
			if (img->entries[i].kind != CUBIN_ENTRY_ELF && img->entries[i].kind != CUBIN_ENTRY_PTX)
				continue;
			entry_kernels(img, i, &k);
			for (size_t j = 0; j < k.count; j++)
				if (!strcmp(k.kernels[j].name, kernel)) {
					assert_true(found == SIZE_MAX || found == f);
					found = f;
				}
			cubin_kernels_free(&k);
		}
	}
	if (found == SIZE_MAX)
		fail_msg("no fatbin holds %s", kernel);
	return found;
}

static void executable(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size;
	struct cubin_image *img = open_fixture("app", &buf, &size);
	assert_int_equal(img->kind, CUBIN_IMAGE_HOST_ELF);
	/* One fatbin per translation unit with device code, plus the CUDA runtime's own. */
	assert_true(img->fatbin_count >= 2);
	assert_int_equal(img->wrapper_count, img->fatbin_count);
	size_t f = fatbin_with(img, "cubin_axpy");
	check_entries(img, img->fatbins[f].first_entry, img->fatbins[f].entry_count,
		      ENTRIES(ELF_(80, 0, CUBIN_RAW), ELF_(90, 0, CUBIN_RAW), PTX_(90, 0, CUBIN_ZSTD)));
	long p = cubin_choose_ptx(img, f, 90);
	assert_true(p >= 0);
	assert_int_equal(img->entries[p].kind, CUBIN_ENTRY_PTX);
	assert_int_equal(cubin_choose_ptx(img, f, 86), -1);
	cubin_image_free(img);
	free(buf);
}

static void shared_library(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size;
	struct cubin_image *img = open_fixture("libkernels.so", &buf, &size);
	assert_int_equal(img->kind, CUBIN_IMAGE_HOST_ELF);
	size_t f = fatbin_with(img, "cubin_block_sum");
	check_entries(img, img->fatbins[f].first_entry, img->fatbins[f].entry_count,
		      ENTRIES(ELF_(90, 0, CUBIN_RAW), PTX_(86, 0, CUBIN_ZSTD)));
	long p = cubin_choose_ptx(img, SIZE_MAX, 90);
	assert_true(p >= 0);
	assert_int_equal(img->entries[p].sm, 86);
	assert_int_equal(cubin_choose_ptx(img, SIZE_MAX, 80), -1);
	cubin_image_free(img);
	free(buf);
}

static uint16_t elf_type_of(struct cubin_image *img, size_t i)
{
	const uint8_t *d;
	size_t n;
	struct cubin_elf elf;
	assert_int_equal(cubin_entry_data(img, i, &d, &n), 0);
	assert_int_equal(cubin_elf_open(&elf, d, n), 0);
	return elf.type;
}

/* -rdc: one relocatable fatbin per translation unit in __nv_relfatbin, and the device-linked
 * image in .nv_fatbin. */
static void rdc_build(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size, rel = 0, linked = 0;
	struct cubin_image *img = open_fixture("rdc_app", &buf, &size);
	for (size_t f = 0; f < img->fatbin_count; f++) {
		const struct cubin_fatbin *fb = &img->fatbins[f];
		int is_rel = !strcmp(fb->section, "__nv_relfatbin");
		rel += is_rel;
		linked += !is_rel;
		for (size_t i = fb->first_entry; i < fb->first_entry + fb->entry_count; i++)
			if (img->entries[i].kind == CUBIN_ENTRY_ELF)
				assert_int_equal(elf_type_of(img, i), is_rel ? ET_REL : ET_EXEC);
	}
	assert_int_equal(rel, 4); /* rdc_part, rdc_lib, host_main, kernels */
	assert_true(linked >= 1);
	size_t f = fatbin_with(img, "_Z11cubin_mixed4PaircsPl");
	assert_string_equal(img->fatbins[f].section, "__nv_relfatbin");
	/* nvcc compresses relocatable cubins by default (device linking reads them back). */
	check_entries(img, img->fatbins[f].first_entry, img->fatbins[f].entry_count,
		      ENTRIES(ELF_(90, 0, CUBIN_ZSTD), PTX_(90, 0, CUBIN_ZSTD)));
	f = fatbin_with(img, "cubin_rdc_kernel");
	struct cubin_kernels k;
	entry_kernels(img, img->fatbins[f].first_entry, &k);
	assert_int_equal(k.count, 1);
	assert_int_equal(k.kernels[0].param_count, 2);
	assert_int_equal(k.kernels[0].params[0].size, 8);
	assert_int_equal(k.kernels[0].params[1].size, 4);
	cubin_kernels_free(&k);
	cubin_image_free(img);
	free(buf);
}

/* The shim's view: only a pointer.  Extents come from the headers and match the files. */
static void pointer_only(void **s)
{
	(void)s;
	static const char *const names[] = {"mode_size.fatbin", "kernels.cubin", "kernels.ptx"};
	static const enum cubin_image_kind kinds[] = {CUBIN_IMAGE_FATBIN, CUBIN_IMAGE_CUBIN, CUBIN_IMAGE_PTX};
	for (size_t n = 0; n < 3; n++) {
		size_t size, extent;
		enum cubin_image_kind kind;
		uint8_t *buf = fixture(names[n], &size);
		struct cubin_image *img;
		assert_int_equal(cubin_identify(buf, CUBIN_SIZE_UNKNOWN, &kind, &extent), 0);
		assert_int_equal(kind, kinds[n]);
		/* PTX: the text and its NUL (fixture() adds one, as a C string would have). */
		assert_int_equal(extent, kind == CUBIN_IMAGE_PTX ? size + 1 : size);
		assert_int_equal(cubin_image_open(&img, buf, CUBIN_SIZE_UNKNOWN, 0, NULL, 0), 0);
		assert_int_equal(img->size, extent);
		assert_true(img->entry_count >= 1);
		cubin_image_free(img);
		free(buf);
	}
}

/* cuModuleLoadFatBinary gets a wrapper whose pointer leads to the fatbin. */
static void wrapper_in_memory(void **s)
{
	(void)s;
	size_t size;
	uint8_t *fat = fixture("mode_size.fatbin", &size);
	uint8_t w[24] = {0};
	uint64_t ptr = (uint64_t)(uintptr_t)fat;
	uint32_t magic = 0x466243B1, version = 1;
	memcpy(w, &magic, 4);
	memcpy(w + 4, &version, 4);
	memcpy(w + 8, &ptr, 8);
	struct cubin_image *img;
	char err[256];
	assert_int_equal(cubin_image_open(&img, w, CUBIN_SIZE_UNKNOWN, CUBIN_OPEN_IN_MEMORY, err, sizeof(err)), 0);
	assert_int_equal(img->kind, CUBIN_IMAGE_WRAPPER);
	assert_int_equal(img->wrapper_version, 1);
	assert_int_equal(img->fatbin_count, 1);
	assert_ptr_equal(img->fatbins[0].data, fat);
	check_entries(img, 0, img->entry_count, ENTRIES(ELF_(90, 0, CUBIN_ZSTD), PTX_(90, 0, CUBIN_ZSTD)));
	cubin_image_free(img);
	/* From a file, the pointer means nothing: refused with a reason. */
	assert_int_equal(cubin_image_open(&img, w, sizeof(w), 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "wrapper"));
	version = 7;
	memcpy(w + 4, &version, 4);
	assert_int_equal(cubin_image_open(&img, w, sizeof(w), CUBIN_OPEN_IN_MEMORY, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "version 7"));
	free(fat);
}

/* Decompression is lazy and kept; release frees and a later call decompresses again. */
static void lazy_decompression(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size, n1, n2;
	const uint8_t *d1, *d2;
	struct cubin_image *img = open_fixture("mode_size.fatbin", &buf, &size);
	for (size_t i = 0; i < img->entry_count; i++)
		assert_null(img->entries[i].data);
	assert_int_equal(cubin_entry_data(img, 0, &d1, &n1), 0);
	assert_int_equal(cubin_entry_data(img, 0, &d2, &n2), 0);
	assert_ptr_equal(d1, d2);
	assert_true(d1 < buf || d1 >= buf + size); /* a buffer of its own */
	uint8_t *copy = malloc(n1);
	memcpy(copy, d1, n1);
	cubin_entry_release(img, 0);
	assert_null(img->entries[0].data);
	assert_int_equal(cubin_entry_data(img, 0, &d2, &n2), 0);
	assert_int_equal(n1, n2);
	assert_memory_equal(copy, d2, n1);
	assert_int_equal(cubin_entry_data(img, img->entry_count, &d2, &n2), -1);
	free(copy);
	cubin_image_free(img);
	free(buf);
}

/* Several fatbins back to back in one buffer, with zero padding between. */
static void back_to_back(void **s)
{
	(void)s;
	size_t a, b;
	uint8_t *fa = fixture("mode_none.fatbin", &a), *fb = fixture("multi.fatbin", &b);
	size_t total = a + 8 + b;
	uint8_t *buf = calloc(1, total);
	memcpy(buf, fa, a);
	memcpy(buf + a + 8, fb, b);
	struct cubin_image *img;
	char err[256];
	if (cubin_image_open(&img, buf, total, 0, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(img->fatbin_count, 2);
	assert_int_equal(img->fatbins[1].offset, a + 8);
	assert_int_equal(img->entry_count, 2 + 4);
	assert_int_equal(img->entries[3].fatbin, 1);
	cubin_image_free(img);
	buf[a] = 0x55; /* garbage between fatbins */
	assert_int_equal(cubin_image_open(&img, buf, total, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no fatbin magic"));
	free(buf);
	free(fa);
	free(fb);
}

/* A static library: the fatbins of each object member, at their offsets in the archive. */
static void static_library(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size;
	struct cubin_image *img = open_fixture("libkernels.a", &buf, &size);
	assert_int_equal(img->kind, CUBIN_IMAGE_ARCHIVE);
	assert_int_equal(img->fatbin_count, 2); /* kernels.cu, rdc_lib.cu */
	assert_int_equal(img->wrapper_count, 2);
	for (size_t f = 0; f < img->fatbin_count; f++) {
		uint32_t magic;
		memcpy(&magic, buf + img->fatbins[f].offset, 4);
		assert_int_equal(magic, 0xBA55ED50u);
		assert_ptr_equal(img->fatbins[f].data, buf + img->fatbins[f].offset);
	}
	size_t f = fatbin_with(img, "cubin_axpy");
	check_entries(img, img->fatbins[f].first_entry, img->fatbins[f].entry_count,
		      ENTRIES(ELF_(90, 0, CUBIN_RAW), PTX_(90, 0, CUBIN_ZSTD)));
	assert_true(fatbin_with(img, "cubin_rdc_lib_kernel") != f);
	cubin_image_free(img);
	/* Cut inside the last member: refused, saying where. */
	char err[256];
	assert_int_equal(cubin_image_open(&img, buf, size - 100, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "archive: member"));
	/* Without a size an archive cannot be delimited. */
	assert_int_equal(cubin_image_open(&img, buf, CUBIN_SIZE_UNKNOWN, 0, err, sizeof(err)), -1);
	free(buf);
}

static void choose_ptx(void **s)
{
	(void)s;
	uint8_t *buf;
	size_t size;
	struct cubin_image *img = open_fixture("ptx_only.fatbin", &buf, &size);
	assert_int_equal(img->entries[cubin_choose_ptx(img, SIZE_MAX, 90)].sm, 90);
	assert_int_equal(img->entries[cubin_choose_ptx(img, SIZE_MAX, 100)].sm, 90);
	assert_int_equal(img->entries[cubin_choose_ptx(img, SIZE_MAX, 89)].sm, 80);
	assert_int_equal(img->entries[cubin_choose_ptx(img, SIZE_MAX, 86)].sm, 80);
	assert_int_equal(cubin_choose_ptx(img, SIZE_MAX, 75), -1);
	assert_int_equal(cubin_choose_ptx(img, 1, 90), -1); /* no fatbin 1 */
	cubin_image_free(img);
	free(buf);
	/* 'a' and 'f' rules, on their own. */
	assert_true(cubin_ptx_usable(90, 'a', 90));
	assert_false(cubin_ptx_usable(90, 'a', 100));
	assert_true(cubin_ptx_usable(100, 'f', 103));
	assert_false(cubin_ptx_usable(100, 'f', 120));
	assert_true(cubin_sass_usable(80, 0, 86));
	assert_false(cubin_sass_usable(80, 0, 90));
}

size_t fixture_tests(struct CMUnitTest *out)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sass_only),
		cmocka_unit_test(ptx_only),
		cmocka_unit_test(several_sms),
		cmocka_unit_test(mode_default),
		cmocka_unit_test(mode_speed),
		cmocka_unit_test(mode_size),
		cmocka_unit_test(mode_none),
		cmocka_unit_test(standalone_cubin),
		cmocka_unit_test(standalone_ptx),
		cmocka_unit_test(host_object),
		cmocka_unit_test(executable),
		cmocka_unit_test(shared_library),
		cmocka_unit_test(rdc_build),
		cmocka_unit_test(pointer_only),
		cmocka_unit_test(wrapper_in_memory),
		cmocka_unit_test(lazy_decompression),
		cmocka_unit_test(back_to_back),
		cmocka_unit_test(static_library),
		cmocka_unit_test(choose_ptx),
	};
	memcpy(out, tests, sizeof(tests));
	return sizeof(tests) / sizeof(tests[0]);
}
