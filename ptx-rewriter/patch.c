/* Patch functions: eBPF programs compiled for NVIDIA's Compute Sanitizer patching API, the
 * backend for kernels that carry no PTX (cuBLAS, cutlass, cuDNN ship SASS only).
 *
 * The same code generator as instrumentation (codegen.c, helpers.c, maps.c), with three
 * differences, all forced by the API (shared/studies/sass-patching-2026-11-27.md):
 *  - each probe site is a device function of a fixed signature, called by NVIDIA's trampoline
 *    at every instruction of one kind (block enter, block exit, global access...), returning a
 *    .b32 result (0: go on; 1 would make the warp exit, never returned here);
 *  - the function sees nothing of the kernel but the special registers and its arguments: the
 *    kernel's parameters, its cubpf id and the device addresses of the maps come from the launch
 *    record (layout.h, "Patch functions' launch record") through the `userdata` argument;
 *  - the module is assembled in tools-patch mode (ptxas --compile-as-tools-patch), which refuses
 *    `redux`: the generator never emits it (its warp-aggregated counters use shfl, vote and
 *    match.any, which that mode accepts), and ptx_gen_patch_module checks that it did not.
 * One function per site kind runs every program of that kind whose bit is set in the record's
 * `progs` (its glob selected the launched kernel), so that one sanitizerPatchInstructions per
 * kind serves every program.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/cgint.h"

/* What a patch function's arguments hold while the programs run. */
#define PATCH_DECLS \
	"\t.reg .b64 %__cb_rec;\n\t.reg .b64 %__cb_pa;\n\t.reg .b32 %__cb_sz;\n" \
	"\t.reg .b32 %__cb_fl;\n\t.reg .b32 %__cb_pw<2>;\n\t.reg .pred %__cb_pp;\n"

const char *ptx_patch_site_name(enum ptx_patch_site site)
{
	switch (site) {
	case PTX_PATCH_BLOCK_ENTER: return "block_enter";
	case PTX_PATCH_BLOCK_EXIT: return "block_exit";
	case PTX_PATCH_GLOBAL_ACCESS: return "global_access";
	case PTX_PATCH_SHARED_ACCESS: return "shared_access";
	case PTX_PATCH_LOCAL_ACCESS: return "local_access";
	case PTX_PATCH_MEMCPY_ASYNC: return "memcpy_async";
	}
	return "?";
}

/* The program kind whose code runs at a site. */
static enum vm_prog_kind site_kind(enum ptx_patch_site site)
{
	switch (site) {
	case PTX_PATCH_BLOCK_ENTER: return VM_PROG_KPROBE;
	case PTX_PATCH_BLOCK_EXIT: return VM_PROG_KRETPROBE;
	default: return VM_PROG_MEMPROBE;
	}
}

uint32_t ptx_patch_sites(enum vm_prog_kind kind, enum ptx_patch_site *out, uint32_t max)
{
	static const enum ptx_patch_site mem[] = {PTX_PATCH_GLOBAL_ACCESS, PTX_PATCH_SHARED_ACCESS,
						  PTX_PATCH_LOCAL_ACCESS, PTX_PATCH_MEMCPY_ASYNC};
	uint32_t n = 0;
	if (kind == VM_PROG_KPROBE && max > n)
		out[n++] = PTX_PATCH_BLOCK_ENTER;
	else if (kind == VM_PROG_KRETPROBE && max > n)
		out[n++] = PTX_PATCH_BLOCK_EXIT;
	else if (kind == VM_PROG_MEMPROBE)
		for (uint32_t i = 0; i < sizeof(mem) / sizeof(mem[0]) && n < max; i++)
			out[n++] = mem[i];
	return n;
}

/* ---- context sources ---- */

struct psite {
	enum ptx_patch_site site;
};

static const char *const psreg[12] = {
	"%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z",
	"%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z",
};

static void sreg(struct ptx_buf *out, const char *dst, const char *sr)
{
	buf_printf(out, "\tmov.u32 %%__cb_pw0, %s;\n\tcvt.u64.u32 %s, %%__cb_pw0;\n", sr, dst);
}

static void rec_u32(struct ptx_buf *out, const char *dst, uint32_t off)
{
	buf_printf(out, "\tld.global.u32 %%__cb_pw0, [%%__cb_rec+%u];\n", off);
	buf_printf(out, "\tcvt.u64.u32 %s, %%__cb_pw0;\n", dst);
}

/* Nothing is a compile-time constant of a patch function but a memory site's space (and the
 * direction of an async copy): one function serves every kernel. */
static bool kernel_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	(void)user, (void)off, (void)size, (void)val;
	return false;
}

static int kernel_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off,
		       uint32_t size, char *err, size_t errlen)
{
	(void)user;
	typedef struct cubpf_kernel_ctx K;
	if (off < offsetof(K, kernel_id) && size == 4 && off % 4 == 0) {
		sreg(out, dst, psreg[off / 4]);
		return 0;
	}
	if (off == offsetof(K, kernel_id) && size == 4) {
		rec_u32(out, dst, PTX_PATCH_REC_KERNEL_ID);
		return 0;
	}
	if (off == offsetof(K, nparams) && size == 4) {
		rec_u32(out, dst, PTX_PATCH_REC_NPARAMS);
		return 0;
	}
	uint32_t p0 = offsetof(K, params);
	if (off >= p0 && off < offsetof(K, insns) && (off - p0) % 8 == 0 && (size == 8 || size == 4)) {
		buf_printf(out, "\tld.global.u64 %s, [%%__cb_rec+%u];\n", dst,
			   (unsigned)PTX_PATCH_REC_PARAMS + (off - p0));
		if (size == 4)
			buf_printf(out, "\tand.b64 %s, %s, 0xFFFFFFFF;\n", dst, dst);
		return 0;
	}
	if (off == offsetof(K, insns) || off == offsetof(K, warp_insns)) {
		ptx_seterr(err, errlen, "ctx->insns and warp_insns (PTX instruction counts) have no "
					"meaning in a kernel patched through the Sanitizer (SASS only)");
		return -1;
	}
	ptx_seterr(err, errlen, "kernel context has no %u-byte field at offset %u", size, off);
	return -1;
}

static bool mem_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct psite *s = user;
	typedef struct cubpf_mem_ctx M;
	if (size != 4)
		return false;
	if (off == offsetof(M, space)) {
		*val = s->site == PTX_PATCH_SHARED_ACCESS  ? CUBPF_SPACE_SHARED
		       : s->site == PTX_PATCH_LOCAL_ACCESS ? CUBPF_SPACE_LOCAL
							   : CUBPF_SPACE_GLOBAL;
		return true;
	}
	if (off == offsetof(M, op) && s->site == PTX_PATCH_MEMCPY_ASYNC) {
		*val = CUBPF_MEM_LOAD; /* the global source of a cp.async is read */
		return true;
	}
	return false;
}

/* ctx->op from the access's flags (READ 1, WRITE 2, ATOMSYS 4): read and write together, or a
 * system-scope atomic, is an atomic; a write a store; anything else a load. */
static void mem_op(struct ptx_buf *out, const char *dst)
{
	ptx_buf_puts(out, "\tand.b32 %__cb_pw0, %__cb_fl, 2;\n"
			  "\tsetp.ne.u32 %__cb_pp, %__cb_pw0, 0;\n"
			  "\tselp.u32 %__cb_pw1, 2, 1, %__cb_pp;\n"
			  "\tand.b32 %__cb_pw0, %__cb_fl, 4;\n"
			  "\tsetp.ne.u32 %__cb_pp, %__cb_pw0, 0;\n"
			  "\tand.b32 %__cb_pw0, %__cb_fl, 3;\n"
			  "\tsetp.eq.or.u32 %__cb_pp, %__cb_pw0, 3, %__cb_pp;\n"
			  "\tselp.u32 %__cb_pw1, 3, %__cb_pw1, %__cb_pp;\n");
	buf_printf(out, "\tcvt.u64.u32 %s, %%__cb_pw1;\n", dst);
}

static int mem_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off, uint32_t size,
		    char *err, size_t errlen)
{
	(void)user; /* (its constants, space and a copy's op, are the generator's: mem_const) */
	typedef struct cubpf_mem_ctx M;
	if (off == offsetof(M, addr) && size == 8) {
		buf_printf(out, "\tmov.b64 %s, %%__cb_pa;\n", dst);
		return 0;
	}
	if (off == offsetof(M, size) && size == 4) {
		buf_printf(out, "\tcvt.u64.u32 %s, %%__cb_sz;\n", dst);
		return 0;
	}
	if (off == offsetof(M, op) && size == 4) {
		mem_op(out, dst);
		return 0;
	}
	if (off == offsetof(M, kernel_id) && size == 4) {
		rec_u32(out, dst, PTX_PATCH_REC_KERNEL_ID);
		return 0;
	}
	static const uint32_t sr_off[6] = {offsetof(M, tid_x), offsetof(M, tid_y), offsetof(M, tid_z),
					   offsetof(M, ctaid_x), offsetof(M, ctaid_y),
					   offsetof(M, ctaid_z)};
	for (int i = 0; i < 6 && size == 4; i++)
		if (off == sr_off[i]) {
			sreg(out, dst, psreg[i < 3 ? i : i + 3]);
			return 0;
		}
	if (off == offsetof(M, insn_index) || off >= offsetof(M, ptx_line)) {
		ptx_seterr(err, errlen, "ctx->insn_index, ptx_line, src_file, src_line (a PTX "
					"instruction's) have no meaning in a kernel patched through the "
					"Sanitizer (SASS only)");
		return -1;
	}
	ptx_seterr(err, errlen, "memory context has no %u-byte field at offset %u", size, off);
	return -1;
}

/* ---- functions and the module ---- */

static void signature(struct ptx_buf *out, enum ptx_patch_site site, const char *fname)
{
	buf_printf(out, ".visible .func (.param .b32 __cb_ret) %s(.param .b64 __cb_ud, "
			".param .b64 __cb_pc", fname);
	switch (site) {
	case PTX_PATCH_GLOBAL_ACCESS: case PTX_PATCH_SHARED_ACCESS: case PTX_PATCH_LOCAL_ACCESS:
		/* MemoryAccess(userdata, pc, ptr, accessSize, flags, pData) */
		ptx_buf_puts(out, ", .param .b64 __cb_ptr, .param .b32 __cb_size, "
				  ".param .b32 __cb_flags, .param .b64 __cb_data");
		break;
	case PTX_PATCH_MEMCPY_ASYNC: /* MemcpyAsync(userdata, pc, src, dst, accessSize) */
		ptx_buf_puts(out, ", .param .b64 __cb_ptr, .param .b32 __cb_dst, "
				  ".param .b32 __cb_size");
		break;
	default: /* BlockEnter / BlockExit(userdata, pc) */
		break;
	}
	ptx_buf_puts(out, ")\n{\n");
}

static void load_args(struct ptx_buf *out, enum ptx_patch_site site)
{
	/* no record (a launch the host did not set up): return at once */
	ptx_buf_puts(out, "\tld.param.u64 %__cb_rec, [__cb_ud];\n"
			  "\tsetp.eq.u64 %__cb_pp, %__cb_rec, 0;\n\t@%__cb_pp bra $__cb_done;\n");
	ptx_buf_puts(out, "\tmov.b64 %__cb_pa, 0;\n\tmov.u32 %__cb_sz, 0;\n\tmov.u32 %__cb_fl, 1;\n");
	if (site_kind(site) != VM_PROG_MEMPROBE)
		return;
	ptx_buf_puts(out, "\tld.param.u64 %__cb_pa, [__cb_ptr];\n"
			  "\tld.param.u32 %__cb_sz, [__cb_size];\n");
	if (site != PTX_PATCH_MEMCPY_ASYNC)
		ptx_buf_puts(out, "\tld.param.u32 %__cb_fl, [__cb_flags];\n");
}

/* Program p's code at one site, skipped when the record's bit p is clear. */
static int emit_prog(struct cg_prog *cp, uint32_t p, enum ptx_patch_site site,
		     struct ptx_buf *body, struct cg_result *need, char *err, size_t errlen)
{
	struct psite ps = {site};
	struct cg_ctxsrc src = {.load = kernel_load, .constant = kernel_const, .user = &ps};
	if (site_kind(site) == VM_PROG_MEMPROBE)
		src.load = mem_load, src.constant = mem_const;
	char lbl[48];
	snprintf(lbl, sizeof(lbl), "$__cb%u_", p);
	buf_printf(body, "\t// cubpf: %s (%s)\n", cp->prog.name ? cp->prog.name : "",
		   ptx_patch_site_name(site));
	buf_printf(body, "\tld.global.u32 %%__cb_pw0, [%%__cb_rec+%u];\n", PTX_PATCH_REC_PROGS);
	buf_printf(body, "\tand.b32 %%__cb_pw0, %%__cb_pw0, %u;\n", 1u << p);
	buf_printf(body, "\tsetp.eq.u32 %%__cb_pp, %%__cb_pw0, 0;\n\t@%%__cb_pp bra %send;\n", lbl);
	struct cg_result res = {0};
	if (ptx_cg_emit(cp, &src, lbl, body, &res, err, errlen))
		return -1;
	if (res.stack_bytes > need->stack_bytes)
		need->stack_bytes = res.stack_bytes;
	need->needs_r10 |= res.needs_r10;
	need->vprintf |= res.vprintf;
	need->maps_used |= res.maps_used;
	return 0;
}

static struct cg_prog *prepare(const struct ptx_prog *prog, const struct vm_map_def *maps,
			       uint32_t map_cnt, int sm, char *err, size_t errlen)
{
	struct cg_prog *cp = ptx_cg_prepare(prog, maps, map_cnt, err, errlen);
	if (!cp)
		return NULL;
	cp->patch = true;
	cp->fold = true;
	cp->warp_aggregate = sm >= 70; /* match.any.sync: sm_70 (no redux: tools-patch mode) */
	cp->l2_keep = false;           /* createpolicy: not worth a risk the study did not test */
	return cp;
}

int ptx_gen_patch_func(const struct ptx_prog *progs, uint32_t prog_cnt,
		       const struct vm_map_def *maps, uint32_t map_cnt, enum ptx_patch_site site,
		       int sm, const char *fname, struct ptx_buf *out, bool *vprintf, char *err,
		       size_t errlen)
{
	if (prog_cnt > PTX_PATCH_MAX_PROGS || map_cnt > PTX_PATCH_MAX_MAPS) {
		ptx_seterr(err, errlen, "a patch module takes at most %u programs and %u maps",
			   PTX_PATCH_MAX_PROGS, PTX_PATCH_MAX_MAPS);
		return -1;
	}
	struct ptx_buf body = {0};
	struct cg_result need = {0};
	int rc = 0;
	for (uint32_t p = 0; p < prog_cnt && !rc; p++) {
		if (progs[p].kind != site_kind(site))
			continue;
		struct cg_prog *cp = prepare(&progs[p], maps, map_cnt, sm, err, errlen);
		rc = cp ? emit_prog(cp, p, site, &body, &need, err, errlen) : -1;
		ptx_cg_prog_free(cp);
	}
	if (!rc) {
		signature(out, site, fname);
		ptx_cg_emit_decls(&need, out);
		ptx_buf_puts(out, PATCH_DECLS);
		load_args(out, site);
		buf_put(out, body.data, body.len);
		ptx_buf_puts(out, "$__cb_done:\n\tst.param.b32 [__cb_ret], 0;\n\tret;\n}\n");
		if (vprintf)
			*vprintf |= need.vprintf;
		if (out->oom || body.oom) {
			ptx_seterr(err, errlen, "out of memory");
			rc = -1;
		}
	}
	ptx_buf_free(&body);
	return rc;
}

void ptx_patch_func_name(enum ptx_patch_site site, char *out, size_t n)
{
	snprintf(out, n, "__cubpf_patch_%s", ptx_patch_site_name(site));
}

int ptx_gen_patch_module(const struct ptx_prog *progs, uint32_t prog_cnt,
			 const struct vm_map_def *maps, uint32_t map_cnt, int sm,
			 struct ptx_patch_module *pm, char *err, size_t errlen)
{
	static const enum ptx_patch_site all[] = {
		PTX_PATCH_BLOCK_ENTER, PTX_PATCH_BLOCK_EXIT, PTX_PATCH_GLOBAL_ACCESS,
		PTX_PATCH_SHARED_ACCESS, PTX_PATCH_LOCAL_ACCESS, PTX_PATCH_MEMCPY_ASYNC};
	memset(pm, 0, sizeof(*pm));
	struct ptx_buf funcs = {0};
	bool vprintf = false;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		bool used = false;
		for (uint32_t p = 0; p < prog_cnt; p++)
			used |= progs[p].kind == site_kind(all[i]);
		if (!used)
			continue;
		char name[64];
		ptx_patch_func_name(all[i], name, sizeof(name));
		if (ptx_gen_patch_func(progs, prog_cnt, maps, map_cnt, all[i], sm, name, &funcs,
				       &vprintf, err, errlen)) {
			ptx_buf_free(&funcs);
			return -1;
		}
		pm->sites[pm->site_cnt++] = all[i];
	}
	if (!pm->site_cnt) {
		ptx_buf_free(&funcs);
		ptx_seterr(err, errlen, "no program of a kind the Sanitizer backend patches "
					"(kprobe, kretprobe, memprobe)");
		return -1;
	}
	/* PTX 7.8: sm_90; the functions use nothing newer than sm_70's warp instructions */
	buf_printf(&pm->ptx, ".version 7.8\n.target sm_%d\n.address_size 64\n\n", sm);
	ptx_gen_module_decls(0, vprintf, &pm->ptx);
	buf_put(&pm->ptx, funcs.data, funcs.len);
	ptx_buf_free(&funcs);
	if (pm->ptx.oom) {
		ptx_buf_free(&pm->ptx);
		ptx_seterr(err, errlen, "out of memory");
		return -1;
	}
	if (strstr(pm->ptx.data, "redux")) { /* refused by ptxas in tools-patch mode */
		ptx_buf_free(&pm->ptx);
		ptx_seterr(err, errlen, "generated code uses redux, which tools-patch mode refuses");
		return -1;
	}
	return 0;
}
