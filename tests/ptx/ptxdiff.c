/* The differential harness of ptxdiff.h: interpreter side, PTX module and cases file. */
#include "tests/ptx/ptxdiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptx-rewriter/ptx.h"

#define MAX_MAPS 64

struct image {
	uint8_t *data[MAX_MAPS];
	size_t bytes[MAX_MAPS];
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

/* Random bytes with a bias to small values and zeroes, so that both sides of the programs'
 * branches are taken. */
static void fill(uint8_t *p, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd(s);
		p[i] = (r & 3) == 0 ? 0 : (r & 3) == 1 ? (uint8_t)(r >> 8 & 7) : (uint8_t)(r >> 8);
	}
}

static bool map_in_scope(const struct vm_map_def *d)
{
	return d->type == CUBPF_MAP_ARRAY || d->type == CUBPF_MAP_GPU_ARRAY;
}

static bool helper_in_scope(int32_t id)
{
	return id == CUBPF_FN_map_lookup_elem || id == CUBPF_FN_map_update_elem ||
	       id == CUBPF_FN_map_delete_elem || id == CUBPF_FN_probe_read ||
	       id == CUBPF_FN_probe_read_user;
}

/* 0, or 1 with the reason the program is out of the harness's scope. */
static int scope(const struct vm_object *obj, const struct vm_prog *p, char *err, size_t errlen)
{
	if (obj->map_cnt > MAX_MAPS) {
		snprintf(err, errlen, "more than %d maps", MAX_MAPS);
		return 1;
	}
	for (uint32_t i = 0; i < obj->map_cnt; i++)
		if (!map_in_scope(&obj->maps[i])) {
			snprintf(err, errlen, "map %s: only array maps are compared", obj->maps[i].name);
			return 1;
		}
	for (uint32_t pc = 0; pc < p->insn_cnt; pc++) {
		const struct bpf_insn *in = &p->insns[pc];
		if (in->code == (BPF_JMP | BPF_CALL | BPF_X) ||
		    (in->code == (BPF_JMP | BPF_CALL) && in->src_reg == 0 &&
		     !helper_in_scope(in->imm))) {
			snprintf(err, errlen, "insn %u: helper %d is not deterministic or not compared",
				 pc, in->imm);
			return 1;
		}
	}
	if (p->kind == VM_PROG_UPROBE || p->kind == VM_PROG_URETPROBE) {
		snprintf(err, errlen, "host programs have no PTX form");
		return 1;
	}
	return 0;
}

static uint32_t ctx_bytes(const struct vm_prog *p, const struct ptxdiff_opts *o)
{
	if (p->kind == VM_PROG_KPROBE || p->kind == VM_PROG_KRETPROBE)
		return sizeof(struct cubpf_kernel_ctx);
	if (p->kind == VM_PROG_MEMPROBE)
		return sizeof(struct cubpf_mem_ctx);
	if (p->kind == VM_PROG_BLOCKPROBE || p->kind == VM_PROG_BLOCKRETPROBE)
		return sizeof(struct cubpf_block_ctx);
	if (p->kind == VM_PROG_SYNCPROBE)
		return sizeof(struct cubpf_sync_ctx);
	if (p->kind == VM_PROG_FENTRY || p->kind == VM_PROG_FEXIT)
		return sizeof(struct cubpf_func_ctx);
	if (p->kind == VM_PROG_BBPROBE || p->kind == VM_PROG_BBRETPROBE)
		return sizeof(struct cubpf_bb_ctx);
	return o->ctx_size ? o->ctx_size : 64;
}

static void hex(FILE *f, const uint8_t *p, size_t n)
{
	if (!n)
		fputc('-', f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

static void images(FILE *f, const struct image *im, uint32_t n)
{
	fputc(' ', f);
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		hex(f, im->data[i], im->bytes[i]);
	}
	if (!n)
		fputc('-', f);
}

static int module(const struct vm_object *obj, const struct vm_prog *vp, bool fold,
		  const char *path, char *err, size_t errlen)
{
	struct ptx_prog p = {.name = vp->name, .kind = VM_PROG_RAW, .insns = vp->insns,
			     .insn_cnt = vp->insn_cnt};
	struct ptx_buf b = {0};
	char perr[PTX_ERRLEN];
	ptx_buf_printf(&b, ".version 8.0\n.target sm_80\n.address_size 64\n\n");
	ptx_gen_module_decls(obj->map_cnt, false, &b);
	if (ptx_gen_raw_func_opt(&p, obj->maps, obj->map_cnt, "ptxdiff_f", fold, &b, perr,
				 sizeof(perr))) {
		snprintf(err, errlen, "the PTX generator refused a verified program: %s", perr);
		ptx_buf_free(&b);
		return -1;
	}
	ptx_buf_printf(&b, ".visible .entry ptxdiff_k(.param .u64 ctx, .param .u64 len, "
			   ".param .u64 res)\n{\n\t.reg .b64 %%a<4>;\n"
			   "\tld.param.u64 %%a0, [ctx];\n\tld.param.u64 %%a1, [len];\n"
			   "\tld.param.u64 %%a2, [res];\n\tcvta.to.global.u64 %%a2, %%a2;\n\t{\n"
			   "\t.param .b64 p0;\n\t.param .b64 p1;\n\t.param .b64 rv;\n"
			   "\tst.param.b64 [p0], %%a0;\n\tst.param.b64 [p1], %%a1;\n"
			   "\tcall (rv), ptxdiff_f, (p0, p1);\n\tld.param.b64 %%a3, [rv];\n\t}\n"
			   "\tst.global.u64 [%%a2], %%a3;\n\tret;\n}\n");
	FILE *f = fopen(path, "w");
	int rc = 0;
	if (b.oom || !f || fwrite(b.data, 1, b.len, f) != b.len) {
		snprintf(err, errlen, "cannot write %s", path);
		rc = -1;
	}
	if (f && fclose(f))
		rc = -1;
	ptx_buf_free(&b);
	return rc;
}

/* One run on the interpreter: fresh maps shared into `im` (randomised), a random context. */
static int run_one(const struct vm_object *obj, uint32_t prog, uint32_t csz, uint64_t *seed,
		   FILE *f, char *err, size_t errlen)
{
	struct image in = {0}, out = {0};
	uint8_t *ctx = calloc(1, csz);
	struct vm_runtime *rt = vm_runtime_new(obj, err, errlen);
	struct vm_exec *ex = NULL;
	int rc = -1;
	if (!ctx || !rt)
		goto done;
	for (uint32_t i = 0; i < obj->map_cnt; i++) {
		size_t n = vm_map_array_bytes(&obj->maps[i]);
		out.bytes[i] = in.bytes[i] = n;
		out.data[i] = aligned_alloc(8, n ? (n + 7) & ~(size_t)7 : 8);
		in.data[i] = malloc(n ? n : 1);
		if (!out.data[i] || !in.data[i] ||
		    vm_runtime_share_array(rt, i, out.data[i], n, err, errlen))
			goto done;
		if (obj->maps[i].origin != VM_MAP_RODATA) /* .rodata keeps its constants */
			fill(out.data[i], n, seed);
		memcpy(in.data[i], out.data[i], n);
	}
	fill(ctx, csz, seed);
	if (!(ex = vm_exec_new(rt, prog, err, errlen)))
		goto done;
	vm_exec_set_checked(ex, true);
	uint64_t r0;
	char xerr[VM_ERRLEN];
	uint8_t *orig = malloc(csz);
	if (!orig)
		goto done;
	memcpy(orig, ctx, csz);
	if (vm_exec_run(ex, ctx, csz, &r0, xerr, sizeof(xerr))) {
		snprintf(err, errlen, "the interpreter faulted on a verified program: %s", xerr);
		free(orig);
		goto done;
	}
	fprintf(f, "C ");
	hex(f, orig, csz);
	fprintf(f, " %llx", (unsigned long long)r0);
	images(f, &in, obj->map_cnt);
	images(f, &out, obj->map_cnt);
	fputc('\n', f);
	free(orig);
	rc = 0;
done:
	vm_exec_free(ex);
	vm_runtime_free(rt);
	for (uint32_t i = 0; i < obj->map_cnt && i < MAX_MAPS; i++)
		free(in.data[i]), free(out.data[i]);
	free(ctx);
	return rc;
}

int ptxdiff_prepare(const struct vm_object *obj, uint32_t prog, const struct ptxdiff_opts *opts,
		    const char *ptx_path, const char *cases_path, char *err, size_t errlen)
{
	struct ptxdiff_opts o = opts ? *opts : (struct ptxdiff_opts){0};
	if (prog >= obj->prog_cnt) {
		snprintf(err, errlen, "no program %u", prog);
		return -1;
	}
	const struct vm_prog *p = &obj->progs[prog];
	int s = scope(obj, p, err, errlen);
	if (s)
		return s;
	if (module(obj, p, o.fold, ptx_path, err, errlen))
		return -1;
	FILE *f = fopen(cases_path, "w");
	if (!f) {
		snprintf(err, errlen, "cannot write %s", cases_path);
		return -1;
	}
	fprintf(f, "M %u ", obj->map_cnt);
	for (uint32_t i = 0; i < obj->map_cnt; i++)
		fprintf(f, "%s%zu", i ? "," : "", vm_map_array_bytes(&obj->maps[i]));
	fprintf(f, "%s\n", obj->map_cnt ? "" : "-");
	uint64_t seed = o.seed ? o.seed : 1;
	uint32_t csz = ctx_bytes(p, &o);
	int rc = 0;
	for (unsigned r = 0; r < (o.runs ? o.runs : 8) && !rc; r++)
		rc = run_one(obj, prog, csz, &seed, f, err, errlen);
	if (fclose(f) && !rc) {
		snprintf(err, errlen, "cannot write %s", cases_path);
		rc = -1;
	}
	return rc;
}

int ptxdiff_check(const struct vm_object *obj, uint32_t prog, const struct ptxdiff_opts *opts,
		  char *err, size_t errlen)
{
	char dir[] = "/tmp/cubpf-ptxdiff-XXXXXX", ptx[64], cases[64], cmd[512], line[1024];
	if (!mkdtemp(dir)) {
		snprintf(err, errlen, "cannot make a temporary directory");
		return -1;
	}
	snprintf(ptx, sizeof(ptx), "%s/m.ptx", dir);
	snprintf(cases, sizeof(cases), "%s/m.cases", dir);
	int rc = ptxdiff_prepare(obj, prog, opts, ptx, cases, err, errlen);
	if (rc == 0) {
		const char *src = getenv("CUBPF_SRC");
		snprintf(cmd, sizeof(cmd), "python3 %s%stests/ptx/ptxdiff.py %s %s 2>&1",
			 src ? src : "", src ? "/" : "", ptx, cases);
		FILE *p = popen(cmd, "r");
		char first[1024] = "", last[1024] = "";
		while (p && fgets(line, sizeof(line), p)) {
			line[strcspn(line, "\n")] = 0;
			if (!first[0] && strncmp(line, "same", 4))
				snprintf(first, sizeof(first), "%s", line);
			snprintf(last, sizeof(last), "%s", line);
		}
		int st = p ? pclose(p) : -1;
		if (st != 0) {
			snprintf(err, errlen, "%s", first[0] ? first : last[0] ? last : "ptxdiff.py "
											"did not run");
			rc = 2;
		}
	}
	unlink(ptx), unlink(cases), rmdir(dir);
	return rc;
}
