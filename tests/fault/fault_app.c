/* An application for the fault suite's kills: through libcuda.so.1 (the shim over the fake
 * driver of tests/shim) it loads a PTX module and launches its kernel in a loop, N times, with a
 * pause of SLEEP_US after each launch, printing "launched K" every 10 launches, so that a kill
 * lands mid-run and the test knows how many launches were made before it.
 *   fault_app N SLEEP_US */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*load_fn)(void **, const void *);
typedef int (*getfn_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n\n"
	".visible .entry fault_k(\n\t.param .u64 fault_k_param_0\n)\n{\n\tret;\n}\n";

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100;
	useconds_t pause = argc > 2 ? (useconds_t)atol(argv[2]) : 0;
	void *cu = dlopen("libcuda.so.1", RTLD_NOW), *mod = NULL, *f = NULL;
	if (!cu || ((load_fn)dlsym(cu, "cuModuleLoadData"))(&mod, ptx) != 0 ||
	    ((getfn_fn)dlsym(cu, "cuModuleGetFunction"))(&f, mod, "fault_k") != 0) {
		fprintf(stderr, "fault_app: no module (%s)\n", cu ? "load failed" : dlerror());
		return 100;
	}
	launch_fn launch = (launch_fn)dlsym(cu, "cuLaunchKernel");
	for (long i = 1; i <= n; i++) {
		if (launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL))
			return 101;
		if (i % 10 == 0) {
			printf("launched %ld\n", i);
			fflush(stdout);
		}
		if (pause)
			usleep(pause);
	}
	return 0;
}
