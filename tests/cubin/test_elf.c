/* The ELF64 reader: a synthetic image with every kind of section it reads, a real executable,
 * and damaged images (every truncation, every header byte corrupted) that must fail cleanly. */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "tests/cubin/tests.h"

static void w16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void w32(uint8_t *p, uint32_t v) { w16(p, (uint16_t)v); w16(p + 2, (uint16_t)(v >> 16)); }
static void w64(uint8_t *p, uint64_t v) { w32(p, (uint32_t)v); w32(p + 4, (uint32_t)(v >> 32)); }

/* Sections of the synthetic image, in header order. */
enum { S_NULL, S_SHSTR, S_STR, S_TEXT, S_SYMTAB, S_RELA, S_REL, S_BSS, S_COUNT };
static const char shstr[] = "\0.shstrtab\0.strtab\0.text.kernel\0.symtab\0.rela.text\0.rel.text\0.bss";
static const char str[] = "\0kernel\0data";

struct image {
	uint8_t buf[1024];
	size_t size;
};

static size_t put(struct image *im, const void *src, size_t n)
{
	size_t off = im->size;
	memcpy(im->buf + off, src, n);
	im->size += (n + 7) & ~(size_t)7;
	return off;
}

static void shdr(uint8_t *h, uint32_t name, uint32_t type, uint64_t off, uint64_t size,
		 uint32_t link, uint32_t info, uint64_t entsize)
{
	w32(h, name);
	w32(h + 4, type);
	w64(h + 24, off);
	w64(h + 32, size);
	w32(h + 40, link);
	w32(h + 44, info);
	w64(h + 48, 8);
	w64(h + 56, entsize);
}

static void sym(uint8_t *p, uint32_t name, uint8_t info, uint8_t other, uint16_t shndx,
		uint64_t value, uint64_t size)
{
	w32(p, name);
	p[4] = info;
	p[5] = other;
	w16(p + 6, shndx);
	w64(p + 8, value);
	w64(p + 16, size);
}

static uint32_t name_of(const char *table, size_t len, const char *name)
{
	for (size_t i = 0; i < len; i++)
		if (!strcmp(table + i, name))
			return (uint32_t)i;
	return 0;
}
#define SHNAME(n) name_of(shstr, sizeof(shstr), n)

static void build(struct image *im)
{
	uint8_t text[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	uint8_t syms[3 * 24] = {0}, rela[2 * 24] = {0}, rel[16] = {0};
	memset(im, 0, sizeof(*im));
	im->size = 64;
	sym(syms + 24, 1, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0x10, S_TEXT, 0, 16);
	sym(syms + 48, 8, ELF64_ST_INFO(STB_LOCAL, STT_OBJECT), 0, S_BSS, 32, 4);
	w64(rela, 8); w64(rela + 8, ELF64_R_INFO(1, 42)); w64(rela + 16, (uint64_t)-5);
	w64(rela + 24, 12); w64(rela + 32, ELF64_R_INFO(2, 7)); w64(rela + 40, 100);
	w64(rel, 4); w64(rel + 8, ELF64_R_INFO(2, 3));
	size_t o_shstr = put(im, shstr, sizeof(shstr)), o_str = put(im, str, sizeof(str));
	size_t o_text = put(im, text, sizeof(text)), o_sym = put(im, syms, sizeof(syms));
	size_t o_rela = put(im, rela, sizeof(rela)), o_rel = put(im, rel, sizeof(rel));
	size_t shoff = im->size;
	uint8_t *h = im->buf + shoff;
	im->size += S_COUNT * 64;
	shdr(h + 64 * S_SHSTR, SHNAME(".shstrtab"), SHT_STRTAB, o_shstr, sizeof(shstr), 0, 0, 0);
	shdr(h + 64 * S_STR, SHNAME(".strtab"), SHT_STRTAB, o_str, sizeof(str), 0, 0, 0);
	shdr(h + 64 * S_TEXT, SHNAME(".text.kernel"), SHT_PROGBITS, o_text, 16, 0, 0, 0);
	shdr(h + 64 * S_SYMTAB, SHNAME(".symtab"), SHT_SYMTAB, o_sym, sizeof(syms), S_STR, 2, 24);
	shdr(h + 64 * S_RELA, SHNAME(".rela.text"), SHT_RELA, o_rela, sizeof(rela), S_SYMTAB, S_TEXT, 24);
	shdr(h + 64 * S_REL, SHNAME(".rel.text"), SHT_REL, o_rel, sizeof(rel), S_SYMTAB, S_TEXT, 16);
	shdr(h + 64 * S_BSS, SHNAME(".bss"), SHT_NOBITS, 0x100000, 4096, 0, 0, 0);
	memcpy(im->buf, ELFMAG, SELFMAG);
	im->buf[EI_CLASS] = ELFCLASS64;
	im->buf[EI_DATA] = ELFDATA2LSB;
	im->buf[EI_VERSION] = EV_CURRENT;
	im->buf[EI_OSABI] = 0x41;
	im->buf[EI_ABIVERSION] = 8;
	w16(im->buf + 16, ET_EXEC);
	w16(im->buf + 18, EM_CUDA);
	w32(im->buf + 48, 0x5a05a);
	w64(im->buf + 40, shoff);
	w16(im->buf + 52, 64);
	w16(im->buf + 58, 64);
	w16(im->buf + 60, S_COUNT);
	w16(im->buf + 62, S_SHSTR);
}

static void header_fields(void **state)
{
	(void)state;
	struct image im;
	struct cubin_elf elf;
	build(&im);
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), 0);
	assert_int_equal(elf.type, ET_EXEC);
	assert_int_equal(elf.machine, EM_CUDA);
	assert_int_equal(elf.flags, 0x5a05a);
	assert_int_equal(elf.osabi, 0x41);
	assert_int_equal(elf.abiversion, 8);
	assert_int_equal(elf.shnum, S_COUNT);
	size_t extent = 0;
	assert_int_equal(cubin_elf_extent(im.buf, sizeof(im.buf), &extent), 0);
	assert_int_equal(extent, im.size);
}

static void sections(void **state)
{
	(void)state;
	struct image im;
	struct cubin_elf elf;
	struct cubin_elf_section s;
	build(&im);
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), 0);
	assert_int_equal(cubin_elf_section(&elf, S_TEXT, &s), 0);
	assert_string_equal(s.name, ".text.kernel");
	assert_int_equal(s.size, 16);
	assert_non_null(s.data);
	assert_int_equal(s.data[0], 1);
	assert_int_equal(s.data[15], 16);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".bss", &s), 0);
	assert_int_equal(s.index, S_BSS);
	assert_int_equal(s.type, SHT_NOBITS);
	assert_null(s.data);
	assert_int_equal(s.size, 4096);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".nope", &s), 1);
	assert_int_equal(cubin_elf_section_by_type(&elf, SHT_SYMTAB, &s), 0);
	assert_int_equal(s.index, S_SYMTAB);
	assert_int_equal(cubin_elf_section_by_type(&elf, SHT_DYNSYM, &s), 1);
	assert_int_equal(cubin_elf_section(&elf, S_COUNT, &s), -1);
	assert_non_null(strstr(elf.error, "does not exist"));
}

static void symbols(void **state)
{
	(void)state;
	struct image im;
	struct cubin_elf elf;
	struct cubin_elf_section st;
	struct cubin_elf_symbol sy;
	build(&im);
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), 0);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".symtab", &st), 0);
	assert_int_equal(cubin_elf_symbol_count(&elf, &st), 3);
	assert_int_equal(cubin_elf_symbol(&elf, &st, 1, &sy), 0);
	assert_string_equal(sy.name, "kernel");
	assert_int_equal(sy.bind, STB_GLOBAL);
	assert_int_equal(sy.type, STT_FUNC);
	assert_int_equal(sy.other, 0x10);
	assert_int_equal(sy.shndx, S_TEXT);
	assert_int_equal(sy.size, 16);
	assert_int_equal(cubin_elf_symbol(&elf, &st, 2, &sy), 0);
	assert_string_equal(sy.name, "data");
	assert_int_equal(sy.bind, STB_LOCAL);
	assert_int_equal(sy.type, STT_OBJECT);
	assert_int_equal(sy.value, 32);
	assert_int_equal(cubin_elf_symbol(&elf, &st, 3, &sy), -1);
	assert_int_equal(cubin_elf_symbol(&elf, &st, 0, &sy), 0);
	assert_string_equal(sy.name, "");
}

static void relocations(void **state)
{
	(void)state;
	struct image im;
	struct cubin_elf elf;
	struct cubin_elf_section s;
	struct cubin_elf_reloc r;
	build(&im);
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), 0);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".rela.text", &s), 0);
	assert_int_equal(cubin_elf_reloc_count(&elf, &s), 2);
	assert_int_equal(cubin_elf_reloc(&elf, &s, 0, &r), 0);
	assert_int_equal(r.offset, 8);
	assert_int_equal(r.sym, 1);
	assert_int_equal(r.type, 42);
	assert_int_equal(r.addend, -5);
	assert_int_equal(cubin_elf_reloc(&elf, &s, 1, &r), 0);
	assert_int_equal(r.sym, 2);
	assert_int_equal(r.addend, 100);
	assert_int_equal(cubin_elf_reloc(&elf, &s, 2, &r), -1);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".rel.text", &s), 0);
	assert_int_equal(cubin_elf_reloc_count(&elf, &s), 1);
	assert_int_equal(cubin_elf_reloc(&elf, &s, 0, &r), 0);
	assert_int_equal(r.offset, 4);
	assert_int_equal(r.type, 3);
	assert_int_equal(r.addend, 0);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".text.kernel", &s), 0);
	assert_int_equal(cubin_elf_reloc_count(&elf, &s), 0);
	assert_non_null(strstr(elf.error, "not a relocation"));
}

/* Walks everything the reader offers; on a damaged image each call may fail, none may crash. */
static void walk_all(const uint8_t *p, size_t n)
{
	struct cubin_elf elf;
	struct cubin_elf_section s;
	size_t extent;
	(void)cubin_elf_extent(p, n, &extent);
	if (cubin_elf_open(&elf, p, n))
		return;
	for (size_t i = 0; i < elf.shnum; i++) {
		if (cubin_elf_section(&elf, i, &s))
			continue;
		if (s.type == SHT_SYMTAB || s.type == SHT_DYNSYM) {
			struct cubin_elf_symbol sy;
			size_t k = cubin_elf_symbol_count(&elf, &s);
			for (size_t j = 0; j < k; j++)
				(void)cubin_elf_symbol(&elf, &s, j, &sy);
		}
		if (s.type == SHT_REL || s.type == SHT_RELA) {
			struct cubin_elf_reloc r;
			size_t k = cubin_elf_reloc_count(&elf, &s);
			for (size_t j = 0; j < k; j++)
				(void)cubin_elf_reloc(&elf, &s, j, &r);
		}
	}
	(void)cubin_elf_section_by_name(&elf, ".zzz", &s);
}

static void truncated(void **state)
{
	(void)state;
	struct image im;
	struct cubin_elf elf;
	build(&im);
	for (size_t n = 0; n < im.size; n++) {
		/* A copy of exactly n bytes, so that ASan sees any read past it. */
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, im.buf, n);
		walk_all(copy, n);
		assert_int_equal(cubin_elf_open(&elf, copy, n), -1);
		assert_true(elf.error[0] != 0);
		free(copy);
	}
}

static void corrupted_headers(void **state)
{
	(void)state;
	struct image im;
	static const uint8_t values[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x40};
	build(&im);
	/* Every byte of the ELF header and of every section header, and every symbol/reloc byte. */
	for (size_t i = 0; i < im.size; i++) {
		if (i >= 64 && i < 64 + sizeof(shstr) + sizeof(str))
			continue; /* string contents: covered by the unterminated-string test */
		for (size_t v = 0; v < sizeof(values); v++) {
			struct image bad = im;
			bad.buf[i] = values[v];
			uint8_t *copy = malloc(im.size);
			memcpy(copy, bad.buf, im.size);
			walk_all(copy, im.size);
			free(copy);
		}
	}
}

static void bad_idents(void **state)
{
	(void)state;
	struct image im;
	struct cubin_elf elf;
	build(&im);
	im.buf[EI_CLASS] = ELFCLASS32;
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), -1);
	assert_non_null(strstr(elf.error, "not ELF64"));
	build(&im);
	im.buf[EI_DATA] = ELFDATA2MSB;
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), -1);
	assert_non_null(strstr(elf.error, "big-endian"));
	build(&im);
	im.buf[1] = 'X';
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), -1);
	assert_non_null(strstr(elf.error, "magic"));
	assert_int_equal(cubin_elf_open(&elf, NULL, 0), -1);
	/* A section header table that claims 0xffff entries. */
	build(&im);
	w16(im.buf + 60, 0xffff);
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), -1);
	assert_non_null(strstr(elf.error, "run past the end"));
	/* A section header size below 64 would make entries overlap past the table. */
	build(&im);
	w16(im.buf + 58, 16);
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), -1);
}

static void unterminated_string(void **state)
{
	(void)state;
	struct image im;
	struct cubin_elf elf;
	struct cubin_elf_section s;
	build(&im);
	/* Shrink .strtab to cut "data" short of its NUL: the symbol name must be refused. */
	uint8_t *h = im.buf + im.size - S_COUNT * 64 + S_STR * 64;
	w64(h + 32, sizeof(str) - 1);
	assert_int_equal(cubin_elf_open(&elf, im.buf, im.size), 0);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".symtab", &s), 0);
	struct cubin_elf_symbol sy;
	assert_int_equal(cubin_elf_symbol(&elf, &s, 1, &sy), 0);
	assert_int_equal(cubin_elf_symbol(&elf, &s, 2, &sy), -1);
	assert_non_null(strstr(elf.error, "unterminated"));
}

/* A real ELF64 file: this test program itself (built by gcc), whose .dynsym and .rela.dyn the
 * reader must find, and whose main symbol must be named in .symtab. */
static void real_executable(void **state)
{
	(void)state;
	size_t n;
	uint8_t *p = read_file_or_fail("/proc/self/exe", &n);
	struct cubin_elf elf;
	struct cubin_elf_section s;
	assert_int_equal(cubin_elf_open(&elf, p, n), 0);
	assert_true(elf.type == ET_DYN || elf.type == ET_EXEC);
	assert_int_equal(cubin_elf_section_by_type(&elf, SHT_DYNSYM, &s), 0);
	assert_true(cubin_elf_symbol_count(&elf, &s) > 0);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".symtab", &s), 0);
	size_t count = cubin_elf_symbol_count(&elf, &s), found = 0;
	for (size_t i = 0; i < count; i++) {
		struct cubin_elf_symbol sy;
		assert_int_equal(cubin_elf_symbol(&elf, &s, i, &sy), 0);
		if (!strcmp(sy.name, "elf_tests") && sy.type == STT_FUNC)
			found++;
	}
	assert_int_equal(found, 1);
	assert_int_equal(cubin_elf_section_by_name(&elf, ".rela.dyn", &s), 0);
	assert_true(cubin_elf_reloc_count(&elf, &s) > 0);
	size_t extent;
	assert_int_equal(cubin_elf_extent(p, n, &extent), 0);
	assert_int_equal(extent, n); /* the section table is last in gcc's output */
	free(p);
}

size_t elf_tests(struct CMUnitTest *out)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(header_fields),
		cmocka_unit_test(sections),
		cmocka_unit_test(symbols),
		cmocka_unit_test(relocations),
		cmocka_unit_test(bad_idents),
		cmocka_unit_test(unterminated_string),
		cmocka_unit_test(truncated),
		cmocka_unit_test(corrupted_headers),
		cmocka_unit_test(real_executable),
	};
	memcpy(out, tests, sizeof(tests));
	return sizeof(tests) / sizeof(tests[0]);
}
