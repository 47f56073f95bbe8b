/* Programs written in C, built at test time with the machine's clang: they load, verify (or are
 * rejected for the right reason) and run on the interpreter with the expected map contents.
 * Every bundled probe (tools/probes) must verify. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/vm/tests.h"

static struct vm_object *load(const char *src)
{
	char err[VM_ERRLEN];
	struct vm_object *obj;
	const char *path = test_compile(src);
	if (vm_object_load_file(path, &obj, err, sizeof(err)) < 0)
		fail_msg("%s: %s", path, err);
	return obj;
}

static int prog_index(const struct vm_object *obj, const char *name)
{
	for (uint32_t i = 0; i < obj->prog_cnt; i++)
		if (!strcmp(obj->progs[i].name, name))
			return (int)i;
	fail_msg("%s has no program '%s'", obj->name, name);
	return -1;
}

static int map_index(const struct vm_object *obj, const char *name)
{
	for (uint32_t i = 0; i < obj->map_cnt; i++)
		if (!strcmp(obj->maps[i].name, name))
			return (int)i;
	fail_msg("%s has no map '%s'", obj->name, name);
	return -1;
}

static void verify_ok(const struct vm_object *obj, uint32_t prog)
{
	char log[16384];
	if (vm_verify(obj, prog, NULL, NULL, log, sizeof(log)) != 0)
		fail_msg("%s/%s rejected:\n%s", obj->name, obj->progs[prog].name, log);
}

static uint64_t run(struct vm_runtime *rt, uint32_t prog, void *ctx, size_t size)
{
	char err[VM_ERRLEN];
	uint64_t r0 = 0;
	struct vm_exec *ex = vm_exec_new(rt, prog, err, sizeof(err));
	if (!ex)
		fail_msg("%s", err);
	if (vm_exec_run(ex, ctx, size, &r0, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	vm_exec_free(ex);
	return r0;
}

/* ---- runprogs.bpf.c ---------------------------------------------------------------------------- */

static void test_object_layout(void **state)
{
	(void)state;
	struct vm_object *obj = load("runprogs");
	assert_int_equal(obj->prog_cnt, 3);
	const struct vm_prog *p = &obj->progs[prog_index(obj, "loops")];
	assert_int_equal(p->kind, VM_PROG_KPROBE);
	assert_string_equal(p->attach, "*");
	assert_int_equal(p->subprog_cnt, 2); /* sum_to() appended */
	p = &obj->progs[prog_index(obj, "alloc_ret")];
	assert_int_equal(p->kind, VM_PROG_URETPROBE);
	assert_string_equal(p->attach, "cuMemAlloc_v2");
	const struct vm_map_def *m = &obj->maps[map_index(obj, "calls_by_func")];
	assert_int_equal(m->type, CUBPF_MAP_HASH);
	assert_int_equal(m->key_size, 4);
	assert_int_equal(m->value_size, 8);
	assert_int_equal(m->max_entries, 64);
	m = &obj->maps[map_index(obj, "events")];
	assert_int_equal(m->type, CUBPF_MAP_RINGBUF);
	assert_int_equal(m->max_entries, 4096);
	m = &obj->maps[map_index(obj, ".rodata")];
	assert_int_equal(m->origin, VM_MAP_RODATA);
	assert_false(vm_map_prog_writable(m));
	uint64_t scale;
	memcpy(&scale, m->init, 8);
	assert_int_equal(scale, 3);
	m = &obj->maps[map_index(obj, ".data")];
	assert_int_equal(m->value_size, 64);
	m = &obj->maps[map_index(obj, ".bss")];
	assert_int_equal(m->origin, VM_MAP_BSS);
	assert_string_equal(obj->license, "Dual MIT/GPL");
	vm_object_free(obj);
}

static void test_count_calls(void **state)
{
	(void)state;
	char err[VM_ERRLEN];
	struct vm_object *obj = load("runprogs");
	int prog = prog_index(obj, "count_calls");
	verify_ok(obj, (uint32_t)prog);
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	assert_non_null(rt);
	uint64_t want0 = 0, want1 = 0;
	for (uint32_t i = 0; i < 5; i++) {
		struct cubpf_api_ctx ctx = {.func_id = i < 3 ? 7 : 9, .nargs = 2};
		ctx.args[0] = i;
		ctx.args[1] = 100 + i;
		want0 += i;
		want1 += 3 * (100 + i);
		assert_int_equal(run(rt, (uint32_t)prog, &ctx, sizeof(ctx)), 0);
	}
	uint32_t k = 7;
	uint64_t v;
	int calls = map_index(obj, "calls_by_func"), sums = map_index(obj, "sums");
	assert_int_equal(vm_map_lookup(rt, (uint32_t)calls, &k, &v), 0);
	assert_int_equal(v, 3);
	k = 9;
	assert_int_equal(vm_map_lookup(rt, (uint32_t)calls, &k, &v), 0);
	assert_int_equal(v, 2);
	k = 8;
	assert_int_equal(vm_map_lookup(rt, (uint32_t)calls, &k, &v), -1);
	k = 0;
	assert_int_equal(vm_map_lookup(rt, (uint32_t)sums, &k, &v), 0);
	assert_int_equal(v, want0);
	k = 1;
	assert_int_equal(vm_map_lookup(rt, (uint32_t)sums, &k, &v), 0);
	assert_int_equal(v, want1);
	/* .bss holds result (still 0) and ncalls, in the order clang chose */
	uint64_t bss[2];
	k = 0;
	assert_int_equal(vm_map_lookup(rt, (uint32_t)map_index(obj, ".bss"), &k, bss), 0);
	assert_int_equal(bss[0] + bss[1], 5);
	assert_true(bss[0] == 0 || bss[1] == 0);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

static char printed[256];

static void capture(void *user, const char *line)
{
	(void)user;
	snprintf(printed, sizeof(printed), "%s", line);
}

static void test_loops_and_calls(void **state)
{
	(void)state;
	char err[VM_ERRLEN];
	struct vm_object *obj = load("runprogs");
	int prog = prog_index(obj, "loops");
	verify_ok(obj, (uint32_t)prog);
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	assert_non_null(rt);
	struct vm_output out = {capture, NULL};
	vm_runtime_set_output(rt, &out);
	const uint64_t n[] = {16, 4, 0, 1000};
	const uint64_t want[] = {136, 10, 0, 136};
	for (int i = 0; i < 4; i++) {
		struct cubpf_kernel_ctx ctx = {.nparams = 1};
		ctx.params[0] = n[i];
		assert_int_equal(run(rt, (uint32_t)prog, &ctx, sizeof(ctx)), want[i]);
		char line[128];
		snprintf(line, sizeof(line), "loop %llu over %llu", (unsigned long long)want[i],
			 (unsigned long long)n[i]);
		assert_string_equal(printed, line);
	}
	uint64_t bss[2]; /* result (the last run's 136) and ncalls (0), in clang's order */
	uint32_t k = 0;
	assert_int_equal(vm_map_lookup(rt, (uint32_t)map_index(obj, ".bss"), &k, bss), 0);
	assert_int_equal(bss[0] + bss[1], 136);
	assert_true(bss[0] == 0 || bss[1] == 0);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

struct alloc_event {
	uint32_t func_id, tid;
	uint64_t ret, size;
};

static void test_ringbuf_records(void **state)
{
	(void)state;
	char err[VM_ERRLEN];
	struct vm_object *obj = load("runprogs");
	int prog = prog_index(obj, "alloc_ret");
	verify_ok(obj, (uint32_t)prog);
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	assert_non_null(rt);
	uint32_t ring = (uint32_t)map_index(obj, "events");
	for (uint32_t i = 0; i < 3; i++) {
		struct cubpf_api_ctx ctx = {.func_id = 40 + i, .tid = 1234, .ret = i};
		ctx.args[1] = 4096u << i;
		run(rt, (uint32_t)prog, &ctx, sizeof(ctx));
	}
	for (uint32_t i = 0; i < 3; i++) {
		struct alloc_event e;
		assert_int_equal(vm_ringbuf_consume(rt, ring, &e, sizeof(e)), sizeof(e));
		assert_int_equal(e.func_id, 40 + i);
		assert_int_equal(e.tid, 1234);
		assert_int_equal(e.ret, i);
		assert_int_equal(e.size, 4096u << i);
	}
	struct alloc_event e;
	assert_int_equal(vm_ringbuf_consume(rt, ring, &e, sizeof(e)), 0);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

/* ---- rejects.bpf.c ------------------------------------------------------------------------------ */

static const struct {
	const char *prog, *reason;
} rejects[] = {
	{"rej_no_null_check", "invalid mem access 'map_value_or_null'"},
	{"rej_index_unchecked", "unbounded memory access"},
	{"rej_unbounded_loop", "unbounded loop"},
	{"rej_write_rodata", "read-only (.rodata)"},
	{"rej_pointer_in_map", "leaks addr into map"},
	{"rej_ctx_write", "cannot write into ctx"},
	{"rej_gpu_helper_on_host", "GPU-only"},
	{"rej_host_helper_on_gpu", "host-only"},
	{"rej_stack_variable_index", "variable stack access"},
	{"rej_uninit_stack_out", "is not initialised"},
	{"rej_ctx_narrow_addr", "invalid bpf_context access"},
};

static void test_c_rejects(void **state)
{
	(void)state;
	struct vm_object *obj = load("rejects");
	char *log = malloc(1 << 16);
	assert_non_null(log);
	size_t n = sizeof(rejects) / sizeof(rejects[0]);
	assert_int_equal(obj->prog_cnt, n);
	for (size_t i = 0; i < n; i++) {
		int p = prog_index(obj, rejects[i].prog);
		if (vm_verify(obj, (uint32_t)p, NULL, NULL, log, 1 << 16) == 0)
			fail_msg("%s: accepted, expected '%s'", rejects[i].prog, rejects[i].reason);
		if (!strstr(log, rejects[i].reason))
			fail_msg("%s: the log lacks '%s':\n%s", rejects[i].prog, rejects[i].reason, log);
	}
	free(log);
	vm_object_free(obj);
}

/* ---- bundled probes ----------------------------------------------------------------------------- */

static void test_bundled_probes_verify(void **state)
{
	(void)state;
	DIR *d = opendir("tools/probes");
	int files = 0;
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (l < 7 || strcmp(e->d_name + l - 6, ".bpf.c"))
			continue;
		char src[512];
		snprintf(src, sizeof(src), "tools/probes/%s", e->d_name);
		struct vm_object *obj = load(src);
		assert_true(obj->prog_cnt > 0);
		for (uint32_t i = 0; i < obj->prog_cnt; i++)
			verify_ok(obj, i);
		vm_object_free(obj);
		files++;
	}
	closedir(d);
	assert_true(files >= 5);
}

struct kstat {
	uint64_t launches, threads, first_entry, last_exit;
	uint64_t pad[12]; /* 128 bytes, as in tools/probes/kcount.bpf.c */
};

static void test_kcount_on_interpreter(void **state)
{
	(void)state;
	char err[VM_ERRLEN];
	struct vm_object *obj = load("tools/probes/kcount.bpf.c");
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	assert_non_null(rt);
	uint32_t entry = (uint32_t)prog_index(obj, "kcount_entry");
	uint32_t exit_ = (uint32_t)prog_index(obj, "kcount_exit");
	for (uint32_t t = 0; t < 4; t++) {
		struct cubpf_kernel_ctx ctx = {.kernel_id = 3, .tid_x = t, .ntid_x = 4, .ntid_y = 1,
					       .ntid_z = 1, .nctaid_x = 1, .nctaid_y = 1, .nctaid_z = 1};
		run(rt, entry, &ctx, sizeof(ctx));
		run(rt, exit_, &ctx, sizeof(ctx));
	}
	/* a per-SM map: the interpreter's slot is the CPU it ran on; the reader sums the copies
	 * (launches, threads) and takes the least first entry and the largest last exit */
	uint32_t k = 3, slots = vm_percpu_slots();
	struct kstat s = {0}, *all = calloc(slots, sizeof(*all));
	assert_non_null(all);
	assert_int_equal(vm_map_lookup_percpu(rt, (uint32_t)map_index(obj, "kstats"), &k, all), 0);
	for (uint32_t i = 0; i < slots; i++) {
		s.launches += all[i].launches;
		s.threads += all[i].threads;
		if (all[i].first_entry && (!s.first_entry || all[i].first_entry < s.first_entry))
			s.first_entry = all[i].first_entry;
		s.last_exit = all[i].last_exit > s.last_exit ? all[i].last_exit : s.last_exit;
	}
	free(all);
	assert_int_equal(s.launches, 1);
	assert_int_equal(s.threads, 4);
	assert_true(s.first_entry > 0);
	assert_true(s.last_exit >= s.first_entry);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

static void test_memtrace_on_interpreter(void **state)
{
	(void)state;
	char err[VM_ERRLEN];
	struct vm_object *obj = load("tools/probes/memtrace.bpf.c");
	struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
	assert_non_null(rt);
	struct cubpf_mem_ctx ctx = {.addr = 0x1000, .size = 16, .space = CUBPF_SPACE_GLOBAL,
				    .op = CUBPF_MEM_STORE};
	for (int i = 0; i < 3; i++)
		run(rt, 0, &ctx, sizeof(ctx));
	/* key (kernel 0) * 8 + space; value: accesses[op - 1][log2 size] (4 x 6), sectors[op - 1],
	 * pad; per-SM map: summed over the host's CPU slots (the interpreter runs one lane: a warp
	 * of one, one sector, of which 16 bytes unused) */
	uint32_t k = CUBPF_SPACE_GLOBAL, slots = vm_percpu_slots();
	uint64_t *v = calloc((size_t)slots * 32, sizeof(*v)), acc = 0, sec = 0;
	assert_non_null(v);
	assert_int_equal(vm_map_lookup_percpu(rt, (uint32_t)map_index(obj, "counts"), &k, v), 0);
	for (uint32_t s = 0; s < slots; s++) {
		acc += v[s * 32 + (CUBPF_MEM_STORE - 1) * 6 + 4]; /* log2(16) */
		sec += v[s * 32 + 24 + (CUBPF_MEM_STORE - 1)];
	}
	assert_int_equal(acc, 3);
	assert_int_equal(sec, 3 * (32 - 16)); /* waste: one sector for 16 bytes, each time */
	free(v);
	vm_runtime_free(rt);
	vm_object_free(obj);
}

/* ---- the cubpf command ------------------------------------------------------------------------- */

static int sh(const char *cmd, char *out, size_t cap)
{
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_cli_verify_disasm(void **state)
{
	(void)state;
	char cmd[8192], *out = malloc(1 << 16);
	const char *b = test_build_dir();
	const char *good = test_compile("tools/probes/kcount.bpf.c");
	char goodp[1024];
	snprintf(goodp, sizeof(goodp), "%s", good);
	const char *bad = test_compile("rejects");
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf verify -v %s 2>&1", b, goodp);
	assert_int_equal(sh(cmd, out, 1 << 16), 0);
	assert_non_null(strstr(out, "kcount_entry (kprobe/*): OK"));
	assert_non_null(strstr(out, "processed"));
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf verify -p rej_ctx_write %s 2>&1", b, bad);
	assert_int_equal(sh(cmd, out, 1 << 16), 1);
	assert_non_null(strstr(out, "REJECTED"));
	assert_non_null(strstr(out, "cannot write into ctx"));
	assert_non_null(strstr(out, "  ->"));
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf disasm %s 2>&1", b, goodp);
	assert_int_equal(sh(cmd, out, 1 << 16), 0);
	assert_non_null(strstr(out, "kstats"));
	assert_non_null(strstr(out, "call bpf_get_globaltimer#502"));
	assert_non_null(strstr(out, "r1 = map[kstats] ll"));
	snprintf(cmd, sizeof(cmd), "head -c 200 %s > %s.cut; %s/bin/cubpf verify %s.cut 2>&1", goodp,
		 goodp, b, goodp);
	assert_int_equal(sh(cmd, out, 1 << 16), 1);
	assert_non_null(strstr(out, "not a valid ELF64 object"));
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf verify 2>&1", b);
	assert_int_equal(sh(cmd, out, 1 << 16), 2);
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf disasm --help 2>&1", b);
	assert_int_equal(sh(cmd, out, 1 << 16), 0);
	assert_non_null(strstr(out, "usage: cubpf disasm"));
	free(out);
}

size_t cprog_tests(struct CMUnitTest *out, size_t cap)
{
	static const struct CMUnitTest t[] = {
		cmocka_unit_test(test_object_layout),
		cmocka_unit_test(test_count_calls),
		cmocka_unit_test(test_loops_and_calls),
		cmocka_unit_test(test_ringbuf_records),
		cmocka_unit_test(test_c_rejects),
		cmocka_unit_test(test_bundled_probes_verify),
		cmocka_unit_test(test_kcount_on_interpreter),
		cmocka_unit_test(test_memtrace_on_interpreter),
		cmocka_unit_test(test_cli_verify_disasm),
	};
	size_t n = sizeof(t) / sizeof(t[0]);
	if (n > cap)
		n = cap;
	memcpy(out, t, n * sizeof(t[0]));
	return n;
}
