/* test_vm: every vm/ test group in one cmocka run (the runner reads one summary). */
#include <stdlib.h>

#include "tests/vm/tests.h"

int main(void)
{
	size_t cap = 2048, n = 0;
	struct CMUnitTest *tests = calloc(cap, sizeof(*tests));
	if (!tests)
		return 1;
	n += conformance_tests(tests + n, cap - n);
	n += verifier_tests(tests + n, cap - n);
	n += cprog_tests(tests + n, cap - n);
	n += loader_tests(tests + n, cap - n);
	n += runtime_tests(tests + n, cap - n);
	n += corpus_tests(tests + n, cap - n);
	int failed = _cmocka_run_group_tests("vm", tests, n, NULL, NULL);
	free(tests);
	return failed;
}
