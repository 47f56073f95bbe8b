/* The trace writer.
 *
 * Callers (the application's threads, the shim's drain thread) copy each record into the current
 * batch under a mutex held for one memcpy; a background thread turns each batch into one zstd
 * frame and writes it.  Batches live in a fixed memory budget: when the thread cannot keep up
 * and the budget is spent, the batch just filled is thrown away whole and counted, so a caller
 * never waits for the disk or the compressor.  Records that later records depend on (the string
 * table, devices, programs, clock calibrations, drop counts) go to a separate, never-dropped
 * list that the thread writes before any batch it takes at the same time. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "store/store.h"

#define DEFAULT_BUFFER (64u << 20)
#define DEFAULT_BATCH (1u << 20)
#define DEFAULT_FLUSH_MS 100
#define DEFAULT_WORKERS 2
#define MAX_WORKERS 16

struct worker;

struct batch {
	struct batch *next;
	size_t cap, len;
	uint64_t records;
	uint8_t data[];
};

struct growbuf {
	uint8_t *p;
	size_t len, cap;
};

struct strent {
	struct strent *next;
	uint64_t hash;
	uint32_t id;
	char s[];
};

struct store_trace_writer {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct batch *cur;                   /* being filled by callers */
	struct batch *full, **full_tail;     /* waiting for the thread, oldest first */
	struct batch *spare;                 /* free batches of the standard size */
	size_t allocated;                    /* bytes of every batch in existence */
	struct growbuf meta;                 /* never-dropped records, not yet taken */
	struct strent **strtab;
	size_t strcap, nstr;
	uint64_t pend_drop_records, pend_drop_batches, pend_drop_bytes; /* not yet reported */
	struct store_trace_counters cnt;
	int stop, flush_now;
	int forked;                          /* in a child after fork: no threads, not our file */

	uint64_t next_seq, write_seq;        /* jobs taken / written, in order */
	pthread_cond_t turn;                 /* a job's turn to write came */
	struct timespec deadline;            /* next periodic flush (CLOCK_MONOTONIC) */
	struct worker *workers;
	int nworkers;
	int fd;
	struct store_trace_options opt;
	char error[STORE_ERRLEN];
};

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- buffers ---------------------------------------------------------------------------- */

static int grow(struct growbuf *g, size_t more)
{
	if (g->len + more <= g->cap)
		return 0;
	size_t cap = g->cap ? g->cap : 4096;
	while (cap < g->len + more)
		cap *= 2;
	uint8_t *p = realloc(g->p, cap);
	if (!p)
		return -1;
	g->p = p;
	g->cap = cap;
	return 0;
}

/* Appends one record (header, then a and b) to g. */
static int put_record(struct growbuf *g, uint16_t type, const void *a, size_t alen, const void *b,
		      size_t blen)
{
	struct store_rec_hdr h = {type, 0, (uint32_t)(alen + blen)};
	if (alen + blen > UINT32_MAX || grow(g, sizeof(h) + alen + blen))
		return -1;
	memcpy(g->p + g->len, &h, sizeof(h));
	if (alen)
		memcpy(g->p + g->len + sizeof(h), a, alen);
	if (blen)
		memcpy(g->p + g->len + sizeof(h) + alen, b, blen);
	g->len += sizeof(h) + alen + blen;
	return 0;
}

static int put_u32(struct growbuf *g, uint32_t v)
{
	if (grow(g, sizeof(v)))
		return -1;
	memcpy(g->p + g->len, &v, sizeof(v));
	g->len += sizeof(v);
	return 0;
}

/* Appends a length-prefixed string to g (no record header). */
static int put_string(struct growbuf *g, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) : 0;
	if (grow(g, sizeof(n) + n))
		return -1;
	memcpy(g->p + g->len, &n, sizeof(n));
	if (n)
		memcpy(g->p + g->len + sizeof(n), s, n);
	g->len += sizeof(n) + n;
	return 0;
}

/* A batch for callers, or NULL when the budget is spent.  Called with the lock held. */
static struct batch *get_batch(struct store_trace_writer *w, size_t need)
{
	struct batch *b = NULL;
	size_t cap = need > w->opt.batch_bytes ? need : w->opt.batch_bytes;

	if (cap == w->opt.batch_bytes && w->spare) {
		b = w->spare;
		w->spare = b->next;
	} else if (w->allocated + cap <= w->opt.buffer_bytes) {
		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->cap = cap;
		w->allocated += cap;
	} else {
		return NULL;
	}
	b->next = NULL;
	b->len = 0;
	b->records = 0;
	return b;
}

static void release_batch(struct store_trace_writer *w, struct batch *b)
{
	if (b->cap == w->opt.batch_bytes) {
		b->next = w->spare;
		w->spare = b;
	} else {
		w->allocated -= b->cap;
		free(b);
	}
}

static void queue_batch(struct store_trace_writer *w, struct batch *b)
{
	b->next = NULL;
	*w->full_tail = b;
	w->full_tail = &b->next;
	pthread_cond_signal(&w->wake);
}

static void count_drop(struct store_trace_writer *w, struct batch *b)
{
	w->pend_drop_records += b->records;
	w->pend_drop_batches++;
	w->pend_drop_bytes += b->len;
	w->cnt.dropped_records += b->records;
	w->cnt.dropped_batches++;
	w->cnt.dropped_bytes += b->len;
}

/* Makes room for need bytes in the current batch.  Returns 1 when a batch had to be dropped,
 * 0 otherwise, -1 when no room can be made at all (a record larger than the budget). */
static int make_room(struct store_trace_writer *w, size_t need)
{
	struct batch *b;
	if (w->cur && w->cur->cap - w->cur->len >= need)
		return 0;
	b = get_batch(w, need);
	if (b) {
		if (w->cur && w->cur->len)
			queue_batch(w, w->cur);
		else if (w->cur)
			release_batch(w, w->cur);
		w->cur = b;
		return 0;
	}
	/* Out of budget: throw away the batch in hand and reuse it, if it is big enough. */
	if (!w->cur || w->cur->cap < need)
		return -1;
	count_drop(w, w->cur);
	w->cur->len = 0;
	w->cur->records = 0;
	return 1;
}

/* ---- appending ------------------------------------------------------------------------------ */

int store_trace_append(struct store_trace_writer *w, uint16_t type, const void *a, size_t alen,
		       const void *b, size_t blen)
{
	struct store_rec_hdr h = {type, 0, (uint32_t)(alen + blen)};
	size_t need = sizeof(h) + alen + blen;
	int dropped;

	if (alen + blen > UINT32_MAX)
		return -1;
	pthread_mutex_lock(&w->lock);
	dropped = w->forked ? -1 : make_room(w, need);
	if (dropped < 0) {
		w->cnt.dropped_records++;
		w->pend_drop_records++;
		w->pend_drop_bytes += need;
		pthread_mutex_unlock(&w->lock);
		return 1;
	}
	uint8_t *p = w->cur->data + w->cur->len;
	memcpy(p, &h, sizeof(h));
	if (alen)
		memcpy(p + sizeof(h), a, alen);
	if (blen)
		memcpy(p + sizeof(h) + alen, b, blen);
	w->cur->len += need;
	w->cur->records++;
	w->cnt.records++;
	w->cnt.bytes += need;
	pthread_mutex_unlock(&w->lock);
	return dropped;
}

int store_trace_api(struct store_trace_writer *w, const struct store_rec_api *e)
{
	return store_trace_append(w, STORE_REC_API, e, sizeof(*e), NULL, 0);
}

int store_trace_api_args(struct store_trace_writer *w, const struct store_rec_api *e,
			 uint32_t func_id, const uint64_t *args, uint32_t nargs)
{
	struct {
		uint32_t func_id, nargs;
		uint64_t args[16];
	} __attribute__((packed)) tail = {func_id, nargs > 16 ? 16 : nargs, {0}};
	memcpy(tail.args, args, tail.nargs * sizeof(uint64_t));
	return store_trace_append(w, STORE_REC_API, e, sizeof(*e), &tail, 8 + 8 * (size_t)tail.nargs);
}

int store_trace_kernel(struct store_trace_writer *w, const struct store_rec_kernel *e)
{
	return store_trace_append(w, STORE_REC_KERNEL, e, sizeof(*e), NULL, 0);
}

int store_trace_copy(struct store_trace_writer *w, const struct store_rec_copy *e)
{
	return store_trace_append(w, STORE_REC_COPY, e, sizeof(*e), NULL, 0);
}

int store_trace_kspan(struct store_trace_writer *w, const struct store_rec_kspan *e)
{
	return store_trace_append(w, STORE_REC_KSPAN, e, sizeof(*e), NULL, 0);
}

int store_trace_probe(struct store_trace_writer *w, const struct store_rec_probe *e,
		      const void *data, uint32_t size)
{
	return store_trace_append(w, STORE_REC_PROBE, e, sizeof(*e), data, size);
}

/* PROBES records: the header, the probe's fixed part and the count are written once per
 * record, after the samples that fit in the current batch; a sample that does not fit starts
 * the next batch (make_room), as a record of its own would. */
struct probes_head {
	struct store_rec_hdr h;
	struct store_rec_probe p;
	uint32_t count;
} __attribute__((packed));

/* Copies samples d[0..n) that fit in batch b after a PROBES head; returns how many. */
static uint32_t probes_fill(struct batch *b, const struct store_rec_probe *e,
			    const struct store_probe_data *d, uint32_t n)
{
	uint8_t *start = b->data + b->len, *q = start + sizeof(struct probes_head);
	const uint8_t *end = b->data + b->cap;
	uint32_t k = 0;
	while (k < n && (size_t)(end - q) >= 4 + (size_t)d[k].len) {
		/* the batch's memory is cold (a compressing thread read it last): ask for the
		 * lines a few samples ahead, so that the copies do not wait for each miss */
		if ((size_t)(end - q) > 640)
			__builtin_prefetch(q + 576, 1, 3);
		memcpy(q, &d[k].len, 4);
		memcpy(q + 4, d[k].data, d[k].len);
		q += 4 + (size_t)d[k].len;
		k++;
	}
	struct probes_head head = {{STORE_REC_PROBES, 0,
				    (uint32_t)(q - start - sizeof(struct store_rec_hdr))}, *e, k};
	memcpy(start, &head, sizeof(head));
	b->len += (size_t)(q - start);
	b->records += k;
	return k;
}

/* A sample that can never be kept (larger than the budget, or a forked child): counted. */
static void lost_sample(struct store_trace_writer *w, size_t need)
{
	w->cnt.dropped_records++;
	w->pend_drop_records++;
	w->pend_drop_bytes += need;
}

int store_trace_probes(struct store_trace_writer *w, const struct store_rec_probe *e,
		       const struct store_probe_data *d, uint32_t n)
{
	int dropped = 0;
	pthread_mutex_lock(&w->lock);
	for (uint32_t i = 0; i < n;) {
		size_t need = sizeof(struct probes_head) + 4 + d[i].len;
		int r = w->forked ? -1 : w->cur && w->cur->cap - w->cur->len >= need ? 0
										: make_room(w, need);
		if (r < 0) {
			lost_sample(w, need);
			dropped = 1;
			i++;
			continue;
		}
		dropped |= r;
		size_t len = w->cur->len;
		uint32_t k = probes_fill(w->cur, e, d + i, n - i);
		w->cnt.records += k;
		w->cnt.bytes += w->cur->len - len;
		i += k;
	}
	pthread_mutex_unlock(&w->lock);
	return dropped;
}

/* ---- a thread's own batch ----------------------------------------------------------------------
 * The drain threads of GPU ring buffers append records by the million: under the writer's lock
 * their copies would serialise on each other and, worse, make the application's own records
 * (launches, API calls: store_trace_append on the application's threads) wait behind them
 * (measured: short kernels 1.6x slower with the trace than without).  A local batch is filled
 * without the lock, which then guards only the hand-over of a full batch; its records and
 * bytes are counted then. */
struct store_trace_local {
	struct store_trace_writer *w;
	struct batch *cur;
	uint64_t since_ns; /* when cur got its first record (CLOCK_MONOTONIC) */
};

struct store_trace_local *store_trace_local_new(struct store_trace_writer *w)
{
	struct store_trace_local *l = calloc(1, sizeof(*l));
	if (l)
		l->w = w;
	return l;
}

/* Queues (or gives back, when empty) the local batch; the lock is held. */
static void local_hand_over(struct store_trace_writer *w, struct store_trace_local *l)
{
	if (!l->cur)
		return;
	if (l->cur->len) {
		w->cnt.records += l->cur->records;
		w->cnt.bytes += l->cur->len;
		queue_batch(w, l->cur);
	} else {
		release_batch(w, l->cur);
	}
	l->cur = NULL;
}

/* Room for need bytes in the local batch: as make_room, under the lock for the exchange only.
 * Returns 0, 1 (a batch dropped to make it), -1 (no room can be made). */
static int local_room(struct store_trace_local *l, size_t need)
{
	struct store_trace_writer *w = l->w;
	int r = 0;
	pthread_mutex_lock(&w->lock);
	struct batch *b = w->forked ? NULL : get_batch(w, need);
	if (b) {
		local_hand_over(w, l);
		l->cur = b;
	} else if (!w->forked && l->cur && l->cur->cap >= need) {
		w->cnt.records += l->cur->records;
		count_drop(w, l->cur);
		l->cur->len = 0;
		l->cur->records = 0;
		r = 1;
	} else {
		r = -1;
	}
	pthread_mutex_unlock(&w->lock);
	l->since_ns = monotonic_ns();
	return r;
}

int store_trace_probes_local(struct store_trace_local *l, const struct store_rec_probe *e,
			     const struct store_probe_data *d, uint32_t n)
{
	int dropped = 0;
	for (uint32_t i = 0; i < n;) {
		size_t need = sizeof(struct probes_head) + 4 + d[i].len;
		int r = l->cur && l->cur->cap - l->cur->len >= need ? 0 : local_room(l, need);
		if (r < 0) {
			pthread_mutex_lock(&l->w->lock);
			lost_sample(l->w, need);
			pthread_mutex_unlock(&l->w->lock);
			dropped = 1;
			i++;
			continue;
		}
		dropped |= r;
		i += probes_fill(l->cur, e, d + i, n - i);
	}
	/* the writer's promise (a frame at least every flush_ms) holds for local batches too */
	if (l->cur && l->cur->len && monotonic_ns() - l->since_ns >= l->w->opt.flush_ms * 1000000ull)
		store_trace_local_flush(l);
	return dropped;
}

static void local_hand_over_locking(struct store_trace_local *l)
{
	pthread_mutex_lock(&l->w->lock);
	local_hand_over(l->w, l);
	pthread_mutex_unlock(&l->w->lock);
}

void store_trace_local_flush(struct store_trace_local *l)
{
	if (l && l->cur && l->cur->len)
		local_hand_over_locking(l);
}

void store_trace_local_free(struct store_trace_local *l)
{
	if (!l)
		return;
	if (l->cur)
		local_hand_over_locking(l); /* an empty batch goes back to the spares */
	free(l);
}

int store_trace_map(struct store_trace_writer *w, const struct store_rec_map *m, const void *kv,
		    size_t kv_size)
{
	return store_trace_append(w, STORE_REC_MAP, m, sizeof(*m), kv, kv_size);
}

/* ---- never-dropped metadata ------------------------------------------------------------------- */

static int meta_record(struct store_trace_writer *w, uint16_t type, const void *a, size_t alen,
		       const struct growbuf *tail)
{
	int rc;
	pthread_mutex_lock(&w->lock);
	rc = put_record(&w->meta, type, a, alen, tail ? tail->p : NULL, tail ? tail->len : 0);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int store_trace_device(struct store_trace_writer *w, const struct store_rec_device *d, const char *name)
{
	struct growbuf s = {0};
	int rc = put_string(&s, name) ? -1 : meta_record(w, STORE_REC_DEVICE, d, sizeof(*d), &s);
	free(s.p);
	return rc;
}

int store_trace_clock(struct store_trace_writer *w, const struct store_rec_clock *c)
{
	return meta_record(w, STORE_REC_CLOCK, c, sizeof(*c), NULL);
}

int store_trace_program(struct store_trace_writer *w, const struct store_rec_program *p,
			const char *name, const char *path)
{
	struct growbuf s = {0};
	int rc = (put_string(&s, name) || put_string(&s, path))
			 ? -1
			 : meta_record(w, STORE_REC_PROGRAM, p, sizeof(*p), &s);
	free(s.p);
	return rc;
}

int store_trace_drop(struct store_trace_writer *w, const struct store_rec_drop *d)
{
	return meta_record(w, STORE_REC_DROP, d, sizeof(*d), NULL);
}

int store_trace_kernel_id(struct store_trace_writer *w, const struct store_rec_kernel_id *k)
{
	return meta_record(w, STORE_REC_KERNEL_ID, k, sizeof(*k), NULL);
}

int store_trace_not_instrumented(struct store_trace_writer *w,
				 const struct store_rec_not_instrumented *n, const char *message)
{
	struct growbuf s = {0};
	int rc = put_string(&s, message ? message : "")
			 ? -1
			 : meta_record(w, STORE_REC_NOT_INSTRUMENTED, n, sizeof(*n), &s);
	free(s.p);
	return rc;
}

int store_trace_map_memory(struct store_trace_writer *w, const struct store_rec_map_memory *m,
			   uint64_t rb_state_bytes)
{
	struct growbuf t = {.p = (uint8_t *)&rb_state_bytes, .len = sizeof(rb_state_bytes)};
	return meta_record(w, STORE_REC_MAP_MEMORY, m, sizeof(*m), &t);
}

int store_trace_ringbuf(struct store_trace_writer *w, const struct store_rec_ringbuf *r)
{
	return meta_record(w, STORE_REC_RINGBUF, r, sizeof(*r), NULL);
}

/* Metadata, not an event: written once at exit, and `cubpf run -p` shows nothing else of a
 * host map. */
int store_trace_host_map(struct store_trace_writer *w, const struct store_rec_map *m,
			 const void *kv, size_t kv_size)
{
	struct growbuf t = {.p = (uint8_t *)kv, .len = kv_size};
	return meta_record(w, STORE_REC_HOST_MAP, m, sizeof(*m), &t);
}

static int strtab_grow(struct store_trace_writer *w)
{
	size_t cap = w->strcap ? w->strcap * 2 : 256;
	struct strent **t = calloc(cap, sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; i < w->strcap; i++)
		for (struct strent *e = w->strtab[i], *n; e; e = n) {
			n = e->next;
			e->next = t[e->hash & (cap - 1)];
			t[e->hash & (cap - 1)] = e;
		}
	free(w->strtab);
	w->strtab = t;
	w->strcap = cap;
	return 0;
}

uint32_t store_trace_intern(struct store_trace_writer *w, const char *s)
{
	size_t n = strlen(s);
	uint64_t h = XXH3_64bits(s, n);
	uint32_t id = 0;

	pthread_mutex_lock(&w->lock);
	for (struct strent *e = w->strcap ? w->strtab[h & (w->strcap - 1)] : NULL; e; e = e->next)
		if (e->hash == h && !strcmp(e->s, s)) {
			id = e->id;
			goto out;
		}
	if (w->nstr + 1 > w->strcap / 2 && strtab_grow(w))
		goto out;
	struct strent *e = malloc(sizeof(*e) + n + 1);
	if (!e)
		goto out;
	e->hash = h;
	e->id = (uint32_t)w->nstr + 1;
	memcpy(e->s, s, n + 1);
	if (put_record(&w->meta, STORE_REC_STRING, &e->id, sizeof(e->id), s, n)) {
		free(e);
		goto out;
	}
	e->next = w->strtab[h & (w->strcap - 1)];
	w->strtab[h & (w->strcap - 1)] = e;
	w->nstr++;
	id = e->id;
out:
	pthread_mutex_unlock(&w->lock);
	return id;
}

/* ---- the compressing threads --------------------------------------------------------------------
 * Each thread takes a job (the metadata pending at that moment, and one batch), compresses it
 * outside the lock, then waits for its turn to write: jobs are numbered when taken and written
 * in that order, so frames keep the order of the batches and the metadata always precedes the
 * first record that uses it.  Several threads make the compressor, not the disk, scale. */

struct compressor {
	ZSTD_CCtx *cctx;
	uint8_t *buf;
	size_t cap, len;
};

struct worker {
	struct store_trace_writer *w;
	pthread_t thread;
	struct compressor meta, data;
};

static void io_fail(struct store_trace_writer *w, const char *what, int err)
{
	pthread_mutex_lock(&w->lock);
	if (!w->error[0])
		snprintf(w->error, sizeof(w->error), "%s: %s", what, strerror(err));
	w->cnt.io_error = 1;
	pthread_mutex_unlock(&w->lock);
}

static int write_all(struct store_trace_writer *w, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(w->fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			io_fail(w, "writing the trace", k < 0 ? errno : ENOSPC);
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int compressor_init(struct compressor *z, int level)
{
	z->cctx = ZSTD_createCCtx();
	if (!z->cctx)
		return -1;
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 1);
	return 0;
}

static void compressor_free(struct compressor *z)
{
	ZSTD_freeCCtx(z->cctx);
	free(z->buf);
}

/* Compresses n bytes of whole records into one frame in z->buf (z->len = 0 when n is 0). */
static int compress_frame(struct store_trace_writer *w, struct compressor *z, const void *src, size_t n)
{
	size_t bound = ZSTD_compressBound(n);
	z->len = 0;
	if (!n)
		return 0;
	if (bound > z->cap) {
		uint8_t *p = realloc(z->buf, bound);
		if (!p) {
			io_fail(w, "compressing the trace", ENOMEM);
			return -1;
		}
		z->buf = p;
		z->cap = bound;
	}
	size_t r = ZSTD_compress2(z->cctx, z->buf, z->cap, src, n);
	if (ZSTD_isError(r)) {
		io_fail(w, "compressing the trace", EINVAL);
		return -1;
	}
	z->len = r;
	return 0;
}

/* Writes a compressed frame and counts it; the caller holds the write turn. */
static void emit(struct store_trace_writer *w, const struct compressor *z)
{
	if (!z->len || write_all(w, z->buf, z->len))
		return;
	pthread_mutex_lock(&w->lock);
	w->cnt.frames++;
	w->cnt.compressed_bytes += z->len;
	pthread_mutex_unlock(&w->lock);
}

struct job {
	uint64_t seq;
	struct growbuf meta;
	struct batch *batch;
};

static void deadline_after(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static int past(const struct timespec *d)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

/* Takes a job under the lock: pending metadata (with a DROP record for the writer's own
 * losses), and the oldest full batch; at flush time the current batch joins the queue first.
 * Returns 0 when there is nothing to do. */
static int take_job(struct store_trace_writer *w, struct job *j)
{
	int flush = w->stop || w->flush_now || past(&w->deadline);
	if (flush) {
		w->flush_now = 0;
		deadline_after(&w->deadline, w->opt.flush_ms);
		if (w->cur && w->cur->len) {
			queue_batch(w, w->cur);
			w->cur = NULL; /* the next caller takes a spare */
		}
	}
	j->meta = w->meta;
	memset(&w->meta, 0, sizeof(w->meta));
	if (w->pend_drop_records || w->pend_drop_batches) {
		struct store_rec_drop d = {.ts_ns = realtime_ns(), .source = STORE_DROP_WRITER,
					   .records = w->pend_drop_records,
					   .batches = w->pend_drop_batches,
					   .bytes = w->pend_drop_bytes};
		if (put_record(&j->meta, STORE_REC_DROP, &d, sizeof(d), NULL, 0) == 0)
			w->pend_drop_records = w->pend_drop_batches = w->pend_drop_bytes = 0;
	}
	j->batch = w->full;
	if (j->batch) {
		w->full = j->batch->next;
		if (!w->full)
			w->full_tail = &w->full;
	}
	if (!j->meta.len && !j->batch) {
		free(j->meta.p);
		return 0;
	}
	j->seq = w->next_seq++;
	return 1;
}

static void run_job(struct worker *k, struct job *j)
{
	struct store_trace_writer *w = k->w;
	int ok = compress_frame(w, &k->meta, j->meta.p, j->meta.len) == 0;
	if (ok && j->batch)
		ok = compress_frame(w, &k->data, j->batch->data, j->batch->len) == 0;
	free(j->meta.p);

	pthread_mutex_lock(&w->lock);
	while (w->write_seq != j->seq)
		pthread_cond_wait(&w->turn, &w->lock);
	pthread_mutex_unlock(&w->lock);
	if (ok) {
		emit(w, &k->meta);
		if (j->batch)
			emit(w, &k->data);
	}
	pthread_mutex_lock(&w->lock);
	w->write_seq++;
	pthread_cond_broadcast(&w->turn);
	if (j->batch)
		release_batch(w, j->batch);
	pthread_mutex_unlock(&w->lock);
}

static void *worker_main(void *arg)
{
	struct worker *k = arg;
	struct store_trace_writer *w = k->w;
	struct job j;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		if (take_job(w, &j)) {
			pthread_mutex_unlock(&w->lock);
			run_job(k, &j);
			pthread_mutex_lock(&w->lock);
			continue;
		}
		if (w->stop)
			break;
		pthread_cond_timedwait(&w->wake, &w->lock, &w->deadline);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* ---- create and close ------------------------------------------------------------------------- */

static int header_frame(struct store_trace_writer *w, const struct store_trace_process *p)
{
	struct store_rec_header h = {.major = STORE_TRACE_MAJOR, .minor = STORE_TRACE_MINOR,
				     .pid = p ? p->pid : (uint32_t)getpid(),
				     .start_realtime_ns = realtime_ns(),
				     .start_monotonic_ns = monotonic_ns(),
				     .driver_version = p ? p->driver_version : 0};
	struct growbuf s = {0}, rec = {0};
	struct compressor z = {0};
	int rc = -1;

	memcpy(h.magic, STORE_TRACE_MAGIC, sizeof(h.magic));
	if (!put_string(&s, p ? p->cubpf_version : NULL) && !put_string(&s, p ? p->hostname : NULL) &&
	    !put_string(&s, p ? p->cmdline : NULL) && !put_u32(&s, p ? p->ppid : 0) &&
	    !put_record(&rec, STORE_REC_HEADER, &h, sizeof(h), s.p, s.len) &&
	    !compressor_init(&z, w->opt.level) && !compress_frame(w, &z, rec.p, rec.len) &&
	    !write_all(w, z.buf, z.len))
		rc = 0;
	compressor_free(&z);
	free(s.p);
	free(rec.p);
	return rc;
}

static void free_batches(struct batch *b, int single)
{
	for (struct batch *n; b; b = n) {
		n = b->next;
		free(b);
		if (single)
			break;
	}
}

static void writer_free(struct store_trace_writer *w)
{
	free_batches(w->cur, 1);
	free_batches(w->full, 0);
	free_batches(w->spare, 0);
	for (size_t i = 0; i < w->strcap; i++)
		for (struct strent *e = w->strtab[i], *n; e; e = n) {
			n = e->next;
			free(e);
		}
	free(w->strtab);
	free(w->meta.p);
	for (int i = 0; i < w->nworkers; i++) {
		compressor_free(&w->workers[i].meta);
		compressor_free(&w->workers[i].data);
	}
	free(w->workers);
	if (w->fd >= 0)
		close(w->fd);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->wake);
	pthread_cond_destroy(&w->turn);
	free(w);
}

static void set_options(struct store_trace_writer *w, const struct store_trace_options *opt)
{
	if (opt)
		w->opt = *opt;
	if (!w->opt.buffer_bytes)
		w->opt.buffer_bytes = DEFAULT_BUFFER;
	if (!w->opt.batch_bytes)
		w->opt.batch_bytes = DEFAULT_BATCH;
	if (w->opt.batch_bytes > w->opt.buffer_bytes / 2)
		w->opt.batch_bytes = w->opt.buffer_bytes / 2; /* at least two batches in flight */
	if (w->opt.batch_bytes < 4096)
		w->opt.batch_bytes = 4096;
	if (!w->opt.flush_ms)
		w->opt.flush_ms = DEFAULT_FLUSH_MS;
	if (!w->opt.level)
		w->opt.level = 1;
	if (w->opt.workers <= 0)
		w->opt.workers = DEFAULT_WORKERS;
	if (w->opt.workers > MAX_WORKERS)
		w->opt.workers = MAX_WORKERS;
}

static int init_sync(struct store_trace_writer *w)
{
	pthread_condattr_t ca;
	if (pthread_mutex_init(&w->lock, NULL) || pthread_cond_init(&w->turn, NULL))
		return -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	return rc ? -1 : 0;
}

static int start_workers(struct store_trace_writer *w)
{
	w->workers = calloc((size_t)w->opt.workers, sizeof(*w->workers));
	if (!w->workers)
		return -1;
	deadline_after(&w->deadline, w->opt.flush_ms);
	for (int i = 0; i < w->opt.workers; i++) {
		struct worker *k = &w->workers[i];
		k->w = w;
		if (compressor_init(&k->meta, w->opt.level) || compressor_init(&k->data, w->opt.level))
			return -1;
		if (pthread_create(&k->thread, NULL, worker_main, k))
			return -1;
		w->nworkers++;
	}
	return 0;
}

static void stop_workers(struct store_trace_writer *w)
{
	pthread_mutex_lock(&w->lock);
	w->stop = 1;
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
	for (int i = 0; i < w->nworkers; i++)
		pthread_join(w->workers[i].thread, NULL);
}

struct store_trace_writer *store_trace_create(const char *path, const struct store_trace_process *p,
					      const struct store_trace_options *opt,
					      char *err, size_t errlen)
{
	struct store_trace_writer *w = calloc(1, sizeof(*w));
	if (!w || init_sync(w)) {
		snprintf(err, errlen, "out of memory");
		free(w);
		return NULL;
	}
	w->full_tail = &w->full;
	set_options(w, opt);
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		writer_free(w);
		return NULL;
	}
	if (header_frame(w, p)) {
		snprintf(err, errlen, "%s: %s", path, w->error[0] ? w->error : "out of memory");
		writer_free(w);
		return NULL;
	}
	if (start_workers(w)) {
		snprintf(err, errlen, "cannot start the trace writer threads");
		stop_workers(w);
		writer_free(w);
		return NULL;
	}
	return w;
}

int store_trace_close(struct store_trace_writer *w, char *err, size_t errlen)
{
	struct store_rec_end end;
	struct growbuf rec = {0};
	struct compressor z = {0};
	int rc;

	if (!w)
		return 0;
	if (w->forked) { /* a child after fork: the file and the threads are the parent's */
		w->fd = -1;
		writer_free(w);
		return 0;
	}
	stop_workers(w); /* they write everything that is left before they return */
	end = (struct store_rec_end){.end_realtime_ns = realtime_ns(), .records = w->cnt.records,
				     .dropped_records = w->cnt.dropped_records,
				     .dropped_batches = w->cnt.dropped_batches};
	if (put_record(&rec, STORE_REC_END, &end, sizeof(end), NULL, 0) == 0 &&
	    compressor_init(&z, w->opt.level) == 0 && compress_frame(w, &z, rec.p, rec.len) == 0)
		emit(w, &z);
	compressor_free(&z);
	free(rec.p);
	if (close(w->fd) && !w->cnt.io_error)
		io_fail(w, "closing the trace", errno);
	w->fd = -1;
	rc = w->cnt.io_error || w->error[0] ? -1 : 0;
	if (rc && err)
		snprintf(err, errlen, "%s", w->error);
	writer_free(w);
	return rc;
}

void store_trace_counters(struct store_trace_writer *w, struct store_trace_counters *out)
{
	pthread_mutex_lock(&w->lock);
	*out = w->cnt;
	pthread_mutex_unlock(&w->lock);
}

void store_trace_flush(struct store_trace_writer *w)
{
	pthread_mutex_lock(&w->lock);
	w->flush_now = 1;
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

void store_trace_fork_prepare(struct store_trace_writer *w)
{
	pthread_mutex_lock(&w->lock);
}

void store_trace_fork_parent(struct store_trace_writer *w)
{
	pthread_mutex_unlock(&w->lock);
}

/* The lock was taken by prepare in the forking thread, which is the child's only thread: it
 * can be released.  The workers are gone; nothing buffered is written twice. */
void store_trace_fork_child(struct store_trace_writer *w)
{
	pthread_condattr_t ca;
	w->forked = 1;
	w->nworkers = 0;
	/* The parent's threads were waiting on these: in the child they would wait forever
	 * (pthread_cond_destroy blocks on waiters that no longer exist).  Start them afresh. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&w->turn, NULL);
	pthread_mutex_unlock(&w->lock);
}
