/* test_cubin: groups of cmocka tests, one per source file, run by main.c. */
#ifndef CUBPF_TESTS_CUBIN_H
#define CUBPF_TESTS_CUBIN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Each source file copies its tests into `out` (room for TESTS_MAX) and returns how many:
 * main.c runs them all as one group, so that the runner's summary counts every test. */
#define TESTS_MAX 64
size_t elf_tests(struct CMUnitTest *out);
size_t fixture_tests(struct CMUnitTest *out);
size_t damaged_tests(struct CMUnitTest *out);
size_t inspect_tests(struct CMUnitTest *out);
size_t embedded_tests(struct CMUnitTest *out);

/* Reads a whole file; fails the current test when it cannot. Caller frees. */
uint8_t *read_file_or_fail(const char *path, size_t *size);

#endif
