/* test_store: groups of cmocka tests, one per source file, run by main.c. */
#ifndef CUBPF_TESTS_STORE_H
#define CUBPF_TESTS_STORE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Each file lists its tests; main.c runs them as one group (one cmocka summary). */
extern const struct CMUnitTest cache_tests[], trace_tests[], cli_tests[], deps_tests[];
extern const size_t n_cache_tests, n_trace_tests, n_cli_tests, n_deps_tests;

/* A fresh folder under $TMPDIR for one test (removed by rm_tree). */
char *temp_dir(void);
void rm_tree(const char *dir);
/* Whole file into memory (fails the test when it cannot); caller frees. */
uint8_t *slurp(const char *path, size_t *size);
void spit(const char *path, const void *data, size_t size);
/* Runs a shell command; returns its exit status and its output (stdout+stderr) in *out. */
int run(const char *cmd, char **out);

#endif
