/* ptx-rewriter tests: the PTX reader on nvcc output and hand-written PTX, probe injection
 * (assembled with ptxas for sm_90 and sm_80), untouched kernels byte-identical, the 313
 * conformance programs compiled to PTX and assembled, the demangler, bad input.
 *
 * Inputs (built by tests/ptx/module.mk): $CUBPF_FIXTURES/ptx/NAME.ptx (nvcc -ptx of
 * tests/ptx/kernels/NAME.cu), $CUBPF_BUILD/ptx-probes/NAME.bpf.o (clang -target bpf). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptx-rewriter/ptx.h"
#include "tests/ptx/conf.h"
#include "vm/vm.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		fail_msg("environment variable %s is not set (run through make test)", name);
	return v;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s (fixture not built?)", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *d = malloc((size_t)n + 1);
	assert_non_null(d);
	assert_int_equal(fread(d, 1, (size_t)n, f), (size_t)n);
	d[n] = 0;
	fclose(f);
	if (len)
		*len = (size_t)n;
	return d;
}

static void fixture_path(char *out, size_t n, const char *name)
{
	if (strchr(name, '/'))
		snprintf(out, n, "%s", name);
	else
		snprintf(out, n, "%s/ptx/%s", env("CUBPF_FIXTURES"), name);
}

static char *fixture(const char *name, size_t *len)
{
	char p[1024];
	fixture_path(p, sizeof(p), name);
	return slurp(p, len);
}

/* Assembles text with ptxas for arch; returns ptxas's exit status, its messages in log. */
static int ptxas(const char *text, size_t len, const char *arch, char *log, size_t loglen)
{
	char in[] = "/tmp/cubpf-ptx-XXXXXX";
	int fd = mkstemp(in);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "%s -arch=%s %s -o /dev/null 2>&1", env("PTXAS"), arch, in);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(log, 1, loglen - 1, p);
	log[n] = 0;
	int st = pclose(p);
	unlink(in);
	return st;
}

static void assert_assembles(const char *text, size_t len, const char *what)
{
	static const char *const arch[] = {"sm_90", "sm_80", "sm_90a"};
	/* modules written for sm_90a (Triton's) assemble only for it */
	bool a_only = strstr(text, ".target sm_90a") != NULL;
	for (int a = a_only ? 2 : 0; a < (a_only ? 3 : 2); a++) {
		char log[4096];
		int st = ptxas(text, len, arch[a], log, sizeof(log));
		if (st != 0)
			fail_msg("%s does not assemble for %s:\n%s", what, arch[a], log);
	}
}

/* ---- probe objects ---- */

struct probes {
	struct vm_object *obj;
	struct ptx_prog progs[16];
	uint32_t cnt;
};

static void load_probes(const char *name, struct probes *p)
{
	char path[1024], err[256];
	snprintf(path, sizeof(path), "%s/ptx-probes/%s", env("CUBPF_BUILD"), name);
	if (vm_object_load_file(path, &p->obj, err, sizeof(err)))
		fail_msg("%s: %s", path, err);
	p->cnt = 0;
	for (uint32_t i = 0; i < p->obj->prog_cnt && p->cnt < 16; i++) {
		const struct vm_prog *g = &p->obj->progs[i];
		char log[1024];
		if (vm_verify_sanitize(p->obj, i, NULL, NULL, log, sizeof(log)))
			fail_msg("%s: %s rejected: %s", name, g->name, log);
		p->progs[p->cnt++] = (struct ptx_prog){g->name, g->kind, g->attach, g->insns,
						       g->insn_cnt};
	}
}

static int instrument(const char *text, size_t len, const struct probes *p, const char *glob,
		      char **out, size_t *out_len, struct ptx_inject_report *rep, char *err)
{
	struct ptx_inject_opts o = {.progs = p->progs, .prog_cnt = p->cnt, .maps = p->obj->maps,
				    .map_cnt = p->obj->map_cnt, .kernel_glob = glob};
	return ptx_instrument(text, len, &o, out, out_len, rep, err, PTX_ERRLEN);
}

/* ---- reader ---- */

static const char *const cu_fixtures[] = {"vecadd.ptx", "reduce.ptx", "early_ret.ptx",
					  "calls.ptx", "asmvec.ptx", "vecadd_g.ptx", "sync.ptx"};
static const char *const hand_fixtures[] = {"tests/ptx/kernels/pred_ret.ptx",
					    "tests/ptx/kernels/features.ptx",
					    "tests/ptx/kernels/triton_style.ptx"};
#define NHAND (sizeof(hand_fixtures) / sizeof(hand_fixtures[0]))

/* Registers per thread of `kernel` in ptxas -v's report of text for sm_90, or -1. */
static int ptxas_registers(const char *text, size_t len, const char *kernel)
{
	char in[] = "/tmp/cubpf-ptx-XXXXXX";
	int fd = mkstemp(in);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	char cmd[2048], line[1024];
	snprintf(cmd, sizeof(cmd), "%s -arch=sm_90 -v %s -o /dev/null 2>&1", env("PTXAS"), in);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	int regs = -1, ours = 0;
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "Compiling entry function"))
			ours = strstr(line, kernel) != NULL;
		const char *u = strstr(line, "Used ");
		if (ours && u && sscanf(u, "Used %d registers", &regs) == 1)
			ours = 0;
	}
	pclose(p);
	unlink(in);
	return regs;
}

/* Bytes of static shared memory of all the functions in ptxas -v's report of text for sm_90
 * (sm_90a for modules written for it). */
static long ptxas_smem(const char *text, size_t len)
{
	const char *arch = strstr(text, ".target sm_90a") ? "sm_90a" : "sm_90";
	char in[] = "/tmp/cubpf-ptx-XXXXXX";
	int fd = mkstemp(in);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	char cmd[2048], line[1024];
	snprintf(cmd, sizeof(cmd), "%s -arch=%s -v %s -o /dev/null 2>&1", env("PTXAS"), arch, in);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	long total = 0, n;
	int end;
	while (fgets(line, sizeof(line), p))
		for (const char *c = strchr(line, ','); c; c = strchr(c + 1, ','))
			if (end = 0, sscanf(c, ", %ld bytes smem%n", &n, &end) == 1 && end)
				total += n;
	assert_int_equal(pclose(p), 0);
	unlink(in);
	return total;
}

/* A kernel that keeps 64 loaded values live: many registers unless limited. */
static size_t heavy_ptx(char *buf, size_t size)
{
	size_t n = (size_t)snprintf(buf, size, ".version 8.0\n.target sm_80\n.address_size 64\n\n"
				    ".visible .entry heavy(\n\t.param .u64 heavy_p\n)\n{\n"
				    "\t.reg .f32 %%f<66>;\n\t.reg .b64 %%rd<3>;\n"
				    "\tld.param.u64 %%rd1, [heavy_p];\n"
				    "\tcvta.to.global.u64 %%rd2, %%rd1;\n");
	for (int i = 0; i < 16; i++)
		n += (size_t)snprintf(buf + n, size - n, "\tld.global.v4.f32 {%%f%d, %%f%d, %%f%d, "
				      "%%f%d}, [%%rd2+%d];\n", 4 * i + 1, 4 * i + 2, 4 * i + 3,
				      4 * i + 4, 16 * i);
	n += (size_t)snprintf(buf + n, size - n, "\tmov.f32 %%f65, 0f00000000;\n");
	for (int i = 1; i <= 64; i++) /* each value used in turn, in a dependent chain */
		n += (size_t)snprintf(buf + n, size - n, "\tfma.rn.f32 %%f65, %%f65, %%f%d, %%f%d;\n",
				      i, 65 - i);
	n += (size_t)snprintf(buf + n, size - n, "\tst.global.f32 [%%rd2], %%f65;\n\tret;\n}\n"
			      "\n.visible .entry bounded() .maxntid 256, 1, 1\n{\n\tret;\n}\n");
	assert_true(n < size);
	return n;
}

/* .maxnreg for kernels without launch bounds of their own; ptxas keeps to it. */
static void test_limit_registers(void **state)
{
	(void)state;
	static char t[16384];
	char err[PTX_ERRLEN];
	size_t len = heavy_ptx(t, sizeof(t));
	int native = ptxas_registers(t, len, "heavy");
	assert_true(native > 40); /* else the test proves nothing */
	const char *const names[] = { "heavy", "bounded", "absent" };
	const uint32_t limits[] = { 32, 32, 32 };
	char *out;
	size_t out_len;
	assert_int_equal(ptx_limit_registers(t, len, names, limits, 3, &out, &out_len, err,
					     sizeof(err)), 1);
	assert_non_null(strstr(out, ".maxnreg 32\n{"));
	assert_null(strstr(strstr(out, ".entry bounded"), ".maxnreg")); /* its own bounds stay */
	assert_int_equal(out_len, len + strlen(".maxnreg 32\n"));
	assert_assembles(out, out_len, "heavy with .maxnreg");
	int regs = ptxas_registers(out, out_len, "heavy");
	assert_true(regs > 0 && regs <= 32);
	free(out);
	/* nothing to limit: 0 and no text */
	assert_int_equal(ptx_limit_registers(t, len, names + 1, limits, 2, &out, &out_len, err,
					     sizeof(err)), 0);
	assert_null(out);
}

static void test_parse_vecadd(void **state)
{
	(void)state;
	size_t len;
	char *t = fixture("vecadd.ptx", &len), err[PTX_ERRLEN];
	struct ptx_module *m;
	assert_int_equal(ptx_parse(t, len, &m, err, sizeof(err)), 0);
	assert_string_equal(m->target, "sm_80");
	const struct ptx_func *f = ptx_find_func(m, "_Z7vec_addPKfS0_Pfi");
	assert_non_null(f);
	assert_true(f->is_entry && f->has_body);
	assert_int_equal(f->param_cnt, 4);
	assert_int_equal(f->params[0].size, 8);
	assert_int_equal(f->params[3].size, 4);
	assert_string_equal(f->params[3].type, "u32");
	int loads = 0, stores = 0;
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		struct ptx_mem_access a;
		if (!ptx_insn_mem_access(&f->insns[i], &a) || a.space == PTX_SPACE_PARAM)
			continue;
		assert_int_equal(a.space, PTX_SPACE_GLOBAL);
		assert_int_equal(a.size, 4);
		loads += a.op == CUBPF_MEM_LOAD;
		stores += a.op == CUBPF_MEM_STORE;
	}
	assert_int_equal(loads, 2);
	assert_int_equal(stores, 1);
	ptx_module_free(m);
	free(t);
}

static void test_parse_features(void **state)
{
	(void)state;
	size_t len;
	char *t = fixture(hand_fixtures[1], &len), err[PTX_ERRLEN];
	struct ptx_module *m;
	if (ptx_parse(t, len, &m, err, sizeof(err)))
		fail_msg("features.ptx: %s", err);
	assert_int_equal(m->func_cnt, 2);
	const struct ptx_func *f = ptx_find_func(m, "features");
	assert_non_null(f);
	assert_int_equal(f->param_cnt, 3);
	assert_int_equal(f->params[2].size, 16);
	assert_int_equal(f->params[2].align, 8);
	assert_true(f->params[0].is_ptr_attr);
	bool vec_ld = false, neg_bra = false, call_ret = false, tex = false;
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		struct ptx_mem_access a;
		if (ptx_insn_mem_access(in, &a) && a.space == PTX_SPACE_SHARED && a.size == 8 &&
		    !strcmp(in->ops[0], "{%r7, %r8}"))
			vec_ld = true;
		if (!strcmp(in->opcode, "bra") && in->pred && in->pred_neg)
			neg_bra = true;
		if (!strncmp(in->opcode, "call", 4) && in->op_cnt == 3 && !strcmp(in->ops[0], "(retval0)"))
			call_ret = true;
		if (!strncmp(in->opcode, "tex.", 4)) {
			tex = true;
			assert_false(ptx_insn_mem_access(in, &a) && a.space != PTX_SPACE_OTHER);
		}
	}
	assert_true(vec_ld);
	assert_true(neg_bra);
	assert_true(call_ret);
	assert_true(tex);
	ptx_module_free(m);
	free(t);
}

static void test_parse_all_fixtures(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cu_fixtures) / sizeof(cu_fixtures[0]); i++) {
		size_t len;
		char *t = fixture(cu_fixtures[i], &len), err[PTX_ERRLEN];
		struct ptx_module *m;
		if (ptx_parse(t, len, &m, err, sizeof(err)))
			fail_msg("%s: %s", cu_fixtures[i], err);
		uint32_t entries = 0;
		for (uint32_t k = 0; k < m->func_cnt; k++)
			entries += m->funcs[k].is_entry && m->funcs[k].insn_cnt > 0;
		assert_true(entries >= 1);
		ptx_module_free(m);
		free(t);
	}
}

static void test_mem_access_forms(void **state)
{
	(void)state;
	static const struct {
		const char *op, *ops;
		int space, kind, size;
	} cases[] = {
		{"ld.global.nc.v4.f32", "{%f1,%f2,%f3,%f4}|[%rd1+16]", PTX_SPACE_GLOBAL, CUBPF_MEM_LOAD, 16},
		{"st.shared.v2.u64", "[%r1]|{%rd1,%rd2}", PTX_SPACE_SHARED, CUBPF_MEM_STORE, 16},
		{"atom.global.cas.b32", "%r1|[%rd1]|%r2|%r3", PTX_SPACE_GLOBAL, CUBPF_MEM_ATOMIC, 4},
		{"red.shared::cta.add.u64", "[%r1]|%rd1", PTX_SPACE_SHARED, CUBPF_MEM_REDUCE, 8},
		{"ld.u8", "%rs1|[%rd1]", PTX_SPACE_GENERIC, CUBPF_MEM_LOAD, 1},
		{"ld.local.b128", "%rq1|[%rd1]", PTX_SPACE_LOCAL, CUBPF_MEM_LOAD, 16},
		{"ld.param.u64", "%rd1|[p0]", PTX_SPACE_PARAM, CUBPF_MEM_LOAD, 8},
		{"ld.relaxed.gpu.global.L1::no_allocate.f16x2", "%r1|[%rd2]", PTX_SPACE_GLOBAL,
		 CUBPF_MEM_LOAD, 4},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[128], *ops[4], *save = NULL;
		snprintf(buf, sizeof(buf), "%s", cases[i].ops);
		uint32_t n = 0;
		for (char *o = strtok_r(buf, "|", &save); o; o = strtok_r(NULL, "|", &save))
			ops[n++] = o;
		struct ptx_insn in = {.opcode = (char *)cases[i].op, .ops = ops, .op_cnt = n};
		struct ptx_mem_access a;
		assert_true(ptx_insn_mem_access(&in, &a));
		assert_int_equal(a.space, cases[i].space);
		assert_int_equal(a.op, cases[i].kind);
		assert_int_equal(a.size, cases[i].size);
	}
	char *ops[2] = {"%r1", "%r2"};
	struct ptx_insn add = {.opcode = "add.s32", .ops = ops, .op_cnt = 2};
	struct ptx_mem_access a;
	assert_false(ptx_insn_mem_access(&add, &a));
}

static void test_bad_input(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"hello world",
		".version 8.0\n.target sm_80\n.visible .entry k(\n.param .u64 p\n)\n{\n\tret;\n",
		".version 8.0\n.target sm_80\n.visible .entry k()\n{\n\tmov.u32 %r1, 1\n}\n",
		".version 8.0\n.target sm_80\n.entry (\n",
		".version 8.0\n.target sm_80\n.global .u32 x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ptx_module *m = NULL;
		char err[PTX_ERRLEN] = "";
		assert_int_equal(ptx_parse(bad[i], strlen(bad[i]), &m, err, sizeof(err)), -1);
		assert_null(m);
		assert_true(strlen(err) > 0);
	}
	/* every prefix of a real module: an error or a module, never a crash */
	size_t len;
	char *t = fixture(hand_fixtures[1], &len);
	for (size_t cut = 0; cut < len; cut += 7) {
		struct ptx_module *m = NULL;
		char err[PTX_ERRLEN];
		if (!ptx_parse(t, cut, &m, err, sizeof(err)))
			ptx_module_free(m);
	}
	free(t);
}

/* ---- instrumentation ---- */

/* Damaged modules (bytes replaced by PTX punctuation) go through the whole instrumenter:
 * an error or a module, never a crash (the sanitizer build checks the memory side). */
static void test_mutations(void **state)
{
	(void)state;
	struct probes p;
	load_probes("count.bpf.o", &p);
	static const char punct[] = "{}();,[]@!%.:\n\" +-<>/*0";
	const char *names[] = {hand_fixtures[0], hand_fixtures[1], hand_fixtures[2], "asmvec.ptx"};
	unsigned seed = 12345;
	int ok = 0, rejected = 0;
	for (size_t fi = 0; fi < 4; fi++) {
		size_t len, olen;
		char *orig = fixture(names[fi], &len);
		char *t = malloc(len + 1);
		for (int it = 0; it < 150; it++) {
			memcpy(t, orig, len + 1);
			for (int k = 0; k < 1 + it % 4; k++) {
				seed = seed * 1103515245u + 12345u;
				size_t at = (seed >> 8) % len;
				seed = seed * 1103515245u + 12345u;
				t[at] = punct[(seed >> 8) % (sizeof(punct) - 1)];
			}
			char *out = NULL, err[PTX_ERRLEN];
			if (instrument(t, len, &p, NULL, &out, &olen, NULL, err) == 0) {
				assert_non_null(out);
				ok++;
			} else {
				assert_true(strlen(err) > 0);
				rejected++;
			}
			free(out);
		}
		free(t);
		free(orig);
	}
	print_message("mutated modules: %d instrumented, %d rejected with a message\n", ok, rejected);
	assert_int_equal(ok + rejected, 600);
	vm_object_free(p.obj);
}

static void test_instrument_assembles(void **state)
{
	(void)state;
	static const char *const probes[] = {"count.bpf.o", "empty.bpf.o", "work.bpf.o", "params.bpf.o"};
	const size_t nfix = sizeof(cu_fixtures) / sizeof(cu_fixtures[0]);
	for (size_t pi = 0; pi < sizeof(probes) / sizeof(probes[0]); pi++) {
		struct probes p;
		load_probes(probes[pi], &p);
		for (size_t fi = 0; fi < nfix + NHAND; fi++) {
			const char *name = fi < nfix ? cu_fixtures[fi] : hand_fixtures[fi - nfix];
			size_t len, olen;
			char *t = fixture(name, &len), *out, err[PTX_ERRLEN], what[256];
			struct ptx_inject_report rep;
			if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
				fail_msg("%s with %s: %s", name, probes[pi], err);
			assert_true(rep.instrumented >= 1);
			assert_true(rep.entry_sites >= 1);
			snprintf(what, sizeof(what), "%s instrumented with %s", name, probes[pi]);
			assert_assembles(out, olen, what);
			free(out);
			free(t);
		}
		vm_object_free(p.obj);
	}
}

/* const volatile knobs (tests/ptx/probes/knob.bpf.c): the verifier alone refuses the code behind
 * the branches it proves one-way; dropped (vm_verify_sanitize), the program compiles, and what
 * was dropped became exits and hard-wired jumps. */
static void test_dead_code_dropped(void **state)
{
	(void)state;
	char path[1024], err[256], log[4096];
	struct vm_object *o;
	snprintf(path, sizeof(path), "%s/ptx-probes/knob.bpf.o", env("CUBPF_BUILD"));
	if (vm_object_load_file(path, &o, err, sizeof(err)))
		fail_msg("%s: %s", path, err);
	assert_int_equal(vm_verify(o, 0, NULL, NULL, log, sizeof(log)), -1);
	assert_non_null(strstr(log, "no path the verifier walks reaches this instruction"));
	struct vm_prog *g = &o->progs[0];
	uint8_t *dead = calloc(g->insn_cnt + 1, 1);
	struct vm_verify_opts vo = {.dead = dead};
	assert_int_equal(vm_verify(o, 0, &vo, NULL, log, sizeof(log)), 0);
	struct bpf_insn *before = malloc(g->insn_cnt * sizeof(*before));
	memcpy(before, g->insns, g->insn_cnt * sizeof(*before));
	uint32_t n = vm_prog_drop_dead(g, dead), insns = 0, jumps = 0;
	for (uint32_t pc = 0; pc < g->insn_cnt; pc++) {
		if (dead[pc] == 1) /* an exit in its place */
			insns++, assert_int_equal(g->insns[pc].code, BPF_JMP | BPF_EXIT);
		else if (dead[pc]) /* a conditional jump become `goto` (+0 when never taken) */
			jumps++, assert_int_equal(g->insns[pc].code, BPF_JMP | BPF_JA),
				assert_int_equal(g->insns[pc].off, dead[pc] == 2 ? 0 : before[pc].off);
		else
			assert_memory_equal(&g->insns[pc], &before[pc], sizeof(*before));
	}
	assert_int_equal(n, insns + jumps);
	assert_true(insns >= 2 && jumps >= 2); /* the clamp and the printk, their two branches */
	free(before), free(dead);
	vm_object_free(o);
	struct probes p;
	load_probes("knob.bpf.o", &p);
	size_t len, olen;
	char *t = fixture(hand_fixtures[0], &len), *out, e2[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, e2), 0);
	assert_int_equal(rep.entry_sites, 1);
	assert_null(strstr(out, "vprintf")); /* the switched-off printk is not compiled */
	assert_assembles(out, olen, "knob.bpf.o in pred_ret.ptx");
	free(out);
	free(t);
	vm_object_free(p.obj);
}

static void test_sites_counted(void **state)
{
	(void)state;
	struct probes p;
	load_probes("count.bpf.o", &p);
	size_t len, olen;
	char *t = fixture(hand_fixtures[0], &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(rep.kernels, 1);
	assert_int_equal(rep.entry_sites, 1);
	assert_int_equal(rep.exit_sites, 5);  /* @%p1 ret, @!%p2 ret, @%p3 exit, ret.uni, ret */
	assert_int_equal(rep.mem_sites, 4);   /* four st.global (three predicated) */
	assert_non_null(strstr(out, "@!%p2 bra $__cubpf_exit;"));
	assert_non_null(strstr(out, "@%p3 bra $__cubpf_exit;"));
	assert_null(strstr(out, "\tret.uni;"));
	/* a predicated access runs its probe only when its own predicate holds */
	assert_non_null(strstr(out, "@%p2 bra $__cb"));
	/* counters are warp-aggregated: the same address for every lane first, then match.any */
	const char *agg = strstr(out, "vote.sync.all.pred %__cb_p2, %__cb_p2, %__cb_w0;");
	assert_non_null(agg);
	assert_non_null(strstr(agg, "match.any.sync.b64 %__cb_w1, %__cb_t2, %__cb_w0;"));
	/* sm_80 and later: the reduction asks the L2 to keep the map's line (evict_last) */
	assert_non_null(strstr(out, "createpolicy.fractional.L2::evict_last.b64 %__cb_pol, 1.0;"));
	assert_non_null(strstr(agg, "@%__cb_p1 red.global.add.L2::cache_hint.u64 [%__cb_t2], "
				    "%__cb_t1, %__cb_pol;"));
	free(out);
	/* before sm_80 (or PTX 7.4) there are no cache policies: the plain reduction */
	char *old = strdup(t), *at = strstr(old, ".target sm_80");
	assert_non_null(at);
	memcpy(at, ".target sm_75", 13);
	assert_int_equal(instrument(old, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "createpolicy"));
	assert_non_null(strstr(out, "@%__cb_p1 red.global.add.u64 [%__cb_t2], %__cb_t1;"));
	free(out);
	free(old);
	/* a program whose maps are all per-SM (memtrace) keeps the plain reductions too */
	struct probes q;
	load_probes("../probes/memtrace.bpf.o", &q);
	assert_int_equal(instrument(t, len, &q, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "createpolicy"));
	assert_non_null(strstr(out, "red.global.add.u64"));
	free(out);
	vm_object_free(q.obj);
	free(t);
	t = fixture(hand_fixtures[1], &len);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	/* ld.global.nc, ld.global table, st.shared, ld.shared.v2, st.local, ld.local,
	 * atom.shared, red.global, atom.global.cas, st.global x2, ld.shared dyn_smem */
	assert_int_equal(rep.mem_sites, 12);
	free(out);
	free(t);
	/* memory accesses in a .func the kernel calls are probed too */
	t = fixture("calls.ptx", &len);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(rep.funcs, 1);      /* store_pair; scale has no memory access */
	assert_int_equal(rep.mem_sites, 3);  /* ld.global in the kernel, two st.global in store_pair */
	free(out);
	free(t);
	/* Triton style: two predicated v4 loads in inline asm, a v4 store, a scoped atomic */
	t = fixture(hand_fixtures[2], &len);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(rep.mem_sites, 4);
	assert_int_equal(rep.exit_sites, 1);
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* Kernels no program applies to come out byte for byte; so does the whole module when the
 * glob matches nothing. */
static void test_untouched_identical(void **state)
{
	(void)state;
	struct probes p;
	load_probes("count.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("vecadd.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, "no_such_kernel*", &out, &olen, &rep, err), 0);
	assert_int_equal(rep.instrumented, 0);
	assert_int_equal(olen, len);
	assert_memory_equal(out, t, len);
	free(out);
	/* PTX from a fatbin, NUL padding included: parsed up to the NUL, returned as it was */
	char *padded = calloc(1, len + 64);
	memcpy(padded, t, len);
	assert_int_equal(instrument(padded, len + 64, &p, "no_such_kernel*", &out, &olen, &rep, err), 0);
	assert_int_equal(olen, len + 64);
	assert_memory_equal(out, padded, len + 64);
	free(out);
	assert_int_equal(instrument(padded, len + 64, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(rep.instrumented, 2);
	free(out);
	free(padded);
	/* two kernels, one selected by its demangled name: the other is copied exactly */
	assert_int_equal(instrument(t, len, &p, "vec_add", &out, &olen, &rep, err), 0);
	assert_int_equal(rep.kernels, 2);
	assert_int_equal(rep.instrumented, 1);
	struct ptx_module *a, *b;
	assert_int_equal(ptx_parse(t, len, &a, err, sizeof(err)), 0);
	assert_int_equal(ptx_parse(out, olen, &b, err, sizeof(err)), 0);
	const struct ptx_func *fa = ptx_find_func(a, "_Z9vec_scalePffi");
	const struct ptx_func *fb = ptx_find_func(b, "_Z9vec_scalePffi");
	assert_non_null(fa);
	assert_non_null(fb);
	size_t na = fa->body_close + 1 - fa->start, nb = fb->body_close + 1 - fb->start;
	assert_int_equal(na, nb);
	assert_memory_equal(a->text + fa->start, b->text + fb->start, na);
	/* the selected one changed */
	fa = ptx_find_func(a, "_Z7vec_addPKfS0_Pfi");
	fb = ptx_find_func(b, "_Z7vec_addPKfS0_Pfi");
	assert_true(fb->body_close - fb->start > fa->body_close - fa->start);
	ptx_module_free(a);
	ptx_module_free(b);
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* ---- thread block probes (issue 32) ---- */

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* instrument() with ptx_inject_opts.no_shared (CUBPF_SHARED_SUMS=0): no shared memory added */
static int instrument_no_shared(const char *text, size_t len, const struct probes *p, char **out,
				size_t *out_len, struct ptx_inject_report *rep, char *err)
{
	struct ptx_inject_opts o = {.progs = p->progs, .prog_cnt = p->cnt, .maps = p->obj->maps,
				    .map_cnt = p->obj->map_cnt, .no_shared = true};
	return ptx_instrument(text, len, &o, out, out_len, rep, err, PTX_ERRLEN);
}

/* The block state in the context's block table (layout.h, "thread block table"): its count of
 * threads still running in device memory (__cubpf_blocks), no shared memory of cubpf's, ptxas
 * counts the same static shared bytes as for the original (a kernel may opt in to all the
 * rest). */
static void assert_block_table(const char *t, size_t len, const char *out, size_t olen,
			       const struct ptx_inject_report *rep)
{
	assert_int_equal(count_of(out, ".shared"), count_of(t, ".shared"));
	assert_int_equal(count_of(out, ".visible .const .align 8 .u64 __cubpf_blocks;\n"), 1);
	assert_int_equal(ptxas_smem(out, olen), ptxas_smem(t, len));
	/* thread (0,0,0) claims a slot (CAS) and stores the thread count and begin time */
	assert_int_equal(count_of(out, ".global.cas.b64 %__cb_bk5, [%__cb_bk3], %__cb_bk4, "
				  "%__cb_bk0;"), rep->kernels);
	assert_int_equal(count_of(out, ".global.u32 [%__cb_bk3+16], %__cb_b1;"), rep->kernels);
	assert_int_equal(count_of(out, ".global.u64 [%__cb_bk3+8], %__cb_bk4;"), rep->kernels);
	/* the end probe's begin_ns: kept by thread (0,0,0), read back at the end */
	assert_true(count_of(out, ".global.u64 %__cb_r") >= rep->kernels);
	assert_true(count_of(out, ", [%__cb_bk3+8];") >= rep->kernels);
	/* the slot is freed (EMPTY: no tombstone) after the end probes */
	assert_int_equal(count_of(out, "st.release.gpu.global.u64 [%__cb_bk3], 0;"), rep->kernels);
	/* one barrier added per kernel: the entry's, which tells every thread whether
	 * thread (0,0,0) took the start slot; the end goes straight there when it did */
	assert_int_equal(count_of(out, "\tbar.sync 0;"), count_of(t, "\tbar.sync 0;"));
	assert_int_equal(count_of(out, "\tbar.red.or.pred %__cb_bq, 0, %__cb_bq;"), rep->kernels);
	assert_int_equal(count_of(out, "setp.eq.u64 %__cb_bq, %__cb_bk5, %__cb_bk1;"),
			 rep->kernels);
	assert_int_equal(count_of(out, "\t@%__cb_bq bra $__cb"), rep->kernels);
	assert_int_equal(count_of(out, "atom.global.add.u32 %__cb_b3, [%__cb_bk3+16]"),
			 rep->kernels);
	assert_null(strstr(out, "__cubpf_block["));
}

/* Whether [from, to) of text holds `what` (to NULL: the end). */
static bool holds(const char *from, const char *to, const char *what)
{
	const char *w = strstr(from, what);
	return w && (!to || w < to);
}

/* The block state in 16 bytes of the kernel's shared memory (layout.h, "thread block state in
 * shared memory"): no block table, and no global memory in cubpf's own code of the block's
 * begin (before the entry barrier) or end (up to the end probes). */
static void assert_block_shared(const char *t, size_t len, const char *out, size_t olen,
				const struct ptx_inject_report *rep)
{
	assert_null(strstr(out, "__cubpf_blocks"));
	assert_null(strstr(out, "%__cb_bk"));
	assert_int_equal(count_of(out, "bar.red"), count_of(t, "bar.red"));
	assert_int_equal(count_of(out, "\t.shared .align 8 .b8 __cubpf_block[16];\n"), rep->kernels);
	assert_int_equal(ptxas_smem(out, olen), ptxas_smem(t, len) + 16 * (long)rep->kernels);
	/* thread (0,0,0) stores the begin time and the thread count, then the entry barrier */
	assert_int_equal(count_of(out, "\tst.shared.u64 [__cubpf_block+0], %__cb_bt;"),
			 rep->kernels);
	assert_int_equal(count_of(out, "\tst.shared.u32 [__cubpf_block+8], %__cb_b1;"),
			 rep->kernels);
	assert_int_equal(count_of(out, "\tbar.sync 0;"), count_of(t, "\tbar.sync 0;") + rep->kernels);
	/* each group of lanes leaving: one shared atomic; the end probe reads begin_ns there */
	assert_int_equal(count_of(out, "\tatom.shared.add.u32 %__cb_b3, [__cubpf_block+8], "
				  "%__cb_b2;"), rep->kernels);
	for (const char *b = strstr(out, "// cubpf: thread block begin"); b;
	     b = strstr(b + 1, "// cubpf: thread block begin")) {
		const char *bar = strstr(b, "\tbar.sync 0;"), *probe = strstr(b, "// cubpf: blockprobe");
		assert_non_null(bar);
		if (!probe || probe > bar) /* the begin probes run before the barrier */
			probe = bar;
		assert_false(holds(b, probe, ".global"));
		assert_false(holds(b, probe, "__cubpf_map_"));
		const char *e = strstr(b, "// cubpf: thread block end");
		assert_non_null(e);
		probe = strstr(e, "// cubpf: blockretprobe");
		assert_non_null(probe);
		assert_false(holds(e, probe, ".global"));
	}
}

/* Begin and end of every block, in every fixture kernel, with the block state in shared memory
 * where the module can take it (no .extern .shared: all but features.ptx) and in the block
 * table elsewhere, and with CUBPF_SHARED_SUMS=0: assembles for sm_90 and sm_80; one begin
 * (thread 0,0,0, then the entry barrier) and one end per kernel; every exit goes through the
 * block-end code. */
static void test_block_probes(void **state)
{
	(void)state;
	struct probes p;
	load_probes("block.bpf.o", &p);
	const size_t nfix = sizeof(cu_fixtures) / sizeof(cu_fixtures[0]);
	for (size_t fi = 0; fi < 2 * (nfix + NHAND); fi++) {
		size_t k = fi % (nfix + NHAND);
		bool no_shared = fi >= nfix + NHAND;
		const char *name = k < nfix ? cu_fixtures[k] : hand_fixtures[k - nfix];
		size_t len, olen;
		char *t = fixture(name, &len), *out, err[PTX_ERRLEN], what[256];
		struct ptx_inject_report rep;
		if (no_shared ? instrument_no_shared(t, len, &p, &out, &olen, &rep, err)
			      : instrument(t, len, &p, NULL, &out, &olen, &rep, err))
			fail_msg("%s with block.bpf.o: %s", name, err);
		assert_true(rep.instrumented >= 1);
		assert_int_equal(rep.instrumented, rep.kernels);
		assert_int_equal(rep.block_sites, 2 * rep.kernels);
		assert_int_equal(rep.entry_sites, 0);
		assert_true(rep.exit_sites >= rep.kernels);
		if (no_shared || strstr(t, ".extern .shared"))
			assert_block_table(t, len, out, olen, &rep);
		else
			assert_block_shared(t, len, out, olen, &rep);
		/* the only ret left in each kernel is the exit block's */
		assert_int_equal(count_of(out, "$__cubpf_exit:\n"), rep.kernels);
		/* ctx->end is a constant: the begin probe's test of it is gone */
		assert_non_null(strstr(out, "mov.u64 %__cb_r1, %globaltimer;"));
		snprintf(what, sizeof(what), "%s with thread block probes%s", name,
			 no_shared ? " (no shared memory)" : "");
		assert_assembles(out, olen, what);
		free(out);
		free(t);
	}
	/* a kernel of a cluster (sm_90): its cluster barriers are its own, the entry's is the CTA's */
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/sync90.ptx", &len), *out, err[PTX_ERRLEN], log[4096];
	struct ptx_inject_report rep;
	for (int no_shared = 0; no_shared < 2; no_shared++) {
		assert_int_equal(no_shared ? instrument_no_shared(t, len, &p, &out, &olen, &rep, err)
					   : instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
		assert_int_equal(rep.block_sites, 2);
		assert_true((strstr(out, "__cubpf_block[16]") != NULL) == !no_shared);
		if (ptxas(out, olen, "sm_90", log, sizeof(log)))
			fail_msg("sync90.ptx with thread block probes does not assemble for sm_90:\n%s",
				 log);
		free(out);
	}
	free(t);
	vm_object_free(p.obj);
}

/* The block begin precedes the kernel's first instruction and the entry barrier follows the
 * begin probe; the early returns of early_ret all reach the block end.  With the block state
 * in shared memory and in the block table. */
static void test_block_probe_placement(void **state)
{
	(void)state;
	struct probes p;
	load_probes("block.bpf.o", &p);
	size_t len, olen;
	char *t = fixture(hand_fixtures[0], &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	for (int no_shared = 0; no_shared < 2; no_shared++) {
		assert_int_equal(no_shared ? instrument_no_shared(t, len, &p, &out, &olen, &rep, err)
					   : instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
		assert_int_equal(rep.exit_sites, 5); /* @%p1 ret, @!%p2 ret, @%p3 exit, ret.uni, ret */
		const char *begin = strstr(out, "// cubpf: thread block begin");
		const char *probe = strstr(out, "// cubpf: blockprobe on_block_begin");
		const char *bar = strstr(out, no_shared ? "\tbar.red.or.pred %__cb_bq, 0, %__cb_bq;"
							: "\tbar.sync 0;");
		const char *exitb = strstr(out, "$__cubpf_exit:");
		const char *endp = strstr(out, "// cubpf: blockretprobe on_block_end");
		assert_non_null(begin);
		assert_non_null(probe);
		assert_non_null(bar);
		assert_non_null(exitb);
		assert_non_null(endp);
		assert_true(begin < probe && probe < bar && bar < exitb && exitb < endp);
		/* thread (0,0,0) sets the count before the barrier, under the same predicate that
		 * skips the begin probe for every other thread */
		const char *set = strstr(out, no_shared
					 ? "st.relaxed.gpu.global.u32 [%__cb_bk3+16], %__cb_b1;"
					 : "st.shared.u32 [__cubpf_block+8], %__cb_b1;");
		assert_non_null(set);
		assert_true(begin < set && set < probe);
		/* nothing but a branch to the exit block is left of the kernel's own returns */
		assert_null(strstr(out, "\tret.uni;"));
		assert_int_equal(count_of(out, "\tret;"), 1);
		assert_int_equal(count_of(out, "\texit;"), 0);
		free(out);
	}
	free(t);
	vm_object_free(p.obj);
}


/* Entry probes that test first (first.bpf.o) go after the kernel's leading whole lines of
 * pure instructions (parameter loads, index arithmetic, `.loc` between them), before its first
 * memory access, branch or label; a label, a nested block, an impure first instruction or a
 * line of two instructions keeps them before it.  Probes that work on every thread first
 * (count.bpf.o) stay at the top. */
static void test_entry_probe_placement(void **state)
{
	(void)state;
	static const char *const head = ".version 7.8\n.target sm_80\n.address_size 64\n";
	static const struct {
		const char *body, *before; /* the probe comes right before `before` */
	} cases[] = {
		{"\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<3>;\n\t.reg .pred %p<2>;\n"
		 "\tld.param.u64 %rd1, [k_param_0];\n\t.loc 1 3 2\n\tmov.u32 %r1, %tid.x;\n"
		 "\tmad.lo.s32 %r2, %r1, 4, 0; // index\n\tsetp.ge.s32 %p1, %r1, 7;\n"
		 "\t@%p1 bra $L_done;\n\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], %r2;\n"
		 "$L_done:\n\tret;\n",
		 "\t@%p1 bra $L_done;"},
		{"\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<3>;\n"
		 "\tld.param.u64 %rd1, [k_param_0];\n\tld.global.u32 %r1, [%rd1];\n"
		 "\tadd.s32 %r2, %r1, 1;\n\tst.global.u32 [%rd1], %r2;\n\tret;\n",
		 "\tld.global.u32 %r1, [%rd1];"},
		{"\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<3>;\n\t.reg .pred %p<2>;\n"
		 "$L_top:\n\tmov.u32 %r1, %tid.x;\n\tsetp.eq.s32 %p1, %r1, 5;\n\t@%p1 bra $L_top;\n\tret;\n",
		 "$L_top:"},
		{"\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<3>;\n"
		 "\tmov.u32 %r1, %tid.x;\n\t{\n\t.reg .b32 t;\n\tmov.u32 t, %r1;\n\t}\n\tret;\n",
		 "\t{\n"},
		{"\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<3>;\n"
		 "\tmov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x;\n\tld.param.u64 %rd1, [k_param_0];\n"
		 "\tst.global.u32 [%rd1], %r2;\n\tret;\n",
		 "\tmov.u32 %r1, %tid.x; mov.u32 %r2"}, /* two on a line: not moved past */
	};
	struct probes p, all;
	load_probes("first.bpf.o", &p);
	load_probes("count.bpf.o", &all);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char text[2048], err[PTX_ERRLEN], *out, want[256];
		snprintf(text, sizeof(text), "%s\n.visible .entry k(.param .u64 k_param_0)\n{\n%s}\n",
			 head, cases[c].body);
		size_t olen;
		struct ptx_inject_report rep;
		assert_int_equal(instrument(text, strlen(text), &p, NULL, &out, &olen, &rep, err), 0);
		const char *probe = strstr(out, "// cubpf: kprobe");
		const char *before = strstr(out, cases[c].before);
		assert_non_null(probe);
		assert_non_null(before);
		/* the probe's code, then (nothing of the kernel's between) the instruction */
		const char *next_kernel = strstr(probe, cases[c].before);
		assert_ptr_equal(next_kernel, before);
		snprintf(want, sizeof(want), "%s", cases[c].before);
		assert_true(probe < before);
		/* the kernel's instructions before `before` come, unchanged, right before the probe */
		const char *body = cases[c].body, *insns = body;
		for (const char *r; (r = strstr(insns, "\t.reg ")) && r < strstr(body, cases[c].before);)
			insns = strchr(r, '\n') + 1;
		size_t n = (size_t)(strstr(body, cases[c].before) - insns);
		if (n) {
			char *lead = strndup(insns, n);
			const char *at = strstr(out, lead);
			free(lead);
			assert_non_null(at);
			if (!(at + n <= probe && strspn(at + n, "\t") == (size_t)(probe - at - n)))
				fail_msg("case %zu:\n%s", c, out);
		}
		assert_assembles(out, olen, want);
		free(out);
		/* a probe that works on every thread first (count.bpf.o) stays at the top */
		assert_int_equal(instrument(text, strlen(text), &all, NULL, &out, &olen, &rep, err), 0);
		probe = strstr(out, "// cubpf: kprobe");
		assert_non_null(probe);
		char *first = strndup(insns, strcspn(insns, "\n"));
		assert_true(probe < strstr(out, first));
		free(first);
		free(out);
	}
	vm_object_free(p.obj);
	vm_object_free(all.obj);
}

/* Programs for vec_add only: vec_scale comes out byte for byte; with -k matching nothing, the
 * whole module does. */
static void test_block_probe_untouched(void **state)
{
	(void)state;
	struct probes p;
	load_probes("block_vecadd.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("vecadd.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, "no_such_kernel*", &out, &olen, &rep, err), 0);
	assert_int_equal(rep.instrumented, 0);
	assert_int_equal(olen, len);
	assert_memory_equal(out, t, len);
	free(out);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(rep.kernels, 2);
	assert_int_equal(rep.instrumented, 1);
	assert_int_equal(rep.block_sites, 2);
	assert_assembles(out, olen, "vecadd.ptx with block probes on vec_add");
	struct ptx_module *a, *b;
	assert_int_equal(ptx_parse(t, len, &a, err, sizeof(err)), 0);
	assert_int_equal(ptx_parse(out, olen, &b, err, sizeof(err)), 0);
	const struct ptx_func *fa = ptx_find_func(a, "_Z9vec_scalePffi");
	const struct ptx_func *fb = ptx_find_func(b, "_Z9vec_scalePffi");
	assert_non_null(fa);
	assert_non_null(fb);
	size_t na = fa->body_close + 1 - fa->start, nb = fb->body_close + 1 - fb->start;
	assert_int_equal(na, nb);
	assert_memory_equal(a->text + fa->start, b->text + fb->start, na);
	/* ctx->end folded to 1: the end probe adds a constant */
	assert_null(strstr(out, "%__cb_r1, %globaltimer"));
	ptx_module_free(a);
	ptx_module_free(b);
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* ctx->kernel_id 3 for every kernel: blocklat counts ids under 1024 (the hash of a name is
 * larger, and its program would fold to nothing). */
static uint32_t id_three(void *user, const char *mangled)
{
	(void)user;
	(void)mangled;
	return 3;
}

/* Statements (lines ending in ';') in [from, to). */
static size_t statements(const char *from, const char *to)
{
	size_t n = 0;
	for (const char *c = strchr(from, ';'); c && c < to; c = strchr(c + 1, ';'))
		n++;
	return n;
}

/* blocklat (issue 32: 2.6x on vec_add with the block table) on vec_add-like kernels and on
 * reduce.ptx (1 KB of static shared memory): the block's state in shared memory, nothing of
 * cubpf's own in global memory at the block's begin nor at its end before the program, 15
 * statements before the entry barrier (thread 0,0,0's two stores and its branch around
 * them); assembles for sm_90 and sm_80.  With CUBPF_SHARED_SUMS=0, the block table. */
static void test_blocklat_shared(void **state)
{
	(void)state;
	static const char *const names[] = {"vecadd.ptx", "vecadd_g.ptx", "vecadd_loop.ptx",
					    "reduce.ptx", "early_ret.ptx"};
	struct probes p;
	load_probes("../probes/blocklat.bpf.o", &p);
	for (size_t i = 0; i < 2 * sizeof(names) / sizeof(names[0]); i++) {
		bool no_shared = i % 2;
		size_t len, olen;
		char *t = fixture(names[i / 2], &len), *out, err[PTX_ERRLEN], what[256];
		struct ptx_inject_opts o = {.progs = p.progs, .prog_cnt = p.cnt, .maps = p.obj->maps,
					    .map_cnt = p.obj->map_cnt, .kernel_id = id_three,
					    .no_shared = no_shared};
		struct ptx_inject_report rep;
		if (ptx_instrument(t, len, &o, &out, &olen, &rep, err, sizeof(err)))
			fail_msg("%s with blocklat: %s", names[i / 2], err);
		assert_int_equal(rep.instrumented, rep.kernels);
		assert_int_equal(rep.block_sites, rep.kernels); /* ends only */
		assert_int_equal(count_of(out, "// cubpf: blockretprobe blocklat_end"), rep.kernels);
		assert_non_null(strstr(out, "__cubpf_map_")); /* the program is there, not folded */
		if (no_shared) {
			assert_non_null(strstr(out, "\n.visible .const .align 8 .u64 __cubpf_blocks;"));
			assert_int_equal(count_of(out, "atom.global.add.u32 %__cb_b3, [%__cb_bk3+16]"),
					 rep.kernels);
		} else {
			assert_block_shared(t, len, out, olen, &rep);
			const char *b = strstr(out, "// cubpf: thread block begin");
			assert_int_equal(statements(b, strstr(b, "\tbar.sync 0;")), 15);
		}
		snprintf(what, sizeof(what), "%s with blocklat%s", names[i / 2],
			 no_shared ? " (no shared memory)" : "");
		assert_assembles(out, olen, what);
		free(out);
		free(t);
	}
	vm_object_free(p.obj);
}

/* vecadd_loop.ptx with `extra` bytes of static shared memory declared in front of its kernel,
 * instrumented with block_defer.bpf.o: whether it has the block's state and the counters' sums
 * in shared memory. */
static void block_defer_room(const struct probes *p, size_t extra, bool *block, bool *sums)
{
	size_t len, olen;
	char *t = fixture("vecadd_loop.ptx", &len), *out, err[PTX_ERRLEN];
	const char *v = strstr(t, ".visible .entry");
	assert_non_null(v);
	char *src = malloc(len + 64);
	assert_non_null(src);
	snprintf(src, len + 64, "%.*s.shared .align 8 .b8 big[%zu];\n%s", (int)(v - t), t, extra, v);
	struct ptx_inject_report rep;
	assert_int_equal(instrument(src, strlen(src), p, NULL, &out, &olen, &rep, err), 0);
	*block = strstr(out, "__cubpf_block[16]") != NULL;
	*sums = strstr(out, "__cubpf_accs[16]") != NULL;
	assert_true(*block == !strstr(out, "__cubpf_blocks"));
	free(out);
	free(src);
	free(t);
}

/* A block end and deferred counters in one kernel: both in shared memory (16 bytes each, and
 * ptxas counts 32), each with its entry barrier; shared_room's 32 KB counts the two together:
 * with 32 KB - 32 of the module's own both fit, with 8 more the block's state alone, with 16
 * more neither (the block table, the counters' sums per warp). */
static void test_block_defer_room(void **state)
{
	(void)state;
	struct probes p;
	load_probes("block_defer.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("vecadd_loop.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_non_null(strstr(out, "__cubpf_block[16]"));
	assert_non_null(strstr(out, "__cubpf_accs[16]"));
	assert_int_equal(ptxas_smem(out, olen), ptxas_smem(t, len) + 32);
	assert_int_equal(count_of(out, "\tbar.sync 0;"), count_of(t, "\tbar.sync 0;") + 2);
	assert_assembles(out, olen, "vecadd_loop.ptx with block_defer.bpf.o");
	free(out);
	free(t);
	bool block, sums;
	block_defer_room(&p, 32768 - 32, &block, &sums);
	assert_true(block && sums);
	block_defer_room(&p, 32768 - 24, &block, &sums);
	assert_true(block && !sums);
	block_defer_room(&p, 32768 - 8, &block, &sums);
	assert_true(!block && !sums);
	vm_object_free(p.obj);
}

/* The index of the map called name in an object (-1 when none). */
static int map_index(const struct vm_object *o, const char *name)
{
	for (uint32_t i = 0; i < o->map_cnt; i++)
		if (!strcmp(o->maps[i].name, name))
			return (int)i;
	return -1;
}

/* Runs tests/ptx/SCRIPT on instrumented PTX: `out` goes to a temporary file whose path comes
 * between `pre` and `post` on the command line; lines other than "ok ..." are printed; the test
 * fails unless the script exits 0 and its last line contains `want` (its "N passed, 0 failed"). */
static void sim_check(const char *what, const char *script, const char *pre, const char *out,
		      size_t olen, const char *post, const char *want)
{
	char tmp[] = "/tmp/cubpf-ptxsim-XXXXXX", cmd[1024], line[512], last[512] = "";
	int fd = mkstemp(tmp);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, out, olen), (ssize_t)olen);
	close(fd);
	snprintf(cmd, sizeof(cmd), "python3 tests/ptx/%s %s %s %s 2>&1", script, pre, tmp, post);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "ok", 2))
			print_message("%s %s: %s", script, what, line);
		snprintf(last, sizeof(last), "%s", line);
	}
	int st = pclose(f);
	unlink(tmp);
	if (st != 0 || !strstr(last, want))
		fail_msg("%s %s (needs python3): %s", script, what, last[0] ? last : "no output");
}

/* The block end's protocol, run on tests/ptx/ptxsim_blocks.py (a model of the threads one after
 * the other, each block's thread (0,0,0) first, the threads of a block leaving in groups of
 * lanes, 3-D blocks in a 3-D grid): begins = every block, ends = every block with its state
 * (in shared memory: all of them), each as its last group of threads leaves, with its own
 * begin time; pred_ret's early, predicated and `exit` returns all counted.  With the state in
 * shared memory (and no block table touched), then in the block table (CUBPF_SHARED_SUMS=0):
 * colliding grids probing past each other, tombstones reused, a block that finds the table
 * full counted and left without an end. */
static void test_block_protocol_sim(void **state)
{
	(void)state;
	struct probes p;
	load_probes("block.bpf.o", &p);
	size_t len, olen;
	char *t = fixture(hand_fixtures[0], &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	int c = map_index(p.obj, "counts"), tm = map_index(p.obj, "times");
	int b = map_index(p.obj, "begins");
	assert_true(c >= 0 && tm >= 0 && b >= 0);
	char args[128];
	snprintf(args, sizeof(args), "pred_ret %d %d %d", c, tm, b);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "__cubpf_blocks"));
	sim_check("block.bpf.o (shared memory)", "ptxsim_blocks.py", "", out, olen, args,
		  "8 passed, 0 failed");
	free(out);
	assert_int_equal(instrument_no_shared(t, len, &p, &out, &olen, &rep, err), 0);
	assert_non_null(strstr(out, "__cubpf_blocks"));
	sim_check("block.bpf.o (block table)", "ptxsim_blocks.py", "", out, olen, args,
		  "15 passed, 0 failed");
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* Instruction counts run on tests/ptx/ptxsim_instr.py (a model of the threads one after the
 * other, each a warp of one lane) against the model's own count of the instructions each thread
 * of tests/ptx/kernels/counted.ptx fetches natively (a loop of a per-thread trip count, a skipped
 * loop, a predicated early ret, a branch half the threads take): bbprobe (a warp-aggregated add
 * of ctx->insn_count per block entry), bbretprobe (entries x instructions at exit) and a
 * kretprobe's ctx->insns and warp_insns must each give the same sum (bpf_warp_sum's one-reduction
 * path and, `wide`, its three-reduction one); so must bbdefer's adds
 * kept in registers (CUBPF_F_DEFER_ADD), to one record all along and to two in turn. */
static void test_icount_sim(void **state)
{
	(void)state;
	static const struct {
		const char *probe, *threads, *warps, *more;
	} runs[] = {{"bb.bpf.o", "0", "1", ""}, {"bbret.bpf.o", "16", "-1", ""},
		    {"icount.bpf.o", "0", "1", ""}, {"icount.bpf.o", "0", "1", "wide"},
		    {"bbdefer.bpf.o", "0", "1+2", ""}};
	const char *native = "tests/ptx/kernels/counted.ptx";
	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		struct probes p;
		load_probes(runs[r].probe, &p);
		size_t len, olen;
		char *t = fixture(native, &len), *out, err[PTX_ERRLEN];
		struct ptx_inject_report rep;
		if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
			fail_msg("counted.ptx with %s: %s", runs[r].probe, err);
		char args[256];
		snprintf(args, sizeof(args), "counted %d %s %s %s", map_index(p.obj, "counts"),
			 runs[r].threads, runs[r].warps, runs[r].more);
		sim_check(runs[r].probe, "ptxsim_instr.py", native, out, olen, args,
			  " passed, 0 failed");
		free(out);
		free(t);
		vm_object_free(p.obj);
	}
}

static uint32_t small_id(void *user, const char *mangled);

/* Warp-uniform loops of one block (ptx-rewriter/uniform.c) on tests/ptx/kernels/uniform.ptx:
 * only the loop over the parameter's trip count counts the warp once where it is entered (no
 * election per iteration); the loops over a thread's own trip count, a register set in two
 * places, a loaded bound, and a loop inside another keep the election per entry.  Assembled
 * for sm_80 (the lowest lane) and sm_90 (elect.sync); on ptxsim_instr.py the counts of the
 * threads and of one-lane warps stay exact, for the test probe and the bundled instrcount, and
 * on ptxsim_warpk.py (32-lane warps that diverge and leave early, 2 blocks of 2 warps) the
 * test probe's counts by threads and by warps equal the model's own. */
static void test_uniform_loops(void **state)
{
	(void)state;
	const char *native = "tests/ptx/kernels/uniform.ptx";
	for (int sm90 = 0; sm90 < 2; sm90++) {
		struct probes p;
		load_probes(sm90 ? "../probes/instrcount.bpf.o" : "icount.bpf.o", &p);
		size_t len, olen;
		char *t = fixture(native, &len), *out, err[PTX_ERRLEN], *sm;
		if (sm90) {
			assert_non_null(sm = strstr(t, ".target sm_80"));
			memcpy(sm, ".target sm_90", 13);
		}
		uint32_t ids = 0;
		struct ptx_inject_opts o = {.progs = p.progs, .prog_cnt = p.cnt, .maps = p.obj->maps,
					    .map_cnt = p.obj->map_cnt, .kernel_id = small_id,
					    .user = &ids};
		struct ptx_inject_report rep;
		assert_int_equal(ptx_instrument(t, len, &o, &out, &olen, &rep, err, sizeof(err)), 0);
		const char *enter = strstr(out, "\t@%__cb_ip mov.u32 %__cb_wc0, 1;\nUNI:\n");
		const char *uni = strstr(out, "UNI:\n"), *div = strstr(out, "DIV:\n");
		assert_true(enter && uni && div && enter < uni);
		const char *back = strstr(uni, "@%p2 bra UNI;"), *el = strstr(uni, "%__cb_im0;");
		assert_true(back && back < div);
		if (el && el < back)
			fail_msg("an election per iteration of the uniform loop");
		assert_null(strstr(uni, "mov.u32 %__cb_wc")); /* one loop marked */
		uint32_t per_entry = 0;
		for (const char *c = out; (c = strstr(c, "@%__cb_ip add.u32 %__cb_wc")); c++)
			per_entry++;
		assert_int_equal(per_entry, 6); /* DIV, ONE, MEM, INNER, OUTER and its tail */
		assert_non_null(strstr(out, sm90 ? "elect.sync %__cb_im1|%__cb_ip" : "%lanemask_lt"));
		char log[4096];
		if (ptxas(out, olen, sm90 ? "sm_90" : "sm_80", log, sizeof(log)))
			fail_msg("uniform.ptx does not assemble:\n%s", log);
		char args[256];
		if (sm90) /* kernel 1's records: keys 4..7 (IC_LANES by warp slot) of a per-SM map
			   * of 128-byte values (256 SM copies of a key, 4096 words), SM 0 */
			snprintf(args, sizeof(args),
				 "uniform %d 16384+20480+24576+28672 16385+20481+24577+28673",
				 map_index(p.obj, "icstats"));
		else
			snprintf(args, sizeof(args), "uniform %d 0 1", map_index(p.obj, "counts"));
		sim_check(sm90 ? "instrcount" : "icount.bpf.o", "ptxsim_instr.py", native, out, olen,
			  args, "3 passed, 0 failed");
		if (!sm90) /* 32-lane warps: the warps' count too (ptxsim_warp.py has no elect.sync) */
			sim_check("icount.bpf.o", "ptxsim_warpk.py", native, out, olen, args,
				  "3 passed, 0 failed");
		free(out);
		/* the trip count read from a .param that is not the kernel's (a call's result, in
		 * the scope of an inner block): not uniform */
		static const char from[] = "ld.param.u32 %r10, [uniform_iters];";
		static const char to[] = "{ .param .b32 rv; ld.param.u32 %r10, [rv]; }";
		char *k = strstr(t, from), *t2 = malloc(len + sizeof(to));
		assert_true(k && t2);
		int n = snprintf(t2, len + sizeof(to), "%.*s%s%s", (int)(k - t), t, to,
				 k + strlen(from));
		assert_int_equal(ptx_instrument(t2, (size_t)n, &o, &out, &olen, &rep, err, sizeof(err)),
				 0);
		assert_null(strstr(out, "mov.u32 %__cb_wc0, 1;"));
		free(out);
		free(t2);
		free(t);
		vm_object_free(p.obj);
	}
}

/* Adds kept in registers (CUBPF_F_DEFER_ADD) are flushed where the kernel ends: a module where
 * a .func may end the thread (exit) keeps none (the thread would take its sums with it). */
static void test_defer_add_not_with_exiting_func(void **state)
{
	(void)state;
	struct probes p;
	load_probes("bbdefer.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/counted.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_non_null(strstr(out, "%__cb_da0"));
	free(out);
	static const char quit[] = "\n.visible .func cubpf_test_quit()\n{\n\texit;\n}\n";
	char *t2 = malloc(len + sizeof(quit));
	assert_non_null(t2);
	memcpy(t2, t, len);
	memcpy(t2 + len, quit, sizeof(quit));
	assert_int_equal(instrument(t2, len + sizeof(quit) - 1, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "%__cb_da"));
	assert_non_null(strstr(out, "red.global"));
	free(out);
	free(t2);
	free(t);
	vm_object_free(p.obj);
}

/* Runs `kernel` of the instrumented module on tests/ptx/ptxsim_defer.py (threads one after the
 * other, one-lane warps on SM 0, blocks of 8) and checks that map `map` holds exactly the n
 * words of want (offset, value) and nothing else. */
static void defer_run(const char *out, size_t olen, const char *kernel, int map, int threads,
		      int valid, const uint64_t (*want)[2], int n)
{
	char tmp[] = "/tmp/cubpf-ptxsim-defer-XXXXXX", cmd[768], line[512];
	int fd = mkstemp(tmp);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, out, olen), (ssize_t)olen);
	close(fd);
	snprintf(cmd, sizeof(cmd), "python3 tests/ptx/ptxsim_defer.py %s %s %d %d %d 2>&1", tmp,
		 kernel, map, threads, valid);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	int words = 0, found = 0, done = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long o, v;
		if (sscanf(line, "word %llu %llu", &o, &v) == 2) {
			words++;
			for (int i = 0; i < n; i++)
				found += o == want[i][0] && v == want[i][1];
			if (words > n)
				print_message("ptxsim_defer: unexpected %s", line);
		} else if (!strncmp(line, "threads ", 8)) {
			done = 1;
		} else {
			print_message("ptxsim_defer: %s", line);
		}
	}
	int st = pclose(f);
	unlink(tmp);
	if (st != 0 || !done)
		fail_msg("ptxsim_defer (needs python3) failed: status %d", st);
	assert_int_equal(words, n);
	assert_int_equal(found, n);
}

/* Deferred counters (ptx-rewriter/accs.c): memtrace on a grid-stride vec_add (its accesses in a
 * loop: only there are counters deferred) adds to kernel registers at its sites and reduces only at the exit, through the block's sums in shared memory, or per warp
 * when the module has dynamic shared memory.  On the model, the map must hold the known answer
 * either way: per valid thread two 4-byte global loads and a store, each one 32-byte sector (28
 * bytes beyond the 4 accessed); 24 threads in 3 blocks, the second one partly valid, the third
 * not at all. */
static void test_defer_sim(void **state)
{
	(void)state;
	struct probes p;
	load_probes("../probes/memtrace.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("vecadd_loop.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	const char *kernel = "_Z12vec_add_loopPKfS0_Pfi";
	const int threads = 24, valid = 13;
	uint64_t key = (ptx_kernel_id(kernel) & 63) * 8 + CUBPF_SPACE_GLOBAL;
	uint64_t at = key * 256 * 256; /* slot 0's copy, 256-byte values */
	const uint64_t want[4][2] = {{at + 16, 2 * valid}, {at + 64, valid},
				     {at + 192, 56 * valid}, {at + 200, 28 * valid}};
	int map = map_index(p.obj, "counts");
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	const char *exit1 = strstr(out, "$__cubpf_exit:"), *red = strstr(out, "red.global");
	assert_non_null(exit1);
	assert_non_null(red);
	assert_true(red > exit1); /* no reduction at the sites */
	assert_non_null(strstr(out, "add.s64 %__cb_a0, %__cb_a0, "));
	assert_non_null(strstr(out, "mov.b64 %__cb_a0, 0;"));
	assert_null(strstr(out, "and.b32 %__cb_x1, %__cb_x1, 255;")); /* per-SM lookups fold */
	assert_non_null(strstr(out, ".shared .align 8 .b8 __cubpf_accs[40];")); /* 4 counters */
	assert_non_null(strstr(out, "bar.sync 0;"));
	defer_run(out, olen, kernel, map, threads, valid, want, 4);
	free(out);
	/* no_shared (CUBPF_SHARED_SUMS=0): no shared memory, one reduction per warp */
	struct ptx_inject_opts o = {.progs = p.progs, .prog_cnt = p.cnt, .maps = p.obj->maps,
				    .map_cnt = p.obj->map_cnt, .no_shared = true};
	assert_int_equal(ptx_instrument(t, len, &o, &out, &olen, &rep, err, PTX_ERRLEN), 0);
	assert_null(strstr(out, ".shared"));
	assert_null(strstr(out, "bar.sync"));
	assert_non_null(strstr(out, "add.s64 %__cb_a0, %__cb_a0, "));
	defer_run(out, olen, kernel, map, threads, valid, want, 4);
	free(out);
	/* dynamic shared memory in the module: no shared sums, one reduction per warp */
	size_t dlen = len + 64;
	char *dyn = malloc(dlen + 1);
	/* (room for the declarations the variants below insert) */
	assert_non_null(dyn);
	const char *v = strstr(t, ".visible .entry");
	assert_non_null(v);
	int head = (int)(v - t);
	dlen = (size_t)snprintf(dyn, dlen + 1, "%.*s.extern .shared .align 16 .b8 dyn[];\n%s", head, t,
				v);
	assert_int_equal(instrument(dyn, dlen, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "__cubpf_accs"));
	assert_non_null(strstr(out, "add.s64 %__cb_a0, %__cb_a0, "));
	defer_run(out, olen, kernel, map, threads, valid, want, 4);
	free(out);
	/* a function defined in another module (relocatable device code) might end the thread:
	 * no deferred counters; a CUDA system call (vprintf) does not */
	static const char *const ext[] = {"ext_fn", "vprintf"};
	for (int e = 0; e < 2; e++) {
		dlen = (size_t)snprintf(dyn, len + 64, "%.*s.extern .func (.param .b32 r) %s\n(\n"
					"\t.param .b32 a\n)\n;\n%s", head, t, ext[e], v);
		assert_int_equal(instrument(dyn, dlen, &p, NULL, &out, &olen, &rep, err), 0);
		assert_true((strstr(out, "%__cb_a0") != NULL) == (e == 1));
		free(out);
	}
	free(dyn);
	vm_object_free(p.obj);
	/* a host program naming the map (tests/live's shared.bpf.o: a uprobe reads what a kprobe
	 * adds) may read it while kernels run: the adds stay at the site */
	load_probes("../live-probes/shared.bpf.o", &p);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "%__cb_a"));
	assert_non_null(strstr(out, "red.global"));
	free(out);
	vm_object_free(p.obj);
	/* a program that reads the map it adds to keeps its reductions at the site */
	load_probes("defer_read.bpf.o", &p);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "%__cb_a"));
	assert_non_null(strstr(out, "red.global"));
	assert_null(strstr(out, "$__cubpf_exit:"));
	free(out);
	vm_object_free(p.obj);
	free(t);
	/* a .func that ends the thread (exit) would lose a kernel's deferred counts: none in its
	 * module (the grid-stride vec_add, whose accesses are in a loop, and such a .func beside) */
	load_probes("count.bpf.o", &p);
	t = fixture("vecadd_loop.ptx", &len);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_non_null(strstr(out, "%__cb_a0"));
	free(out);
	static const char quit[] = "\n.visible .func cubpf_test_quit()\n{\n\texit;\n}\n";
	char *t2 = malloc(len + sizeof(quit));
	assert_non_null(t2);
	memcpy(t2, t, len);
	memcpy(t2 + len, quit, sizeof(quit));
	assert_int_equal(instrument(t2, len + sizeof(quit) - 1, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "%__cb_a0"));
	free(out);
	free(t2);
	free(t);
	vm_object_free(p.obj);
	/* a site a thread passes once (vec_add without a loop) keeps its reduction there */
	load_probes("../probes/memtrace.bpf.o", &p);
	t = fixture("vecadd.ptx", &len);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_null(strstr(out, "%__cb_a0"));
	assert_null(strstr(out, "__cubpf_accs"));
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* The flush of memtrace's deferred counters on vec_add, on tests/ptx/ptxsim_flush.py (32-lane
 * warps leaving in groups, on SM 5): with the block's sums (sm_80: redux.sync), per warp (a
 * module with dynamic shared memory), and before sm_80 (the sums' shuffle loop), each counter's
 * copy for SM 5 must end as the sum of its lanes' values, nothing else written. */
static void test_defer_flush_sim(void **state)
{
	(void)state;
	struct probes p;
	load_probes("../probes/memtrace.bpf.o", &p);
	size_t len;
	char *t = fixture("vecadd_loop.ptx", &len), err[PTX_ERRLEN];
	const char *kernel = "_Z12vec_add_loopPKfS0_Pfi";
	uint64_t at = ((ptx_kernel_id(kernel) & 63) * 8 + CUBPF_SPACE_GLOBAL) * 256 * 256;
	const char *v = strstr(t, ".visible .entry");
	assert_non_null(v);
	for (int variant = 0; variant < 3; variant++) {
		char *src = malloc(len + 64), *out, *sm;
		assert_non_null(src);
		snprintf(src, len + 64, "%.*s%s%s", (int)(v - t), t,
			 variant ? ".extern .shared .align 16 .b8 dyn[];\n" : "", v);
		if (variant == 2) {
			assert_non_null(sm = strstr(src, ".target sm_80"));
			memcpy(sm, ".target sm_75", 13);
		}
		size_t olen;
		struct ptx_inject_report rep;
		assert_int_equal(instrument(src, strlen(src), &p, NULL, &out, &olen, &rep, err), 0);
		assert_true((strstr(out, "__cubpf_accs[") != NULL) == (variant == 0));
		/* counters in order of first use: the load's accesses and waste, the store's */
		char args[256], what[32];
		snprintf(args, sizeof(args), "%s 256 %llu,%llu,%llu,%llu", kernel,
			 (unsigned long long)at + 16, (unsigned long long)at + 192,
			 (unsigned long long)at + 64, (unsigned long long)at + 200);
		snprintf(what, sizeof(what), "variant %d", variant);
		sim_check(what, "ptxsim_flush.py", "", out, olen, args, "3 passed, 0 failed");
		free(out);
		free(src);
	}
	free(t);
	vm_object_free(p.obj);
}

/* bpf_warp_count_unique's lowering on tests/ptx/ptxsim_warp.py (32 lanes in step): coalesced,
 * misaligned, wrapping and carrying sequences take the fast path (shuffles and votes); strided,
 * falling, alternating, scattered and partial warps take match.any; every lane returns the
 * number of distinct values among the active lanes in each case. */
static void test_warp_unique_sim(void **state)
{
	(void)state;
	struct probes p;
	load_probes("unique.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("vecadd.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	sim_check("unique.bpf.o", "ptxsim_warp.py", "", out, olen, "", "22 passed, 0 failed");
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* ---- device functions: fentry/fexit (issue 32) ---- */

/* The .funcs with a body and the rets in them. */
static void count_funcs(const char *t, size_t len, uint32_t *funcs, uint32_t *rets)
{
	struct ptx_module *m;
	char err[PTX_ERRLEN];
	assert_int_equal(ptx_parse(t, len, &m, err, sizeof(err)), 0);
	*funcs = *rets = 0;
	for (uint32_t i = 0; i < m->func_cnt; i++) {
		const struct ptx_func *f = &m->funcs[i];
		if (f->is_entry || !f->has_body)
			continue;
		++*funcs;
		for (uint32_t k = 0; k < f->insn_cnt; k++)
			*rets += !strcmp(f->insns[k].opcode, "ret") || !strcmp(f->insns[k].opcode, "ret.uni");
	}
	ptx_module_free(m);
}

/* A function's text (declaration to closing brace) in a module. */
static char *func_text(const char *t, size_t len, const char *name)
{
	struct ptx_module *m;
	char err[PTX_ERRLEN];
	assert_int_equal(ptx_parse(t, len, &m, err, sizeof(err)), 0);
	const struct ptx_func *f = ptx_find_func(m, name);
	assert_non_null(f);
	char *r = strndup(m->text + f->start, f->body_close + 1 - f->start);
	ptx_module_free(m);
	return r;
}

/* In every fixture: an fentry site per .func with a body (called or not), an fexit site per
 * ret; kernels untouched, modules without .funcs byte for byte; assembles for sm_90 and
 * sm_80. */
static void test_func_probes(void **state)
{
	(void)state;
	struct probes p;
	load_probes("func.bpf.o", &p);
	const size_t nfix = sizeof(cu_fixtures) / sizeof(cu_fixtures[0]);
	for (size_t fi = 0; fi < nfix + NHAND + 1; fi++) {
		const char *name = fi < nfix ? cu_fixtures[fi] : fi < nfix + NHAND ? hand_fixtures[fi - nfix]
								     : "tests/ptx/kernels/funcs.ptx";
		size_t len, olen;
		char *t = fixture(name, &len), *out, err[PTX_ERRLEN], what[256];
		struct ptx_inject_report rep;
		uint32_t funcs, rets;
		count_funcs(t, len, &funcs, &rets);
		if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
			fail_msg("%s with func.bpf.o: %s", name, err);
		assert_int_equal(rep.instrumented, 0);
		assert_int_equal(rep.entry_sites + rep.exit_sites + rep.block_sites, 0);
		assert_int_equal(rep.funcs, funcs);
		assert_int_equal(rep.fentry_sites, funcs);
		assert_int_equal(rep.fexit_sites, rets);
		assert_int_equal(count_of(out, "// cubpf: fentry on_func_entry"), funcs);
		assert_int_equal(count_of(out, "// cubpf: fexit on_func_exit"), rets);
		if (!funcs) {
			assert_int_equal(olen, len);
			assert_memory_equal(out, t, len);
		} else {
			snprintf(what, sizeof(what), "%s with fentry/fexit", name);
			assert_assembles(out, olen, what);
		}
		free(out);
		free(t);
	}
	vm_object_free(p.obj);
}

/* calls.ptx: probes at the first instruction and before the ret of each .func, the kernel's
 * text as it was; ctx->kernel_id is the one caller's id, ctx->func_id the function's, params its
 * own .param arguments; globs name functions; -k keeps the functions of the kernels it leaves
 * out untouched. */
static void test_func_probe_placement(void **state)
{
	(void)state;
	struct probes p;
	load_probes("func.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("calls.ptx", &len), *out, err[PTX_ERRLEN], num[32];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	char *k0 = func_text(t, len, "calls"), *k1 = func_text(out, olen, "calls");
	assert_string_equal(k0, k1);
	free(k0);
	free(k1);
	char *f = func_text(out, olen, "_Z5scaleff");
	const char *entry = strstr(f, "// cubpf: fentry on_func_entry");
	const char *first = strstr(f, "ld.param.f32 \t%f1, [_Z5scaleff_param_0];");
	const char *exitp = strstr(f, "// cubpf: fexit on_func_exit");
	const char *ret = strstr(f, "\tret;");
	assert_non_null(entry);
	assert_non_null(first);
	assert_non_null(exitp);
	assert_non_null(ret);
	assert_true(entry < first && first < exitp && exitp < ret);
	assert_non_null(strstr(f, "ld.param.u32 %__cb_r7, [_Z5scaleff_param_0];"));
	snprintf(num, sizeof(num), " %u;", ptx_kernel_id("calls"));
	assert_non_null(strstr(f, num));
	snprintf(num, sizeof(num), " %u;", ptx_kernel_id("_Z5scaleff"));
	assert_non_null(strstr(f, num));
	/* not CUBPF_KERNEL_ID_SHARED: the probe's count of those (fcounts[5], byte 40) folds away */
	assert_null(strstr(f, "%__cb_t0, 40;"));
	/* ctx->retval: what the function stores in its return parameter, kept in %__cb_rv as it
	 * stores it (ptxas refuses a read of it back), which starts at 0, read at the fexit */
	const char *zero = strstr(f, "mov.u64 %__cb_rv, 0;");
	const char *st = strstr(f, "st.param.f32 \t[func_retval0+0], %f3;\n");
	const char *keep = strstr(f, "\tmov.b32 %__cb_rw, %f3;\n\tcvt.u64.u32 %__cb_rt, %__cb_rw;\n"
				     "\tshl.b64 %__cb_rt, %__cb_rt, 0;\n"
				     "\tand.b64 %__cb_rv, %__cb_rv, 18446744069414584320;\n"
				     "\tor.b64 %__cb_rv, %__cb_rv, %__cb_rt;\n");
	const char *read = strstr(f, ", %__cb_rv;\n");
	assert_non_null(zero);
	assert_non_null(st);
	assert_non_null(keep);
	assert_non_null(read);
	assert_true(zero < first && st < keep && keep < exitp && exitp < read && read < ret);
	assert_int_equal(count_of(f, "or.b64 %__cb_rv, %__cb_rv, %__cb_rt;"), 1);
	free(f);
	/* a function that returns nothing: has_retval is the constant 0, its sums fold away */
	f = func_text(out, olen, "_Z10store_pairPfff");
	assert_non_null(strstr(f, "ld.param.u64 %__cb_r7, [_Z10store_pairPfff_param_0];"));
	assert_null(strstr(f, "__cb_rv"));
	free(f);
	free(out);
	/* globs match the function's mangled name, or its demangled one before '(' */
	static const char *const globs[] = {"_Z5scale*", "store_pair"};
	for (int g = 0; g < 2; g++) {
		struct probes q = p;
		for (uint32_t i = 0; i < q.cnt; i++)
			q.progs[i].attach = globs[g];
		assert_int_equal(instrument(t, len, &q, NULL, &out, &olen, &rep, err), 0);
		assert_int_equal(rep.fentry_sites, 1);
		assert_int_equal(rep.fexit_sites, 1);
		char *yes = func_text(out, olen, g ? "_Z10store_pairPfff" : "_Z5scaleff");
		char *no = func_text(out, olen, g ? "_Z5scaleff" : "_Z10store_pairPfff");
		assert_non_null(strstr(yes, "// cubpf: fentry"));
		assert_null(strstr(no, "// cubpf:"));
		free(yes);
		free(no);
		free(out);
	}
	/* -k: only the functions of selected kernels */
	assert_int_equal(instrument(t, len, &p, "no_such_kernel", &out, &olen, &rep, err), 0);
	assert_int_equal(olen, len);
	assert_memory_equal(out, t, len);
	free(out);
	assert_int_equal(instrument(t, len, &p, "calls", &out, &olen, &rep, err), 0);
	assert_int_equal(rep.fentry_sites, 2);
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* funcs.ptx: .reg parameters read from their registers, the predicated ret's fexit under its
 * predicate, a function two kernels call (and one no kernel calls) with
 * CUBPF_KERNEL_ID_SHARED; -k leaves the uncalled one alone. */
static void test_func_probe_shared(void **state)
{
	(void)state;
	struct probes p;
	load_probes("func.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/funcs.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(rep.fentry_sites, 2);
	assert_int_equal(rep.fexit_sites, 3);
	char *f = func_text(out, olen, "twice");
	assert_non_null(strstr(f, "mov.b32 %__cb_w5, a;"));
	assert_non_null(strstr(f, "mov.b64 %__cb_r7, b;"));
	assert_non_null(strstr(f, "%__cb_t0, 40;")); /* fcounts[5]: kernel_id is SHARED */
	const char *skip = strstr(f, "@!%p1 bra $__cb");
	const char *pret = strstr(f, "@%p1 ret;");
	assert_non_null(skip);
	assert_non_null(pret);
	assert_true(skip < pret);
	free(f);
	f = func_text(out, olen, "orphan");
	assert_non_null(strstr(f, "%__cb_t0, 40;"));
	free(f);
	free(out);
	assert_int_equal(instrument(t, len, &p, "k1", &out, &olen, &rep, err), 0);
	assert_int_equal(rep.fentry_sites, 1);
	char *o0 = func_text(t, len, "orphan"), *o1 = func_text(out, olen, "orphan");
	assert_string_equal(o0, o1);
	free(o0);
	free(o1);
	assert_assembles(out, olen, "funcs.ptx with fentry/fexit, -k k1");
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* ---- barriers and fences (issue 32) ---- */

/* What each barrier and fence form is, and the id it names. */
static void test_insn_sync(void **state)
{
	(void)state;
	static const struct {
		const char *opcode, *op0, *op1;
		int kind; /* 0: not a sync site */
		uint32_t id;
		bool id_reg;
	} cases[] = {
		{"bar.sync", "0", NULL, CUBPF_SYNC_BAR, 0, false},
		{"bar.sync", "%r4", "64", CUBPF_SYNC_BAR, CUBPF_SYNC_ID_NONE, true},
		{"bar.sync", "R", "64", CUBPF_SYNC_BAR, CUBPF_SYNC_ID_NONE, true}, /* asm's own */
		{"bar.cta.sync", "3", "64", CUBPF_SYNC_BAR, 3, false},
		{"barrier.sync.aligned", "2", NULL, CUBPF_SYNC_BAR, 2, false},
		{"barrier.cta.sync", "5", NULL, CUBPF_SYNC_BAR, 5, false},
		{"bar.arrive", "1", "128", CUBPF_SYNC_BAR_ARRIVE, 1, false},
		{"barrier.cta.arrive.aligned", "3", "64", CUBPF_SYNC_BAR_ARRIVE, 3, false},
		{"bar.red.popc.u32", "%r7", "0", CUBPF_SYNC_BAR_RED, 0, false},
		{"barrier.red.or.pred", "%p2", "6", CUBPF_SYNC_BAR_RED, 6, false},
		{"bar.warp.sync", "-1", NULL, CUBPF_SYNC_WARP, CUBPF_SYNC_ID_NONE, false},
		{"barrier.cluster.arrive.release.aligned", NULL, NULL, CUBPF_SYNC_CLUSTER,
		 CUBPF_SYNC_ID_NONE, false},
		{"barrier.cluster.wait", NULL, NULL, CUBPF_SYNC_CLUSTER, CUBPF_SYNC_ID_NONE, false},
		{"mbarrier.try_wait.parity.shared::cta.b64", "P1", "[%r2]", CUBPF_SYNC_MBARRIER,
		 CUBPF_SYNC_ID_NONE, false},
		{"mbarrier.test_wait.shared.b64", "p", "[%r5]", CUBPF_SYNC_MBARRIER,
		 CUBPF_SYNC_ID_NONE, false},
		{"fence.proxy.async.shared::cta", NULL, NULL, CUBPF_SYNC_FENCE, CUBPF_SYNC_ID_NONE, false},
		{"fence.acq_rel.gpu", NULL, NULL, CUBPF_SYNC_FENCE, CUBPF_SYNC_ID_NONE, false},
		{"membar.gl", NULL, NULL, CUBPF_SYNC_FENCE, CUBPF_SYNC_ID_NONE, false},
		/* not barriers: arrivals on an mbarrier, its set-up, a branch named like one */
		{"mbarrier.arrive.shared.b64", "%rd4", "[%r5]", 0, 0, false},
		{"mbarrier.init.shared.b64", "[%r3]", "%r4", 0, 0, false},
		{"bra.uni", "$L__barrier", NULL, 0, 0, false},
		{"barrierx", NULL, NULL, 0, 0, false},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *ops[2] = {(char *)cases[i].op0, (char *)cases[i].op1};
		struct ptx_insn in = {.opcode = (char *)cases[i].opcode, .ops = ops,
				      .op_cnt = cases[i].op1 ? 2 : cases[i].op0 ? 1 : 0};
		struct ptx_sync sy;
		bool is = ptx_insn_sync(&in, &sy);
		if (is != (cases[i].kind != 0) || (is && (sy.kind != (uint32_t)cases[i].kind ||
							  sy.id != cases[i].id ||
							  (sy.id_reg != NULL) != cases[i].id_reg)))
			fail_msg("%s: sync %d kind %u id %u reg %s", cases[i].opcode, is, sy.kind, sy.id,
				 sy.id_reg ? sy.id_reg : "-");
	}
}

/* Sync probes in every fixture kernel: a site per barrier and fence (counted here from the
 * opcodes), assembled for sm_90 and sm_80 (sync90.ptx, sm_90 only); modules without barriers
 * or fences come out byte for byte. */
static void test_sync_probes(void **state)
{
	(void)state;
	struct probes p;
	load_probes("sync.bpf.o", &p);
	const char *const extra[] = {"tests/ptx/kernels/sync90.ptx"};
	const size_t nfix = sizeof(cu_fixtures) / sizeof(cu_fixtures[0]);
	uint32_t total = 0;
	for (size_t fi = 0; fi < nfix + NHAND + 1; fi++) {
		const char *name = fi < nfix ? cu_fixtures[fi]
				   : fi < nfix + NHAND ? hand_fixtures[fi - nfix] : extra[fi - nfix - NHAND];
		size_t len, olen;
		char *t = fixture(name, &len), *out, err[PTX_ERRLEN], what[256];
		struct ptx_inject_report rep;
		if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
			fail_msg("%s with sync.bpf.o: %s", name, err);
		struct ptx_module *m;
		assert_int_equal(ptx_parse(t, len, &m, err, sizeof(err)), 0);
		uint32_t want = 0, kernels = 0;
		for (uint32_t f = 0; f < m->func_cnt; f++) {
			uint32_t n = 0;
			for (uint32_t i = 0; i < m->funcs[f].insn_cnt; i++) {
				const char *o = m->funcs[f].insns[i].opcode;
				n += !strncmp(o, "bar.", 4) || !strncmp(o, "barrier.", 8) ||
				     !strncmp(o, "fence", 5) || !strncmp(o, "membar", 6) ||
				     !strncmp(o, "mbarrier.try_wait", 17) ||
				     !strncmp(o, "mbarrier.test_wait", 18);
			}
			want += n;
			kernels += n && m->funcs[f].is_entry;
		}
		ptx_module_free(m);
		assert_int_equal(rep.sync_sites, want);
		assert_int_equal(rep.instrumented, kernels);
		total += want;
		if (!want) {
			assert_int_equal(olen, len);
			assert_memory_equal(out, t, len);
		} else if (strstr(t, ".target sm_90\n")) {
			char log[4096];
			if (ptxas(out, olen, "sm_90", log, sizeof(log)))
				fail_msg("%s with sync probes does not assemble for sm_90:\n%s", name, log);
		} else {
			snprintf(what, sizeof(what), "%s with sync probes", name);
			assert_assembles(out, olen, what);
		}
		free(out);
		free(t);
	}
	assert_true(total >= 13 + 12 + 9); /* sync.ptx, sync90.ptx, reduce.ptx at least */
	vm_object_free(p.obj);
}

/* A predicated wait that writes its own guard: both probes follow the guard as it was before
 * the instruction; the wait loop runs the probes at every attempt. */
static void test_sync_probe_placement(void **state)
{
	(void)state;
	struct probes p;
	load_probes("sync.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/sync90.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	const char *save = strstr(out, "\tmov.pred %__cb_sg, %p2;\n\t@!%__cb_sg bra ");
	const char *wait = strstr(out, "@%p2 mbarrier.try_wait.parity.shared::cta.b64 %p2,");
	assert_non_null(save);
	assert_non_null(wait);
	assert_true(save < wait);
	assert_non_null(strstr(wait, "%p2, [%r2], %r3;\n\t@!%__cb_sg bra "));
	/* @!%p2 membar.sys: skipped when %p2 held */
	assert_non_null(strstr(out, "\tmov.pred %__cb_sg, %p2;\n\t@%__cb_sg bra "));
	/* the loop's label is above the probe before the attempt */
	const char *lab = strstr(out, "LAB_WAIT:");
	const char *before = strstr(lab, "// cubpf: syncprobe on_sync");
	const char *attempt = strstr(lab, "mbarrier.try_wait.parity.shared::cta.b64 P1");
	assert_true(lab < before && before < attempt);
	/* the register id of bar.cta.sync %r4, 64 is read at run time, and so is that of an asm
	 * block's own register */
	assert_non_null(strstr(out, "cvt.u64.u32 %__cb_r"));
	assert_non_null(strstr(out, ", R;\n"));
	/* before_ns: the time just before each instruction, saved in a register and read back */
	assert_int_equal(count_of(out, "\tmov.u64 %__cb_sb, %globaltimer;\n"), rep.sync_sites);
	assert_non_null(strstr(out, "mov.u64 %__cb_sb, %globaltimer;\n\t@%p2 mbarrier.try_wait"));
	assert_non_null(strstr(out, ", %__cb_sb;\n"));
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* Basic blocks of a hand-written kernel (tests/ptx/kernels/blocks.ptx): ids, instruction
 * counts, PTX lines, .loc lines, opcode classes and which are on a loop exactly. */
static uint32_t line_of(const char *t, const char *needle)
{
	const char *at = strstr(t, needle);
	assert_non_null(at);
	uint32_t n = 1;
	for (const char *c = t; c < at; c++)
		n += *c == '\n';
	return n;
}

static void test_bb_blocks(void **state)
{
	(void)state;
	size_t len;
	char *t = fixture("tests/ptx/kernels/blocks.ptx", &len), err[PTX_ERRLEN];
	struct ptx_module *m;
	assert_int_equal(ptx_parse(t, len, &m, err, sizeof(err)), 0);
	static const struct {
		uint32_t count, src_line;
		const char *first;
		uint32_t classes[CUBPF_OP_CLASSES];
	} want[] = {
		{6, 10, "ld.param.u64 %rd1", {[CUBPF_OP_PARAM] = 2, [CUBPF_OP_MOV] = 3, [CUBPF_OP_CMP] = 1}},
		{4, 12, "add.f32", {[CUBPF_OP_FP32] = 1, [CUBPF_OP_INT] = 1, [CUBPF_OP_CMP] = 1,
				    [CUBPF_OP_CONTROL] = 1}},
		{1, 12, "st.global.f32", {[CUBPF_OP_ST_GLOBAL] = 1}},
		{3, 15, "st.param.b32 [a]", {[CUBPF_OP_PARAM] = 1, [CUBPF_OP_CONTROL] = 2}},
		{1, 15, "exit;", {[CUBPF_OP_CONTROL] = 1}},
	};
	const struct ptx_func *k = ptx_find_func(m, "blocks");
	assert_non_null(k);
	struct ptx_bblock *b;
	uint32_t n;
	assert_int_equal(ptx_basic_blocks(m, k, &b, &n), 0);
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	uint32_t first = 0;
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(b[i].first, first);
		assert_int_equal(b[i].count, want[i].count);
		assert_int_equal(b[i].line, line_of(t, want[i].first));
		assert_int_equal(b[i].src_file, 1);
		assert_int_equal(b[i].src_line, want[i].src_line);
		assert_memory_equal(b[i].classes, want[i].classes, sizeof(want[i].classes));
		assert_int_equal(b[i].in_loop, i == 1); /* LOOP: branches back to itself */
		first += b[i].count;
	}
	assert_int_equal(first, k->insn_cnt);
	free(b);
	const struct ptx_func *f = ptx_find_func(m, "twice");
	assert_int_equal(ptx_basic_blocks(m, f, &b, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(b[0].count, 3);
	assert_int_equal(b[1].count, 1);
	assert_int_equal(b[2].count, 2);
	assert_int_equal(b[2].line, line_of(t, "st.param.b32 [r]"));
	assert_int_equal(b[0].src_line, 0);
	assert_false(b[0].in_loop || b[1].in_loop || b[2].in_loop);
	free(b);
	ptx_module_free(m);
	free(t);
}

/* Which blocks lie on a loop: nested loops, a forward skip and an unconditional branch. */
static void test_bb_loops(void **state)
{
	(void)state;
	static const char text[] =
		".version 8.0\n.target sm_80\n.address_size 64\n"
		".visible .entry cfg(.param .u32 n)\n{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<4>;\n"
		"\tld.param.u32 %r1, [n];\n\tmov.u32 %r2, 0;\n"                  /* 0 */
		"OUTER:\n\tmov.u32 %r3, 0;\n"                                     /* 1 */
		"INNER:\n\tadd.u32 %r3, %r3, 1;\n\tsetp.lt.u32 %p1, %r3, %r1;\n"
		"\t@%p1 bra INNER;\n"                                              /* 2 */
		"\tadd.u32 %r2, %r2, 1;\n\tsetp.lt.u32 %p2, %r2, %r1;\n"
		"\t@%p2 bra OUTER;\n"                                              /* 3 */
		"\tsetp.eq.u32 %p3, %r1, 7;\n\t@%p3 bra SKIP;\n"                   /* 4 */
		"\tadd.u32 %r2, %r2, 2;\n\tbra.uni DONE;\n"                        /* 5 */
		"SKIP:\n\tadd.u32 %r2, %r2, 3;\n"                                  /* 6 */
		"DONE:\n\tret;\n}\n";                                             /* 7 */
	static const uint32_t count[] = {2, 1, 3, 3, 2, 2, 1, 1};
	static const bool loop[] = {false, true, true, true, false, false, false, false};
	char err[PTX_ERRLEN];
	struct ptx_module *m;
	assert_int_equal(ptx_parse(text, sizeof(text) - 1, &m, err, sizeof(err)), 0);
	struct ptx_bblock *b;
	uint32_t n;
	assert_int_equal(ptx_basic_blocks(m, &m->funcs[0], &b, &n), 0);
	assert_int_equal(n, 8);
	for (uint32_t i = 0; i < n; i++) {
		if (b[i].count != count[i] || b[i].in_loop != loop[i])
			fail_msg("block %u: %u instructions, in_loop %d", i, b[i].count, b[i].in_loop);
	}
	free(b);
	ptx_module_free(m);
}

/* bbprobes on blocks.ptx: one site per block of the kernel and of the .func it calls, each
 * with the block's constants folded in (ids and counts as ptx_basic_blocks says), the kernel's
 * first site after the label-free start, the loop's inside its label; assembled. */
static void test_bb_probe_placement(void **state)
{
	(void)state;
	struct probes p;
	load_probes("bb.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/blocks.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
		fail_msg("blocks.ptx with bb.bpf.o: %s", err);
	assert_int_equal(rep.bb_sites, 5 + 3);
	assert_int_equal(rep.instrumented, 1);
	assert_int_equal(rep.funcs, 1);
	assert_int_equal(count_of(out, "// cubpf: bbprobe on_block"), 8);
	/* the probe of block 1 sits after LOOP: and before its first instruction */
	const char *loop = strstr(out, "LOOP:");
	const char *probe = strstr(loop, "// cubpf: bbprobe on_block");
	const char *add = strstr(loop, "add.f32 %f1");
	assert_true(loop < probe && probe < add);
	/* and the one of DONE after both labels, before the asm scope's instructions */
	const char *done = strstr(out, "DONE:\n");
	probe = strstr(done, "// cubpf: bbprobe on_block");
	assert_true(probe < strstr(done, "st.param.b32 [a]"));
	assert_true(probe > strstr(done, ".param .b32 rv;"));
	assert_assembles(out, olen, "blocks.ptx with bb probes");
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* bbprobes in every fixture kernel: a site per basic block of the kernels and of the .funcs
 * they call, assembled for sm_90 and sm_80 (sync90.ptx: sm_90); a glob that matches no kernel
 * leaves the module byte for byte. */
static void test_bb_probes(void **state)
{
	(void)state;
	struct probes p;
	load_probes("bb.bpf.o", &p);
	const char *const extra[] = {"tests/ptx/kernels/sync90.ptx", "tests/ptx/kernels/blocks.ptx",
				     "tests/ptx/kernels/counted.ptx"};
	const size_t nfix = sizeof(cu_fixtures) / sizeof(cu_fixtures[0]);
	for (size_t fi = 0; fi < nfix + NHAND + 3; fi++) {
		const char *name = fi < nfix ? cu_fixtures[fi]
				   : fi < nfix + NHAND ? hand_fixtures[fi - nfix] : extra[fi - nfix - NHAND];
		size_t len, olen;
		char *t = fixture(name, &len), *out, err[PTX_ERRLEN], what[256];
		struct ptx_inject_report rep;
		if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
			fail_msg("%s with bb.bpf.o: %s", name, err);
		struct ptx_module *m;
		assert_int_equal(ptx_parse(t, len, &m, err, sizeof(err)), 0);
		uint32_t kernel_blocks = 0, kernels = 0;
		for (uint32_t f = 0; f < m->func_cnt; f++) {
			struct ptx_bblock *b;
			uint32_t n;
			if (!m->funcs[f].is_entry || !m->funcs[f].has_body)
				continue;
			assert_int_equal(ptx_basic_blocks(m, &m->funcs[f], &b, &n), 0);
			assert_true(n >= 1);
			kernel_blocks += n, kernels++;
			free(b);
		}
		ptx_module_free(m);
		assert_int_equal(rep.instrumented, kernels);
		/* .funcs' blocks come on top of the kernels' */
		assert_true(rep.bb_sites >= kernel_blocks);
		assert_int_equal(count_of(out, "// cubpf: bbprobe on_block"), rep.bb_sites);
		if (strstr(t, ".target sm_90\n")) {
			char log[4096];
			if (ptxas(out, olen, "sm_90", log, sizeof(log)))
				fail_msg("%s with bb probes does not assemble for sm_90:\n%s", name, log);
		} else {
			snprintf(what, sizeof(what), "%s with bb probes", name);
			assert_assembles(out, olen, what);
		}
		free(out);
		assert_int_equal(instrument(t, len, &p, "no_such_kernel", &out, &olen, &rep, err), 0);
		assert_int_equal(olen, len);
		assert_memory_equal(out, t, len);
		free(out);
		free(t);
	}
	vm_object_free(p.obj);
}

/* Instruction counts for ctx->insns and warp_insns (issue 32) on blocks.ptx: each block's
 * entries counted where it starts (the loop's in a counter, the others as bits of a mask; for
 * warp_insns those of the lane elected, with the lowest-lane test on sm_80 and elect.sync on
 * sm_90; the loop's trip count is a parameter's, so its warp count is the elected lane's,
 * marked where the loop is entered), all set to 0 where the body starts; at exit the sums of
 * entries x instructions (6, 4, 1, 3, 1); the kprobe's reads are 0; assembled for sm_70,
 * sm_80 and sm_90. */
static void test_icount(void **state)
{
	(void)state;
	struct probes p;
	load_probes("icount.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/blocks.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
		fail_msg("blocks.ptx with icount.bpf.o: %s", err);
	static const char *const at[] = {
		"\tmov.u32 %__cb_bc0, 0;\n\tmov.u32 %__cb_bm0, 0;\n\tmov.u32 %__cb_wc0, 0;\n"
		"\tmov.u32 %__cb_wm0, 0;\n",
		"\tor.b32 %__cb_bm0, %__cb_bm0, 1;\n", "@%__cb_ip or.b32 %__cb_wm0, %__cb_wm0, 1;\n",
		"@%__cb_ip mov.u32 %__cb_wc0, 1;\n", "LOOP:", "\tadd.u32 %__cb_bc0, %__cb_bc0, 1;\n",
		"add.f32 %f1",
		"\tor.b32 %__cb_bm0, %__cb_bm0, 2;\n", "st.global.f32", "DONE:",
		"\tor.b32 %__cb_bm0, %__cb_bm0, 4;\n", "\tor.b32 %__cb_bm0, %__cb_bm0, 8;\n", "exit;",
		"// cubpf: kretprobe at_exit", "bfe.u32 %__cb_w5, %__cb_bm0, 0, 1;",
		", %__cb_w5, 6, %__cb_r", ", %__cb_bc0, 4, %__cb_r", ", %__cb_w5, 1, %__cb_r",
		", %__cb_w5, 3, %__cb_r", ", %__cb_w5, 1, %__cb_r", "bfe.u32 %__cb_w5, %__cb_wm0, 0, 1;",
		"min.u32 %__cb_w5, %__cb_wc0, 1;", "mul.lo.u32 %__cb_w5, %__cb_w5, %__cb_bc0;",
		", %__cb_w5, 4, %__cb_r",
	};
	const char *c = out;
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		const char *n = strstr(c, at[i]);
		if (!n)
			fail_msg("'%s' missing or out of order in:\n%s", at[i], out);
		c = n;
	}
	assert_int_equal(count_of(out, "%lanemask_lt;\n\tand.b32 %__cb_im1"), 5);
	assert_int_equal(count_of(out, "add.u32 %__cb_bc0, %__cb_bc0, 1;"), 1); /* not in the .func */
	assert_true(strstr(out, "elect.sync") == NULL);
	const char *kp = strstr(out, "// cubpf: kprobe at_entry"); /* reads nothing: 0 */
	assert_non_null(kp);
	assert_true(strstr(kp, "%__cb_bc0") > strstr(kp, "end:\n")); /* the kprobe's own end */
	assert_assembles(out, olen, "blocks.ptx with instruction counts");
	free(out);
	/* sm_90: elect.sync */
	char *t90 = malloc(len + 1);
	assert_non_null(t90);
	memcpy(t90, t, len + 1);
	char *tg = strstr(t90, ".target sm_80");
	assert_non_null(tg);
	tg[11] = '9';
	assert_int_equal(instrument(t90, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(count_of(out, "\telect.sync %__cb_im1|%__cb_ip, %__cb_im0;\n"), 5);
	/* two bpf_warp_sum: one reduction when every lane's value is below 2^27, else three */
	assert_int_equal(count_of(out, "setp.lt.u64 %__cb_p1, %__cb_r1, 134217728;"), 2);
	assert_int_equal(count_of(out, "redux.sync.add.u32"), 8);
	char log[4096];
	if (ptxas(out, olen, "sm_90", log, sizeof(log)))
		fail_msg("blocks.ptx for sm_90 with instruction counts does not assemble:\n%s", log);
	free(out);
	/* sm_70: no redux.sync; bpf_warp_sum takes each active lane's value in turn */
	memcpy(t90, t, len + 1);
	tg = strstr(t90, ".target sm_80");
	tg[11] = '7';
	assert_int_equal(instrument(t90, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(count_of(out, "redux.sync"), 0);
	assert_int_equal(count_of(out, "shfl.sync.idx.b32 %__cb_w5, %__cb_w1, %__cb_w4, 31"), 2);
	assert_assembles(out, olen, "blocks.ptx for sm_70 with instruction counts");
	free(out);
	free(t90);
	free(t);
	vm_object_free(p.obj);
}

/* A memprobe and a syncprobe know their own site: the instruction's PTX line and the .loc in
 * force there are constants (blocks.ptx's global store: its line, file 1 line 12; sync90.ptx's
 * barriers: their lines, no .loc). */
static void test_probe_site(void **state)
{
	(void)state;
	struct probes p;
	load_probes("site.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/blocks.ptx", &len), *out, err[PTX_ERRLEN], want[64];
	struct ptx_inject_report rep;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	assert_int_equal(rep.mem_sites, 1);
	snprintf(want, sizeof(want), ", %llu;", (unsigned long long)line_of(t, "st.global.f32") << 32 | 12);
	if (!strstr(out, want))
		fail_msg("no '%s' (line %u, .loc line 12) in:\n%s", want, line_of(t, "st.global.f32"),
			 out);
	free(out);
	free(t);
	t = fixture("tests/ptx/kernels/sync90.ptx", &len);
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, &rep, err), 0);
	snprintf(want, sizeof(want), ", %llu;", (unsigned long long)line_of(t, "bar.cta.sync \t%r4") << 32);
	if (!strstr(out, want))
		fail_msg("no '%s' (the barrier's line) in:\n%s", want, out);
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* The bundled instrcount, opcodehist and hotblocks on every fixture kernel (kernel ids 1 to
 * N, so that nothing folds away), assembled for sm_90 and sm_80. */
static uint32_t small_id(void *user, const char *mangled)
{
	(void)mangled;
	return ++*(uint32_t *)user;
}

static void test_bb_tools_assemble(void **state)
{
	(void)state;
	static const char *const tools[] = {"instrcount", "opcodehist", "hotblocks"};
	const size_t nfix = sizeof(cu_fixtures) / sizeof(cu_fixtures[0]);
	for (size_t ti = 0; ti < 3; ti++) {
		char path[1024], err[PTX_ERRLEN];
		snprintf(path, sizeof(path), "%s/probes/%s.bpf.o", env("CUBPF_BUILD"), tools[ti]);
		struct probes p;
		if (vm_object_load_file(path, &p.obj, err, sizeof(err)))
			fail_msg("%s: %s", path, err);
		p.cnt = ptx_progs_from_object(p.obj, p.progs, 16);
		for (uint32_t i = 0; i < p.obj->prog_cnt; i++) {
			char log[1024];
			if (vm_verify(p.obj, i, NULL, NULL, log, sizeof(log)))
				fail_msg("%s rejected: %s", tools[ti], log);
		}
		for (size_t fi = 0; fi < nfix + NHAND + 1; fi++) {
			const char *name = fi < nfix ? cu_fixtures[fi]
					   : fi < nfix + NHAND ? hand_fixtures[fi - nfix]
							      : "tests/ptx/kernels/blocks.ptx";
			size_t len, olen;
			char *t = fixture(name, &len), *out, what[256];
			uint32_t ids = 0;
			struct ptx_inject_opts o = {.progs = p.progs, .prog_cnt = p.cnt,
						    .maps = p.obj->maps, .map_cnt = p.obj->map_cnt,
						    .kernel_id = small_id, .user = &ids};
			struct ptx_inject_report rep;
			if (ptx_instrument(t, len, &o, &out, &olen, &rep, err, sizeof(err)))
				fail_msg("%s with %s: %s", name, tools[ti], err);
			assert_true(rep.instrumented >= 1);
			snprintf(what, sizeof(what), "%s with %s", name, tools[ti]);
			assert_assembles(out, olen, what);
			free(out);
			o.kernel_glob = "no_such_kernel"; /* nothing selected: byte for byte */
			assert_int_equal(ptx_instrument(t, len, &o, &out, &olen, &rep, err, sizeof(err)), 0);
			assert_int_equal(olen, len);
			assert_memory_equal(out, t, len);
			free(out);
			free(t);
		}
		vm_object_free(p.obj);
	}
}

/* bbretprobe on blocks.ptx: the loop's entries in a counter register, the other blocks' as bits
 * of a mask (or-ed at their entry), all zeroed where the body starts; the exit block runs the
 * program once per block of the kernel (none for the .func), each reading its own; assembled. */
static void test_bbret_probes(void **state)
{
	(void)state;
	struct probes p;
	load_probes("bbret.bpf.o", &p);
	size_t len, olen;
	char *t = fixture("tests/ptx/kernels/blocks.ptx", &len), *out, err[PTX_ERRLEN];
	struct ptx_inject_report rep;
	if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
		fail_msg("blocks.ptx with bbret.bpf.o: %s", err);
	assert_int_equal(rep.bb_sites, 5);
	assert_int_equal(rep.funcs, 0);
	assert_non_null(strstr(out, "\t.reg .b32 %__cb_bc<1>;\n\t.reg .b32 %__cb_bm<1>;\n"));
	const char *z = strstr(out, "\tmov.u32 %__cb_bc0, 0;\n\tmov.u32 %__cb_bm0, 0;\n");
	assert_non_null(z);
	static const char *const at[] = {
		"\tor.b32 %__cb_bm0, %__cb_bm0, 1;\n", "LOOP:", "\tadd.u32 %__cb_bc0, %__cb_bc0, 1;\n",
		"add.f32 %f1", "\tor.b32 %__cb_bm0, %__cb_bm0, 2;\n", "st.global.f32",
		"DONE:", "\tor.b32 %__cb_bm0, %__cb_bm0, 4;\n", "st.param.b32 [a]",
		"\tor.b32 %__cb_bm0, %__cb_bm0, 8;\n", "exit;", "$__cubpf_exit:",
		"bfe.u32 %__cb_w5, %__cb_bm0, 0, 1;", "cvt.u64.u32 %__cb_r1, %__cb_bc0;",
		"bfe.u32 %__cb_w5, %__cb_bm0, 1, 1;", "bfe.u32 %__cb_w5, %__cb_bm0, 2, 1;",
		"bfe.u32 %__cb_w5, %__cb_bm0, 3, 1;",
	};
	const char *c = z;
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		const char *n = strstr(c, at[i]);
		if (!n)
			fail_msg("'%s' missing or out of order in:\n%s", at[i], out);
		c = n;
	}
	assert_int_equal(count_of(out, "// cubpf: bbretprobe at_exit"), 5);
	assert_int_equal(count_of(out, "%__cb_bm0, %__cb_bm0"), 4);
	assert_assembles(out, olen, "blocks.ptx with bbretprobes");
	free(out);
	free(t);
	vm_object_free(p.obj);
}

/* bpf_gpu_delay_ns in a memory probe: a spin on %globaltimer before each global load of every
 * fixture kernel (none before stores), assembled for sm_90 and sm_80. */
static void test_delay_probe(void **state)
{
	(void)state;
	struct probes p;
	load_probes("delay.bpf.o", &p);
	const size_t nfix = sizeof(cu_fixtures) / sizeof(cu_fixtures[0]);
	for (size_t fi = 0; fi < nfix + NHAND; fi++) {
		const char *name = fi < nfix ? cu_fixtures[fi] : hand_fixtures[fi - nfix];
		size_t len, olen;
		char *t = fixture(name, &len), *out, err[PTX_ERRLEN], what[256];
		struct ptx_inject_report rep;
		if (instrument(t, len, &p, NULL, &out, &olen, &rep, err))
			fail_msg("%s with delay.bpf.o: %s", name, err);
		struct ptx_module *m;
		assert_int_equal(ptx_parse(t, len, &m, err, sizeof(err)), 0);
		size_t loads = 0;
		for (uint32_t f = 0; f < m->func_cnt; f++)
			for (uint32_t i = 0; i < m->funcs[f].insn_cnt; i++) {
				struct ptx_mem_access acc;
				if (ptx_insn_mem_access(&m->funcs[f].insns[i], &acc) &&
				    acc.op == CUBPF_MEM_LOAD && acc.space == PTX_SPACE_GLOBAL)
					loads++;
			}
		ptx_module_free(m);
		/* one spin per global load: its loop's branch back to the first reading */
		assert_int_equal(count_of(out, "setp.lt.u64 %__cb_p0, %__cb_t1, %__cb_r1;"), loads);
		snprintf(what, sizeof(what), "%s with a delay before global loads", name);
		assert_assembles(out, olen, what);
		free(out);
		free(t);
	}
	vm_object_free(p.obj);
}

/* ---- code generator ---- */

#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), \
					       .off = (o), .imm = (i)})

static int gen(const struct bpf_insn *insns, uint32_t n, enum vm_prog_kind kind, char *err,
	       struct ptx_buf *out)
{
	struct ptx_prog p = {.name = "t", .kind = kind, .insns = insns, .insn_cnt = n};
	return ptx_gen_raw_func(&p, NULL, 0, "f", out, err, PTX_ERRLEN);
}

static void test_codegen_errors(void **state)
{
	(void)state;
	char err[PTX_ERRLEN];
	struct ptx_buf b = {0};
	/* unknown helper */
	struct bpf_insn h[] = {INSN(BPF_JMP | BPF_CALL, 0, 0, 0, 9999), INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)};
	assert_int_equal(gen(h, 2, VM_PROG_RAW, err, &b), -1);
	assert_non_null(strstr(err, "helper 9999"));
	/* jump out of the program */
	struct bpf_insn j[] = {INSN(BPF_JMP | BPF_JA, 0, 0, 5, 0), INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)};
	assert_int_equal(gen(j, 2, VM_PROG_RAW, err, &b), -1);
	/* a truncated lddw */
	struct bpf_insn l[] = {INSN(BPF_LD | BPF_IMM | BPF_DW, 0, 0, 0, 1)};
	assert_int_equal(gen(l, 1, VM_PROG_RAW, err, &b), -1);
	/* writing r10 */
	struct bpf_insn w[] = {INSN(BPF_ALU64 | BPF_MOV | BPF_K, 10, 0, 0, 1), INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)};
	assert_int_equal(gen(w, 2, VM_PROG_RAW, err, &b), -1);
	ptx_buf_free(&b);
	/* a kprobe that does arithmetic on its context pointer then dereferences it */
	struct probes p = {0};
	struct bpf_insn c[] = {
		INSN(BPF_ALU64 | BPF_ADD | BPF_X, 1, 1, 0, 0),
		INSN(BPF_LDX | BPF_MEM | BPF_W, 0, 1, 0, 0),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	p.progs[0] = (struct ptx_prog){"bad", VM_PROG_KPROBE, "*", c, 3};
	p.cnt = 1;
	static struct vm_object none;
	p.obj = &none;
	size_t len, olen;
	char *t = fixture("vecadd.ptx", &len), *out = NULL;
	assert_int_equal(instrument(t, len, &p, NULL, &out, &olen, NULL, err), -1);
	assert_non_null(strstr(err, "context"));
	free(t);
}

/* Constant stack slots become registers: no .local stack in the output. */
static void test_stack_promoted(void **state)
{
	(void)state;
	char err[PTX_ERRLEN];
	struct ptx_buf b = {0};
	struct bpf_insn s[] = {
		INSN(BPF_ST | BPF_MEM | BPF_W, 10, 0, -4, 7),
		INSN(BPF_LDX | BPF_MEM | BPF_W, 0, 10, -4, 0),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	assert_int_equal(gen(s, 3, VM_PROG_RAW, err, &b), 0);
	assert_null(strstr(b.data, "__cubpf_stack"));
	ptx_buf_free(&b);
	/* a stack address that escapes keeps the stack in memory */
	struct bpf_insn e[] = {
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, 1, 10, 0, 0),
		INSN(BPF_STX | BPF_MEM | BPF_DW, 10, 1, -8, 0),
		INSN(BPF_LDX | BPF_MEM | BPF_DW, 0, 10, -8, 0),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	assert_int_equal(gen(e, 4, VM_PROG_RAW, err, &b), 0);
	assert_non_null(strstr(b.data, "__cubpf_stack"));
	ptx_buf_free(&b);
}

static void test_conformance_assembles(void **state)
{
	(void)state;
	char dir[1024], err[256];
	snprintf(dir, sizeof(dir), "%s/bpf_conformance", env("CUBPF_SHARED"));
	struct conf_test *t;
	long n = conf_load(dir, &t, err, sizeof(err));
	if (n < 0)
		fail_msg("%s", err);
	assert_int_equal(n, 313);
	/* two modules (about 160 programs each) so each ptxas run stays short */
	long ok = 0;
	for (long first = 0; first < n; first += 160) {
		long cnt = n - first < 160 ? n - first : 160;
		struct ptx_buf m = {0};
		ok += conf_module(t, (size_t)first, (size_t)cnt, false, &m);
		assert_false(m.oom);
		assert_assembles(m.data, m.len, "conformance module");
		ptx_buf_free(&m);
	}
	for (long i = 0; i < n; i++)
		if (!t[i].compiled)
			print_message("not compiled: %s: %s\n", t[i].name, t[i].error);
	assert_int_equal(ok, 313);
	conf_free(t, (size_t)n);
}

/* The conformance module run by tests/ptx/ptxsim.py, a model of the PTX integer semantics the
 * generator relies on: checks every program's r0 on this machine (the GPU run is the
 * reference). */
static void conformance_semantics(bool fold)
{
	char dir[1024], err[256];
	snprintf(dir, sizeof(dir), "%s/bpf_conformance", env("CUBPF_SHARED"));
	struct conf_test *t;
	long n = conf_load(dir, &t, err, sizeof(err));
	if (n < 0)
		fail_msg("%s", err);
	struct ptx_buf m = {0};
	assert_int_equal(conf_module(t, 0, (size_t)n, fold, &m), n);
	char tmp[] = "/tmp/cubpf-ptxsim-XXXXXX", ptx[1100], txt[1100], cmd[4096];
	assert_non_null(mkdtemp(tmp));
	snprintf(ptx, sizeof(ptx), "%s/conformance.ptx", tmp);
	snprintf(txt, sizeof(txt), "%s/conformance.txt", tmp);
	FILE *f = fopen(ptx, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(m.data, 1, m.len, f), m.len);
	fclose(f);
	f = fopen(txt, "w");
	assert_non_null(f);
	conf_manifest(t, (size_t)n, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 tests/ptx/ptxsim.py %s %s 2>&1", ptx, txt);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[512], last[512] = "";
	while (fgets(line, sizeof(line), p)) {
		if (strncmp(line, "FAIL", 4) == 0 || strncmp(line, "ERROR", 5) == 0)
			print_message("%s", line);
		snprintf(last, sizeof(last), "%s", line);
	}
	int st = pclose(p);
	unlink(ptx);
	unlink(txt);
	rmdir(tmp);
	ptx_buf_free(&m);
	conf_free(t, (size_t)n);
	char want[64];
	snprintf(want, sizeof(want), "%ld passed, 0 failed\n", n);
	if (st != 0 || strcmp(last, want))
		fail_msg("ptxsim (needs python3), %s: %s", fold ? "folded" : "as written",
			 last[0] ? last : "no output");
}

static void test_conformance_semantics(void **state)
{
	(void)state;
	conformance_semantics(false);
}

/* The same programs with constant folding (as probes are compiled): folding must not change
 * any result. */
static void test_conformance_folded(void **state)
{
	(void)state;
	conformance_semantics(true);
}

/* ---- names ---- */

static void test_demangle(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
		{"_Z6vecaddPfS_S_i", "vecadd(float*, float*, float*, int)"},
		{"_Z6kernelPKfPfi", "kernel(float const*, float*, int)"},
		{"_ZN2ns3fooIfLi4EEEvPT_i", "ns::foo<float, 4>(float*, int)"},
		{"_Z10reduce_sumILj256EEvPKfPfj",
		 "reduce_sum<256u>(float const*, float*, unsigned int)"},
		{"_ZN4vllm15rms_norm_kernelIN3c104HalfELi8EEEvPT_PKS3_S6_fii",
		 "vllm::rms_norm_kernel<c10::Half, 8>(c10::Half*, c10::Half const*, c10::Half const*, "
		 "float, int, int)"},
		{"_ZN12_GLOBAL__N_16kernelEPf", "(anonymous namespace)::kernel(float*)"},
		{"_Z5saxpyifPKfPf", "saxpy(int, float, float const*, float*)"},
		{"early_ret", "early_ret"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[512];
		assert_int_equal(ptx_demangle(cases[i][0], out, sizeof(out)), 0);
		assert_string_equal(out, cases[i][1]);
	}
	char out[512];
	assert_int_equal(ptx_demangle("_Z3fooPFviE", out, sizeof(out)), -1); /* function types */
	assert_int_equal(ptx_demangle("_Z3fo", out, sizeof(out)), -1);
	assert_true(ptx_kernel_matches("vec*", "_Z7vec_addPKfS0_Pfi"));
	assert_true(ptx_kernel_matches("vec_add(float const*, float const*, float*, int)",
				       "_Z7vec_addPKfS0_Pfi"));
	assert_true(ptx_kernel_matches("_Z7vec*", "_Z7vec_addPKfS0_Pfi"));
	assert_true(ptx_kernel_matches("reduce_sum<*>", "_Z10reduce_sumILj256EEvPKfPfj"));
	assert_false(ptx_kernel_matches("reduce", "_Z10reduce_sumILj256EEvPKfPfj"));
	assert_true(ptx_kernel_matches("*", "anything"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_vecadd),
		cmocka_unit_test(test_parse_features),
		cmocka_unit_test(test_parse_all_fixtures),
		cmocka_unit_test(test_mem_access_forms),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_instrument_assembles),
		cmocka_unit_test(test_sites_counted),
		cmocka_unit_test(test_dead_code_dropped),
		cmocka_unit_test(test_untouched_identical),
		cmocka_unit_test(test_block_probes),
		cmocka_unit_test(test_block_probe_placement),
		cmocka_unit_test(test_entry_probe_placement),
		cmocka_unit_test(test_block_probe_untouched),
		cmocka_unit_test(test_block_protocol_sim),
		cmocka_unit_test(test_blocklat_shared),
		cmocka_unit_test(test_block_defer_room),
		cmocka_unit_test(test_func_probes),
		cmocka_unit_test(test_func_probe_placement),
		cmocka_unit_test(test_func_probe_shared),
		cmocka_unit_test(test_insn_sync),
		cmocka_unit_test(test_sync_probes),
		cmocka_unit_test(test_sync_probe_placement),
		cmocka_unit_test(test_bb_blocks),
		cmocka_unit_test(test_bb_loops),
		cmocka_unit_test(test_bb_probe_placement),
		cmocka_unit_test(test_bb_probes),
		cmocka_unit_test(test_icount),
		cmocka_unit_test(test_icount_sim),
		cmocka_unit_test(test_uniform_loops),
		cmocka_unit_test(test_defer_add_not_with_exiting_func),
		cmocka_unit_test(test_probe_site),
		cmocka_unit_test(test_bbret_probes),
		cmocka_unit_test(test_bb_tools_assemble),
		cmocka_unit_test(test_delay_probe),
		cmocka_unit_test(test_codegen_errors),
		cmocka_unit_test(test_stack_promoted),
		cmocka_unit_test(test_conformance_assembles),
		cmocka_unit_test(test_conformance_semantics),
		cmocka_unit_test(test_conformance_folded),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_limit_registers),
		cmocka_unit_test(test_defer_sim),
		cmocka_unit_test(test_warp_unique_sim),
		cmocka_unit_test(test_defer_flush_sim),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
