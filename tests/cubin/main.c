/* test_cubin: every group of the cubin/ tests; the exit status is the number of failures. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/cubin/tests.h"

uint8_t *read_file_or_fail(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return buf;
}

int main(void)
{
	static struct CMUnitTest all[5 * TESTS_MAX];
	size_t n = 0;
	n += elf_tests(all + n);
	n += fixture_tests(all + n);
	n += damaged_tests(all + n);
	n += inspect_tests(all + n);
	n += embedded_tests(all + n);
	return _cmocka_run_group_tests("cubin", all, n, NULL, NULL);
}
