/* Build-time generator for the GPU conformance run: compiles the 313 vectors into one PTX
 * module (ptx_conformance.ptx) and writes the manifest the GPU harness reads (ptx_conformance.txt):
 *   "T index name expected_hex mem_hex|-"   one line per compiled program
 *   "X name reason"                           programs the generator refused (count as failed)
 * Usage: conf_gen CONFORMANCE_DIR OUT_DIR */
#include <stdio.h>
#include <stdlib.h>

#include "tests/ptx/conf.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: conf_gen CONFORMANCE_DIR OUT_DIR\n");
		return 2;
	}
	char err[256];
	struct conf_test *t;
	long n = conf_load(argv[1], &t, err, sizeof(err));
	if (n <= 0) {
		fprintf(stderr, "conf_gen: %s\n", n < 0 ? err : "no vectors");
		return 1;
	}
	struct ptx_buf m = {0};
	int ok = conf_module(t, 0, (size_t)n, false, &m);
	char path[1024];
	snprintf(path, sizeof(path), "%s/ptx_conformance.ptx", argv[2]);
	FILE *f = fopen(path, "w");
	if (!f || m.oom || fwrite(m.data, 1, m.len, f) != m.len) {
		fprintf(stderr, "conf_gen: cannot write %s\n", path);
		return 1;
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/ptx_conformance.txt", argv[2]);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "conf_gen: cannot write %s\n", path);
		return 1;
	}
	conf_manifest(t, (size_t)n, f);
	fclose(f);
	printf("conf_gen: %d/%ld programs compiled to PTX\n", ok, n);
	ptx_buf_free(&m);
	conf_free(t, (size_t)n);
	return 0;
}
