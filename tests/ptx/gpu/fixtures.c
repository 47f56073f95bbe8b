/* GPU check of instrumented fixture kernels (tests/gpu/t_ptx_fixtures.sh).
 *
 * For every fixture kernel: run the native PTX and the PTX instrumented with count.bpf.o
 * (entry + exit + memory probes), compare the outputs bit for bit, and compare what the probes
 * counted (threads entering and leaving, bytes loaded and stored in global/generic memory) with
 * what the kernel must do.  Then run vec_add with params.bpf.o (kernel parameters, map update,
 * printk through vprintf).  Maps are allocated and bound as the shim does: one device buffer per
 * map, its address stored in __cubpf_map_<i>, globals initialised from the object.
 *
 * usage: ptx_fixtures GPU_DIR PROBE_DIR   (prints one line per check, exit status 1 on failure) */
#include <stdint.h>

#include "ptx-rewriter/ptx.h"
#include "tests/ptx/gpu/common.h"
#include "vm/vm.h"

enum init { ZERO, FRAMP, IRAMP, F4RAMP };

struct buf {
	size_t bytes;
	enum init init;
};

struct fcase {
	const char *name, *file, *kernel;
	unsigned grid, block;
	struct buf bufs[3];
	int nbufs, out;          /* out: the buffer compared */
	int args;                /* 0: (b0,b1,b2,n) 1: (b0,b1,n) 2: (b0,b1,k,n) 3: (b0,n) */
	int n;
	/* expected global+generic traffic; -1: not checked */
	long long load_cnt, load_bytes, store_cnt, store_bytes;
};

static void fill(void *h, const struct buf *b)
{
	size_t n4 = b->bytes / 4;
	for (size_t i = 0; i < n4; i++) {
		if (b->init == ZERO)
			((uint32_t *)h)[i] = 0;
		else if (b->init == IRAMP)
			((int32_t *)h)[i] = (int32_t)i;
		else
			((float *)h)[i] = (float)(i % 4096) * 0.5f + 1.0f;
	}
}

/* Runs the case on module m; returns the output buffer (host copy). */
static void *run(CUmodule m, const struct fcase *c)
{
	CUfunction fn;
	CK(cuModuleGetFunction(&fn, m, c->kernel));
	CUdeviceptr d[3] = {0};
	for (int i = 0; i < c->nbufs; i++) {
		void *h = malloc(c->bufs[i].bytes);
		fill(h, &c->bufs[i]);
		CK(cuMemAlloc(&d[i], c->bufs[i].bytes));
		CK(cuMemcpyHtoD(d[i], h, c->bufs[i].bytes));
		free(h);
	}
	float k = 1.5f;
	int n = c->n;
	void *a0[] = {&d[0], &d[1], &d[2], &n};
	void *a1[] = {&d[0], &d[1], &n};
	void *a2[] = {&d[0], &d[1], &k, &n};
	void *a3[] = {&d[0], &n};
	void **args = c->args == 0 ? a0 : c->args == 1 ? a1 : c->args == 2 ? a2 : a3;
	CK(cuLaunchKernel(fn, c->grid, 1, 1, c->block, 1, 1, 0, NULL, args, NULL));
	CK(cuCtxSynchronize());
	void *out = malloc(c->bufs[c->out].bytes);
	CK(cuMemcpyDtoH(out, d[c->out], c->bufs[c->out].bytes));
	for (int i = 0; i < c->nbufs; i++)
		CK(cuMemFree(d[i]));
	return out;
}

/* Allocates and binds every map of obj in module m; returns the device buffers. */
static CUdeviceptr *bind_maps(CUmodule m, const struct vm_object *obj)
{
	CUdeviceptr *d = calloc(obj->map_cnt + 1, sizeof(*d));
	for (uint32_t i = 0; i < obj->map_cnt; i++) {
		const struct vm_map_def *def = &obj->maps[i];
		size_t bytes = (size_t)ptx_map_value_stride(def) * def->max_entries;
		CK(cuMemAlloc(&d[i], bytes ? bytes : 8));
		CK(cuMemsetD8(d[i], 0, bytes ? bytes : 8));
		if (def->init)
			CK(cuMemcpyHtoD(d[i], def->init, def->value_size));
		gpu_bind_map(m, i, d[i]);
	}
	return d;
}

static struct vm_object *load_obj(const char *dir, const char *name)
{
	char path[1024], err[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	struct vm_object *o;
	if (vm_object_load_file(path, &o, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	return o;
}

static const char *space_name[4] = {"generic", "global", "shared", "local"};
static const char *op_name[5] = {"", "load", "store", "atomic", "reduce"};

static void one_case(const char *gdir, const struct vm_object *count, const struct fcase *c)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/ptx_fix_%s.ptx", gdir, c->file);
	CUmodule nat = gpu_load_ptx(path);
	snprintf(path, sizeof(path), "%s/ptx_fix_%s.count.ptx", gdir, c->file);
	CUmodule ins = gpu_load_ptx(path);
	CUdeviceptr *maps = bind_maps(ins, count);
	void *a = run(nat, c), *b = run(ins, c);
	size_t bytes = c->bufs[c->out].bytes;
	CHECK(!memcmp(a, b, bytes), "%-10s output of the instrumented kernel bit-identical (%zu bytes)",
	      c->name, bytes);
	unsigned long long cnt[64];
	CK(cuMemcpyDtoH(cnt, maps[0], sizeof(cnt)));
	unsigned long long threads = (unsigned long long)c->grid * c->block;
	CHECK(cnt[0] == threads, "%-10s threads entering: %llu (expected %llu)", c->name, cnt[0], threads);
	CHECK(cnt[1] == threads, "%-10s threads leaving:  %llu (expected %llu)", c->name, cnt[1], threads);
	unsigned long long lc = 0, lb = 0, sc = 0, sb = 0;
	for (int sp = 0; sp < 4; sp++)
		for (int op = 1; op <= 4; op++) {
			int k = 8 + 2 * (sp * 4 + op);
			if (cnt[k])
				printf("      %-10s %-7s %-6s %10llu accesses %12llu bytes\n", c->name,
				       space_name[sp], op_name[op], cnt[k], cnt[k + 1]);
			if (sp <= 1 && op == CUBPF_MEM_LOAD)
				lc += cnt[k], lb += cnt[k + 1];
			if (sp <= 1 && op == CUBPF_MEM_STORE)
				sc += cnt[k], sb += cnt[k + 1];
		}
	if (c->load_cnt >= 0)
		CHECK(lc == (unsigned long long)c->load_cnt && lb == (unsigned long long)c->load_bytes,
		      "%-10s global+generic loads: %llu accesses, %llu bytes (expected %lld, %lld)",
		      c->name, lc, lb, c->load_cnt, c->load_bytes);
	if (c->store_cnt >= 0)
		CHECK(sc == (unsigned long long)c->store_cnt && sb == (unsigned long long)c->store_bytes,
		      "%-10s global+generic stores: %llu accesses, %llu bytes (expected %lld, %lld)",
		      c->name, sc, sb, c->store_cnt, c->store_bytes);
	for (uint32_t i = 0; i < count->map_cnt; i++)
		CK(cuMemFree(maps[i]));
	free(maps);
	free(a);
	free(b);
	CK(cuModuleUnload(nat));
	CK(cuModuleUnload(ins));
}

static long long early_ret_stores(int n)
{
	long long s = 0;
	for (int v = 0; v < n; v++)
		if (v % 3 != 0 && (v % 5 == 0 || v % 7 != 0))
			s++;
	return s;
}

static void params_case(const char *gdir, const char *pdir)
{
	struct vm_object *obj = load_obj(pdir, "params.bpf.o");
	char path[1024];
	snprintf(path, sizeof(path), "%s/ptx_fix_vecadd.params.ptx", gdir);
	CUmodule m = gpu_load_ptx(path);
	CUdeviceptr *maps = bind_maps(m, obj);
	struct fcase c = {"params", "vecadd", "_Z7vec_addPKfS0_Pfi", 4, 256,
			  {{4096, FRAMP}, {4096, FRAMP}, {4096, ZERO}}, 3, 2, 0, 1024, -1, -1, -1, -1};
	CUfunction fn;
	CK(cuModuleGetFunction(&fn, m, c.kernel));
	CUdeviceptr d[3];
	for (int i = 0; i < 3; i++) {
		CK(cuMemAlloc(&d[i], 4096));
		CK(cuMemsetD8(d[i], 0, 4096));
	}
	int n = 1024;
	void *args[] = {&d[0], &d[1], &d[2], &n};
	fflush(stdout);
	CK(cuLaunchKernel(fn, c.grid, 1, 1, c.block, 1, 1, 0, NULL, args, NULL));
	CK(cuCtxSynchronize());
	unsigned long long seen[4];
	CK(cuMemcpyDtoH(seen, maps[0], sizeof(seen)));
	unsigned long long want = (unsigned long long)d[2] ^ ptx_kernel_id(c.kernel);
	CHECK(seen[0] == want, "params     params[2] ^ kernel_id read by the probe: %#llx (expected %#llx)",
	      seen[0], want);
	CHECK(seen[1] == 4, "params     nparams read by the probe: %llu (expected 4)", seen[1]);
	printf("      (the device printk line above should read: kernel %u params 4 first %llx)\n",
	       ptx_kernel_id(c.kernel), (unsigned long long)d[0]);
	for (int i = 0; i < 3; i++)
		CK(cuMemFree(d[i]));
	for (uint32_t i = 0; i < obj->map_cnt; i++)
		CK(cuMemFree(maps[i]));
	free(maps);
	vm_object_free(obj);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: ptx_fixtures GPU_DIR PROBE_DIR\n");
		return 2;
	}
	gpu_init();
	struct vm_object *count = load_obj(argv[2], "count.bpf.o");
	const int nv = (1 << 20) + 17, nr = (1 << 20) + 5, ne = 100000, nc = 50000, na = 65536 + 3,
		  np = 10001;
	const unsigned gr = (nr + 255) / 256;
	struct fcase cases[] = {
		{"vec_add", "vecadd", "_Z7vec_addPKfS0_Pfi", (nv + 255) / 256, 256,
		 {{4ull * nv, FRAMP}, {4ull * nv, FRAMP}, {4ull * nv, ZERO}}, 3, 2, 0, nv,
		 2ll * nv, 8ll * nv, nv, 4ll * nv},
		{"vec_add-G", "vecadd_g", "_Z7vec_addPKfS0_Pfi", (nv + 255) / 256, 256,
		 {{4ull * nv, FRAMP}, {4ull * nv, FRAMP}, {4ull * nv, ZERO}}, 3, 2, 0, nv,
		 2ll * nv, 8ll * nv, nv, 4ll * nv},
		{"reduce", "reduce", "_Z10reduce_sumILj256EEvPKfPfj", gr, 256,
		 {{4ull * nr, FRAMP}, {4ull * gr, ZERO}}, 2, 1, 1, nr, nr, 4ll * nr, gr, 4ll * gr},
		{"early_ret", "early_ret", "early_ret", (ne + 127) / 128, 128,
		 {{4ull * ne, IRAMP}, {4ull * ne, ZERO}}, 2, 1, 1, ne, ne, 4ll * ne,
		 early_ret_stores(ne), 4 * early_ret_stores(ne)},
		/* the two stores happen in a .func the kernel calls */
		{"calls", "calls", "calls", (nc + 255) / 256, 256,
		 {{4ull * nc, FRAMP}, {8ull * nc, ZERO}}, 2, 1, 2, nc, nc, 4ll * nc, 2ll * nc, 8ll * nc},
		{"asm_vec", "asmvec", "asm_vec", (na + 255) / 256, 256,
		 {{16ull * na, F4RAMP}, {16ull * na, ZERO}}, 2, 1, 1, na, 2ll * na, 32ll * na, na,
		 16ll * na},
		{"pred_ret", "pred_ret", "pred_ret", (np + 255) / 256, 256, {{4ull * np, ZERO}}, 1, 0, 3,
		 np, 0, 0, np, 4ll * np},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		one_case(argv[1], count, &cases[i]);
	params_case(argv[1], argv[2]);
	vm_object_free(count);
	printf("ptx fixtures: %s (%d failed checks)\n", gpu_failures ? "FAILED" : "all passed", gpu_failures);
	return gpu_failures ? 1 : 0;
}
