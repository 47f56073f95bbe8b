/* Damaged eBPF objects: truncated files, bad section offsets, bad relocations, missing or broken
 * BTF, wrong machine, random corruption.  Each gives a clear error (or, for harmless damage, a
 * loadable object that the verifier may still refuse), never a crash. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/vm/tests.h"

static uint8_t *image(size_t *size)
{
	const char *path = test_compile("runprogs");
	uint8_t *buf = test_read_file(path, size);
	if (!buf)
		fail_msg("cannot read %s", path);
	return buf;
}

static int load(const uint8_t *buf, size_t size, char *err, size_t errlen)
{
	struct vm_object *obj = NULL;
	err[0] = 0;
	int rc = vm_object_load(buf, size, "damaged.o", &obj, err, errlen);
	if (rc == 0) {
		char log[4096];
		for (uint32_t i = 0; i < obj->prog_cnt; i++)
			vm_verify(obj, i, NULL, NULL, log, sizeof(log));
		vm_object_free(obj);
	} else
		assert_true(err[0] != 0);
	return rc;
}

static Elf64_Shdr *shdr(uint8_t *buf, size_t i)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	return (Elf64_Shdr *)(buf + eh->e_shoff + i * eh->e_shentsize);
}

static const char *sec_name(uint8_t *buf, size_t i)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	return (const char *)buf + shdr(buf, eh->e_shstrndx)->sh_offset + shdr(buf, i)->sh_name;
}

static size_t find_section(uint8_t *buf, const char *name)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	for (size_t i = 1; i < eh->e_shnum; i++)
		if (!strcmp(sec_name(buf, i), name))
			return i;
	fail_msg("no section %s", name);
	return 0;
}

static void test_intact_loads(void **state)
{
	(void)state;
	size_t size;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	assert_int_equal(load(buf, size, err, sizeof(err)), 0);
	free(buf);
}

static void test_truncated(void **state)
{
	(void)state;
	size_t size, failures = 0, tries = 0;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	for (size_t n = 0; n < size; n += 1 + n / 64, tries++) {
		uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any overread */
		memcpy(copy, buf, n);
		failures += load(copy, n, err, sizeof(err)) != 0;
		free(copy);
	}
	assert_int_equal(failures, tries); /* section headers are at the end: every cut breaks it */
	free(buf);
}

static void test_bad_section_offset(void **state)
{
	(void)state;
	size_t size;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	shdr(buf, find_section(buf, "kprobe/*"))->sh_offset = size - 8;
	assert_int_equal(load(buf, size, err, sizeof(err)), -1); /* load() checks the message */
	free(buf);
}

static void test_bad_relocation_symbol(void **state)
{
	(void)state;
	size_t size;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	Elf64_Shdr *rel = shdr(buf, find_section(buf, ".reluprobe/cuLaunchKernel"));
	Elf64_Rel *r = (Elf64_Rel *)(buf + rel->sh_offset);
	r->r_info = ELF64_R_INFO(100000, ELF64_R_TYPE(r->r_info));
	assert_int_equal(load(buf, size, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "damaged ELF"));
	free(buf);
}

static void test_bad_relocation_offset(void **state)
{
	(void)state;
	size_t size;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	Elf64_Shdr *rel = shdr(buf, find_section(buf, ".reluprobe/cuLaunchKernel"));
	Elf64_Rel *r = (Elf64_Rel *)(buf + rel->sh_offset);
	r->r_offset = 0; /* the first instruction is not an lddw */
	assert_int_equal(load(buf, size, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not on an lddw or a call"));
	free(buf);
}

static void test_missing_btf(void **state)
{
	(void)state;
	size_t size;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	char *name = (char *)sec_name(buf, find_section(buf, ".BTF"));
	name[3] = 'X'; /* ".BTX": no BTF any more, but .maps still needs it */
	assert_int_equal(load(buf, size, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no .BTF section"));
	free(buf);
}

static void test_broken_btf(void **state)
{
	(void)state;
	size_t size;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	Elf64_Shdr *s = shdr(buf, find_section(buf, ".BTF"));
	uint32_t *type_len = (uint32_t *)(buf + s->sh_offset + 12);
	*type_len += 4096;
	assert_int_equal(load(buf, size, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "BTF"));
	free(buf);
}

static void test_wrong_machine_and_garbage(void **state)
{
	(void)state;
	size_t size;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	((Elf64_Ehdr *)buf)->e_machine = EM_X86_64;
	assert_int_equal(load(buf, size, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an eBPF object"));
	memset(buf, 0x5a, size);
	assert_int_equal(load(buf, size, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ELF"));
	free(buf);
	struct vm_object *obj;
	assert_int_equal(vm_object_load_file("/nonexistent/x.bpf.o", &obj, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No such file"));
}

/* .BTF type graphs with cycles (an array its own element, typedef rings, pointers to
 * themselves) and nested arrays whose size overflows: the seeds tests/fuzz/btf_cycles.py wrote.
 * Each is refused with a message naming BTF; none recurses without end (issue 14, class 8). */
static void test_btf_cycles(void **state)
{
	(void)state;
	static const char *const seeds[] = {"btf_array_self", "btf_array_typedef_cycle",
					    "btf_typedef_self", "btf_typedef_ring",
					    "btf_array_overflow", "btf_ptr_self"};
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		char path[256], err[VM_ERRLEN];
		size_t size;
		snprintf(path, sizeof(path), "tests/fuzz/corpus/fuzz_vm_object/%s.elf", seeds[i]);
		uint8_t *buf = test_read_file(path, &size);
		if (!buf)
			fail_msg("cannot read %s", path);
		assert_int_equal(load(buf, size, err, sizeof(err)), -1);
		if (!strstr(err, "BTF"))
			fail_msg("%s: %s", seeds[i], err);
		free(buf);
	}
}

/* Random byte flips: anything may happen except a crash (ASan/UBSan watch in the SAN build). */
static void test_random_corruption(void **state)
{
	(void)state;
	size_t size, loaded = 0;
	char err[VM_ERRLEN];
	uint8_t *buf = image(&size);
	uint8_t *copy = malloc(size);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int iter = 0; iter < 600; iter++) {
		memcpy(copy, buf, size);
		for (int k = 0; k < 1 + iter % 8; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			copy[(seed >> 33) % size] ^= (uint8_t)(1u << ((seed >> 20) & 7));
		}
		loaded += load(copy, size, err, sizeof(err)) == 0;
	}
	print_message("random corruption: %zu of 600 damaged objects still loaded\n", loaded);
	free(copy);
	free(buf);
}

size_t loader_tests(struct CMUnitTest *out, size_t cap)
{
	static const struct CMUnitTest t[] = {
		cmocka_unit_test(test_intact_loads),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_section_offset),
		cmocka_unit_test(test_bad_relocation_symbol),
		cmocka_unit_test(test_bad_relocation_offset),
		cmocka_unit_test(test_missing_btf),
		cmocka_unit_test(test_broken_btf),
		cmocka_unit_test(test_wrong_machine_and_garbage),
		cmocka_unit_test(test_btf_cycles),
		cmocka_unit_test(test_random_corruption),
	};
	size_t n = sizeof(t) / sizeof(t[0]);
	if (n > cap)
		n = cap;
	memcpy(out, t, n * sizeof(t[0]));
	return n;
}
