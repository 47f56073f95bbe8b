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
	int failed = 0;
	failed += run_elf_tests();
	failed += run_fixture_tests();
	failed += run_damaged_tests();
	failed += run_inspect_tests();
	return failed;
}
