/* tests/ci: the build's own rules (issue 18 items 5 and 6).
 *   - ci/check-names.sh (`make check-names`) passes on this build, and fails naming the symbol
 *     when an object with an unprefixed global name is planted in a copy of vm/'s archive (a
 *     prefixed one planted the same way passes);
 *   - one zstd per build: this program is compiled and linked the way cubpf is (CFLAGS, the
 *     modules' archives, DEP_LIBS), and the version each library's header declares is the one
 *     its linked code reports (zstd, lz4, xxHash); every object of this build whose source
 *     includes zstd.h was compiled against the bundled $(ZSTD_DIR)/lib/zstd.h, never the
 *     system's (the objects' .d files name the header; -MMD leaves system headers out, so a
 *     missing name means /usr/include). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/shell.h"
#include <lz4.h>
#include <xxhash.h>
#include <zstd.h>

static const char *build;


static void test_names_pass(void **state)
{
	(void)state;
	int rc = sh("ci/check-names.sh '%s'", build);
	if (rc != 0)
		print_message("%s", out);
	assert_int_equal(rc, 0);
}

/* A copy of the build's name-checked parts, vm/'s archive with one more object defining NAME;
 * the script's status on it. */
static int check_with_planted(const char *name)
{
	char dir[] = "/tmp/cubpf-test-ci-XXXXXX";
	assert_non_null(mkdtemp(dir));
	int rc = sh("set -e; d=%s; b='%s'; mkdir -p $d/lib $d/obj\n"
		    "for m in cubin ptx store; do ln -s \"$b/lib/libcubpf-$m.a\" $d/lib/; done\n"
		    "cp \"$b/lib/libcubpf-vm.a\" $d/lib/\n"
		    "ln -s \"$b/obj/shim\" \"$b/obj/tools\" $d/obj/\n"
		    "ln -s \"$b/shim\" $d/shim; ln -s \"$b/dropin\" $d/dropin\n"
		    "echo 'int %s(void) { return 1; }' > $d/planted.c\n"
		    "${CC:-cc} -c -fvisibility=hidden -o $d/planted.o $d/planted.c\n"
		    "ar r $d/lib/libcubpf-vm.a $d/planted.o",
		    dir, build, name);
	if (rc != 0)
		print_message("%s", out);
	assert_int_equal(rc, 0);
	rc = sh("ci/check-names.sh %s", dir);
	char saved[sizeof(out)];
	memcpy(saved, out, sizeof(out));
	sh("rm -rf %s", dir);
	memcpy(out, saved, sizeof(out));
	return rc;
}

static void test_names_fail_on_planted(void **state)
{
	(void)state;
	assert_int_equal(check_with_planted("verifier_planted_helper"), 1);
	assert_non_null(strstr(out, "vm: verifier_planted_helper (lib/libcubpf-vm.a:planted.o)"));
	/* the same with the module's prefix passes: the failure was the name */
	int rc = check_with_planted("vm_planted_helper");
	if (rc != 0)
		print_message("%s", out);
	assert_int_equal(rc, 0);
}

static void test_names_need_a_build(void **state)
{
	(void)state;
	/* nothing to read is not a pass */
	assert_int_equal(sh("ci/check-names.sh /nonexistent-build"), 2);
}

static void test_versions_match(void **state)
{
	(void)state;
	assert_int_equal(ZSTD_versionNumber(), ZSTD_VERSION_NUMBER);
	assert_int_equal(LZ4_versionNumber(), LZ4_VERSION_NUMBER);
	assert_int_equal(XXH_versionNumber(), XXH_VERSION_NUMBER);
	/* and the zstd is the bundled one: its version is the fetched source's */
	assert_int_equal(sh("grep -q '^#define ZSTD_VERSION_RELEASE *%d$' '%s/zstd/lib/zstd.h'",
			    ZSTD_VERSION_RELEASE, build), 0);
}

/* Every .d of this build whose source includes zstd.h names the bundled header. */
static void test_zstd_users_use_the_bundled_header(void **state)
{
	(void)state;
	int rc = sh("cd '%s/obj' || exit 2; n=0; bad=0\n"
		    "for d in $(find . -path ./zstd -prune -o -name '*.d' -print); do\n"
		    "  src=$(sed -n '1s/^[^:]*: *\\([^ ]*\\).*/\\1/p' $d)\n"
		    "  case $src in /*) ;; *) src=\"$OLDPWD/$src\";; esac\n"
		    "  [ -f \"$src\" ] && grep -q '^#include <zstd.h>' \"$src\" || continue\n"
		    "  n=$((n + 1))\n"
		    "  grep -q '/zstd/lib/zstd.h' $d || { echo \"$d: not the bundled zstd.h\"; bad=1; }\n"
		    "done\n"
		    "echo \"$n users of zstd.h\"; [ $bad = 0 ] && [ $n -ge 3 ]",
		    build);
	print_message("%s", out);
	assert_int_equal(rc, 0);
}

int main(void)
{
	build = getenv("CUBPF_BUILD");
	if (!build || !*build)
		build = "build";
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_pass),
		cmocka_unit_test(test_names_fail_on_planted),
		cmocka_unit_test(test_names_need_a_build),
		cmocka_unit_test(test_versions_match),
		cmocka_unit_test(test_zstd_users_use_the_bundled_header),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
