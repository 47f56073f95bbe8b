/* Patch functions (the Sanitizer backend, ptx-rewriter/patch.c): the bundled tools' programs
 * compile to patch modules that assemble in tools-patch mode for sm_80 and sm_90
 * (`ptxas --compile-as-tools-patch`, PTXAS), never use redux (refused in that mode), reach maps
 * through the launch record only, and the context fields without meaning there are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptx-rewriter/ptx.h"
#include "ptx-rewriter/layout.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		fail_msg("%s is not set (run through tests/run-tests.sh)", name);
	return v;
}

/* ptxas in tools-patch mode on text; 0 when it assembles, else its status and log. */
static int ptxas_patch(const char *text, size_t len, int sm, char *log, size_t logn)
{
	char in[] = "/tmp/cubpf-patch-XXXXXX", cmd[1024];
	int fd = mkstemp(in);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s --compile-as-tools-patch -arch=sm_%d %s -o /dev/null 2>&1",
		 env("PTXAS"), sm, in);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t k = fread(log, 1, logn - 1, p);
	log[k] = 0;
	int st = pclose(p);
	unlink(in);
	return st;
}

struct tool {
	struct vm_object *obj;
	struct ptx_prog progs[16];
	uint32_t cnt;
};

/* The tool's verified GPU programs that the backend patches. */
static void load_tool(const char *name, struct tool *t)
{
	char path[1024], err[256];
	snprintf(path, sizeof(path), "%s/probes/%s.bpf.o", env("CUBPF_BUILD"), name);
	if (vm_object_load_file(path, &t->obj, err, sizeof(err)))
		fail_msg("%s: %s", path, err);
	t->cnt = 0;
	for (uint32_t i = 0; i < t->obj->prog_cnt && t->cnt < 16; i++) {
		const struct vm_prog *g = &t->obj->progs[i];
		enum ptx_patch_site s[PTX_PATCH_MAX_SITES];
		if (!ptx_patch_sites(g->kind, s, PTX_PATCH_MAX_SITES))
			continue;
		char log[1024];
		if (vm_verify_sanitize(t->obj, i, NULL, NULL, log, sizeof(log)))
			fail_msg("%s: %s rejected: %s", name, g->name, log);
		t->progs[t->cnt++] = (struct ptx_prog){g->name, g->kind, g->attach, g->insns,
						       g->insn_cnt};
	}
}

static bool has_site(const struct ptx_patch_module *pm, enum ptx_patch_site s)
{
	for (uint32_t i = 0; i < pm->site_cnt; i++)
		if (pm->sites[i] == s)
			return true;
	return false;
}

/* Every patchable program of the tool, one module per target, assembled in tools-patch mode. */
static void check_tool(const char *name, uint32_t want_sites)
{
	struct tool t;
	load_tool(name, &t);
	assert_true(t.cnt > 0);
	static const int sms[] = {80, 90};
	for (size_t a = 0; a < 2; a++) {
		struct ptx_patch_module pm;
		char err[PTX_ERRLEN], log[8192];
		if (ptx_gen_patch_module(t.progs, t.cnt, t.obj->maps, t.obj->map_cnt, sms[a], &pm, err,
					 sizeof(err)))
			fail_msg("%s: %s", name, err);
		assert_int_equal(pm.site_cnt, want_sites);
		assert_null(strstr(pm.ptx.data, "redux"));
		/* maps through the record: no module global of cubpf's */
		assert_null(strstr(pm.ptx.data, "__cubpf_map_"));
		assert_null(strstr(pm.ptx.data, "__cubpf_enable"));
		for (uint32_t i = 0; i < pm.site_cnt; i++) {
			char fn[64], decl[160];
			ptx_patch_func_name(pm.sites[i], fn, sizeof(fn));
			snprintf(decl, sizeof(decl), ".visible .func (.param .b32 __cb_ret) %s(", fn);
			assert_non_null(strstr(pm.ptx.data, decl));
		}
		if (ptxas_patch(pm.ptx.data, pm.ptx.len, sms[a], log, sizeof(log)))
			fail_msg("%s (sm_%d) does not assemble in tools-patch mode:\n%s\n%s", name,
				 sms[a], log, pm.ptx.data);
		ptx_buf_free(&pm.ptx);
	}
	vm_object_free(t.obj);
}

static void t_kcount(void **s)
{
	(void)s;
	check_tool("kcount", 2); /* kprobe: block enter; kretprobe: block exit */
}

static void t_threadhist(void **s)
{
	(void)s;
	check_tool("threadhist", 1);
}

static void t_memtrace(void **s)
{
	(void)s;
	check_tool("memtrace", 4); /* global, shared, local, cp.async */
}

static void t_kernelretsnoop(void **s)
{
	(void)s;
	check_tool("kernelretsnoop", 1);
}

/* The signatures of the Sanitizer's callback types: BlockEnter(ud, pc), MemoryAccess(ud, pc,
 * ptr, size, flags, data), MemcpyAsync(ud, pc, src, dst, size). */
static void t_signatures(void **s)
{
	(void)s;
	struct tool t;
	load_tool("memtrace", &t);
	struct ptx_patch_module pm;
	char err[PTX_ERRLEN];
	assert_int_equal(ptx_gen_patch_module(t.progs, t.cnt, t.obj->maps, t.obj->map_cnt, 90, &pm,
					      err, sizeof(err)), 0);
	assert_true(has_site(&pm, PTX_PATCH_GLOBAL_ACCESS) && has_site(&pm, PTX_PATCH_MEMCPY_ASYNC));
	assert_non_null(strstr(pm.ptx.data, "__cubpf_patch_global_access(.param .b64 __cb_ud, "
					    ".param .b64 __cb_pc, .param .b64 __cb_ptr, .param .b32 "
					    "__cb_size, .param .b32 __cb_flags, .param .b64 __cb_data)"));
	assert_non_null(strstr(pm.ptx.data, "__cubpf_patch_memcpy_async(.param .b64 __cb_ud, "
					    ".param .b64 __cb_pc, .param .b64 __cb_ptr, .param .b32 "
					    "__cb_dst, .param .b32 __cb_size)"));
	/* the program runs under its bit of the record's progs */
	char bit[96];
	snprintf(bit, sizeof(bit), "ld.global.u32 %%__cb_pw0, [%%__cb_rec+%u]", PTX_PATCH_REC_PROGS);
	assert_non_null(strstr(pm.ptx.data, bit));
	ptx_buf_free(&pm.ptx);
	vm_object_free(t.obj);
}

#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), \
					       .off = (o), .imm = (i)})

/* A memprobe reading ctx->insn_index: refused with the reason; the same reading ctx->size is
 * compiled (the access's size argument). */
static void t_refusals(void **s)
{
	(void)s;
	struct bpf_insn p[] = {
		INSN(BPF_LDX | BPF_MEM | BPF_W, 0, 1, offsetof(struct cubpf_mem_ctx, insn_index), 0),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	struct ptx_prog prog = {"m", VM_PROG_MEMPROBE, "*", p, 2};
	struct ptx_patch_module pm;
	char err[PTX_ERRLEN] = "";
	assert_int_equal(ptx_gen_patch_module(&prog, 1, NULL, 0, 90, &pm, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "insn_index"));
	p[0].off = offsetof(struct cubpf_mem_ctx, size);
	assert_int_equal(ptx_gen_patch_module(&prog, 1, NULL, 0, 90, &pm, err, sizeof(err)), 0);
	assert_non_null(strstr(pm.ptx.data, "cvt.u64.u32 %__cb_r0, %__cb_sz;"));
	ptx_buf_free(&pm.ptx);
	/* a PTX site's line and a kretprobe's instruction counts mean nothing in SASS (issue 32) */
	p[0].off = offsetof(struct cubpf_mem_ctx, ptx_line);
	assert_int_equal(ptx_gen_patch_module(&prog, 1, NULL, 0, 90, &pm, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ptx_line"));
	p[0].code = BPF_LDX | BPF_MEM | BPF_DW;
	p[0].off = offsetof(struct cubpf_kernel_ctx, insns);
	prog.kind = VM_PROG_KRETPROBE;
	assert_int_equal(ptx_gen_patch_module(&prog, 1, NULL, 0, 90, &pm, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ctx->insns"));
	/* kinds the backend does not patch: nothing to generate */
	prog.kind = VM_PROG_BLOCKPROBE;
	assert_int_equal(ptx_gen_patch_module(&prog, 1, NULL, 0, 90, &pm, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no program of a kind"));
}

/* The record's offsets are the struct's. */
static void t_record(void **s)
{
	(void)s;
	assert_int_equal(offsetof(struct ptx_patch_record, kernel_id), PTX_PATCH_REC_KERNEL_ID);
	assert_int_equal(offsetof(struct ptx_patch_record, nparams), PTX_PATCH_REC_NPARAMS);
	assert_int_equal(offsetof(struct ptx_patch_record, progs), PTX_PATCH_REC_PROGS);
	assert_int_equal(offsetof(struct ptx_patch_record, params), PTX_PATCH_REC_PARAMS);
	assert_int_equal(offsetof(struct ptx_patch_record, maps), PTX_PATCH_REC_MAPS);
	assert_int_equal(sizeof(struct ptx_patch_record), PTX_PATCH_REC_SIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_kcount),
		cmocka_unit_test(t_threadhist),
		cmocka_unit_test(t_memtrace),
		cmocka_unit_test(t_kernelretsnoop),
		cmocka_unit_test(t_signatures),
		cmocka_unit_test(t_refusals),
		cmocka_unit_test(t_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
