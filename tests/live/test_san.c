/* tests/live: the Sanitizer backend's plumbing (shim/live/sanitizer.c) against the fake driver
 * (tests/shim) and a fake Compute Sanitizer library (tests/live/fake_sanitizer.c) that logs
 * every call and fires a launch callback at every launch.  No GPU: what is checked is what cubpf
 * asks of the library and when; that the patches work is tests/gpu/t_sass.sh's part.
 *
 * Each case runs in a child that loads the shim over the fake driver with CUBPF_PROGRAMS set,
 * calls cuInit, loads a SASS-only cubin (tests/cuda/shim_app.cu: increment, mix) and launches;
 * the parent reads the fake library's log and the shim's messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/child.h"
#include "ptx-rewriter/layout.h"

static char shim_path[4096], fake_path[4096], fake_san[4096], kcount[4096], host_probe[4096];
static char cubin_path[4096], san_log[128], mixed[4096];
static char child_err[1 << 16];
static char log_text[1 << 16];

struct child_env {
	const char *names[8];
	const char *values[8];
};

static const char *env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		fail_msg("%s is not set (run through tests/run-tests.sh)", name);
	return v;
}

static void read_log_from(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(log_text, 1, sizeof(log_text) - 1, f) : 0;
	log_text[n] = 0;
	if (f)
		fclose(f);
}

static void read_log(void)
{
	read_log_from(san_log);
}

static int count(const char *text, const char *what)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

struct child_args {
	const char *programs;
	const struct child_env *e;
};

/* The child's environment: the fake driver and library, the programs, no cache, e's settings. */
static void child_setup(const void *arg)
{
	const struct child_args *a = arg;
	setenv("CUBPF_REAL_LIBCUDA", fake_path, 1);
	setenv("CUBPF_PROGRAMS", a->programs, 1);
	setenv("CUBPF_LOG", "info", 1);
	setenv("CUBPF_CACHE", "off", 1);
	setenv("FAKE_SAN_LOG", san_log, 1);
	setenv("CUBPF_PTXAS", env("PTXAS"), 1);
	setenv("FAKE_PARAM_SIZES", "8,4", 1);
	setenv("FAKE_INIT_OK", "1", 1);
	unsetenv("CUBPF_DISABLE");
	unsetenv("CUBPF_TRACE");
	unsetenv("CUBPF_SANITIZER");
	for (int i = 0; a->e && i < 8 && a->e->names[i]; i++)
		setenv(a->e->names[i], a->e->values[i], 1);
}

static int run_child(const char *programs, const struct child_env *e, int (*fn)(void))
{
	snprintf(san_log, sizeof(san_log), "/tmp/cubpf-san-log-%d", (int)getpid());
	unlink(san_log);
	struct child_args a = {programs, e};
	int status = child_run(child_setup, &a, fn, child_err, sizeof(child_err));
	assert_true(status != -1);
	read_log();
	unlink(san_log);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		printf("child failed; its stderr:\n%s\nthe fake library's log:\n%s\n", child_err,
		       log_text);
	return child_code(status);
}

/* ---- the child ---- */

static void *shim;
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);

static void note(const char *what)
{
	FILE *f = fopen(getenv("FAKE_SAN_LOG"), "a");
	if (f) {
		fprintf(f, "app: %s\n", what);
		fclose(f);
	}
}

static void *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *b = malloc((size_t)n);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

static uint32_t counter_buf[4];

static int launch(void *f, int value)
{
	void *p0 = counter_buf;
	void *args[2] = {&p0, &value};
	return ((launch_fn)dlsym(shim, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, NULL, args,
							  NULL);
}

/* cuInit; the SASS-only cubin; mix (not selected), increment twice, mix again. */
static int child_app(void)
{
	shim = dlopen(shim_path, RTLD_NOW | RTLD_LOCAL);
	if (!shim)
		return child_fail("dlopen %s: %s", shim_path, dlerror());
	if (((int (*)(unsigned))dlsym(shim, "cuInit"))(0) != 0)
		return child_fail("cuInit failed");
	note("after cuInit");
	void *image = read_file(cubin_path), *mod = NULL, *inc = NULL, *mix = NULL;
	if (!image)
		return child_fail("cannot read %s", cubin_path);
	int lr = ((int (*)(void **, const void *))dlsym(shim, "cuModuleLoadData"))(&mod, image);
	free(image); /* the driver copies the image it loads */
	if (lr)
		return child_fail("cuModuleLoadData failed");
	int (*get)(void **, void *, const char *) =
		(int (*)(void **, void *, const char *))dlsym(shim, "cuModuleGetFunction");
	if (get(&inc, mod, "_Z9incrementPji") || get(&mix, mod, "_Z3mixPKjPjji"))
		return child_fail("cuModuleGetFunction failed");
	note("module in");
	if (launch(mix, 1) || launch(inc, 5) || launch(inc, 6) || launch(mix, 2))
		return child_fail("a launch failed");
	/* the record of increment's last launch (the fake's device memory is host memory) */
	char *last = NULL, *p = NULL;
	FILE *f = fopen(getenv("FAKE_SAN_LOG"), "r");
	char line[256];
	char want[64];
	snprintf(want, sizeof(want), "setlaunch %p ", inc);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, want, strlen(want))) {
			free(last);
			last = strdup(line + strlen(want));
		}
	if (f)
		fclose(f);
	if (last) {
		const struct ptx_patch_record *r = (const void *)(uintptr_t)strtoull(last, &p, 16);
		FILE *o = fopen(getenv("FAKE_SAN_LOG"), "a");
		if (o && r) {
			fprintf(o, "app: record kernel_id %u nparams %u progs %u p0 %s p1 %llu maps0 %s\n",
				r->kernel_id, r->nparams, r->progs,
				r->params[0] == (uint64_t)(uintptr_t)counter_buf ? "ok" : "wrong",
				(unsigned long long)r->params[1], r->maps[0] ? "set" : "zero");
		}
		if (o)
			fclose(o);
	}
	free(last);
	return 0;
}

/* The lock-order case: a second context is prepared while the snapshot thread (a trace is
 * written) holds the maps' lock and launches cubpf's clock kernel, whose callback the fake
 * library delays (FAKE_SAN_SLOW_OWN_MS).  Before the fix the callback waited for the backend's
 * lock, held by this thread, which waited for the maps' lock: the process hung (SIGALRM here). */
static int wait_log(const char *what, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		read_log_from(getenv("FAKE_SAN_LOG"));
		if (strstr(log_text, what))
			return 0;
		usleep(10 * 1000);
	}
	return -1;
}

static int child_two_contexts(void)
{
	alarm(40);
	shim = dlopen(shim_path, RTLD_NOW | RTLD_LOCAL);
	if (!shim || ((int (*)(unsigned))dlsym(shim, "cuInit"))(0) != 0)
		return child_fail("no shim or cuInit failed");
	void *image = read_file(cubin_path), *mod = NULL, *inc = NULL, *ctx = NULL;
	int (*load)(void **, const void *) =
		(int (*)(void **, const void *))dlsym(shim, "cuModuleLoadData");
	int (*get)(void **, void *, const char *) =
		(int (*)(void **, void *, const char *))dlsym(shim, "cuModuleGetFunction");
	if (!image || load(&mod, image) || get(&inc, mod, "_Z9incrementPji") || launch(inc, 1))
		return child_fail("first context: load or launch failed");
	if (wait_log("own launch elsewhere", 20000))
		return child_fail("the snapshot thread never refreshed a clock");
	int (*create)(void **, void *, unsigned, int) =
		(int (*)(void **, void *, unsigned, int))dlsym(shim, "cuCtxCreate_v4");
	if (create(&ctx, NULL, 0, 0) || load(&mod, image) || get(&inc, mod, "_Z9incrementPji") ||
	    launch(inc, 2))
		return child_fail("second context: load or launch failed");
	free(image);
	note("second context launched");
	return 0;
}

/* ---- cases ---- */

/* Off (no CUBPF_SANITIZER): the library is never opened, nothing subscribes. */
static void t_off(void **s)
{
	(void)s;
	assert_int_equal(run_child(kcount, NULL, child_app), 0);
	assert_null(strstr(log_text, "loaded\n"));
	assert_null(strstr(log_text, "subscribe"));
	assert_null(strstr(child_err, "sanitizer"));
}

/* Asked for, but no program it could patch (host programs only): not opened either. */
static void t_nothing_to_patch(void **s)
{
	(void)s;
	struct child_env e = {{"CUBPF_SANITIZER"}, {fake_san}};
	assert_int_equal(run_child(host_probe, &e, child_app), 0);
	assert_null(strstr(log_text, "loaded\n"));
	assert_non_null(strstr(child_err, "no kprobe, kretprobe or memprobe program"));
}

/* The library missing: one warning saying how to get it; everything else as before. */
static void t_missing(void **s)
{
	(void)s;
	struct child_env e = {{"CUBPF_SANITIZER"}, {"/nonexistent/libsanitizer-public.so"}};
	assert_int_equal(run_child(kcount, &e, child_app), 0);
	assert_int_equal(count(child_err, "libsanitizer-public.so not found"), 1);
	assert_non_null(strstr(child_err, "pip install nvidia-cuda-sanitizer-api"));
	assert_null(strstr(child_err, "patched"));
}

/* Subscribed inside cuInit; the module patched once, at the first launch of the selected
 * kernel; each launch of it gets its record; the unselected kernel's first launch is left
 * alone, its launch after the patch gets the empty record. */
static void t_lazy(void **s)
{
	(void)s;
	struct child_env e = {{"CUBPF_SANITIZER", "CUBPF_KERNELS"}, {fake_san, "increment"}};
	assert_int_equal(run_child(kcount, &e, child_app), 0);
	const char *sub = strstr(log_text, "subscribe\n"), *init = strstr(log_text, "app: after cuInit");
	assert_non_null(sub);
	assert_non_null(init);
	assert_true(sub < init);
	assert_true(strstr(log_text, "enable 5\n") < init);
	assert_int_equal(count(log_text, "addpatches elf "), 1);
	assert_int_equal(count(log_text, "patchinsn 1 "), 1);   /* kprobe: block enter */
	assert_int_equal(count(log_text, "patchinsn 2 "), 1);   /* kretprobe: block exit */
	assert_int_equal(count(log_text, "patchmodule"), 1);
	/* patched before the launch, by the launch hook, never from inside the launch's callback
	 * (the real library deadlocks there on a launch to a created stream) */
	assert_int_equal(count(log_text, "patchmodule inside a launch"), 0);
	const char *patched = strstr(log_text, "patchmodule 0x");
	const char *first_inc = strstr(log_text, "launch_begin _Z9incrementPji");
	assert_true(patched && first_inc && patched < first_inc);
	/* the application's 4 launches (cubpf's own clock kernel comes through too, and is left
	 * alone: it is launched while the backend prepares the context) */
	assert_int_equal(count(log_text, "launch_begin _Z"), 4);
	assert_int_equal(count(log_text, "setlaunch"), 3);
	/* the first launch of mix came before any patch: nothing asked of the library */
	const char *first_mix = strstr(log_text, "launch_begin _Z3mixPKjPjji");
	const char *first_patch = strstr(log_text, "addpatches");
	assert_true(first_mix && first_patch && first_mix < first_patch);
	assert_non_null(strstr(log_text, "record kernel_id 1 nparams 2 progs 3 p0 ok p1 6 maps0 set"));
	assert_non_null(strstr(child_err, "backend sanitizer: kernel id 1 = _Z9incrementPji: 2 "
					  "launches patched (64 threads), 0 unpatched"));
	assert_non_null(strstr(child_err, "1 modules patched, 0 failed; 2 launches patched, 0 "
					  "ran without probes"));
}

/* A patch error: the kernel runs unpatched, one warning with the reason, counted. */
static void t_patch_error(void **s)
{
	(void)s;
	struct child_env e = {{"CUBPF_SANITIZER", "CUBPF_KERNELS", "FAKE_SAN_FAIL"},
			      {fake_san, "increment", "patchmodule"}};
	assert_int_equal(run_child(kcount, &e, child_app), 0);
	assert_int_equal(count(log_text, "patchmodule"), 1);
	assert_int_equal(count(log_text, "setlaunch"), 0);
	assert_int_equal(count(child_err, "is not patched (sanitizerPatchModule: "
					  "SANITIZER_ERROR_FAKE)"), 1);
	assert_non_null(strstr(child_err, "0 modules patched, 1 failed; 0 launches patched, 2 ran "
					  "without probes"));
}

/* The patch functions refused by the context: one warning for the context, not one per launch;
 * nothing patched, both launches counted as run without probes. */
static void t_addpatches_error(void **s)
{
	(void)s;
	struct child_env e = {{"CUBPF_SANITIZER", "CUBPF_KERNELS", "FAKE_SAN_FAIL"},
			      {fake_san, "increment", "addpatches"}};
	assert_int_equal(run_child(kcount, &e, child_app), 0);
	assert_int_equal(count(log_text, "addpatches"), 1);
	assert_int_equal(count(log_text, "patchmodule"), 0);
	assert_int_equal(count(log_text, "setlaunch"), 0);
	assert_int_equal(count(child_err, "sanitizerAddPatchesFromFile: SANITIZER_ERROR_FAKE"), 1);
	assert_non_null(strstr(child_err, "0 modules patched, 0 failed; 0 launches patched, 2 ran "
					  "without probes"));
}

/* What the backend refuses that the PTX path takes (a memprobe reading ctx->insn_index): that
 * program is left out with one warning saying why, the object's other programs are patched. */
static void t_refused_program(void **s)
{
	(void)s;
	struct child_env e = {{"CUBPF_SANITIZER", "CUBPF_KERNELS"}, {fake_san, "increment"}};
	assert_int_equal(run_child(mixed, &e, child_app), 0);
	assert_int_equal(count(child_err, "program san_by_insn is not patched into SASS-only "
					  "kernels: ctx->insn_index"), 1);
	assert_int_equal(count(log_text, "patchinsn 1 "), 1);
	assert_int_equal(count(log_text, "patchinsn 3 "), 0);
	assert_int_equal(count(log_text, "patchmodule"), 1);
	assert_non_null(strstr(log_text, "progs 1 "));
}

/* The snapshot thread's clock launch never waits for the backend's lock (see
 * child_two_contexts): both contexts' launches patched, the program ends. */
static void t_own_launch(void **s)
{
	(void)s;
	char trace[64];
	snprintf(trace, sizeof(trace), "/tmp/cubpf-san-trace-%d", (int)getpid());
	struct child_env e = {{"CUBPF_SANITIZER", "CUBPF_KERNELS", "CUBPF_TRACE", "CUBPF_INTERVAL_MS",
			       "FAKE_SAN_SLOW_OWN_MS"},
			      {fake_san, "increment", trace, "500", "300"}};
	assert_int_equal(run_child(kcount, &e, child_two_contexts), 0);
	/* the trace names the backend of the kernel's id */
	char cmd[8300], out[4096] = "";
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf trace dump %s 2>&1 | grep '^kid '",
		 env("CUBPF_BUILD"), trace);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
	out[n] = 0;
	if (p)
		pclose(p);
	unlink(trace);
	assert_non_null(strstr(out, "kid     1 _Z9incrementPji backend=sanitizer\n"));
	assert_non_null(strstr(log_text, "own launch elsewhere"));
	assert_non_null(strstr(log_text, "app: second context launched"));
	assert_int_equal(count(log_text, "addpatches elf "), 2); /* one per context */
	assert_non_null(strstr(child_err, "2 launches patched, 0 ran without probes"));
}

int main(void)
{
	const char *b = env("CUBPF_BUILD");
	snprintf(shim_path, sizeof(shim_path), "%s/lib/libcuda.so.1", b);
	snprintf(fake_path, sizeof(fake_path), "%s/tests/libcuda-fake.so", b);
	snprintf(fake_san, sizeof(fake_san), "%s/tests/libsanitizer-fake.so", b);
	snprintf(kcount, sizeof(kcount), "%s/probes/kcount.bpf.o", b);
	snprintf(host_probe, sizeof(host_probe), "%s/live-probes/host.bpf.o", b);
	snprintf(mixed, sizeof(mixed), "%s/live-probes/san_mixed.bpf.o", b);
	snprintf(cubin_path, sizeof(cubin_path), "%s/shim/app.cubin", env("CUBPF_FIXTURES"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_off),
		cmocka_unit_test(t_nothing_to_patch),
		cmocka_unit_test(t_missing),
		cmocka_unit_test(t_lazy),
		cmocka_unit_test(t_patch_error),
		cmocka_unit_test(t_refused_program),
		cmocka_unit_test(t_addpatches_error),
		cmocka_unit_test(t_own_launch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
