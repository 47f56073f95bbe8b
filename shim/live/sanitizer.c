/* shim/live/sanitizer.c: the second backend (issue 29), experimental.  Kernels shipped as SASS
 * only (cuBLAS, cutlass, cuDNN, PyTorch's own) cannot be rewritten as PTX; NVIDIA's Compute
 * Sanitizer patching API calls device functions at chosen instructions of them.  This file
 * loads that library, subscribes to its launch callbacks and patches, lazily, the modules of
 * the SASS-only kernels that a program's glob selects, with patch functions compiled from the
 * same eBPF programs (ptx-rewriter/patch.c) and sharing the same maps.
 *
 * Off unless asked for (CUBPF_SANITIZER=auto|PATH, `cubpf run --sanitizer [PATH]`): with it off
 * nothing here runs, nothing is loaded and nothing subscribes.  Asked for, but with no GPU
 * program it could patch (kprobe, kretprobe, memprobe), the same.  The facts it rests on were
 * measured on an H200 (shared/studies/sass-patching-2026-11-27.md):
 *  - the library must subscribe before the first context exists (after cuInit is fine): it
 *    subscribes in the driver_initialized hook, after the first successful cuInit;
 *  - a module can be patched just before its first launch and that launch is instrumented;
 *    patching every module would cost seconds, so only the modules of selected kernels are
 *    patched, by the launch hook before the real launch (the study patched from the
 *    SANITIZER_CBID_LAUNCH_BEGIN callback, which deadlocks the driver on a launch to a created
 *    stream: launch_module);
 *  - patch functions cannot read the kernel's parameters: the launch hook copies them (the
 *    first 8 bytes of each, sizes from cuFuncGetParamInfo) into the launch record
 *    (ptx-rewriter/layout.h), which the callback copies to the device on the launch's stream
 *    and hands to the patches (sanitizerSetLaunchCallbackData);
 *  - the patch API's calls are serialized (one lock here).
 * Every failure leaves the kernel unpatched, with one warning giving the reason and a count in
 * the exit report, as on the PTX path.
 *
 * Run-time needs: the library (found as described at find_library), and ptxas to assemble the
 * patch functions in tools-patch mode, once per SM architecture (find_ptxas).
 *
 * Threads: the launch hook and the callback run on the application's launching thread (the
 * callback inside the real launch call); a per-thread record carries the parameters from one
 * to the other.  Graph launches have no launch hook: their records carry no parameters.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <link.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim/live/internal.h"
#include "shim/live/sanitizer.h"

extern char **environ;

#define SAN_RECORDS 1024u       /* launch records per context (slot 0: all zero, "no probe") */
#define SAN_HASH 1024u

/* A kernel name as this backend decided it, once. */
struct san_kernel {
	char *name;
	bool selected;              /* some program patches it and the PTX path did not */
	bool ptx;                   /* the PTX path instrumented a kernel of that name */
	uint32_t id;                /* ctx->kernel_id */
	uint32_t progs;             /* bit q: patch program q runs (shim_live_san_progs order) */
	uint32_t nparams;
	uint8_t psize[CUBPF_MAX_KERNEL_PARAMS];
	uint64_t launches, unpatched;
	bool no_module;             /* its module could not be found (warned once) */
	uint64_t patched_gen;       /* the context (san_ctx.gen) and handle whose module the launch */
	const void *patched_func;   /* hook last found patched: their next launch skips the look-up */
	uint64_t threads;           /* grid x block summed over the patched launches */
	struct san_kernel *next;
};

struct san_module {
	void *module;
	int state;                  /* 1 patched, -1 failed */
	struct san_module *next;
};

struct san_ctx {
	void *ctx;
	uint64_t gen;               /* unique per entry (a handle and an address may come back) */
	struct live_ctx *lc;
	int patches;                /* 1: the patch functions are in the context */
	CUdeviceptr rec_dev;
	struct ptx_patch_record *rec_host;
	uint32_t next_rec;
	struct san_module *mods;
	struct san_ctx *next;
};

struct san_cubin {
	uint32_t sm;
	char *path;                 /* NULL: failed (why) */
	char why[LIVE_ERRLEN];
	struct san_cubin *next;
};

static struct {
	atomic_int wanted;          /* set up (CUBPF_SANITIZER and something to patch) */
	atomic_int active;          /* subscribed */
	atomic_int init_once;
	void *lib;
	struct shim_san_api api;
	shim_san_subscriber sub;
	char lib_path[4096];
	char ptxas[4096];
	char tmpdir[256];
	struct ptx_prog progs[PTX_PATCH_MAX_PROGS]; /* the patchable GPU programs */
	uint32_t prog_index[PTX_PATCH_MAX_PROGS];  /* their index among the session's programs */
	uint32_t nprogs;
	struct ptx_patch_module sites;              /* the sites of the last module generated */
	struct san_kernel *kernels[SAN_HASH];
	struct san_ctx *ctxs;
	struct san_cubin *cubins;
	atomic_uint modules_patched, modules_failed, launches, launches_unpatched;
} san;

static pthread_mutex_t san_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t san_ctx_gen;    /* the last san_ctx.gen given (lock held) */
/* Set while this thread holds san_lock (the lock is not recursive). */
static __thread bool san_holding;

static void san_enter(void)
{
	pthread_mutex_lock(&san_lock);
	san_holding = true;
}

static void san_leave(void)
{
	san_holding = false;
	pthread_mutex_unlock(&san_lock);
}

/* Parameters of the launch this thread is making, from the launch hook to the callback. */
static __thread struct {
	struct san_kernel *k;
	uint64_t params[CUBPF_MAX_KERNEL_PARAMS];
} pending;

static const char *san_error(shim_san_result r)
{
	const char *s = NULL;
	if (san.api.sanitizerGetResultString && san.api.sanitizerGetResultString(r, &s) == 0 && s)
		return s;
	static __thread char buf[32];
	snprintf(buf, sizeof(buf), "error %d", r);
	return buf;
}

/* ---- finding the library and ptxas ---- */

static bool readable(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, R_OK) == 0;
}

static bool in_dir(const char *dir, const char *sub, const char *file, char *out, size_t n)
{
	if (!dir || !*dir)
		return false;
	int w = snprintf(out, n, "%s/%s%s%s", dir, sub, *sub ? "/" : "", file);
	return w > 0 && (size_t)w < n && readable(out);
}

/* The first match of a glob pattern. */
static bool first_glob(const char *pattern, char *out, size_t n)
{
	glob_t g;
	bool ok = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0 &&
		  snprintf(out, n, "%s", g.gl_pathv[0]) < (int)n;
	globfree(&g);
	return ok && readable(out);
}

/* A Python prefix's nvidia wheels folder: PREFIX/lib/python3.X/site-packages/nvidia. */
static bool in_prefix(const char *prefix, const char *rel, char *out, size_t n)
{
	char pat[4096];
	if (!prefix || !*prefix)
		return false;
	snprintf(pat, sizeof(pat), "%s/lib/python3*/site-packages/nvidia/%s", prefix, rel);
	return first_glob(pat, out, n);
}

/* The nvidia folder of a loaded wheel library (PyTorch loads nvidia/cublas/lib/... from its
 * environment's site-packages before any CUDA call). */
struct wheel_search {
	char nvidia[4096];
};

static int wheel_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct wheel_search *w = data;
	const char *at = info->dlpi_name ? strstr(info->dlpi_name, "-packages/nvidia/") : NULL;
	if (!at || w->nvidia[0])
		return 0;
	size_t len = (size_t)(at - info->dlpi_name) + strlen("-packages/nvidia");
	if (len < sizeof(w->nvidia))
		snprintf(w->nvidia, sizeof(w->nvidia), "%.*s", (int)len, info->dlpi_name);
	return w->nvidia[0] != 0;
}

static bool in_loaded_wheels(const char *rel, char *out, size_t n)
{
	struct wheel_search w = {""};
	dl_iterate_phdr(wheel_cb, &w);
	if (!w.nvidia[0])
		return false;
	char pat[4200];
	snprintf(pat, sizeof(pat), "%s/%s", w.nvidia, rel);
	return first_glob(pat, out, n);
}

static bool auto_search(const char *setting)
{
	return !strcmp(setting, "auto") || !strcmp(setting, "1");
}

/* The library: CUBPF_SANITIZER's path (a file, or a folder holding it) when it names one;
 * with "auto" (or "1"): the toolkit's compute-sanitizer folder under CUDA_HOME, CUDA_PATH and
 * /usr/local/cuda; then the nvidia-cuda-sanitizer-api wheel's folder
 * (site-packages/nvidia/cuda_sanitizer_api/.../libsanitizer-public.so) under VIRTUAL_ENV,
 * CONDA_PREFIX, or beside the nvidia wheels the process has loaded; then the loader's own
 * search (LD_LIBRARY_PATH).  Returns true with the path in out ("" for the loader's search). */
static bool find_library(const char *setting, char *out, size_t n, char *tried, size_t tn)
{
	const char *lib = SHIM_SAN_LIBRARY;
	const char *wheel = "cuda_sanitizer_api/*/" SHIM_SAN_LIBRARY;
	if (!auto_search(setting)) {
		struct stat st;
		bool dir = stat(setting, &st) == 0 && S_ISDIR(st.st_mode);
		if (dir ? in_dir(setting, "", lib, out, n)
			: readable(setting) && snprintf(out, n, "%s", setting) < (int)n)
			return true;
		snprintf(tried, tn, "%s", setting);
		out[0] = 0;
		return false;
	}
	const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
	for (size_t i = 0; i < 3; i++)
		if (in_dir(homes[i], "compute-sanitizer", lib, out, n))
			return true;
	if (in_prefix(getenv("VIRTUAL_ENV"), wheel, out, n) ||
	    in_prefix(getenv("CONDA_PREFIX"), wheel, out, n) || in_loaded_wheels(wheel, out, n))
		return true;
	snprintf(tried, tn, "$CUDA_HOME, $CUDA_PATH and /usr/local/cuda's compute-sanitizer folder, "
			    "the nvidia-cuda-sanitizer-api wheel under $VIRTUAL_ENV, $CONDA_PREFIX "
			    "and the loaded nvidia wheels, and the loader's path");
	out[0] = 0;
	return false;
}

/* ptxas for the patch functions: CUBPF_PTXAS; the toolkit beside the library
 * (compute-sanitizer/../bin); CUDA_HOME, CUDA_PATH, /usr/local/cuda; the nvidia-cuda-nvcc
 * wheel's (site-packages/nvidia/cuda_nvcc/bin); else "ptxas" from PATH. */
static void find_ptxas(char *out, size_t n)
{
	const char *e = getenv("CUBPF_PTXAS");
	if (e && *e) {
		snprintf(out, n, "%s", e);
		return;
	}
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", san.lib_path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		if (in_dir(dir, "../bin", "ptxas", out, n) && access(out, X_OK) == 0)
			return;
	}
	const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
	for (size_t i = 0; i < 3; i++)
		if (in_dir(homes[i], "bin", "ptxas", out, n) && access(out, X_OK) == 0)
			return;
	if (in_prefix(getenv("VIRTUAL_ENV"), "cuda_nvcc/bin/ptxas", out, n) ||
	    in_loaded_wheels("cuda_nvcc/bin/ptxas", out, n))
		return;
	snprintf(out, n, "ptxas");
}

/* ---- programs ---- */

static void session_defs(struct vm_map_def *defs)
{
	for (uint32_t i = 0; i < shim_live_session.nmaps && i < PTX_PATCH_MAX_MAPS; i++)
		defs[i] = shim_live_session.maps[i].def;
}

/* Whether a program compiles to patch functions (what the backend refuses that the PTX path
 * takes: ctx->insn_index of a memprobe, see ptx-rewriter/ptx.h); else why in `why`. */
static bool patchable(const struct ptx_prog *prog, char *why, size_t n)
{
	struct vm_map_def defs[PTX_PATCH_MAX_MAPS];
	session_defs(defs);
	struct ptx_patch_module pm;
	if (ptx_gen_patch_module(prog, 1, defs, shim_live_session.nmaps, 90, &pm, why, n))
		return false;
	ptx_buf_free(&pm.ptx);
	return true;
}

/* The session's GPU programs this backend can patch; false when there is none. */
static bool pick_programs(void)
{
	san.nprogs = 0;
	for (uint32_t p = 0; p < shim_live_session.nprogs; p++) {
		enum ptx_patch_site s[PTX_PATCH_MAX_SITES];
		char why[PTX_ERRLEN];
		if (!ptx_patch_sites(shim_live_session.progs[p].kind, s, PTX_PATCH_MAX_SITES))
			continue;
		if (!patchable(&shim_live_session.progs[p], why, sizeof(why))) {
			shim_log(SHIM_LOG_WARN, "live: sanitizer: program %s is not patched into "
				 "SASS-only kernels: %s (it runs where the PTX path instruments)",
				 shim_live_session.progs[p].name, why);
			continue;
		}
		if (san.nprogs == PTX_PATCH_MAX_PROGS) {
			shim_log(SHIM_LOG_WARN, "live: sanitizer: more than %u programs to patch; "
				 "%s and later ones run on the PTX path only", PTX_PATCH_MAX_PROGS,
				 shim_live_session.progs[p].name);
			break;
		}
		san.prog_index[san.nprogs] = p;
		san.progs[san.nprogs++] = shim_live_session.progs[p];
	}
	return san.nprogs > 0;
}

bool shim_live_san_setup(void)
{
	const char *v = getenv("CUBPF_SANITIZER");
	if (!v || !*v || !strcmp(v, "0"))
		return false;
	if (shim_live_session.nmaps > PTX_PATCH_MAX_MAPS) {
		shim_log(SHIM_LOG_WARN, "live: sanitizer: %u maps, more than the %u a patch function "
			 "reaches: SASS-only kernels run without probes", shim_live_session.nmaps,
			 PTX_PATCH_MAX_MAPS);
		return false;
	}
	if (!pick_programs()) {
		shim_log(SHIM_LOG_INFO, "live: sanitizer: no kprobe, kretprobe or memprobe program: "
			 "the library is not loaded");
		return false;
	}
	atomic_store(&san.wanted, 1);
	return true;
}

/* ---- loading and subscribing ---- */

static void on_callback(void *user, int domain, uint32_t cbid, const void *data);

static int load_api(char *err, size_t n)
{
	const char *path = san.lib_path[0] ? san.lib_path : SHIM_SAN_LIBRARY;
	san.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!san.lib) {
		const char *e = dlerror();
		snprintf(err, n, "dlopen %s: %s", path, e ? e : "failed");
		return -1;
	}
#define SAN_SYM(name) \
	if (!(*(void **)&san.api.name = dlsym(san.lib, #name))) { \
		snprintf(err, n, "%s lacks %s", path, #name); \
		return -1; \
	}
	SAN_SYM(sanitizerSubscribe)
	SAN_SYM(sanitizerUnsubscribe)
	SAN_SYM(sanitizerEnableDomain)
	SAN_SYM(sanitizerAddPatchesFromFile)
	SAN_SYM(sanitizerPatchInstructions)
	SAN_SYM(sanitizerPatchModule)
	SAN_SYM(sanitizerSetLaunchCallbackData)
	SAN_SYM(sanitizerAlloc)
	SAN_SYM(sanitizerMemcpyHostToDeviceAsync)
#undef SAN_SYM
	*(void **)&san.api.sanitizerGetResultString = dlsym(san.lib, "sanitizerGetResultString");
	return 0;
}

static int subscribe(char *err, size_t n)
{
	shim_san_result r = san.api.sanitizerSubscribe(&san.sub, on_callback, NULL);
	if (r != SHIM_SAN_SUCCESS) {
		snprintf(err, n, "sanitizerSubscribe: %s", san_error(r));
		return -1;
	}
	/* the resource domain too: the study's working set-up enabled both */
	int domains[2] = {SHIM_SAN_DOMAIN_RESOURCE, SHIM_SAN_DOMAIN_LAUNCH};
	for (int i = 0; i < 2; i++)
		if ((r = san.api.sanitizerEnableDomain(1, san.sub, domains[i])) != SHIM_SAN_SUCCESS) {
			snprintf(err, n, "sanitizerEnableDomain(%d): %s", domains[i], san_error(r));
			san.api.sanitizerUnsubscribe(san.sub);
			return -1;
		}
	return 0;
}

/* After the first successful cuInit, before any context: find, load, subscribe.  Once. */
void shim_live_san_driver_initialized(int result, void *user)
{
	(void)user;
	if (result != CUDA_SUCCESS || !atomic_load(&san.wanted) ||
	    atomic_exchange(&san.init_once, 1))
		return;
	char tried[1024] = "", err[LIVE_ERRLEN] = "";
	const char *setting = getenv("CUBPF_SANITIZER");
	if (!find_library(setting, san.lib_path, sizeof(san.lib_path), tried, sizeof(tried))) {
		/* the loader's own search (LD_LIBRARY_PATH), for "auto" only */
		void *h = auto_search(setting) ? dlopen(SHIM_SAN_LIBRARY, RTLD_NOW | RTLD_LOCAL)
					       : NULL;
		if (!h) {
			shim_log(SHIM_LOG_WARN, "live: sanitizer: %s not found (looked in %s): "
				 "SASS-only kernels run without probes; get it with `pip install "
				 "nvidia-cuda-sanitizer-api` or the CUDA toolkit, or give its path "
				 "in CUBPF_SANITIZER", SHIM_SAN_LIBRARY, tried);
			return;
		}
		dlclose(h); /* load_api opens it again, by name */
	}
	if (load_api(err, sizeof(err)) || subscribe(err, sizeof(err))) {
		shim_log(SHIM_LOG_WARN, "live: sanitizer: %s: SASS-only kernels run without probes",
			 err);
		return;
	}
	find_ptxas(san.ptxas, sizeof(san.ptxas));
	atomic_store(&san.active, 1);
	shim_log(SHIM_LOG_INFO, "live: sanitizer: %s subscribed; %u programs patch SASS-only "
		 "kernels (ptxas: %s)", san.lib_path[0] ? san.lib_path : SHIM_SAN_LIBRARY,
		 san.nprogs, san.ptxas);
}

/* ---- the patch cubin of an SM architecture ---- */

/* Runs ptxas in tools-patch mode; 0, or -1 with the first line of its output. */
static int run_ptxas(const char *in, const char *out, uint32_t sm, char *err, size_t n)
{
	char arch[32], log[512];
	snprintf(arch, sizeof(arch), "-arch=sm_%u", sm);
	snprintf(log, sizeof(log), "%s.log", out);
	char *argv[] = {san.ptxas, "--compile-as-tools-patch", arch, "-o", (char *)out,
			(char *)in, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, san.ptxas, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		snprintf(err, n, "%.300s: %s", san.ptxas, strerror(rc));
		return -1;
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && readable(out))
		return 0;
	char first[200] = "";
	FILE *f = fopen(log, "r");
	if (f) {
		if (!fgets(first, sizeof(first), f))
			first[0] = 0;
		fclose(f);
	}
	first[strcspn(first, "\n")] = 0;
	snprintf(err, n, "%.200s --compile-as-tools-patch %s failed: %s", san.ptxas, arch,
		 first[0] ? first : "no message");
	return -1;
}

static int write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	size_t w = fwrite(data, 1, len, f);
	return fclose(f) == 0 && w == len ? 0 : -1;
}

/* Generates and assembles the patch module for sm (lock held). */
static void make_cubin(struct san_cubin *cb)
{
	if (!san.tmpdir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(san.tmpdir, sizeof(san.tmpdir), "%s/cubpf-san-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(san.tmpdir)) {
			snprintf(cb->why, sizeof(cb->why), "mkdtemp %s: %s", san.tmpdir,
				 strerror(errno));
			san.tmpdir[0] = 0;
			return;
		}
	}
	struct vm_map_def defs[PTX_PATCH_MAX_MAPS];
	session_defs(defs);
	struct ptx_patch_module pm;
	if (ptx_gen_patch_module(san.progs, san.nprogs, defs, shim_live_session.nmaps,
				 (int)cb->sm, &pm, cb->why, sizeof(cb->why)))
		return;
	char in[400], out[400];
	snprintf(in, sizeof(in), "%s/patch_sm%u.ptx", san.tmpdir, cb->sm);
	snprintf(out, sizeof(out), "%s/patch_sm%u.cubin", san.tmpdir, cb->sm);
	if (write_file(in, pm.ptx.data, pm.ptx.len))
		snprintf(cb->why, sizeof(cb->why), "writing %s: %s", in, strerror(errno));
	else if (!run_ptxas(in, out, cb->sm, cb->why, sizeof(cb->why)))
		cb->path = strdup(out);
	san.sites = pm;
	san.sites.ptx = (struct ptx_buf){0};
	ptx_buf_free(&pm.ptx);
	if (!cb->path && !cb->why[0])
		snprintf(cb->why, sizeof(cb->why), "out of memory");
}

static struct san_cubin *cubin_for(uint32_t sm)
{
	for (struct san_cubin *c = san.cubins; c; c = c->next)
		if (c->sm == sm)
			return c;
	struct san_cubin *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sm = sm;
	make_cubin(c);
	if (!c->path)
		shim_log(SHIM_LOG_WARN, "live: sanitizer: no patch functions for sm_%u (%s): "
			 "SASS-only kernels run without probes there", sm, c->why);
	c->next = san.cubins;
	san.cubins = c;
	return c;
}

/* ---- kernels ---- */

static uint32_t name_hash(const char *s)
{
	return ptx_kernel_id(s) % SAN_HASH;
}

static struct san_kernel *kernel_find(const char *name)
{
	for (struct san_kernel *k = san.kernels[name_hash(name)]; k; k = k->next)
		if (!strcmp(k->name, name))
			return k;
	return NULL;
}

/* Parameter sizes of a CUfunction (or a CUkernel of a library), when the driver tells them
 * (cuFuncGetParamInfo / cuKernelGetParamInfo, CUDA 12.4 and later); else none. */
static void param_sizes(struct san_kernel *k, const struct shim_launch_event *ev)
{
	typedef CUresult (*info_fn)(void *, size_t, size_t *, size_t *);
	static info_fn fn_info, kern_info;
	static bool looked;
	if (!looked) {
		fn_info = (info_fn)shim_real("cuFuncGetParamInfo");
		kern_info = (info_fn)shim_real("cuKernelGetParamInfo");
		looked = true;
	}
	info_fn f = ev->kernel && ev->kernel->library ? kern_info : fn_info;
	for (k->nparams = 0; f && k->nparams < CUBPF_MAX_KERNEL_PARAMS; k->nparams++) {
		size_t off = 0, size = 0;
		if (f((void *)ev->func, k->nparams, &off, &size) != CUDA_SUCCESS)
			break;
		k->psize[k->nparams] = (uint8_t)(size < 8 ? size : 8);
	}
}

/* The decision for a kernel name, made at its first launch (lock held). */
static struct san_kernel *kernel_get(const char *name, const struct shim_launch_event *ev)
{
	struct san_kernel *k = kernel_find(name);
	if (k)
		return k;
	if (!(k = calloc(1, sizeof(*k))) || !(k->name = strdup(name))) {
		free(k);
		return NULL;
	}
	/* an id before this backend gave one: the PTX path instrumented that name */
	k->ptx = shim_live_kernel_find(name) != 0;
	const char *glob = shim_live_session.kernel_glob;
	for (uint32_t q = 0; q < san.nprogs && !k->ptx; q++) {
		const char *attach = san.progs[q].attach ? san.progs[q].attach : "*";
		if (ptx_kernel_matches(attach, name) && (!glob || ptx_kernel_matches(glob, name)))
			k->progs |= 1u << q;
	}
	k->selected = k->progs != 0;
	if (k->selected) {
		k->id = shim_live_kernel_id_flagged(name, STORE_KERNEL_ID_SANITIZER);
		param_sizes(k, ev);
	}
	uint32_t h = name_hash(name);
	k->next = san.kernels[h];
	san.kernels[h] = k;
	return k;
}

/* ---- contexts ---- */

/* The context's entry; one whose maps are gone (the context was torn down, and its handle may
 * now name a new context) is forgotten: the driver freed its records and patches with it. */
static struct san_ctx *ctx_find(void *ctx)
{
	for (struct san_ctx **pc = &san.ctxs; *pc; pc = &(*pc)->next) {
		struct san_ctx *c = *pc;
		if (c->ctx != ctx)
			continue;
		if (shim_live_ctx_find(ctx) == c->lc)
			return c;
		*pc = c->next;
		for (struct san_module *m = c->mods, *n; m; m = n) {
			n = m->next;
			free(m);
		}
		free(c->rec_host);
		free(c);
		return NULL;
	}
	return NULL;
}

/* Contexts that could not be prepared: warned once, never tried again. */
#define SAN_FAILED_CTX 16
static void *failed_ctx[SAN_FAILED_CTX];
static uint32_t nfailed_ctx;

static bool ctx_failed(void *ctx)
{
	for (uint32_t i = 0; i < nfailed_ctx && i < SAN_FAILED_CTX; i++)
		if (failed_ctx[i] == ctx)
			return true;
	return false;
}

/* Records for the context's launches (slot 0 stays zero), in device memory. */
static int ctx_records(struct san_ctx *c, char *err, size_t n)
{
	size_t bytes = (size_t)SAN_RECORDS * PTX_PATCH_REC_SIZE;
	CUdeviceptr dev = 0;
	if (!(c->rec_host = calloc(SAN_RECORDS, PTX_PATCH_REC_SIZE)) ||
	    shim_live_cu.cuMemAlloc_v2(&dev, bytes) != CUDA_SUCCESS ||
	    shim_live_cu.cuMemsetD8Async(dev, 0, bytes, c->lc->stream) != CUDA_SUCCESS ||
	    shim_live_cu.cuStreamSynchronize(c->lc->stream) != CUDA_SUCCESS) {
		if (dev)
			shim_live_cu.cuMemFree_v2(dev);
		free(c->rec_host);
		snprintf(err, n, "no memory for %u launch records", SAN_RECORDS);
		return -1;
	}
	c->rec_dev = dev;
	return 0;
}

/* The context's maps, patch functions and launch records, made on the application's thread
 * before the launch, outside the callback (which makes only the patch and launch-data calls):
 * the maps (as the PTX path's), the patch cubin for its SM (ptxas, once per SM), the patches
 * added to the context (sanitizerAddPatchesFromFile), the records.  NULL when it cannot be had
 * (one warning per context).  Lock held. */
static struct san_ctx *ctx_prepare(CUcontext ctx, const char *kernel)
{
	struct san_ctx *c = ctx_find(ctx);
	if (c || ctx_failed(ctx))
		return c;
	char err[LIVE_ERRLEN] = "";
	struct live_ctx *lc = shim_live_ctx_get(ctx, err, sizeof(err));
	if (!lc && !err[0])
		snprintf(err, sizeof(err), "the context's maps cannot be had");
	struct san_cubin *cb = lc ? cubin_for(lc->sm) : NULL;
	if (lc && (!cb || !cb->path))
		snprintf(err, sizeof(err), "no patch functions for sm_%u", lc->sm);
	if (!err[0] && !(c = calloc(1, sizeof(*c))))
		snprintf(err, sizeof(err), "out of memory");
	if (!err[0]) {
		c->ctx = ctx;
		c->lc = lc;
		shim_san_result r = san.api.sanitizerAddPatchesFromFile(cb->path, ctx);
		if (r != SHIM_SAN_SUCCESS)
			snprintf(err, sizeof(err), "sanitizerAddPatchesFromFile: %s (did the library "
				 "subscribe after the context was made?)", san_error(r));
		else
			(void)ctx_records(c, err, sizeof(err));
	}
	if (err[0]) {
		free(c);
		if (nfailed_ctx < SAN_FAILED_CTX)
			failed_ctx[nfailed_ctx++] = ctx;
		shim_live_note(SHIM_LOG_WARN, STORE_NOINST_OTHER, NULL, kernel, 1, lc ? lc->sm : 0,
			       "live: sanitizer: context %p: %s; its SASS-only kernels (%s first) run "
			       "without probes", (void *)ctx, err, kernel);
		return NULL;
	}
	c->patches = 1;
	c->gen = ++san_ctx_gen;
	c->next = san.ctxs;
	san.ctxs = c;
	return c;
}

/* ---- the launch hook (before the real launch) ---- */

static struct san_module *module_find(struct san_ctx *c, void *module)
{
	for (struct san_module *m = c->mods; m; m = m->next)
		if (m->module == module)
			return m;
	return NULL;
}

/* Patches the module (once): every site the programs need, then the module.  0, or -1 (warned
 * once).  Called before the real launch, never from its callback (launch_module says why). */
static int patch_module(struct san_ctx *c, void *module, struct san_kernel *k)
{
	struct san_module *m = module_find(c, module);
	if (m)
		return m->state > 0 ? 0 : -1;
	if (!(m = calloc(1, sizeof(*m))))
		return -1;
	m->module = module;
	m->next = c->mods;
	c->mods = m;
	char why[LIVE_ERRLEN] = "";
	shim_san_result r = SHIM_SAN_SUCCESS;
	for (uint32_t i = 0; !why[0] && i < san.sites.site_cnt; i++) {
		char fn[64];
		ptx_patch_func_name(san.sites.sites[i], fn, sizeof(fn));
		r = san.api.sanitizerPatchInstructions((int)san.sites.sites[i], module, fn);
		if (r != SHIM_SAN_SUCCESS)
			snprintf(why, sizeof(why), "sanitizerPatchInstructions(%s): %s",
				 ptx_patch_site_name(san.sites.sites[i]), san_error(r));
	}
	if (!why[0] && (r = san.api.sanitizerPatchModule(module)) != SHIM_SAN_SUCCESS)
		snprintf(why, sizeof(why), "sanitizerPatchModule: %s", san_error(r));
	m->state = why[0] ? -1 : 1;
	if (why[0]) {
		atomic_fetch_add(&san.modules_failed, 1);
		shim_live_note(SHIM_LOG_WARN, STORE_NOINST_OTHER, NULL, k->name, 1, c->lc->sm,
			       "live: sanitizer: the module of %s is not patched (%s); its kernels "
			       "run without probes", k->name, why);
		return -1;
	}
	atomic_fetch_add(&san.modules_patched, 1);
	shim_log(SHIM_LOG_INFO, "live: sanitizer: patched the module of %s (%u sites)", k->name,
		 san.sites.site_cnt);
	return 0;
}

/* The module of the launch's function, in the launching thread's context.  Modules are patched
 * here, before the real launch: sanitizerPatchModule called from inside the launch's callback
 * deadlocks the driver when the launch goes to a created stream (H100, driver 580.159.04,
 * 2026-11-28: the callback's patch waits for a lock the launch holds; on the legacy stream it
 * does not).  A CUkernel (the runtime's launches of library kernels) is first resolved to its
 * function in the current context, which loads the module if lazy loading has not yet. */
typedef CUresult (*get_module_fn)(void **, void *);
typedef CUresult (*kernel_fn)(void **, void *);
static get_module_fn get_module;
static kernel_fn kernel_function;

static void look_up_module_fns(void)
{
	get_module = (get_module_fn)shim_real("cuFuncGetModule");
	kernel_function = (kernel_fn)shim_real("cuKernelGetFunction");
}

static void *launch_module(const struct shim_launch_event *ev)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT; /* launches come from any thread */
	pthread_once(&once, look_up_module_fns);
	void *f = (void *)ev->func, *module = NULL;
	if (ev->kernel && ev->kernel->library && kernel_function &&
	    kernel_function(&f, (void *)ev->func) != CUDA_SUCCESS)
		f = (void *)ev->func;
	if (!get_module || get_module(&module, f) != CUDA_SUCCESS)
		return NULL;
	return module;
}


void shim_live_san_launching(const struct shim_launch_event *ev)
{
	if (!atomic_load_explicit(&san.active, memory_order_relaxed))
		return;
	pending.k = NULL;
	if (!ev->kernel || !ev->kernel->name)
		return;
	san_enter();
	struct san_kernel *k = kernel_get(ev->kernel->name, ev);
	CUcontext ctx = NULL;
	struct san_ctx *known = NULL;
	if (k && k->selected && (ctx = shim_live_launch_ctx()) &&
	    !((known = ctx_find(ctx)) && known->gen == k->patched_gen &&
	      k->patched_func == ev->func)) { /* else: patched already, nothing to look up */
		CUstreamCaptureMode m = shim_live_relax();
		struct san_ctx *c = ctx_prepare(ctx, k->name);
		void *module = c ? launch_module(ev) : NULL;
		if (module && patch_module(c, module, k) == 0)
			k->patched_gen = c->gen, k->patched_func = ev->func;
		else if (c && !module && !k->no_module) {
			k->no_module = true;
			shim_live_note(SHIM_LOG_WARN, STORE_NOINST_OTHER, NULL, k->name, 1, c->lc->sm,
				       "live: sanitizer: the module of %s cannot be found "
				       "(cuFuncGetModule): it runs without probes", k->name);
		}
		shim_live_unrelax(m);
	}
	if (k && k->selected) {
		memset(pending.params, 0, sizeof(pending.params));
		for (uint32_t i = 0; ev->params && i < k->nparams; i++)
			if (ev->params[i])
				memcpy(&pending.params[i], ev->params[i], k->psize[i]);
		pending.k = k;
	}
	san_leave();
}

/* After the real launch: a launch that failed before its callback leaves nothing behind. */
void shim_live_san_launched(void)
{
	if (atomic_load_explicit(&san.active, memory_order_relaxed)) /* (every launch comes here) */
		pending.k = NULL;
}

/* ---- the callback (inside the real launch) ---- */

/* The record of this launch on the device, handed to the patches.  Slot 0 is all zero: a
 * launch of an unselected kernel in a patched module runs the patches, which return at once. */
static void set_record(struct san_ctx *c, const struct shim_san_launch_data *ld,
		       struct san_kernel *k)
{
	uint32_t slot = 0;
	if (k) {
		slot = 1 + c->next_rec++ % (SAN_RECORDS - 1);
		struct ptx_patch_record *r = &c->rec_host[slot];
		memset(r, 0, sizeof(*r));
		r->kernel_id = k->id;
		r->nparams = k->nparams;
		uint32_t mask = shim_live_control_mask();
		for (uint32_t q = 0; q < san.nprogs; q++)
			if ((k->progs >> q & 1) && (san.prog_index[q] >= 32 ||
						    (mask >> san.prog_index[q] & 1)))
				r->progs |= 1u << q;
		if (pending.k == k)
			memcpy(r->params, pending.params, sizeof(r->params));
		for (uint32_t i = 0; i < shim_live_session.nmaps; i++)
			r->maps[i] = c->lc->base[i];
		shim_san_result e = san.api.sanitizerMemcpyHostToDeviceAsync(
			(void *)(uintptr_t)(c->rec_dev + (CUdeviceptr)slot * PTX_PATCH_REC_SIZE), r,
			PTX_PATCH_REC_SIZE, ld->hStream);
		if (e != SHIM_SAN_SUCCESS)
			slot = 0; /* the patches run, and return at once */
	}
	void *ud = (void *)(uintptr_t)(c->rec_dev + (CUdeviceptr)slot * PTX_PATCH_REC_SIZE);
	san.api.sanitizerSetLaunchCallbackData(ld->hLaunch, ld->function, ld->hStream, ud);
}

static void on_launch(const struct shim_san_launch_data *ld)
{
	/* cubpf's own launches (clock.c), left alone before the lock: one made while this thread
	 * holds it (a context's first clock), and one from a thread that may hold the maps' lock,
	 * which a holder of san_lock preparing a context waits for (the snapshot thread refreshing
	 * a clock under a trace; test_san's t_own_launch) */
	if (san_holding || shim_live_own_launching())
		return;
	san_enter();
	/* this thread's launch hook decided the kernel (the callback's name need not be spelt as
	 * the application's); graph launches have no launch hook: their kernel by name */
	struct san_kernel *k = pending.k;
	if (!k && ld->functionName)
		k = kernel_find(ld->functionName);
	struct san_ctx *c = ctx_find(ld->context);
	struct san_module *m = c ? module_find(c, ld->module) : NULL;
	if (k && k->selected) {
		/* patched by the launch hook (a graph's launch has none: its module is patched
		 * only if a launch of one of its kernels came first) */
		if (m && m->state > 0) {
			set_record(c, ld, k);
			k->launches++;
			k->threads += (uint64_t)ld->gridDim_x * ld->gridDim_y * ld->gridDim_z *
				      ld->blockDim_x * ld->blockDim_y * ld->blockDim_z;
			atomic_fetch_add(&san.launches, 1);
		} else {
			k->unpatched++;
			atomic_fetch_add(&san.launches_unpatched, 1);
		}
	} else if (m && m->state > 0) {
		set_record(c, ld, NULL);
	}
	pending.k = NULL;
	san_leave();
}

static void on_callback(void *user, int domain, uint32_t cbid, const void *data)
{
	(void)user;
	if (domain == SHIM_SAN_DOMAIN_LAUNCH && cbid == SHIM_SAN_CBID_LAUNCH_BEGIN && data)
		on_launch(data);
}

/* ---- report and exit ---- */

static int cupti_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	const char *base = slash ? slash + 1 : info->dlpi_name;
	if (base && !strncmp(base, "libcupti", 8))
		*(const char **)data = info->dlpi_name;
	return *(const char **)data != NULL;
}

/* CUPTI loaded beside the subscribed backend (a profiler: PyTorch's, Nsight's injection): on
 * the H100 with driver 580 PyTorch's profiler then recorded no kernel at all (0 of 6;
 * tests/gpu/t_sass_coexist.sh), so the user hears why its profile is empty. */
static void warn_cupti(void)
{
	const char *cupti = NULL;
	dl_iterate_phdr(cupti_cb, &cupti);
	if (cupti)
		shim_log(SHIM_LOG_WARN, "live: sanitizer: %s is loaded in this process: with the "
			 "Sanitizer backend subscribed, CUPTI's activity records (profilers such as "
			 "PyTorch's or Nsight's) may miss kernels; run the profiler without "
			 "--sanitizer", cupti);
}

void shim_live_san_report(void)
{
	if (!atomic_load(&san.active))
		return;
	san_enter();
	for (uint32_t h = 0; h < SAN_HASH; h++)
		for (struct san_kernel *k = san.kernels[h]; k; k = k->next)
			if (k->selected)
				shim_log(SHIM_LOG_INFO, "live: backend sanitizer: kernel id %u = %s: %llu "
					 "launches patched (%llu threads), %llu unpatched", k->id,
					 k->name, (unsigned long long)k->launches,
					 (unsigned long long)k->threads,
					 (unsigned long long)k->unpatched);
	shim_log(SHIM_LOG_INFO, "live: sanitizer: %u modules patched, %u failed; %u launches "
		 "patched, %u ran without probes", atomic_load(&san.modules_patched),
		 atomic_load(&san.modules_failed), atomic_load(&san.launches),
		 atomic_load(&san.launches_unpatched));
	warn_cupti();
	static const char *const files[] = {"ptx", "cubin", "cubin.log"};
	for (struct san_cubin *c = san.cubins; c && san.tmpdir[0]; c = c->next)
		for (int i = 0; i < 3; i++) {
			char p[400];
			snprintf(p, sizeof(p), "%s/patch_sm%u.%s", san.tmpdir, c->sm, files[i]);
			unlink(p);
		}
	if (san.tmpdir[0])
		rmdir(san.tmpdir);
	san_leave();
}
