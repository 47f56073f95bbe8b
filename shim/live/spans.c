/* shim/live/spans.c: GPU kernel spans for the trace (KSPAN records, store/FORMAT.md 1.1).
 *
 * While a trace is written (and CUBPF_SPANS is not 0), every kernel launch (instrumented or
 * not) is bracketed by two CUDA events recorded on the launch's own stream, just before and
 * just after the real launch call.  Recording an event never makes the stream wait for anything
 * and never makes the host wait: the two cuEventRecord calls are the whole per-launch cost
 * (plus a capture check and a lock), and only while tracing.
 *
 * Why events and not %globaltimer in the kernel: events time every kernel, also those that
 * cannot be instrumented (SASS only, PyTorch) and those no probe matches, with no change to the
 * kernel; they bracket the kernel the way the application's own cudaEventRecord pairs do, which
 * is what users compare against.
 *
 * Events come from a bounded pool per context (SPAN_SLOTS pairs, created on demand).  When the
 * pool is empty (the GPU is far behind the host) the launch gets no span: it is counted and a
 * DROP record (source SPANS) says how many.  A background thread (one per process, every
 * 1 to 8 ms: poller_main) polls the pending pairs with cuEventElapsedTime (never waits: it says
 * NOT_READY for a pair not complete), and converts completed ones to host time:
 *   duration = cuEventElapsedTime(begin, end)                       (0.5 us resolution)
 *   begin    = ref_host_ns + cuEventElapsedTime(ref, begin)
 * where `ref` is an event of cubpf's own stream whose host time was measured (record, wait for
 * it on cubpf's stream only, host clock before and after: midpoint, +/- half the round trip,
 * best of 3).  The reference is taken again every REBASE_MS: cuEventElapsedTime returns float
 * milliseconds (24-bit mantissa: 0.1 us steps at 2 s) and the GPU clock drifts from the host's
 * by some ppm, so the distance to the reference is kept short.
 *
 * When the application times a launch itself it records its start event just before it.  A
 * begin event recorded after that one would lie inside the application's pair, which would then
 * measure cubpf's event as well (each costs the GPU about 2 us between two kernels on an H100):
 * span and program would differ by two events.  So when the application records a timing event
 * (not one made with CU_EVENT_DISABLE_TIMING, as events kept only for ordering are), a begin
 * event is recorded on the same stream just before it ("armed"), and the launch that follows on
 * the same thread and stream uses it: then only cubpf's end event lies inside the program's pair
 * and only the program's start event inside the span.  Any other call of the thread in between
 * (a copy, a synchronisation, a launch elsewhere) disarms it and the launch records its own.
 * Once a launch has used such a begin event, the thread's next event on that stream is taken for
 * the program's stop event and arms nothing: a begin event there would lie inside the program's
 * pair too.
 *
 * Not timed: kernels captured into a graph (cuStreamIsCapturing; the launch is not a launch),
 * launches on a stream that has carried a programmatic dependent launch (cuLaunchKernelEx with
 * PROGRAMMATIC_STREAM_SERIALIZATION or PROGRAMMATIC_EVENT: an event between two such kernels
 * would stop them overlapping, so from the first one on that stream gets no more events),
 * graph launches (cuGraphLaunch: an API record only), the deprecated cuLaunch/cuLaunchGrid and
 * multi-device forms.  Per-thread-default-stream launches (_ptsz with stream 0) record on
 * CU_STREAM_PER_THREAD, never on the legacy stream (which would synchronise with every
 * blocking stream).  The polling thread relaxes its stream-capture mode so that its queries
 * never interfere with an application's capture.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/live/internal.h"

#define SPAN_SLOTS 4096       /* event pairs per context: how far the GPU may fall behind */
#define SPAN_PREMADE 256      /* pairs made with the context's state, off the launch path */
#define REBASE_MS 1000        /* a fresh reference event this often */
#define POLL_US 1000          /* the poller's sleep while the GPU is far behind, */
#define POLL_MAX_US 8000      /* and otherwise at most */
#define REF_ROUNDS 3
#define REF_EVENTS (REF_ROUNDS + 2) /* the rounds' events, and the two references kept */
#define REF_WAIT_NS 100000000ull /* give up a reference measurement after 100 ms */
#define MAX_PDL_STREAMS 64

typedef CUresult (*event_create_fn)(CUevent *, unsigned);
typedef CUresult (*event_fn)(CUevent);
typedef CUresult (*event_record_fn)(CUevent, CUstream);
typedef CUresult (*elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*capturing_fn)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*stream_create_fn)(CUstream *, unsigned);
typedef CUresult (*stream_destroy_fn)(CUstream);

static struct {
	event_create_fn create;
	event_fn destroy, query, sync;
	event_record_fn record;
	elapsed_fn elapsed;
	capturing_fn capturing;
	stream_create_fn stream_create;
	stream_destroy_fn stream_destroy;
} ev_cu;

struct slot {
	CUevent ev[2];              /* begin, end */
	uint64_t corr;
	uint64_t stream;            /* as written in the trace */
	uint32_t name;
	uint32_t ref_gen;           /* the reference in use when the launch was made */
};

struct span_ctx {
	CUcontext ctx;
	CUdevice dev;
	CUstream stream;            /* cubpf's own, for the reference event */
	CUevent refs[REF_EVENTS];   /* reference candidates: the best round's becomes `ref` */
	CUevent ref, prev;          /* the reference in use and the one before it */
	uint64_t ref_host_ns;       /* host time of ref; 0 = not measured (no spans written) */
	uint64_t prev_host_ns;
	uint32_t ref_unc_ns, prev_unc_ns;
	atomic_uint ref_gen;        /* bumped with each new reference; launches note it */
	uint64_t ref_taken_ns;      /* when it was measured */
	struct slot *slots;
	uint32_t made;              /* slots whose events exist */
	uint32_t cap;               /* SPAN_SLOTS, or fewer once the driver refused an event */
	uint32_t *free_list, nfree; /* slot indices ready to use */
	uint32_t *pending, npending;/* submitted by launches, not yet seen by the poller */
	uint32_t *work, nwork;      /* the poller's: submitted, not completed, in launch order */
	pthread_mutex_t lock;       /* free_list, pending, made */
	uint64_t dropped;           /* launches without a span (pool empty) */
	uint64_t dropped_written;
	uint64_t written, failed, captured, pdl;
	uint64_t early;             /* spans begun before the application's own start event */
	uint64_t pdl_streams[MAX_PDL_STREAMS]; /* streams that carried a programmatic launch */
	uint32_t npdl;              /* (under lock) */
	struct span_ctx *next;
};

static bool spans_on;
static bool finished;           /* exit report done: teardowns after it only free */
static struct span_ctx *sctxs;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER; /* sctxs, the poller's work */
static atomic_uint gen;         /* bumped when a span_ctx goes: the threads' caches are stale */
static pthread_t poller;
static atomic_int poller_state; /* 0 none, 1 running, 2 stopping */
/* The poller's sleep, which a launch cuts short when a pool is a quarter in flight (poll_kick). */
static pthread_mutex_t poll_mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t poll_cv;
static atomic_bool poll_kicked;  /* a kick is under way: later launches do not signal again */

/* What launching() hands to launched() on the same thread. */
static __thread struct {
	struct span_ctx *sc;
	uint32_t slot;
	uint64_t stream;
	bool armed;
	bool early;                 /* the begin event was recorded before a program's event */
} cur;

#define LOAD(field, name)                                                                         \
	((ev_cu.field = (__typeof__(ev_cu.field))shim_real(name)) != NULL)

bool shim_live_spans_init(void)
{
	const char *v = getenv("CUBPF_SPANS");
	if (!shim_live_session.trace || (v && !strcmp(v, "0")))
		return false;
	bool ok = LOAD(create, "cuEventCreate") && LOAD(destroy, "cuEventDestroy_v2") &&
		  LOAD(query, "cuEventQuery") && LOAD(sync, "cuEventSynchronize") &&
		  LOAD(record, "cuEventRecord") && LOAD(capturing, "cuStreamIsCapturing") &&
		  LOAD(stream_create, "cuStreamCreate") && LOAD(stream_destroy, "cuStreamDestroy_v2");
	if (ok && !LOAD(elapsed, "cuEventElapsedTime_v2"))
		ok = LOAD(elapsed, "cuEventElapsedTime");
	if (!ok) {
		shim_log(SHIM_LOG_WARN, "live: the driver lacks the event functions: no kernel spans");
		return false;
	}
	spans_on = true;
	return true;
}
#undef LOAD

/* ---- reference time ------------------------------------------------------------------------ */

/* One round: record e on cubpf's stream, host clock before and after it completed (polling,
 * bounded: this waits for cubpf's own stream only, never for the application's). */
static int ref_round(struct span_ctx *sc, CUevent e, uint64_t *host, uint64_t *rtt)
{
	uint64_t t0 = shim_now_ns(), t1;
	if (ev_cu.record(e, sc->stream) != CUDA_SUCCESS)
		return -1;
	CUresult r;
	while ((r = ev_cu.query(e)) == CUDA_ERROR_NOT_READY && shim_now_ns() - t0 < REF_WAIT_NS)
		;
	t1 = shim_now_ns();
	if (r != CUDA_SUCCESS)
		return -1;
	*host = t0 + (t1 - t0) / 2;
	*rtt = t1 - t0;
	return 0;
}

/* A fresh reference: best of REF_ROUNDS rounds, each on its own event so that the best one's
 * event is the one kept.  The previous reference stands when this fails.  The reference in use
 * and the one before it are kept (not re-recorded): a launch made under reference generation g
 * is converted against the reference of generation g, which was complete (so recorded earlier on
 * the GPU) before the launch's begin event: the elapsed time is never negative. */
static void rebase(struct span_ctx *sc)
{
	uint64_t best = UINT64_MAX, host = 0;
	CUevent keep = NULL;
	for (int i = 0; i < REF_EVENTS; i++) {
		uint64_t h, rtt;
		if (sc->refs[i] == sc->ref || sc->refs[i] == sc->prev)
			continue; /* in use */
		if (ref_round(sc, sc->refs[i], &h, &rtt) == 0 && rtt < best)
			best = rtt, host = h, keep = sc->refs[i];
	}
	sc->ref_taken_ns = shim_now_ns();
	if (!keep)
		return;
	sc->prev = sc->ref, sc->prev_host_ns = sc->ref_host_ns, sc->prev_unc_ns = sc->ref_unc_ns;
	sc->ref = keep;
	sc->ref_host_ns = host;
	sc->ref_unc_ns = (uint32_t)(best / 2 > UINT32_MAX ? UINT32_MAX : best / 2);
	atomic_fetch_add_explicit(&sc->ref_gen, 1, memory_order_release);
}

/* ---- contexts -------------------------------------------------------------------------------- */

/* The events of slot `made` (the caller holds the lock or owns sc); false, and no more slots
 * (cap = made), when the driver refuses one. */
static bool slot_make(struct span_ctx *sc)
{
	struct slot *s = &sc->slots[sc->made];
	if (ev_cu.create(&s->ev[0], CU_EVENT_DEFAULT) == CUDA_SUCCESS) {
		if (ev_cu.create(&s->ev[1], CU_EVENT_DEFAULT) == CUDA_SUCCESS)
			return true;
		ev_cu.destroy(s->ev[0]);
	}
	sc->cap = sc->made;
	return false;
}

static void sctx_free(struct span_ctx *sc)
{
	for (uint32_t i = 0; i < sc->made; i++) {
		ev_cu.destroy(sc->slots[i].ev[0]);
		ev_cu.destroy(sc->slots[i].ev[1]);
	}
	for (int i = 0; i < REF_EVENTS; i++)
		if (sc->refs[i])
			ev_cu.destroy(sc->refs[i]);
	if (sc->stream)
		ev_cu.stream_destroy(sc->stream);
	pthread_mutex_destroy(&sc->lock);
	free(sc->slots);
	free(sc->free_list);
	free(sc->pending);
	free(sc->work);
	free(sc);
}

/* Made on the first launch in a context, on the application's thread (the context is current). */
static struct span_ctx *sctx_new(CUcontext ctx)
{
	struct span_ctx *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return NULL;
	sc->ctx = ctx;
	sc->cap = SPAN_SLOTS;
	pthread_mutex_init(&sc->lock, NULL);
	sc->slots = calloc(SPAN_SLOTS, sizeof(*sc->slots));
	sc->free_list = malloc(SPAN_SLOTS * sizeof(uint32_t));
	sc->pending = malloc(SPAN_SLOTS * sizeof(uint32_t));
	sc->work = malloc(SPAN_SLOTS * sizeof(uint32_t));
	bool ok = sc->slots && sc->free_list && sc->pending && sc->work &&
		  shim_live_cu.cuCtxGetDevice(&sc->dev) == CUDA_SUCCESS &&
		  ev_cu.stream_create(&sc->stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
	for (int i = 0; ok && i < REF_EVENTS; i++)
		ok = ev_cu.create(&sc->refs[i], CU_EVENT_DEFAULT) == CUDA_SUCCESS;
	/* Making an event costs the host about a microsecond: made here, not between the
	 * application's own event and its kernel, where it would lengthen what the program measures
	 * on an idle stream. */
	while (ok && sc->made < SPAN_PREMADE && slot_make(sc))
		sc->free_list[sc->nfree++] = sc->made++;
	if (ok)
		rebase(sc);
	if (!ok || !sc->ref_host_ns) {
		shim_log(SHIM_LOG_WARN, "live: no kernel spans in context %p: cubpf's reference "
			 "event cannot be recorded", (void *)ctx);
		sctx_free(sc);
		return NULL;
	}
	shim_live_exit_arm(); /* spans are collected at exit before the runtime's handlers run */
	shim_log(SHIM_LOG_INFO, "live: kernel spans in context %p (device %d): reference event "
		 "+/- %u ns, %u event pairs at most", (void *)ctx, (int)sc->dev, sc->ref_unc_ns,
		 SPAN_SLOTS);
	return sc;
}

static void poller_start(void);

/* The span state of the current context, made on first use.  A per-thread cache keeps later
 * launches at one comparison; `gen` invalidates it when a context's state goes away. */
static struct span_ctx *sctx_of(CUcontext ctx)
{
	static __thread CUcontext last_ctx;
	static __thread struct span_ctx *last_sc;
	static __thread unsigned last_gen;
	static struct span_ctx *const failed = (struct span_ctx *)1;
	unsigned g = atomic_load_explicit(&gen, memory_order_acquire);
	if (ctx == last_ctx && g == last_gen && last_sc)
		return last_sc == failed ? NULL : last_sc;
	pthread_mutex_lock(&list_lock);
	struct span_ctx *sc = sctxs;
	while (sc && sc->ctx != ctx)
		sc = sc->next;
	if (!sc) {
		/* The first launch in a context may be captured into a graph: the reference round
		 * (an event query) must not be an "unsafe" call that invalidates the application's
		 * capture (issue 16: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED at that launch). */
		CUstreamCaptureMode mode = shim_live_relax();
		sc = sctx_new(ctx);
		shim_live_unrelax(mode);
		if (sc) {
			sc->next = sctxs;
			sctxs = sc;
		}
	}
	pthread_mutex_unlock(&list_lock);
	if (sc)
		poller_start();
	last_ctx = ctx, last_gen = g, last_sc = sc ? sc : failed;
	return sc;
}

/* ---- the launch path (application threads) -------------------------------------------------- */

static bool ends_with_ptsz(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n > 5 && !strcmp(s + n - 5, "_ptsz");
}

static void poll_kick(void);

/* A free slot with its events, or UINT32_MAX (for a launch, counted as dropped).  With a quarter
 * of the pool in flight the poller is woken (it may be sleeping its longest). */
static uint32_t slot_take(struct span_ctx *sc, bool launch)
{
	uint32_t i = UINT32_MAX;
	pthread_mutex_lock(&sc->lock);
	bool behind = (sc->made - sc->nfree) * 4 > sc->cap;
	if (sc->nfree) {
		i = sc->free_list[--sc->nfree];
	} else if (sc->made < sc->cap) {
		if (slot_make(sc))
			i = sc->made++;
		else /* out of events: make do with those made */
			__atomic_fetch_add(&sc->failed, 1, __ATOMIC_RELAXED);
	} else {
		sc->dropped += launch;
	}
	pthread_mutex_unlock(&sc->lock);
	if (behind)
		poll_kick();
	return i;
}

static void slot_give(struct span_ctx *sc, uint32_t i)
{
	pthread_mutex_lock(&sc->lock);
	sc->free_list[sc->nfree++] = i;
	pthread_mutex_unlock(&sc->lock);
}

/* A launch that may overlap the previous kernel of its stream (programmatic dependent launch). */
static bool programmatic(const struct shim_launch_event *ev)
{
	const CUlaunchConfig *c = ev->config;
	if (ev->api != SHIM_LAUNCH_KERNEL_EX || !c || !c->attrs)
		return false;
	for (unsigned i = 0; i < c->numAttrs; i++)
		if ((c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
		     c->attrs[i].value.programmaticStreamSerializationAllowed) ||
		    c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
			return true;
	return false;
}

/* Remembers (pdl) or looks up a stream that carried a programmatic launch; true = no events. */
static bool pdl_stream(struct span_ctx *sc, uint64_t stream, bool pdl)
{
	bool found = false;
	if (!pdl && !__atomic_load_n(&sc->npdl, __ATOMIC_RELAXED))
		return false; /* the common case: no such stream, no lock */
	pthread_mutex_lock(&sc->lock);
	for (uint32_t i = 0; i < sc->npdl && !found; i++)
		found = sc->pdl_streams[i] == stream;
	if (pdl && !found && sc->npdl < MAX_PDL_STREAMS)
		sc->pdl_streams[sc->npdl] = stream,
		__atomic_store_n(&sc->npdl, sc->npdl + 1, __ATOMIC_RELAXED);
	sc->pdl += pdl || found;
	pthread_mutex_unlock(&sc->lock);
	return pdl || found;
}

/* The stream an event of cubpf's goes on for a call on `stream` through `api` (never the legacy
 * stream for a per-thread call). */
static CUstream span_stream(const void *stream, const char *api)
{
	if (!stream && ends_with_ptsz(api))
		return CU_STREAM_PER_THREAD;
	return (CUstream)stream;
}

/* True (counted for launches) when s is being captured into a graph: an event recorded there
 * would become a node of the application's graph. */
static bool capturing(struct span_ctx *sc, CUstream s, bool launch)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if (ev_cu.capturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE)
		return false;
	if (launch)
		__atomic_fetch_add(&sc->captured, 1, __ATOMIC_RELAXED);
	return true;
}

/* ---- begin events armed by the application's own events ------------------------------------- */

/* Events made with CU_EVENT_DISABLE_TIMING (or INTERPROCESS, which needs it): a set of handles,
 * open addressing, 0 = empty, 1 = deleted.  When it cannot grow, such an event arms a begin
 * event like a timing one: a wasted event record, nothing worse. */
static pthread_mutex_t untimed_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *untimed;
static size_t untimed_cap, untimed_used, untimed_live; /* used counts the deleted ones too */

static size_t untimed_home(uintptr_t e, size_t cap)
{
	return (size_t)(((uint64_t)e >> 4) * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
}

/* Where e is, or else the empty place that ends its probe sequence (cap must be > 0). */
static size_t untimed_find(uintptr_t e)
{
	size_t i = untimed_home(e, untimed_cap);
	while (untimed[i] != e && untimed[i] != 0)
		i = (i + 1) & (untimed_cap - 1);
	return i;
}

static bool untimed_rehash(size_t cap)
{
	uintptr_t *old = untimed, *t = calloc(cap, sizeof(*t));
	size_t old_cap = untimed_cap;
	if (!t)
		return false;
	untimed = t, untimed_cap = cap, untimed_used = untimed_live;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i] > 1)
			untimed[untimed_find(old[i])] = old[i];
	free(old);
	return true;
}

static void untimed_add(const void *event)
{
	uintptr_t e = (uintptr_t)event;
	pthread_mutex_lock(&untimed_lock);
	size_t cap = untimed_cap ? untimed_cap : 64;
	while ((untimed_live + 1) * 4 > cap)
		cap *= 2;
	if ((untimed_used + 1) * 2 > untimed_cap && !untimed_rehash(cap)) {
		pthread_mutex_unlock(&untimed_lock);
		return;
	}
	size_t i = untimed_find(e);
	if (untimed[i] != e)
		untimed[i] = e, untimed_used++, untimed_live++;
	pthread_mutex_unlock(&untimed_lock);
}

static void untimed_remove(const void *event)
{
	pthread_mutex_lock(&untimed_lock);
	if (untimed_live) {
		size_t i = untimed_find((uintptr_t)event);
		if (untimed[i] == (uintptr_t)event)
			untimed[i] = 1, untimed_live--;
	}
	pthread_mutex_unlock(&untimed_lock);
}

static bool untimed_has(const void *event)
{
	bool found = false;
	pthread_mutex_lock(&untimed_lock);
	if (untimed_live)
		found = untimed[untimed_find((uintptr_t)event)] == (uintptr_t)event;
	pthread_mutex_unlock(&untimed_lock);
	return found;
}

/* The begin event this thread recorded before its last application event, for a launch that
 * follows on the same stream. */
static __thread struct {
	struct span_ctx *sc;
	uint32_t slot;
	unsigned gen;               /* `gen` when armed: a changed one means sc may be gone */
	uint64_t stream;
	bool armed;
} pre;
static pthread_key_t pre_key;
static pthread_once_t pre_once = PTHREAD_ONCE_INIT;

/* The stream of this thread's last launch that began at a program's event, until the thread
 * records its next event there (the program's stop event, presumably). */
static __thread struct {
	uint64_t stream;
	bool open;
} timed;

/* The slot goes back to its pool (unless its context went meanwhile; in a fork()ed child the
 * parent's pool is not ours, and its lock may have been held at the fork). */
static void pre_disarm(void)
{
	if (!pre.armed)
		return;
	pre.armed = false;
	if (!spans_on || shim_live_session.forked)
		return;
	pthread_mutex_lock(&list_lock);
	if (atomic_load(&gen) == pre.gen)
		slot_give(pre.sc, pre.slot);
	pthread_mutex_unlock(&list_lock);
}

static void pre_thread_exit(void *unused)
{
	(void)unused;
	pre_disarm();
}

static void pre_key_make(void)
{
	if (pthread_key_create(&pre_key, pre_thread_exit) != 0)
		pre_key = (pthread_key_t)-1;
}

/* Before the application records a timing event: a begin event just before it. */
static void arm(const struct shim_event_call *ev)
{
	CUcontext ctx = NULL;
	if (untimed_has(ev->event) || shim_live_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
		return;
	struct span_ctx *sc = sctx_of(ctx);
	if (!sc)
		return;
	CUstream s = span_stream(ev->stream, ev->api_name);
	if (timed.open && timed.stream == (uintptr_t)s) {
		timed.open = false; /* the stop event of the program's pair */
		return;
	}
	if (pdl_stream(sc, (uintptr_t)s, false) || capturing(sc, s, false)) {
		pre_disarm();
		return;
	}
	unsigned g = atomic_load_explicit(&gen, memory_order_acquire);
	bool reuse = pre.armed && pre.sc == sc && pre.gen == g; /* re-record the armed slot */
	if (!reuse)
		pre_disarm();
	uint32_t i = reuse ? pre.slot : slot_take(sc, false);
	if (i == UINT32_MAX)
		return;
	pre.armed = false;
	/* before the record: host time between it and the program's event shows in the span */
	pthread_once(&pre_once, pre_key_make);
	if (pre_key != (pthread_key_t)-1 && !pthread_getspecific(pre_key))
		pthread_setspecific(pre_key, (void *)1); /* so that pre_thread_exit runs */
	sc->slots[i].ref_gen = atomic_load_explicit(&sc->ref_gen, memory_order_acquire);
	if (ev_cu.record(sc->slots[i].ev[0], s) != CUDA_SUCCESS) {
		slot_give(sc, i);
		return;
	}
	pre.sc = sc, pre.slot = i, pre.gen = g, pre.stream = (uintptr_t)s, pre.armed = true;
}

void shim_live_spans_event(const struct shim_event_call *ev, void *user)
{
	(void)user;
	if (!spans_on || shim_live_session.forked)
		return;
	switch (ev->op) {
	case SHIM_EVENT_CREATED:
		if (ev->flags & (CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
			untimed_add(ev->event);
		break;
	case SHIM_EVENT_DESTROYING:
		untimed_remove(ev->event);
		break;
	case SHIM_EVENT_RECORDING:
		arm(ev);
		break;
	}
}

void shim_live_spans_other_call(void)
{
	if (pre.armed)
		pre_disarm();
}

/* The slot armed for this launch, if the thread's last call recorded an application event on
 * the same stream; UINT32_MAX otherwise (and any armed slot goes back). */
static uint32_t pre_take(struct span_ctx *sc, uint64_t stream)
{
	if (!pre.armed)
		return UINT32_MAX;
	if (pre.sc != sc || pre.stream != stream ||
	    pre.gen != atomic_load_explicit(&gen, memory_order_acquire)) {
		pre_disarm();
		return UINT32_MAX;
	}
	pre.armed = false;
	return pre.slot;
}

void shim_live_spans_launching(const struct shim_launch_event *ev)
{
	cur.armed = false;
	if (!spans_on || shim_live_session.forked)
		return;
	if (ev->api != SHIM_LAUNCH_KERNEL && ev->api != SHIM_LAUNCH_KERNEL_EX &&
	    ev->api != SHIM_LAUNCH_COOPERATIVE) {
		pre_disarm();
		return;
	}
	CUcontext ctx = shim_live_launch_ctx();
	if (!ctx)
		return;
	struct span_ctx *sc = sctx_of(ctx);
	if (!sc)
		return;
	CUstream s = span_stream(ev->stream, ev->api_name);
	if (pdl_stream(sc, (uintptr_t)s, programmatic(ev)) || capturing(sc, s, true)) {
		pre_disarm();
		return;
	}
	uint32_t i = pre_take(sc, (uintptr_t)s);
	cur.early = i != UINT32_MAX;
	if (i == UINT32_MAX) {
		if ((i = slot_take(sc, true)) == UINT32_MAX)
			return;
		sc->slots[i].ref_gen = atomic_load_explicit(&sc->ref_gen, memory_order_acquire);
		if (ev_cu.record(sc->slots[i].ev[0], s) != CUDA_SUCCESS) {
			slot_give(sc, i);
			return;
		}
	}
	cur.sc = sc, cur.slot = i, cur.stream = (uintptr_t)s, cur.armed = true;
}

uint64_t shim_live_spans_stream(const struct shim_launch_event *ev)
{
	return (uintptr_t)span_stream(ev->stream, ev->api_name);
}

void shim_live_spans_launched(const struct shim_launch_event *ev, uint64_t corr, uint32_t name)
{
	if (!cur.armed)
		return;
	cur.armed = false;
	struct span_ctx *sc = cur.sc;
	struct slot *s = &sc->slots[cur.slot];
	if (ev->result != CUDA_SUCCESS || !corr ||
	    ev_cu.record(s->ev[1], (CUstream)(uintptr_t)cur.stream) != CUDA_SUCCESS) {
		slot_give(sc, cur.slot);
		return;
	}
	s->corr = corr;
	s->stream = cur.stream;
	s->name = name;
	if (cur.early) {
		__atomic_fetch_add(&sc->early, 1, __ATOMIC_RELAXED);
		timed.stream = cur.stream, timed.open = true;
	}
	pthread_mutex_lock(&sc->lock);
	sc->pending[sc->npending++] = cur.slot; /* at most SPAN_SLOTS slots exist */
	pthread_mutex_unlock(&sc->lock);
}

/* ---- the poller --------------------------------------------------------------------------- */

/* Host time of a span's begin event, from the reference of the launch's generation (or the one
 * before: never a later one, which the GPU may have reached after the event); false when the
 * driver cannot say. */
static bool host_time(struct span_ctx *sc, const struct slot *s, CUevent e, uint64_t *out,
		      uint32_t *unc)
{
	uint32_t g = atomic_load_explicit(&sc->ref_gen, memory_order_relaxed);
	CUevent ref = sc->ref;
	uint64_t host = sc->ref_host_ns;
	*unc = sc->ref_unc_ns;
	if (s->ref_gen + 1 == g && sc->prev)
		ref = sc->prev, host = sc->prev_host_ns, *unc = sc->prev_unc_ns;
	float ms;
	if (ev_cu.elapsed(&ms, ref, e) == CUDA_SUCCESS) {
		*out = host + (uint64_t)(int64_t)((double)ms * 1e6);
		return true;
	}
	if (ev_cu.elapsed(&ms, e, ref) == CUDA_SUCCESS) { /* older launch: before the reference */
		*out = host - (uint64_t)(int64_t)((double)ms * 1e6);
		return true;
	}
	return false;
}

/* The KSPAN records of a round, appended together: the application's launches append under
 * the writer's lock too, and a launch that finds it held sleeps and is woken by a system call
 * (a lock a span was a contended lock many times a round).  Every poll_ctx caller holds
 * list_lock, which guards these. */
#define KSPAN_BATCH 256
static struct store_rec_kspan kbatch[KSPAN_BATCH];
static size_t nkbatch;

static void kspans_flush(void)
{
	if (nkbatch && shim_live_session.trace)
		store_trace_kspans(shim_live_session.trace, kbatch, nkbatch);
	nkbatch = 0;
}

/* 1 = written (or failed for good), 0 = not complete yet.  The span's duration is asked first
 * and is the completion check as well (cuEventElapsedTime says NOT_READY while the end event
 * is pending): a cuEventQuery per span fewer, and the poller's driver calls compete with the
 * application's launches for the driver. */
static int collect(struct span_ctx *sc, struct slot *s, bool wait)
{
	float ms = 0;
	CUresult r = wait ? ev_cu.sync(s->ev[1]) : CUDA_SUCCESS;
	if (r == CUDA_SUCCESS)
		r = ev_cu.elapsed(&ms, s->ev[0], s->ev[1]);
	if (r == CUDA_ERROR_NOT_READY && !wait)
		return 0;
	uint64_t begin;
	uint32_t unc;
	if (r != CUDA_SUCCESS || !host_time(sc, s, s->ev[0], &begin, &unc)) {
		__atomic_fetch_add(&sc->failed, 1, __ATOMIC_RELAXED);
		return 1;
	}
	uint64_t dur = ms > 0 ? (uint64_t)((double)ms * 1e6 + 0.5) : 0;
	kbatch[nkbatch++] = (struct store_rec_kspan){
		.corr = s->corr, .begin_ns = begin, .end_ns = begin + dur, .stream = s->stream,
		.name = s->name, .device = (uint32_t)sc->dev, .ref_uncertainty_ns = unc };
	if (nkbatch == KSPAN_BATCH)
		kspans_flush();
	sc->written++;
	return 1;
}

#define MAX_BLOCKED 64

/* Takes the newly submitted slots, collects the completed ones (in launch order; once a stream
 * has an incomplete span, its later ones are not asked about this round), frees them.  True
 * when a quarter of the pool is still in flight (the GPU is far behind: poll again soon). */
static bool poll_ctx(struct span_ctx *sc, bool wait)
{
	uint32_t done[SPAN_SLOTS], ndone = 0, keep = 0;
	uint64_t blocked[MAX_BLOCKED];
	uint32_t nblocked = 0;
	pthread_mutex_lock(&sc->lock);
	memcpy(sc->work + sc->nwork, sc->pending, sc->npending * sizeof(uint32_t));
	sc->nwork += sc->npending;
	sc->npending = 0;
	uint64_t dropped = sc->dropped;
	pthread_mutex_unlock(&sc->lock);
	if (!wait && shim_now_ns() - sc->ref_taken_ns > REBASE_MS * 1000000ull)
		rebase(sc);
	for (uint32_t w = 0; w < sc->nwork; w++) {
		uint32_t i = sc->work[w];
		struct slot *s = &sc->slots[i];
		bool skip = false;
		for (uint32_t b = 0; b < nblocked && !skip; b++)
			skip = blocked[b] == s->stream;
		if (!skip && collect(sc, s, wait)) {
			done[ndone++] = i;
			continue;
		}
		if (!skip && nblocked < MAX_BLOCKED)
			blocked[nblocked++] = s->stream;
		sc->work[keep++] = i;
	}
	sc->nwork = keep;
	kspans_flush();
	pthread_mutex_lock(&sc->lock);
	memcpy(sc->free_list + sc->nfree, done, ndone * sizeof(uint32_t));
	sc->nfree += ndone;
	pthread_mutex_unlock(&sc->lock);
	if (dropped > sc->dropped_written && shim_live_session.trace) {
		struct store_rec_drop d = { .ts_ns = shim_now_ns(), .source = STORE_DROP_SPANS,
					    .records = dropped - sc->dropped_written };
		store_trace_drop(shim_live_session.trace, &d);
		sc->dropped_written = dropped;
	}
	return sc->nwork * 4 > sc->cap;
}

/* Polls every context; true when one of them is far behind. */
static bool poll_all(bool wait)
{
	bool behind = false;
	pthread_mutex_lock(&list_lock);
	for (struct span_ctx *sc = sctxs; sc; sc = sc->next) {
		CUcontext popped;
		if (shim_live_cu.cuCtxPushCurrent_v2(sc->ctx) != CUDA_SUCCESS)
			continue;
		behind |= poll_ctx(sc, wait);
		shim_live_cu.cuCtxPopCurrent_v2(&popped);
	}
	pthread_mutex_unlock(&list_lock);
	return behind;
}

/* Wakes the poller now (once until its next round). */
static void poll_kick(void)
{
	if (atomic_load_explicit(&poll_kicked, memory_order_relaxed) ||
	    atomic_exchange(&poll_kicked, true))
		return;
	pthread_mutex_lock(&poll_mx);
	pthread_cond_signal(&poll_cv);
	pthread_mutex_unlock(&poll_mx);
}

/* Sleeps us: the first POLL_US always (rounds are never closer, as before the sleeps grew), the
 * rest until a kick. */
static void poll_sleep(long us)
{
	struct timespec t;
	nanosleep(&(struct timespec){ 0, POLL_US * 1000 }, NULL);
	if (us <= POLL_US)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += (us - POLL_US) * 1000;
	t.tv_sec += t.tv_nsec / 1000000000;
	t.tv_nsec %= 1000000000;
	pthread_mutex_lock(&poll_mx);
	if (!atomic_load(&poll_kicked))
		pthread_cond_timedwait(&poll_cv, &poll_mx, &t);
	pthread_mutex_unlock(&poll_mx);
}

/* The poller sleeps POLL_US while the GPU is far behind (a quarter of a pool in flight), and
 * twice as long after each round that finds it otherwise, up to POLL_MAX_US: every round costs
 * a wake-up, a context push and pop, and a look at each stream's oldest pending span, driver
 * calls that compete with the application's own.  A pool of SPAN_SLOTS pairs lasts a
 * launch-bound loop (20,000 launches a second) 200 ms, and a launch that finds a quarter of it
 * in flight cuts the poller's sleep to POLL_US (poll_kick): a burst of launches after a quiet
 * spell does not run the pool dry while the poller sleeps its longest. */
static void *poller_main(void *arg)
{
	(void)arg;
	/* Relaxed: this thread's queries are never "unsafe" calls during an application's
	 * global-mode stream capture (they would fail, or invalidate the capture). */
	shim_live_thread_relax();
	long us = POLL_US;
	while (atomic_load(&poller_state) == 1) {
		poll_sleep(us);
		atomic_store(&poll_kicked, false);
		us = poll_all(false) ? POLL_US : us * 2 > POLL_MAX_US ? POLL_MAX_US : us * 2;
	}
	return NULL;
}

static void poll_cv_init(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&poll_cv, &a);
	pthread_condattr_destroy(&a);
}

static void poller_start(void)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong(&poller_state, &expect, 1))
		return;
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, poll_cv_init);
	if (shim_thread_start(&poller, poller_main, NULL) != 0) /* small stack, no signals */
		atomic_store(&poller_state, 0);
}

/* ---- exit, teardown, fork ----------------------------------------------------------------------- */

static void report(const struct span_ctx *sc)
{
	shim_log(sc->dropped || sc->failed ? SHIM_LOG_WARN : SHIM_LOG_INFO,
		 "live: kernel spans of context %p: %llu written (%llu begun before the program's "
		 "own event), %llu dropped (event pool full), %llu not measured, %llu captured "
		 "launches and %llu on streams with programmatic launches skipped", (void *)sc->ctx,
		 (unsigned long long)sc->written, (unsigned long long)sc->early,
		 (unsigned long long)sc->dropped, (unsigned long long)sc->failed,
		 (unsigned long long)sc->captured, (unsigned long long)sc->pdl);
}

/* Exit (before the trace is closed): stops the poller and collects every pending span, waiting
 * for its kernel (the application is done; the maps are read the same way). */
void shim_live_spans_finish(void)
{
	int expect = 1;
	if (atomic_compare_exchange_strong(&poller_state, &expect, 2)) {
		atomic_store(&poll_kicked, false);
		poll_kick(); /* not a sleep's length at exit */
		pthread_join(poller, NULL);
	}
	if (!spans_on || shim_live_session.forked)
		return;
	poll_all(true);
	pthread_mutex_lock(&list_lock);
	for (struct span_ctx *sc = sctxs; sc; sc = sc->next)
		report(sc);
	finished = true;
	pthread_mutex_unlock(&list_lock);
}

/* A context is about to go (primary: every context of device dev): its spans are collected,
 * waiting for them, and its events freed. */
void shim_live_spans_teardown(CUcontext ctx, CUdevice dev, int primary)
{
	if (!spans_on || shim_live_session.forked)
		return;
	pthread_mutex_lock(&list_lock);
	for (struct span_ctx **p = &sctxs; *p;) {
		struct span_ctx *sc = *p;
		if (primary ? sc->dev != dev : sc->ctx != ctx) {
			p = &sc->next;
			continue;
		}
		CUcontext popped;
		if (shim_live_cu.cuCtxPushCurrent_v2(sc->ctx) == CUDA_SUCCESS) {
			poll_ctx(sc, true);
			if (!finished)
				report(sc);
			*p = sc->next;
			atomic_fetch_add(&gen, 1);
			sctx_free(sc);
			shim_live_cu.cuCtxPopCurrent_v2(&popped);
		} else {
			p = &sc->next;
		}
	}
	pthread_mutex_unlock(&list_lock);
}

/* fork() child: the poller does not exist there, and the parent's contexts are not its own.  A
 * child of a process without contexts (fresh) may make its own: its spans stay on as set. */
void shim_live_spans_fork_child(bool fresh)
{
	atomic_store(&poller_state, 0);
	atomic_store(&poll_kicked, false);
	pthread_mutex_init(&poll_mx, NULL);
	poll_cv_init(); /* a waiter of the parent's does not exist here */
	spans_on = spans_on && fresh;
	pthread_mutex_init(&list_lock, NULL);
	pthread_mutex_init(&untimed_lock, NULL);
}
