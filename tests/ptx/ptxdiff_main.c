/* ptx-diff: the differential harness of tests/ptx/ptxdiff.h on every program of an object.
 * usage: ptx-diff [-n RUNS] [-s SEED] [-f] [-o DIR] OBJ.bpf.o...
 *   each program is verified, run on the interpreter over RUNS random contexts and map contents
 *   (seed SEED), compiled to PTX (-f: with constant folding, as probes are) and, without -o,
 *   run on tests/ptx/ptxsim.py: prints "same OBJ:PROG", "DIFF OBJ:PROG: first difference",
 *   "skip OBJ:PROG: why" (rejected by the verifier or out of scope) or "FAIL OBJ:PROG: error".
 *   With -o the module and cases are written to DIR/PROG.ptx and DIR/PROG.cases for the GPU
 *   runner (tests/ptx/gpu/diff_run.c) instead.  Exit status 1 on any DIFF or FAIL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ptx/ptxdiff.h"

static int one(const char *path, const struct ptxdiff_opts *o, const char *dir)
{
	struct vm_object *obj;
	char err[1024];
	if (vm_object_load_file(path, &obj, err, sizeof(err))) {
		printf("FAIL %s: %s\n", path, err);
		return 1;
	}
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	int bad = 0;
	for (uint32_t i = 0; i < obj->prog_cnt; i++) {
		const char *name = obj->progs[i].name;
		struct vm_verify_info info;
		if (vm_verify_sanitize(obj, i, NULL, &info, NULL, 0)) {
			printf("skip %s:%s: rejected by the verifier: %s\n", base, name, info.reason);
			continue;
		}
		int rc;
		if (dir) {
			char ptx[1024], cases[1024];
			snprintf(ptx, sizeof(ptx), "%s/%s.ptx", dir, name);
			snprintf(cases, sizeof(cases), "%s/%s.cases", dir, name);
			rc = ptxdiff_prepare(obj, i, o, ptx, cases, err, sizeof(err));
		} else {
			rc = ptxdiff_check(obj, i, o, err, sizeof(err));
		}
		if (rc == 0)
			printf("%s %s:%s\n", dir ? "wrote" : "same", base, name);
		else
			printf("%s %s:%s: %s\n", rc == 1 ? "skip" : rc == 2 ? "DIFF" : "FAIL", base, name,
			       err);
		bad |= rc == -1 || rc == 2;
	}
	vm_object_free(obj);
	return bad;
}

int main(int argc, char **argv)
{
	struct ptxdiff_opts o = {.runs = 8, .seed = 1};
	const char *dir = NULL;
	int c;
	while ((c = getopt(argc, argv, "n:s:fo:")) != -1) {
		switch (c) {
		case 'n': o.runs = (unsigned)strtoul(optarg, NULL, 0); break;
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 'f': o.fold = true; break;
		case 'o': dir = optarg; break;
		default:
			fprintf(stderr, "usage: ptx-diff [-n RUNS] [-s SEED] [-f] [-o DIR] OBJ.bpf.o...\n");
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: ptx-diff [-n RUNS] [-s SEED] [-f] [-o DIR] OBJ.bpf.o...\n");
		return 2;
	}
	int bad = 0;
	for (int i = optind; i < argc; i++)
		bad |= one(argv[i], &o, dir);
	return bad;
}
