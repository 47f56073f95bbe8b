/* A CUDA "application" for cubpf run on the CPU: loads a PTX module through libcuda.so.1 (the
 * shim, over the fake driver of tests/shim), launches its kernel 3 times (5 x 32 threads) and
 * exits with the status given as argv[1], so that the report is checked on a failing app too. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*load_fn)(void **, const void *);
typedef int (*getfn_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n\n"
	".visible .entry tools_k(\n\t.param .u64 tools_k_param_0\n)\n{\n\tret;\n}\n";

int main(int argc, char **argv)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	void *mod = NULL, *f = NULL;
	if (!cu) {
		fprintf(stderr, "fake_app: %s\n", dlerror());
		return 100;
	}
	if (((load_fn)dlsym(cu, "cuModuleLoadData"))(&mod, ptx) != 0 ||
	    ((getfn_fn)dlsym(cu, "cuModuleGetFunction"))(&f, mod, "tools_k") != 0) {
		fprintf(stderr, "fake_app: module load failed\n");
		return 101;
	}
	for (int i = 0; i < 3; i++)
		if (((launch_fn)dlsym(cu, "cuLaunchKernel"))(f, 5, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL))
			return 102;
	printf("fake_app: done\n");
	fprintf(stderr, "fake_app: a line of the app's own stderr\n");
	return argc > 1 ? atoi(argv[1]) : 0;
}
