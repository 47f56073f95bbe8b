/* shim/core.c: one-time initialization, the slot table, hooks and plug-ins.
 *
 * Initialization runs once, on the first driver call, whichever thread makes it and whenever
 * (from a library constructor of the application, say): until then every slot holds a lazy
 * stub that enters here, and the wrappers call shim_ensure_init().  There is no constructor:
 * loading the shim costs nothing until CUDA is used, and the first call of every process goes
 * through the lazy path, so that path is exercised by every test rather than merely present.  A driver call made on the initializing thread while init is under way (the
 * real driver's constructor calling an exported name, say) gets CUDA_ERROR_NOT_INITIALIZED
 * rather than a deadlock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim/internal.h"

const char *const shim_names[SHIM_NSLOTS] = {
#define SHIM_EXPORT(i, name, intercepted) [i] = #name,
#include "exports.def"
#undef SHIM_EXPORT
};

struct shim_state shim_state;
_Atomic(const struct shim_hooks *) shim_hooks_now;
atomic_int shim_init_done;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int init_running;
static const struct shim_plugin *plugin; /* the library's plug-in, or NULL */

/* ---- what calls return when there is no driver to forward to ------------------------------ */

/* The real driver says NO_DEVICE from cuInit when it has no GPU and NOT_INITIALIZED from every
 * other call after that; without any driver we answer the same, so that applications take the
 * path they already take on a machine without a GPU. */
static CUresult nodrv_no_device(void) { return CUDA_ERROR_NO_DEVICE; }
static CUresult nodrv_not_initialized(void) { return CUDA_ERROR_NOT_INITIALIZED; }
/* The real driver lacks this name (an older driver, or the toolkit stub). */
static CUresult nodrv_not_supported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

/* Applications print the string of an error without checking the call's result: give them one
 * rather than leave their pointer unset. */
static CUresult nodrv_error_text(CUresult error, const char **text)
{
	if (!text)
		return CUDA_ERROR_INVALID_VALUE;
	*text = error == CUDA_ERROR_NO_DEVICE ? "no CUDA driver found by cubpf (no device)"
					      : "no CUDA driver found by cubpf";
	return CUDA_SUCCESS;
}

static void *nodrv_target(unsigned idx)
{
	const char *name = shim_names[idx];
	if (!strcmp(name, "cuGetErrorString") || !strcmp(name, "cuGetErrorName"))
		return (void *)nodrv_error_text;
	if (!strcmp(name, "cuInit") || !strcmp(name, "cuDriverGetVersion") ||
	    !strcmp(name, "cuDeviceGetCount") || !strncmp(name, "cuGetProcAddress", 16))
		return (void *)nodrv_no_device;
	return (void *)nodrv_not_initialized;
}

/* ---- init ------------------------------------------------------------------------------- */

/* Fills every slot: the real driver's function, or the answer for a missing one. */
static void fill_slots(void)
{
	unsigned missing = 0;
	for (unsigned i = 0; i < SHIM_NSLOTS; i++) {
		void *p = NULL;
		if (shim_state.real_handle)
			p = dlsym(shim_state.real_handle, shim_names[i]);
		if (!p) {
			p = shim_state.real_handle ? (void *)nodrv_not_supported : nodrv_target(i);
			missing += shim_state.real_handle != NULL;
		}
		__atomic_store_n(&shim_slots[i], p, __ATOMIC_RELEASE);
	}
	if (missing)
		shim_log(SHIM_LOG_DEBUG, "the real driver lacks %u of the %u driver functions; "
			 "they return CUDA_ERROR_NOT_SUPPORTED", missing, (unsigned)SHIM_NSLOTS);
}

/* A fork()ed child inherits the parent's counts: its exit summary says nothing unless it loads
 * modules of its own (report.c), and the kernel table's lock is never inherited held. */
static void forked_child(void)
{
	shim_kernel_fork_done();
	shim_report_forked();
}

/* Starts the plug-in: its hooks are in force from here on.  Called once, with init_lock held:
 * from the init, or from a registration that comes after it. */
static void plugin_start(void)
{
	if (shim_state.disabled)
		return;
	const struct shim_hooks *h = plugin->start();
	if (h)
		atomic_store(&shim_hooks_now, h);
	shim_log(SHIM_LOG_DEBUG, "plug-in %s: %s", plugin->name, h ? "started" : "stays out");
}

static void init_locked(void)
{
	char why[1024] = "";
	shim_log_setup();
	const char *d = getenv("CUBPF_DISABLE");
	shim_state.disabled = d && *d && strcmp(d, "0") != 0;
	shim_state.real_handle = shim_find_driver(shim_state.real_path,
						  sizeof(shim_state.real_path), why, sizeof(why));
	shim_state.have_driver = shim_state.real_handle != NULL;
	if (!shim_state.have_driver) {
		shim_state.real_path[0] = 0;
		shim_log(SHIM_LOG_WARN, "no real CUDA driver found (%s); every CUDA call will fail "
			 "with CUDA_ERROR_NO_DEVICE (set CUBPF_REAL_LIBCUDA to the driver's path)", why);
	} else {
		shim_log(SHIM_LOG_DEBUG, "real driver: %s%s", shim_state.real_path,
			 shim_state.disabled ? " (CUBPF_DISABLE: pass-through)" : "");
	}
	fill_slots();
	shim_procaddr_setup();
	pthread_atfork(shim_kernel_fork_prepare, shim_kernel_fork_done, forked_child);
	/* the plug-in installs its hooks before any load can happen */
	if (plugin)
		plugin_start();
}

void shim_init(void)
{
	if (atomic_load_explicit(&shim_init_done, memory_order_acquire) || init_running)
		return;
	pthread_mutex_lock(&init_lock);
	if (!atomic_load_explicit(&shim_init_done, memory_order_relaxed)) {
		init_running = 1;
		init_locked();
		init_running = 0;
		atomic_store_explicit(&shim_init_done, 1, memory_order_release);
	}
	pthread_mutex_unlock(&init_lock);
}

void *shim_lazy_target(unsigned idx)
{
	shim_init();
	if (!atomic_load_explicit(&shim_init_done, memory_order_acquire))
		return (void *)nodrv_not_initialized; /* re-entered during init, on this thread */
	return __atomic_load_n(&shim_slots[idx], __ATOMIC_ACQUIRE);
}

__attribute__((destructor)) static void shim_destructor(void)
{
	if (atomic_load(&shim_init_done) && !shim_state.disabled)
		shim_report_exit();
}

/* ---- public helpers ----------------------------------------------------------------------- */

int shim_plugin_register(const struct shim_plugin *p)
{
	int r = 0;
	pthread_mutex_lock(&init_lock);
	if (plugin) {
		r = -1;
	} else {
		plugin = p;
		if (atomic_load_explicit(&shim_init_done, memory_order_acquire))
			plugin_start(); /* a driver call came before the library's constructors */
	}
	pthread_mutex_unlock(&init_lock);
	if (r)
		shim_log(SHIM_LOG_WARN, "plug-in %s not started: %s is registered already", p->name,
			 plugin->name);
	return r;
}

int shim_set_hooks(const struct shim_hooks *hooks)
{
	static struct shim_hooks copies[2];
	static int next;
	shim_ensure_init();
	if (shim_state.disabled)
		return -1;
	if (!hooks) {
		atomic_store(&shim_hooks_now, NULL);
		return 0;
	}
	/* Two buffers: a caller of the previous hooks may still be reading them. */
	pthread_mutex_lock(&init_lock);
	copies[next] = *hooks;
	atomic_store(&shim_hooks_now, &copies[next]);
	next ^= 1;
	pthread_mutex_unlock(&init_lock);
	return 0;
}

void *shim_real(const char *name)
{
	shim_ensure_init();
	if (!shim_state.real_handle || !name)
		return NULL;
	return dlsym(shim_state.real_handle, name);
}

const char *shim_real_path(void)
{
	shim_ensure_init();
	return shim_state.have_driver ? shim_state.real_path : NULL;
}

uint64_t shim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint32_t shim_api_id(const char *name)
{
	static __thread const char *last; /* events pass the table's own pointers: mostly one test */
	static __thread uint32_t last_id;
	if (name == last)
		return last_id;
	for (uint32_t i = 0; i < SHIM_NSLOTS; i++)
		if (shim_names[i] == name || !strcmp(shim_names[i], name)) {
			last = name, last_id = i;
			return i;
		}
	return UINT32_MAX;
}

uint32_t shim_tid(void)
{
	static __thread uint32_t tid;
	if (!tid)
		tid = (uint32_t)syscall(SYS_gettid);
	return tid;
}

/* Marks the file as a cubpf shim, so that neither the driver search (find.c) nor the export
 * generator (gen.sh) mistakes an installed copy of the shim for the real driver. */
__attribute__((section(".note.cubpf"), used, aligned(4)))
static const struct { uint32_t namesz, descsz, type; char name[8]; } shim_note = {
	6, 0, 1, "cubpf",
};
