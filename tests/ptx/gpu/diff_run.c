/* GPU side of the differential harness (tests/ptx/ptxdiff.h): runs each module + cases pair
 * written by `ptx-diff -o DIR` on the GPU, one thread per run, and compares r0 and every map
 * byte with the interpreter's results recorded in the cases file.
 * usage: ptx_diff_run DIR NAME...   (DIR/NAME.ptx, DIR/NAME.cases)
 * Prints "ok    NAME: N runs agree" or "FAIL  NAME: ..."; exit status 1 on any failure. */
#include <stdint.h>

#include "tests/ptx/gpu/common.h"

#define MAXM 64

static size_t unhex(const char *s, size_t n, uint8_t *out)
{
	if (n == 1 && s[0] == '-')
		return 0;
	for (size_t i = 0; i + 1 < n; i += 2) {
		unsigned v;
		sscanf(s + i, "%2x", &v);
		out[i / 2] = (uint8_t)v;
	}
	return n / 2;
}

/* The i-th comma-separated field of s (length *n). */
static const char *field(const char *s, int i, size_t *n)
{
	while (i-- > 0 && (s = strchr(s, ',')))
		s++;
	if (!s)
		return NULL;
	*n = strcspn(s, ",");
	return s;
}

static int run_pair(const char *dir, const char *name)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s.ptx", dir, name);
	CUmodule mod = gpu_load_ptx(path);
	CUfunction k;
	CK(cuModuleGetFunction(&k, mod, "ptxdiff_k"));
	snprintf(path, sizeof(path), "%s/%s.cases", dir, name);
	char *text = gpu_read_file(path);
	unsigned nmaps = 0, runs = 0, bad = 0;
	size_t bytes[MAXM] = {0};
	CUdeviceptr dmap[MAXM] = {0}, dctx = 0, dres;
	CK(cuMemAlloc(&dres, 8));
	static uint8_t buf[1 << 20], got[1 << 20];
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == 'M') {
			nmaps = (unsigned)strtoul(line + 2, NULL, 10);
			const char *l = strchr(line + 2, ' ') + 1;
			for (unsigned i = 0; i < nmaps && i < MAXM; i++) {
				size_t n;
				const char *f = field(l, (int)i, &n);
				bytes[i] = f ? strtoull(f, NULL, 10) : 0;
				CK(cuMemAlloc(&dmap[i], bytes[i] ? bytes[i] : 8));
				gpu_bind_map(mod, i, dmap[i]);
			}
			continue;
		}
		if (line[0] != 'C')
			continue;
		char *ctxs = line + 2, *r0s = strchr(ctxs, ' ') + 1, *ins = strchr(r0s, ' ') + 1;
		char *outs = strchr(ins, ' ') + 1;
		size_t clen = unhex(ctxs, (size_t)(r0s - 1 - ctxs), buf);
		uint64_t exp = strtoull(r0s, NULL, 16);
		if (dctx)
			cuMemFree(dctx);
		CK(cuMemAlloc(&dctx, clen ? clen : 8));
		if (clen)
			CK(cuMemcpyHtoD(dctx, buf, clen));
		for (unsigned i = 0; i < nmaps; i++) {
			size_t n;
			const char *f = field(ins, (int)i, &n);
			size_t m = f ? unhex(f, n < (size_t)(outs - 1 - f) ? n : (size_t)(outs - 1 - f), buf)
				     : 0;
			if (m)
				CK(cuMemcpyHtoD(dmap[i], buf, m));
		}
		uint64_t len = clen;
		void *args[] = {&dctx, &len, &dres};
		runs++;
		CUresult rc = cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
		if (rc == CUDA_SUCCESS)
			rc = cuCtxSynchronize();
		if (rc != CUDA_SUCCESS) {
			const char *s = NULL;
			cuGetErrorString(rc, &s);
			printf("FAIL  %s run %u: the kernel failed: %s\n", name, runs, s ? s : "?");
			exit(1); /* the context is gone */
		}
		uint64_t r0;
		CK(cuMemcpyDtoH(&r0, dres, 8));
		if (r0 != exp) {
			printf("FAIL  %s run %u: r0 %#llx on the GPU, %#llx on the interpreter\n", name,
			       runs, (unsigned long long)r0, (unsigned long long)exp);
			bad++;
			continue;
		}
		for (unsigned i = 0; i < nmaps; i++) {
			size_t n;
			const char *f = field(outs, (int)i, &n);
			size_t m = f ? unhex(f, n, buf) : 0;
			if (!m)
				continue;
			CK(cuMemcpyDtoH(got, dmap[i], m));
			if (memcmp(got, buf, m)) {
				size_t j = 0;
				while (got[j] == buf[j])
					j++;
				printf("FAIL  %s run %u: map %u byte %zu: %#x on the GPU, %#x on the "
				       "interpreter\n", name, runs, i, j, got[j], buf[j]);
				bad++;
				break;
			}
		}
	}
	if (!runs) {
		printf("FAIL  %s: no runs in its cases file\n", name);
		bad++;
	} else if (!bad) {
		printf("ok    %s: %u runs agree with the interpreter (r0 and every map byte)\n", name,
		       runs);
	}
	for (unsigned i = 0; i < nmaps && i < MAXM; i++)
		cuMemFree(dmap[i]);
	if (dctx)
		cuMemFree(dctx);
	cuMemFree(dres);
	cuModuleUnload(mod);
	free(text);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: ptx_diff_run DIR NAME...\n");
		return 2;
	}
	gpu_init();
	int bad = 0;
	for (int i = 2; i < argc; i++)
		bad |= run_pair(argv[1], argv[i]);
	return bad;
}
