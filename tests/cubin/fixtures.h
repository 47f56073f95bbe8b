/* Helpers shared by the fixture-based tests of test_cubin. */
#ifndef CUBPF_TESTS_CUBIN_FIXTURES_H
#define CUBPF_TESTS_CUBIN_FIXTURES_H

#include "cubin/cubin.h"
#include "tests/cubin/tests.h"

/* Reads $CUBPF_FIXTURES/cubin/NAME (default build/fixtures), NUL-terminated one byte past
 * *size; fails the test, naming the fixture and why, when it is missing. Caller frees. */
uint8_t *fixture(const char *name, size_t *size);

/* Opens a fixture image (fails the test on error). */
struct cubin_image *open_fixture(const char *name, uint8_t **buf, size_t *size);

#endif
