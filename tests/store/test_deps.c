/* The bundled C dependencies (store/fetch-sqlite.sh, store/fetch-zstd.sh): the build's copies
 * come from Debian's source packages; a cached file whose SHA-256 is not the pinned one is
 * refused and nothing is unpacked; a complete cache builds with no network (CUBPF_DEPS_OFFLINE=1
 * makes any attempt to fetch an error).  The files are copied from the cache the build used
 * (named in BUILD/zstd/SOURCE and BUILD/sqlite/SOURCE) into a private one; run from the
 * repository's root, like every test. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/store/tests.h"

/* BUILD/WHAT/SOURCE, as the fetch script wrote it; NULL when the build has none. */
static char *source_record(const char *what)
{
	const char *b = getenv("CUBPF_BUILD");
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s/SOURCE", b && *b ? b : "build", what);
	if (access(p, R_OK))
		fail_msg("%s is missing: build first (make)", p);
	size_t n;
	char *s = (char *)slurp(p, &n);
	s = realloc(s, n + 1);
	s[n] = '\0';
	return s;
}

/* A private copy of the cache folder the build used for PACKAGE, under DIR/cache/debian. */
static void copy_cache(const char *record, const char *package, const char *dir)
{
	const char *c = strstr(record, "\ncache ");
	assert_non_null(c);
	char pool[4096], cmd[9000];
	sscanf(c + 7, "%4095s", pool);
	if (access(pool, R_OK))
		fail_msg("the build's download cache %s is gone: build again (make) to fetch it", pool);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/cache/debian' && cp -r '%s' '%s/cache/debian/%s'",
		 dir, pool, dir, package);
	assert_int_equal(system(cmd), 0);
}

/* Runs SCRIPT DIR/out offline on DIR's cache; returns its status and output. */
static int fetch_offline(const char *script, const char *dir, char **out)
{
	char cmd[9000];
	snprintf(cmd, sizeof(cmd), "CUBPF_DEPS_CACHE='%s/cache' CUBPF_DEPS_OFFLINE=1 %s '%s/out'",
		 dir, script, dir);
	return run(cmd, out);
}

/* The build's SQLite and zstd are Debian's: the records say so, and the amalgamation carries a
 * fix that only Debian's patches add to 3.40.1 (CVE-2025-6965). */
static void test_sources_are_debian(void **state)
{
	(void)state;
	char *z = source_record("zstd"), *s = source_record("sqlite");
	assert_non_null(strstr(z, "libzstd 1.5.4+dfsg2-"));
	assert_non_null(strstr(z, "Debian source package"));
	assert_non_null(strstr(s, "sqlite3 3.40.1-"));
	assert_non_null(strstr(s, "Debian source package"));
	const char *b = getenv("CUBPF_BUILD");
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "grep -q 'more than %%d aggregate terms' '%s/sqlite/sqlite3.c'",
		 b && *b ? b : "build");
	assert_int_equal(system(cmd), 0);
	free(z);
	free(s);
}

/* One byte added to every cached DIR/cache/debian/PATTERN: SCRIPT, run offline, must refuse
 * with the file named (...SUFFIX has SHA-256 ..., not the pinned ...) and leave DIR/out/PRODUCT
 * absent. */
static void damaged_is_refused(const char *script, const char *dir, const char *pattern,
			       const char *suffix, const char *product)
{
	char cmd[9000], *out = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/out' && for f in '%s'/cache/debian/%s; do "
		 "printf x >>\"$f\"; done", dir, dir, pattern);
	assert_int_equal(system(cmd), 0);
	assert_int_not_equal(fetch_offline(script, dir, &out), 0);
	snprintf(cmd, sizeof(cmd), "%s has SHA-256", suffix);
	assert_non_null(strstr(out, cmd));
	assert_non_null(strstr(out, "not the pinned"));
	snprintf(cmd, sizeof(cmd), "%s/out/%s", dir, product);
	assert_int_not_equal(access(cmd, F_OK), 0);
	free(out);
}

/* With every pinned file cached, zstd unpacks with no network; then a damaged upstream tarball
 * is refused. */
static void test_zstd_offline_then_refused(void **state)
{
	(void)state;
	char *rec = source_record("zstd"), *dir = temp_dir(), *out = NULL, path[4200];
	copy_cache(rec, "libzstd", dir);
	int rc = fetch_offline("store/fetch-zstd.sh", dir, &out);
	if (rc)
		printf("%s", out);
	assert_int_equal(rc, 0);
	snprintf(path, sizeof(path), "%s/out/lib/zstd.h", dir);
	assert_int_equal(access(path, R_OK), 0);
	free(out);
	damaged_is_refused("store/fetch-zstd.sh", dir, "libzstd/*.orig.tar.xz", ".orig.tar.xz",
			   "lib/zstd.h");
	rm_tree(dir);
	free(dir);
	free(rec);
}

/* SQLite: a changed Debian patch set (the .debian.tar.xz) is refused before anything runs. */
static void test_sqlite_refused(void **state)
{
	(void)state;
	char *rec = source_record("sqlite"), *dir = temp_dir();
	copy_cache(rec, "sqlite3", dir);
	damaged_is_refused("store/fetch-sqlite.sh", dir, "sqlite3/*.debian.tar.xz", ".debian.tar.xz",
			   "sqlite3.c");
	rm_tree(dir);
	free(dir);
	free(rec);
}

/* Offline with an empty cache: a clear error, not a download. */
static void test_offline_without_cache(void **state)
{
	(void)state;
	char *dir = temp_dir(), *out = NULL;
	int rc = fetch_offline("store/fetch-zstd.sh", dir, &out);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(out, "CUBPF_DEPS_OFFLINE=1"));
	assert_null(strstr(out, "fetching"));
	free(out);
	rm_tree(dir);
	free(dir);
}

const struct CMUnitTest deps_tests[] = {
	cmocka_unit_test(test_sources_are_debian),
	cmocka_unit_test(test_zstd_offline_then_refused),
	cmocka_unit_test(test_sqlite_refused),
	cmocka_unit_test(test_offline_without_cache),
};
const size_t n_deps_tests = sizeof(deps_tests) / sizeof(deps_tests[0]);
