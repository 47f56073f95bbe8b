/* shim/live/live.c: live probes — set-up from the environment, the programs, kernel ids, the report
 * at exit.
 *
 * Started by shim_init (core.c) when CUBPF_PROGRAMS or CUBPF_TRACE is set and CUBPF_DISABLE is
 * not (a trace alone records API calls, kernels and their spans, without probes): it loads
 * and verifies the probe objects and returns the hooks to install.  It makes no driver call at
 * that point (the application's first driver call is still in progress); device work waits for
 * the first module load.
 *
 * Environment: CUBPF_PROGRAMS (probe objects, ':'-separated), CUBPF_KERNELS (kernel glob),
 * CUBPF_TRACE (trace file), CUBPF_DUMP_MAPS=1 (print every map at exit), CUBPF_MAP_MAX_MB
 * (cap on the device maps of one context, default 4096), CUBPF_RINGBUF_MB (pinned memory for
 * ring buffers per context, default 64), CUBPF_RINGBUF_THREADS (most ring buffer drain threads,
 * default half the CPUs, 4 to 8), CUBPF_TRACE_THREADS (the trace's compressing threads, default 2,
 * with ring buffers half the CPUs, 2 to 8),
 * CUBPF_SAMPLE (probes on every Nth launch of a kernel,
 * through the enable words), CUBPF_INTERVAL_MS (how often the maps
 * and the clock calibration go into the trace while the application runs, default 1000),
 * CUBPF_SPANS=0 (no GPU kernel spans in the trace, spans.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/live/internal.h"
#include "shim/live/guard.h"

struct live_session shim_live_session;
struct live_driver shim_live_cu;

/* Half the CPUs, at least lo and at most hi. */
static uint64_t half_cpus(uint64_t lo, uint64_t hi)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN) / 2;
	return n < (long)lo ? lo : (uint64_t)n > hi ? hi : (uint64_t)n;
}

/* Most ring buffer drain threads by default: half the CPUs, 4 to 8.  One thread takes about
 * 6 GB/s of records off the lanes; 8 took 40-50 GB/s (73-90% of the device-to-host bandwidth)
 * on an H100's 16-core host, 4 only 17-27 GB/s (tests/bench/b_rbstream.sh).  Helpers start only
 * while records stream (maps.c), so an idle ring buffer costs one thread. */
static uint64_t default_drain_threads(void)
{
	return half_cpus(4, 8);
}

/* Compressing threads of the trace by default: 2 for API events; ring buffers stream probe
 * records faster than zstd takes them (2 threads kept 1.2-1.6 GB/s of kernelretsnoop's records
 * on an H100's 16-core host, 8 threads 4.5 GB/s: b_rbstream.sh), so with one, half the CPUs,
 * 2 to 8.  Idle ones wait on a condition and cost nothing. */
static uint64_t default_trace_threads(void)
{
	bool rings = false;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++)
		rings |= shim_live_session.maps[i].ringbuf;
	return rings ? half_cpus(2, 8) : 2;
}

/* ---- the real driver ----------------------------------------------------------------------- */

#define LOAD(name)                                                                                \
	do {                                                                                      \
		shim_live_cu.name = (__typeof__(shim_live_cu.name))shim_real(#name);                        \
		if (!shim_live_cu.name) {                                                              \
			snprintf(err, errlen, "the real driver lacks %s", #name);                 \
			return -1;                                                                \
		}                                                                                 \
	} while (0)

static int live_driver_load(char *err, size_t errlen)
{
	LOAD(cuCtxGetCurrent);
	LOAD(cuCtxGetDevice);
	LOAD(cuCtxSynchronize);
	LOAD(cuCtxPushCurrent_v2);
	LOAD(cuCtxPopCurrent_v2);
	LOAD(cuDeviceGetAttribute);
	LOAD(cuMemAlloc_v2);
	LOAD(cuMemFree_v2);
	LOAD(cuMemGetInfo_v2);
	LOAD(cuMemsetD8Async);
	LOAD(cuMemcpyHtoDAsync_v2);
	LOAD(cuMemcpyDtoHAsync_v2);
	LOAD(cuStreamCreate);
	LOAD(cuStreamSynchronize);
	LOAD(cuStreamQuery);
	LOAD(cuModuleGetGlobal_v2);
	LOAD(cuLibraryGetGlobal);
	LOAD(cuLinkCreate_v2);
	LOAD(cuLinkAddData_v2);
	LOAD(cuLinkComplete);
	LOAD(cuLinkDestroy);
	LOAD(cuGetErrorName);
	LOAD(cuModuleLoadData);
	LOAD(cuModuleGetFunction);
	LOAD(cuLaunchKernel);
	LOAD(cuMemHostAlloc);
	LOAD(cuMemFreeHost);
	LOAD(cuMemHostGetDevicePointer_v2);
	LOAD(cuMemsetD32Async);
	LOAD(cuMemsetD32Async_ptsz);
	shim_live_cu.cuDeviceGetName = (__typeof__(shim_live_cu.cuDeviceGetName))shim_real("cuDeviceGetName");
	shim_live_cu.cuDeviceTotalMem_v2 =
		(__typeof__(shim_live_cu.cuDeviceTotalMem_v2))shim_real("cuDeviceTotalMem_v2");
	shim_live_cu.cuDeviceGetUuid_v2 =
		(__typeof__(shim_live_cu.cuDeviceGetUuid_v2))shim_real("cuDeviceGetUuid_v2");
	shim_live_cu.cuMemAllocManaged =
		(__typeof__(shim_live_cu.cuMemAllocManaged))shim_real("cuMemAllocManaged");
	shim_live_cu.cuDevicePrimaryCtxGetState = (__typeof__(shim_live_cu.cuDevicePrimaryCtxGetState))
		shim_real("cuDevicePrimaryCtxGetState");
	shim_live_cu.cuDevicePrimaryCtxRetain = (__typeof__(shim_live_cu.cuDevicePrimaryCtxRetain))
		shim_real("cuDevicePrimaryCtxRetain");
	shim_live_cu.cuDevicePrimaryCtxRelease_v2 = (__typeof__(shim_live_cu.cuDevicePrimaryCtxRelease_v2))
		shim_real("cuDevicePrimaryCtxRelease_v2");
	shim_live_cu.cuThreadExchangeStreamCaptureMode =
		(__typeof__(shim_live_cu.cuThreadExchangeStreamCaptureMode))
			shim_real("cuThreadExchangeStreamCaptureMode");
	shim_live_cu.cuStreamIsCapturing =
		(__typeof__(shim_live_cu.cuStreamIsCapturing))shim_real("cuStreamIsCapturing");
	return 0;
}
#undef LOAD

const char *shim_live_cu_error(CUresult r)
{
	const char *s = NULL;
	if (shim_live_cu.cuGetErrorName && shim_live_cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "unknown CUresult";
}

/* ---- stream capture (internal.h says why) --------------------------------------------------- */

CUstreamCaptureMode shim_live_relax(void)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (!shim_live_cu.cuThreadExchangeStreamCaptureMode ||
	    shim_live_cu.cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS)
		return CU_STREAM_CAPTURE_MODE_RELAXED; /* nothing to restore */
	return mode;
}

void shim_live_unrelax(CUstreamCaptureMode previous)
{
	if (previous != CU_STREAM_CAPTURE_MODE_RELAXED && shim_live_cu.cuThreadExchangeStreamCaptureMode)
		shim_live_cu.cuThreadExchangeStreamCaptureMode(&previous);
}

void shim_live_thread_relax(void)
{
	(void)shim_live_relax();
}

/* ---- kernel ids ------------------------------------------------------------------------------
 * Programs index maps by ctx->kernel_id (kcount: 4096 entries), so ids are small and sequential
 * rather than the rewriter's default hash; the same name keeps its id in every module. */

struct kid {
	char *name;
	uint32_t id;
	uint64_t launches;          /* counted for sampling */
	struct kid *next;           /* all ids, newest first (the exit report) */
	struct kid *hnext;          /* the same hash bucket */
};
static struct kid *kids;
/* A module of 2000 kernels asks for 2000 ids, and a cache hit registers them all: a list
 * walked per name would cost milliseconds there, so names are hashed (FNV-1a, fixed buckets). */
#define KID_BUCKETS 4096u
static struct kid *kid_hash[KID_BUCKETS];
static uint32_t next_kid = 1;
static pthread_mutex_t kid_lock = PTHREAD_MUTEX_INITIALIZER;
/* The module being loaded on this thread (a file load's path), for KERNEL_ID records. */
static __thread const char *kid_module;

void shim_live_kernel_module(const char *label)
{
	kid_module = label;
}

static struct kid **kid_bucket(const char *mangled)
{
	return &kid_hash[ptx_kernel_id(mangled) % KID_BUCKETS];
}

/* Lock held. */
static struct kid *kid_find(const char *mangled)
{
	for (struct kid *k = *kid_bucket(mangled); k; k = k->hnext)
		if (!strcmp(k->name, mangled))
			return k;
	return NULL;
}

/* Lock held.  Gives `mangled` the next id; NULL when out of memory.  flags: STORE_KERNEL_ID_*,
 * for the trace's record. */
static struct kid *kid_add(const char *mangled, uint32_t flags)
{
	struct kid *k = malloc(sizeof(*k));
	if (!k || !(k->name = strdup(mangled))) {
		free(k);
		return NULL;
	}
	struct kid **b = kid_bucket(mangled);
	k->id = next_kid++;
	k->launches = 0;
	k->next = kids;
	kids = k;
	k->hnext = *b;
	*b = k;
	if (shim_live_session.trace) { /* the trace names kernel ids itself (format 1.2), not only the log */
		struct store_rec_kernel_id r = {
			.id = k->id, .name = store_trace_intern(shim_live_session.trace, mangled),
			.module = kid_module ? store_trace_intern(shim_live_session.trace, kid_module) : 0,
			.flags = flags,
		};
		store_trace_kernel_id(shim_live_session.trace, &r);
	}
	return k;
}

uint32_t shim_live_kernel_id(void *user, const char *mangled)
{
	(void)user;
	return shim_live_kernel_id_flagged(mangled, 0);
}

uint32_t shim_live_kernel_id_flagged(const char *mangled, uint32_t flags)
{
	pthread_mutex_lock(&kid_lock);
	struct kid *k = kid_find(mangled);
	if (!k)
		k = kid_add(mangled, flags);
	uint32_t id = k ? k->id : 0;
	pthread_mutex_unlock(&kid_lock);
	return id ? id : ptx_kernel_id(mangled);
}

uint32_t shim_live_kernel_find(const char *mangled)
{
	pthread_mutex_lock(&kid_lock);
	struct kid *k = kid_find(mangled);
	uint32_t id = k ? k->id : 0;
	pthread_mutex_unlock(&kid_lock);
	return id;
}

uint32_t shim_live_kernel_next_id(void)
{
	pthread_mutex_lock(&kid_lock);
	uint32_t id = next_kid;
	pthread_mutex_unlock(&kid_lock);
	return id;
}

int shim_live_kernel_ids_claim(const char *const *names, const uint32_t *ids, uint32_t n)
{
	int ok = 1;
	pthread_mutex_lock(&kid_lock);
	uint32_t next = next_kid;
	for (uint32_t i = 0; ok && i < n; i++) {
		struct kid *k = kid_find(names[i]);
		ok = k ? k->id == ids[i] : ids[i] == next++;
	}
	for (uint32_t i = 0; ok && i < n; i++)
		if (!kid_find(names[i]) && !kid_add(names[i], 0))
			ok = -1;
	pthread_mutex_unlock(&kid_lock);
	return ok;
}

uint32_t shim_live_kernel_launch(const char *mangled, uint64_t *launch)
{
	uint32_t id = 0;
	pthread_mutex_lock(&kid_lock);
	struct kid *k = kid_find(mangled);
	if (k) {
		id = k->id;
		*launch = k->launches++;
	}
	pthread_mutex_unlock(&kid_lock);
	return id;
}

/* Ids are given from 1 in order, so the first n are those up to n, wherever they sit in the
 * list (newest first). */
int shim_live_kernel_names(struct live_pub *p, uint32_t n)
{
	int rc = 0;
	pthread_mutex_lock(&kid_lock);
	uint32_t total = next_kid - 1, want = total < n ? total : n;
	p->kernels = calloc(want ? want : 1, sizeof(*p->kernels));
	p->ids = calloc(want ? want : 1, sizeof(*p->ids));
	if (!p->kernels || !p->ids)
		rc = -1;
	for (struct kid *k = kids; !rc && k; k = k->next)
		if (k->id >= 1 && k->id <= want) {
			if (!(p->kernels[k->id - 1] = strdup(k->name)))
				rc = -1;
			p->ids[k->id - 1] = k->id;
		}
	pthread_mutex_unlock(&kid_lock);
	p->nkernels = p->kernels && p->ids ? want : 0; /* names NULL where out of memory */
	p->kernels_total = total;
	return rc;
}

/* ---- kernels not instrumented ---------------------------------------------------------------- */

void shim_live_note(enum shim_log_level level, uint32_t reason, const char *api, const char *label,
	       uint32_t kernels, uint32_t sm, const char *fmt, ...)
{
	char msg[1024]; /* shim_log's own bound, so that the trace and the log say the same */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	shim_log(level, "%s", msg);
	if (!shim_live_session.trace)
		return;
	struct store_rec_not_instrumented r = {
		.ts_ns = shim_now_ns(), .reason = reason, .kernels = kernels, .sm = sm,
		.device = UINT32_MAX,
		.api = api ? store_trace_intern(shim_live_session.trace, api) : 0,
		.label = label ? store_trace_intern(shim_live_session.trace, label) : 0,
	};
	CUcontext ctx = NULL;
	CUdevice dev;
	if (shim_live_cu.cuCtxGetCurrent && shim_live_cu.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx &&
	    shim_live_cu.cuCtxGetDevice(&dev) == CUDA_SUCCESS)
		r.device = (uint32_t)dev;
	if (!r.sm && ctx)
		r.sm = shim_live_ctx_sm(ctx);
	store_trace_not_instrumented(shim_live_session.trace, &r, msg);
}

/* ---- programs ------------------------------------------------------------------------------ */

/* A copy of a program's code with its map references moved by `base` (the index of its
 * object's first map in the merged table). */
static struct bpf_insn *renumber(const struct vm_prog *p, uint32_t base)
{
	struct bpf_insn *in = malloc(sizeof(*in) * (p->insn_cnt ? p->insn_cnt : 1));
	if (!in)
		return NULL;
	memcpy(in, p->insns, sizeof(*in) * p->insn_cnt);
	for (uint32_t i = 0; i + 1 < p->insn_cnt; i++)
		if (in[i].code == (BPF_LD | BPF_DW | BPF_IMM)) {
			if (in[i].src_reg == BPF_PSEUDO_MAP_FD || in[i].src_reg == BPF_PSEUDO_MAP_VALUE)
				in[i].imm += (int32_t)base;
			i++; /* lddw takes two slots */
		}
	return in;
}

/* Device storage of a map, in the layouts of ptx-rewriter/layout.h ("GPU map layouts"): arrays and
 * globals, per-SM arrays (CUBPF_PERCPU_SLOTS copies of each value), per-thread arrays (a header,
 * then CUBPF_PERTHREAD_THREADS copies of each value) and hash maps.  0: no device storage (ring
 * buffers live in pinned memory, other kinds are refused by the rewriter). */
uint64_t shim_live_map_bytes(const struct vm_map_def *d)
{
	if (d->origin != VM_MAP_USER)
		return (uint64_t)d->max_entries * ptx_map_value_stride(d);
	switch (d->type) {
	case CUBPF_MAP_ARRAY:
	case CUBPF_MAP_GPU_ARRAY:
		return (uint64_t)d->max_entries * ptx_map_value_stride(d);
	case CUBPF_MAP_PERCPU_ARRAY:
		return CUBPF_PERCPU_MAP_BYTES(d->max_entries, d->value_size);
	case CUBPF_MAP_PERTHREAD_ARRAY:
		return CUBPF_PERTHREAD_MAP_BYTES(d->max_entries, shim_live_session.perthread_threads,
						 d->value_size);
	case CUBPF_MAP_HASH:
		return d->key_size && d->key_size <= CUBPF_HASH_MAX_KEY
			       ? CUBPF_HASH_MAP_BYTES(d->max_entries, d->key_size, d->value_size)
			       : 0;
	default:
		return 0;
	}
}

static int add_maps(const struct vm_object *o, uint32_t obj)
{
	struct live_map *m = realloc(shim_live_session.maps, sizeof(*m) * (shim_live_session.nmaps + o->map_cnt + 1));
	if (!m)
		return -1;
	shim_live_session.maps = m;
	for (uint32_t i = 0; i < o->map_cnt; i++) {
		struct live_map *lm = &shim_live_session.maps[shim_live_session.nmaps++];
		lm->def = o->maps[i];
		lm->obj = obj;
		lm->index = i;
		lm->bytes = shim_live_map_bytes(&o->maps[i]);
		lm->ringbuf = o->maps[i].type == CUBPF_MAP_RINGBUF ||
			      o->maps[i].type == CUBPF_MAP_GPU_RINGBUF;
		lm->shared = false;
		lm->shared_dev = 0;
		lm->shared_owner = NULL;
		atomic_init(&lm->records, 0);
	}
	return 0;
}

/* What start-up left out: probe objects refused whole and programs the verifier rejected.  They
 * are logged when the objects load, before the trace exists, so they are kept and written into
 * it when it opens (a forked child's trace too), as NOT_INSTRUMENTED records: the tools read
 * those, not the log. */
struct startup_note {
	uint64_t ts_ns;
	uint32_t reason;           /* STORE_NOINST_PROBE_OBJECT or STORE_NOINST_VERIFIER */
	char *label, *msg;         /* the object's path or the program's name; the log's words */
};
static struct startup_note *startup_notes;
static uint32_t nstartup_notes;

static void startup_note(uint32_t reason, const char *label, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void startup_note(uint32_t reason, const char *label, const char *fmt, ...)
{
	char msg[1024]; /* shim_log's own bound, as shim_live_note */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	shim_log(SHIM_LOG_WARN, "%s", msg);
	struct startup_note *q = realloc(startup_notes, sizeof(*q) * (nstartup_notes + 1));
	if (!q)
		return; /* the log says it still */
	startup_notes = q;
	q[nstartup_notes] = (struct startup_note){shim_now_ns(), reason, strdup(label), strdup(msg)};
	if (q[nstartup_notes].label && q[nstartup_notes].msg)
		nstartup_notes++;
}

static void trace_startup_notes(void)
{
	for (uint32_t i = 0; i < nstartup_notes; i++) {
		struct store_rec_not_instrumented r = {
			.ts_ns = startup_notes[i].ts_ns, .reason = startup_notes[i].reason,
			.device = UINT32_MAX,
			.label = store_trace_intern(shim_live_session.trace, startup_notes[i].label),
		};
		store_trace_not_instrumented(shim_live_session.trace, &r, startup_notes[i].msg);
	}
}

/* Adds the GPU and host programs of an object the verifier accepted (verdicts: guard.c);
 * a rejected program is skipped with one warning carrying the verifier's reason. */
static int add_progs(const struct vm_object *o, const struct live_verdict *verdicts,
		     uint32_t map_base)
{
	struct ptx_prog *p = realloc(shim_live_session.progs, sizeof(*p) * (shim_live_session.nprogs + o->prog_cnt + 1));
	if (!p)
		return -1;
	shim_live_session.progs = p;
	for (uint32_t i = 0; i < o->prog_cnt; i++) {
		const struct vm_prog *vp = &o->progs[i];
		bool host = vp->kind == VM_PROG_UPROBE || vp->kind == VM_PROG_URETPROBE;
		if (!vm_kind_is_gpu(vp->kind) && !host)
			continue;
		if (!verdicts[i].ok) {
			startup_note(STORE_NOINST_VERIFIER, vp->name, "live: %s: program %s "
				     "rejected by the verifier, skipped: %s", o->name, vp->name,
				     verdicts[i].reason);
			continue;
		}
		if (host) {
			shim_live_host_add(o, shim_live_session.nobjs, i);
			continue;
		}
		struct bpf_insn *in = renumber(vp, map_base);
		if (!in)
			return -1;
		shim_live_session.progs[shim_live_session.nprogs++] = (struct ptx_prog){ vp->name, vp->kind, vp->attach, in,
							       vp->insn_cnt };
	}
	return 0;
}

static bool prog_uses_map(const struct vm_prog *p, uint32_t map)
{
	for (uint32_t i = 0; i + 1 < p->insn_cnt; i++)
		if (p->insns[i].code == (BPF_LD | BPF_DW | BPF_IMM)) {
			if ((p->insns[i].src_reg == BPF_PSEUDO_MAP_FD ||
			     p->insns[i].src_reg == BPF_PSEUDO_MAP_VALUE) &&
			    (uint32_t)p->insns[i].imm == map)
				return true;
			i++;
		}
	return false;
}

/* Arrays that both host and GPU programs of the object use get one storage (maps.c), so
 * that what a host probe writes is what the kernels read and the other way round. */
static void mark_shared(const struct vm_object *o, uint32_t base)
{
	for (uint32_t m = 0; m < o->map_cnt; m++) {
		bool host = false, gpu = false;
		for (uint32_t i = 0; i < o->prog_cnt; i++) {
			const struct vm_prog *p = &o->progs[i];
			if (!prog_uses_map(p, m))
				continue;
			if (p->kind == VM_PROG_UPROBE || p->kind == VM_PROG_URETPROBE)
				host = true;
			else if (vm_kind_is_gpu(p->kind))
				gpu = true;
		}
		shim_live_session.maps[base + m].shared = host && gpu && vm_map_array_bytes(&o->maps[m]) &&
					     shim_live_session.maps[base + m].bytes;
	}
}

/* Loads and verifies one object behind live_guard's process boundary (CUBPF_VERIFY_FORK=0:
 * in this process; CUBPF_VERIFY_TIMEOUT_MS, default 10000).  An object that cannot be read,
 * is damaged, or crashes or outlasts the checker is left out with one warning; the other
 * objects run.  Returns 0 (the verdicts in *verdicts), or 1 when the object is left out. */
static int guarded_load(const char *path, struct vm_object **o, struct live_verdict **verdicts)
{
	char err[VM_ERRLEN];
	size_t size = 0;
	uint8_t *data = vm_read_file(path, &size, err, sizeof(err));
	const char *fork_env = getenv("CUBPF_VERIFY_FORK");
	struct live_guard_opts opts = {
		.fork = !fork_env || strcmp(fork_env, "0") != 0,
		.timeout_ms = (uint32_t)shim_setting_env(SHIM_SET_VERIFY_TIMEOUT_MS, 10000),
	};
	int rc = data ? shim_live_guard_load(data, size, path, &opts, o, verdicts, err, sizeof(err)) : -1;
	free(data);
	if (rc != 0)
		startup_note(STORE_NOINST_PROBE_OBJECT, path, "live: %s: probe object refused, the "
			     "application runs without it: %s", path, err);
	return rc != 0;
}

/* Whether an object's maps can fit the device memory cap at all (CUBPF_MAP_MAX_MB): one that
 * cannot (a damaged or hostile object asking for petabytes) would make every module load fall
 * back, the other objects' probes with it, so it is refused alone, as a damaged object is.
 * Each dimension is checked too, so that a product that wraps cannot pass. */
static bool maps_fit_cap(const struct vm_object *o, const char *path)
{
	uint64_t total = 0;
	bool over = false;
	uint32_t big = 0;
	for (uint32_t i = 0; i < o->map_cnt; i++) {
		const struct vm_map_def *d = &o->maps[i];
		uint64_t b = shim_live_map_bytes(d);
		over |= d->value_size > shim_live_session.map_cap_bytes || d->max_entries > shim_live_session.map_cap_bytes ||
			b > shim_live_session.map_cap_bytes || (total += b) > shim_live_session.map_cap_bytes;
		if (b > shim_live_map_bytes(&o->maps[big]))
			big = i;
	}
	if (!over)
		return true;
	char what[320];
	shim_live_map_describe(&o->maps[big], what, sizeof(what));
	startup_note(STORE_NOINST_PROBE_OBJECT, path, "live: %s: probe object refused, the "
		     "application runs without it: its maps need more than the device memory cap of "
		     "%llu bytes (CUBPF_MAP_MAX_MB); the largest is %s", path,
		     (unsigned long long)shim_live_session.map_cap_bytes, what);
	return false;
}

static int add_object(const char *path)
{
	struct vm_object *o;
	struct live_verdict *verdicts;
	if (guarded_load(path, &o, &verdicts) != 0)
		return 0;
	if (!maps_fit_cap(o, path)) {
		free(verdicts);
		vm_object_free(o);
		return 0;
	}
	struct vm_object **objs = realloc(shim_live_session.objs, sizeof(*objs) * (shim_live_session.nobjs + 1));
	char **paths = realloc(shim_live_session.paths, sizeof(*paths) * (shim_live_session.nobjs + 1));
	if (objs)
		shim_live_session.objs = objs;
	if (paths)
		shim_live_session.paths = paths;
	uint32_t base = shim_live_session.nmaps;
	int rc = !objs || !paths || add_maps(o, shim_live_session.nobjs) != 0 || add_progs(o, verdicts, base) != 0;
	free(verdicts);
	if (rc) {
		vm_object_free(o);
		return -1;
	}
	mark_shared(o, base);
	shim_live_session.objs[shim_live_session.nobjs] = o;
	shim_live_session.paths[shim_live_session.nobjs] = strdup(path);
	shim_live_session.nobjs++;
	return 0;
}

static int load_programs(const char *list)
{
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		return -1;
	for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save))
		if (add_object(p) != 0) {
			free(copy);
			return -1;
		}
	free(copy);
	return 0;
}

/* ---- the trace ---------------------------------------------------------------------------- */

/* A trace file is written by one process, ever: this one claims FILE by creating it, and when
 * FILE is there already (another process of the same job has it, or an earlier run left it)
 * writes FILE.PID instead; nothing recorded is overwritten or interleaved.  Returns 0 with the
 * path claimed in file, or -1 with errno. */
static int trace_claim(char *file, size_t size)
{
	int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		char taken[4096];
		snprintf(taken, sizeof(taken), "%s", file);
		if ((size_t)snprintf(file, size, "%s.%d", taken, (int)getpid()) >= size) {
			errno = ENAMETOOLONG;
			return -1;
		}
		fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0)
			shim_log(SHIM_LOG_INFO, "live: trace %s is another process's: this one "
				 "writes %s", taken, file);
	}
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static char trace_file[4096]; /* the trace this process writes (claimed) */

/* CUBPF_TRACE as a file name: "%p" becomes the pid (one trace per process of a job), and a
 * folder (one that exists, or a name ending in '/', made here) gets DIR/cubpf-PID.trace, so
 * that every process of a program writes beside the others under a name of its own. */
static void trace_path(const char *path, char *file, size_t size)
{
	struct stat st;
	size_t n = strlen(path);
	int dir = (n && path[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
	if (!dir) {
		shim_expand_pid(path, file, size);
		return;
	}
	char in[4096];
	if (n && path[n - 1] == '/')
		mkdir(path, 0777); /* EEXIST and the rest: the create below says what went wrong */
	snprintf(in, sizeof(in), "%.*s/cubpf-%%p.trace", (int)(n && path[n - 1] == '/' ? n - 1 : n),
		 path);
	shim_expand_pid(in, file, size);
}

static void trace_open(const char *path)
{
	char err[STORE_ERRLEN], host[256] = "", cmd[4096] = "";
	gethostname(host, sizeof(host) - 1);
	FILE *f = fopen("/proc/self/cmdline", "r");
	if (f) {
		size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
		fclose(f);
		for (size_t i = 0; i + 1 < n; i++)
			cmd[i] = cmd[i] ? cmd[i] : ' ';
		cmd[n] = 0;
	}
	struct store_trace_process p = { .pid = (uint32_t)getpid(), .cubpf_version = "cubpf 0.1",
					 .hostname = host, .cmdline = cmd, .ppid = (uint32_t)getppid() };
	char file[4096];
	trace_path(path, file, sizeof(file));
	uint64_t workers = shim_setting_env(SHIM_SET_TRACE_THREADS, default_trace_threads());
	struct store_trace_options opt = { .workers = (int)(workers > 64 ? 64 : workers) };
	if (trace_claim(file, sizeof(file)) != 0)
		snprintf(err, sizeof(err), "%s", strerror(errno));
	else
		shim_live_session.trace = store_trace_create(file, &p, &opt, err, sizeof(err));
	snprintf(trace_file, sizeof(trace_file), "%s", file);
	if (!shim_live_session.trace) {
		shim_log(SHIM_LOG_WARN, "live: CUBPF_TRACE=%s: %s; no trace is written", file, err);
		return;
	}
	for (uint32_t i = 0; i < shim_live_session.nobjs; i++) {
		struct store_rec_program rp = { .index = i, .nmaps = shim_live_session.objs[i]->map_cnt };
		store_trace_program(shim_live_session.trace, &rp, shim_live_session.objs[i]->name, shim_live_session.paths[i]);
	}
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++)
		store_trace_intern(shim_live_session.trace, shim_live_session.maps[i].def.name);
	trace_startup_notes();
}

/* ---- exit ---------------------------------------------------------------------------------- */

static void report_counters(void)
{
	uint64_t dev = 0, pinned = 0;
	uint32_t nctx = 0;
	shim_live_maps_memory(&dev, &pinned, &nctx);
	shim_log(SHIM_LOG_INFO, "live: %u modules instrumented (%u kernels), %u fell back to the "
		 "original, %u without PTX for the device (%u kernels not instrumentable), %u with no "
		 "matching kernel, %u loads not handled; maps: %llu device bytes in %u contexts, %llu "
		 "pinned bytes; cache: %u hits, %u misses, %u JIT compiles%s",
		 atomic_load(&shim_live_session.n.modules_instrumented), atomic_load(&shim_live_session.n.kernels_instrumented),
		 atomic_load(&shim_live_session.n.modules_fallback), atomic_load(&shim_live_session.n.modules_no_ptx),
		 atomic_load(&shim_live_session.n.kernels_no_ptx), atomic_load(&shim_live_session.n.modules_untouched),
		 atomic_load(&shim_live_session.n.modules_skipped), (unsigned long long)dev, nctx,
		 (unsigned long long)pinned, atomic_load(&shim_live_session.n.cache_hits),
		 atomic_load(&shim_live_session.n.cache_misses), atomic_load(&shim_live_session.n.jit_compiles),
		 shim_live_cache_off() ? " (cache off)" : "");
	if (atomic_load(&shim_live_session.n.modules_fallback) || atomic_load(&shim_live_session.n.fill_failures))
		shim_log(SHIM_LOG_WARN, "live: %u modules ran uninstrumented after a failure, %u map "
			 "pointers could not be stored (see the warnings above)",
			 atomic_load(&shim_live_session.n.modules_fallback), atomic_load(&shim_live_session.n.fill_failures));
}

/* The kernel ids given out, so that a reader of the maps can name them. */
static void report_kernel_ids(void)
{
	pthread_mutex_lock(&kid_lock);
	for (struct kid *k = kids; k; k = k->next)
		shim_log(SHIM_LOG_INFO, "live: kernel id %u = %s", k->id, k->name);
	pthread_mutex_unlock(&kid_lock);
}

/* What a hook does on an application's thread when it may make driver calls or write files
 * of cubpf's: the calls in relaxed capture mode (internal.h), the writes (the module cache)
 * without SIGXFSZ or SIGPIPE (store_quiet): neither may break or kill the application. */
struct own_work {
	CUstreamCaptureMode mode;
	struct store_quiet quiet;
};

static void own_begin(struct own_work *o)
{
	o->mode = shim_live_relax();
	store_quiet_begin(&o->quiet);
}

static void own_end(struct own_work *o)
{
	store_quiet_end(&o->quiet);
	shim_live_unrelax(o->mode);
}

/* Exit handlers run in the reverse order of their registration, and the real driver registers
 * its own (which shuts it down) inside the first cuInit, after cubpf's start.  So live_exit is
 * registered twice: at start (covers processes that never make a context) and again by
 * shim_live_exit_arm() once the first context exists, which puts it ahead of the driver's and the
 * CUDA runtime's handlers: the contexts are still alive and the last kernels' counts can be
 * read.  The first call does the work; the later one finds it done. */
static void live_exit(void)
{
	static atomic_int done;
	if (atomic_exchange(&done, 1))
		return;
	/* The contexts and the trace file are the parent's.  The writer is left alone, not
	 * closed: in a child its workers' buffers belong to threads that do not exist there, and
	 * store_trace_close frees the writer without them (a leak report under ASan). */
	if (shim_live_session.forked)
		return;
	struct own_work o;
	own_begin(&o); /* the last reads of every context's maps, the cache's counts */
	shim_live_maps_stop_thread();
	shim_live_metrics_stop(); /* after the last publication */
	shim_live_spans_finish();
	shim_live_snapshot_all(true);
	shim_live_ringbuf_finish();
	report_kernel_ids();
	shim_live_san_report();
	shim_live_maps_report(shim_live_session.dump_maps || shim_log_enabled(SHIM_LOG_DEBUG));
	shim_live_host_report();
	report_counters();
	shim_live_cache_close();
	if (shim_live_session.trace) {
		char err[STORE_ERRLEN];
		struct store_trace_writer *w = shim_live_session.trace;
		shim_live_session.trace = NULL;
		if (store_trace_close(w, err, sizeof(err)) != 0)
			shim_log(SHIM_LOG_WARN, "live: trace: %s", err);
	}
	own_end(&o);
}

static void arm_exit(void)
{
	atexit(live_exit);
}

void shim_live_exit_arm(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, arm_exit);
}

/* ---- fork ------------------------------------------------------------------------------------ */

static void fork_prepare(void)
{
	shim_live_cache_fork_prepare();
	if (shim_live_session.trace)
		store_trace_fork_prepare(shim_live_session.trace);
}

static void fork_parent(void)
{
	shim_live_cache_fork_parent();
	if (shim_live_session.trace)
		store_trace_fork_parent(shim_live_session.trace);
}

/* A child forked before its parent made any context (a launcher, a pool of workers started
 * first) may use CUDA itself.  It stays quiet until its first driver call through cubpf, then
 * becomes a process of its own: its own trace (FILE.PID beside the parent's), its maps, its
 * report at exit.  A child of a process with contexts cannot use CUDA (the driver refuses) and
 * stays quiet. */
static atomic_bool child_pending;
static pid_t live_pid; /* the process that probes: the one that started, or a child_start()ed one */

/* Called by libcubpf-exit.so's _exit (shim/exit/): exit handlers do not run there.  Only the
 * process that probes does its exit work: in a vfork child, which shares its parent's memory,
 * nothing may be written, and a fork child of a probing process stays quiet. */
static void exit_hook(void)
{
	if (getpid() == live_pid)
		live_exit();
}

static void register_exit_hook(void)
{
	void (*set)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(RTLD_DEFAULT,
								       "shim_exit_hook_set");
	if (set)
		set(exit_hook);
}

static struct shim_hooks live_hooks; /* (defined with the hooks, below) */

static void child_start(void)
{
	if (!atomic_exchange(&child_pending, false))
		return;
	shim_live_session.forked = false;
	live_pid = getpid();
	/* the parent's writer is left as it is (its workers are the parent's threads) */
	const char *trace = getenv("CUBPF_TRACE");
	shim_live_session.trace = NULL;
	if (trace && *trace)
		trace_open(trace);
	if (shim_live_session.trace) /* its launches' records carry their times (one thread here) */
		live_hooks.launch_untimed = false;
	shim_live_metrics_start();
	shim_log(SHIM_LOG_INFO, "live: forked child %d makes driver calls: probes on%s%s",
		 (int)getpid(), shim_live_session.trace ? ", trace " : "", shim_live_session.trace ? trace_file : "");
}

static void fork_child(void)
{
	bool fresh = !shim_live_maps_have_contexts();
	shim_live_cache_fork_child();
	if (shim_live_session.trace)
		store_trace_fork_child(shim_live_session.trace);
	shim_live_session.forked = true;
	atomic_store(&child_pending, fresh);
	pthread_mutex_init(&kid_lock, NULL);
	shim_live_maps_fork_child();
	shim_live_spans_fork_child(fresh);
	shim_live_module_fork_child();
	shim_live_link_fork_child();
	shim_live_control_fork_child();
	shim_live_metrics_fork_child();
}

/* ---- start --------------------------------------------------------------------------------- */

static inline void child_check(void)
{
	if (__builtin_expect(atomic_load_explicit(&child_pending, memory_order_relaxed), 0))
		child_start();
}

static void module_loading(struct shim_module_event *ev, void *user)
{
	struct own_work o;
	child_check();
	own_begin(&o); /* maps, the JIT, the cache's look-up and copies */
	shim_live_module_loading(ev, user);
	own_end(&o);
}

static void module_loaded(const struct shim_module_event *ev, void *user)
{
	struct own_work o;
	own_begin(&o); /* map pointers stored, maps allocated, the cache's put */
	shim_live_module_loaded(ev, user);
	own_end(&o);
}

static void module_unloaded(shim_module_t module, shim_library_t library, int result, void *user)
{
	struct own_work o;
	own_begin(&o);
	shim_live_module_unloaded(module, library, result, user);
	own_end(&o);
}

/* shim_live_launch_ctx: the launch's context, asked for at most once per launch. */
static __thread struct {
	CUcontext ctx;
	bool known;
} launch_ctx;
static atomic_uint ctx_gen;

CUcontext shim_live_launch_ctx(void)
{
	if (!launch_ctx.known) {
		launch_ctx.known = true;
		if (shim_live_cu.cuCtxGetCurrent(&launch_ctx.ctx) != CUDA_SUCCESS)
			launch_ctx.ctx = NULL;
	}
	return launch_ctx.ctx;
}

unsigned shim_live_ctx_generation(void)
{
	return atomic_load_explicit(&ctx_gen, memory_order_acquire);
}

static void launching(struct shim_launch_event *ev, void *user)
{
	launch_ctx.known = false; /* a new launch: launched() below still sees this one's */
	child_check();
	shim_live_launching(ev, user);
	shim_live_san_launching(ev); /* does nothing unless the Sanitizer backend is on */
	shim_live_spans_launching(ev); /* last: nothing of cubpf's between the event and the launch */
}

static void launched(const struct shim_launch_event *ev, void *user)
{
	(void)user;
	shim_live_san_launched();
	shim_live_host_launch(ev, true);
	shim_live_trace_launch(ev);
}

static void api_call(const struct shim_api_event *ev, void *user)
{
	(void)user;
	child_check();
	shim_live_host_api(ev);
	shim_live_trace_api(ev);
	shim_live_spans_other_call();
}

static void context_ending(const struct shim_context_event *ev, void *user)
{
	(void)user;
	struct own_work o;
	own_begin(&o); /* the last read of the context's maps */
	shim_live_teardown(ev->context, ev->device, ev->how);
	own_end(&o);
}

static void context_ended(const struct shim_context_event *ev, void *user)
{
	(void)user;
	struct own_work o;
	own_begin(&o); /* cubpf's memory of the context freed */
	shim_live_torn_down(ev->context, ev->device, ev->how, ev->result);
	atomic_fetch_add_explicit(&ctx_gen, 1, memory_order_release);
	own_end(&o);
}

static struct shim_hooks live_hooks = {
	.module_loading = module_loading,
	.module_loaded = module_loaded,
	.module_unloaded = module_unloaded,
	.launching = launching,
	.launched = launched,
	.context_ending = context_ending,
	.context_ended = context_ended,
};

/* Reads CUBPF_PROGRAMS and the settings; the hooks, or NULL when there is nothing to do. */
static const struct shim_hooks *live_start(void)
{
	const char *programs = getenv("CUBPF_PROGRAMS"), *trace_env = getenv("CUBPF_TRACE");
	char err[LIVE_ERRLEN];
	/* a trace alone (`cubpf run -o TRACE` without a tool) records API calls, kernels, spans */
	if ((!programs || !*programs) && (!trace_env || !*trace_env))
		return NULL;
	programs = programs ? programs : "";
	if (live_driver_load(err, sizeof(err)) != 0) {
		shim_log(SHIM_LOG_WARN, "live: %s; probes disabled", err);
		return NULL;
	}
	/* per-thread arrays are sized when their objects load, and an object whose maps cannot
	 * fit the cap is refused there */
	/* every number through settings.c's checks: one refused is a warning and its default */
	shim_live_session.perthread_threads = shim_setting_env(SHIM_SET_PERTHREAD_THREADS, 1u << 20);
	shim_live_session.map_cap_bytes = shim_setting_env(SHIM_SET_MAP_MAX_MB, 4096) << 20;
	if (load_programs(programs) != 0) {
		shim_log(SHIM_LOG_WARN, "live: out of memory loading %s; probes disabled", programs);
		return NULL;
	}
	const char *glob = getenv("CUBPF_KERNELS");
	shim_live_session.kernel_glob = glob && *glob ? glob : NULL;
	shim_live_session.ringbuf_bytes = shim_setting_env(SHIM_SET_RINGBUF_MB, 64) << 20;
	shim_live_session.ringbuf_threads =
		(uint32_t)shim_setting_env(SHIM_SET_RINGBUF_THREADS, default_drain_threads());
	/* at least 1, at most 2^31: never 0 once cut to 32 bits (it divides, module.c) */
	shim_live_session.sample = (uint32_t)shim_setting_env(SHIM_SET_SAMPLE, 1);
	/* The enable-word check costs every probe site a dependent load (the word) and a branch:
	 * small, not nil (memory probes run it per access), so it is compiled in only when
	 * something switches probes off: sampling, a control file, or CUBPF_ENABLE_WORDS=1. */
	const char *control = getenv("CUBPF_CONTROL");
	shim_live_session.control_path = control && *control ? control : NULL;
	shim_live_session.enable_words = shim_live_session.sample > 1 || shim_live_session.control_path ||
			    shim_setting_env(SHIM_SET_ENABLE_WORDS, 0) != 0;
	shim_live_session.shared_sums = shim_setting_env(SHIM_SET_SHARED_SUMS, 1) != 0;
	shim_live_session.interval_ms = shim_setting_env(SHIM_SET_INTERVAL_MS, 1000);
	const char *dump = getenv("CUBPF_DUMP_MAPS");
	shim_live_session.dump_maps = dump && *dump && strcmp(dump, "0") != 0;
	const char *trace = getenv("CUBPF_TRACE");
	if (trace && *trace)
		trace_open(trace);
	shim_live_metrics_start();
	if (shim_live_spans_init())
		live_hooks.event_call = shim_live_spans_event;
	if (shim_live_san_setup()) /* CUBPF_SANITIZER: subscribes after the first cuInit */
		live_hooks.driver_initialized = shim_live_san_driver_initialized;
	shim_log(SHIM_LOG_INFO, "live: %u probe objects, %u GPU programs, %s host programs, %u "
		 "maps%s%s%s", shim_live_session.nobjs, shim_live_session.nprogs, shim_live_host_any() ? "some" : "no", shim_live_session.nmaps,
		 shim_live_session.kernel_glob ? ", kernels " : "", shim_live_session.kernel_glob ? shim_live_session.kernel_glob : "",
		 shim_live_session.trace ? ", tracing" : "");
	atexit(live_exit);
	live_pid = getpid();
	register_exit_hook();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	/* Copies and synchronisations are timed only when someone reads them, and so are
	 * launches (host programs and the trace's records: host.c). */
	if (shim_live_host_any() || shim_live_session.trace)
		live_hooks.api_call = api_call;
	else
		live_hooks.launch_untimed = true;
	return shim_live_session.nprogs || shim_live_host_any() || shim_live_session.trace ? &live_hooks : NULL;
}

static const struct shim_plugin live_plugin = { .name = "live probes", .start = live_start };

__attribute__((constructor)) static void live_register(void)
{
	shim_plugin_register(&live_plugin);
}
