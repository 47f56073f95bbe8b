/* The plugin's gpu engine: the program is compiled to a PTX device function by ptx-rewriter/,
 * wrapped in a one-thread kernel, JIT-loaded by the CUDA driver and run with the input memory
 * in device memory.  The driver is opened with dlopen so that the plugin runs (and says why the
 * engine is unavailable) on machines without one. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ptx-rewriter/ptx.h"
#include "tools/plugin/plugin.h"

/* The few driver types and entry points used (stable C ABI of libcuda.so.1). */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction;
typedef unsigned long long CUdeviceptr;
#define CU_LIMIT_STACK_SIZE 0
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

struct cuda {
	void *lib;
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*primary_release)(CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*ctx_set_limit)(int, size_t);
	CUresult (*ctx_sync)(void);
	CUresult (*module_load)(CUmodule *, const void *, unsigned, int *, void **);
	CUresult (*module_unload)(CUmodule);
	CUresult (*get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, void *, void **, void **);
	CUresult (*error_string)(CUresult, const char **);
};

static int cuda_open(struct cuda *c, char *err, size_t errlen)
{
	c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!c->lib) {
		snprintf(err, errlen, "the gpu engine needs the CUDA driver: %s", dlerror());
		return -1;
	}
	struct {
		void **slot;
		const char *name;
	} syms[] = {
		{(void **)&c->init, "cuInit"},
		{(void **)&c->device_get, "cuDeviceGet"},
		{(void **)&c->primary_retain, "cuDevicePrimaryCtxRetain"},
		{(void **)&c->primary_release, "cuDevicePrimaryCtxRelease_v2"},
		{(void **)&c->ctx_set_current, "cuCtxSetCurrent"},
		{(void **)&c->ctx_set_limit, "cuCtxSetLimit"},
		{(void **)&c->ctx_sync, "cuCtxSynchronize"},
		{(void **)&c->module_load, "cuModuleLoadDataEx"},
		{(void **)&c->module_unload, "cuModuleUnload"},
		{(void **)&c->get_function, "cuModuleGetFunction"},
		{(void **)&c->mem_alloc, "cuMemAlloc_v2"},
		{(void **)&c->mem_free, "cuMemFree_v2"},
		{(void **)&c->htod, "cuMemcpyHtoD_v2"},
		{(void **)&c->dtoh, "cuMemcpyDtoH_v2"},
		{(void **)&c->launch, "cuLaunchKernel"},
		{(void **)&c->error_string, "cuGetErrorString"},
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
		if (!(*syms[i].slot = dlsym(c->lib, syms[i].name))) {
			snprintf(err, errlen, "the CUDA driver lacks %s", syms[i].name);
			return -1;
		}
	return 0;
}

static int cu_fail(struct cuda *c, CUresult rc, const char *what, char *err, size_t errlen)
{
	const char *s = NULL;
	if (c->error_string)
		c->error_string(rc, &s);
	snprintf(err, errlen, "%s failed: %s (%d)", what, s ? s : "unknown error", rc);
	return -1;
}

#define CU(call, what)                                                  \
	do {                                                            \
		CUresult rc_ = (call);                                  \
		if (rc_ != 0)                                           \
			return cu_fail(c, rc_, what, err, errlen);      \
	} while (0)

static const char wrapper[] =
	".visible .entry cubpf_plugin(.param .u64 mem, .param .u64 len, .param .u64 result)\n"
	"{\n\t.reg .b64 %a<4>;\n"
	"\tld.param.u64 %a0, [mem];\n\tld.param.u64 %a1, [len];\n"
	"\tld.param.u64 %a2, [result];\n\tcvta.to.global.u64 %a2, %a2;\n"
	"\t{\n\t.param .b64 p0;\n\t.param .b64 p1;\n\t.param .b64 rv;\n"
	"\tst.param.b64 [p0], %a0;\n\tst.param.b64 [p1], %a1;\n"
	"\tcall (rv), cubpf_prog, (p0, p1);\n\tld.param.b64 %a3, [rv];\n\t}\n"
	"\tst.global.u64 [%a2], %a3;\n\tret;\n}\n";

int tool_plugin_gpu_ptx(const void *code, size_t code_len, struct ptx_buf *out, char *err,
		   size_t errlen)
{
	if (code_len == 0 || code_len % 8) {
		snprintf(err, errlen, "program size %zu is not a positive multiple of 8 bytes", code_len);
		return -1;
	}
	struct vm_object *obj = vm_object_from_insns(code, (uint32_t)(code_len / 8), VM_PROG_RAW,
						     err, errlen);
	if (!obj)
		return -1;
	struct ptx_prog p = {.name = "plugin", .kind = VM_PROG_RAW, .insns = obj->progs[0].insns,
			     .insn_cnt = obj->progs[0].insn_cnt};
	ptx_buf_printf(out, ".version 8.0\n.target sm_80\n.address_size 64\n\n");
	ptx_gen_module_decls(0, true, out);
	int rc = ptx_gen_raw_func(&p, NULL, 0, "cubpf_prog", out, err, errlen);
	vm_object_free(obj);
	if (rc == 0)
		ptx_buf_append(out, wrapper, sizeof(wrapper) - 1);
	if (rc == 0 && out->oom) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	return rc;
}

static int launch(struct cuda *c, const char *ptx, void *mem, size_t mem_len, uint64_t *r0,
		  char *err, size_t errlen)
{
	char log[4096] = "";
	int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)sizeof(log)};
	CUmodule mod;
	CUfunction fn;
	CUresult rc = c->module_load(&mod, ptx, 2, opts, vals);
	if (rc != 0) {
		cu_fail(c, rc, "loading the generated PTX", err, errlen);
		size_t n = strlen(err);
		snprintf(err + n, errlen - n, "; JIT log: %.200s", log);
		return -1;
	}
	CU(c->get_function(&fn, mod, "cubpf_plugin"), "cuModuleGetFunction");
	CUdeviceptr dmem = 0, dres = 0;
	if (mem_len) {
		CU(c->mem_alloc(&dmem, mem_len), "cuMemAlloc");
		CU(c->htod(dmem, mem, mem_len), "cuMemcpyHtoD");
	}
	CU(c->mem_alloc(&dres, 8), "cuMemAlloc");
	uint64_t len = mem_len;
	void *params[] = {&dmem, &len, &dres};
	CU(c->launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
	CU(c->ctx_sync(), "running the program");
	CU(c->dtoh(r0, dres, 8), "cuMemcpyDtoH");
	if (mem_len)
		c->mem_free(dmem);
	c->mem_free(dres);
	c->module_unload(mod);
	return 0;
}

static int run_on_device(struct cuda *c, const char *ptx, void *mem, size_t mem_len,
			 uint64_t *r0, char *err, size_t errlen)
{
	CUdevice dev;
	CUcontext ctx;
	CU(c->init(0), "cuInit");
	CU(c->device_get(&dev, 0), "cuDeviceGet");
	CU(c->primary_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	int rc = -1;
	if (c->ctx_set_current(ctx) != 0)
		snprintf(err, errlen, "cuCtxSetCurrent failed");
	else if (c->ctx_set_limit(CU_LIMIT_STACK_SIZE, 32768) != 0) /* 8 frames of 512 bytes */
		snprintf(err, errlen, "cuCtxSetLimit(stack) failed");
	else
		rc = launch(c, ptx, mem, mem_len, r0, err, errlen);
	c->primary_release(dev);
	return rc;
}

int tool_plugin_gpu_run(const void *code, size_t code_len, void *mem, size_t mem_len, uint64_t *r0,
		   char *err, size_t errlen)
{
	struct ptx_buf ptx = {0};
	struct cuda c = {0};
	int rc = tool_plugin_gpu_ptx(code, code_len, &ptx, err, errlen);
	if (rc == 0)
		rc = cuda_open(&c, err, errlen);
	if (rc == 0) {
		ptx_buf_append(&ptx, "", 1); /* the driver reads a NUL-terminated image */
		rc = run_on_device(&c, ptx.data, mem, mem_len, r0, err, errlen);
	}
	ptx_buf_free(&ptx);
	if (c.lib)
		dlclose(c.lib);
	return rc;
}
