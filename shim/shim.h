/* shim: the drop-in libcuda.so.1 — its internal interface.
 *
 * libcuda.so.1 forwards every driver call to the real driver.  Most functions are one indirect
 * jump (generated trampolines); the calls that matter to cubpf have hand-written wrappers that
 * report what they see through the hooks below.  Later work (live probes, the trace writer, the
 * ring-buffer drain, shim/live/) is compiled into the same library as a plug-in: it registers
 * itself (shim_plugin_register) and the shim's init starts it, which gives the shim its hooks.
 * The forwarding core never names a plug-in; the CPU tests' copy of the shim links another
 * plug-in (tests/shim/hooks_plugin.c) through the same interface.
 *
 * Events, all delivered on the application's thread that made the call, while it is in it:
 *   module load   before the real call (a hook may substitute the image) and after it;
 *   kernel        when a CUfunction or CUkernel handle becomes known (name + module);
 *   launch        before the real call (a hook may substitute function and parameters) and after;
 *   unload        after cuModuleUnload / cuLibraryUnload;
 *   api           after copies, memsets, synchronisations, context and stream creation and graph
 *                 launches, with
 *                 begin/end timestamps (CLOCK_REALTIME ns, as struct cubpf_api_ctx) and thread id;
 *   event         after an event is created, before it is destroyed, before it is recorded;
 *   context end   before and after cuCtxDestroy, and the release or reset of a device's primary
 *                 context (the CUDA runtime releases it at exit): the last moment to read what
 *                 lives in the context's memory, and the point after which its handle is stale.
 * Hooks must be thread-safe: applications call the driver from many threads at once.  With no
 * hooks installed the wrappers do only their bookkeeping (a lock-free table look-up and a
 * counter per launch); with CUBPF_DISABLE=1 they do nothing but forward.
 *
 * The real driver: shim_real(name) gives any of its functions without going through the
 * wrappers, so that cubpf's own driver calls (allocating device maps, loading an instrumented
 * module) neither recurse nor appear as application events.
 */
#ifndef CUBPF_SHIM_H
#define CUBPF_SHIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Driver handle types, as opaque pointers: this header does not need cuda.h. */
typedef struct CUmod_st *shim_module_t;     /* CUmodule */
typedef struct CUlib_st *shim_library_t;    /* CUlibrary */
typedef struct CUstream_st *shim_stream_t;  /* CUstream */
typedef struct CUevent_st *shim_event_t;    /* CUevent */
typedef struct CUctx_st *shim_context_t;    /* CUcontext */

/* What a loaded image is, from its first bytes. */
enum shim_image_kind {
	SHIM_IMAGE_UNKNOWN = 0,
	SHIM_IMAGE_CUBIN = 1,          /* ELF (sm_XX cubin) */
	SHIM_IMAGE_PTX = 2,            /* PTX text */
	SHIM_IMAGE_FATBIN = 3,         /* fatbin (magic 0xBA55ED50) */
	SHIM_IMAGE_FATBIN_WRAPPER = 4, /* __fatBinC_Wrapper_t (magic 0x466243B1) */
	SHIM_IMAGE_FILE = 5,           /* loaded by path (cuModuleLoad, cuLibraryLoadFromFile) */
	SHIM_IMAGE_LINKED = 6,         /* output of cuLinkComplete */
};

/* Which entry point produced a module event. */
enum shim_load_api {
	SHIM_LOAD_MODULE_LOAD = 1,       /* cuModuleLoad */
	SHIM_LOAD_MODULE_DATA = 2,       /* cuModuleLoadData */
	SHIM_LOAD_MODULE_DATA_EX = 3,    /* cuModuleLoadDataEx */
	SHIM_LOAD_MODULE_FATBINARY = 4,  /* cuModuleLoadFatBinary */
	SHIM_LOAD_LIBRARY_DATA = 5,      /* cuLibraryLoadData */
	SHIM_LOAD_LIBRARY_FILE = 6,      /* cuLibraryLoadFromFile */
	SHIM_LOAD_LINK_DATA = 7,         /* cuLinkAddData / _v2: an input of a link */
	SHIM_LOAD_LINK_FILE = 8,         /* cuLinkAddFile / _v2 */
	SHIM_LOAD_LINK_COMPLETE = 9,     /* cuLinkComplete: the linked cubin */
};

/* Summary of an image's contents, filled by the shim where it can read it (cubin/ does the
 * reading; the shim never parses formats itself). */
struct shim_image_info {
	enum shim_image_kind kind;
	size_t size;          /* bytes, 0 when unknown (a PTX string's size is its strlen + 1) */
	unsigned nkernels;    /* kernels (entry functions) found, across every entry */
	unsigned ncubins;     /* cubin entries (SASS) */
	unsigned nptx;        /* PTX entries: > 0 means the kernels can be instrumented */
	int readable;         /* 1 when the contents were read, 0 when only the kind is known */
};

struct cubin_image; /* cubin/cubin.h */

struct shim_module_event {
	enum shim_load_api api;
	const char *api_name;       /* "cuLibraryLoadData", ... */
	const void *image;          /* the bytes the driver gets; NULL for file loads */
	const char *path;           /* file loads: the path; otherwise NULL */
	struct shim_image_info info;
	shim_module_t module;       /* after: the resulting CUmodule (NULL for libraries) */
	shim_library_t library;     /* after: the resulting CUlibrary */
	void *link_state;           /* link events: the CUlinkState */
	int result;                 /* after: the CUresult */
	uint64_t ts_begin, ts_end;  /* CLOCK_REALTIME ns */
	uint32_t tid;
	/* During module_loading only: the image as the core opened it to describe it (NULL when it
	 * did not), so that a hook reads it without opening it again.  The hook may read entries
	 * through it (cubin_entry_data keeps what it decompresses) but must not free it or keep it:
	 * the core frees it when module_loading returns. */
	struct cubin_image *opened;
};

/* A kernel as the shim knows it.  `handle` is a CUfunction or a CUkernel; both map to the same
 * name and module.  Entries stay valid for the life of the process. */
struct shim_kernel_info {
	const void *handle;
	shim_module_t module;       /* NULL for a CUkernel not yet resolved to a module */
	shim_library_t library;     /* NULL for modules loaded with cuModuleLoad* */
	const char *name;           /* mangled name, as the application asked for it */
	uint32_t kernel_id;         /* sequential id the shim gives the kernel, from 1 */
	uint64_t launches;          /* launches seen so far (relaxed counter) */
};

enum shim_launch_api {
	SHIM_LAUNCH_KERNEL = 1,       /* cuLaunchKernel / _ptsz */
	SHIM_LAUNCH_KERNEL_EX = 2,    /* cuLaunchKernelEx / _ptsz */
	SHIM_LAUNCH_COOPERATIVE = 3,  /* cuLaunchCooperativeKernel / _ptsz */
	SHIM_LAUNCH_GRAPH_NODE = 4,   /* a kernel node added to or set in a graph (not a launch) */
	SHIM_LAUNCH_LEGACY = 5,       /* cuLaunch / cuLaunchGrid / cuLaunchGridAsync (deprecated):
				       * block shape and parameters were set by earlier calls, so
				       * block[] is 0 and a hook cannot substitute the function */
	SHIM_LAUNCH_MULTI_DEVICE = 6, /* cuLaunchCooperativeKernelMultiDevice (deprecated): one event
				       * per device; a hook cannot substitute the function */
};

struct shim_launch_event {
	enum shim_launch_api api;
	const char *api_name;
	const void *func;            /* CUfunction or CUkernel, as passed (a hook may replace it) */
	const struct shim_kernel_info *kernel; /* NULL when the handle was never seen */
	unsigned grid[3], block[3];
	unsigned shared_bytes;
	shim_stream_t stream;
	void **params;               /* kernelParams (a hook may replace the array) */
	void **extra;
	const void *config;          /* cuLaunchKernelEx: the CUlaunchConfig; graph nodes: params */
	int result;                  /* after: the CUresult */
	uint64_t ts_begin, ts_end;   /* CLOCK_REALTIME ns; 0 unless a hook is installed that
				      * wants them (shim_hooks.launch_untimed) */
	uint32_t tid;
};

/* Host-timeline calls. */
enum shim_api_kind {
	SHIM_API_MEMCPY = 1,
	SHIM_API_MEMSET = 2,
	SHIM_API_SYNC = 3,
	SHIM_API_CTX_CREATE = 4,
	SHIM_API_STREAM_CREATE = 5,
	SHIM_API_GRAPH_LAUNCH = 6,    /* cuGraphLaunch / _ptsz: `stream` is the stream */
};

struct shim_api_event {
	enum shim_api_kind kind;
	const char *name;           /* exact exported name, e.g. "cuMemcpyHtoDAsync_v2_ptsz" */
	uint32_t func_id;           /* index of the name in the shim's export table */
	shim_stream_t stream;       /* when the call has one */
	uint64_t bytes;             /* copies and memsets: bytes moved or set, when known */
	int result;
	uint64_t ts_begin, ts_end;  /* CLOCK_REALTIME ns */
	uint32_t tid;
};

/* CUDA event calls (wrap_event.c). */
enum shim_event_op {
	SHIM_EVENT_CREATED = 1,       /* after a successful cuEventCreate: `flags` its CU_EVENT_* */
	SHIM_EVENT_DESTROYING = 2,    /* before cuEventDestroy / _v2 (the handle may be reused after) */
	SHIM_EVENT_RECORDING = 3,     /* before cuEventRecord / WithFlags / _ptsz: `stream`, and the
				       * record `flags` (0 for cuEventRecord) */
};

struct shim_event_call {
	enum shim_event_op op;
	const char *api_name;       /* exact exported name: with _ptsz, stream 0 is per-thread */
	shim_event_t event;
	shim_stream_t stream;
	unsigned flags;
};

/* A context going away. */
enum shim_context_end {
	SHIM_CONTEXT_DESTROY = 0,     /* cuCtxDestroy / _v2: `context` */
	SHIM_PRIMARY_RELEASE = 1,     /* cuDevicePrimaryCtxRelease / _v2: `device`'s primary context,
				       * gone only if that was its last reference */
	SHIM_PRIMARY_RESET = 2,       /* cuDevicePrimaryCtxReset / _v2: `device`'s primary context */
};

struct shim_context_event {
	enum shim_context_end how;
	shim_context_t context;     /* SHIM_CONTEXT_DESTROY: the context; otherwise NULL */
	int device;                 /* primary release or reset: the device ordinal; otherwise 0 */
	int result;                 /* context_ended: the CUresult of the real call */
};

/* Every member may be NULL.  The structure is copied by shim_set_hooks. */
struct shim_hooks {
	/* Before a module load.  May set ev->image (and ev->info) to a substitute image that must
	 * live until the module or library is unloaded (the driver may keep reading it). */
	void (*module_loading)(struct shim_module_event *ev, void *user);
	void (*module_loaded)(const struct shim_module_event *ev, void *user);
	/* After cuModuleUnload / cuLibraryUnload (one of the handles is NULL): a substituted image
	 * of that module may be released now. */
	void (*module_unloaded)(shim_module_t module, shim_library_t library, int result, void *user);
	void (*kernel_found)(const struct shim_kernel_info *k, void *user);
	/* Before a launch.  May replace ev->func and ev->params. */
	void (*launching)(struct shim_launch_event *ev, void *user);
	void (*launched)(const struct shim_launch_event *ev, void *user);
	void (*api_call)(const struct shim_api_event *ev, void *user);
	void (*event_call)(const struct shim_event_call *ev, void *user);
	/* Before the real call: the context still works (a hook may read its memory, on the
	 * caller's thread, before the driver frees it). */
	void (*context_ending)(const struct shim_context_event *ev, void *user);
	/* After it: when the context is gone (result 0 and, for a primary release, no reference
	 * left), nothing may touch its handle, streams or memory again. */
	void (*context_ended)(const struct shim_context_event *ev, void *user);
	void *user;
	/* After every cuInit (result: its CUresult), on the caller's thread: a context can exist
	 * only after the first successful one, so this is the place for work that must come
	 * before any context does (subscribing a tools library: shim/live/sanitizer.c).  The
	 * hook may call the driver (cuInit again included: it must guard against re-entry). */
	void (*driver_initialized)(int result, void *user);
	/* Launch events need no ts_begin/ts_end (left 0): nothing of the plug-in reads them, so a
	 * launch reads no clock (two clock reads a launch, for a launch-bound program). */
	bool launch_untimed;
};

/* A plug-in: work compiled into the library that the shim starts once, on the application's
 * first driver call (or at registration, if that came first), after the real driver is found
 * and never with CUBPF_DISABLE=1.  start() returns the hooks to install (NULL: stay out; the
 * pointer must stay valid).  A plug-in registers from a constructor of the library, which costs
 * nothing until CUDA is used. */
struct shim_plugin {
	const char *name;           /* for messages */
	const struct shim_hooks *(*start)(void);
};

/* Registers the library's plug-in (one per library).  Returns 0, or -1 when one is registered
 * already (this one is not started). */
int shim_plugin_register(const struct shim_plugin *plugin);

/* Installs (or, with NULL, removes) the hooks.  Returns 0, or -1 when CUBPF_DISABLE=1 is set
 * (pass-through takes no hooks). */
int shim_set_hooks(const struct shim_hooks *hooks);

/* The real driver's function `name` (exact exported name), or NULL when there is no real
 * driver or it lacks the name. */
void *shim_real(const char *name);

/* Path of the real driver in use, or NULL when none was found. */
const char *shim_real_path(void);

/* The calling thread's id (gettid, cached): the `tid` of every event. */
uint32_t shim_tid(void);

/* The index of an exported driver function's name (the `func_id` of API events; launch events
 * carry the name), or UINT32_MAX when the shim does not export it. */
uint32_t shim_api_id(const char *name);

/* The kernel registered for a CUfunction or CUkernel handle, or NULL. */
const struct shim_kernel_info *shim_kernel_lookup(const void *handle);

/* Logging with the "cubpf:" prefix, filtered by CUBPF_LOG, to stderr or to CUBPF_LOG_FD /
 * CUBPF_LOG_FILE (log.c, a leaf: it calls nothing else of the shim). */
enum shim_log_level { SHIM_LOG_OFF, SHIM_LOG_ERROR, SHIM_LOG_WARN, SHIM_LOG_INFO, SHIM_LOG_DEBUG };
int shim_log_enabled(enum shim_log_level level);
/* Reads CUBPF_LOG and the destination (log.c; once, from the shim's init). */
void shim_log_setup(void);
void shim_log(enum shim_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* One line to the same destination whatever the level: a report the caller decided to give
 * (the maps at exit).  Never to stderr when cubpf run gave a descriptor: the program's own
 * stderr is the program's. */
void shim_log_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Numeric settings (settings.c): one table of names, options and ranges, read by the shim from
 * the environment and checked by `cubpf run` for its options and for the variables it passes
 * on, with the same function and the same message: "CUBPF_SAMPLE (--sample) '0': expected a
 * whole number from 1 to 2147483648".  settings.c calls nothing else of the shim: the cubpf
 * command links it too. */
enum shim_setting_id {
	SHIM_SET_SAMPLE,            /* CUBPF_SAMPLE: probes on every Nth launch of a kernel */
	SHIM_SET_RINGBUF_MB,        /* CUBPF_RINGBUF_MB: pinned host memory per GPU */
	SHIM_SET_MAP_MAX_MB,        /* CUBPF_MAP_MAX_MB: device memory cap of the maps */
	SHIM_SET_INTERVAL_MS,       /* CUBPF_INTERVAL_MS: host map snapshots */
	SHIM_SET_PERTHREAD_THREADS, /* CUBPF_PERTHREAD_THREADS: slots of per-thread arrays */
	SHIM_SET_RINGBUF_THREADS,   /* CUBPF_RINGBUF_THREADS: drain threads */
	SHIM_SET_TRACE_THREADS,     /* CUBPF_TRACE_THREADS: compressing threads */
	SHIM_SET_VERIFY_TIMEOUT_MS, /* CUBPF_VERIFY_TIMEOUT_MS: the forked checker's limit */
	SHIM_SET_CACHE_WAIT_MS,     /* CUBPF_CACHE_WAIT_MS: a put's wait for another's write */
	SHIM_SET_ENABLE_WORDS,      /* CUBPF_ENABLE_WORDS: 0 or 1 */
	SHIM_SET_SHARED_SUMS,       /* CUBPF_SHARED_SUMS: 0 or 1 (ptx_inject_opts.no_shared) */
	SHIM_SET_COUNT
};
/* The variable's name (CUBPF_SAMPLE). */
const char *shim_setting_name(enum shim_setting_id id);
/* text as the setting's value: 0, or -1 with the message in err (absent, empty, signed,
 * garbage after the digits, out of range, past 2^64: all refused). */
int shim_setting_parse(enum shim_setting_id id, const char *text, uint64_t *out, char *err,
		       size_t errlen);
/* Each numeric setting set in the environment, parsed: 0, or -1 with the first refusal. */
int shim_settings_check_env(char *err, size_t errlen);
/* The environment's value, or dflt when the variable is unset or empty; a value set but
 * refused is one warning (with the message above) and dflt (settings_env.c: the shim only). */
uint64_t shim_setting_env(enum shim_setting_id id, uint64_t dflt);

/* Starts one of cubpf's own threads (thread.c): a stack of SHIM_THREAD_STACK, not the 8 MiB of
 * RLIMIT_STACK (address space the application may need under `ulimit -v`), every signal
 * blocked.  pthread_create's result. */
#define SHIM_THREAD_STACK (1u << 20)
int shim_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* CLOCK_REALTIME in nanoseconds (the timestamps of every event). */
uint64_t shim_now_ns(void);
/* Copies a path given in the environment with each "%p" replaced by the process id. */
void shim_expand_pid(const char *in, char *out, size_t size);

#endif
