/* tests/deps: ci/check-deps.sh, the check that the modules' includes point one way (issue 18,
 * CONTRIBUTING.md "Dependencies").
 *   - on the repository as it is: exit 0;
 *   - on a copy of the module folders with includes planted that point up or sideways (quoted,
 *     relative with "..", angled, a probe source through its -I tools/include, a module header
 *     that does not exist): exit 1, one line FILE:LINE: MODULE includes OTHER/PATH for each,
 *     and nothing else named;
 *   - on a copy with includes the order allows (tools -> shim, shim -> ptx-rewriter, vm -> cubin):
 *     exit 0.
 * Runs from the repository root (tests/run-tests.sh); the copy is made in a fresh /tmp folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/shell.h"

#ifndef DEPS_TEST_SRC
#define DEPS_TEST_SRC "."
#endif

#define SCRIPT DEPS_TEST_SRC "/ci/check-deps.sh"
#define MODULES "cubin vm ptx-rewriter store shim tools"

static char tmp[] = "/tmp/cubpf-test-deps-XXXXXX";


/* Lines of out naming an include (" includes "): the violations the script named. */
static int named(void)
{
	int n = 0;
	for (const char *p = out; (p = strstr(p, " includes ")); p++)
		n++;
	return n;
}

/* A fresh copy of the module folders in tmp/tree. */
static void fresh_copy(void)
{
	assert_int_equal(sh("rm -rf %s/tree && mkdir %s/tree && cd %s && cp -r " MODULES " %s/tree/",
			    tmp, tmp, DEPS_TEST_SRC, tmp), 0);
}

/* Puts the line `text` first in tmp/tree/FILE (so it is line 1). */
static void plant(const char *file, const char *text)
{
	assert_int_equal(sh("cd %s/tree && { printf '%%s\\n' '%s'; cat %s; } > x.tmp && mv x.tmp %s",
			    tmp, text, file, file), 0);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_repository_passes(void **state)
{
	(void)state;
	int rc = sh(SCRIPT " " DEPS_TEST_SRC);
	if (rc != 0)
		fail_msg("check-deps failed on the repository (status %d):\n%s", rc, out);
	has("none points up");
	assert_int_equal(named(), 0);
	/* with no argument it checks the repository it lives in */
	assert_int_equal(sh(SCRIPT), 0);
	/* and the copy, untouched, passes too (the copy is what the next tests plant into) */
	fresh_copy();
	assert_int_equal(sh(SCRIPT " %s/tree", tmp), 0);
}

static void test_planted_includes_fail(void **state)
{
	(void)state;
	fresh_copy();
	plant("vm/common.c", "#include \"ptx-rewriter/ptx.h\"");       /* up one */
	plant("store/ids.c", "#include \"vm/vm.h\"");                  /* sideways */
	plant("cubin/elf.c", "#include \"../tools/include/cubpf_abi.h\""); /* relative, to the top */
	plant("ptx-rewriter/internal.h", "#include <shim/shim.h>");     /* angled */
	plant("vm/verifier.h", "#include \"tools/no-such-header.h\"");  /* names a module */
	plant("shim/wrap_ctx.c", "#include \"live/internal.h\"");      /* core to its plug-in */
	plant("shim/live/rb.c", "#include \"shim/internal.h\"");      /* a private header */
	assert_int_equal(sh("printf '#include \"cubpf_helpers.h\"\\n' > %s/tree/shim/p.bpf.c", tmp), 0);
	int rc = sh(SCRIPT " %s/tree", tmp);
	if (rc != 1)
		fail_msg("check-deps exited %d on planted includes:\n%s", rc, out);
	has("vm/common.c:1: vm includes ptx-rewriter/ptx.h\n");
	has("store/ids.c:1: store includes vm/vm.h\n");
	has("cubin/elf.c:1: cubin includes tools/include/cubpf_abi.h\n");
	has("ptx-rewriter/internal.h:1: ptx-rewriter includes shim/shim.h\n");
	has("vm/verifier.h:1: vm includes tools/no-such-header.h\n");
	has("shim/p.bpf.c:1: shim includes tools/include/cubpf_helpers.h\n");
	has("shim/wrap_ctx.c:1: shim includes shim/live/internal.h (private to shim/live/)\n");
	has("shim/live/rb.c:1: shim/live includes shim/internal.h (private to shim/)\n");
	if (named() != 8)
		fail_msg("expected exactly the 8 planted includes named:\n%s", out);
}

static void test_allowed_includes_pass(void **state)
{
	(void)state;
	fresh_copy();
	plant("tools/cubpf.c", "#include \"shim/shim.h\"");
	plant("shim/report.c", "#include \"ptx-rewriter/ptx.h\"");
	plant("shim/live/rb.c", "#include \"shim/shim.h\"");
	plant("ptx-rewriter/buf.c", "#include \"store/store.h\"");
	plant("vm/common.c", "#include \"cubin/cubin.h\"");
	plant("cubin/elf.c", "#include <stdio.h>");
	int rc = sh(SCRIPT " %s/tree", tmp);
	if (rc != 0)
		fail_msg("check-deps exited %d on allowed includes:\n%s", rc, out);
}

static void test_usage(void **state)
{
	(void)state;
	assert_int_equal(sh(SCRIPT " %s/no-such-folder", tmp), 2);
	has("no such folder");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repository_passes),
		cmocka_unit_test(test_planted_includes_fail),
		cmocka_unit_test(test_allowed_includes_pass),
		cmocka_unit_test(test_usage),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
