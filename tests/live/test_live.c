/* tests/live: live probes in the shim (shim/live/) against the fake driver of tests/shim.
 *
 * Each case runs in a child process that loads the shim (with CUBPF_PROGRAMS set) over the fake
 * driver, loads modules through it and plays the kernel by writing counts into the device maps
 * (the fake's device memory is host memory).  The parent checks what the fake driver was given
 * (the substituted or the original image, the map pointers) and the shim's report at exit.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/child.h"
#include "cubin/cubin.h"
#include "shim/live/rb.h"
#include "ptx-rewriter/layout.h"
#include "store/store.h"

static char shim_path[4096], fake_path[4096], probe_path[4096], cubin_path[4096];
static char host_probes[8192], ring_probe[4096], bad_probe[4096], kinds_probe[4096];
static char shared_probe[4096];
static char child_err[1 << 16];
/* per process: test_live runs of other build folders at the same time write their own */
static char trace_path[64];
/* Every child gets a fresh module cache unless the case names one (CUBPF_CACHE in its env). */
static char fresh_cache[256];

static const char live_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n\n"
	".visible .entry live_k(\n\t.param .u64 live_k_param_0\n)\n{\n\tret;\n}\n";
static const char jit_error_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n// fake_jit_error\n"
	".visible .entry live_bad()\n{\n\tret;\n}\n";

struct child_env {
	const char *names[6];
	const char *values[6];
};

/* Runs fn in a child with the shim over the fake driver, CUBPF_PROGRAMS=count.bpf.o,
 * CUBPF_LOG=info and the extra variables; returns its exit status, stderr in child_err. */
static void remove_db(const char *path)
{
	char p[4200];
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/* The child's environment: the fake driver, the probe, a fresh cache, and env's settings. */
static void child_setup(const void *arg)
{
	const struct child_env *env = arg;
	setenv("CUBPF_REAL_LIBCUDA", fake_path, 1);
	setenv("CUBPF_PROGRAMS", probe_path, 1);
	setenv("CUBPF_LOG", "info", 1);
	unsetenv("CUBPF_DISABLE");
	unsetenv("CUBPF_TRACE");
	setenv("CUBPF_CACHE", fresh_cache, 1);
	for (int i = 0; env && i < 6 && env->names[i]; i++)
		setenv(env->names[i], env->values[i], 1);
}

static int run_child(const struct child_env *env, int (*fn)(void))
{
	snprintf(fresh_cache, sizeof(fresh_cache), "/tmp/cubpf-live-test-%d.db", (int)getpid());
	remove_db(fresh_cache);
	int status = child_run(child_setup, env, fn, child_err, sizeof(child_err));
	assert_true(status != -1);
	remove_db(fresh_cache);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		printf("child failed; its stderr:\n%s\n", child_err);
	return child_code(status);
}

/* The records of one type in a trace, or -1 when it cannot be opened. */
static int trace_records(const char *path, uint16_t type)
{
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	struct store_trace_record rec;
	int n = 0;
	if (!r)
		return -1;
	while (store_trace_next(r, &rec) == 1)
		n += rec.type == type;
	store_trace_close_reader(r);
	return n;
}

/* ---- the child's view: the shim's driver functions and the fake's test interface ---------- */

static void *shim, *fake;
typedef int (*load_fn)(void **, const void *);
typedef int (*libload_fn)(void **, const void *, void *, void *, unsigned, void *, void *, unsigned);
typedef int (*getkernel_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);
static const char *(*module_text)(void *);
static uint64_t (*global)(void *, const char *);
static void (*set_ctx)(void *);

static int open_both(void)
{
	int version = 0;
	shim = dlopen(shim_path, RTLD_NOW | RTLD_LOCAL);
	if (!shim)
		return child_fail("dlopen %s: %s", shim_path, dlerror());
	((int (*)(int *))dlsym(shim, "cuDriverGetVersion"))(&version); /* the shim starts */
	fake = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!fake)
		return child_fail("the fake driver was not loaded by the shim");
	module_text = (const char *(*)(void *))dlsym(fake, "fake_module_text");
	global = (uint64_t(*)(void *, const char *))dlsym(fake, "fake_global");
	set_ctx = (void (*)(void *))dlsym(fake, "fake_set_ctx");
	return !module_text || !global || !set_ctx;
}

static int load(void **mod, const void *image)
{
	return ((load_fn)dlsym(shim, "cuModuleLoadData"))(mod, image);
}

/* The module got the instrumented code (a fake cubin, or PTX) and not the original. */
static int instrumented(void *h, const char *prefix)
{
	const char *t = module_text(h);
	if (!t)
		return child_fail("the fake driver has no text for %p", h);
	if (strncmp(t, prefix, strlen(prefix)) || !strstr(t, "__cubpf_map_0"))
		return child_fail("not instrumented as expected (%s...): %.80s", prefix, t);
	return 0;
}

static int original(void *h, const char *ptx)
{
	const char *t = module_text(h);
	if (!t || strcmp(t, ptx))
		return child_fail("the module is not the original: %.80s", t ? t : "(none)");
	return 0;
}

/* ---- cases ---------------------------------------------------------------------------------- */

/* A PTX module in a context: JIT-compiled, substituted, map pointers stored; the counts the
 * "kernel" writes are reported at exit. */
static int child_module(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0 || instrumented(mod, "FAKECUBIN"))
		return 1;
	uint64_t *entries = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_0");
	uint64_t *exits = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_1");
	if (!entries || !exits || entries == exits)
		return child_fail("map pointers not stored: %p %p", (void *)entries, (void *)exits);
	entries[1] = 7; /* kernel id 1 (live_k) entered 7 times */
	exits[1] = 6;
	return 0;
}

static void test_module_is_instrumented_and_maps_reported(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_DUMP_MAPS" }, { "1" } };
	assert_int_equal(run_child(&env, child_module), 0);
	assert_non_null(strstr(child_err, "live: cuModuleLoadData: instrumented 1 of 1 kernels"));
	assert_non_null(strstr(child_err, "maps on device 0"));
	assert_non_null(strstr(child_err, "live: kernel id 1 = live_k"));
	assert_non_null(strstr(child_err, "cubpf: map entries[1] = 7 (device 0)"));
	assert_non_null(strstr(child_err, "cubpf: map exits[1] = 6 (device 0)"));
	assert_non_null(strstr(child_err, "live: 1 modules instrumented (1 kernels), 0 fell back"));
	/* 64 + 64 + 2^20 entries of 8 bytes */
	assert_non_null(strstr(child_err, "maps: 8389632 device bytes in 1 contexts"));
}

/* The maps are read before the context is torn down (the runtime resets primary contexts at
 * exit): what the kernel wrote before the reset is reported, later writes are not. */
static int child_teardown(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	uint64_t *entries = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_0");
	if (!entries)
		return child_fail("no map pointer");
	entries[1] = 5;
	if (((int (*)(int))dlsym(shim, "cuDevicePrimaryCtxReset_v2"))(0) != 0)
		return child_fail("reset failed");
	entries[1] = 99; /* after the context is gone: never read */
	return 0;
}

static void test_maps_are_read_before_context_teardown(void **state)
{
	(void)state;
	assert_int_equal(run_child(NULL, child_teardown), 0);
	assert_non_null(strstr(child_err, "cubpf: map entries[1] = 5 (device 0)"));
	assert_null(strstr(child_err, "= 99"));
	assert_null(strstr(child_err, "reading the maps of context"));
}

/* Issue 16: contexts created (cuCtxCreate with parameters) and destroyed in a loop, a module, a
 * launch and map writes in each, while the trace's snapshot thread runs.  Nothing of cubpf's may
 * touch a destroyed context afterwards (the fake driver aborts there, where the real driver
 * crashed in the exit report), each new context gets maps of its own even when the driver hands
 * a destroyed context's handle out again, and each context's maps are reported. */
static int child_ctx_cycles(void)
{
	typedef int (*create_fn)(void **, void *, unsigned, int);
	if (open_both())
		return 1;
	create_fn create = (create_fn)dlsym(shim, "cuCtxCreate_v4");
	int (*destroy)(void *) = (int (*)(void *))dlsym(shim, "cuCtxDestroy_v2");
	bool ring = getenv("CYCLES_RING") != NULL;
	for (int i = 0; i < 4; i++) {
		void *ctx = NULL, *mod = NULL, *f = NULL;
		char params[64] = { 0 }; /* a CUctxCreateParams: nothing asked for */
		if (create(&ctx, params, 0, 0) != 0)
			return child_fail("cuCtxCreate");
		if (load(&mod, live_ptx) != 0 || instrumented(mod, "FAKECUBIN"))
			return 1;
		if (ring) { /* a record in the ring buffer; its lanes go with the context */
			void *rb = ((void *(*)(void))dlsym(fake, "fake_last_host_alloc"))();
			uint64_t rec[2] = { 0xabc0 + (uint64_t)i, (uint64_t)i };
			if (!rb || shim_live_rb_produce(rb, (uint32_t)i, rec, sizeof(rec)) != 0)
				return child_fail("cycle %d: produce", i);
		}
		uint64_t *entries = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_0");
		if (!ring && !entries)
			return child_fail("cycle %d: no map pointer", i);
		if (!ring && entries[1] != 0)
			return child_fail("cycle %d: the module got the maps of a destroyed context "
					  "(%llu)", i, (unsigned long long)entries[1]);
		if (!ring)
			entries[1] = 10 + (uint64_t)i;
		if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0 ||
		    ((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 256, NULL, NULL,
							    NULL) != 0)
			return child_fail("cycle %d: launch", i);
		if (destroy(ctx) != 0)
			return child_fail("cuCtxDestroy");
		usleep(30 * 1000); /* the snapshot thread (every 10 ms) comes round */
	}
	fprintf(stderr, "child: %u context handles came back\n",
		((unsigned (*)(void))dlsym(fake, "fake_ctx_reused"))());
	return 0;
}

/* A library used in a context that is destroyed, then in a new context with the same handle:
 * the new context's maps are stored in the library before the launch there. */
static int child_library_ctx_cycles(void)
{
	typedef int (*create_fn)(void **, void *, unsigned, int);
	void *lib = NULL, *kern = NULL, *ctx = NULL, *ctx2 = NULL;
	char params[64] = { 0 };
	if (open_both())
		return 1;
	create_fn create = (create_fn)dlsym(shim, "cuCtxCreate_v4");
	int (*destroy)(void *) = (int (*)(void *))dlsym(shim, "cuCtxDestroy_v2");
	launch_fn launch = (launch_fn)dlsym(shim, "cuLaunchKernel");
	if (create(&ctx, params, 0, 0) != 0 ||
	    ((libload_fn)dlsym(shim, "cuLibraryLoadData"))(&lib, live_ptx, NULL, NULL, 0, NULL,
							   NULL, 0) != 0 ||
	    ((getkernel_fn)dlsym(shim, "cuLibraryGetKernel"))(&kern, lib, "live_k") != 0 ||
	    launch(kern, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != 0)
		return child_fail("first context: load, kernel or launch");
	uint64_t first = global(lib, "__cubpf_map_0");
	if (!first || destroy(ctx) != 0 || create(&ctx2, params, 0, 0) != 0)
		return child_fail("first context: no map pointer, or destroy/create failed");
	if (ctx2 != ctx)
		return child_fail("the fake did not hand the handle out again");
	if (launch(kern, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != 0)
		return child_fail("launch in the second context");
	uint64_t second = global(lib, "__cubpf_map_0");
	if (!second || second == first)
		return child_fail("the library still points at the destroyed context's maps");
	return destroy(ctx2);
}

/* The primary context released to zero and retained again (the same handle comes back): the
 * new context gets fresh maps. */
static int child_primary_cycles(void)
{
	int (*retain)(void **, int) = NULL, (*release)(int) = NULL;
	if (open_both())
		return 1;
	retain = (int (*)(void **, int))dlsym(shim, "cuDevicePrimaryCtxRetain");
	release = (int (*)(int))dlsym(shim, "cuDevicePrimaryCtxRelease_v2");
	for (int i = 0; i < 3; i++) {
		void *ctx = NULL, *mod = NULL;
		if (retain(&ctx, 0) != 0 || load(&mod, live_ptx) != 0)
			return child_fail("cycle %d: retain or load", i);
		uint64_t *entries = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_0");
		if (!entries || entries[1] != 0)
			return child_fail("cycle %d: maps %p of a released context", i, (void *)entries);
		entries[1] = 20 + (uint64_t)i;
		/* the first time, the fake's implicit reference is released too: the first release
		 * leaves the context alive (its maps stay), the second is the last */
		if (release(0) != 0 || (i == 0 && release(0) != 0))
			return child_fail("cycle %d: release", i);
	}
	return 0;
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_destroyed_contexts_are_forgotten(void **state)
{
	(void)state;
	unlink(trace_path);
	struct child_env env = { { "CUBPF_DUMP_MAPS", "CUBPF_TRACE", "CUBPF_INTERVAL_MS" },
				 { "1", trace_path, "10" } };
	assert_int_equal(run_child(&env, child_ctx_cycles), 0);
	assert_int_equal(count_of(child_err, "maps on device 0"), 4);
	for (int i = 0; i < 4; i++) {
		char line[64];
		snprintf(line, sizeof(line), "cubpf: map entries[1] = %d (device 0)", 10 + i);
		assert_non_null(strstr(child_err, line));
	}
	assert_null(strstr(child_err, "fake driver:"));
	assert_non_null(strstr(child_err, "live: 4 modules instrumented (4 kernels)"));
	assert_non_null(strstr(child_err, "device bytes in 4 contexts"));
	unlink(trace_path);
	assert_non_null(strstr(child_err, "child: 3 context handles came back"));
	struct child_env prim = { { "CUBPF_DUMP_MAPS" }, { "1" } };
	assert_int_equal(run_child(&prim, child_primary_cycles), 0);
	assert_int_equal(count_of(child_err, "maps on device 0"), 3);
	assert_non_null(strstr(child_err, "cubpf: map entries[1] = 22 (device 0)"));
	assert_int_equal(run_child(NULL, child_library_ctx_cycles), 0);
	/* ring buffers: the drain leaves a context being destroyed alone (its pinned lanes go
	 * with it: ASan would see the drain read freed memory) after taking what it holds */
	unlink(trace_path);
	struct child_env ring = { { "CUBPF_PROGRAMS", "CUBPF_TRACE", "CUBPF_RINGBUF_MB",
				    "CYCLES_RING" }, { ring_probe, trace_path, "4", "1" } };
	assert_int_equal(run_child(&ring, child_ctx_cycles), 0);
	assert_null(strstr(child_err, "fake driver:"));
	/* one per context, each taken before its context went */
	assert_int_equal(trace_records(trace_path, STORE_REC_PROBE), 4);
	unlink(trace_path);
}

/* ---- what a context costs (issue 27, item 6) ----------------------------------------------
 * Under every bundled tool's probe object and count.bpf.o at once (349 MB of maps and a ring
 * buffer a context), contexts are made and destroyed in a loop, a module loaded and launched
 * and the kernel's count written in each (as tests/cuda/torture_drv.cu's ctxloop does on the
 * GPU).  Each cycle's driver calls and bytes go to stderr: "test: cycle N: NAME CALLS BYTES ...". */
static char all_probes[16384], budget_db[256], budget_dir[2][64];

static int child_ctx_budget(void)
{
	typedef int (*create_fn)(void **, void *, unsigned, int);
	static const char *const fns[] = { "cuMemAlloc_v2", "cuMemsetD8Async", "cuMemsetD32Async",
					   "cuMemHostAlloc", "cuMemcpyDtoHAsync_v2", "cuMemFree_v2",
					   "cuLinkCreate_v2", "cuModuleLoadData", NULL };
	unsigned before[8];
	uint64_t bytes_before[8];
	if (open_both())
		return 1;
	create_fn create = (create_fn)dlsym(shim, "cuCtxCreate_v4");
	int (*destroy)(void *) = (int (*)(void *))dlsym(shim, "cuCtxDestroy_v2");
	unsigned (*hits)(const char *) = (unsigned (*)(const char *))dlsym(fake, "fake_hits");
	uint64_t (*bytes)(const char *) = (uint64_t (*)(const char *))dlsym(fake, "fake_bytes");
	if (!hits || !bytes)
		return child_fail("no fake_hits or fake_bytes");
	for (int i = 0; i < 4; i++) {
		void *ctx = NULL, *mod = NULL, *f = NULL;
		char params[64] = { 0 };
		for (int k = 0; fns[k]; k++)
			before[k] = hits(fns[k]), bytes_before[k] = bytes(fns[k]);
		if (create(&ctx, params, 0, 0) != 0 || load(&mod, live_ptx) != 0 ||
		    instrumented(mod, "FAKECUBIN"))
			return child_fail("cycle %d: context or module", i);
		/* count.bpf.o is the first object: its `entries` map is __cubpf_map_0 */
		uint64_t *entries = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_0");
		if (!entries || entries[1] != 0)
			return child_fail("cycle %d: no fresh map", i);
		entries[1] = 100 + (uint64_t)i;
		if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0 ||
		    ((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
							    NULL) != 0 ||
		    destroy(ctx) != 0)
			return child_fail("cycle %d: launch or destroy", i);
		fprintf(stderr, "test: cycle %d:", i);
		for (int k = 0; fns[k]; k++)
			fprintf(stderr, " %s %u %llu", fns[k], hits(fns[k]) - before[k],
				(unsigned long long)(bytes(fns[k]) - bytes_before[k]));
		fprintf(stderr, "\n");
	}
	return 0;
}

/* One function's calls and bytes in cycle `cycle` of child_ctx_budget. */
static void cycle_cost(int cycle, const char *fn, unsigned *calls, unsigned long long *bytes)
{
	char head[32], want[64];
	snprintf(head, sizeof(head), "test: cycle %d:", cycle);
	snprintf(want, sizeof(want), " %s %%u %%llu", fn);
	const char *line = strstr(child_err, head), *at = line ? strstr(line, fn) : NULL;
	assert_non_null(at);
	assert_int_equal(sscanf(at - 1, want, calls, bytes), 2);
}

/* count.bpf.o first, then every bundled tool's object (PROBE_OBJS, $(BUILD)/probes). */
static void budget_env(struct child_env *env, const char *scan)
{
	const char *build = getenv("CUBPF_BUILD") ? getenv("CUBPF_BUILD") : LIVE_TEST_BUILD;
	char pattern[4200];
	glob_t g;
	snprintf(all_probes, sizeof(all_probes), "%s", probe_path);
	snprintf(pattern, sizeof(pattern), "%s/probes/*.bpf.o", build);
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 10);
	for (size_t i = 0; i < g.gl_pathc; i++)
		snprintf(all_probes + strlen(all_probes), sizeof(all_probes) - strlen(all_probes),
			 ":%s", g.gl_pathv[i]);
	globfree(&g);
	/* a cache of its own (in a folder only we can write: the cache refuses /tmp itself) */
	snprintf(budget_dir[0], sizeof(budget_dir[0]), "/tmp/cubpf-live-budget-%d", (int)getpid());
	snprintf(budget_dir[1], sizeof(budget_dir[1]), "/tmp/cubpf-live-budget-%d/sub", (int)getpid());
	snprintf(budget_db, sizeof(budget_db), "%s/cache.db", budget_dir[1]);
	remove_db(budget_db);
	*env = (struct child_env){
		{ "CUBPF_PROGRAMS", "CUBPF_DUMP_MAPS", "CUBPF_CACHE", scan ? "FAKE_SCAN" : NULL },
		{ all_probes, "1", budget_db, scan } };
}

static void budget_cleanup(void)
{
	remove_db(budget_db);
	rmdir(budget_dir[1]);
	rmdir(budget_dir[0]);
}

/* A context cycle costs one device allocation and one memset for all the maps (was one of each
 * per map), no JIT after the first (the module's entry found again whatever the kernel id
 * base, the clock kernel compiled once per process), and
 * reads back only the blocks the zero scan flags (was every byte of every map: 349 MB); each
 * context's count is still reported. */
static void test_context_cycle_budget(void **state)
{
	(void)state;
	struct child_env env;
	unsigned calls;
	unsigned long long bytes;
	budget_env(&env, NULL);
	assert_int_equal(run_child(&env, child_ctx_budget), 0);
	for (int i = 0; i < 4; i++) {
		char line[64];
		snprintf(line, sizeof(line), "cubpf: map entries[1] = %d (device 0)", 100 + i);
		assert_non_null(strstr(child_err, line));
	}
	assert_null(strstr(child_err, "disagreed"));
	cycle_cost(3, "cuMemAlloc_v2", &calls, &bytes);
	assert_int_equal(calls, 1);
	assert_true(bytes > 300ull << 20); /* every tool's maps are still there */
	cycle_cost(3, "cuMemsetD8Async", &calls, &bytes);
	assert_int_equal(calls, 1);
	cycle_cost(3, "cuMemsetD32Async", &calls, &bytes);
	assert_int_equal(calls, 1); /* the enable words */
	cycle_cost(3, "cuMemHostAlloc", &calls, &bytes);
	assert_int_equal(calls, 1); /* kernelretsnoop's ring buffer */
	cycle_cost(3, "cuMemFree_v2", &calls, &bytes);
	assert_int_equal(calls, 0); /* the driver frees a context's memory with it */
	cycle_cost(0, "cuLinkCreate_v2", &calls, &bytes);
	assert_int_equal(calls, 2); /* the module's JIT, cubpf's own kernels' (once a process) */
	cycle_cost(1, "cuLinkCreate_v2", &calls, &bytes);
	assert_int_equal(calls, 0); /* another id base, the first cycle's entry (cache.c alias) */
	cycle_cost(3, "cuLinkCreate_v2", &calls, &bytes);
	assert_int_equal(calls, 0); /* the module from the cache, the clock's cubin kept */
	cycle_cost(3, "cuModuleLoadData", &calls, &bytes);
	assert_int_equal(calls, 2); /* the application's, cubpf's own kernels */
	cycle_cost(3, "cuMemcpyDtoHAsync_v2", &calls, &bytes);
	assert_true(bytes < 1ull << 20);
	assert_true(calls <= 8);
	budget_cleanup();
}

/* A zero scan that flags nothing (FAKE_SCAN=blind) disagrees with the whole copy of the first
 * teardown: said once, and maps are read whole from then on, every count reported; a scan that
 * does not run (FAKE_SCAN=off) leaves the maps read whole, without a word. */
static void test_context_cycle_scan_fallbacks(void **state)
{
	(void)state;
	struct child_env env;
	unsigned calls;
	unsigned long long bytes, whole;
	const char *modes[] = { "blind", "off" };
	for (int m = 0; m < 2; m++) {
		budget_env(&env, modes[m]);
		assert_int_equal(run_child(&env, child_ctx_budget), 0);
		for (int i = 0; i < 4; i++) {
			char line[64];
			snprintf(line, sizeof(line), "cubpf: map entries[1] = %d (device 0)", 100 + i);
			assert_non_null(strstr(child_err, line));
		}
		assert_int_equal(count_of(child_err, "zero scan of the maps disagreed"), m == 0);
		cycle_cost(3, "cuMemAlloc_v2", &calls, &whole);
		cycle_cost(3, "cuMemcpyDtoHAsync_v2", &calls, &bytes);
		assert_true(bytes > 300ull << 20 && bytes <= whole);
	}
	budget_cleanup();
}

/* Host probes: uprobe/uretprobe on launches (arguments, result) and on a copy (bytes). */
static int child_host(void)
{
	void *mod = NULL, *f = NULL;
	static char buf[100];
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0)
		return child_fail("cuModuleGetFunction");
	for (int i = 0; i < 3; i++)
		if (((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 5, 1, 1, 32, 1, 1, 0, NULL, NULL,
								NULL) != 0)
			return child_fail("launch");
	((int (*)(uint64_t, const void *, size_t))dlsym(shim, "cuMemcpyHtoD_v2"))(1, buf, 100);
	return 0;
}

static void test_host_probes_run_on_driver_calls(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_PROGRAMS" }, { host_probes } };
	assert_int_equal(run_child(&env, child_host), 0);
	assert_non_null(strstr(child_err, "live: 3 host programs ran 7 times (0 faults)"));
	assert_non_null(strstr(child_err, "cubpf: map calls[0] = 3 (host)"));  /* launches */
	assert_non_null(strstr(child_err, "cubpf: map calls[1] = 15 (host)")); /* grid x summed */
	assert_non_null(strstr(child_err, "cubpf: map calls[2] = 3 (host)"));  /* returned 0 */
	assert_non_null(strstr(child_err, "cubpf: map calls[3] = 100 (host)")); /* bytes */
	/* the GPU programs of the other object still instrument the module */
	assert_non_null(strstr(child_err, "live: cuModuleLoadData: instrumented 1 of 1 kernels"));
}

/* A map used by a host probe and a GPU probe of one object (shared.bpf.o) has one storage: the
 * "kernel" writes key 1 through the module's map pointer, the host probe on each launch counts
 * the launch in key 0 and copies key 1 + 100 to key 2, and the kernel side sees those writes. */
static int child_shared(void)
{
	void *mod = NULL, *f = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	uint64_t *both = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_0");
	if (!both || ((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0)
		return child_fail("no map pointer or function");
	both[1] = 7; /* seven threads entered */
	for (int i = 0; i < 2; i++)
		if (((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
								NULL) != 0)
			return child_fail("launch");
	bool managed = !getenv("FAKE_NO_MANAGED");
	if (managed && (both[0] != 2 || both[2] != 107))
		return child_fail("the kernel side sees launches %llu, copy %llu (want 2, 107)",
				  (unsigned long long)both[0], (unsigned long long)both[2]);
	if (!managed && (both[0] != 0 || both[2] != 0))
		return child_fail("separate copies, yet the kernel side sees host writes");
	if (!getenv("SHARED_RESET"))
		return 0;
	/* the context goes: the host side moves back to host memory with the values it had */
	if (((int (*)(int))dlsym(shim, "cuDevicePrimaryCtxReset_v2"))(0) != 0)
		return child_fail("reset failed");
	both[1] = 99; /* the old storage: no longer the host's */
	return ((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
							  NULL) != 0;
}

static void test_host_and_gpu_programs_share_a_map(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_DUMP_MAPS" }, { shared_probe, "1" } };
	assert_int_equal(run_child(&env, child_shared), 0);
	assert_non_null(strstr(child_err, "live: map both: shared by host and GPU programs (32 bytes"));
	assert_non_null(strstr(child_err, "cubpf: map both[0] = 2 (host)"));
	assert_non_null(strstr(child_err, "cubpf: map both[1] = 7 (host)"));
	assert_non_null(strstr(child_err, "cubpf: map both[2] = 107 (host)"));
	/* a reset of the owner context: the host keeps the values, later launches count on */
	struct child_env reset = { { "CUBPF_PROGRAMS", "CUBPF_DUMP_MAPS", "SHARED_RESET" },
				   { shared_probe, "1", "1" } };
	assert_int_equal(run_child(&reset, child_shared), 0);
	assert_non_null(strstr(child_err, "cubpf: map both[0] = 3 (host)"));
	assert_non_null(strstr(child_err, "cubpf: map both[1] = 7 (host)"));
	assert_non_null(strstr(child_err, "cubpf: map both[2] = 107 (host)"));
	/* no managed memory: each side keeps its own copy, with a warning */
	struct child_env none = { { "CUBPF_PROGRAMS", "CUBPF_DUMP_MAPS", "FAKE_NO_MANAGED" },
				  { shared_probe, "1", "1" } };
	assert_int_equal(run_child(&none, child_shared), 0);
	assert_non_null(strstr(child_err, "live: map both: not shared between host and GPU programs"));
	assert_non_null(strstr(child_err, "cubpf: map both[0] = 2 (host)"));
	assert_non_null(strstr(child_err, "cubpf: map both[2] = 100 (host)"));
}

/* Ring buffers: pinned lanes (one per warp slot: the fake has 4 SMs of 64), drained into the
 * trace; batches that do not fit are dropped by the producer and reported. */
static int child_ring(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	void *rb = ((void *(*)(void))dlsym(fake, "fake_last_host_alloc"))();
	const struct cubpf_rb_header *h = rb;
	if (!rb || h->version != CUBPF_RB_VERSION || h->lanes != 256 || h->warps != 64 ||
	    h->lane_bytes != 16256 || !h->state)
		return child_fail("ring buffer layout: %p %u lanes of %llu", rb, h ? h->lanes : 0,
				  h ? (unsigned long long)h->lane_bytes : 0ull);
	/* the producers' part: the fake's device memory is host memory */
	const struct cubpf_rb_state *st = (const void *)(uintptr_t)h->state;
	if (st->lanes != 256 || st->warps != 64 || st->lane_bytes != 16256 ||
	    st->heads != h->state + CUBPF_RB_STATE_HEADS(256) ||
	    st->tails != h->state + CUBPF_RB_STATE_TAILS(256) ||
	    st->drops != h->state + CUBPF_RB_STATE_DROPS(256) ||
	    st->data != (uintptr_t)rb + CUBPF_RB_DATA_OFFSET(256))
		return child_fail("ring buffer producers' header");
	for (uint64_t i = 0; i < 3; i++) {
		uint64_t rec[2] = { 0xabc0 + i, i };
		if (shim_live_rb_produce(rb, (uint32_t)i, rec, sizeof(rec)) != 0)
			return child_fail("produce");
	}
	usleep(50 * 1000); /* the drain thread takes them */
	static uint8_t big[4000];
	int dropped = 0;
	for (int i = 0; i < 6; i++) /* 4 batches of 4016 bytes fit a 16256-byte lane */
		dropped += shim_live_rb_produce(rb, 3, big, sizeof(big)) != 0;
	if (dropped != 2)
		return child_fail("%d of 6 big records dropped (expected 2)", dropped);
	/* the drain frees the lane and copies its tail to the producers' side: room again */
	for (int tries = 0; tries < 100; tries++) {
		usleep(10 * 1000);
		if (shim_live_rb_produce(rb, 3, big, sizeof(big)) == 0)
			return 0;
		dropped++;
	}
	return child_fail("lane 3 never had room again after the drain");
}

static void test_ring_buffers_are_drained_into_the_trace(void **state)
{
	(void)state;
	unlink(trace_path);
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_TRACE", "CUBPF_RINGBUF_MB" },
				 { ring_probe, trace_path, "4" } };
	assert_int_equal(run_child(&env, child_ring), 0);
	/* 4 MiB over 256 lanes: data from 4224 (header, tails, drops), lanes of
	 * (4194304 - 4224) / 256 rounded down to 128 = 16256; bookkeeping 64 + 3 x 256 x 8 */
	assert_non_null(strstr(child_err, "6720 device bytes, 4165760 pinned bytes, 2 maps; ring "
				       "buffer bookkeeping 6208 of the device bytes"));
	/* 3 small records, 4 of 6 big ones, then one more big one once the lane had room again
	 * (the tries before that were dropped) */
	const char *line = strstr(child_err, "live: ring buffer events: ");
	unsigned long long taken = 0, dropped = 0, copies = 0;
	assert_non_null(line);
	assert_int_equal(sscanf(line, "live: ring buffer events: %llu records taken, %llu dropped on "
				"device 0 (lanes full); tails copied to the device %llu times",
				&taken, &dropped, &copies), 3);
	assert_int_equal(taken, 8);
	assert_true(dropped >= 2);
	assert_true(copies >= 1);
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	int probes = 0, first = 0;
	uint64_t drops = 0;
	while (store_trace_next(r, &rec) == 1) {
		size_t rest;
		if (rec.type == STORE_REC_PROBE) {
			struct store_rec_probe p;
			const uint8_t *d = store_rec_fixed(&rec, &p, sizeof(p), &rest);
			assert_non_null(d);
			uint64_t v;
			memcpy(&v, d, 8);
			first += rest == 16 && v >= 0xabc0 && v <= 0xabc2;
			probes++;
		} else if (rec.type == STORE_REC_DROP) {
			struct store_rec_drop dr;
			assert_non_null(store_rec_fixed(&rec, &dr, sizeof(dr), &rest));
			if (dr.source == STORE_DROP_RINGBUF)
				drops += dr.records;
		}
	}
	if (probes != 8)
		print_message("%s\n", child_err);
	assert_int_equal(probes, 8);
	assert_int_equal(first, 3);
	assert_int_equal(drops, dropped);
	store_trace_close_reader(r);
	unlink(trace_path);
}

/* The threads of this process now (Linux: /proc/self/status), 0 when unknown. */
static unsigned threads_now(void)
{
	char line[256];
	unsigned n = 0;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %u", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* Many lanes (132 SMs x 64 warp slots) and records that keep coming: the drain starts its helper
 * threads (4 in all), and still every record is taken once or counted as dropped. */
static int child_ring_threads(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	void *rb = ((void *(*)(void))dlsym(fake, "fake_last_host_alloc"))();
	const struct cubpf_rb_header *h = rb;
	if (!rb || h->lanes != 132 * 64)
		return child_fail("ring buffer: %u lanes", h ? h->lanes : 0);
	/* Records without a pause for 300 ms, and on until the helpers are there (threads of this
	 * process: 3 more), 20 s at most: the drain takes them as fast as it can, over the 1 M a
	 * second that brings the helpers, though a sanitized build on a loaded machine may need
	 * more than one 10 ms window to show it.  What does not fit is dropped and counted. */
	uint64_t made = 0, seq = 0, ns;
	unsigned threads = threads_now(), passes = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (uint32_t k = 0; k < 4 * 132; k++, seq++) { /* batches of 1, every 16th lane */
			uint64_t rec[6] = { seq, seq ^ 0x5555, 0, 0, 0, ~seq };
			made += shim_live_rb_produce(rb, (seq * 16) % h->lanes, rec, sizeof(rec)) == 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		ns = (uint64_t)((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec));
	} while (ns < 300000000ull ||
		 (ns < 20000000000ull && (++passes % 64 || threads_now() < threads + 3)));
	fprintf(stderr, "child produced %llu of %llu\n", (unsigned long long)made,
		(unsigned long long)seq);
	return 0;
}

static void test_ring_buffer_drain_threads(void **state)
{
	(void)state;
	unlink(trace_path);
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_TRACE", "FAKE_SMS", "CUBPF_LOG",
				   "CUBPF_RINGBUF_THREADS" },
				 { ring_probe, trace_path, "132", "debug", "4" } };
	assert_int_equal(run_child(&env, child_ring_threads), 0);
	assert_non_null(strstr(child_err, "live: ring buffers: 4 drain threads"));
	unsigned long long made = 0, all = 0, taken = 0, dropped = 0;
	const char *p = strstr(child_err, "child produced ");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "child produced %llu of %llu", &made, &all), 2);
	p = strstr(child_err, "live: ring buffer events: ");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "live: ring buffer events: %llu records taken, %llu dropped",
				&taken, &dropped), 2);
	print_message("ring buffer drain threads: %llu records produced, %llu taken, %llu dropped\n",
		      made, taken, dropped);
	assert_true(made > 10000);
	assert_int_equal(taken, made);
	assert_int_equal(taken + dropped, all);
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	unsigned long long probes = 0, bad = 0;
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type != STORE_REC_PROBE)
			continue;
		struct store_rec_probe pr;
		size_t rest;
		const uint8_t *d = store_rec_fixed(&rec, &pr, sizeof(pr), &rest);
		uint64_t v[6];
		if (!d || rest != sizeof(v)) {
			bad++;
			continue;
		}
		memcpy(v, d, sizeof(v));
		bad += v[1] != (v[0] ^ 0x5555) || v[5] != ~v[0];
		probes++;
	}
	assert_int_equal(bad, 0);
	assert_int_equal(probes, made);
	store_trace_close_reader(r);
	unlink(trace_path);
}

/* Issue 28: an application's stream capture while cubpf works for itself.  The fake driver
 * invalidates a capture the way a real one does (tests/shim/fake_driver.c: an allocation, a
 * free, a synchronisation or a query from a thread not in relaxed mode), and counts each such
 * call.  The application captures in CAPTURE_MODE (0 global, 1 thread-local, 2 relaxed), on its
 * own thread or, with CAPTURE_OTHER=1, on a second thread; inside the capture it loads a module
 * (the context's maps, the ring buffer's pinned lanes and the JIT are cubpf's first calls then),
 * launches on the captured stream, and keeps the ring buffer's drain, the map snapshots (every
 * 2 ms) and the kernel spans' poller busy for 150 ms.  The capture must end well and no call of
 * cubpf's may have been "unsafe". */
struct capture_job {
	void *stream;
	int mode, begun, end_result;
	volatile int done;
};

static int capture_begin(struct capture_job *j)
{
	typedef int (*create_fn)(void **, unsigned);
	typedef int (*begin_fn)(void *, int);
	if (((create_fn)dlsym(shim, "cuStreamCreate"))(&j->stream, 1) != 0)
		return child_fail("cuStreamCreate");
	j->begun = ((begin_fn)dlsym(shim, "cuStreamBeginCapture_v2"))(j->stream, j->mode);
	return j->begun ? child_fail("cuStreamBeginCapture_v2: %d", j->begun) : 0;
}

static void capture_end(struct capture_job *j)
{
	void *graph = NULL;
	j->end_result = ((int (*)(void *, void **))dlsym(shim, "cuStreamEndCapture"))(j->stream,
										     &graph);
}

static void *capture_thread(void *arg)
{
	struct capture_job *j = arg;
	if (capture_begin(j) == 0) {
		while (!j->done)
			usleep(1000);
		capture_end(j);
	}
	return NULL;
}

static int child_capture(void)
{
	struct capture_job j = { .mode = atoi(getenv("CAPTURE_MODE")) };
	bool other = getenv("CAPTURE_OTHER") != NULL;
	pthread_t t;
	void *mod = NULL, *f = NULL;
	if (open_both())
		return 1;
	unsigned (*violations)(void) = (unsigned (*)(void))dlsym(fake, "fake_capture_violations");
	const char *(*culprit)(void) = (const char *(*)(void))dlsym(fake, "fake_capture_culprit");
	if (other ? pthread_create(&t, NULL, capture_thread, &j) != 0 : capture_begin(&j) != 0)
		return child_fail("the capture did not begin");
	while (other && !j.stream && !j.begun)
		usleep(1000);
	if (load(&mod, live_ptx) != 0 || instrumented(mod, "FAKECUBIN"))
		return 1;
	if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0 ||
	    ((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, other ? NULL : j.stream,
						    NULL, NULL) != 0)
		return child_fail("launch");
	void *rb = ((void *(*)(void))dlsym(fake, "fake_last_host_alloc"))();
	for (int i = 0; rb && i < 150; i++) { /* records: the drain copies tails and queries */
		uint64_t rec[2] = { 0xabc0 + (uint64_t)i, (uint64_t)i };
		shim_live_rb_produce(rb, (uint32_t)i % 4, rec, sizeof(rec));
		usleep(1000);
	}
	j.done = 1;
	if (other)
		pthread_join(t, NULL);
	else
		capture_end(&j);
	fprintf(stderr, "child: capture mode %d on %s thread ended with %d; %u unsafe calls (%s)\n",
		j.mode, other ? "another" : "the loading", j.end_result, violations(), culprit());
	if (!rb)
		return child_fail("no ring buffer");
	return j.end_result != 0 || violations() != 0;
}

static void capture_case(const char *mode, const char *other)
{
	unlink(trace_path);
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_TRACE", "CUBPF_INTERVAL_MS",
				   "CAPTURE_MODE", other ? "CAPTURE_OTHER" : NULL },
				 { ring_probe, trace_path, "2", mode, other } };
	int rc = run_child(&env, child_capture);
	const char *line = strstr(child_err, "child: capture mode");
	print_message("%.*s\n", line ? (int)strcspn(line, "\n") : 0, line ? line : "");
	assert_int_equal(rc, 0);
	assert_non_null(line);
	assert_true(trace_records(trace_path, STORE_REC_PROBE) > 0); /* the drain did run */
	unlink(trace_path);
}

static void test_capture_survives_cubpf_calls(void **state)
{
	(void)state;
	capture_case("0", NULL); /* global, on the thread that loads and launches */
	capture_case("0", "1");  /* global, on another thread */
	capture_case("1", NULL); /* thread-local */
	capture_case("1", "1");
	capture_case("2", NULL); /* relaxed */
}

/* Sampling: with CUBPF_SAMPLE=3 the kernel's enable word is on for launches 1, 4, 7... and off
 * for the others (a module that declares __cubpf_enable, as instrumented code will). */
static const char enable_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .const .align 8 .u64 __cubpf_enable;\n"
	".visible .entry live_k(\n\t.param .u64 live_k_param_0\n)\n{\n\tret;\n}\n";

static int child_sample(void)
{
	void *mod = NULL, *f = NULL;
	const uint32_t want[] = { ~0u, 0, 0, ~0u, 0, 0, ~0u };
	if (open_both() || load(&mod, enable_ptx) != 0)
		return 1;
	uint32_t *words = (uint32_t *)(uintptr_t)global(mod, "__cubpf_enable");
	if (!words || words[1] != ~0u || words[0] != ~0u)
		return child_fail("enable words not stored or not all on");
	if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0)
		return child_fail("cuModuleGetFunction");
	for (int i = 0; i < 7; i++) {
		const char *api = i % 2 ? "cuLaunchKernel_ptsz" : "cuLaunchKernel";
		if (((launch_fn)dlsym(shim, api))(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != 0)
			return child_fail("launch");
		if (words[1] != want[i])
			return child_fail("launch %d: enable word %x, want %x", i + 1, words[1], want[i]);
	}
	return 0;
}

static void test_sampling_flips_enable_words(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_SAMPLE" }, { "3" } };
	assert_int_equal(run_child(&env, child_sample), 0);
}

/* Blockretprobes count a block's threads in 16 bytes of the kernel's shared memory where the
 * module has room (ptx-rewriter/layout.h; these modules declare none: all of them), and with
 * CUBPF_SHARED_SUMS=0 in one table per context, in device memory: every module that declares
 * __cubpf_blocks gets the same table, zeroed; with no blockretprobe there is none. */
static const char blocks_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry live_k(\n\t.param .u64 live_k_param_0\n)\n{\n\tret;\n}\n";
static const char blocks_ptx2[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry live_k2(\n\t.param .u64 live_k2_param_0\n)\n{\n\tret;\n}\n";

static int child_blocks(void)
{
	void *a = NULL, *b = NULL;
	if (open_both() || load(&a, blocks_ptx) != 0 || load(&b, blocks_ptx2) != 0)
		return child_fail("set-up");
	const char *t = module_text(a);
	bool want = getenv("WANT_BLOCKS") != NULL, sh = getenv("WANT_BLOCK_SHARED") != NULL;
	if (!t || (strstr(t, ".u64 __cubpf_blocks;") != NULL) != want)
		return child_fail("the module %s the block table: %.80s", want ? "lacks" : "declares",
				  t ? t : "");
	if ((strstr(t, ".shared") != NULL) != sh || (sh && !strstr(t, ".b8 __cubpf_block[16];")))
		return child_fail("the module %s the block's state in shared memory: %.80s",
				       sh ? "lacks" : "has", t);
	if (!want)
		return 0;
	const uint8_t *ta = (const uint8_t *)(uintptr_t)global(a, "__cubpf_blocks");
	const uint8_t *tb = (const uint8_t *)(uintptr_t)global(b, "__cubpf_blocks");
	if (!ta || ta != tb)
		return child_fail("block table %p and %p: not one per context", (void *)ta, (void *)tb);
	for (uint64_t i = 0; i < CUBPF_BLOCK_TABLE_BYTES; i++)
		if (ta[i])
			return child_fail("the block table is not zeroed at byte %llu",
					  (unsigned long long)i);
	return 0;
}

static void test_block_table_per_context(void **state)
{
	(void)state;
	char blocklat[4200];
	snprintf(blocklat, sizeof(blocklat), "%s/probes/blocklat.bpf.o", LIVE_TEST_BUILD);
	/* CUBPF_SHARED_SUMS=0: no deferred counters' sums in shared memory either (count.bpf.o's
	 * would have them), so that any .shared would be the block table's */
	struct child_env env = { { "CUBPF_PROGRAMS", "WANT_BLOCKS", "CUBPF_CACHE", "CUBPF_DUMP_MAPS",
				   "CUBPF_SHARED_SUMS" },
				 { blocklat, "1", "off", "1", "0" } };
	assert_int_equal(run_child(&env, child_blocks), 0);
	/* the log's device bytes count the table (1 MiB and 128 bytes more than blocklat's two
	 * maps), which is no map: neither counted among them nor dumped */
	assert_non_null(strstr(child_err, "live: maps on device"));
	assert_non_null(strstr(child_err, " pinned bytes, 2 maps"));
	assert_non_null(strstr(child_err, "cubpf: map blstats"));
	assert_null(strstr(child_err, "map __cubpf"));
	struct child_env none = { { "CUBPF_CACHE", "CUBPF_SHARED_SUMS" }, { "off", "0" } };
	/* (count.bpf.o: kprobes only) */
	assert_int_equal(run_child(&none, child_blocks), 0);
	/* the default, shared memory allowed: no table in the modules */
	struct child_env sh = { { "CUBPF_PROGRAMS", "WANT_BLOCK_SHARED", "CUBPF_CACHE" },
				{ blocklat, "1", "off" } };
	assert_int_equal(run_child(&sh, child_blocks), 0);
}

/* fentry/fexit only (tests/ptx/probes/func.bpf.o): a module whose kernels get no probe but whose
 * device function does is instrumented, not left as it was. */
static const char func_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".func (.param .b32 func_retval0) live_f(.param .b32 live_f_param_0)\n{\n"
	"\t.reg .b32 %r<3>;\n\tld.param.u32 %r1, [live_f_param_0];\n\tadd.s32 %r2, %r1, 1;\n"
	"\tst.param.b32 [func_retval0+0], %r2;\n\tret;\n}\n"
	".visible .entry live_k(\n\t.param .u64 live_k_param_0\n)\n{\n\t.reg .b32 %r<3>;\n"
	"\tmov.u32 %r1, %tid.x;\n\t{\n\t.param .b32 p0;\n\tst.param.b32 [p0+0], %r1;\n"
	"\t.param .b32 rv;\n\tcall.uni (rv), live_f, (p0);\n\tld.param.b32 %r2, [rv+0];\n\t}\n"
	"\tret;\n}\n";

static int child_func_only(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, func_ptx) != 0)
		return child_fail("set-up");
	const char *t = module_text(mod);
	if (!t || !strstr(t, "// cubpf: fentry on_func_entry") || !strstr(t, "// cubpf: fexit"))
		return child_fail("the device function is not probed: %.200s", t ? t : "");
	if (!global(mod, "__cubpf_map_0"))
		return child_fail("the map pointer is not stored");
	return 0;
}

static void test_func_probes_only(void **state)
{
	(void)state;
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/ptx-probes/func.bpf.o", LIVE_TEST_BUILD);
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_CACHE" }, { probe, "off" } };
	assert_int_equal(run_child(&env, child_func_only), 0);
}

/* A probe with code on no feasible path (const volatile knobs: tests/ptx/probes/knob.bpf.c) is
 * accepted with that code dropped, in the forked checker and in the process alike: the checker
 * sends its marks back, and the module is instrumented without the switched-off printk. */
static int child_knob(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0 || instrumented(mod, "FAKECUBIN"))
		return child_fail("set-up");
	const char *t = module_text(mod);
	if (!t || !strstr(t, "// cubpf: kprobe on_entry") || strstr(t, "vprintf"))
		return child_fail("not probed as expected: %.300s", t ? t : "");
	return 0;
}

static void test_dead_code_dropped_behind_the_boundary(void **state)
{
	(void)state;
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/ptx-probes/knob.bpf.o", LIVE_TEST_BUILD);
	for (int fork_it = 0; fork_it < 2; fork_it++) {
		struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_CACHE", "CUBPF_VERIFY_FORK" },
					 { probe, "off", fork_it ? "1" : "0" } };
		assert_int_equal(run_child(&env, child_knob), 0);
		assert_non_null(strstr(child_err, "instrumented 1 of 1 kernels"));
	}
}

/* Launches being captured into a graph are not sampled: the enable word's memset would become a
 * node of the application's graph (found on an H100: torture_drv graph under memdelay, whose
 * --sample 2 put a memset node first, and the program's node handling failed).  The word stays
 * as it was through the captured launches. */
static int child_sample_capture(void)
{
	typedef int (*create_fn)(void **, unsigned);
	typedef int (*begin_fn)(void *, int);
	void *mod = NULL, *f = NULL, *s = NULL, *graph = NULL;
	if (open_both() || load(&mod, enable_ptx) != 0)
		return 1;
	uint32_t *words = (uint32_t *)(uintptr_t)global(mod, "__cubpf_enable");
	if (!words || ((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0 ||
	    ((create_fn)dlsym(shim, "cuStreamCreate"))(&s, 1) != 0 ||
	    ((begin_fn)dlsym(shim, "cuStreamBeginCapture_v2"))(s, 0) != 0)
		return child_fail("set-up");
	for (int i = 0; i < 3; i++)
		if (((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, s, NULL,
							   NULL) != 0)
			return child_fail("launch");
	if (words[1] != ~0u)
		return child_fail("a captured launch flipped the enable word: %x", words[1]);
	if (((int (*)(void *, void **))dlsym(shim, "cuStreamEndCapture"))(s, &graph) != 0)
		return child_fail("the capture ended badly");
	return 0;
}

static void test_sampling_leaves_captured_launches_alone(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_SAMPLE" }, { "3" } };
	assert_int_equal(run_child(&env, child_sample_capture), 0);
}

/* CUBPF_CONTROL: the file switches programs while the application runs; the next launch of a
 * kernel carries the new mask in its enable word (count.bpf.o: count_entry = bit 0,
 * count_exit = bit 1, count_thread = bit 2). */
static char control_file[] = "/tmp/cubpf-live-control-XXXXXX";

static int write_control(const char *text)
{
	FILE *f = fopen(control_file, "w");
	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	usleep(150 * 1000); /* the shim looks at the file at most every 100 ms */
	return 0;
}

static int child_control(void)
{
	void *mod = NULL, *f = NULL;
	static const struct { const char *text; uint32_t want; } steps[] = {
		{ "", ~0u },                          /* empty: all on */
		{ "off\n", 0 },                       /* all off */
		{ "off\non count_exit\n", 0x2 },      /* only the exit probe */
		{ "# comment\noff count_entry\n", ~0u & ~0x1u },
		{ "on\n", ~0u },
	};
	if (open_both() || load(&mod, enable_ptx) != 0)
		return 1;
	uint32_t *words = (uint32_t *)(uintptr_t)global(mod, "__cubpf_enable");
	if (!words || ((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0)
		return child_fail("no enable words or function");
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (write_control(steps[i].text) != 0)
			return child_fail("cannot write %s", control_file);
		if (((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
								NULL) != 0)
			return child_fail("launch");
		if (words[1] != steps[i].want)
			return child_fail("step %zu: enable word %x, want %x", i, words[1],
					  steps[i].want);
	}
	return 0;
}

static void test_control_file_switches_programs(void **state)
{
	(void)state;
	int fd = mkstemp(control_file);
	assert_true(fd >= 0);
	close(fd);
	struct child_env env = { { "CUBPF_CONTROL" }, { control_file } };
	assert_int_equal(run_child(&env, child_control), 0);
	assert_non_null(strstr(child_err, "live: CUBPF_CONTROL: GPU programs now all off"));
	assert_non_null(strstr(child_err, "live: CUBPF_CONTROL: GPU programs now partly on (mask 0x2)"));
	unlink(control_file);
}

/* A library loaded with no current context: the PTX is substituted, and the pointers are
 * stored at the first launch in a context. */
static int child_library_lazy(void)
{
	void *lib = NULL, *kern = NULL;
	if (open_both())
		return 1;
	set_ctx(NULL);
	if (((libload_fn)dlsym(shim, "cuLibraryLoadData"))(&lib, live_ptx, NULL, NULL, 0, NULL,
							   NULL, 0) != 0)
		return child_fail("cuLibraryLoadData failed");
	if (instrumented(lib, ".version"))
		return 1;
	if (global(lib, "__cubpf_map_0") != 0)
		return child_fail("pointer stored before any context existed");
	set_ctx((void *)0xC7C000);
	if (((getkernel_fn)dlsym(shim, "cuLibraryGetKernel"))(&kern, lib, "live_k") != 0)
		return child_fail("cuLibraryGetKernel failed");
	if (((launch_fn)dlsym(shim, "cuLaunchKernel"))(kern, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
							NULL) != 0)
		return child_fail("launch failed");
	if (global(lib, "__cubpf_map_0") == 0)
		return child_fail("pointer not stored at the first launch");
	return 0;
}

static void test_library_without_context_is_filled_at_launch(void **state)
{
	(void)state;
	assert_int_equal(run_child(NULL, child_library_lazy), 0);
	assert_non_null(strstr(child_err, "of 1 kernels (live_k; 1 entry, 1 exit, 0 memory sites), "
				       "PTX of"));
}

/* The JIT refuses the instrumented code: the original module is loaded, one warning. */
static int child_jit_error(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, jit_error_ptx) != 0)
		return child_fail("load failed");
	return original(mod, jit_error_ptx);
}

static void test_jit_error_falls_back(void **state)
{
	(void)state;
	assert_int_equal(run_child(NULL, child_jit_error), 0);
	assert_non_null(strstr(child_err, "live_bad not instrumented, the original module runs: the "
				       "driver's JIT refused the instrumented PTX "
				       "(CUDA_ERROR_INVALID_PTX): ptxas fatal"));
	assert_non_null(strstr(child_err, "0 modules instrumented (0 kernels), 1 fell back"));
}

/* The driver refuses the substituted image at load: the original is loaded in its place. */
static int child_refused(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return child_fail("the application saw the failure");
	return original(mod, live_ptx);
}

static void test_refused_substitute_loads_the_original(void **state)
{
	(void)state;
	struct child_env env = { { "FAKE_REFUSE_CUBIN" }, { "1" } };
	assert_int_equal(run_child(&env, child_refused), 0);
	assert_non_null(strstr(child_err, "not instrumented, the original module runs: "
				       "CUDA_ERROR_INVALID_IMAGE"));
	assert_non_null(strstr(child_err, "load cuModuleLoadData PTX"));
}

static int child_untouched(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	return original(mod, live_ptx);
}

static void test_unmatched_kernels_stay_untouched(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_KERNELS" }, { "nothing_matches*" } };
	assert_int_equal(run_child(&env, child_untouched), 0);
	assert_non_null(strstr(child_err, "1 with no matching kernel"));
	assert_null(strstr(child_err, "fell back to the original, 1"));
}

static void test_map_over_the_cap_is_refused(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_MAP_MAX_MB" }, { "1" } };
	assert_int_equal(run_child(&env, child_untouched), 0);
	/* an object whose maps alone exceed the cap is refused when it loads */
	assert_non_null(strstr(child_err, "count.bpf.o: probe object refused, the application runs "
				       "without it: its maps need more than the device memory cap of "
				       "1048576 bytes (CUBPF_MAP_MAX_MB"));
}

/* A program the verifier rejects is skipped with the reason; the others run. */
static int child_rejected(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	return instrumented(mod, "FAKECUBIN");
}

static void test_rejected_program_is_skipped_with_the_reason(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_PROGRAMS" }, { bad_probe } };
	assert_int_equal(run_child(&env, child_rejected), 0);
	assert_non_null(strstr(child_err, "live: bad.bpf.o: program unchecked rejected by the "
				       "verifier, skipped: "));
	assert_null(strstr(child_err, "program checked rejected"));
	assert_non_null(strstr(child_err, "instrumented 1 of 1 kernels (live_k; 0 entry, 1 exit"));
}

/* A damaged probe object (a .BTF array that is its own element: issue 14, class 8) next to a good
 * one: the damaged one is refused with one warning, the good one instruments the module. */
static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_damaged_object_is_refused_others_run(void **state)
{
	(void)state;
	char list[8192];
	snprintf(list, sizeof(list), "tests/fuzz/corpus/fuzz_vm_object/btf_array_self.elf:%s",
		 probe_path);
	struct child_env env = { { "CUBPF_PROGRAMS" }, { list } };
	assert_int_equal(run_child(&env, child_rejected), 0);
	assert_int_equal(count(child_err, "probe object refused, the application runs without it"),
			 1);
	assert_non_null(strstr(child_err, "btf_array_self.elf: probe object refused, the "
				       "application runs without it: map 'kstats': member"));
	assert_non_null(strstr(child_err, "live: 1 probe objects"));
}

/* An object whose maps can never fit the device memory cap (here count.bpf.o's 8 MiB under a
 * cap of 4 MiB; on the GPU a damaged object asked for petabytes) is refused alone: before, it
 * made every module load fall back, the other objects' probes with it. */
static void test_object_over_the_map_cap_is_refused_alone(void **state)
{
	(void)state;
	char list[8192];
	snprintf(list, sizeof(list), "%s:%s/live-probes/micro_empty.bpf.o", probe_path,
		 LIVE_TEST_BUILD);
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_MAP_MAX_MB" }, { list, "4" } };
	assert_int_equal(run_child(&env, child_untouched), 0); /* micro_empty probes no live_k */
	assert_int_equal(count(child_err, "probe object refused"), 1);
	assert_non_null(strstr(child_err, "count.bpf.o: probe object refused, the application runs "
				       "without it: its maps need more than the device memory cap of "
				       "4194304 bytes (CUBPF_MAP_MAX_MB); the largest is per_thread (array, "
				       "1048576 entries x 8 B = 8388608 bytes)"));
	assert_non_null(strstr(child_err, "live: 1 probe objects"));
}

/* The checker crashes or hangs (as a loader or verifier bug would make it): the application
 * goes on unprobed, with one warning; the original module is loaded. */
static void test_checker_crash_leaves_the_application_unprobed(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_VERIFY_TEST_FAULT" }, { "crash" } };
	assert_int_equal(run_child(&env, child_untouched), 0);
	assert_int_equal(count(child_err, "probe object refused"), 1);
	assert_non_null(strstr(child_err, "crashed cubpf's checker (signal 11)"));
	assert_null(strstr(child_err, "live: 1 probe objects"));
}

static void test_checker_hang_is_cut_short(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_VERIFY_TEST_FAULT", "CUBPF_VERIFY_TIMEOUT_MS" },
				 { "hang", "300" } };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(run_child(&env, child_untouched), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(count(child_err, "probe object refused"), 1);
	assert_non_null(strstr(child_err, "took longer than 300 ms (killed"));
	assert_true(t1.tv_sec - t0.tv_sec < 10);
}

/* In-process verification (CUBPF_VERIFY_FORK=0) gives the same verdicts. */
static void test_in_process_verification_gives_the_same_verdicts(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_VERIFY_FORK" }, { bad_probe, "0" } };
	assert_int_equal(run_child(&env, child_rejected), 0);
	assert_non_null(strstr(child_err, "live: bad.bpf.o: program unchecked rejected by the "
				       "verifier, skipped: "));
	assert_null(strstr(child_err, "program checked rejected"));
}

static void test_disabled_substitutes_nothing(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_DISABLE" }, { "1" } };
	assert_int_equal(run_child(&env, child_untouched), 0);
	assert_null(strstr(child_err, "live:"));
}

/* A cubin has no PTX: its kernels are listed as not instrumentable. */
static int child_cubin(void)
{
	FILE *f = fopen(cubin_path, "rb");
	static char buf[1 << 20];
	void *mod = NULL;
	if (!f)
		return child_fail("no fixture %s", cubin_path);
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (!n || open_both() || load(&mod, buf) != 0)
		return 1;
	return 0;
}

static void test_cubin_kernels_are_listed_as_not_instrumentable(void **state)
{
	(void)state;
	assert_int_equal(run_child(NULL, child_cubin), 0);
	assert_non_null(strstr(child_err, "not instrumentable: no PTX for sm_90 in the image"));
	assert_non_null(strstr(child_err, "1 without PTX for the device"));
}

/* File loads (cuModuleLoad): the shim reads the file, and an instrumented image goes to the
 * driver as data; a file with nothing to instrument is loaded from its path as before. */
static char ptx_file[] = "/tmp/cubpf-live-file-XXXXXX";

static int child_file(void)
{
	void *mod = NULL;
	int (*load_file)(void **, const char *) =
		(int (*)(void **, const char *))dlsym(shim, "cuModuleLoad");
	unsigned (*hits)(const char *) = (unsigned (*)(const char *))dlsym(fake, "fake_hits");
	if (!load_file || !hits || load_file(&mod, ptx_file) != 0)
		return child_fail("cuModuleLoad failed");
	const char *glob = getenv("CUBPF_KERNELS");
	if (glob) /* nothing matches: the original file, through cuModuleLoad */
		return original(mod, live_ptx) || hits("cuModuleLoad") != 1;
	/* (cuModuleLoadData is also how cubpf loads its own clock kernel: not counted here) */
	if (instrumented(mod, "FAKECUBIN") || hits("cuModuleLoad") != 0)
		return child_fail("the instrumented image did not replace the file");
	return global(mod, "__cubpf_map_0") ? 0 : child_fail("map pointer not stored");
}

static int child_file_open(void)
{
	return open_both() || child_file();
}

static void test_file_loads_are_instrumented(void **state)
{
	(void)state;
	int fd = mkstemp(ptx_file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, live_ptx, strlen(live_ptx)), (ssize_t)strlen(live_ptx));
	close(fd);
	struct child_env files = { { "FAKE_FILE_LOADS" }, { "1" } };
	assert_int_equal(run_child(&files, child_file_open), 0);
	assert_non_null(strstr(child_err, "live: cuModuleLoad: instrumented 1 of 1 kernels"));
	struct child_env env = { { "FAKE_FILE_LOADS", "CUBPF_KERNELS" }, { "1", "no_such_kernel*" } };
	assert_int_equal(run_child(&env, child_file_open), 0);
	assert_null(strstr(child_err, "instrumented 1 of 1"));
	unlink(ptx_file);
}

/* Registers and block sizes: a kernel keeping 57 loaded values live uses 64 registers (any block
 * up to 1024 threads); memtrace's probe before each load raises that past 64, so the shim limits
 * it to 64 and compiles again.  The fake's JIT is the real ptxas here (FAKE_PTXAS). */
static char heavy_text[16384];

static void make_heavy(void)
{
	size_t n = (size_t)snprintf(heavy_text, sizeof(heavy_text),
				    ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible "
				    ".entry heavy(\n\t.param .u64 heavy_p\n)\n{\n\t.reg .f32 "
				    "%%f<59>;\n\t.reg .b64 %%rd<3>;\n\tld.param.u64 %%rd1, "
				    "[heavy_p];\n\tcvta.to.global.u64 %%rd2, %%rd1;\n");
	for (int i = 0; i < 14; i++)
		n += (size_t)snprintf(heavy_text + n, sizeof(heavy_text) - n,
				      "\tld.global.v4.f32 {%%f%d, %%f%d, %%f%d, %%f%d}, [%%rd2+%d];\n",
				      4 * i + 1, 4 * i + 2, 4 * i + 3, 4 * i + 4, 16 * i);
	n += (size_t)snprintf(heavy_text + n, sizeof(heavy_text) - n,
			      "\tld.global.f32 %%f57, [%%rd2+224];\n\tmov.f32 %%f58, 0f00000000;\n");
	for (int i = 1; i <= 57; i++)
		n += (size_t)snprintf(heavy_text + n, sizeof(heavy_text) - n,
				      "\tfma.rn.f32 %%f58, %%f58, %%f%d, %%f%d;\n", i, 58 - i);
	snprintf(heavy_text + n, sizeof(heavy_text) - n,
		 "\tst.global.f32 [%%rd2], %%f58;\n\tret;\n}\n");
}

static int child_heavy(void)
{
	void *mod = NULL;
	return open_both() || load(&mod, heavy_text) != 0;
}

static void test_instrumented_kernels_keep_their_block_size(void **state)
{
	(void)state;
	const char *ptxas = getenv("PTXAS");
	if (!ptxas)
		fail_msg("PTXAS is not set (run through make test)");
	char memtrace[4200];
	snprintf(memtrace, sizeof(memtrace), "%s/probes/memtrace.bpf.o", LIVE_TEST_BUILD);
	make_heavy();
	struct child_env env = { { "CUBPF_PROGRAMS", "FAKE_PTXAS", "CUBPF_CACHE" },
				 { memtrace, ptxas, "off" } };
	assert_int_equal(run_child(&env, child_heavy), 0);
	if (!strstr(child_err, "live: heavy: the instrumented code needs "))
		print_message("%s\n", child_err);
	assert_non_null(strstr(child_err, "live: heavy: the instrumented code needs "));
	assert_non_null(strstr(child_err, "(the original 64): limited to 64 so that blocks of 1024 "
					  "threads still launch"));
	assert_non_null(strstr(child_err, "live: cuModuleLoadData: instrumented 1 of 1 kernels"));
}

/* While the application runs, the maps go into the trace every CUBPF_INTERVAL_MS. */
static int child_periodic(void)
{
	if (child_module())
		return 1;
	usleep(600 * 1000);
	return 0;
}

static void test_maps_are_traced_while_running(void **state)
{
	(void)state;
	unlink(trace_path);
	struct child_env env = { { "CUBPF_TRACE", "CUBPF_INTERVAL_MS" }, { trace_path, "50" } };
	assert_int_equal(run_child(&env, child_periodic), 0);
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	int maps = 0;
	while (store_trace_next(r, &rec) == 1)
		if (rec.type == STORE_REC_MAP) {
			struct store_rec_map m;
			size_t rest;
			assert_non_null(store_rec_fixed(&rec, &m, sizeof(m), &rest));
			const char *name = store_trace_string(r, m.name);
			maps += name && !strcmp(name, "entries") && m.count == 1;
		}
	int complete = store_trace_state(r) == STORE_TRACE_COMPLETE;
	/* closed before asserting: a failure must not leave a leak for the next tests' children
	 * (forked from this process) to report */
	store_trace_close_reader(r);
	unlink(trace_path);
	/* 600 ms at 50 ms: several periodic copies (a loaded machine may delay some), and the one
	 * at exit */
	assert_true(maps >= 3);
	assert_true(complete);
}

/* ---- CUBPF_METRICS: the process's own endpoint (shim/live/metrics.c) ------------------------ */

/* The body of GET PATH on 127.0.0.1:port (HTTP/1.0, read to the end), or NULL. */
static char *http_get(int port, const char *path)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char req[256], *buf = NULL;
	size_t n = 0, cap = 0;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	int len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	if (write(fd, req, (size_t)len) != len) {
		close(fd);
		return NULL;
	}
	for (;;) {
		if (n + 4096 + 1 > cap && !(buf = realloc(buf, cap = 2 * cap + 8192)))
			break;
		ssize_t r = read(fd, buf + n, 4096);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (buf)
		buf[n] = '\0';
	return buf;
}

/* A TCP port of 127.0.0.1 bound and listening (kept: "in use"), or free (closed) when !keep. */
static int tcp_port(int keep, int *fd_out)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	if (keep)
		*fd_out = fd;
	else
		close(fd);
	return ntohs(a.sin_port);
}

static int metrics_port;

static int expect_in(const char *body, const char *want)
{
	return strstr(body, want) ? 0 : child_fail("'%s' not in the scrape:\n%s", want, body);
}

/* The "kernel" counts; a scrape sees them, then sees them grow (a copy published again while
 * scrapes come); a path that is not /metrics is 404; the kernel never waited for the server. */
static int child_metrics(void)
{
	char want[256];
	if (child_module())
		return 1;
	void *mod = NULL;
	if (load(&mod, live_ptx) != 0)
		return child_fail("second load");
	uint64_t *entries = (uint64_t *)(uintptr_t)global(mod, "__cubpf_map_0");
	char *body = http_get(metrics_port, "/metrics");
	if (!body)
		return child_fail("no answer on port %d", metrics_port);
	snprintf(want, sizeof(want), "cubpf_map_value{pid=\"%d\",map=\"entries\",device=\"0\","
		 "key=\"1\",word=\"0\"} 7\n", (int)getpid());
	int rc = expect_in(body, "HTTP/1.1 200 OK\r\n") || expect_in(body, want);
	snprintf(want, sizeof(want), "cubpf_kernel_info{pid=\"%d\",id=\"1\",kernel=\"live_k\","
		 "name=\"live_k\"} 1\n", (int)getpid());
	rc = rc || expect_in(body, want) || expect_in(body, "# TYPE cubpf_map_value gauge\n") ||
	     expect_in(body, "outcome=\"instrumented\"} 2\n");
	free(body);
	entries[1] = 9; /* the kernel runs again */
	for (int i = 0; !rc && i < 100; i++, usleep(20 * 1000)) {
		body = http_get(metrics_port, "/metrics");
		snprintf(want, sizeof(want), "key=\"1\",word=\"0\"} 9\n");
		int seen = body && strstr(body, want);
		free(body);
		if (seen)
			break;
		if (i == 99)
			rc = child_fail("the new count never showed");
	}
	body = http_get(metrics_port, "/other");
	rc = rc || !body || expect_in(body, "HTTP/1.1 404 Not Found\r\n");
	free(body);
	return rc;
}

static void test_metrics_endpoint_in_the_process(void **state)
{
	(void)state;
	char spec[64], interval[] = "50";
	metrics_port = tcp_port(0, NULL);
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", metrics_port);
	struct child_env env = { { "CUBPF_METRICS", "CUBPF_INTERVAL_MS" }, { spec, interval } };
	assert_int_equal(run_child(&env, child_metrics), 0);
	char said[128];
	snprintf(said, sizeof(said), "live: metrics at http://127.0.0.1:%d/metrics", metrics_port);
	assert_non_null(strstr(child_err, said));
	/* the endpoint is gone with the process */
	assert_null(http_get(metrics_port, "/metrics"));
}

/* Nobody scrapes: without a trace the maps are not even read back; a port in use is one
 * warning and the application runs on, probed (its report at exit) but without the endpoint. */
static void test_metrics_port_in_use_warns_once(void **state)
{
	(void)state;
	int fd;
	char spec[64];
	metrics_port = tcp_port(1, &fd);
	snprintf(spec, sizeof(spec), "%d", metrics_port);
	struct child_env env = { { "CUBPF_METRICS", "CUBPF_DUMP_MAPS" }, { spec, "1" } };
	assert_int_equal(run_child(&env, child_module), 0);
	close(fd);
	const char *w = strstr(child_err, "CUBPF_METRICS=");
	assert_non_null(w);
	assert_null(strstr(w + 1, "CUBPF_METRICS="));
	assert_non_null(strstr(w, "Address already in use; the program runs without the metrics "
				  "endpoint"));
	assert_non_null(strstr(child_err, "cubpf: map entries[1] = 7 (device 0)"));
	assert_null(strstr(child_err, "metrics at http"));
}

/* LeakSanitizer's check at exit takes every lock of ASan's allocator, and the libasan of gcc 12
 * does not take them around fork(): in a child forked while one of the shim's threads was in
 * malloc (the snapshot thread, a trace worker) the check waits forever.  That is the sanitizer's
 * limit, not the shim's (glibc's malloc is fork-safe), so the check is off in that child only.
 * LeakSanitizer asks this weak hook once, at exit (exported: libasan looks it up). */
static volatile int leak_check_off;
__attribute__((visibility("default"))) int __lsan_is_turned_off(void);
__attribute__((visibility("default"))) int __lsan_is_turned_off(void)
{
	return leak_check_off;
}

/* A fork()ed child neither reads its parent's maps nor writes the parent's trace. */
static int child_fork(void)
{
	if (child_module())
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		void *mod = NULL;
		leak_check_off = 1;
		if (getenv("CHILD_LOADS") && load(&mod, live_ptx) != 0)
			exit(3);
		exit(0); /* runs the shim's exit handler in the child */
	}
	int status;
	waitpid(pid, &status, 0);
	return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

static void test_fork_child_stays_quiet(void **state)
{
	(void)state;
	unlink(trace_path);
	struct child_env env = { { "CUBPF_TRACE", "CUBPF_INTERVAL_MS" }, { trace_path, "50" } };
	assert_int_equal(run_child(&env, child_fork), 0);
	/* one report (the parent's), one summary, and a complete trace */
	const char *first = strstr(child_err, "cubpf: map entries[1] = 7");
	assert_non_null(first);
	assert_null(strstr(first + 1, "cubpf: map entries[1] = 7"));
	first = strstr(child_err, "summary: ");
	assert_non_null(first);
	assert_null(strstr(first + 1, "summary: "));
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	while (store_trace_next(r, &rec) == 1)
		;
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	store_trace_close_reader(r);
	unlink(trace_path);
	/* a child that loads a module of its own says so at its exit: two summaries */
	struct child_env loads = { { "CHILD_LOADS" }, { "1" } };
	assert_int_equal(run_child(&loads, child_fork), 0);
	first = strstr(child_err, "summary: ");
	assert_non_null(first);
	assert_non_null(strstr(first + 1, "summary: "));
}

/* A child forked before any context, which then uses CUDA: a process of its own.  The parent
 * writes no trace, so that it has no thread when it forks: gcc 12's libasan does not keep its
 * allocator's locks across fork(), and a child forked while a trace worker was in malloc would
 * wait forever in its own first malloc (seen once in 15 runs under load).  The child names its
 * trace before its first driver call. */
static int child_fork_fresh(void)
{
	if (open_both())
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		leak_check_off = 1;
		setenv("CUBPF_TRACE", trace_path, 1);
		exit(child_module());
	}
	int status;
	waitpid(pid, &status, 0);
	return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* The pid in a complete trace's header, or 0. */
static uint32_t trace_pid(const char *path)
{
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	struct store_trace_record rec;
	uint32_t pid = 0;
	if (!r)
		return 0;
	while (store_trace_next(r, &rec) == 1)
		;
	if (store_trace_state(r) == STORE_TRACE_COMPLETE && store_trace_header(r))
		pid = store_trace_header(r)->pid;
	store_trace_close_reader(r);
	return pid;
}

/* A trace is one process's: a second process given the same CUBPF_TRACE (a worker of the same
 * job, or a later run) writes TRACE.PID beside it and leaves the first one whole. */
static void test_a_trace_is_written_by_one_process(void **state)
{
	(void)state;
	char other[64];
	unlink(trace_path);
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	assert_int_equal(run_child(&env, child_module), 0);
	uint32_t first = trace_pid(trace_path);
	assert_true(first != 0);
	assert_int_equal(run_child(&env, child_module), 0);
	const char *said = strstr(child_err, "is another process's: this one writes ");
	assert_non_null(said);
	assert_int_equal(sscanf(said, "is another process's: this one writes %63s", other), 1);
	assert_int_equal(trace_pid(trace_path), first);
	uint32_t second = trace_pid(other);
	assert_true(second != 0 && second != first);
	unlink(other);
	unlink(trace_path);
}

/* A child forked before its parent made a context, that then loads and runs a module: it is a
 * process of its own (its maps reported once, its own trace); the parent, which made no
 * context, reports no maps. */
static void test_fork_child_of_a_fresh_parent_is_probed(void **state)
{
	(void)state;
	char want[sizeof(trace_path) + 64];
	unlink(trace_path);
	assert_int_equal(run_child(NULL, child_fork_fresh), 0);
	snprintf(want, sizeof(want), "makes driver calls: probes on, trace %s\n", trace_path);
	assert_non_null(strstr(child_err, want));
	const char *first = strstr(child_err, "cubpf: map entries[1] = 7");
	assert_non_null(first);
	assert_null(strstr(first + 1, "cubpf: map entries[1] = 7"));
	assert_true(trace_pid(trace_path) != 0);
	assert_true(trace_records(trace_path, STORE_REC_MAP) > 0); /* the child's maps */
	unlink(trace_path);
}

/* The maps at exit go into the trace, readable with store/'s reader. */
static void test_maps_are_written_to_the_trace(void **state)
{
	(void)state;
	unlink(trace_path);
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	assert_int_equal(run_child(&env, child_module), 0);
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	int found = 0, programs = 0, devices = 0, kids = 0, mems = 0;
	uint32_t ctx = 0;
	while (store_trace_next(r, &rec) == 1) {
		programs += rec.type == STORE_REC_PROGRAM;
		devices += rec.type == STORE_REC_DEVICE;
		if (rec.type == STORE_REC_KERNEL_ID) { /* format 1.2: the id without the log */
			struct store_rec_kernel_id k;
			assert_non_null(store_rec_fixed(&rec, &k, sizeof(k), NULL));
			assert_int_equal(k.id, 1);
			assert_string_equal(store_trace_string(r, k.name), "live_k");
			assert_non_null(strstr(child_err, "live: kernel id 1 = live_k"));
			kids++;
		}
		if (rec.type == STORE_REC_MAP_MEMORY) { /* the log's "maps on device" line */
			struct store_rec_map_memory g;
			char line[256];
			assert_non_null(store_rec_fixed(&rec, &g, sizeof(g), NULL));
			snprintf(line, sizeof(line), "live: maps on device %u (context %p): %llu device "
				 "bytes, %llu pinned bytes, %u maps", g.device, (void *)(uintptr_t)g.context,
				 (unsigned long long)g.device_bytes, (unsigned long long)g.pinned_bytes,
				 g.nmaps);
			assert_non_null(strstr(child_err, line));
			assert_true(g.device_bytes > 0);
			ctx = g.ctx;
			assert_int_equal(ctx, 1);
			mems++;
		}
		if (rec.type != STORE_REC_MAP)
			continue;
		struct store_rec_map m;
		size_t rest;
		const uint8_t *kv = store_rec_fixed(&rec, &m, sizeof(m), &rest);
		assert_non_null(kv);
		assert_int_equal(m.ctx, ctx); /* after its MAP_MEMORY, numbered alike */
		const char *name = store_trace_string(r, m.name);
		if (name && !strcmp(name, "entries")) {
			uint32_t key;
			uint64_t value;
			assert_int_equal(m.count, 1);
			assert_int_equal(rest, 12);
			memcpy(&key, kv, 4);
			memcpy(&value, kv + 4, 8);
			assert_int_equal(key, 1);
			assert_int_equal(value, 7);
			found++;
		}
	}
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	assert_int_equal(programs, 1);
	assert_int_equal(devices, 1);
	assert_int_equal(found, 1);
	assert_int_equal(kids, 1);
	assert_int_equal(mems, 1);
	store_trace_close_reader(r);
	unlink(trace_path);
}

/* Format 1.2: every "not instrumented" line of the log is also a NOT_INSTRUMENTED record with
 * its reason and the same message. */
static void expect_noinst(uint32_t reason, uint32_t kernels, const char *in_message)
{
	char err[STORE_ERRLEN], msg[1100] = "", api[64] = "";
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	struct store_rec_not_instrumented ni = {0};
	int n = 0;
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type != STORE_REC_NOT_INSTRUMENTED)
			continue;
		size_t rest;
		const uint8_t *p = store_rec_fixed(&rec, &ni, sizeof(ni), &rest);
		char *m = p ? store_rec_string(&p, &rest) : NULL;
		const char *a = store_trace_string(r, ni.api);
		snprintf(msg, sizeof(msg), "%s", m ? m : "(none)");
		snprintf(api, sizeof(api), "%s", a ? a : "(none)");
		free(m);
		n++;
	}
	enum store_trace_state st = store_trace_state(r);
	store_trace_close_reader(r); /* before asserting: a failure leaves nothing open */
	unlink(trace_path);
	assert_int_equal(n, 1);
	assert_int_equal(st, STORE_TRACE_COMPLETE);
	if (!strstr(msg, in_message))
		fail_msg("record message: %s", msg);
	char line[1200];
	snprintf(line, sizeof(line), "cubpf: %s\n", msg);
	if (!strstr(child_err, line))
		fail_msg("not in the log as written: %s", line);
	assert_int_equal(ni.reason, reason);
	assert_int_equal(ni.kernels, kernels);
	assert_int_equal(ni.sm, 90);
	assert_string_equal(api, "cuModuleLoadData");
}

static void test_not_instrumented_is_in_the_trace(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	unlink(trace_path);
	assert_int_equal(run_child(&env, child_jit_error), 0);
	expect_noinst(STORE_NOINST_JIT, 0, "live_bad not instrumented, the original module runs: "
			"the driver's JIT refused the instrumented PTX (CUDA_ERROR_INVALID_PTX)");
	assert_int_equal(run_child(&env, child_cubin), 0);
	expect_noinst(STORE_NOINST_NO_PTX, 2, "2 kernels not instrumentable: no PTX for sm_90 in "
			"the image (1 cubins, SASS only)");
	struct child_env refuse = { { "CUBPF_TRACE", "FAKE_REFUSE_CUBIN" }, { trace_path, "1" } };
	assert_int_equal(run_child(&refuse, child_refused), 0);
	expect_noinst(STORE_NOINST_REFUSED, 0, "not instrumented, the original module runs: "
			"CUDA_ERROR_INVALID_IMAGE");
}

/* ---- kernel spans (shim/live/spans.c) -------------------------------------------------------------
 * The fake's events hold the host clock of their record (completing fake_event_delay ns later):
 * every launch must get a KSPAN with its KERNEL's corr, name and stream, near its launch time;
 * _ptsz launches on stream 0 record on CU_STREAM_PER_THREAD (2), never on the legacy stream. */

#define SPAN_LAUNCHES 40
static uint64_t span_delay_ns;
static int span_launches = SPAN_LAUNCHES;

static int child_spans(void)
{
	void *mod = NULL, *f = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	((void (*)(uint64_t))dlsym(fake, "fake_event_delay"))(span_delay_ns);
	if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0)
		return child_fail("cuModuleGetFunction");
	void *(*last_stream)(void) = (void *(*)(void))dlsym(fake, "fake_event_last_stream");
	unsigned (*nrec)(void) = (unsigned (*)(void))dlsym(fake, "fake_events_recorded");
	for (int i = 0; i < span_launches; i++) {
		unsigned before = nrec();
		const char *api = i % 2 ? "cuLaunchKernel_ptsz" : "cuLaunchKernel";
		void *s = i % 2 ? NULL : (void *)0x5500;
		if (((launch_fn)dlsym(shim, api))(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) != 0)
			return child_fail("launch");
		void *want = i % 2 ? (void *)2 : s;
		if (nrec() != before && last_stream() != want) /* none when the pool is empty */
			return child_fail("launch %d: event recorded on %p, want %p", i, last_stream(), want);
	}
	if (getenv("CUBPF_SPANS") && nrec() != 0)
		return child_fail("CUBPF_SPANS=0, yet %u events recorded", nrec());
	return 0;
}

struct span_count {
	unsigned kernels, spans, apis, dropped, matched, ptsz;
};

static void read_spans(struct span_count *n)
{
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	static struct store_rec_kernel kernels[8192];
	memset(n, 0, sizeof(*n));
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type == STORE_REC_KERNEL) {
			struct store_rec_kernel k;
			assert_non_null(store_rec_fixed(&rec, &k, sizeof(k), NULL));
			assert_int_equal(k.corr, n->kernels + 1); /* launches numbered from 1 */
			kernels[n->kernels++ % 8192] = k;
		} else if (rec.type == STORE_REC_API) {
			struct store_rec_api a;
			assert_non_null(store_rec_fixed(&rec, &a, sizeof(a), NULL));
			const char *name = store_trace_string(r, a.name);
			if (name && !strncmp(name, "cuLaunchKernel", 14)) {
				n->apis++;
				assert_int_equal(a.corr, n->apis);
			}
		} else if (rec.type == STORE_REC_KSPAN) {
			struct store_rec_kspan sp;
			assert_non_null(store_rec_fixed(&rec, &sp, sizeof(sp), NULL));
			n->spans++;
			assert_true(sp.corr >= 1 && sp.corr <= n->kernels); /* after its KERNEL here */
			const struct store_rec_kernel *k = &kernels[(sp.corr - 1) % 8192];
			assert_int_equal(sp.name, k->name);
			assert_int_equal(sp.stream, k->stream);
			assert_string_equal(store_trace_string(r, sp.name), "live_k");
			assert_true(sp.end_ns >= sp.begin_ns);
			/* the fake's events are host clock reads (+ delay): near the launch */
			assert_true(sp.begin_ns + 2000000 > k->launch_ns);
			assert_true(sp.begin_ns < k->launch_ns + span_delay_ns + 50000000);
			n->matched++;
			n->ptsz += sp.stream == 2;
		} else if (rec.type == STORE_REC_DROP) {
			struct store_rec_drop d;
			assert_non_null(store_rec_fixed(&rec, &d, sizeof(d), NULL));
			if (d.source == STORE_DROP_SPANS)
				n->dropped += (unsigned)d.records;
		}
	}
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	store_trace_close_reader(r);
}

static void test_kernel_spans_are_traced(void **state)
{
	(void)state;
	struct span_count n;
	unlink(trace_path);
	span_delay_ns = 0;
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	assert_int_equal(run_child(&env, child_spans), 0);
	read_spans(&n);
	assert_int_equal(n.kernels, SPAN_LAUNCHES);
	assert_int_equal(n.apis, SPAN_LAUNCHES);
	assert_int_equal(n.spans, SPAN_LAUNCHES);
	assert_int_equal(n.ptsz, SPAN_LAUNCHES / 2);
	assert_int_equal(n.dropped, 0);
	assert_non_null(strstr(child_err, "kernel spans of context"));
	assert_non_null(strstr(child_err, "40 written (0 begun before the program's own event), "
				"0 dropped"));

	/* Kernels still "running" at exit (events complete 50 ms after their record): collected
	 * at exit, waiting for them. */
	span_delay_ns = 50000000;
	assert_int_equal(run_child(&env, child_spans), 0);
	read_spans(&n);
	assert_int_equal(n.spans, SPAN_LAUNCHES);
	unlink(trace_path);
}

/* Before a context goes (here the runtime's exit path, a primary context reset) its spans are
 * collected, waiting for them, and every event of the pool is destroyed. */
static int child_spans_teardown(void)
{
	if (child_spans())
		return 1;
	if (((int (*)(int))dlsym(shim, "cuDevicePrimaryCtxReset_v2"))(0) != 0)
		return child_fail("cuDevicePrimaryCtxReset_v2");
	unsigned live_events = ((unsigned (*)(void))dlsym(fake, "fake_events_live"))();
	return live_events ? child_fail("%u events left after the teardown", live_events) : 0;
}

static void test_kernel_spans_are_collected_at_teardown(void **state)
{
	(void)state;
	struct span_count n;
	unlink(trace_path);
	span_delay_ns = 20000000;
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	assert_int_equal(run_child(&env, child_spans_teardown), 0);
	read_spans(&n);
	assert_int_equal(n.spans, SPAN_LAUNCHES);
	assert_non_null(strstr(child_err, "40 written (0 begun before the program's own event), "
				"0 dropped"));
	unlink(trace_path);
}

/* ---- the driver calls a launch costs the application's thread (issue 31) --------------------
 * A launch-bound program (a training loop) waits on its own thread, so every driver call cubpf
 * makes there per launch is paid by every step.  In steady state (the libraries' map pointers
 * stored, the spans' events made) a launch through cubpf calls the driver for the launch, one
 * cuCtxGetCurrent and, with spans, one cuStreamIsCapturing and two cuEventRecord: nothing more.
 * Before: a cuCtxGetCurrent in each of the library fill and the spans' parts, and a
 * cuCtxGetDevice for the KERNEL record, every launch.  Launches alternate between two libraries
 * and a module, as a training step's do between the runtime's fatbins.  Counted on the fake's
 * per-thread counters: cubpf's own threads (the spans' poller) are not the application's. */
#define BUDGET_LAUNCHES 150 /* below the spans' 256 premade event pairs: none made meanwhile */

static int budget_handles(void **h)
{
	void *lib[2] = { NULL, NULL }, *mod = NULL;
	for (int i = 0; i < 2; i++)
		if (((libload_fn)dlsym(shim, "cuLibraryLoadData"))(&lib[i], live_ptx, NULL, NULL, 0,
								   NULL, NULL, 0) != 0 ||
		    ((getkernel_fn)dlsym(shim, "cuLibraryGetKernel"))(&h[i], lib[i], "live_k") != 0)
			return child_fail("library %d", i);
	if (load(&mod, live_ptx) != 0 ||
	    ((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&h[2], mod, "live_k") != 0)
		return child_fail("module");
	return 0;
}

static int child_launch_budget(void)
{
	void *h[3];
	if (open_both() || budget_handles(h))
		return 1;
	launch_fn launch = (launch_fn)dlsym(shim, "cuLaunchKernel");
	unsigned (*total)(void) = (unsigned (*)(void))dlsym(fake, "fake_thread_total");
	unsigned (*hits)(const char *) = (unsigned (*)(const char *))dlsym(fake, "fake_thread_hits");
	if (!total || !hits)
		return child_fail("no fake_thread_total or fake_thread_hits");
	static const char *const fns[] = { "cuCtxGetCurrent", "cuCtxGetDevice",
					   "cuStreamIsCapturing", "cuEventRecord", NULL };
	unsigned before[4], all = 0;
	for (int i = 0; i < BUDGET_LAUNCHES + 6; i++) {
		if (i == 6) { /* warm: the first launches store pointers, make the span pool */
			all = total();
			for (int k = 0; fns[k]; k++)
				before[k] = hits(fns[k]);
		}
		if (launch(h[i % 3], 1, 1, 1, 32, 1, 1, 0, (void *)0x5500, NULL, NULL) != 0)
			return child_fail("launch %d", i);
	}
	fprintf(stderr, "test: %d launches: %u driver calls;", BUDGET_LAUNCHES, total() - all);
	for (int k = 0; fns[k]; k++)
		fprintf(stderr, " %s %u", fns[k], hits(fns[k]) - before[k]);
	fprintf(stderr, "\n");
	return 0;
}

/* A count in child_launch_budget's line: fn's, or every call's (fn NULL). */
static unsigned budget_count(const char *fn)
{
	char head[64], want[80];
	unsigned n = ~0u;
	snprintf(head, sizeof(head), "test: %d launches:", BUDGET_LAUNCHES);
	const char *line = strstr(child_err, head), *at = line && fn ? strstr(line, fn) : line;
	assert_non_null(at);
	if (fn)
		snprintf(want, sizeof(want), "%s %%u", fn);
	else
		snprintf(want, sizeof(want), "%s %%u driver calls", head);
	assert_int_equal(sscanf(at, want, &n), 1);
	return n;
}

static void test_launch_driver_call_budget(void **state)
{
	(void)state;
	const char *spans[] = { "1", "0" };
	for (int i = 0; i < 2; i++) {
		unlink(trace_path);
		struct child_env env = { { "CUBPF_TRACE", "CUBPF_SPANS", "CUBPF_INTERVAL_MS" },
					 { trace_path, spans[i], "100000" } };
		assert_int_equal(run_child(&env, child_launch_budget), 0);
		unsigned per = i == 0 ? 5 : 2; /* the launch, the context (, capture, two events) */
		assert_int_equal(budget_count(NULL), per * BUDGET_LAUNCHES);
		assert_int_equal(budget_count("cuCtxGetCurrent"), BUDGET_LAUNCHES);
		assert_int_equal(budget_count("cuCtxGetDevice"), 0);
		assert_int_equal(budget_count("cuStreamIsCapturing"), i == 0 ? BUDGET_LAUNCHES : 0);
		assert_int_equal(budget_count("cuEventRecord"), i == 0 ? 2 * BUDGET_LAUNCHES : 0);
		assert_int_equal(trace_records(trace_path, STORE_REC_KERNEL), BUDGET_LAUNCHES + 6);
		unlink(trace_path);
	}
}

/* A programmatic dependent launch (cuLaunchKernelEx with PROGRAMMATIC_STREAM_SERIALIZATION): an
 * event between it and its predecessor would stop them overlapping, so its stream gets no more
 * events; other streams keep theirs.  (Layouts of CUlaunchConfig / CUlaunchAttribute.) */
struct fake_attr {
	int id;
	char pad[4];
	union {
		char bytes[64];
		int allowed;
	} value;
};
struct fake_config {
	unsigned grid[3], block[3], shared;
	void *stream;
	struct fake_attr *attrs;
	unsigned nattrs;
};

static int child_spans_pdl(void)
{
	void *mod = NULL, *f = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0)
		return child_fail("cuModuleGetFunction");
	struct fake_attr a = { .id = 6 /* PROGRAMMATIC_STREAM_SERIALIZATION */, .value.allowed = 1 };
	struct fake_config c = { { 1, 1, 1 }, { 32, 1, 1 }, 0, (void *)0x5500, &a, 1 };
	void *(*last_stream)(void) = (void *(*)(void))dlsym(fake, "fake_event_last_stream");
	((int (*)(const void *, void *, void **, void **))dlsym(shim, "cuLaunchKernelEx"))(&c, f, NULL,
											    NULL);
	if (last_stream() == (void *)0x5500) /* cubpf's own reference events only */
		return child_fail("an event was recorded around a programmatic launch");
	for (int i = 0; i < 20; i++) {
		const char *api = i % 2 ? "cuLaunchKernel_ptsz" : "cuLaunchKernel";
		void *s = i % 2 ? NULL : (void *)0x5500;
		if (((launch_fn)dlsym(shim, api))(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) != 0)
			return child_fail("launch");
	}
	return 0;
}

static void test_kernel_spans_skip_programmatic_streams(void **state)
{
	(void)state;
	unlink(trace_path);
	span_delay_ns = 0;
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	assert_int_equal(run_child(&env, child_spans_pdl), 0);
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	unsigned spans = 0, per_thread = 0;
	while (store_trace_next(r, &rec) == 1)
		if (rec.type == STORE_REC_KSPAN) {
			struct store_rec_kspan sp;
			assert_non_null(store_rec_fixed(&rec, &sp, sizeof(sp), NULL));
			spans++;
			per_thread += sp.stream == 2;
		}
	store_trace_close_reader(r);
	assert_int_equal(spans, 10);
	assert_int_equal(per_thread, 10);
	assert_non_null(strstr(child_err, "and 11 on streams with programmatic launches skipped"));
	unlink(trace_path);
}

/* A span begins before the program's own start event when the program records one just before
 * the launch, on the same stream, from the same thread; otherwise (an event made with
 * CU_EVENT_DISABLE_TIMING, a copy in between, another stream) at the launch.  The program's next
 * event on that stream (its stop event) gets no begin event before it.  The fake logs every
 * record on the program's streams in order: cubpf's events are those the child did not make. */
typedef int (*record_fn)(void *, void *);

struct logged {
	void *event; /* NULL: one of cubpf's */
	void *stream;
};

static int expect_log(const char *what, const struct logged *want, unsigned n, void *const *mine,
		      unsigned nmine)
{
	typedef void *(*logged_fn)(unsigned, void **);
	logged_fn logged = (logged_fn)dlsym(fake, "fake_event_logged");
	unsigned count = ((unsigned (*)(void))dlsym(fake, "fake_event_log_count"))();
	if (count != n)
		return child_fail("%s: %u records on the program's streams, expected %u", what, count, n);
	for (unsigned i = 0; i < n; i++) {
		void *stream, *e = logged(i, &stream);
		bool is_mine = false;
		for (unsigned k = 0; k < nmine; k++)
			is_mine |= e == mine[k];
		if (stream != want[i].stream || (want[i].event ? e != want[i].event : is_mine))
			return child_fail("%s: record %u is %s event %p on %p, expected %s on %p", what, i,
					  is_mine ? "the program's" : "cubpf's", e, stream,
					  want[i].event ? "the program's" : "cubpf's", want[i].stream);
	}
	((void (*)(void))dlsym(fake, "fake_event_log_reset"))();
	return 0;
}

static int child_spans_early(void)
{
	void *mod = NULL, *f = NULL, *timed = NULL, *stop = NULL, *untimed = NULL;
	void *const s = (void *)0x5500, *const other = (void *)0x6600, *const per_thread = (void *)2;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	if (((getkernel_fn)dlsym(shim, "cuModuleGetFunction"))(&f, mod, "live_k") != 0)
		return child_fail("cuModuleGetFunction");
	int (*create)(void **, unsigned) = (int (*)(void **, unsigned))dlsym(shim, "cuEventCreate");
	if (create(&timed, 0) != 0 || create(&stop, 0) != 0 ||
	    create(&untimed, 2 /* DISABLE_TIMING */) != 0)
		return child_fail("cuEventCreate");
	void *const mine[] = { timed, stop, untimed };
	record_fn rec = (record_fn)dlsym(shim, "cuEventRecord");
	record_fn rec_ptsz = (record_fn)dlsym(shim, "cuEventRecord_ptsz");
	launch_fn launch = (launch_fn)dlsym(shim, "cuLaunchKernel");
	launch_fn launch_ptsz = (launch_fn)dlsym(shim, "cuLaunchKernel_ptsz");
	char buf[64] = { 0 };
	((void (*)(void))dlsym(fake, "fake_event_log_reset"))();

	rec(timed, s); /* timed launches: cubpf's begin goes before the program's event */
	launch(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
	launch(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
	rec(stop, s);  /* the program's stop event: no begin before it */
	const struct logged early[] = { { NULL, s }, { timed, s }, { NULL, s },
					{ NULL, s }, { NULL, s }, { stop, s } };
	if (expect_log("a timed pair of launches", early, 6, mine, 3))
		return 1;
	rec_ptsz(timed, NULL); /* the same on the per-thread default stream */
	launch_ptsz(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	const struct logged ptsz[] = { { NULL, per_thread }, { timed, per_thread },
				       { NULL, per_thread } };
	if (expect_log("a timed per-thread launch", ptsz, 3, mine, 3))
		return 1;
	rec(untimed, s); /* an ordering event: the span begins at the launch */
	launch(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
	const struct logged at_launch[] = { { untimed, s }, { NULL, s }, { NULL, s } };
	if (expect_log("an untimed event", at_launch, 3, mine, 3))
		return 1;
	rec(timed, s); /* a copy in between: disarmed */
	((int (*)(uint64_t, const void *, size_t))dlsym(shim, "cuMemcpyHtoD_v2"))(1, buf, sizeof(buf));
	launch(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
	const struct logged copied[] = { { NULL, s }, { timed, s }, { NULL, s }, { NULL, s } };
	if (expect_log("a copy in between", copied, 4, mine, 3))
		return 1;
	rec(timed, s); /* a launch on another stream */
	launch(f, 1, 1, 1, 32, 1, 1, 0, other, NULL, NULL);
	const struct logged elsewhere[] = { { NULL, s }, { timed, s }, { NULL, other },
					    { NULL, other } };
	if (expect_log("another stream", elsewhere, 4, mine, 3))
		return 1;
	((int (*)(void *))dlsym(shim, "cuEventDestroy_v2"))(untimed);
	return 0;
}

static void test_kernel_spans_begin_before_the_programs_event(void **state)
{
	(void)state;
	unlink(trace_path);
	span_delay_ns = 0;
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	assert_int_equal(run_child(&env, child_spans_early), 0);
	struct span_count n;
	read_spans(&n);
	assert_int_equal(n.kernels, 6);
	assert_int_equal(n.spans, 6);
	assert_non_null(strstr(child_err, "6 written (2 begun before the program's own event), "
				"0 dropped"));
	unlink(trace_path);
}

static void test_kernel_spans_can_be_switched_off(void **state)
{
	(void)state;
	struct span_count n;
	unlink(trace_path);
	span_delay_ns = 0;
	struct child_env env = { { "CUBPF_TRACE", "CUBPF_SPANS" }, { trace_path, "0" } };
	assert_int_equal(run_child(&env, child_spans), 0);
	read_spans(&n);
	assert_int_equal(n.kernels, SPAN_LAUNCHES);
	assert_int_equal(n.spans, 0);
	assert_null(strstr(child_err, "kernel spans of context"));
	unlink(trace_path);
}

/* The pool is bounded (4096 pairs per context): when the GPU falls behind, launches go without
 * a span, counted in DROP records, and the application never waits. */
static void test_kernel_span_pool_is_bounded(void **state)
{
	(void)state;
	struct span_count n;
	unlink(trace_path);
	span_delay_ns = 400000000; /* nothing completes while the 4200 launches are made */
	span_launches = 4200;
	struct child_env env = { { "CUBPF_TRACE" }, { trace_path } };
	assert_int_equal(run_child(&env, child_spans), 0);
	span_launches = SPAN_LAUNCHES;
	read_spans(&n);
	assert_int_equal(n.kernels, 4200);
	assert_int_equal(n.spans + n.dropped, 4200);
	assert_true(n.spans >= 4096);
	assert_non_null(strstr(child_err, "dropped (event pool full)"));
	unlink(trace_path);
}

/* ---- the module cache ------------------------------------------------------------------------ */

static char cache_db[256], dump_a[256], dump_b[256];

/* The child's stderr holds s (shown when it does not). */
#define want(s) _want(s, 1, __LINE__)
#define want_not(s) _want(s, 0, __LINE__)
static void _want(const char *s, int present, int line)
{
	if ((strstr(child_err, s) != NULL) == present)
		return;
	printf("line %d: %s \"%s\" in the child's stderr:\n%s\n", line,
	       present ? "no" : "unexpected", s, child_err);
	fail();
}

/* Loads live_ptx like child_module, then writes what the driver got to $LIVE_TEST_DUMP and the
 * number of cuLink compilations of modules to the child's stderr: those of cubpf's clock kernel
 * (once per process, clock.c) are not the module's. */
static int dump_module(void *mod)
{
	const char *path = getenv("LIVE_TEST_DUMP");
	const char *t = module_text(mod);
	unsigned (*hits)(const char *) = (unsigned (*)(const char *))dlsym(fake, "fake_hits");
	const char *(*inputs)(void) = (const char *(*)(void))dlsym(fake, "fake_link_inputs");
	if (!t || !hits || !inputs)
		return child_fail("no module text, fake_hits or fake_link_inputs");
	unsigned clock = (unsigned)count_of(inputs(), ".entry cubpf_clock");
	if (clock > 1)
		return child_fail("the clock kernel was compiled %u times", clock);
	fprintf(stderr, "test: cuLinkCreate calls %u\n", hits("cuLinkCreate_v2") - clock);
	if (path) {
		FILE *f = fopen(path, "w");
		if (!f || fputs(t, f) < 0 || fclose(f))
			return child_fail("writing %s", path);
	}
	return 0;
}

static int child_cache_load(void)
{
	void *mod = NULL;
	if (child_module())
		return 1;
	if (load(&mod, live_ptx) != 0) /* loaded again: the same kernel ids, the same entry */
		return child_fail("second load");
	return dump_module(mod);
}

static const char other_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n\n"
	".visible .entry live_other(\n\t.param .u64 live_other_param_0\n)\n{\n\tret;\n}\n";

/* live_other first: live_k gets kernel id 2, not 1. */
static int child_cache_other_first(void)
{
	void *a = NULL, *b = NULL;
	if (open_both() || load(&a, other_ptx) != 0 || load(&b, live_ptx) != 0)
		return child_fail("loads");
	if (instrumented(a, "FAKECUBIN") || instrumented(b, "FAKECUBIN"))
		return 1;
	return dump_module(b);
}

static char *slurp_text(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[3][1 << 16];
	static int which;
	char *out = buf[which++ % 3];
	size_t n = f ? fread(out, 1, sizeof(buf[0]) - 1, f) : 0;
	if (f)
		fclose(f);
	out[n] = 0;
	return out;
}

static int run_cached(int (*fn)(void), const char *dump, const char *n2, const char *v2)
{
	struct child_env env = { { "CUBPF_CACHE", "LIVE_TEST_DUMP", "CUBPF_DUMP_MAPS", n2 },
				 { cache_db, dump, "1", v2 } };
	return run_child(&env, fn);
}

static void cache_setup(void)
{
	snprintf(cache_db, sizeof(cache_db), "/tmp/cubpf-live-cache-%d/sub/cache.db", (int)getpid());
	snprintf(dump_a, sizeof(dump_a), "/tmp/cubpf-live-cache-%d.a", (int)getpid());
	snprintf(dump_b, sizeof(dump_b), "/tmp/cubpf-live-cache-%d.b", (int)getpid());
	remove_db(cache_db);
	unlink(dump_a);
	unlink(dump_b);
}

static void cache_teardown(void)
{
	char dir[300];
	remove_db(cache_db);
	unlink(dump_a);
	unlink(dump_b);
	snprintf(dir, sizeof(dir), "/tmp/cubpf-live-cache-%d/sub", (int)getpid());
	rmdir(dir);
	snprintf(dir, sizeof(dir), "/tmp/cubpf-live-cache-%d", (int)getpid());
	rmdir(dir);
}

/* First process: a miss and a JIT compile at the first load, the entry put; the second load of
 * the module comes with another kernel id base (another key) and finds that entry through the
 * key without the base (its ids are claimed: a hit, no JIT).  Second process (the same
 * history): a hit per load, no cuLink call at all, the very same bytes substituted, the kernel
 * ids and the map pointers as the first run had them. */
static void test_cache_second_process_hits(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_cached(child_cache_load, dump_a, NULL, NULL), 0);
	want("live: cache miss for live_k (rewrite ");
	want("test: cuLinkCreate calls 1\n");
	want("cache: 1 hits, 1 misses, 1 JIT compiles");
	want("live: 2 modules instrumented (2 kernels), 0 fell back");

	assert_int_equal(run_cached(child_cache_load, dump_b, NULL, NULL), 0);
	want_not("cache miss");
	want("live: cache hit for live_k (1 kernel, cubin ");
	want("test: cuLinkCreate calls 0\n");
	want("cache: 2 hits, 0 misses, 0 JIT compiles");
	want("live: kernel id 1 = live_k");
	want("cubpf: map entries[1] = 7 (device 0)"); /* the pointers were stored */
	want("live: 2 modules instrumented (2 kernels), 0 fell back");
	char *a = slurp_text(dump_a), *b = slurp_text(dump_b);
	assert_true(strncmp(a, "FAKECUBIN\n", 10) == 0 && strstr(a, "__cubpf_map_0"));
	assert_string_equal(a, b);
	cache_teardown();
}

/* Kernel ids are baked in: the id base is part of the key, and an entry whose manifest does not
 * match the ids this process would give (live_k made as id 1 by a process that loaded live_k
 * twice, asked for as id 2 after live_other) is a miss, made again. */
static void test_cache_kernel_id_base(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_cached(child_cache_load, dump_a, NULL, NULL), 0);
	assert_int_equal(run_cached(child_cache_other_first, dump_b, NULL, NULL), 0);
	want("cache miss for live_other");
	want("cache miss for live_k");
	want("live: kernel id 2 = live_k");
	want("cache: 0 hits, 2 misses, 2 JIT compiles");
	assert_string_not_equal(slurp_text(dump_a), slurp_text(dump_b));
	assert_int_equal(run_cached(child_cache_other_first, dump_a, NULL, NULL), 0);
	want("cache hit for live_other");
	want("cache hit for live_k");
	want("test: cuLinkCreate calls 0\n");
	want("live: kernel id 2 = live_k");
	want("live: kernel id 1 = live_other");
	assert_string_equal(slurp_text(dump_a), slurp_text(dump_b));
	cache_teardown();
}

/* Another probe object, kernel glob or driver version: another key, a miss. */
static void test_cache_key_inputs_miss(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_cached(child_cache_load, dump_a, NULL, NULL), 0);
	assert_int_equal(run_cached(child_cache_load, dump_b, "CUBPF_KERNELS", "live_*"), 0);
	want("cache miss for live_k");
	want("test: cuLinkCreate calls 1\n"); /* (the second load: the first's entry) */
	assert_int_equal(run_cached(child_cache_load, dump_b, "CUBPF_PROGRAMS", host_probes), 0);
	want("cache miss for live_k");
	assert_int_equal(run_cached(child_cache_load, dump_b, "FAKE_DRIVER_VERSION", "13010"), 0);
	want("cache miss for live_k");
	/* sampling compiles the enable-word check in: other code, another key */
	assert_int_equal(run_cached(child_cache_load, dump_b, "CUBPF_SAMPLE", "3"), 0);
	want("cache miss for live_k");
	/* and each of them hits in turn */
	assert_int_equal(run_cached(child_cache_load, dump_b, "CUBPF_KERNELS", "live_*"), 0);
	want("cache: 2 hits, 0 misses, 0 JIT compiles");
	cache_teardown();
}

/* A damaged cubpf database (its header intact): one warning, moved aside, a new one made; the
 * module is instrumented as if there were no cache.  A file whose header is gone is no longer
 * recognisably cubpf's: left as it is, one warning, the process runs without a cache; so does
 * a process with an unusable path. */
static void test_cache_damaged_or_unusable(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_cached(child_cache_load, dump_a, NULL, NULL), 0);
	FILE *f = fopen(cache_db, "r+");
	assert_non_null(f);
	char junk[4096];
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(fseek(f, 100, SEEK_SET), 0); /* the schema's page, past the header */
	assert_int_equal(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	fclose(f);
	remove_db(strcat(strcpy((char[300]){ 0 }, cache_db), "-nothing")); /* keep -wal: none */
	assert_int_equal(run_cached(child_cache_load, dump_b, NULL, NULL), 0);
	want("is damaged");
	want("moved it to ");
	want("cache miss for live_k");
	want("cache: 1 hits, 1 misses, 1 JIT compiles");
	assert_string_equal(slurp_text(dump_a), slurp_text(dump_b));
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -f %s.broken-*", cache_db);
	assert_int_equal(system(cmd), 0);

	assert_non_null(f = fopen(cache_db, "r+"));
	assert_int_equal(fwrite(junk, 1, sizeof(junk), f), sizeof(junk)); /* the header too */
	fclose(f);
	assert_int_equal(run_cached(child_cache_load, dump_b, NULL, NULL), 0);
	want("is not a cubpf cache");
	want("left untouched");
	want("running without the cache");
	want("cache: 0 hits, 0 misses, 2 JIT compiles (cache off)");
	snprintf(cmd, sizeof(cmd), "ls %s.broken-* 2>/dev/null", cache_db);
	assert_int_not_equal(system(cmd), 0); /* nothing moved */
	assert_int_equal(memcmp(slurp_text(cache_db), junk, 64), 0);

	struct child_env bad = { { "CUBPF_CACHE" }, { "/proc/self/no/cache.db" } };
	assert_int_equal(run_child(&bad, child_cache_load), 0);
	const char *w = strstr(child_err, "running without the cache");
	assert_non_null(w);
	assert_null(strstr(w + 1, "running without the cache")); /* one warning */
	want("live: 2 modules instrumented (2 kernels), 0 fell back");
	want("cache: 0 hits, 0 misses, 2 JIT compiles (cache off)");
	cache_teardown();
}

static void test_cache_off(void **state)
{
	(void)state;
	struct child_env off = { { "CUBPF_CACHE" }, { "off" } };
	assert_int_equal(run_child(&off, child_cache_load), 0);
	want("live: module cache off (CUBPF_CACHE=off)");
	want_not("cache hit");
	want_not("cache miss");
	want("cache: 0 hits, 0 misses, 2 JIT compiles (cache off)");
}

/* A cached cubin the driver refuses: the original runs, the entry is dropped (the next process
 * makes it again). */
static int child_cache_refused(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return child_fail("the application saw the failure");
	return original(mod, live_ptx);
}

static void test_cache_refused_entry_is_dropped(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_cached(child_cache_load, dump_a, NULL, NULL), 0);
	assert_int_equal(run_cached(child_cache_refused, dump_b, "FAKE_REFUSE_CUBIN", "1"), 0);
	want("cache hit for live_k");
	want("not instrumented, the original module runs: "
				       "CUDA_ERROR_INVALID_IMAGE");
	assert_int_equal(run_cached(child_cache_load, dump_b, NULL, NULL), 0);
	want("cache miss for live_k");
	assert_string_equal(slurp_text(dump_a), slurp_text(dump_b));
	cache_teardown();
}

/* A library loaded in a context (what the CUDA runtime does): the hit substitutes the cached cubin
 * and the pointers are stored at load, as after a JIT. */
static int child_cache_library(void)
{
	void *lib = NULL;
	if (open_both())
		return 1;
	if (((libload_fn)dlsym(shim, "cuLibraryLoadData"))(&lib, live_ptx, NULL, NULL, 0, NULL,
							   NULL, 0) != 0)
		return child_fail("cuLibraryLoadData failed");
	if (instrumented(lib, "FAKECUBIN"))
		return 1;
	uint64_t *entries = (uint64_t *)(uintptr_t)global(lib, "__cubpf_map_0");
	if (!entries)
		return child_fail("pointer not stored at load");
	entries[1] = 3;
	return dump_module(lib);
}

static void test_cache_library_hit(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_cached(child_cache_library, dump_a, NULL, NULL), 0);
	want("live: cache miss for live_k");
	assert_int_equal(run_cached(child_cache_library, dump_b, NULL, NULL), 0);
	want("live: cache hit for live_k (1 kernel, cubin ");
	want("test: cuLinkCreate calls 0\n");
	want("cubpf: map entries[1] = 3 (device 0)");
	assert_string_equal(slurp_text(dump_a), slurp_text(dump_b));
	cache_teardown();
}

/* A module with nothing to instrument is remembered too: the next process skips the rewrite. */
static void test_cache_remembers_untouched_modules(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_cached(child_untouched, dump_a, "CUBPF_KERNELS", "nothing_matches*"), 0);
	want("1 with no matching kernel");
	want("cache: 0 hits, 1 misses, 0 JIT compiles");
	assert_int_equal(run_cached(child_untouched, dump_a, "CUBPF_KERNELS", "nothing_matches*"), 0);
	want("cache hit for module (no kernel to instrument");
	want("1 with no matching kernel");
	want("cache: 1 hits, 0 misses, 0 JIT compiles");
	cache_teardown();
}

/* Per-SM, per-thread and hash maps (kinds.bpf.o): allocated in their ptx-rewriter/layout.h
 * layouts, bound, the per-thread header filled; the "kernel" writes synthetic contents that the
 * exit report reads back (per-SM copies summed, with the spread; per-thread copies by thread; hash
 * slots as key/value pairs), and the trace carries them.  No enable-word check without sampling. */
static int child_kinds(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	const char *t = module_text(mod);
	if (!t || strstr(t, "__cubpf_enable"))
		return child_fail("enable words compiled in without sampling");
	uint8_t *sm = (uint8_t *)(uintptr_t)global(mod, "__cubpf_map_0");
	uint8_t *th = (uint8_t *)(uintptr_t)global(mod, "__cubpf_map_1");
	uint8_t *h = (uint8_t *)(uintptr_t)global(mod, "__cubpf_map_2");
	if (!sm || !th || !h)
		return child_fail("map pointers not stored: %p %p %p", sm, th, h);
	uint64_t v, threads;
	memcpy(&threads, th, 8);
	if (threads != 16)
		return child_fail("per-thread header: %llu threads, want 16",
				  (unsigned long long)threads);
	const uint32_t slots[3] = { 0, 3, 131 };
	for (int i = 0; i < 3; i++) { /* key 1 on SMs 0, 3, 131: 5, 6, 7 */
		v = 5 + (uint64_t)i;
		memcpy(sm + CUBPF_PERCPU_OFFSET(1, slots[i], 8), &v, 8);
	}
	v = 9; /* key 1, thread 3 */
	memcpy(th + CUBPF_PERTHREAD_OFFSET(1, 3, 16, 8), &v, 8);
	uint32_t full = CUBPF_HASH_FULL;
	uint64_t key = 42;
	uint8_t *slot = h + 2 * CUBPF_HASH_SLOT_BYTES(8, 8);
	v = 5;
	memcpy(slot, &full, 4);
	memcpy(slot + 8, &key, 8);
	memcpy(slot + 16, &v, 8);
	return 0;
}

static void test_per_sm_per_thread_and_hash_maps(void **state)
{
	(void)state;
	unlink(trace_path);
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_PERTHREAD_THREADS", "CUBPF_DUMP_MAPS",
				   "CUBPF_TRACE" },
				 { kinds_probe, "16", "1", trace_path } };
	assert_int_equal(run_child(&env, child_kinds), 0);
	/* 4 x 256 x 8 + (64 + 2 x 16 x 8) + 8 x 24 */
	assert_non_null(strstr(child_err, "maps on device 0"));
	assert_non_null(strstr(child_err, ": 8704 device bytes"));
	assert_non_null(strstr(child_err, "cubpf: map per_sm: percpu_array, key 4 B, value 8 B, "
					  "4 entries x 256 SM slots, 1 non-zero (3 SMs), sum 18"));
	assert_non_null(strstr(child_err, "cubpf: map per_sm[1] = 18 (device 0; 3 SMs, per SM "
					  "5..7)"));
	assert_non_null(strstr(child_err, "cubpf: map per_thread: perthread_array, key 4 B, value "
					  "8 B, 2 entries x 16 threads, 1 non-zero copies, sum 9"));
	assert_non_null(strstr(child_err, "cubpf: map per_thread[1] thread [3] = 9 (device 0)"));
	assert_non_null(strstr(child_err, "cubpf: map by_key: hash, key 8 B, value 8 B, 8 entries "
					  "(8 slots), 1 in use, sum 5"));
	assert_non_null(strstr(child_err, "cubpf: map by_key[42] = 5 (device 0)"));
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	int seen = 0;
	while (store_trace_next(r, &rec) == 1) {
		struct store_rec_map m;
		size_t rest;
		const uint8_t *kv;
		if (rec.type != STORE_REC_MAP || !(kv = store_rec_fixed(&rec, &m, sizeof(m), &rest)))
			continue;
		const char *name = store_trace_string(r, m.name);
		uint32_t k[2];
		uint64_t v;
		if (!strcmp(name, "per_sm")) { /* key, then 256 copies */
			assert_int_equal(m.key_size, 4);
			assert_int_equal(m.value_size, 256 * 8);
			assert_int_equal(m.count, 1);
			memcpy(&v, kv + 4 + 131 * 8, 8);
			assert_int_equal(v, 7);
			seen |= 1;
		} else if (!strcmp(name, "per_thread")) { /* {key, thread}, the copy */
			assert_int_equal(m.key_size, 8);
			assert_int_equal(m.count, 1);
			memcpy(k, kv, 8);
			memcpy(&v, kv + 8, 8);
			assert_int_equal(k[0], 1);
			assert_int_equal(k[1], 3);
			assert_int_equal(v, 9);
			seen |= 2;
		} else if (!strcmp(name, "by_key")) {
			assert_int_equal(m.key_size, 8);
			assert_int_equal(m.count, 1);
			memcpy(&v, kv, 8);
			assert_int_equal(v, 42);
			memcpy(&v, kv + 8, 8);
			assert_int_equal(v, 5);
			seen |= 4;
		}
	}
	assert_int_equal(seen, 7);
	store_trace_close_reader(r);
	unlink(trace_path);
}

/* Maps over the cap: the refusal names the largest map and how its size comes about. */
static void test_per_sm_map_over_the_cap_names_it(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_PERTHREAD_THREADS", "CUBPF_MAP_MAX_MB" },
				 { kinds_probe, "1048576", "8" } };
	assert_int_equal(run_child(&env, child_untouched), 0);
	assert_non_null(strstr(child_err, "the largest is per_thread (perthread_array, 2 entries x "
					  "1048576 threads (CUBPF_PERTHREAD_THREADS) x 8 B = 16777280 "
					  "bytes)"));
}

/* Sampling compiles the enable-word check in: the module declares __cubpf_enable and the
 * context's words are stored there. */
static int child_sample_enable(void)
{
	void *mod = NULL;
	if (open_both() || load(&mod, live_ptx) != 0)
		return 1;
	const char *t = module_text(mod);
	if (!t || !strstr(t, ".u64 __cubpf_enable;"))
		return child_fail("no enable-word check in the instrumented module");
	uint32_t *words = (uint32_t *)(uintptr_t)global(mod, "__cubpf_enable");
	if (!words || words[1] != ~0u)
		return child_fail("enable words not stored");
	return 0;
}

static void test_sampling_compiles_the_enable_check_in(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_SAMPLE" }, { "2" } };
	assert_int_equal(run_child(&env, child_sample_enable), 0);
}

/* ---- PTX kept in cubins (the PTX source step of shim/live/module.c) ------------------------------ */

static char embedded_dir[4096], kcount_probe[4096];

/* Loads the cubin fixture named by $LIVE_EMBEDDED through the shim; writes the JIT options the
 * fake driver was given and whether the module got instrumented code to the child's stderr. */
static int child_embedded(void)
{
	char path[4200];
	static char buf[1 << 20];
	void *mod = NULL;
	snprintf(path, sizeof(path), "%s/%s", embedded_dir, getenv("LIVE_EMBEDDED"));
	FILE *f = fopen(path, "rb");
	if (!f)
		return child_fail("no fixture %s (built by tests/cubin/module.mk)", path);
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (!n || open_both() || load(&mod, buf) != 0)
		return child_fail("loading %s", path);
	const char *(*jit)(void) = (const char *(*)(void))dlsym(fake, "fake_last_jit_options");
	const char *t = module_text(mod);
	fprintf(stderr, "test: jit options <%s>\ntest: module %s\n", jit ? jit() : "?",
		t && !strncmp(t, "FAKECUBIN", 9) && strstr(t, "__cubpf_map_0") ? "instrumented"
									  : "original");
	if (t)
		fprintf(stderr, "test: float adds: %s\n", strstr(t, "\nadd.f32") ? "plain"
						  : strstr(t, "\nadd.rn.f32") ? "rounded" : "none");
	/* the last text the JIT was given (with FAKE_PTXAS the module holds a real cubin) */
	const char *in = ((const char *(*)(void))dlsym(fake, "fake_link_inputs"))(), *last = NULL;
	unsigned inputs = 0;
	for (const char *p = in; p && (p = strstr(p, ".version")); p++)
		last = p, inputs++;
	/* (cubpf's clock kernel, compiled once per process at the first context, is not the
	 * module's: clock.c) */
	inputs -= in ? (unsigned)count_of(in, ".entry cubpf_clock") : 0;
	fprintf(stderr, "test: jit inputs %u\n", inputs);
	if (last && strstr(last, "__cubpf_map_0"))
		fprintf(stderr, "test: jit input float adds: %s\n", strstr(last, "\nadd.f32") ? "plain"
			: strstr(last, "\nadd.rn.f32") ? "rounded" : "none");
	return 0;
}

/* Under the bundled kcount probe (every kernel); cache: a database shared by runs, or NULL. */
static int run_embedded(const char *fixture_name, const char *cache)
{
	struct child_env env = { { "LIVE_EMBEDDED", "CUBPF_PROGRAMS", cache ? "CUBPF_CACHE" : NULL },
				 { fixture_name, kcount_probe, cache } };
	return run_child(&env, child_embedded);
}

/* nvcc -cubin -lineinfo: the PTX ptxas kept is instrumented and compiled with line info, as
 * ptxas compiled it (CU_JIT_GENERATE_LINE_INFO = 13). */
static void test_embedded_ptx_is_instrumented(void **state)
{
	(void)state;
	assert_int_equal(run_embedded("lineinfo.cubin", NULL), 0);
	want("live: cuModuleLoadData: instrumented 5 of 5 kernels");
	want("test: module instrumented");
	want("test: jit options <13=1 >");
	/* ptxas -O2 -lineinfo: the JIT gets optimisation level 2 too (CU_JIT_OPTIMIZATION_LEVEL 7) */
	assert_int_equal(run_embedded("ptxas_o2.cubin", NULL), 0);
	want("test: module instrumented");
	want("test: jit options <13=1 7=2 >");
}

/* ptxas -O2 -fmad=false: the JIT gets level 2, and the PTX says -fmad false itself (every float
 * add, sub and mul without a rounding modifier gets .rn: nothing to fuse). */
static void test_embedded_ptx_without_fma(void **state)
{
	(void)state;
	assert_int_equal(run_embedded("ptxas_loc.cubin", NULL), 0);
	want("live: cuModuleLoadData: instrumented 5 of 5 kernels");
	want("test: module instrumented");
	want("test: jit options <7=2 >");
	want("test: float adds: rounded");
	/* with fmad on (-lineinfo cubin of the same kernels) the adds stay as they were */
	assert_int_equal(run_embedded("lineinfo.cubin", NULL), 0);
	want("test: float adds: plain");
}

/* CUBPF_JIT_CHECK=1 with a JIT that is ptxas (the fake with FAKE_PTXAS, given the mapped
 * options as ptxas flags): the recovered PTX compiles back to the cubin's own machine code, for
 * -lineinfo, for -O2 and for -fmad=false (.rn in the PTX). */
static void test_embedded_ptx_jit_check(void **state)
{
	(void)state;
	const char *as = getenv("PTXAS");
	if (!as || access(as, X_OK)) {
		printf("SKIP: no ptxas (PTXAS=%s)\n", as ? as : "unset");
		skip();
	}
	static const char *const names[] = {"lineinfo.cubin", "ptxas_o2.cubin", "ptxas_loc.cubin"};
	for (size_t i = 0; i < 3; i++) {
		struct child_env env = { { "LIVE_EMBEDDED", "CUBPF_PROGRAMS", "CUBPF_JIT_CHECK",
					   "FAKE_PTXAS" },
					 { names[i], kcount_probe, "1", as } };
		assert_int_equal(run_child(&env, child_embedded), 0);
		want("live: jit check (ptxas ");
		want("): the same machine code");
	}
}

/* A whole file (malloc'ed), or NULL. */
static uint8_t *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	long len = 0;
	uint8_t *buf = NULL;
	if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)len + 1)) && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	if (f)
		fclose(f);
	*n = (size_t)len;
	return buf;
}

/* A cubin that keeps its PTX but no .note.nv.tkinfo (Triton's bundled ptxas): PTX in which no
 * add takes a product is compiled with ptxas's defaults (-fmad cannot change it: integer code,
 * or float adds alone as in Triton's `x + y`); PTX with multiply-add pairs stays as it is, with
 * the reason. */
static void test_embedded_ptx_without_options(void **state)
{
	(void)state;
	assert_int_equal(run_embedded("notk_int.cubin", NULL), 0);
	want("live: cuModuleLoadData: instrumented 1 of 1 kernels");
	want("test: module instrumented");
	want("test: jit options <>");
	assert_int_equal(run_embedded("notk_fadd.cubin", NULL), 0);
	want("live: cuModuleLoadData: instrumented 1 of 1 kernels");
	want("test: module instrumented");
	want("test: float adds: plain"); /* ptxas's defaults: nothing rounded on purpose */
	/* nvcc's own PTX: its multiply-adds are fma.rn already (NVVM contracts), nothing left to fuse */
	assert_int_equal(run_embedded("notk_float.cubin", NULL), 0);
	want("live: cuModuleLoadData: instrumented 5 of 5 kernels");
	/* a mul.f32 and an add.f32 of its product: -fmad is found by reproducing the cubin's
	 * machine code, which the fake driver's JIT cannot (its cubins are not real): refused */
	assert_int_equal(run_embedded("notk_mul.cubin", NULL), 0);
	want("test: module original");
	want("no .note.nv.tkinfo), and ");
	want("float adds or subs in it take a product that -fmad may have fused with them or not; "
	     "neither -fmad=true nor -fmad=false gives the cubin's machine code");
	/* CUBPF_DUMP_REFUSED: the refused cubin, byte for byte, and its reason */
	char dir[] = "/tmp/cubpf-refused-XXXXXX", pattern[64];
	assert_non_null(mkdtemp(dir));
	struct child_env env = { { "LIVE_EMBEDDED", "CUBPF_PROGRAMS", "CUBPF_DUMP_REFUSED" },
				 { "notk_mul.cubin", kcount_probe, dir } };
	assert_int_equal(run_child(&env, child_embedded), 0);
	want("live: refused cubin written to ");
	glob_t g;
	snprintf(pattern, sizeof(pattern), "%s/refused-*", dir);
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, 2); /* .cubin and .txt */
	size_t a, b;
	char fx[4200];
	snprintf(fx, sizeof(fx), "%s/cubin/notk_mul.cubin", getenv("CUBPF_FIXTURES") ?
		 getenv("CUBPF_FIXTURES") : LIVE_TEST_FIXTURES);
	uint8_t *want_bytes = read_all(fx, &a), *got = read_all(g.gl_pathv[0], &b);
	assert_true(want_bytes && got && a == b && !memcmp(want_bytes, got, a));
	free(want_bytes);
	free(got);
	for (size_t i = 0; i < g.gl_pathc; i++)
		unlink(g.gl_pathv[i]);
	globfree(&g);
	rmdir(dir);
}

/* The same with a JIT that is ptxas (FAKE_PTXAS): the cubin assembled with -fmad=false is
 * reproduced by the PTX with .rn on its float arithmetic, the one assembled with ptxas's
 * default by the PTX as it is; each is instrumented so. */
static void test_embedded_ptx_fmad_reproduced(void **state)
{
	(void)state;
	const char *as = getenv("PTXAS");
	if (!as || access(as, X_OK))
		fail_msg("no ptxas (PTXAS=%s): make test sets it", as ? as : "unset");
	struct child_env env = { { "LIVE_EMBEDDED", "CUBPF_PROGRAMS", "FAKE_PTXAS" },
				 { "notk_mul.cubin", kcount_probe, as } };
	assert_int_equal(run_child(&env, child_embedded), 0);
	want("live: cuModuleLoadData: instrumented 1 of 1 kernels");
	want("test: jit input float adds: rounded");
	env.values[0] = "notk_fused.cubin";
	assert_int_equal(run_child(&env, child_embedded), 0);
	want("live: cuModuleLoadData: instrumented 1 of 1 kernels");
	want("test: jit input float adds: plain");
}

/* A cache hit of a cubin whose -fmad had to be found by reproducing its machine code pays none
 * of it again: the second process compiles nothing (issue 31: a cached Triton cubin loaded
 * several times slower than the original while the verdict ran before the lookup). */
static void test_embedded_ptx_fmad_cache_hit_compiles_nothing(void **state)
{
	(void)state;
	const char *as = getenv("PTXAS");
	if (!as || access(as, X_OK))
		fail_msg("no ptxas (PTXAS=%s): make test sets it", as ? as : "unset");
	cache_setup();
	struct child_env env = { { "LIVE_EMBEDDED", "CUBPF_PROGRAMS", "FAKE_PTXAS", "CUBPF_CACHE" },
				 { "notk_mul.cubin", kcount_probe, as, cache_db } };
	assert_int_equal(run_child(&env, child_embedded), 0);
	want("live: cache miss for ");
	want("test: jit input float adds: rounded");
	want_not("test: jit inputs 0\n");
	assert_int_equal(run_child(&env, child_embedded), 0);
	want("live: cache hit for nofma_k (1 kernel, ");
	want_not("cache miss");
	want("test: jit inputs 0\n");
	cache_teardown();
}

/* A cubin without line info says how to get it. */
static void test_embedded_ptx_refused_with_reasons(void **state)
{
	(void)state;
	assert_int_equal(run_embedded("nvrtc_arch.cubin", NULL), 0);
	want("test: module original");
	want("assembled without line info");
	want("compile with -lineinfo (nvcc, NVRTC)");
	want("TRITON_DISABLE_LINE_INFO");
	want("--xla_gpu_generate_line_info=true");
}

/* nvJitLink of two PTX inputs (with line info): each input's PTX instrumented, linked again with
 * the maps defined once (cubpf's own input) and ptxas's options. */
static void test_embedded_ptx_of_linked_inputs(void **state)
{
	(void)state;
	assert_int_equal(run_embedded("nvjitlink2.cubin", NULL), 0);
	want("live: cuModuleLoadData: instrumented 2 of 2 kernels");
	want("test: module instrumented");
	want("test: jit options <13=1 >");
	want("live: 1 modules instrumented (2 kernels)");
}

/* A second process loading the same cubin hits the cache: no JIT, the same instrumented code. */
static void test_embedded_ptx_cache_hit(void **state)
{
	(void)state;
	cache_setup();
	assert_int_equal(run_embedded("lineinfo.cubin", cache_db), 0);
	want("live: cache miss for ");
	want("test: module instrumented");
	assert_int_equal(run_embedded("lineinfo.cubin", cache_db), 0);
	want("live: cache hit for ");
	want_not("cache miss");
	want("test: module instrumented");
	want("test: jit options <>"); /* no cuLinkCreate in this process */
	cache_teardown();
}

/* ---- PTX given to the driver's linker (shim/live/link.c) ------------------------------------------ */

typedef int (*link_create_fn)(unsigned, int *, void **, void **);
typedef int (*link_add_fn)(void *, int, void *, size_t, const char *, unsigned, int *, void **);
typedef int (*link_complete_fn)(void *, void **, size_t *);

/* cuLinkCreate, cuLinkAddData (PTX, and with $LIVE_LINK_TWO a second PTX input), cuLinkComplete
 * and cuModuleLoadData of the linked cubin, as Numba does; the module's text and its first map
 * pointer go to the child's stderr. */
static int child_link(void)
{
	void *st = NULL, *cubin = NULL, *mod = NULL;
	size_t size = 0;
	if (open_both())
		return 1;
	link_add_fn add = (link_add_fn)dlsym(shim, "cuLinkAddData_v2");
	if (((link_create_fn)dlsym(shim, "cuLinkCreate_v2"))(0, NULL, NULL, &st) != 0 ||
	    add(st, 1 /* CU_JIT_INPUT_PTX */, (void *)live_ptx, sizeof(live_ptx), "a.ptx", 0, NULL,
		NULL) != 0)
		return child_fail("link create/add");
	if (getenv("LIVE_LINK_TWO") &&
	    add(st, 1, (void *)other_ptx, sizeof(other_ptx), "b.ptx", 0, NULL, NULL) != 0)
		return child_fail("second input");
	if (((link_complete_fn)dlsym(shim, "cuLinkComplete"))(st, &cubin, &size) != 0 ||
	    load(&mod, cubin) != 0)
		return child_fail("link complete/load");
	const char *t = module_text(mod);
	fprintf(stderr, "test: linked module %s, map pointer %s\n",
		t && strstr(t, "__cubpf_map_0") ? "instrumented" : "original",
		global(mod, "__cubpf_map_0") ? "stored" : "none");
	/* The definitions of the maps: in cubpf's input only, the others declare them .extern */
	const char *in = ((const char *(*)(void))dlsym(fake, "fake_link_inputs"))();
	unsigned defs = 0, externs = 0;
	for (const char *p = in; (p = strstr(p, ".const .align 8 .u64 __cubpf_map_0;")); p++) {
		defs += p - in >= 9 && !strncmp(p - 9, ".visible ", 9);
		externs += p - in >= 9 && !strncmp(p - 9, ".extern  ", 9);
	}
	fprintf(stderr, "test: __cubpf_map_0 defined %u, extern %u\n", defs, externs);
	return ((int (*)(void *))dlsym(shim, "cuLinkDestroy"))(st) != 0;
}

static void test_link_inputs_are_instrumented(void **state)
{
	(void)state;
	assert_int_equal(run_child(NULL, child_link), 0);
	want("live: cuLinkAddData_v2: instrumented 1 of 1 kernels of a link input (live_k;");
	want("live: cuModuleLoadData: live_k was linked from instrumented PTX");
	want("test: linked module instrumented, map pointer stored");
	want("live: 1 modules instrumented (1 kernels), 0 fell back");
	want("test: __cubpf_map_0 defined 1, extern 1\n");
	/* two inputs, each with a kernel: both instrumented, the maps defined once */
	struct child_env two = { { "LIVE_LINK_TWO" }, { "1" } };
	assert_int_equal(run_child(&two, child_link), 0);
	want("instrumented 1 of 1 kernels of a link input (live_k;");
	want("instrumented 1 of 1 kernels of a link input (live_other;");
	want("test: linked module instrumented, map pointer stored");
	want("test: __cubpf_map_0 defined 1, extern 2\n");
}

/* The linker refuses the instrumented input: the original is added instead, the link and the
 * load succeed, the reason is given. */
static void test_link_refusal_adds_the_original(void **state)
{
	(void)state;
	struct child_env env = { { "FAKE_REFUSE_LINK_PROBES" }, { "1" } };
	assert_int_equal(run_child(&env, child_link), 0);
	want("the linker refused the instrumented PTX (CUDA_ERROR_INVALID_PTX)");
	want("test: linked module original, map pointer none");
	want_not("was linked from instrumented PTX");
	want("test: __cubpf_map_0 defined 1, extern 0\n"); /* cubpf's definitions only */
}

/* ---- -rdc programs: the objects' PTX linked instrumented (shim/live/module.c rdc_source) ---------- */

/* Registers the device-linked image of the -rdc fixture as the CUDA runtime does: a version 2
 * wrapper of its linked fatbin (.nv_fatbin) whose list holds the objects' fatbins
 * (__nv_relfatbin); with $LIVE_RDC_NOLIST the list is missing. */
static int child_rdc(void)
{
	char path[4200], err[256];
	static uint8_t buf[1 << 21];
	const void *list[16] = {0}, *linked = NULL;
	void *mod = NULL;
	struct cubin_image *img;
	snprintf(path, sizeof(path), "%s/rdc_app", embedded_dir);
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0, nl = 0;
	if (f)
		fclose(f);
	if (!n || cubin_image_open(&img, buf, n, 0, err, sizeof(err)))
		return child_fail("reading %s", path);
	for (size_t i = 0; i < img->fatbin_count && nl < 15; i++) {
		if (!strcmp(img->fatbins[i].section, ".nv_fatbin"))
			linked = img->fatbins[i].data;
		else
			list[nl++] = img->fatbins[i].data;
	}
	uint64_t wrapper[3] = { 0x466243B1u | 2ull << 32, (uintptr_t)linked,
				getenv("LIVE_RDC_NOLIST") ? 0 : (uintptr_t)list };
	if (!linked || open_both() || load(&mod, wrapper) != 0)
		return child_fail("loading the -rdc image");
	const char *in = ((const char *(*)(void))dlsym(fake, "fake_link_inputs"))();
	unsigned defs = 0, externs = 0;
	for (const char *p = in; (p = strstr(p, ".const .align 8 .u64 __cubpf_map_0;")); p++) {
		defs += p - in >= 9 && !strncmp(p - 9, ".visible ", 9);
		externs += p - in >= 9 && !strncmp(p - 9, ".extern  ", 9);
	}
	const char *t = module_text(mod);
	fprintf(stderr, "test: %zu objects, module %s, __cubpf_map_0 defined %u, extern %u\n", nl,
		t && !strncmp(t, "FAKECUBIN", 9) ? "substituted" : "original", defs, externs);
	cubin_image_free(img);
	return 0;
}

static void test_rdc_objects_are_linked_instrumented(void **state)
{
	(void)state;
	struct child_env env = { { "CUBPF_PROGRAMS" }, { kcount_probe } };
	assert_int_equal(run_child(&env, child_rdc), 0);
	want("live: cuModuleLoadData: instrumented 7 of 7 kernels");
	want("test: 4 objects, module substituted, __cubpf_map_0 defined 1, extern 3\n");
	struct child_env nolist = { { "CUBPF_PROGRAMS", "LIVE_RDC_NOLIST" }, { kcount_probe, "1" } };
	assert_int_equal(run_child(&nolist, child_rdc), 0);
	want("an -rdc program's linked SASS without its list of objects");
	want("module original");
}

/* The module-load path, measured: one load of a fatbin (SASS and PTX for sm_90) in a fresh
 * process, with the counts of image opens and PTX lexing passes the debug log gives. */
static char fatbin_path[4200];

static int child_fatbin(void)
{
	FILE *f = fopen(fatbin_path, "rb");
	static char buf[1 << 20];
	void *mod = NULL;
	if (!f)
		return child_fail("no fixture %s", fatbin_path);
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (!n || open_both() || load(&mod, buf) != 0 || instrumented(mod, "FAKECUBIN"))
		return 1;
	return 0;
}

/* The counts a child's debug log gives after its one load. */
static void load_path(const char *probe, int (*fn)(void), unsigned long *opens,
		      unsigned long *lexes, unsigned long *parses)
{
	struct child_env env = { { "CUBPF_LOG", "CUBPF_PROGRAMS" }, { "debug", probe } };
	assert_int_equal(run_child(&env, fn), 0);
	assert_non_null(strstr(child_err, "live: cuModuleLoadData: instrumented"));
	const char *line = strstr(child_err, "live: load path: ");
	assert_non_null(line);
	assert_int_equal(sscanf(line, "live: load path: %lu image opens, %lu PTX lexes (%lu rewriter "
				"parses)", opens, lexes, parses), 3);
}

static void test_one_load_opens_and_lexes_once(void **state)
{
	(void)state;
	unsigned long opens, lexes, parses;
	/* A fatbin: opened once (by the core, handed to the hook), its PTX entry lexed once, by the
	 * rewriter's parse (the label comes from it).  Before: 2 opens, 2 passes of 2 lexers. */
	load_path(kcount_probe, child_fatbin, &opens, &lexes, &parses);
	printf("one fatbin load: %lu image opens, %lu PTX lexes (%lu rewriter parses)\n", opens,
	       lexes, parses);
	assert_int_equal(opens, 1);
	assert_int_equal(parses, 1);
	assert_int_equal(lexes, 1);
	/* PTX text: opening it lists its entries (one pass), the rewrite parses it (a second).
	 * Before: 2 opens, 5 passes. */
	load_path(probe_path, child_module, &opens, &lexes, &parses);
	printf("one PTX load: %lu image opens, %lu PTX lexes (%lu rewriter parses)\n", opens,
	       lexes, parses);
	assert_int_equal(opens, 1);
	assert_int_equal(parses, 1);
	assert_int_equal(lexes, 2);
}

/* What start-up leaves out is in the trace, not only in the log (the tools read records only):
 * a probe object refused whole (here a fatbin given as one: reason 9, labelled with its path)
 * and a program the verifier rejected (reason 8, labelled with its name), both written when the
 * trace opens, after the objects loaded. */
static void test_startup_refusals_are_in_the_trace(void **state)
{
	(void)state;
	char progs[8400], err[STORE_ERRLEN];
	snprintf(progs, sizeof(progs), "%s:%s", fatbin_path, bad_probe);
	struct child_env env = { { "CUBPF_PROGRAMS", "CUBPF_TRACE" }, { progs, trace_path } };
	unlink(trace_path);
	assert_int_equal(run_child(&env, child_rejected), 0);
	assert_non_null(strstr(child_err, "probe object refused"));
	struct store_trace_reader *r = store_trace_open(trace_path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	int objects = 0, programs = 0, others = 0;
	while (store_trace_next(r, &rec) == 1) {
		struct store_rec_not_instrumented ni;
		size_t rest;
		const uint8_t *p = rec.type == STORE_REC_NOT_INSTRUMENTED ?
					   store_rec_fixed(&rec, &ni, sizeof(ni), &rest) : NULL;
		if (!p)
			continue;
		char *msg = store_rec_string(&p, &rest);
		const char *label = store_trace_string(r, ni.label);
		if (ni.reason == STORE_NOINST_PROBE_OBJECT && label && !strcmp(label, fatbin_path) &&
		    msg && strstr(msg, "probe object refused, the application runs without it"))
			objects++;
		else if (ni.reason == STORE_NOINST_VERIFIER && label && !strcmp(label, "unchecked") &&
			 msg && strstr(msg, "program unchecked rejected by the verifier"))
			programs++;
		else
			others++;
		free(msg);
	}
	store_trace_close_reader(r);
	unlink(trace_path);
	assert_int_equal(objects, 1);
	assert_int_equal(programs, 1);
	assert_int_equal(others, 0);
}

/* The traces of fork()ed children (TRACE.PID, one per process) are the tests' to remove too. */
static void remove_child_traces(void)
{
	char pattern[80];
	glob_t g;
	snprintf(pattern, sizeof(pattern), "%s.*", trace_path);
	if (glob(pattern, 0, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++)
		unlink(g.gl_pathv[i]);
	globfree(&g);
}

int main(void)
{
	if (getenv("TEST_FILTER")) /* one test, or a glob of them, while chasing a failure */
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const char *build = getenv("CUBPF_BUILD") ? getenv("CUBPF_BUILD") : LIVE_TEST_BUILD;
	snprintf(trace_path, sizeof(trace_path), "/tmp/cubpf-live-test-%d.trace", (int)getpid());
	const char *fix = getenv("CUBPF_FIXTURES") ? getenv("CUBPF_FIXTURES") : LIVE_TEST_FIXTURES;
	snprintf(shim_path, sizeof(shim_path), "%s/lib/libcuda.so.1", build);
	snprintf(fake_path, sizeof(fake_path), "%s/tests/libcuda-fake.so", build);
	snprintf(probe_path, sizeof(probe_path), "%s/live-probes/count.bpf.o", build);
	snprintf(cubin_path, sizeof(cubin_path), "%s/shim/app.cubin", fix);
	snprintf(fatbin_path, sizeof(fatbin_path), "%s/shim/app.fatbin", fix);
	snprintf(embedded_dir, sizeof(embedded_dir), "%s/cubin", fix);
	snprintf(kcount_probe, sizeof(kcount_probe), "%s/probes/kcount.bpf.o", build);
	snprintf(ring_probe, sizeof(ring_probe), "%s/live-probes/ring.bpf.o", build);
	snprintf(bad_probe, sizeof(bad_probe), "%s/live-probes/bad.bpf.o", build);
	snprintf(kinds_probe, sizeof(kinds_probe), "%s/live-probes/kinds.bpf.o", build);
	snprintf(shared_probe, sizeof(shared_probe), "%s/live-probes/shared.bpf.o", build);
	snprintf(host_probes, sizeof(host_probes), "%s:%s/live-probes/host.bpf.o", probe_path, build);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_module_is_instrumented_and_maps_reported),
		cmocka_unit_test(test_maps_are_read_before_context_teardown),
		cmocka_unit_test(test_destroyed_contexts_are_forgotten),
		cmocka_unit_test(test_context_cycle_budget),
		cmocka_unit_test(test_context_cycle_scan_fallbacks),
		cmocka_unit_test(test_launch_driver_call_budget),
		cmocka_unit_test(test_library_without_context_is_filled_at_launch),
		cmocka_unit_test(test_host_probes_run_on_driver_calls),
		cmocka_unit_test(test_host_and_gpu_programs_share_a_map),
		cmocka_unit_test(test_sampling_flips_enable_words),
		cmocka_unit_test(test_block_table_per_context),
		cmocka_unit_test(test_func_probes_only),
		cmocka_unit_test(test_dead_code_dropped_behind_the_boundary),
		cmocka_unit_test(test_sampling_leaves_captured_launches_alone),
		cmocka_unit_test(test_control_file_switches_programs),
		cmocka_unit_test(test_ring_buffers_are_drained_into_the_trace),
		cmocka_unit_test(test_ring_buffer_drain_threads),
		cmocka_unit_test(test_capture_survives_cubpf_calls),
		cmocka_unit_test(test_jit_error_falls_back),
		cmocka_unit_test(test_refused_substitute_loads_the_original),
		cmocka_unit_test(test_unmatched_kernels_stay_untouched),
		cmocka_unit_test(test_map_over_the_cap_is_refused),
		cmocka_unit_test(test_disabled_substitutes_nothing),
		cmocka_unit_test(test_rejected_program_is_skipped_with_the_reason),
		cmocka_unit_test(test_damaged_object_is_refused_others_run),
	cmocka_unit_test(test_object_over_the_map_cap_is_refused_alone),
		cmocka_unit_test(test_checker_crash_leaves_the_application_unprobed),
		cmocka_unit_test(test_checker_hang_is_cut_short),
		cmocka_unit_test(test_in_process_verification_gives_the_same_verdicts),
		cmocka_unit_test(test_cubin_kernels_are_listed_as_not_instrumentable),
		cmocka_unit_test(test_one_load_opens_and_lexes_once),
		cmocka_unit_test(test_startup_refusals_are_in_the_trace),
		cmocka_unit_test(test_file_loads_are_instrumented),
		cmocka_unit_test(test_instrumented_kernels_keep_their_block_size),
		cmocka_unit_test(test_maps_are_written_to_the_trace),
		cmocka_unit_test(test_not_instrumented_is_in_the_trace),
		cmocka_unit_test(test_maps_are_traced_while_running),
		cmocka_unit_test(test_metrics_endpoint_in_the_process),
		cmocka_unit_test(test_metrics_port_in_use_warns_once),
		cmocka_unit_test(test_fork_child_stays_quiet),
		cmocka_unit_test(test_a_trace_is_written_by_one_process),
		cmocka_unit_test(test_fork_child_of_a_fresh_parent_is_probed),
		cmocka_unit_test(test_kernel_spans_are_traced),
		cmocka_unit_test(test_kernel_spans_are_collected_at_teardown),
		cmocka_unit_test(test_kernel_spans_can_be_switched_off),
		cmocka_unit_test(test_kernel_spans_skip_programmatic_streams),
		cmocka_unit_test(test_kernel_spans_begin_before_the_programs_event),
		cmocka_unit_test(test_kernel_span_pool_is_bounded),
		cmocka_unit_test(test_cache_second_process_hits),
		cmocka_unit_test(test_cache_kernel_id_base),
		cmocka_unit_test(test_cache_key_inputs_miss),
		cmocka_unit_test(test_cache_damaged_or_unusable),
		cmocka_unit_test(test_cache_off),
		cmocka_unit_test(test_cache_refused_entry_is_dropped),
		cmocka_unit_test(test_cache_remembers_untouched_modules),
		cmocka_unit_test(test_cache_library_hit),
		cmocka_unit_test(test_per_sm_per_thread_and_hash_maps),
		cmocka_unit_test(test_per_sm_map_over_the_cap_names_it),
		cmocka_unit_test(test_sampling_compiles_the_enable_check_in),
		cmocka_unit_test(test_embedded_ptx_is_instrumented),
		cmocka_unit_test(test_embedded_ptx_refused_with_reasons),
		cmocka_unit_test(test_embedded_ptx_without_options),
		cmocka_unit_test(test_embedded_ptx_fmad_reproduced),
		cmocka_unit_test(test_embedded_ptx_fmad_cache_hit_compiles_nothing),
		cmocka_unit_test(test_embedded_ptx_cache_hit),
		cmocka_unit_test(test_embedded_ptx_of_linked_inputs),
		cmocka_unit_test(test_embedded_ptx_without_fma),
		cmocka_unit_test(test_embedded_ptx_jit_check),
		cmocka_unit_test(test_link_inputs_are_instrumented),
		cmocka_unit_test(test_link_refusal_adds_the_original),
		cmocka_unit_test(test_rdc_objects_are_linked_instrumented),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	remove_child_traces();
	return failed;
}
