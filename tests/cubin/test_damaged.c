/* Damaged input: truncations, sizes past the end, zero and huge header sizes, wrong compressed
 * sizes, garbage after the magic.  Every case must fail with a message (or, for random damage,
 * at least never read out of bounds: the sanitizer build checks that). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cubin/fixtures.h"

/* Opens and then reads everything from an image; returns 0 when all of it was readable. */
static int walk(const uint8_t *p, size_t n)
{
	struct cubin_image *img;
	char err[256] = "";
	int bad = 0;
	if (cubin_image_open(&img, p, n, 0, err, sizeof(err))) {
		assert_true(err[0] != 0);
		return -1;
	}
	for (size_t i = 0; i < img->entry_count; i++) {
		const uint8_t *d;
		size_t size;
		struct cubin_kernels k;
		if (cubin_entry_data(img, i, &d, &size)) {
			assert_true(img->error[0] != 0);
			bad = 1;
			continue;
		}
		int rc = img->entries[i].kind == CUBIN_ENTRY_ELF ? cubin_elf_kernels(d, size, &k, err, sizeof(err))
		       : img->entries[i].kind == CUBIN_ENTRY_PTX ? cubin_ptx_kernels((const char *)d, size, &k, err, sizeof(err))
		       : 1;
		if (rc == 0)
			cubin_kernels_free(&k);
		bad |= rc < 0;
	}
	(void)cubin_choose_ptx(img, SIZE_MAX, 90);
	cubin_image_free(img);
	return bad ? -1 : 0;
}

/* A private copy of exactly n bytes, so that the sanitizer sees any read past it. */
static int walk_copy(const uint8_t *p, size_t n)
{
	uint8_t *c = malloc(n ? n : 1);
	memcpy(c, p, n);
	int rc = walk(c, n);
	free(c);
	return rc;
}

static void truncated_everywhere(void **s)
{
	(void)s;
	static const char *const names[] = {"mode_size.fatbin", "mode_speed.fatbin", "kernels.cubin"};
	for (size_t f = 0; f < 3; f++) {
		size_t size;
		uint8_t *buf = fixture(names[f], &size);
		assert_int_equal(walk_copy(buf, size), 0);
		/* Every prefix of a fatbin fails (declared sizes run past the end); a prefix of a
		 * cubin fails (its section table is last). */
		for (size_t n = 0; n < size; n += (f == 2 ? 7 : 1))
			if (walk_copy(buf, n) == 0)
				fail_msg("%s cut to %zu of %zu bytes was accepted", names[f], n, size);
		free(buf);
	}
}

static void w32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void w64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Opens `buf` and expects failure with `needle` in the message, at open or when reading. */
static void expect_error(uint8_t *buf, size_t size, const char *needle)
{
	struct cubin_image *img;
	char err[256] = "";
	if (cubin_image_open(&img, buf, size, 0, err, sizeof(err)) == 0) {
		int failed = 0;
		for (size_t i = 0; i < img->entry_count && !failed; i++) {
			const uint8_t *d;
			size_t n;
			if (cubin_entry_data(img, i, &d, &n)) {
				snprintf(err, sizeof(err), "%s", img->error);
				failed = 1;
			}
		}
		cubin_image_free(img);
		if (!failed)
			fail_msg("damaged image accepted (expected \"%s\")", needle);
	}
	if (!strstr(err, needle))
		fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
}

/* Offsets in mode_size.fatbin: fatbin header at 0, first entry at 16. */
#define E0 16

static void bad_sizes(void **s)
{
	(void)s;
	size_t size;
	uint8_t *orig = fixture("mode_size.fatbin", &size), *b = malloc(size);
	uint32_t hs = 0;
	memcpy(&hs, orig + E0 + 4, 4);
#define FRESH() memcpy(b, orig, size)
	FRESH(); w64(b + 8, size);                  expect_error(b, size, "declares");
	FRESH(); w64(b + 8, UINT64_MAX);            expect_error(b, size, "declares");
	FRESH(); b[6] = 0; b[7] = 0;                expect_error(b, size, "header size");
	FRESH(); b[6] = 0xff; b[7] = 0xff;          expect_error(b, size, "header size");
	FRESH(); w32(b + E0 + 4, 0);                expect_error(b, size, "below 64");
	FRESH(); w32(b + E0 + 4, UINT32_MAX);       expect_error(b, size, "past the end");
	FRESH(); w64(b + E0 + 8, UINT64_MAX - 8);   expect_error(b, size, "runs past");
	FRESH(); w64(b + E0 + 8, size);             expect_error(b, size, "runs past");
	/* Compressed sizes: larger than the payload, too small, wrong uncompressed size. */
	uint64_t psize;
	memcpy(&psize, orig + E0 + 8, 8);
	FRESH(); w32(b + E0 + 0x10, (uint32_t)psize + 1); expect_error(b, size, "exceeds its payload");
	FRESH(); w32(b + E0 + 0x10, 9);             expect_error(b, size, "zstd");
	uint64_t usize;
	memcpy(&usize, orig + E0 + 0x38, 8);
	FRESH(); w64(b + E0 + 0x38, usize + 1);     expect_error(b, size, "header says");
	FRESH(); w64(b + E0 + 0x38, usize - 1);     expect_error(b, size, "header says");
	FRESH(); w64(b + E0 + 0x38, 1ull << 50);    expect_error(b, size, "header says");
	FRESH(); w64(b + E0 + 0x38, 0);             expect_error(b, size, "uncompressed size");
	FRESH(); b[4] = 2;                          expect_error(b, size, "version 2");
	/* A zstd frame that declares 64 MiB (its header and the entry's agree) in 20 bytes: one
	 * raw block of 8 (RFC 8878).  Refused before a 64 MiB buffer is allocated for it. */
	static const uint8_t liar[] = {0x28, 0xB5, 0x2F, 0xFD, 0xA0, 0x00, 0x00, 0x00, 0x04,
				       0x41, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8};
	assert_true(psize >= sizeof(liar));
	FRESH(); memset(b + E0 + hs, 0, psize); memcpy(b + E0 + hs, liar, sizeof(liar));
	w64(b + E0 + 0x38, 64u << 20);              expect_error(b, size, "beyond what 20 zstd bytes");
	/* Both compression flags at once. */
	FRESH(); b[E0 + 0x28 + 1] |= 0x20;          expect_error(b, size, "both");
	free(b);
	free(orig);
}

static void bad_lz4(void **s)
{
	(void)s;
	size_t size;
	uint8_t *orig = fixture("mode_speed.fatbin", &size), *b = malloc(size);
	/* Find the LZ4 entry (the PTX one). */
	struct cubin_image *img;
	assert_int_equal(cubin_image_open(&img, orig, size, 0, NULL, 0), 0);
	size_t at = SIZE_MAX;
	for (size_t i = 0; i < img->entry_count; i++)
		if (img->entries[i].compression == CUBIN_LZ4)
			at = img->entries[i].offset;
	cubin_image_free(img);
	assert_true(at != SIZE_MAX);
	uint64_t usize;
	memcpy(&usize, orig + at + 0x38, 8);
	memcpy(b, orig, size); w64(b + at + 0x38, usize + 1);   expect_error(b, size, "LZ4");
	memcpy(b, orig, size); w64(b + at + 0x38, usize - 1);   expect_error(b, size, "LZ4");
	memcpy(b, orig, size); w64(b + at + 0x38, 1ull << 40);  expect_error(b, size, "beyond");
	memcpy(b, orig, size); w32(b + at + 0x10, 5);           expect_error(b, size, "LZ4");
	free(b);
	free(orig);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

/* Magic numbers followed by garbage: never a crash, and an error for each. */
static void garbage_after_magic(void **s)
{
	(void)s;
	static const uint8_t magics[][4] = {{0x50, 0xed, 0x55, 0xba}, {0xb1, 0x43, 0x62, 0x46},
					    {0x7f, 'E', 'L', 'F'}};
	uint8_t buf[512];
	for (int round = 0; round < 3000; round++) {
		size_t n = 4 + rnd() % (sizeof(buf) - 4);
		memcpy(buf, magics[round % 3], 4);
		for (size_t i = 4; i < n; i++)
			buf[i] = (uint8_t)rnd();
		if (round % 3 == 2) {
			buf[4] = 2; /* ELF64 little-endian, so that the header gets read */
			buf[5] = 1;
		}
		(void)walk_copy(buf, n);
	}
	memcpy(buf, magics[0], 4);
	memset(buf + 4, 0xff, 60);
	expect_error(buf, 64, "fatbin");
}

/* Random byte damage to real images: anything may fail, nothing may crash. */
static void random_damage(void **s)
{
	(void)s;
	static const char *const names[] = {"mode_size.fatbin", "mode_speed.fatbin", "multi.fatbin",
					    "kernels.cubin", "kernels.ptx"};
	for (size_t f = 0; f < 5; f++) {
		size_t size;
		uint8_t *orig = fixture(names[f], &size), *b = malloc(size);
		for (int round = 0; round < 400; round++) {
			memcpy(b, orig, size);
			for (int k = 1 + (int)(rnd() % 4); k > 0; k--) {
				/* Headers are where damage matters most: aim half the hits at the first
				 * 256 bytes. */
				size_t at = rnd() % 2 ? rnd() % (size < 256 ? size : 256) : rnd() % size;
				b[at] = (uint8_t)rnd();
			}
			(void)walk_copy(b, size);
		}
		free(b);
		free(orig);
	}
}

static void ptx_damage(void **s)
{
	(void)s;
	size_t size;
	uint8_t *ptx = fixture("kernels.ptx", &size);
	struct cubin_kernels k;
	char err[256];
	/* Every prefix: parsed or refused, never out of bounds. */
	for (size_t n = 0; n <= size; n += 3) {
		uint8_t *c = malloc(n ? n : 1);
		memcpy(c, ptx, n);
		if (cubin_ptx_kernels((const char *)c, n, &k, err, sizeof(err)) == 0)
			cubin_kernels_free(&k);
		free(c);
	}
	static const char *const bad[] = {
		"", "hello", ".target sm_90", ".version 9.0\n",
		".version 9.0\n.target sm_90\n.visible .entry k(\n.param .u64 p,\n",
		".version 9.0\n.target sm_90\n.entry k( .param .u64 )",
		".version 9.0\n.target sm_90\n.entry k( .param .b8 p[4 )",
		".version 9.0\n.target sm_90\n.entry",
		".version\n.target sm_90\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (cubin_ptx_kernels(bad[i], strlen(bad[i]), &k, err, sizeof(err)) == 0)
			fail_msg("malformed PTX accepted: \"%s\"", bad[i]);
		assert_true(err[0] != 0);
	}
	free(ptx);
}

size_t damaged_tests(struct CMUnitTest *out)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(truncated_everywhere),
		cmocka_unit_test(bad_sizes),
		cmocka_unit_test(bad_lz4),
		cmocka_unit_test(garbage_after_magic),
		cmocka_unit_test(random_damage),
		cmocka_unit_test(ptx_damage),
	};
	memcpy(out, tests, sizeof(tests));
	return sizeof(tests) / sizeof(tests[0]);
}
