/* Runs the 313 conformance programs compiled to PTX on the GPU (tests/gpu/t_ptx_conformance.sh):
 * one thread per program, all in one launch, r0 compared with the expected value.
 * usage: ptx_conf_run DIR   (DIR holds ptx_conformance.ptx and ptx_conformance.txt from conf_gen) */
#include <stdint.h>

#include "tests/ptx/gpu/common.h"

#define SLOT 1024 /* bytes of input memory per program (the largest vector has far less) */

struct t {
	char name[128];
	unsigned long long expect;
	int index;
	unsigned char mem[SLOT];
	size_t len;
};

static int hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: ptx_conf_run DIR\n");
		return 2;
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/ptx_conformance.txt", argv[1]);
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return 1;
	}
	static struct t ts[1024];
	int n = 0, refused = 0, total = 0;
	char line[8192];
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == 'X') {
			printf("FAIL %s (not compiled)", line + 2);
			refused++, total++;
			continue;
		}
		char mem[4096];
		struct t *t = &ts[n];
		if (line[0] != 'T' || n >= 1024 ||
		    sscanf(line, "T %d %127s %llx %4095s", &t->index, t->name, &t->expect, mem) != 4)
			continue;
		t->len = 0;
		if (strcmp(mem, "-"))
			for (size_t k = 0; mem[k] && mem[k + 1] && t->len < SLOT; k += 2)
				t->mem[t->len++] = (unsigned char)(hexval(mem[k]) * 16 + hexval(mem[k + 1]));
		n++, total++;
	}
	fclose(f);
	gpu_init();
	/* bpf-to-bpf calls and 512-byte frames: give each thread a generous stack */
	CK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 32768));
	snprintf(path, sizeof(path), "%s/ptx_conformance.ptx", argv[1]);
	CUmodule m = gpu_load_ptx(path);
	CUfunction fn;
	CK(cuModuleGetFunction(&fn, m, "cubpf_conformance"));
	/* Thread i runs the function conf_<i> of the module: index as written by conf_gen. */
	int nthreads = 0;
	for (int i = 0; i < n; i++)
		if (ts[i].index + 1 > nthreads)
			nthreads = ts[i].index + 1;
	CUdeviceptr dmem, dmems, dlens, dres;
	CK(cuMemAlloc(&dmem, (size_t)SLOT * nthreads));
	CK(cuMemsetD8(dmem, 0, (size_t)SLOT * nthreads));
	unsigned long long *mems = calloc(nthreads, 8), *lens = calloc(nthreads, 8),
			   *res = calloc(nthreads, 8);
	for (int i = 0; i < nthreads; i++)
		mems[i] = dmem + (unsigned long long)SLOT * i;
	for (int i = 0; i < n; i++) {
		lens[ts[i].index] = ts[i].len;
		if (ts[i].len)
			CK(cuMemcpyHtoD(mems[ts[i].index], ts[i].mem, ts[i].len));
	}
	CK(cuMemAlloc(&dmems, 8ull * nthreads));
	CK(cuMemAlloc(&dlens, 8ull * nthreads));
	CK(cuMemAlloc(&dres, 8ull * nthreads));
	CK(cuMemcpyHtoD(dmems, mems, 8ull * nthreads));
	CK(cuMemcpyHtoD(dlens, lens, 8ull * nthreads));
	CK(cuMemsetD8(dres, 0, 8ull * nthreads));
	unsigned nt = (unsigned)nthreads;
	void *args[] = {&dmems, &dlens, &dres, &nt};
	CK(cuLaunchKernel(fn, (nt + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoH(res, dres, 8ull * nthreads));
	int passed = 0;
	for (int i = 0; i < n; i++) {
		unsigned long long got = res[ts[i].index];
		if (got == ts[i].expect)
			passed++;
		else
			printf("FAIL %-36s r0 = %#llx, expected %#llx\n", ts[i].name, got, ts[i].expect);
	}
	printf("ptx conformance on the GPU: %d/%d passed (%d not compiled)\n", passed, total, refused);
	return passed == total ? 0 : 1;
}
