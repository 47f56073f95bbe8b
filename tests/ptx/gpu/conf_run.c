/* Runs the 313 conformance programs compiled to PTX on the GPU (tests/gpu/t_ptx_conformance.sh):
 * one thread per program, all in one launch, r0 compared with the expected value.
 * A program that faults (misaligned or illegal address) kills its context and with it every
 * result of the launch, so a faulting launch is split in halves, each run in a fresh context
 * (the primary context reset), down to single programs: one bad program is reported as such and
 * the others still get their results.
 * usage: ptx_conf_run DIR   (DIR holds ptx_conformance.ptx and ptx_conformance.txt from conf_gen) */
#include <stdint.h>

#include "tests/ptx/gpu/common.h"

#define SLOT 1024 /* bytes of input memory per program (the largest vector has far less) */
#define MAXT 1024

struct t {
	char name[128];
	unsigned long long expect;
	int index;
	unsigned char mem[SLOT];
	size_t len;
};

static struct t ts[MAXT];
static int by_index[MAXT];              /* program index -> ts entry, -1 when none */
static unsigned long long res[MAXT];
static char fault[MAXT][96];            /* the error of a program that faulted alone */
static CUdevice dev;
static char ptx_path[1100];

static int hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

static const char *errstr(CUresult rc)
{
	const char *s = NULL;
	cuGetErrorString(rc, &s);
	return s ? s : "?";
}

/* Loads the manifest; returns the number of T lines, counts X lines in *refused. */
static int load_manifest(const char *dir, int *refused)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/ptx_conformance.txt", dir);
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	int n = 0;
	char line[8192], mem[4096];
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == 'X') {
			printf("FAIL %s (not compiled)", line + 2);
			(*refused)++;
			continue;
		}
		struct t *t = &ts[n];
		if (line[0] != 'T' || n >= MAXT ||
		    sscanf(line, "T %d %127s %llx %4095s", &t->index, t->name, &t->expect, mem) != 4 ||
		    t->index < 0 || t->index >= MAXT)
			continue;
		t->len = 0;
		if (strcmp(mem, "-"))
			for (size_t k = 0; mem[k] && mem[k + 1] && t->len < SLOT; k += 2)
				t->mem[t->len++] = (unsigned char)(hexval(mem[k]) * 16 + hexval(mem[k + 1]));
		n++;
	}
	fclose(f);
	return n;
}

#define TRY(call)                                  \
	do {                                       \
		if ((rc = (call)) != CUDA_SUCCESS) \
			goto out;                  \
	} while (0)

/* Runs programs [first, first + cnt) in one launch in a fresh primary context; their results go
 * to res[].  Returns CUDA_SUCCESS or the error that ended the launch. */
static CUresult run_range(int first, int cnt)
{
	CUcontext ctx;
	CUresult rc;
	CUdeviceptr dmem = 0, dmems = 0, dlens = 0, dres = 0;
	CUmodule m = NULL;
	CUfunction fn;
	unsigned long long mems[MAXT], lens[MAXT];
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	/* bpf-to-bpf calls and 512-byte frames: give each thread a generous stack */
	TRY(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 32768));
	m = gpu_load_ptx(ptx_path); /* the driver's JIT cache makes reloads cheap */
	TRY(cuModuleGetFunction(&fn, m, "cubpf_conformance"));
	TRY(cuMemAlloc(&dmem, (size_t)SLOT * cnt));
	TRY(cuMemsetD8(dmem, 0, (size_t)SLOT * cnt));
	for (int i = 0; i < cnt; i++) {
		int k = by_index[first + i];
		mems[i] = dmem + (unsigned long long)SLOT * i;
		lens[i] = k >= 0 ? ts[k].len : 0;
		if (k >= 0 && ts[k].len)
			TRY(cuMemcpyHtoD(mems[i], ts[k].mem, ts[k].len));
	}
	TRY(cuMemAlloc(&dmems, 8ull * cnt));
	TRY(cuMemAlloc(&dlens, 8ull * cnt));
	TRY(cuMemAlloc(&dres, 8ull * cnt));
	TRY(cuMemcpyHtoD(dmems, mems, 8ull * cnt));
	TRY(cuMemcpyHtoD(dlens, lens, 8ull * cnt));
	TRY(cuMemsetD8(dres, 0, 8ull * cnt));
	unsigned nt = (unsigned)cnt, f0 = (unsigned)first;
	void *args[] = {&dmems, &dlens, &dres, &nt, &f0};
	TRY(cuLaunchKernel(fn, (nt + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
	TRY(cuCtxSynchronize());
	TRY(cuMemcpyDtoH(res + first, dres, 8ull * cnt));
out:
	if (rc == CUDA_SUCCESS) {
		cuMemFree(dmem), cuMemFree(dmems), cuMemFree(dlens), cuMemFree(dres);
		cuModuleUnload(m);
	} else {
		/* a fault is sticky: only a reset gives the next range a working context */
		cuDevicePrimaryCtxReset(dev);
	}
	cuDevicePrimaryCtxRelease(dev);
	return rc;
}

/* Runs a range; on a fault splits it until the faulting programs are alone. */
static void run_isolating(int first, int cnt)
{
	CUresult rc = run_range(first, cnt);
	if (rc == CUDA_SUCCESS)
		return;
	if (cnt == 1) {
		snprintf(fault[first], sizeof(fault[first]), "%s", errstr(rc));
		return;
	}
	printf("launch of programs %d..%d failed (%s): running them in halves\n", first,
	       first + cnt - 1, errstr(rc));
	run_isolating(first, cnt / 2);
	run_isolating(first + cnt / 2, cnt - cnt / 2);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: ptx_conf_run DIR\n");
		return 2;
	}
	int refused = 0;
	int n = load_manifest(argv[1], &refused);
	int total = n + refused;
	snprintf(ptx_path, sizeof(ptx_path), "%s/ptx_conformance.ptx", argv[1]);
	gpu_init();
	CK(cuDeviceGet(&dev, 0));
	int nthreads = 0;
	for (int i = 0; i < MAXT; i++)
		by_index[i] = -1;
	for (int i = 0; i < n; i++) {
		by_index[ts[i].index] = i;
		if (ts[i].index + 1 > nthreads)
			nthreads = ts[i].index + 1;
	}
	for (int i = 0; i < nthreads; i++)
		res[i] = 0xDEADBEEFDEADBEEFull;
	run_isolating(0, nthreads);
	int passed = 0, faulted = 0;
	for (int i = 0; i < n; i++) {
		int x = ts[i].index;
		if (fault[x][0]) {
			printf("FAIL %-36s faulted alone: %s\n", ts[i].name, fault[x]);
			faulted++;
		} else if (res[x] == ts[i].expect) {
			passed++;
		} else {
			printf("FAIL %-36s r0 = %#llx, expected %#llx\n", ts[i].name, res[x],
			       ts[i].expect);
		}
	}
	printf("ptx conformance on the GPU: %d/%d passed (%d faulted, %d not compiled)\n", passed,
	       total, faulted, refused);
	printf("RESULT ptx_conformance %s %d/%d\n", passed == total ? "PASS" : "FAIL", passed, total);
	return passed == total ? 0 : 1;
}
