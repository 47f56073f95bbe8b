/* Tests of the drop-in libcuda.so.1 (shim/), on a machine without a GPU.
 *
 * The shim reads its environment once per process, so every scenario runs in a child process
 * (fork) with its own CUBPF_* settings and its stderr captured.  The real driver is played by a
 * fake built from the same export list (tests/shim/fake_*.c), by the toolkit's stub, or by
 * nothing at all.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/child.h"

#ifndef SHIM_TEST_BUILD
#define SHIM_TEST_BUILD "build"
#endif
#ifndef SHIM_TEST_STUB
#define SHIM_TEST_STUB "/usr/local/cuda/lib64/stubs/libcuda.so"
#endif

static char shim_path[4096], fake_path[4096], exports_path[4096], stub_path[4096];
static char hooks_shim_path[4096], fixtures[2048];
static const char *open_path = shim_path; /* which shim a child opens */
static char shared_list[4096];

typedef long (*call12_t)(long, long, long, long, long, long, long, long, long, long, long, long);
#define CALL0(fn) ((int)((call12_t)(fn))(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

/* ---- helpers ---------------------------------------------------------------------------- */

static void set_paths(void)
{
	const char *b = getenv("CUBPF_BUILD");
	char build[2048];
	snprintf(build, sizeof(build), "%s", b && *b ? b : SHIM_TEST_BUILD);
	/* CUBPF_SHIM: the shim to test, when not this build's (tests/dist: an unpacked `make dist`) */
	const char *shim = getenv("CUBPF_SHIM");
	snprintf(shim_path, sizeof(shim_path), "%s", shim && *shim ? shim : "");
	if (!shim_path[0])
		snprintf(shim_path, sizeof(shim_path), "%s/lib/libcuda.so.1", build);
	snprintf(fake_path, sizeof(fake_path), "%s/tests/libcuda-fake.so", build);
	snprintf(hooks_shim_path, sizeof(hooks_shim_path), "%s/tests/shim-hooks/libcuda.so.1", build);
	snprintf(exports_path, sizeof(exports_path), "%s/shim/exports.txt", build);
	snprintf(stub_path, sizeof(stub_path), "%s", SHIM_TEST_STUB);
	const char *fx = getenv("CUBPF_FIXTURES");
#ifndef SHIM_TEST_FIXTURES
#define SHIM_TEST_FIXTURES "build/fixtures"
#endif
	snprintf(fixtures, sizeof(fixtures), "%s", fx && *fx ? fx : SHIM_TEST_FIXTURES);
	const char *sh = getenv("CUBPF_SHARED");
	snprintf(shared_list, sizeof(shared_list), "%s/cuda/libcuda-580.159.04-exports.txt",
		 sh && *sh ? sh : "../shared");
}

/* Lines of a text file (names), NULL-terminated; skips '#' comments and blank lines. */
static char **read_names(const char *path, size_t *count)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = 0, cap = 1024;
	char **v = calloc(cap + 1, sizeof(*v));
	char line[512];
	while (v && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		if (n == cap) {
			char **nv = realloc(v, (2 * cap + 1) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
			cap *= 2;
		}
		v[n++] = strdup(line);
		v[n] = NULL;
	}
	fclose(f);
	*count = n;
	return v;
}

static void free_names(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int has_name(char **v, const char *name)
{
	for (size_t i = 0; v && v[i]; i++)
		if (!strcmp(v[i], name))
			return 1;
	return 0;
}

/* Output of a command, NULL-terminated lines. */
static char **command_lines(const char *cmd, size_t *count)
{
	FILE *p = popen(cmd, "r");
	if (!p)
		return NULL;
	size_t n = 0, cap = 2048;
	char **v = calloc(cap + 1, sizeof(*v));
	char line[1024];
	while (v && fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\r\n")] = 0;
		if (n == cap)
			break;
		v[n++] = strdup(line);
	}
	pclose(p);
	*count = n;
	return v;
}

struct child_env {
	const char *real;     /* CUBPF_REAL_LIBCUDA, NULL to unset */
	const char *disable;  /* CUBPF_DISABLE */
	const char *log;      /* CUBPF_LOG */
	const char *name;     /* one more variable (NULL: none) */
	const char *value;
};

static char child_err[65536]; /* the last child's stderr */

static void child_setup(const void *arg)
{
	const struct child_env *env = arg;
	env->real ? setenv("CUBPF_REAL_LIBCUDA", env->real, 1) : unsetenv("CUBPF_REAL_LIBCUDA");
	env->disable ? setenv("CUBPF_DISABLE", env->disable, 1) : unsetenv("CUBPF_DISABLE");
	env->log ? setenv("CUBPF_LOG", env->log, 1) : unsetenv("CUBPF_LOG");
	if (env->name)
		setenv(env->name, env->value, 1);
}

/* Runs fn in a child with the given environment; returns its exit status (128+signal when it
 * died) and leaves its stderr in child_err. */
static int run_child(const struct child_env *env, int (*fn)(void))
{
	int status = child_run(child_setup, env, fn, child_err, sizeof(child_err));
	assert_true(status != -1);
	int code = child_code(status);
	if (code)
		printf("child failed; its stderr:\n%s\n", child_err);
	return code;
}

/* Loads the shim without calling it: it initializes on the first driver call. */
static void *open_shim_lazy(void)
{
	void *h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		printf("child: dlopen %s: %s\n", open_path, dlerror());
	return h;
}

/* Loads the shim and makes one call, so that it has found (and loaded) its driver. */
static void *open_shim(void)
{
	void *h = open_shim_lazy();
	int version = 0;
	if (h)
		((int (*)(int *))dlsym(h, "cuDriverGetVersion"))(&version);
	return h;
}

/* The fake as the shim loaded it (same handle). */
static void *open_fake(void)
{
	void *h = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!h)
		printf("child: fake driver %s was not loaded by the shim\n", fake_path);
	return h;
}

/* ---- the export surface ------------------------------------------------------------------- */

static void test_exports_match_the_list(void **state)
{
	(void)state;
	size_t nlist = 0, ndyn = 0;
	char **list = read_names(exports_path, &nlist);
	assert_non_null(list);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s' | awk '{print $3}' | sort", shim_path);
	char **dyn = command_lines(cmd, &ndyn);
	assert_non_null(dyn);
	for (size_t i = 0; i < ndyn; i++) {
		if (!has_name(list, dyn[i]))
			printf("exported but not a driver name: %s\n", dyn[i]);
		assert_true(has_name(list, dyn[i]));
		assert_true(!strncmp(dyn[i], "cu", 2));
	}
	for (size_t i = 0; i < nlist; i++) {
		if (!has_name(dyn, list[i]))
			printf("driver name not exported: %s\n", list[i]);
		assert_true(has_name(dyn, list[i]));
	}
	assert_int_equal(ndyn, nlist);
	free_names(list);
	free_names(dyn);
}

/* Every name of the real driver's list (../shared) and of the toolkit stub is exported. */
static void test_exports_cover_driver_and_stub(void **state)
{
	(void)state;
	size_t nlist, nreal = 0, nstub = 0;
	char **list = read_names(exports_path, &nlist);
	char **real = read_names(shared_list, &nreal);
	if (!real)
		printf("the driver's export list %s is missing (CUBPF_SHARED)\n", shared_list);
	assert_non_null(real);
	assert_true(nreal >= 600);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s' | awk '{print $3}'", stub_path);
	char **stub = command_lines(cmd, &nstub);
	if (nstub == 0)
		printf("the toolkit stub %s is missing\n", stub_path);
	assert_true(nstub >= 600);
	for (size_t i = 0; i < nreal; i++)
		assert_true(has_name(list, real[i]));
	for (size_t i = 0; i < nstub; i++)
		assert_true(has_name(list, stub[i]));
	assert_true(nlist >= nreal && nlist >= nstub);
	free_names(list);
	free_names(real);
	free_names(stub);
}

static int allowed_dependency(const char *line)
{
	static const char *const ok[] = { "linux-vdso.so", "libc.so.6", "libm.so.6", "libdl.so.2",
					  "libpthread.so.0", "ld-linux-x86-64.so.2",
#if defined(__SANITIZE_ADDRESS__)
					  /* the sanitizer build of the shim links their runtimes */
					  "libasan.so", "libubsan.so", "libstdc++.so", "libgcc_s.so",
#endif
					  NULL };
	for (int i = 0; ok[i]; i++)
		if (strstr(line, ok[i]))
			return 1;
	return 0;
}

/* PATH's ldd lines are all glibc's (or, in the sanitizer build, the sanitizers'). */
static void needs_only_glibc(const char *path)
{
	char cmd[8192];
	size_t n = 0;
	snprintf(cmd, sizeof(cmd), "ldd '%s' 2>&1", path);
	char **lines = command_lines(cmd, &n);
	assert_non_null(lines);
	assert_true(n >= 2);
	int libc = 0;
	for (size_t i = 0; i < n; i++) {
		if (!allowed_dependency(lines[i]))
			printf("%s: unexpected dependency: %s\n", path, lines[i]);
		assert_true(allowed_dependency(lines[i]));
		libc |= strstr(lines[i], "libc.so.6") != NULL;
	}
	assert_true(libc);
	free_names(lines);
}

/* The shim, and everything else `make install` ships, carries SQLite and zstd inside (built from
 * Debian's source packages, store/module.mk) and needs nothing but glibc. */
static void test_needs_only_glibc(void **state)
{
	(void)state;
	needs_only_glibc(shim_path);
	static const char *const shipped[] = { "bin/cubpf", "bin/cubpf-bpf-plugin",
					       "lib/libnvrtc.so.13", "lib/libnvJitLink.so.13" };
	char build[4096], path[8192];
	snprintf(build, sizeof(build), "%s", shim_path);
	*strrchr(build, '/') = '\0';
	*strrchr(build, '/') = '\0'; /* BUILD/lib/libcuda.so.1 -> BUILD */
	for (size_t i = 0; i < sizeof(shipped) / sizeof(shipped[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", build, shipped[i]);
		needs_only_glibc(path);
	}
}

/* ---- forwarding --------------------------------------------------------------------------- */

/* Every exported name, called through the shim, reaches the fake's function of that name. */
static int child_every_export(void)
{
	void *shim = open_shim(), *fake = shim ? open_fake() : NULL;
	if (!fake)
		return 1;
	unsigned (*hits)(const char *) = (unsigned (*)(const char *))dlsym(fake, "fake_hits");
	int (*result)(const char *) = (int (*)(const char *))dlsym(fake, "fake_result");
	size_t n;
	char **names = read_names(exports_path, &n);
	int bad = 0;
	for (size_t i = 0; names && i < n; i++) {
		void *fn = dlsym(shim, names[i]);
		if (!fn) {
			bad += child_fail("%s: not exported", names[i]);
			continue;
		}
		unsigned before = hits(names[i]);
		int r = CALL0(fn);
		if (hits(names[i]) != before + 1 || r != result(names[i]))
			bad += child_fail("%s: returned %d (want %d), fake reached %u times (want 1)",
				    names[i], r, result(names[i]), hits(names[i]) - before);
	}
	printf("child: %zu functions called through the shim, %d wrong\n", n, bad);
	free_names(names);
	return bad != 0 || n < 600;
}

static void test_every_export_reaches_the_driver(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path, .log = "info" };
	assert_int_equal(run_child(&env, child_every_export), 0);
}

static void test_every_export_reaches_the_driver_when_disabled(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path, .disable = "1" };
	assert_int_equal(run_child(&env, child_every_export), 0);
}

/* ---- cuGetProcAddress ----------------------------------------------------------------------- */

typedef int (*gpa2_t)(const char *, void **, int, uint64_t, int *);
typedef int (*gpa1_t)(const char *, void **, int, uint64_t);

struct gpa_counts {
	int wrapped, real, missing, bad;
};

/* Checks one lookup: the shim answers what the driver answers, with our wrapper in place of
 * an intercepted function (the very variant the driver chose), and the result leads to it. */
static void check_lookup(void *shim, void *fake, char **intercepted, const char *sym, int ver,
			 uint64_t flags, int v1, struct gpa_counts *c)
{
	gpa2_t fake_gpa = (gpa2_t)dlsym(fake, "cuGetProcAddress_v2");
	void *(*fn_of)(const char *) = (void *(*)(const char *))dlsym(fake, "fake_function");
	unsigned (*hits)(const char *) = (unsigned (*)(const char *))dlsym(fake, "fake_hits");
	void *q = NULL, *p = NULL, *dummy = NULL;
	int st = -1;
	int rq = fake_gpa(sym, &q, ver, flags, &st);
	int rp = v1 ? ((gpa1_t)dlsym(shim, "cuGetProcAddress"))(sym, &p, ver, flags)
		    : ((gpa2_t)dlsym(shim, "cuGetProcAddress_v2"))(sym, &p, ver, flags, &st);
	if (rp != rq || (rq != 0) != (p == NULL)) {
		c->bad += child_fail("%s v%d flags %llu: shim %d %p, driver %d %p", sym, ver,
			       (unsigned long long)flags, rp, p, rq, q);
		return;
	}
	if (rq != 0) {
		c->missing++;
		return;
	}
	const char *chosen = NULL;
	size_t n;
	char **names = read_names(exports_path, &n);
	for (size_t i = 0; names && i < n && !chosen; i++)
		if (fn_of(names[i]) == q)
			chosen = names[i];
	const char *d = getenv("CUBPF_DISABLE");
	int disabled = d && !strcmp(d, "1");
	void *want = chosen && has_name(intercepted, chosen) && !disabled ? dlsym(shim, chosen) : q;
	if (!chosen || p != want) {
		c->bad += child_fail("%s v%d flags %llu: got %p, want %p (%s)", sym, ver,
			       (unsigned long long)flags, p, want, chosen ? chosen : "?");
	} else {
		/* Calling what we were given reaches exactly the chosen variant. */
		unsigned before = hits(chosen);
		if (strncmp(chosen, "cuGetProcAddress", 16) != 0)
			(void)CALL0(p);
		else
			(void)((gpa2_t)p)("cuInit", &dummy, ver, 0, NULL); /* v1 ignores the 5th */
		if (hits(chosen) != before + 1)
			c->bad += child_fail("%s: calling the result did not reach %s", sym, chosen);
		if (p != q)
			c->wrapped++;
		else
			c->real++;
	}
	free_names(names);
}

static int child_procaddr(void)
{
	static const char *const syms[] = {
		"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuMemcpyHtoD",
		"cuMemcpyHtoDAsync", "cuMemcpy2D", "cuMemsetD32", "cuStreamSynchronize",
		"cuCtxCreate", "cuCtxSynchronize", "cuGraphAddNode", "cuGraphAddKernelNode",
		"cuGetProcAddress", "cuModuleLoadData", "cuLibraryLoadData", "cuLinkAddData",
		"cuModuleGetFunction", "cuMemAlloc", "cuDeviceGet", "cuGetExportTable",
		"cuStreamQuery", "cuNoSuchFunction",
	};
	static const int versions[] = { 11030, 12000, 13000 };
	static const uint64_t flags[] = { 0, 1, 2 };
	void *shim = open_shim(), *fake = shim ? open_fake() : NULL;
	size_t ni;
	char **intercepted = read_names("shim/intercept.list", &ni);
	if (!fake || !intercepted)
		return child_fail("setup (fake %p, shim/intercept.list %p)", fake, (void *)intercepted);
	struct gpa_counts c = { 0 };
	for (size_t s = 0; s < sizeof(syms) / sizeof(syms[0]); s++)
		for (int v = 0; v < 3; v++)
			for (int f = 0; f < 3; f++)
				for (int v1 = 0; v1 < 2; v1++)
					check_lookup(shim, fake, intercepted, syms[s], versions[v],
						     flags[f], v1, &c);
	free_names(intercepted);
	printf("child: lookups: %d wrapped, %d real, %d not found, %d wrong\n", c.wrapped, c.real,
	       c.missing, c.bad);
	const char *d = getenv("CUBPF_DISABLE");
	int disabled = d && !strcmp(d, "1");
	if (disabled)
		return c.bad || c.wrapped || !c.real;
	return c.bad || c.wrapped < 50 || c.real < 10 || c.missing < 3;
}

static void test_procaddr_gives_wrappers_for_each_variant(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path };
	assert_int_equal(run_child(&env, child_procaddr), 0);
}

static void test_procaddr_disabled_gives_real_pointers(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path, .disable = "1" };
	assert_int_equal(run_child(&env, child_procaddr), 0);
}

/* ---- where the log goes ----------------------------------------------------------------------- */

static int child_init_logs(void)
{
	void *shim = open_shim();
	if (!shim)
		return 1;
	int (*s_init)(unsigned) = (int (*)(unsigned))dlsym(shim, "cuInit");
	s_init(0); /* whatever the fake answers: the shim has started and logged */
	return 0;
}

static size_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0 ? (size_t)n : 0;
}

/* CUBPF_LOG_FILE with %p: the lines land in a file named after the process, not on stderr. */
static void test_log_file_per_process(void **state)
{
	(void)state;
	char dir[] = "/tmp/cubpf-shim-log-XXXXXX", pattern[64], path[96], text[8192];
	assert_non_null(mkdtemp(dir));
	snprintf(pattern, sizeof(pattern), "%s/log-%%p.txt", dir);
	struct child_env env = { .real = fake_path, .log = "debug", .name = "CUBPF_LOG_FILE",
				 .value = pattern };
	fflush(NULL);
	pid_t before = getpid();
	assert_int_equal(run_child(&env, child_init_logs), 0);
	assert_null(strstr(child_err, "cubpf: "));
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "ls %s", dir);
	size_t n = 0;
	char **names = command_lines(cmd, &n);
	assert_int_equal(n, 1);
	int pid = 0;
	assert_int_equal(sscanf(names[0], "log-%d.txt", &pid), 1);
	assert_true(pid > 0 && pid != before);
	snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
	assert_true(read_file(path, text, sizeof(text)) > 0);
	assert_non_null(strstr(text, "cubpf: real driver: "));
	unlink(path);
	rmdir(dir);
	free_names(names);
}

/* CUBPF_LOG_FD: the lines go to the inherited descriptor (cubpf run's pipe); a bad number is
 * said once on stderr and the lines stay there. */
static void test_log_fd(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/cubpf-shim-logfd-XXXXXX", num[16], text[8192];
	int fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	snprintf(num, sizeof(num), "%d", fd);
	struct child_env env = { .real = fake_path, .log = "debug", .name = "CUBPF_LOG_FD",
				 .value = num };
	assert_int_equal(run_child(&env, child_init_logs), 0);
	assert_null(strstr(child_err, "cubpf: "));
	assert_true(read_file(tmpl, text, sizeof(text)) > 0);
	assert_non_null(strstr(text, "cubpf: real driver: "));
	close(fd);
	unlink(tmpl);
	env.value = "999";
	assert_int_equal(run_child(&env, child_init_logs), 0);
	assert_non_null(strstr(child_err, "CUBPF_LOG_FD=999 is not an open descriptor"));
	assert_non_null(strstr(child_err, "cubpf: real driver: "));
	/* named with another file's identity (dev:ino): not ours, stderr */
	char wrong[64];
	snprintf(wrong, sizeof(wrong), "%d:1:1", fd);
	env.value = wrong;
	assert_int_equal(run_child(&env, child_init_logs), 0);
	assert_non_null(strstr(child_err, "is not an open descriptor (or not the one named)"));
}

/* The application closes the log descriptor and opens a file of its own under that number: the
 * shim's later lines go to stderr, never into the application's file. */
static int log_fd_number;
static char app_file[64];

static int child_reuses_log_fd(void)
{
	void *shim = open_shim();
	if (!shim)
		return 1;
	close(log_fd_number);
	int f = open(app_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (f != log_fd_number)
		return child_fail("reopened as %d, not %d", f, log_fd_number);
	int (*load)(void **, const void *) =
		(int (*)(void **, const void *))dlsym(shim, "cuModuleLoadData");
	void *mod;
	load(&mod, ".version 8.0\n.target sm_90\n.address_size 64\n");
	close(f);
	return 0;
}

static void test_log_fd_reused_by_the_app(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/cubpf-shim-logfd-XXXXXX", num[64], text[8192];
	int fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	snprintf(num, sizeof(num), "%d:%llu:%llu", fd, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	snprintf(app_file, sizeof(app_file), "%s.app", tmpl);
	log_fd_number = fd;
	struct child_env env = { .real = fake_path, .log = "info", .name = "CUBPF_LOG_FD",
				 .value = num };
	assert_int_equal(run_child(&env, child_reuses_log_fd), 0);
	assert_int_equal(read_file(app_file, text, sizeof(text)), 0); /* the app's file: empty */
	assert_non_null(strstr(child_err, "cubpf: load cuModuleLoadData"));
	close(fd);
	unlink(tmpl);
	unlink(app_file);
}

/* ---- the toolkit stub and no driver at all --------------------------------------------------- */

static int child_stub(void)
{
	void *shim = open_shim();
	void *stub = dlopen(stub_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!shim || !stub)
		return child_fail("shim %p, stub %p (was the stub loaded by the shim?)", shim, stub);
	int (*s_init)(unsigned) = (int (*)(unsigned))dlsym(shim, "cuInit");
	int (*r_init)(unsigned) = (int (*)(unsigned))dlsym(stub, "cuInit");
	int (*s_ver)(int *) = (int (*)(int *))dlsym(shim, "cuDriverGetVersion");
	int (*r_ver)(int *) = (int (*)(int *))dlsym(stub, "cuDriverGetVersion");
	int v = 0;
	int a = s_init(0), b = r_init(0), c = s_ver(&v), d = r_ver(&v);
	printf("child: cuInit via shim %d, stub %d; cuDriverGetVersion via shim %d, stub %d\n", a,
	       b, c, d);
	/* cudbg* are not in the stub: the shim answers CUDA_ERROR_NOT_SUPPORTED (801). */
	int e = CALL0(dlsym(shim, "cudbgGetAPIVersion"));
	return a != b || a == 0 || c != d || c == 0 || e != 801;
}

static void test_stub_error_comes_back(void **state)
{
	(void)state;
	struct child_env env = { .real = stub_path };
	assert_int_equal(run_child(&env, child_stub), 0);
}

static int child_no_driver(void)
{
	void *shim = open_shim();
	if (!shim)
		return 1;
	int bad = 0;
	int r = ((int (*)(unsigned))dlsym(shim, "cuInit"))(0);
	bad += r != 100 ? child_fail("cuInit = %d, want 100", r) : 0;
	int dev = -1;
	r = ((int (*)(int *, int))dlsym(shim, "cuDeviceGet"))(&dev, 0);
	bad += r != 3 ? child_fail("cuDeviceGet = %d, want 3", r) : 0;
	const char *text = NULL;
	r = ((int (*)(int, const char **))dlsym(shim, "cuGetErrorString"))(100, &text);
	bad += r != 0 || !text ? child_fail("cuGetErrorString = %d, %p", r, (void *)text) : 0;
	void *p = (void *)1;
	r = ((gpa2_t)dlsym(shim, "cuGetProcAddress_v2"))("cuInit", &p, 12000, 0, NULL);
	bad += r != 100 ? child_fail("cuGetProcAddress_v2 = %d, want 100", r) : 0;
	r = CALL0(dlsym(shim, "cudbgGetAPI"));
	bad += r == 0 ? child_fail("cudbgGetAPI succeeded without a driver") : 0;
	r = CALL0(dlsym(shim, "cuLaunchKernel"));
	bad += r != 3 ? child_fail("cuLaunchKernel = %d, want 3", r) : 0;
	return bad;
}

static void test_no_driver_answers_no_device(void **state)
{
	(void)state;
	struct child_env env = { .real = "/nonexistent/libcuda.so.1" };
	assert_int_equal(run_child(&env, child_no_driver), 0);
	assert_non_null(strstr(child_err, "cubpf: no real CUDA driver found"));
	assert_non_null(strstr(child_err, "/nonexistent/libcuda.so.1"));
	/* One message, not one per call. */
	assert_null(strstr(strstr(child_err, "no real CUDA") + 1, "no real CUDA"));
}

/* CUBPF_REAL_LIBCUDA naming the shim itself must not make it forward to itself. */
static void test_self_as_driver_is_refused(void **state)
{
	(void)state;
	struct child_env env = { .real = shim_path };
	assert_int_equal(run_child(&env, child_no_driver), 0);
	assert_non_null(strstr(child_err, "no real CUDA driver found"));
}

/* The search without CUBPF_REAL_LIBCUDA: LD_LIBRARY_PATH lists the shim's own folder (skipped:
 * same file), a folder holding a copy of the shim (skipped: it carries .note.cubpf), the
 * toolkit's stub folder (skipped: it has no libcuda.so.1), then a folder whose libcuda.so.1 is
 * a link to the stub, which must be chosen. */
static int child_search(void)
{
	void *shim = open_shim();
	if (!shim)
		return 1;
	int r = ((int (*)(unsigned))dlsym(shim, "cuInit"))(0);
	return r != 34 ? child_fail("cuInit = %d, want the stub's 34", r) : 0;
}

static void test_search_skips_shims_and_finds_the_driver(void **state)
{
	(void)state;
	char copydir[] = "/tmp/cubpf-shim-copy-XXXXXX", drvdir[] = "/tmp/cubpf-shim-drv-XXXXXX";
	char copy[4200], link[4200], cmd[8400], ldpath[16384];
	assert_non_null(mkdtemp(copydir));
	assert_non_null(mkdtemp(drvdir));
	snprintf(copy, sizeof(copy), "%s/libcuda.so.1", copydir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", shim_path, copy);
	assert_int_equal(system(cmd), 0);
	snprintf(link, sizeof(link), "%s/libcuda.so.1", drvdir);
	assert_int_equal(symlink(stub_path, link), 0);
	char stubdir[4096], selfdir[4096];
	snprintf(stubdir, sizeof(stubdir), "%s", stub_path);
	*strrchr(stubdir, '/') = 0;
	snprintf(selfdir, sizeof(selfdir), "%s", shim_path);
	*strrchr(selfdir, '/') = 0;
	snprintf(ldpath, sizeof(ldpath), "%s:%s:%s:%s", selfdir, copydir, stubdir, drvdir);
	struct child_env env = { .log = "debug", .name = "LD_LIBRARY_PATH", .value = ldpath };
	int rc = run_child(&env, child_search);
	unlink(copy);
	unlink(link);
	rmdir(copydir);
	rmdir(drvdir);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(child_err, "is this shim, skipped"));
	assert_non_null(strstr(child_err, "is a cubpf shim, skipped"));
	char want[4300];
	snprintf(want, sizeof(want), "cubpf: real driver: %s\n", link);
	if (!strstr(child_err, want))
		printf("stderr:\n%s\nwanted: %s", child_err, want);
	assert_non_null(strstr(child_err, want));
}

/* ---- the first call: lazy initialization ------------------------------------------------------ */

typedef int (*many_t)(long, long, long, long, long, long, long, long, double, double, double,
		      double, double, double, double, double);

/* The very first driver call of the process goes through the lazy-init stub of a trampoline:
 * every argument register (integer and vector) and the stack arguments must arrive intact. */
static int child_first_call_arguments(void)
{
	void *shim = open_shim_lazy();
	if (!shim)
		return 1;
	many_t fn = (many_t)dlsym(shim, "cuMemsetD2D16Async");
	int r = fn(-1, 2, 0x300000000l, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, -7.25);
	void *fake = open_fake();
	if (!fake)
		return 1;
	long ints[8];
	double floats[8];
	((void (*)(long *, double *))dlsym(fake, "fake_args"))(ints, floats);
	static const long want_i[8] = { -1, 2, 0x300000000l, 4, 5, 6, 7, 8 };
	static const double want_f[8] = { 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, -7.25 };
	int bad = r != ((int (*)(const char *))dlsym(fake, "fake_result"))("cuMemsetD2D16Async");
	for (int i = 0; i < 8; i++) {
		if (ints[i] != want_i[i])
			bad += child_fail("integer argument %d: %ld, want %ld", i, ints[i], want_i[i]);
		if (floats[i] != want_f[i])
			bad += child_fail("float argument %d: %g, want %g", i, floats[i], want_f[i]);
	}
	return bad;
}

static void test_first_call_keeps_arguments(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path };
	assert_int_equal(run_child(&env, child_first_call_arguments), 0);
}

/* Many threads make their first driver call at once (through lazy stubs and wrappers): one
 * initialization, every call forwarded. */
#define RACERS 16
static pthread_barrier_t racers_start;
static void *race_shim;
static int race_results[RACERS];

static void *racer(void *arg)
{
	long i = (long)arg;
	pthread_barrier_wait(&racers_start);
	const char *name = i % 2 ? "cuDeviceGetCount" : "cuInit";
	race_results[i] = CALL0(dlsym(race_shim, name));
	return NULL;
}

static int child_concurrent_first_calls(void)
{
	race_shim = open_shim_lazy();
	if (!race_shim)
		return 1;
	pthread_t t[RACERS];
	pthread_barrier_init(&racers_start, NULL, RACERS);
	for (long i = 0; i < RACERS; i++)
		pthread_create(&t[i], NULL, racer, (void *)i);
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	void *fake = open_fake();
	if (!fake)
		return 1;
	unsigned (*hits)(const char *) = (unsigned (*)(const char *))dlsym(fake, "fake_hits");
	int (*result)(const char *) = (int (*)(const char *))dlsym(fake, "fake_result");
	int bad = 0;
	for (int i = 0; i < RACERS; i++) {
		const char *name = i % 2 ? "cuDeviceGetCount" : "cuInit";
		if (race_results[i] != result(name))
			bad += child_fail("thread %d: %s returned %d", i, name, race_results[i]);
	}
	if (hits("cuInit") != RACERS / 2 || hits("cuDeviceGetCount") != RACERS / 2)
		bad += child_fail("calls reached: cuInit %u, cuDeviceGetCount %u (want %d each)",
				  hits("cuInit"), hits("cuDeviceGetCount"), RACERS / 2);
	return bad;
}

static void test_concurrent_first_calls(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path, .log = "debug" };
	for (int round = 0; round < 20; round++)
		assert_int_equal(run_child(&env, child_concurrent_first_calls), 0);
	/* One initialization: the driver is announced once. */
	char *first = strstr(child_err, "cubpf: real driver: ");
	assert_non_null(first);
	assert_null(strstr(first + 1, "cubpf: real driver: "));
}

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry kern_a(.param .u64 p)\n{\n\tret;\n}\n"
	".visible .entry kern_b()\n{\n\tret;\n}\n";

typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			unsigned, void *, void **, void **);

/* ---- hooks (shim/shim.h), through a test plug-in linked into a copy of the shim ---------------- */

static const char hooks_log[] = "/tmp/cubpf-shim-hooks-test.log";

static int child_hooks(void)
{
	open_path = hooks_shim_path;
	void *shim = open_shim(), *fake = shim ? open_fake() : NULL;
	if (!fake)
		return 1;
	int (*load)(void **, const void *) = (int (*)(void **, const void *))dlsym(shim, "cuModuleLoadData");
	int (*getfn)(void **, void *, const char *) =
		(int (*)(void **, void *, const char *))dlsym(shim, "cuModuleGetFunction");
	launch_t launch = (launch_t)dlsym(shim, "cuLaunchKernel");
	int (*htod)(unsigned long long, const void *, size_t) =
		(int (*)(unsigned long long, const void *, size_t))dlsym(shim, "cuMemcpyHtoD_v2");
	int (*memset_async)(unsigned long long, unsigned, size_t, void *) =
		(int (*)(unsigned long long, unsigned, size_t, void *))dlsym(shim, "cuMemsetD32Async_ptsz");
	void *mod = NULL, *fa = NULL, *fb = NULL;
	if (load(&mod, ptx) || getfn(&fa, mod, "kern_a") || getfn(&fb, mod, "kern_b"))
		return child_fail("a fake load or look-up failed");
	const char *(*last_image)(void) = (const char *(*)(void))dlsym(fake, "fake_last_image");
	void *(*last_launch)(void) = (void *(*)(void))dlsym(fake, "fake_last_launch");
	int bad = 0;
	if (!strstr(last_image(), "kern_subst"))
		bad += child_fail("the driver did not get the substituted image: %s", last_image());
	if (launch(fa, 2, 3, 4, 32, 2, 1, 128, NULL, NULL, NULL) != 0 || last_launch() != fb)
		bad += child_fail("launch of kern_a reached the driver as %p, want kern_b %p",
				  last_launch(), fb);
	if (launch(fb, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != 0 || last_launch() != fb)
		bad += child_fail("launch of kern_b was changed");
	char buf[4096] = { 0 };
	htod(0x1000, buf, sizeof(buf));
	memset_async(0x2000, 7, 100, (void *)0x77);
	((int (*)(void *))dlsym(shim, "cuModuleUnload"))(mod);
	void *ctx = NULL;
	if (((int (*)(void **, void *, unsigned, int))dlsym(shim, "cuCtxCreate_v4"))(&ctx, NULL, 0, 0))
		bad += child_fail("cuCtxCreate_v4 failed");
	((int (*)(void *))dlsym(shim, "cuCtxDestroy_v2"))(ctx);
	int (*release)(int) = (int (*)(int))dlsym(shim, "cuDevicePrimaryCtxRelease_v2");
	for (int i = 0; i < 8 && release(3) == 0; i++) /* down to the fake's error: no reference */
		;
	return bad;
}

static char *slurp(const char *path)
{
	static char text[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	text[n] = 0;
	if (f)
		fclose(f);
	return text;
}

static void test_hooks_see_and_substitute(void **state)
{
	(void)state;
	unlink(hooks_log);
	struct child_env env = { .real = fake_path, .name = "CUBPF_TEST_HOOKS", .value = hooks_log };
	assert_int_equal(run_child(&env, child_hooks), 0);
	char *log = slurp(hooks_log);
	printf("%s", log);
	assert_non_null(strstr(log, "loading cuModuleLoadData kind=2 kernels=2 ptx=1 tid=set\n"));
	assert_non_null(strstr(log, "loaded cuModuleLoadData result=0 handle=set substituted=yes time=ok\n"));
	assert_non_null(strstr(log, "kernel kern_a id=1 module=set library=none\n"));
	assert_non_null(strstr(log, "kernel kern_b id=2 module=set library=none\n"));
	assert_non_null(strstr(log, "launching cuLaunchKernel kern_a grid=2,3,4 block=32,2,1 shared=128\n"));
	assert_non_null(strstr(log, "launched cuLaunchKernel kern_b result=0\n"));
	assert_non_null(strstr(log, "api cuMemcpyHtoD_v2 kind=1 bytes=4096 result="));
	assert_non_null(strstr(log, "api cuMemsetD32Async_ptsz kind=2 bytes=400 result="));
	assert_non_null(strstr(log, "stream=0x77 time=ok\n"));
	assert_non_null(strstr(log, "unloaded module=set library=none result="));
	/* the plug-in interface: started once, a second plug-in refused, context ends heard
	 * before and after the real call, with its result (the fake says 201 for a release with
	 * no reference left) */
	assert_non_null(strstr(log, "started\n"));
	assert_null(strstr(log, "second"));
	assert_null(strstr(log, "register refused"));
	const char *end = strstr(log, "context ending how=0 context=set device=0\n");
	assert_non_null(end);
	assert_non_null(strstr(end, "context ended how=0 context=set device=0 result=0\n"));
	end = strstr(log, "context ending how=1 context=none device=3\n");
	assert_non_null(end);
	assert_non_null(strstr(end, "context ended how=1 context=none device=3 result=0\n"));
	assert_non_null(strstr(end, "context ended how=1 context=none device=3 result=201\n"));
	unlink(hooks_log);
}

/* CUBPF_DISABLE=1: the plug-in is never started, nothing is observed, calls still arrive. */
static void test_hooks_refused_when_disabled(void **state)
{
	(void)state;
	unlink(hooks_log);
	struct child_env env = { .real = fake_path, .disable = "1", .name = "CUBPF_TEST_HOOKS",
				 .value = hooks_log };
	assert_int_not_equal(run_child(&env, child_hooks), 0); /* no substitution happened */
	char *log = slurp(hooks_log);
	assert_null(strstr(log, "started"));
	assert_null(strstr(log, "loading"));
	assert_null(strstr(log, "context"));
	unlink(hooks_log);
}

/* ---- module loads, kernel handles, launches (seen through the log) --------------------------- */

static void *launch_fn, *thread_func;

static void *launch_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2500; i++)
		((launch_t)launch_fn)(thread_func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	return NULL;
}

static int child_launches(void)
{
	void *shim = open_shim();
	if (!shim)
		return 1;
	int (*load)(void **, const void *) = (int (*)(void **, const void *))dlsym(shim, "cuModuleLoadData");
	int (*getfn)(void **, void *, const char *) =
		(int (*)(void **, void *, const char *))dlsym(shim, "cuModuleGetFunction");
	int (*libload)(void **, const void *, void *, void *, unsigned, void *, void *, unsigned) =
		(int (*)(void **, const void *, void *, void *, unsigned, void *, void *, unsigned))
			dlsym(shim, "cuLibraryLoadData");
	int (*getk)(void **, void *, const char *) =
		(int (*)(void **, void *, const char *))dlsym(shim, "cuLibraryGetKernel");
	int (*k2f)(void **, void *) = (int (*)(void **, void *))dlsym(shim, "cuKernelGetFunction");
	launch_t launch = (launch_t)dlsym(shim, "cuLaunchKernel");
	launch_t launch_ptsz = (launch_t)dlsym(shim, "cuLaunchKernel_ptsz");
	void *mod = NULL, *f = NULL, *f_again = NULL, *lib = NULL, *k = NULL, *kf = NULL;
	if (load(&mod, ptx) || getfn(&f, mod, "kern_a") || getfn(&f_again, mod, "kern_a") ||
	    libload(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0) || getk(&k, lib, "kern_b") ||
	    k2f(&kf, k))
		return child_fail("a fake load or look-up failed");
	for (int i = 0; i < 3; i++)
		launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	launch(k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);      /* a CUkernel as CUfunction */
	launch_ptsz(k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	launch(kf, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);     /* its CUfunction */
	launch_ptsz(kf, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	launch((void *)0x1234, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL); /* never registered, */
	launch((void *)0x1234, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL); /* unknown to the driver */
	launch((void *)0x5000, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL); /* named by cuFuncGetName */
	launch((void *)0x5000, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
	((int (*)(void *, int, int))dlsym(shim, "cuLaunchGrid"))(f, 4, 4); /* deprecated form */
	for (int i = 0; i < 2; i++)
		((int (*)(void *, void *))dlsym(shim, "cuGraphLaunch_ptsz"))((void *)0x99, NULL);
	launch_fn = (void *)launch;
	thread_func = f;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, launch_many, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* Each unseen handle is asked about once, however often it is launched. */
	void *fake = open_fake();
	if (!fake)
		return 1;
	fprintf(stderr, "cuFuncGetName asked %u times\n",
		((unsigned (*)(const char *))dlsym(fake, "fake_hits"))("cuFuncGetName"));
	return 0;
}

static void test_loads_and_launches_are_reported(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path, .log = "info" };
	assert_int_equal(run_child(&env, child_launches), 0);
	printf("%s", child_err);
	assert_non_null(strstr(child_err, "cubpf: load cuModuleLoadData PTX"));
	assert_non_null(strstr(child_err, "cubpf: load cuLibraryLoadData PTX"));
	assert_non_null(strstr(child_err, "2 kernels, 0 cubins, PTX available"));
	assert_non_null(strstr(child_err, "summary: 2 module loads (0 failed, 0 unloaded), 10012 "
				      "launches of 3 kernels"));
	assert_non_null(strstr(child_err, "2 launches of unregistered handles), 2 graph launches\n"));
	assert_non_null(strstr(child_err, "         2  discovered_kernel\n"));
	assert_non_null(strstr(child_err, "cuFuncGetName asked 2 times\n"));
	assert_non_null(strstr(child_err, "     10004  kern_a\n"));
	assert_non_null(strstr(child_err, "         4  kern_b\n"));
}

/* Real nvcc output (a fatbin with an sm_90 cubin and compressed PTX, and a bare cubin) loaded
 * through the shim: the log line says what it holds. */
static const char *image_file;

static int child_load_file(void)
{
	void *shim = open_shim();
	FILE *f = fopen(image_file, "rb");
	if (!shim || !f)
		return child_fail("cannot open %s", image_file);
	char *buf = malloc(1 << 24);
	size_t image_size = buf ? fread(buf, 1, 1 << 24, f) : 0;
	(void)image_size;
	fclose(f);
	void *mod = NULL;
	int r = ((int (*)(void **, const void *))dlsym(shim, "cuModuleLoadData"))(&mod, buf);
	free(buf);
	/* The same file by path (the fake's cuModuleLoad fails: only the description matters). */
	((int (*)(void **, const char *))dlsym(shim, "cuModuleLoad"))(&mod, image_file);
	return r != 0 ? child_fail("load returned %d", r) : 0;
}

/* Loads fixture `file` through the shim (fake driver, CUBPF_LOG=info); returns its size. */
static long load_fixture(const char *file)
{
	static char path[4200];
	snprintf(path, sizeof(path), "%s/shim/%s", fixtures, file);
	FILE *f = fopen(path, "rb");
	if (!f)
		printf("fixture %s is missing (built with nvcc by tests/shim/module.mk)\n", path);
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fclose(f);
	image_file = path;
	struct child_env env = { .real = fake_path, .log = "info" };
	assert_int_equal(run_child(&env, child_load_file), 0);
	printf("%s", child_err);
	return size;
}

static void test_real_fatbin_and_cubin_are_described(void **state)
{
	(void)state;
	char want[4600];
	long size = load_fixture("app.fatbin");
	snprintf(want, sizeof(want), "cubpf: load cuModuleLoadData fatbin %ld B: 2 kernels, 1 cubin, "
		 "PTX available -> 0x", size);
	assert_non_null(strstr(child_err, want));
	snprintf(want, sizeof(want), "cubpf: load cuModuleLoad fatbin %s %ld B: 2 kernels, 1 cubin, "
		 "PTX available -> FAILED (CUresult ", image_file, size);
	assert_non_null(strstr(child_err, want));
	size = load_fixture("app.cubin");
	snprintf(want, sizeof(want), "cubpf: load cuModuleLoadData cubin %ld B: 2 kernels, 1 cubin, "
		 "no PTX entry -> 0x", size);
	assert_non_null(strstr(child_err, want));
}

/* Default log level: nothing on stderr for a clean run. */
static void test_quiet_by_default(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path };
	assert_int_equal(run_child(&env, child_launches), 0);
	assert_null(strstr(child_err, "cubpf"));
}

/* Pass-through: loads and launches are forwarded but nothing is counted or printed. */
static void test_disabled_counts_nothing(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path, .disable = "1", .log = "info" };
	assert_int_equal(run_child(&env, child_launches), 0);
	assert_null(strstr(child_err, "summary"));
	assert_null(strstr(child_err, "load cu"));
}

static void test_bad_log_level_is_reported(void **state)
{
	(void)state;
	struct child_env env = { .real = fake_path, .log = "loud" };
	assert_int_equal(run_child(&env, child_launches), 0);
	assert_non_null(strstr(child_err, "CUBPF_LOG=loud is not one of"));
}

int main(void)
{
	set_paths();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exports_match_the_list),
		cmocka_unit_test(test_exports_cover_driver_and_stub),
		cmocka_unit_test(test_needs_only_glibc),
		cmocka_unit_test(test_every_export_reaches_the_driver),
		cmocka_unit_test(test_every_export_reaches_the_driver_when_disabled),
		cmocka_unit_test(test_procaddr_gives_wrappers_for_each_variant),
		cmocka_unit_test(test_procaddr_disabled_gives_real_pointers),
		cmocka_unit_test(test_stub_error_comes_back),
		cmocka_unit_test(test_log_file_per_process),
		cmocka_unit_test(test_log_fd),
		cmocka_unit_test(test_log_fd_reused_by_the_app),
		cmocka_unit_test(test_no_driver_answers_no_device),
		cmocka_unit_test(test_self_as_driver_is_refused),
		cmocka_unit_test(test_search_skips_shims_and_finds_the_driver),
		cmocka_unit_test(test_first_call_keeps_arguments),
		cmocka_unit_test(test_concurrent_first_calls),
		cmocka_unit_test(test_hooks_see_and_substitute),
		cmocka_unit_test(test_hooks_refused_when_disabled),
		cmocka_unit_test(test_loads_and_launches_are_reported),
		cmocka_unit_test(test_real_fatbin_and_cubin_are_described),
		cmocka_unit_test(test_quiet_by_default),
		cmocka_unit_test(test_disabled_counts_nothing),
		cmocka_unit_test(test_bad_log_level_is_reported),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
