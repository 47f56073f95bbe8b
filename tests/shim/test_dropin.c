/* Tests of the drop-in libnvrtc.so.13 and libnvJitLink.so.13 (shim/dropin/), on a machine with
 * the CUDA toolkit and no GPU (NVRTC and nvJitLink compile without one).
 *
 * - Each drop-in exports exactly the real library's names, under its version node.
 * - Calls are forwarded (nvrtcVersion, a whole compile and link through the drop-ins).
 * - nvrtcCompileProgram and nvJitLinkCreate get -lineinfo: the cubins carry
 *   .nv_debug_ptx_txt; not with CUBPF_DISABLE=1; the program's own -lineinfo is not doubled.
 * - -lineinfo changes no machine code: every .text.* section of cubins compiled by the real
 *   NVRTC (sm_90 and sm_80) and linked by the real nvJitLink, with and without it, is the same.
 * - The search for the real library skips the drop-in itself (CUBPF_REAL_LIBNVRTC pointing at
 *   it gives NVRTC_ERROR_INTERNAL_ERROR, not a loop) and finds the real one behind cubpf's
 *   folder on LD_LIBRARY_PATH.
 * The drop-ins read their environment when first called, so scenarios that need a fresh one run
 * in a child process (fork) before the drop-in is opened.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cubin/cubin.h"

#ifndef DROPIN_TEST_BUILD
#define DROPIN_TEST_BUILD "build"
#endif
#ifndef DROPIN_TEST_CUDA
#define DROPIN_TEST_CUDA "/usr/local/cuda"
#endif

/* An ASan build of this test loads the real NVRTC, whose allocations at exit are not ours. */
__attribute__((visibility("default"))) const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

typedef int (*create_prog_t)(void **, const char *, const char *, int, const char *const *,
			     const char *const *);
typedef int (*compile_t)(void *, int, const char *const *);
typedef int (*size_t_get_t)(void *, size_t *);
typedef int (*bytes_get_t)(void *, char *);
typedef int (*destroy_prog_t)(void **);
typedef int (*version_t)(int *, int *);
typedef int (*jl_create_t)(void **, uint32_t, const char **);
typedef int (*jl_add_t)(void *, int, const void *, size_t, const char *);
typedef int (*jl_complete_t)(void *);
typedef int (*jl_size_t)(void *, size_t *);
typedef int (*jl_get_t)(void *, void *);
typedef int (*jl_destroy_t)(void **);

static char dropin_nvrtc[4096], dropin_jitlink[4096], real_nvrtc[4096], real_jitlink[4096];
static char lib_dir[2100], cuda_lib[2100];

/* Kernels of different shapes: straight-line, a loop with shared memory and barriers, math
 * functions with fused multiply-adds, a device function call. */
static const char source[] =
	"extern \"C\" __global__ void k_add(const float *a, const float *b, float *c, int n)\n"
	"{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n"
	"extern \"C\" __global__ void k_reduce(const float *a, float *out, int n)\n"
	"{\n"
	"  __shared__ float s[256];\n"
	"  float v = 0; for (int i = threadIdx.x; i < n; i += blockDim.x) v += a[i];\n"
	"  s[threadIdx.x] = v; __syncthreads();\n"
	"  for (int w = blockDim.x / 2; w > 0; w /= 2) {\n"
	"    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w]; __syncthreads(); }\n"
	"  if (threadIdx.x == 0) atomicAdd(out, s[0]);\n"
	"}\n"
	"extern \"C\" __global__ void k_math(float *x, int n)\n"
	"{ int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"  if (i < n) x[i] = sinf(x[i]) * 1.5f + expf(x[i] * 0.25f) * x[i] + sqrtf(fabsf(x[i])); }\n"
	"__device__ __noinline__ int d_mix(int a, int b) { return (a * 31) ^ (b >> 3); }\n"
	"extern \"C\" __global__ void k_call(int *p, int n)\n"
	"{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = d_mix(p[i], i); }\n";

static void set_paths(void)
{
	const char *b = getenv("CUBPF_BUILD");
	char build[2048];
	snprintf(build, sizeof(build), "%.2000s", b && *b ? b : DROPIN_TEST_BUILD);
	snprintf(lib_dir, sizeof(lib_dir), "%.2000s/lib", build);
	snprintf(dropin_nvrtc, sizeof(dropin_nvrtc), "%s/libnvrtc.so.13", lib_dir);
	snprintf(dropin_jitlink, sizeof(dropin_jitlink), "%s/libnvJitLink.so.13", lib_dir);
	snprintf(cuda_lib, sizeof(cuda_lib), "%.2000s/lib64", DROPIN_TEST_CUDA);
	snprintf(real_nvrtc, sizeof(real_nvrtc), "%s/libnvrtc.so.13", cuda_lib);
	snprintf(real_jitlink, sizeof(real_jitlink), "%s/libnvJitLink.so.13", cuda_lib);
}

static void *must_open(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", path, dlerror());
	return h;
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p)
		fail_msg("dlsym %s: %s", name, dlerror());
	return p;
}

/* NVRTC through the library h: the cubin (arch sm_XX) or PTX (compute_XX) of source, with the
 * given extra options; malloc'd, size in *size. */
static char *nvrtc_build(void *h, const char *arch, const char *extra, size_t *size)
{
	create_prog_t create = (create_prog_t)sym(h, "nvrtcCreateProgram");
	compile_t compile = (compile_t)sym(h, "nvrtcCompileProgram");
	int cubin = !strncmp(arch, "-arch=sm_", 9);
	size_t_get_t get_size = (size_t_get_t)sym(h, cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize");
	bytes_get_t get = (bytes_get_t)sym(h, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX");
	destroy_prog_t destroy = (destroy_prog_t)sym(h, "nvrtcDestroyProgram");
	void *prog;
	const char *opts[2] = { arch, extra };
	assert_int_equal(create(&prog, source, "k.cu", 0, NULL, NULL), 0);
	assert_int_equal(compile(prog, extra ? 2 : 1, opts), 0);
	assert_int_equal(get_size(prog, size), 0);
	char *out = malloc(*size);
	assert_non_null(out);
	assert_int_equal(get(prog, out), 0);
	assert_int_equal(destroy(&prog), 0);
	return out;
}

/* nvJitLink through h: PTX linked for sm_90 with the given extra option. */
static char *jitlink_build(void *h, const char *ptx, size_t ptx_size, const char *extra,
			   size_t *size)
{
	jl_create_t create = (jl_create_t)sym(h, "__nvJitLinkCreate_13_0");
	jl_add_t add = (jl_add_t)sym(h, "__nvJitLinkAddData_13_0");
	jl_complete_t complete = (jl_complete_t)sym(h, "__nvJitLinkComplete_13_0");
	jl_size_t get_size = (jl_size_t)sym(h, "__nvJitLinkGetLinkedCubinSize_13_0");
	jl_get_t get = (jl_get_t)sym(h, "__nvJitLinkGetLinkedCubin_13_0");
	jl_destroy_t destroy = (jl_destroy_t)sym(h, "__nvJitLinkDestroy_13_0");
	void *link;
	const char *opts[2] = { "-arch=sm_90", extra };
	assert_int_equal(create(&link, extra ? 2 : 1, opts), 0);
	assert_int_equal(add(link, 2 /* NVJITLINK_INPUT_PTX */, ptx, ptx_size, "k.ptx"), 0);
	assert_int_equal(complete(link), 0);
	assert_int_equal(get_size(link, size), 0);
	char *out = malloc(*size);
	assert_non_null(out);
	assert_int_equal(get(link, out), 0);
	assert_int_equal(destroy(&link), 0);
	return out;
}

/* Number of sections whose name starts with prefix. */
static int count_sections(const char *img, size_t size, const char *prefix)
{
	struct cubin_elf elf;
	struct cubin_elf_section sec;
	int n = 0;
	assert_int_equal(cubin_elf_open(&elf, img, size), 0);
	for (size_t i = 0; i < elf.shnum; i++)
		if (cubin_elf_section(&elf, i, &sec) == 0 && !strncmp(sec.name, prefix, strlen(prefix)))
			n++;
	return n;
}

/* Every .text.* section of a is in b with the same bytes, and b has no other; returns their
 * number. */
static int same_text(const char *a, size_t asize, const char *b, size_t bsize)
{
	struct cubin_elf ea, eb;
	struct cubin_elf_section sa, sb;
	int n = 0;
	assert_int_equal(cubin_elf_open(&ea, a, asize), 0);
	assert_int_equal(cubin_elf_open(&eb, b, bsize), 0);
	for (size_t i = 0; i < ea.shnum; i++) {
		if (cubin_elf_section(&ea, i, &sa) != 0 || strncmp(sa.name, ".text.", 6))
			continue;
		if (cubin_elf_section_by_name(&eb, sa.name, &sb) != 0)
			fail_msg("%s is missing with -lineinfo", sa.name);
		assert_int_equal(sa.size, sb.size);
		if (memcmp(sa.data, sb.data, sa.size) != 0)
			fail_msg("%s: machine code differs with -lineinfo", sa.name);
		n++;
	}
	assert_int_equal(count_sections(b, bsize, ".text."), n);
	return n;
}

/* ---- exports ------------------------------------------------------------------------------ */

static void names_of(const char *path, char *out, size_t len)
{
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s' | awk '$2 ~ /^[TtWi]$/ {print $3}' | sort",
		 path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = 0;
	assert_int_equal(pclose(p), 0);
}

static void check_exports(const char *dropin, const char *real, const char *node)
{
	static char a[65536], b[65536];
	names_of(dropin, a, sizeof(a));
	names_of(real, b, sizeof(b));
	assert_true(strlen(b) > 100);
	assert_string_equal(a, b); /* versions included: name@@libnvrtc.so.13 */
	void *h = must_open(dropin);
	assert_non_null(dlvsym(h, strstr(node, "nvrtc") ? "nvrtcVersion" : "nvJitLinkVersion", node));
	dlclose(h);
}

static void test_exports(void **state)
{
	(void)state;
	check_exports(dropin_nvrtc, real_nvrtc, "libnvrtc.so.13");
	check_exports(dropin_jitlink, real_jitlink, "libnvJitLink.so.13");
}

/* ---- -lineinfo changes no machine code (the real libraries alone) ------------------------- */

static void test_lineinfo_same_sass(void **state)
{
	(void)state;
	void *h = must_open(real_nvrtc);
	const char *archs[] = { "-arch=sm_90", "-arch=sm_80" };
	for (size_t i = 0; i < 2; i++) {
		size_t n0, n1;
		char *plain = nvrtc_build(h, archs[i], NULL, &n0);
		char *lines = nvrtc_build(h, archs[i], "-lineinfo", &n1);
		assert_int_equal(count_sections(plain, n0, ".nv_debug_ptx_txt"), 0);
		assert_true(count_sections(lines, n1, ".nv_debug_ptx_txt") >= 1);
		assert_true(same_text(plain, n0, lines, n1) >= 4); /* the 4 kernels (d_mix may be inlined) */
		free(plain);
		free(lines);
	}
	size_t np, n0, n1;
	char *ptx = nvrtc_build(h, "-arch=compute_90", NULL, &np);
	void *jl = must_open(real_jitlink);
	char *plain = jitlink_build(jl, ptx, np, NULL, &n0);
	char *lines = jitlink_build(jl, ptx, np, "-lineinfo", &n1);
	assert_int_equal(count_sections(plain, n0, ".nv_debug_ptx_txt"), 0);
	assert_true(count_sections(lines, n1, ".nv_debug_ptx_txt") >= 1);
	assert_true(same_text(plain, n0, lines, n1) >= 4);
	free(ptx);
	free(plain);
	free(lines);
}

/* ---- the drop-ins, each scenario in a child with its own environment ---------------------- */

/* Runs fn in a child with the environment entries given (NAME=VALUE, NULL-terminated); the
 * child's exit status (0 when fn returned 0). */
static int in_child(int (*fn)(void), ...)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		va_list ap;
		va_start(ap, fn);
		for (const char *kv; (kv = va_arg(ap, const char *));)
			putenv((char *)kv);
		va_end(ap);
		_exit(fn());
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

/* With a child, cmocka's assertions cannot report: the scenarios return codes instead. */
static int sections_via_dropin(int *nvrtc_ptxtxt, int *jitlink_ptxtxt, const char *user_opt)
{
	void *h = dlopen(dropin_nvrtc, RTLD_NOW | RTLD_LOCAL);
	void *jl = dlopen(dropin_jitlink, RTLD_NOW | RTLD_LOCAL);
	if (!h || !jl)
		return 10;
	create_prog_t create = (create_prog_t)dlsym(h, "nvrtcCreateProgram");
	compile_t compile = (compile_t)dlsym(h, "nvrtcCompileProgram");
	size_t_get_t get_size = (size_t_get_t)dlsym(h, "nvrtcGetCUBINSize");
	bytes_get_t get = (bytes_get_t)dlsym(h, "nvrtcGetCUBIN");
	void *prog;
	const char *opts[2] = { "-arch=sm_90", user_opt };
	size_t n;
	if (create(&prog, source, "k.cu", 0, NULL, NULL) || compile(prog, user_opt ? 2 : 1, opts) ||
	    get_size(prog, &n))
		return 11;
	char *cubin = malloc(n);
	if (!cubin || get(prog, cubin))
		return 12;
	struct cubin_elf elf;
	struct cubin_elf_section sec;
	if (cubin_elf_open(&elf, cubin, n))
		return 13;
	*nvrtc_ptxtxt = cubin_elf_section_by_name(&elf, ".nv_debug_ptx_txt", &sec) == 0;
	free(cubin);
	/* nvJitLink: the PTX of a compute_90 compile, linked through the drop-in */
	const char *popts[1] = { "-arch=compute_90" };
	void *p2;
	size_t np;
	if (create(&p2, source, "k.cu", 0, NULL, NULL) || compile(p2, 1, popts) ||
	    ((size_t_get_t)dlsym(h, "nvrtcGetPTXSize"))(p2, &np))
		return 14;
	char *ptx = malloc(np);
	if (!ptx || ((bytes_get_t)dlsym(h, "nvrtcGetPTX"))(p2, ptx))
		return 15;
	void *link;
	const char *lopts[1] = { "-arch=sm_90" };
	size_t nc;
	if (((jl_create_t)dlsym(jl, "nvJitLinkCreate"))(&link, 1, lopts) ||
	    ((jl_add_t)dlsym(jl, "nvJitLinkAddData"))(link, 2, ptx, np, "k.ptx") ||
	    ((jl_complete_t)dlsym(jl, "nvJitLinkComplete"))(link) ||
	    ((jl_size_t)dlsym(jl, "nvJitLinkGetLinkedCubinSize"))(link, &nc))
		return 16;
	char *linked = malloc(nc);
	if (!linked || ((jl_get_t)dlsym(jl, "nvJitLinkGetLinkedCubin"))(link, linked))
		return 17;
	if (cubin_elf_open(&elf, linked, nc))
		return 18;
	*jitlink_ptxtxt = 0;
	for (size_t i = 0; i < elf.shnum; i++)
		if (cubin_elf_section(&elf, i, &sec) == 0 &&
		    !strncmp(sec.name, ".nv_debug_ptx_txt", 17))
			(*jitlink_ptxtxt)++;
	free(ptx);
	free(linked);
	return 0;
}

static int added(void)
{
	int a = 0, b = 0, rc = sections_via_dropin(&a, &b, NULL);
	return rc ? rc : (a && b) ? 0 : 1;
}

static int user_lineinfo(void)
{
	int a = 0, b = 0, rc = sections_via_dropin(&a, &b, "-lineinfo");
	return rc ? rc : a ? 0 : 1; /* a doubled option would have failed the compile */
}

static int disabled(void)
{
	int a = 1, b = 1, rc = sections_via_dropin(&a, &b, NULL);
	return rc ? rc : (!a && !b) ? 0 : 1;
}

static char env_ld[8400], env_real[8400];

static void test_dropin_adds_lineinfo(void **state)
{
	(void)state;
	snprintf(env_ld, sizeof(env_ld), "LD_LIBRARY_PATH=%s:%s", lib_dir, cuda_lib);
	/* the real libraries are found behind the drop-ins' own folder */
	assert_int_equal(in_child(added, env_ld, "CUBPF_DISABLE=", NULL), 0);
	assert_int_equal(in_child(user_lineinfo, env_ld, "CUBPF_DISABLE=", NULL), 0);
	assert_int_equal(in_child(disabled, env_ld, "CUBPF_DISABLE=1", NULL), 0);
}

static int version_is(int want)
{
	void *h = dlopen(dropin_nvrtc, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 10;
	int major = 0, minor = 0;
	int rc = ((version_t)dlsym(h, "nvrtcVersion"))(&major, &minor);
	if (want == 0)
		return rc == 0 && major == 13 ? 0 : 1;
	return rc == want ? 0 : 2;
}

static int version_ok(void)
{
	return version_is(0);
}

static int version_missing(void)
{
	return version_is(11); /* NVRTC_ERROR_INTERNAL_ERROR */
}

static void test_search(void **state)
{
	(void)state;
	snprintf(env_real, sizeof(env_real), "CUBPF_REAL_LIBNVRTC=%s", dropin_nvrtc);
	/* pointing at the drop-in itself: skipped, so no real library, an error and no loop */
	assert_int_equal(in_child(version_missing, env_real, "CUBPF_LOG=off", NULL), 0);
	snprintf(env_real, sizeof(env_real), "CUBPF_REAL_LIBNVRTC=%s", real_nvrtc);
	assert_int_equal(in_child(version_ok, env_real, NULL), 0);
	snprintf(env_ld, sizeof(env_ld), "LD_LIBRARY_PATH=%s:%s", lib_dir, cuda_lib);
	assert_int_equal(in_child(version_ok, env_ld, NULL), 0);
}

int main(void)
{
	set_paths();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exports),
		cmocka_unit_test(test_lineinfo_same_sass),
		cmocka_unit_test(test_dropin_adds_lineinfo),
		cmocka_unit_test(test_search),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
