/* test_cubin: groups of cmocka tests, one per source file, run by main.c. */
#ifndef CUBPF_TESTS_CUBIN_H
#define CUBPF_TESTS_CUBIN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

int run_elf_tests(void);
int run_fixture_tests(void);
int run_damaged_tests(void);
int run_inspect_tests(void);

/* Reads a whole file; fails the current test when it cannot. Caller frees. */
uint8_t *read_file_or_fail(const char *path, size_t *size);

#endif
