/* shim/live/host.c: host probes (uprobe/uretprobe on intercepted driver calls) on vm/'s
 * interpreter, and the host events written into the trace.
 *
 * A program attached to FUNC runs on the application's thread, in the call:
 *   launches (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and their _ptsz
 *   forms): uprobe before the real call, uretprobe after it, args = the call's arguments in its
 *   prototype order;
 *   copies, memsets, synchronisations, context/stream creation, graph launches (the shim's api
 *   events): both kinds after the call, args[0] = stream, args[1] = bytes (the api events carry
 *   no more of the arguments).
 * FUNC matches the exported name exactly, as a glob, or without a variant suffix
 * (uprobe/cuLaunchKernel also sees cuLaunchKernel_ptsz).  Host programs have maps of their own
 * in host memory (vm_runtime); an array that the object's GPU programs use too moves into managed
 * memory that both sides reach (maps.c share_map).
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "shim/live/internal.h"

struct hprog {
	struct vm_exec *ex;
	uint32_t obj;
	enum vm_prog_kind kind;
	const char *attach;
	const char *name;
};

static struct hprog *hprogs;
static uint32_t nhprogs;
static struct vm_runtime **rts;     /* per object, made when it has host programs */
static uint32_t nrts;
static atomic_uint_fast64_t runs, faults;

bool shim_live_host_any(void)
{
	return nhprogs != 0;
}

/* ---- set-up (from live.c, before any driver call) -------------------------------------------- */

static struct vm_runtime *runtime_of(const struct vm_object *o, uint32_t obj, char *err,
				     size_t errlen)
{
	if (obj >= nrts) {
		struct vm_runtime **r = realloc(rts, sizeof(*r) * (obj + 1));
		if (!r)
			return NULL;
		memset(r + nrts, 0, sizeof(*r) * (obj + 1 - nrts));
		rts = r;
		nrts = obj + 1;
	}
	if (!rts[obj])
		rts[obj] = vm_runtime_new(o, err, errlen);
	return rts[obj];
}

int shim_live_host_add(const struct vm_object *o, uint32_t obj, uint32_t prog)
{
	char err[VM_ERRLEN] = "";
	struct vm_runtime *rt = runtime_of(o, obj, err, sizeof(err));
	struct vm_exec *ex = rt ? vm_exec_new(rt, prog, err, sizeof(err)) : NULL;
	struct hprog *h = ex ? realloc(hprogs, sizeof(*h) * (nhprogs + 1)) : NULL;
	if (!h) {
		shim_log(SHIM_LOG_WARN, "live: %s: host program %s not started: %s", o->name,
			 o->progs[prog].name, err[0] ? err : "out of memory");
		if (ex)
			vm_exec_free(ex);
		return -1;
	}
	hprogs = h;
	hprogs[nhprogs++] = (struct hprog){ ex, obj, o->progs[prog].kind, o->progs[prog].attach,
					    o->progs[prog].name };
	return 0;
}

struct vm_runtime *shim_live_host_runtime(uint32_t obj)
{
	return obj < nrts ? rts[obj] : NULL;
}

/* ---- matching and running ---------------------------------------------------------------- */

static bool variant_suffix(const char *s)
{
	static const char *const ok[] = { "_ptsz", "_ptds", "_v2", "_v2_ptsz", "_v2_ptds", "_v3",
					  NULL };
	for (int i = 0; ok[i]; i++)
		if (!strcmp(s, ok[i]))
			return true;
	return false;
}

static bool attached(const char *attach, const char *name)
{
	size_t n = strlen(attach);
	if (!strcmp(attach, name) || fnmatch(attach, name, 0) == 0)
		return true;
	return !strncmp(attach, name, n) && variant_suffix(name + n);
}

static void run_matching(enum vm_prog_kind kind, const char *name, struct cubpf_api_ctx *ctx)
{
	for (uint32_t i = 0; i < nhprogs; i++) {
		struct hprog *h = &hprogs[i];
		if (h->kind != kind || !attached(h->attach, name))
			continue;
		uint64_t r0;
		char err[128];
		atomic_fetch_add_explicit(&runs, 1, memory_order_relaxed);
		if (vm_exec_run(h->ex, ctx, sizeof(*ctx), &r0, err, sizeof(err)) != 0 &&
		    atomic_fetch_add(&faults, 1) == 0)
			shim_log(SHIM_LOG_WARN, "live: host program %s on %s: %s (reported once)",
				 h->name, name, err);
	}
}

static void launch_args(const struct shim_launch_event *ev, struct cubpf_api_ctx *c)
{
	if (ev->api == SHIM_LAUNCH_KERNEL_EX) {
		uint64_t a[] = { (uintptr_t)ev->config, (uintptr_t)ev->func, (uintptr_t)ev->params,
				 (uintptr_t)ev->extra };
		memcpy(c->args, a, sizeof(a));
		c->nargs = 4;
		return;
	}
	uint64_t a[] = { (uintptr_t)ev->func, ev->grid[0], ev->grid[1], ev->grid[2], ev->block[0],
			 ev->block[1], ev->block[2], ev->shared_bytes, (uintptr_t)ev->stream,
			 (uintptr_t)ev->params, (uintptr_t)ev->extra };
	memcpy(c->args, a, sizeof(a));
	c->nargs = ev->api == SHIM_LAUNCH_KERNEL ? 11 : 10;
}

void shim_live_host_launch(const struct shim_launch_event *ev, bool after)
{
	if (!nhprogs || ev->api == SHIM_LAUNCH_GRAPH_NODE)
		return;
	struct cubpf_api_ctx c = { .ts_ns = shim_now_ns(), .tid = ev->tid,
				   .func_id = shim_api_id(ev->api_name) };
	launch_args(ev, &c);
	c.ret = after ? (uint64_t)(int64_t)ev->result : 0;
	run_matching(after ? VM_PROG_URETPROBE : VM_PROG_UPROBE, ev->api_name, &c);
}

void shim_live_host_api(const struct shim_api_event *ev)
{
	if (!nhprogs)
		return;
	struct cubpf_api_ctx c = { .args = { (uintptr_t)ev->stream, ev->bytes }, .nargs = 2,
				   .ts_ns = ev->ts_begin, .func_id = ev->func_id, .tid = ev->tid };
	run_matching(VM_PROG_UPROBE, ev->name, &c);
	c.ret = (uint64_t)(int64_t)ev->result;
	c.ts_ns = ev->ts_end;
	run_matching(VM_PROG_URETPROBE, ev->name, &c);
}

/* ---- trace events -------------------------------------------------------------------------- */

/* The device of a launch: its context's, which is current (the driver launches a function of
 * another context, or a library kernel, in the current one).  Readers join each GPU's probe
 * data with that GPU's launches (launchlate), and name the GPUs a run used.  The device's
 * record is written at its first launch (each thread asks once per device).  A thread remembers
 * the device of the context it launched in last (asked of the driver again when the context
 * changes, or after any context went: its handle may come back for another device). */
static uint32_t launch_device(void)
{
	static __thread uint64_t announced; /* a bit per device ordinal below 64 */
	static __thread struct {
		CUcontext ctx;
		unsigned gen;
		CUdevice dev;
	} last;
	CUcontext ctx = shim_live_launch_ctx();
	unsigned gen = shim_live_ctx_generation();
	if (ctx && ctx == last.ctx && gen == last.gen)
		return (uint32_t)last.dev;
	CUdevice dev;
	int major = 0, minor = 0;
	if (!shim_live_cu.cuCtxGetDevice || shim_live_cu.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0)
		return 0;
	if (ctx)
		last.ctx = ctx, last.gen = gen, last.dev = dev;
	if (dev < 64 && !(announced & (1ull << dev)) && shim_live_cu.cuDeviceGetAttribute) {
		announced |= 1ull << dev;
		shim_live_cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
		shim_live_cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
		shim_live_trace_device(dev, (uint32_t)(major * 10 + minor));
	}
	return (uint32_t)dev;
}

/* The trace's string ids of the names a thread's records use, so that a launch does not
 * intern two names (a hash of a mangled name, often hundreds of bytes, and the writer's lock
 * each) every time: a training step names the same few dozen strings over and over.  Keyed by
 * what cannot change its name: an API's name (a static string of the shim's) or a kernel's
 * record (it lives as long as the process, its name with it), and the writer (a forked child
 * that makes calls writes a trace of its own).  Direct-mapped; a miss interns as before. */
#define NAME_SEEN 256
static __thread struct name_seen {
	const void *key;
	const struct store_trace_writer *w;
	uint32_t id;
} name_seen[NAME_SEEN];

static uint32_t trace_name(struct store_trace_writer *w, const void *key, const char *name)
{
	struct name_seen *e = &name_seen[((uintptr_t)key * 0x9E3779B97F4A7C15ull) >> 56];
	if (e->key == key && e->w == w)
		return e->id;
	uint32_t id = store_trace_intern(w, name);
	if (id) /* 0: the string was lost (out of memory), asked again next time */
		*e = (struct name_seen){ key, w, id };
	return id;
}

/* Launches get a correlation id (from 1) shared by their API record (the host call, on the
 * thread's track), their KERNEL record and their KSPAN record (GPU begin/end, spans.c). */
static atomic_uint_fast64_t launch_seq;

void shim_live_trace_launch(const struct shim_launch_event *ev)
{
	struct store_trace_writer *w = shim_live_session.trace;
	if (!w || ev->api == SHIM_LAUNCH_GRAPH_NODE) {
		shim_live_spans_launched(ev, 0, 0);
		return;
	}
	uint64_t corr = atomic_fetch_add_explicit(&launch_seq, 1, memory_order_relaxed) + 1;
	uint64_t stream = shim_live_spans_stream(ev);
	struct store_rec_api a = { .begin_ns = ev->ts_begin, .end_ns = ev->ts_end, .stream = stream,
				   .corr = ev->kernel ? corr : 0,
				   .name = trace_name(w, ev->api_name, ev->api_name),
				   .tid = ev->tid, .result = ev->result };
	if (!ev->kernel) {
		store_trace_api(w, &a);
		shim_live_spans_launched(ev, 0, 0);
		return;
	}
	struct store_rec_kernel k = {
		.launch_ns = ev->ts_begin, .stream = stream, .corr = corr,
		.name = trace_name(w, ev->kernel, ev->kernel->name),
		.device = launch_device(),
		.grid = { ev->grid[0], ev->grid[1], ev->grid[2] },
		.block = { ev->block[0], ev->block[1], ev->block[2] },
		.shared_bytes = ev->shared_bytes, .tid = ev->tid,
	};
	store_trace_launch(w, &a, &k); /* both records, one lock */
	shim_live_spans_launched(ev, corr, k.name);
}

void shim_live_trace_api(const struct shim_api_event *ev)
{
	struct store_trace_writer *w = shim_live_session.trace;
	if (!w)
		return;
	struct store_rec_api a = { .begin_ns = ev->ts_begin, .end_ns = ev->ts_end,
				   .stream = (uintptr_t)ev->stream, .bytes = ev->bytes,
				   .name = trace_name(w, ev->name, ev->name),
				   .tid = ev->tid, .result = ev->result };
	store_trace_api(w, &a);
}

/* ---- report ---------------------------------------------------------------------------------- */

/* Host maps of the objects with host programs: every entry, bpftool-like. */
static void report_runtime(const struct vm_object *o, struct vm_runtime *rt)
{
	for (uint32_t m = 0; m < o->map_cnt; m++) {
		const struct vm_map_def *d = &o->maps[m];
		if (d->type == CUBPF_MAP_RINGBUF || d->type == CUBPF_MAP_GPU_RINGBUF ||
		    d->key_size > 64 || d->value_size > 4096)
			continue;
		uint8_t key[64], next[64], value[4096];
		const void *k = NULL;
		uint32_t n = 0;
		while (vm_map_next_key(rt, m, k, next) == 0 && n < 100000) {
			memcpy(key, next, d->key_size);
			k = key;
			n++;
			if (vm_map_lookup(rt, m, key, value) != 0)
				continue;
			char kt[200], vt[200];
			vm_map_format_bytes(key, d->key_size, kt, sizeof(kt));
			vm_map_format_bytes(value, d->value_size, vt, sizeof(vt));
			shim_log_print("map %s[%s] = %s (host)", d->name, kt, vt);
		}
	}
}

/* One HOST_MAP record of map m's entries (those the log lines show, in their order): what the
 * tools report of host maps, whatever the log level. */
static void trace_host_map(uint32_t obj, uint32_t m, const struct vm_map_def *d,
			   struct vm_runtime *rt)
{
	size_t pair = (size_t)d->key_size + d->value_size, n = 0, cap = 0;
	uint8_t *kv = NULL, key[64], next[64];
	const void *k = NULL;
	for (uint32_t seen = 0; vm_map_next_key(rt, m, k, next) == 0 && seen < 100000; seen++) {
		memcpy(key, next, d->key_size);
		k = key;
		if (n == cap) {
			uint8_t *q = realloc(kv, (cap = cap ? 2 * cap : 64) * pair);
			if (!q)
				break; /* what was read so far is written */
			kv = q;
		}
		memcpy(kv + n * pair, key, d->key_size);
		n += vm_map_lookup(rt, m, key, kv + n * pair + d->key_size) == 0;
	}
	struct store_rec_map r = {
		.ts_ns = shim_now_ns(), .prog = obj, .map = m,
		.name = store_trace_intern(shim_live_session.trace, d->name), .map_type = d->type,
		.key_size = d->key_size, .value_size = d->value_size, .count = (uint32_t)n,
	};
	store_trace_host_map(shim_live_session.trace, &r, kv, n * pair);
	free(kv);
}

static void trace_runtime(uint32_t obj, const struct vm_object *o, struct vm_runtime *rt)
{
	for (uint32_t m = 0; m < o->map_cnt; m++) {
		const struct vm_map_def *d = &o->maps[m];
		if (d->type != CUBPF_MAP_RINGBUF && d->type != CUBPF_MAP_GPU_RINGBUF &&
		    d->key_size <= 64 && d->value_size <= 4096)
			trace_host_map(obj, m, d, rt);
	}
}

void shim_live_host_report(void)
{
	if (!nhprogs)
		return;
	shim_log(SHIM_LOG_INFO, "live: %u host programs ran %llu times (%llu faults)", nhprogs,
		 (unsigned long long)atomic_load(&runs), (unsigned long long)atomic_load(&faults));
	for (uint32_t i = 0; i < nrts; i++) {
		if (rts[i] && shim_live_session.trace)
			trace_runtime(i, shim_live_session.objs[i], rts[i]);
		if (rts[i] && shim_log_enabled(SHIM_LOG_INFO))
			report_runtime(shim_live_session.objs[i], rts[i]);
	}
}
