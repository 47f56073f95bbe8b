/* shim/live/: live probes inside the shim — the folder-private interface of live.c (set-up,
 * programs, exit report), module.c (module substitution) and maps.c (device maps).
 *
 * Design as built: shim/live/README.md.  Everything here runs on the application's threads, inside
 * its driver calls, so every failure is a fallback (the original module, a warning, a count),
 * never an error the application sees.
 */
#ifndef CUBPF_SHIM_LIVE_H
#define CUBPF_SHIM_LIVE_H

#include <stdbool.h>
#include <stdio.h>

/* The driver's functions by their exact exported names (cuCtxPushCurrent_v2, ...), as the
 * shim's own files ask for them, instead of cuda.h's version-renaming macros. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ptx-rewriter/ptx.h"
#include "shim/shim.h"
#include "store/store.h"
#include "vm/vm.h"

#define LIVE_ERRLEN 512

/* The real driver's functions cubpf calls for itself (never the shim's wrappers, so that they
 * neither recurse nor show up as application events).  Filled once by live_driver_load. */
#define LIVE_FN(name) __typeof__(&name) name
struct live_driver {
	LIVE_FN(cuCtxGetCurrent);
	LIVE_FN(cuCtxGetDevice);
	LIVE_FN(cuCtxSynchronize);
	LIVE_FN(cuCtxPushCurrent_v2);
	LIVE_FN(cuCtxPopCurrent_v2);
	LIVE_FN(cuDeviceGetAttribute);
	LIVE_FN(cuMemAlloc_v2);
	LIVE_FN(cuMemFree_v2);
	LIVE_FN(cuMemGetInfo_v2);
	LIVE_FN(cuMemsetD8Async);
	LIVE_FN(cuMemcpyHtoDAsync_v2);
	LIVE_FN(cuMemcpyDtoHAsync_v2);
	LIVE_FN(cuStreamCreate);
	LIVE_FN(cuStreamSynchronize);
	LIVE_FN(cuStreamQuery);
	LIVE_FN(cuModuleGetGlobal_v2);
	LIVE_FN(cuLibraryGetGlobal);
	LIVE_FN(cuLinkCreate_v2);
	LIVE_FN(cuLinkAddData_v2);
	LIVE_FN(cuLinkComplete);
	LIVE_FN(cuLinkDestroy);
	LIVE_FN(cuGetErrorName);
	LIVE_FN(cuModuleLoadData);
	LIVE_FN(cuModuleGetFunction);
	LIVE_FN(cuLaunchKernel);
	LIVE_FN(cuMemHostAlloc);
	LIVE_FN(cuMemFreeHost);
	LIVE_FN(cuMemHostGetDevicePointer_v2);
	LIVE_FN(cuMemsetD32Async);
	LIVE_FN(cuMemsetD32Async_ptsz);
	/* Optional (DEVICE records of the trace): NULL when the driver lacks them. */
	LIVE_FN(cuDeviceGetName);
	CUresult (*cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
	CUresult (*cuDeviceGetUuid_v2)(CUuuid *uuid, CUdevice dev);
	/* Optional (maps shared by host and GPU programs) */
	CUresult (*cuMemAllocManaged)(CUdeviceptr *dptr, size_t bytes, unsigned int flags);
	/* Optional (which context a primary release or reset concerns, and whether it is gone) */
	CUresult (*cuDevicePrimaryCtxGetState)(CUdevice dev, unsigned int *flags, int *active);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
	CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
	/* Optional (cubpf's calls and the application's stream capture: shim_live_relax) */
	CUresult (*cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *mode);
	CUresult (*cuStreamIsCapturing)(CUstream s, CUstreamCaptureStatus *status);
};
#undef LIVE_FN
extern struct live_driver shim_live_cu;

/* The name of a CUresult, for messages. */
const char *shim_live_cu_error(CUresult r);

/* cubpf's own driver calls never break an application's stream capture.  While any thread
 * captures a stream in global mode (PyTorch's and XLA's default), an allocation, a free, a
 * synchronisation or a query from a thread in global mode invalidates that capture, and so does
 * such a call on the capturing thread itself (a module loaded, or a library first launched,
 * inside the capture).  cubpf's calls of that kind only touch cubpf's own memory and streams, so
 * they are made in relaxed mode: its own threads switch to it once (shim_live_thread_relax, at
 * their start), and a hook that runs on an application's thread and may make such calls
 * switches for its duration and restores the application's mode (shim_live_relax ...
 * shim_live_unrelax; they nest).  Without the driver function nothing changes. */
CUstreamCaptureMode shim_live_relax(void);
void shim_live_unrelax(CUstreamCaptureMode previous);
void shim_live_thread_relax(void);

/* The current context of the launch this thread is making, asked of the driver once per launch
 * (at the first of the launch hook's parts that needs it: the library's map pointers, the span's
 * events, the KERNEL record's device) rather than once by each; NULL without one. */
CUcontext shim_live_launch_ctx(void);
/* Bumped after every context teardown (live.c's context_ended hook): a context's handle may come
 * back for another context, so what a thread remembers of a handle is stale then. */
unsigned shim_live_ctx_generation(void);

/* One map as every module sees it: the maps of all loaded objects, concatenated (programs'
 * map references are renumbered to this table, see live.c). */
struct live_map {
	struct vm_map_def def;     /* copy; def.init points into the object */
	uint32_t obj;              /* index of the object that defined it */
	uint32_t index;            /* index of the map in that object */
	uint64_t bytes;            /* device storage; 0 when the kind has no device layout yet */
	bool ringbuf;              /* a ring buffer: pinned mapped lanes (rb.h), drained */
	bool shared;               /* an array used by host and GPU programs of its object: one
				    * storage in managed memory for both (maps.c share_map) */
	CUdeviceptr shared_dev;    /* that storage (host address = device address), 0 = none */
	CUcontext shared_owner;    /* the context it was allocated in */
	atomic_uint_fast64_t records; /* ring buffer records drained (all contexts) */
};

struct live_counters {
	atomic_uint modules_instrumented, kernels_instrumented;
	atomic_uint modules_fallback;       /* instrumentation failed: original loaded */
	atomic_uint modules_no_ptx, kernels_no_ptx;
	atomic_uint modules_untouched;      /* PTX, but no kernel matched a program */
	atomic_uint modules_skipped;        /* loads live does not handle (files, link inputs) */
	atomic_uint fill_failures;          /* map pointers that could not be stored */
	atomic_uint cache_hits, cache_misses, cache_puts;
	atomic_uint jit_compiles;           /* cuLink* compilations of instrumented PTX */
};

struct live_session {
	struct vm_object **objs;
	char **paths;
	uint32_t nobjs;
	struct ptx_prog *progs;    /* GPU programs, map references renumbered */
	uint32_t nprogs;
	struct live_map *maps;
	uint32_t nmaps;
	const char *kernel_glob;   /* CUBPF_KERNELS, or NULL */
	uint64_t map_cap_bytes;    /* largest total of device maps per context (CUBPF_MAP_MAX_MB) */
	uint64_t ringbuf_bytes;    /* pinned ring buffer budget per context (CUBPF_RINGBUF_MB) */
	uint32_t ringbuf_threads;  /* most ring buffer drain threads (CUBPF_RINGBUF_THREADS, 4) */
	bool dump_maps;            /* CUBPF_DUMP_MAPS=1: every map printed at exit */
	uint64_t interval_ms;      /* CUBPF_INTERVAL_MS: map snapshots into the trace (1000) */
	uint32_t sample;           /* CUBPF_SAMPLE=N: probes run on every Nth launch of a kernel */
	const char *control_path;  /* CUBPF_CONTROL: the file that switches programs (control.c) */
	bool enable_words;         /* modules honour the enable words (sampling on) */
	bool shared_sums;          /* deferred counters may sum per block in shared memory */
	uint64_t perthread_threads; /* thread copies of per-thread arrays (CUBPF_PERTHREAD_THREADS) */
	struct store_trace_writer *trace; /* CUBPF_TRACE, or NULL */
	bool forked;               /* this is a fork()ed child: its parent's GPU state is not its own */
	struct live_counters n;
};
extern struct live_session shim_live_session;

/* maps.c: whether some GPU program is a blockretprobe (each context then has a block table). */
bool shim_live_block_table(void);
/* live.c: device bytes of a map in its ptx-rewriter/layout.h layout (0: none on the device). */
uint64_t shim_live_map_bytes(const struct vm_map_def *d);
/* "NAME (kind, how its size comes about = N bytes)", for messages that refuse maps. */
void shim_live_map_describe(const struct vm_map_def *d, char *out, size_t len);
/* live.c: cubpf's id of a kernel (small, sequential from 1, the same for the same name). */
uint32_t shim_live_kernel_id(void *user, const char *mangled);
/* The same, for a name the Sanitizer backend patches: flags (STORE_KERNEL_ID_*) go into the
 * trace's KERNEL_ID record when the name gets its id here (tools name the backend from it). */
uint32_t shim_live_kernel_id_flagged(const char *mangled, uint32_t flags);
/* The module whose kernels get ids on this thread now (a file load's path; NULL = none): it
 * goes into the trace's KERNEL_ID records. */
void shim_live_kernel_module(const char *label);
/* Kernels that run without probes: logs the message (formatted) at `level` and writes it into
 * the trace as a NOT_INSTRUMENTED record (enum store_noinst_reason) with the device of the
 * current context.  api, label: NULL = none; sm 0 = the current context's. */
void shim_live_note(enum shim_log_level level, uint32_t reason, const char *api, const char *label,
	       uint32_t kernels, uint32_t sm, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
/* The id the next new kernel name would get (the cache key's id base). */
uint32_t shim_live_kernel_next_id(void);
/* A cache hit's kernels: names[i] must have ids[i], those already known by that id, the new ones
 * by the ids they would get now, in order.  Then the new ones are registered.  Returns 1 (all
 * registered), 0 (the ids would differ: nothing registered), -1 (out of memory midway). */
int shim_live_kernel_ids_claim(const char *const *names, const uint32_t *ids, uint32_t n);
/* The id given to `mangled` (0 if none) and, in *launch, how many launches of it were counted
 * before this one (the counter is incremented). */
uint32_t shim_live_kernel_launch(const char *mangled, uint64_t *launch);

/* ---- device maps (maps.c) ----------------------------------------------------------- */

/* One map of one context as last read back: its non-zero entries as the trace's MAP records
 * carry them (maps.c map_entries), not its bytes: a context keeps what its kernels wrote, not
 * copies of maps that are mostly zeros (every bundled tool at once: 349 MB a context). */
struct live_snap {
	uint32_t key_size, value_size, count;
	uint64_t threads;           /* per-thread arrays: the thread copies their header gave */
	uint8_t *kv;                /* count (key, value) pairs */
};

/* The maps of one context: one allocation per map, shared by every module of the context. */
struct live_ctx {
	CUcontext ctx;
	CUdevice dev;
	uint32_t num;               /* cubpf's number of the context, from 1 (the trace's ctx) */
	uint32_t sm;                /* compute capability, 90 for sm_90 */
	CUstream stream;            /* cubpf's own non-blocking stream */
	CUdeviceptr *base;          /* per map; 0 when the map has no device storage */
	CUdeviceptr pool;           /* one allocation for the maps, the enable words, the block
				     * table, the rings' producers' parts, the clock (maps.c) */
	uint64_t pool_bytes;
	uint64_t device_bytes;
	uint64_t pinned_bytes;
	uint64_t rb_state_bytes;    /* device bytes of ring buffers' producer bookkeeping */
	void **host;                /* per ring buffer map: its pinned host memory, else NULL */
	uint64_t *drops_seen;       /* per ring buffer map: drops already written to the trace */
	atomic_uint_fast64_t *rb_moved; /* per ring buffer map: drain passes that moved tails */
	uint64_t *rb_synced;        /* per ring buffer map: rb_moved when tails last went to the device */
	uint64_t rb_sync_ns;        /* when the last copies went (CLOCK_MONOTONIC) */
	uint64_t rb_syncs, rb_sync_busy; /* tails copies made; times the last were still running */
	bool rb_sync_warned;
	struct live_snap **snap;    /* per map: what the last read back found (NULL before) */
	uint64_t snap_ns;           /* when it was read (CLOCK_REALTIME), 0 = never */
	CUdeviceptr enable;         /* CUBPF_ENABLE_WORDS enable words (ptx-rewriter/layout.h) */
	CUdeviceptr blocks;         /* the thread block table of blockretprobes (layout.h), or 0 */
	uint64_t blocks_untracked;  /* its count of blocks it had no slot for, as last read */
	uint32_t *enable_set;       /* the value each word was last set to, host copy */
	CUmodule clock_mod;         /* cubpf's own kernels (clock.c), or NULL */
	CUfunction clock_fn;        /* its %globaltimer kernel */
	CUfunction scan_fn;         /* its zero scan of the pool (maps.c read-back) */
	CUdeviceptr clock_buf;
	CUdeviceptr scan_flags;     /* the scan's flags, a byte per SHIM_LIVE_SCAN_BLOCK of the pool,
				     * then its u64 sequence word; 0 = no scan */
	uint64_t scan_blocks;       /* blocks scanned: the pool up to the flags */
	uint64_t scan_seq;
	uint32_t retiring;          /* being torn down by this thread id: cubpf leaves it alone */
	struct live_ctx *next;
};

/* The context's maps, allocated (and initialised) on first use.  NULL with a message when they
 * cannot be had (no memory, over the cap). */
struct live_ctx *shim_live_ctx_get(CUcontext ctx, char *err, size_t errlen);
/* Compute capability of the device of `ctx` (or of device 0 when ctx is NULL); 0 if unknown. */
uint32_t shim_live_ctx_sm(CUcontext ctx);
/* The context's maps if they exist (never allocates). */
struct live_ctx *shim_live_ctx_find(CUcontext ctx);
/* Stores the maps' addresses in the `__cubpf_map_<i>` globals of a module or library (one of the
 * two is NULL) in context c (current).  Returns 0, or -1 with a message. */
int shim_live_fill(struct live_ctx *c, CUmodule mod, CUlibrary lib, char *err, size_t errlen);
/* Copies every context's maps back into its snapshot buffers.  sync: wait for the context's
 * work first (exit only: never while the application runs). */
void shim_live_snapshot_all(bool sync);
/* Prints the maps (bpftool-like) to `out`, and writes them into the trace when there is one. */
void shim_live_maps_report(bool print);
/* Writes the latest snapshots into the trace. */
void shim_live_maps_trace(void);
void shim_live_maps_memory(uint64_t *device_bytes, uint64_t *pinned_bytes, uint32_t *contexts);
/* Ring buffers: stops the drain thread, takes what is left, reports records and drops (stderr
 * and the trace). */
void shim_live_ringbuf_finish(void);
void shim_live_ringbuf_start(void);

/* Starts the thread that reads the maps every CUBPF_INTERVAL_MS into the trace (once, with
 * the first context), and stops it (exit). */
void shim_live_maps_start_thread(void);
void shim_live_maps_stop_thread(void);
/* fork() child: the thread does not exist there, and the locks are made afresh (one that a
 * thread of the parent held at the fork would stay held: the child has only the forking
 * thread).  The other files' *_fork_child functions do the same for their locks. */
void shim_live_maps_fork_child(void);
/* The context_ending and context_ended hooks (shim.h): before the real call, the maps of the
 * context about to go (ctx; for a primary release or reset, primary = SHIM_PRIMARY_*, dev's primary
 * context) are read back and cubpf's threads stop touching it; after it (result r), a context
 * that is gone is forgotten without another driver call on it (the driver freed its memory,
 * streams and modules: the handle may come back for a new context), one that is not is taken up
 * again. */
void shim_live_teardown(CUcontext ctx, CUdevice dev, int primary);
void shim_live_torn_down(CUcontext ctx, CUdevice dev, int primary, CUresult r);
/* Whether any context has maps (read in a fork child, which has one thread). */
bool shim_live_maps_have_contexts(void);

/* ---- CUBPF_METRICS: the process's Prometheus endpoint (metrics.c) ----------------------------
 * What a scrape shows, copied by the snapshot thread and published whole: never changed after,
 * freed by the last of the slot and the scrapes holding it. */
struct live_pub_map {
	char name[VM_NAME_MAX];
	int device;
	uint32_t key_size, value_size, copies; /* value_size: one copy (per-SM maps: 256 copies) */
	uint8_t *kv;               /* count pairs as MAP records carry them (maps.c map_entries) */
	uint32_t count;
};
struct live_pub {
	atomic_int refs;
	uint64_t mono_ns;          /* when published (CLOCK_MONOTONIC) */
	struct live_pub_map *maps;
	uint32_t nmaps;
	char **kernels;            /* the first LIVE_PUB_KERNELS kernel ids' names, by id */
	uint32_t *ids;
	uint32_t nkernels, kernels_total;
	uint64_t device_bytes, pinned_bytes;
};
#define LIVE_PUB_KERNELS VM_METRICS_KEYS
/* Binds CUBPF_METRICS and starts the server thread (a port in use: one warning, no endpoint). */
void shim_live_metrics_start(void);
void shim_live_metrics_stop(void);
void shim_live_metrics_fork_child(void);
/* An endpoint is up; scrapes came lately (the snapshot thread publishes only then). */
bool shim_live_metrics_on(void);
bool shim_live_metrics_wanted(void);
/* Replaces the published copy (p is the endpoint's from now on). */
void shim_live_metrics_publish(struct live_pub *p);
void shim_live_pub_free(struct live_pub *p);
/* maps.c: a copy of every context's latest snapshot, published (snapshot thread, `lock` held). */
void shim_live_maps_publish(void);
bool shim_live_maps_thread_running(void);
/* live.c: the first n kernel ids' names (lowest ids: a name never changes series), malloc'ed,
 * into p; p->kernels_total = all ids given.  -1 out of memory. */
int shim_live_kernel_names(struct live_pub *p, uint32_t n);

/* ---- clock calibration (clock.c) ------------------------------------------------------- */
/* Measures host CLOCK_REALTIME against the device's %globaltimer in context c (current), best
 * of a few round trips on cubpf's stream; writes a CLOCK record and logs the offset.  Returns
 * 0, or -1 (the calibration kernel cannot run: the trace simply has no CLOCK record). */
int shim_live_clock_calibrate(struct live_ctx *c);
/* Loads cubpf's own kernels in context c (current): c->clock_fn and c->scan_fn (once per
 * context; the module compiled once per process and compute capability).  0, or -1. */
int shim_live_own_kernels(struct live_ctx *c);
/* Launches one of them (grid x block threads, one-dimensional) on stream s; while it does,
 * shim_live_own_launching() is true on this thread (the Sanitizer backend's callback then
 * leaves the launch alone). */
CUresult shim_live_own_launch(CUfunction f, unsigned grid, unsigned block, CUstream s, void **args);
bool shim_live_own_launching(void);
/* The zero scan's granularity (cubpf_nonzero: 256 threads x 16 bytes). */
#define SHIM_LIVE_SCAN_BLOCK 4096u

/* ---- module substitution (module.c) --------------------------------------------------- */
/* Instruments PTX text with the loaded GPU programs; kernel_id(user, name) gives each kernel's
 * id.  Returns 1 with *out (malloc'ed, NUL-terminated), 0 when no kernel matched, -1 with err. */
/* The first kernel of PTX text ("name, ..." when there are more), to name a module in messages;
 * fallback when the text lists none. */
void shim_live_ptx_label(const char *ptx, size_t len, const char *fallback, char *label, size_t n);
int shim_live_instrument(const char *ptx, size_t len, uint32_t (*kernel_id)(void *, const char *),
		    void *user, char **out, size_t *out_len, struct ptx_inject_report *rep,
		    char *err, size_t errlen);
/* link.c: PTX given to the driver's linker (cuLinkAddData / cuLinkAddFile with PTX) is
 * instrumented before the link; the linked cubin, once loaded, gets its maps' pointers. */
void shim_live_link_loading(struct shim_module_event *ev);
void shim_live_link_loaded(const struct shim_module_event *ev);
/* Makes an instrumented module's definitions of the maps .extern declarations (a link input;
 * shim_live_link_definitions gives the definitions). */
void shim_live_extern_maps(char *ptx);
/* Adds cubpf's own input to a link: the definitions of every map and of the enable words. */
int shim_live_link_definitions(void *state, char *err, size_t errlen);
/* Whether a module image is the output of a link with instrumented inputs (1, its first kernel
 * in label), so that it is not instrumented again and its maps get filled. */
int shim_live_link_output(const void *image, size_t size, char *label, size_t n);
/* Context ctx is gone: the substitutes of its modules are freed, libraries forget they were
 * filled there (the handle may come back for a new context, which needs its own pointers). */
void shim_live_module_ctx_gone(CUcontext ctx);
void shim_live_module_fork_child(void);
void shim_live_link_fork_child(void);
void shim_live_control_fork_child(void);
void shim_live_module_loading(struct shim_module_event *ev, void *user);
void shim_live_module_loaded(const struct shim_module_event *ev, void *user);
void shim_live_module_unloaded(shim_module_t module, shim_library_t library, int result, void *user);
void shim_live_launching(struct shim_launch_event *ev, void *user);

/* ---- module cache (cache.c) ------------------------------------------------------------ */
/* The key of a load (opening the database at the first call), and *alt, the same without the
 * kernel id base; false when the cache is off.  origin: where the PTX came from and how it is
 * compiled (NULL for a fatbin's PTX entry). */
bool shim_live_cache_key(const void *image, size_t size, uint32_t sm, const char *origin,
		    store_key *key, store_key *alt);
/* alt (the key without the kernel id base) -> the key of the entry last made or hit for that
 * module in this process; found: true with *key. */
void shim_live_cache_alias_note(const store_key *alt, const store_key *key);
bool shim_live_cache_alias_find(const store_key *alt, store_key *key);
/* 1 = hit (e filled, without the PTX), 0 = miss, -1 = the cache failed (now off, one warning). */
int shim_live_cache_get(const store_key *key, struct store_cache_entry *e);
void shim_live_cache_put(const store_key *key, const struct store_cache_entry *e);
void shim_live_cache_drop(const store_key *key);
bool shim_live_cache_off(void);
void shim_live_cache_close(void);
void shim_live_cache_fork_prepare(void);
void shim_live_cache_fork_parent(void);
void shim_live_cache_fork_child(void);

/* The kernel ids an instrumentation asked for, recorded for the cache entry. */
struct live_manifest {
	char *text;
	size_t len, cap;
	uint8_t *seen;              /* per id: recorded already */
	size_t seen_cap;
	uint32_t count;
	bool failed;
};
int shim_live_manifest_add(struct live_manifest *m, const char *name, uint32_t id);
/* The manifest's bytes (malloc'ed) and size, or NULL (failed, out of memory); resets m. */
char *shim_live_manifest_finish(struct live_manifest *m, size_t *size);
void shim_live_manifest_reset(struct live_manifest *m);
/* A hit: registers the manifest's kernel ids (shim_live_kernel_ids_claim).  0 = done (*count
 * kernels, label = the first name), 1 = the ids would differ here (a miss), -1 = unreadable. */
int shim_live_manifest_claim(const void *data, size_t size, uint32_t *count, char *label, size_t n);

/* Registers the exit report again once the driver is initialised (live.c). */
void shim_live_exit_arm(void);

/* ---- host probes and host events (host.c) ---------------------------------------------- */
/* Adds host program `prog` of object number `obj` (verified).  0, or -1 after a warning. */
int shim_live_host_add(const struct vm_object *o, uint32_t obj, uint32_t prog);
bool shim_live_host_any(void);
/* module.c: the driver's JIT of NUL-terminated PTX for the current context's device: a
 * malloc'ed cubin, or NULL with the JIT's log in err. */
void *shim_live_jit(const char *ptx, size_t len, size_t *cubin_size, char *err, size_t errlen);
/* regs.c: instrumented kernels that would allow smaller blocks than their originals (more
 * registers) get .maxnreg, and the PTX and cubin are remade; `img`/`ptx_entry` are the original
 * image and its PTX entry.  Returns 0 (nothing to do, or done), or -1 with err when the limited
 * module cannot be compiled (fall back to the original). */
struct cubin_image;
int shim_live_regs_fit(struct cubin_image *img, long ptx_entry, uint32_t sm, char **ptx,
		  size_t *ptx_len, void **cubin, size_t *cubin_size, char *err, size_t errlen);
/* One PTX module of several linked together (the objects of an -rdc program): the original
 * text and its instrumented version (malloc'ed; every part has one, instrumented or not). */
struct live_part {
	const char *ptx;
	size_t len;
	char *out;
	size_t out_len;
};
/* module.c: the driver's JIT link of the parts' `out` texts with cubpf's map definitions,
 * with the options of the code being compiled; a malloc'ed cubin, or NULL with err. */
void *shim_live_jit_parts(struct live_part *parts, size_t n, size_t *cubin_size, char *err,
		     size_t errlen);
/* regs.c: shim_live_regs_fit for parts (limits from the linked cubin, the parts relinked). */
int shim_live_regs_fit_parts(struct cubin_image *img, uint32_t sm, struct live_part *parts, size_t n,
			void **cubin, size_t *cubin_size, char *err, size_t errlen);
/* control.c: the GPU programs switched on by CUBPF_CONTROL (bit p = program p; all ones
 * without it), the file looked at again at most every 100 ms. */
uint32_t shim_live_control_mask(void);
/* The host maps of object `obj` (NULL when it has no host programs). */
struct vm_runtime *shim_live_host_runtime(uint32_t obj);
void shim_live_host_launch(const struct shim_launch_event *ev, bool after);
void shim_live_host_api(const struct shim_api_event *ev);
void shim_live_host_report(void);
void shim_live_trace_launch(const struct shim_launch_event *ev);
/* A DEVICE record for device ordinal dev (compute capability sm, 90 = 9.0), once per device. */
void shim_live_trace_device(int dev, uint32_t sm);

/* ---- kernel spans (spans.c): CUDA events around every launch while tracing ------------ */
/* Reads CUBPF_SPANS and the driver's event functions (after the trace is opened); true when
 * spans are on. */
bool shim_live_spans_init(void);
/* The event hook: a span may begin before the application's own start event. */
void shim_live_spans_event(const struct shim_event_call *ev, void *user);
/* Another call of the application's (a copy, a synchronisation): a span no longer begins at
 * this thread's last event. */
void shim_live_spans_other_call(void);
/* Before the real launch call (after any substitution and enable-word memset): the begin event. */
void shim_live_spans_launching(const struct shim_launch_event *ev);
/* After it: the end event; corr and name go into the KSPAN record (corr 0: no span). */
void shim_live_spans_launched(const struct shim_launch_event *ev, uint64_t corr, uint32_t name);
/* The stream value written in the trace (CU_STREAM_PER_THREAD for a _ptsz launch on 0). */
uint64_t shim_live_spans_stream(const struct shim_launch_event *ev);
/* Exit: stop the poller, collect what is left (waiting), report. */
void shim_live_spans_finish(void);
void shim_live_spans_teardown(CUcontext ctx, CUdevice dev, int primary);
void shim_live_spans_fork_child(bool fresh);
void shim_live_trace_api(const struct shim_api_event *ev);

/* ---- the Sanitizer backend (sanitizer.c, experimental, off by default) --------------------
 * SASS-only kernels probed through NVIDIA's Compute Sanitizer patching API. */
/* live.c: the id of a kernel name, or 0 when none was given (no side effect). */
uint32_t shim_live_kernel_find(const char *mangled);
/* Reads CUBPF_SANITIZER at start: true when the backend is wanted and some program can be
 * patched (then live.c installs the driver_initialized hook); nothing is loaded yet. */
bool shim_live_san_setup(void);
/* The driver_initialized hook: finds and loads the library, subscribes (once). */
void shim_live_san_driver_initialized(int result, void *user);
/* The launch hook's part: the kernel's decision, the context's preparation, the parameters. */
void shim_live_san_launching(const struct shim_launch_event *ev);
void shim_live_san_launched(void);
/* Exit: per kernel, the backend and its launches; temporary files removed. */
void shim_live_san_report(void);

#endif
