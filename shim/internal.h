/* shim/: private declarations shared by the files of the folder (the forwarding core; plug-ins
 * such as shim/live/ see only shim/shim.h, which make check-deps enforces). */
#ifndef CUBPF_SHIM_INTERNAL_H
#define CUBPF_SHIM_INTERNAL_H

/* The shim defines the driver's functions itself: ask cuda.h for every exact exported name
 * (legacy, _v2, _ptds/_ptsz) instead of its version-renaming macros. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>

#include "shim/shim.h"

/* Index of every exported name in the slot table (generated from the export lists). */
enum shim_idx {
#define SHIM_EXPORT(i, name, intercepted) SHIM_IDX_##name = i,
#include "exports.def"
#undef SHIM_EXPORT
	SHIM_NSLOTS
};

/* The slot table (trampolines.S): slot i holds the real driver's function i once shim_init
 * has run, a lazy-init stub before. */
extern void *shim_slots[SHIM_NSLOTS];
extern const char *const shim_names[SHIM_NSLOTS];

/* Calls the real function `name` with the prototype cuda.h gives it. */
#define SHIM_REAL(name) ((__typeof__(&name))shim_slots[SHIM_IDX_##name])

/* Export attribute of the hand-written wrappers (the rest of the shim is hidden). */
#define SHIM_API_EXPORT __attribute__((visibility("default")))

/* State after init (read-only afterwards). */
struct shim_state {
	int disabled;              /* CUBPF_DISABLE=1: pure pass-through */
	int have_driver;           /* a real driver was loaded */
	char real_path[4096];
	void *real_handle;
};
extern struct shim_state shim_state;

/* The hooks in force, or NULL (read on every intercepted call). */
extern _Atomic(const struct shim_hooks *) shim_hooks_now;

/* One-time initialization (constructor, lazy stubs and wrappers all call it; cheap once done). */
void shim_init(void);
static inline void shim_ensure_init(void)
{
	extern atomic_int shim_init_done;
	if (__builtin_expect(!atomic_load_explicit(&shim_init_done, memory_order_acquire), 0))
		shim_init();
}

/* The hooks in force after the one-time init, or NULL. */
static inline const struct shim_hooks *shim_hooks_get(void)
{
	shim_ensure_init();
	return atomic_load_explicit(&shim_hooks_now, memory_order_acquire);
}

/* Called by the lazy stubs: runs the init and says where slot `idx` now leads. */
void *shim_lazy_target(unsigned idx);

/* Finding the real driver (find.c): writes the chosen path and returns its dlopen handle, or
 * NULL with a description of what was tried in `why`. */
void *shim_find_driver(char *path, size_t pathlen, char *why, size_t whylen);

/* Registry of modules and kernels (registry.c). */
struct shim_kernel_info *shim_kernel_register(const void *handle, shim_module_t module,
					      shim_library_t library, const char *name);
/* cuKernelGetFunction: `func` names the same kernel as `kern`. */
void shim_kernel_alias(const void *func, const void *kern, shim_module_t module);
struct shim_kernel_info *shim_kernel_find(const void *handle);
void shim_count_unknown_launch(void);
/* A handle seen first at launch (obtained through a path we do not see): named by the real
 * driver (cuFuncGetName) and registered, or marked unknown so it is asked about once. */
struct shim_kernel_info *shim_kernel_discover(const void *handle);
struct shim_kernel_info *shim_kernel_mark_unknown(const void *handle);
int shim_kernel_is_unknown(const struct shim_kernel_info *k);
/* Iterates over the registered kernels (distinct names), for the exit summary. */
void shim_kernel_each(void (*fn)(const struct shim_kernel_info *k, void *arg), void *arg);
uint64_t shim_unknown_launches(void);
/* fork() handlers of the kernel table: prepare takes its lock, done (parent and child) frees it. */
void shim_kernel_fork_prepare(void);
void shim_kernel_fork_done(void);

/* Module-load statistics and log line (report.c). */
void shim_image_describe(const void *image, size_t size_hint, struct shim_image_info *info);
/* The same, keeping the opened image in *opened (NULL when it could not be opened): free it
 * with cubin_image_free. */
void shim_image_describe_open(const void *image, size_t size_hint, struct shim_image_info *info,
			      struct cubin_image **opened);
void shim_report_load(const struct shim_module_event *ev);
void shim_report_unload(CUresult r);
void shim_report_graph_launch(void);
void shim_report_exit(void);
/* In a fork()ed child: its exit summary is printed only if it loads modules of its own (a child
 * of a process that never used CUDA may; otherwise its counts are its parent's). */
void shim_report_forked(void);

/* cuGetProcAddress mapping (procaddr.c): our wrapper for a real driver pointer, or the pointer. */
void *shim_wrapper_for(void *real);
void shim_procaddr_setup(void);

#endif
