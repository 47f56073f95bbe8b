/* The trace writer.
 *
 * Callers (the application's threads, the shim's drain thread) copy each record into the current
 * batch under a mutex held for one memcpy; a background thread turns each batch into one zstd
 * frame and writes it.  Batches live in a fixed memory budget: when the thread cannot keep up
 * and the budget is spent, the batch just filled is thrown away whole and counted, so a caller
 * never waits for the disk or the compressor.  Records that later records depend on (the string
 * table, devices, programs, clock calibrations, drop counts) go to a separate, never-dropped
 * list that the thread writes before any batch it takes at the same time.
 *
 * Faults (store.h says what is promised): a frame is written at the end of the last good one
 * only when it fits under RLIMIT_FSIZE and its blocks could be reserved (fallocate), with
 * room kept (TRAILER_MAX, TRAILER_RESERVE) for the LOST and END records; a write that fails
 * anyway is cut off (ftruncate).  Losses are counted and said in LOST records. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY /* a compressor in memory taken once: ZSTD_initStaticCCtx */
#include <zstd.h>
#include <zstd_errors.h>

#include "store/store.h"

#define DEFAULT_BUFFER (64u << 20)
#define DEFAULT_BATCH (1u << 20)
#define DEFAULT_FLUSH_MS 100
#define DEFAULT_WORKERS 2
#define MAX_WORKERS 16
/* A batch is one frame's input, and its compressed bound is taken at create for each thread:
 * larger asks are taken as this (a record larger than a batch still gets one of its own). */
#define MAX_BATCH (64u << 20)
/* Room kept past the last frame for the trailer (a frame of DROP, LOST and END records: about
 * 170 bytes): TRAILER_MAX under RLIMIT_FSIZE, a block of most file systems on disk. */
#define TRAILER_MAX 512
#define TRAILER_RESERVE 4096
/* Room only metadata may take, past what batches may: when the file stops growing, the string
 * table and the rest go on a little longer than the events that need them (~500 strings). */
#define META_ROOM (16u << 10)

enum frame_kind { FRAME_DATA, FRAME_META, FRAME_TRAILER };
/* Memory given back when an allocation for metadata fails, so that the retry can succeed under
 * a memory limit (ulimit -v): a process's string table and metadata are rarely larger. */
#define META_RESERVE (1u << 20)

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

/* Entries of the string table are never freed before the writer: they are cut from chunks,
 * the first taken at create, so that interning needs no allocation of its own most of the
 * time, and the last chunk can be the memory reserve itself. */
#define STR_CHUNK (64u << 10)
#define STR_TABLE 4096 /* slots taken at create: 2048 strings before the table grows */
struct strchunk {
	struct strchunk *next;
	size_t used, cap;
	_Alignas(16) uint8_t data[];
};

struct store_trace_writer {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct batch *cur;                   /* being filled by callers */
	struct batch *full, **full_tail;     /* waiting for the thread, oldest first */
	struct batch *spare;                 /* free batches of the standard size */
	size_t allocated;                    /* bytes of every batch in existence */
	struct growbuf meta;                 /* never-dropped records, not yet taken */
	struct growbuf meta_spare;           /* the other of meta's two buffers (write_meta) */
	struct strchunk *strmem;             /* the string table's entries live here */
	struct compressor *metaz;            /* metadata is compressed in the write turn: one */
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
	int regular;                         /* a regular file: frames can be cut off again */
	int no_falloc;                       /* its file system cannot reserve blocks */
	int broken;                          /* not regular and a write failed: nothing more */
	int meta_failed;                     /* metadata did not go out: wait for a flush */
	uint64_t good_end;                   /* file offset after the last whole frame */
	void *mem_reserve;                   /* META_RESERVE bytes, freed when memory runs out */
	struct store_rec_lost lost;          /* losses not yet in a LOST record */
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

/* realloc for what must not be lost (metadata): when memory runs out, the writer's reserve is
 * given back and the allocation tried again.  w may be NULL (a plain realloc).  Any thread, with
 * or without the lock: the reserve changes hands atomically. */
static void *keep_realloc(struct store_trace_writer *w, void *p, size_t n)
{
	void *q = realloc(p, n), *r;
	if (!q && w && (r = __atomic_exchange_n(&w->mem_reserve, NULL, __ATOMIC_ACQ_REL))) {
		free(r);
		q = realloc(p, n);
	}
	return q;
}

/* Takes the reserve again once memory came back. */
static void retake_reserve(struct store_trace_writer *w)
{
	void *r, *none = NULL;
	if (__atomic_load_n(&w->mem_reserve, __ATOMIC_ACQUIRE) || !(r = malloc(META_RESERVE)))
		return;
	if (!__atomic_compare_exchange_n(&w->mem_reserve, &none, r, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		free(r);
}

static int grow_in(struct store_trace_writer *w, struct growbuf *g, size_t more)
{
	if (g->len + more <= g->cap)
		return 0;
	size_t cap = g->cap ? g->cap : 4096;
	while (cap < g->len + more)
		cap *= 2;
	uint8_t *p = keep_realloc(w, g->p, cap);
	if (!p)
		return -1;
	g->p = p;
	g->cap = cap;
	return 0;
}

static int grow(struct growbuf *g, size_t more)
{
	return grow_in(NULL, g, more);
}

/* Appends one record (header, then a and b) to g, growing it with w's reserve (w may be NULL). */
static int put_record_in(struct store_trace_writer *w, struct growbuf *g, uint16_t type,
			 const void *a, size_t alen, const void *b, size_t blen)
{
	struct store_rec_hdr h = {type, 0, (uint32_t)(alen + blen)};
	if (alen + blen > UINT32_MAX || grow_in(w, g, sizeof(h) + alen + blen))
		return -1;
	memcpy(g->p + g->len, &h, sizeof(h));
	if (alen)
		memcpy(g->p + g->len + sizeof(h), a, alen);
	if (blen)
		memcpy(g->p + g->len + sizeof(h) + alen, b, blen);
	g->len += sizeof(h) + alen + blen;
	return 0;
}

static int put_record(struct growbuf *g, uint16_t type, const void *a, size_t alen, const void *b,
		      size_t blen)
{
	return put_record_in(NULL, g, type, a, alen, b, blen);
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
static int put_string_in(struct store_trace_writer *w, struct growbuf *g, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) : 0;
	if (grow_in(w, g, sizeof(n) + n))
		return -1;
	memcpy(g->p + g->len, &n, sizeof(n));
	if (n)
		memcpy(g->p + g->len + sizeof(n), s, n);
	g->len += sizeof(n) + n;
	return 0;
}

static int put_string(struct growbuf *g, const char *s)
{
	return put_string_in(NULL, g, s);
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

static uint32_t lost_cause(int err)
{
	switch (err) {
	case ENOSPC:
	case EDQUOT:
		return STORE_LOST_DISK_FULL;
	case EFBIG:
		return STORE_LOST_SIZE_LIMIT;
	case ENOMEM:
		return STORE_LOST_MEMORY;
	case 0:
		return STORE_LOST_COMPRESS;
	default:
		return STORE_LOST_IO;
	}
}

/* Counts records that were accepted and will not be in the file (a frame that could not be
 * written or compressed: frames 1; metadata that could not be kept: frames 0).  The lock is
 * held.  err is the errno, 0 for the compressor. */
static void count_lost(struct store_trace_writer *w, uint64_t records, uint64_t frames,
		       size_t bytes, int err)
{
	if (!w->lost.records && !w->lost.frames)
		w->lost.first_ns = realtime_ns();
	w->lost.records += records;
	w->lost.frames += frames;
	w->lost.bytes += bytes;
	w->lost.cause = lost_cause(err);
	w->lost.err = err;
	w->cnt.lost_records += records;
	w->cnt.lost_frames += frames;
	w->cnt.lost_bytes += bytes;
	w->cnt.lost_cause = w->lost.cause;
	w->cnt.io_error = 1;
	if (!w->error[0])
		snprintf(w->error, sizeof(w->error), "writing the trace: %s",
			 err ? strerror(err) : "the compressor failed");
}

/* A LOST or writer's DROP record that did not reach the file: its counts go back to the
 * pending ones, to be said in the next (the trailer's).  0 when rec is neither. */
static int loss_back(struct store_trace_writer *w, const struct store_rec_hdr *h, const uint8_t *p)
{
	struct store_rec_lost l;
	struct store_rec_drop d;
	if (h->type == STORE_REC_LOST && h->len >= sizeof(l)) {
		memcpy(&l, p, sizeof(l));
		if (!w->lost.records && !w->lost.frames) {
			w->lost.first_ns = l.first_ns;
			w->lost.cause = l.cause;
			w->lost.err = l.err;
		}
		w->lost.records += l.records;
		w->lost.frames += l.frames;
		w->lost.bytes += l.bytes;
		return 1;
	}
	if (h->type == STORE_REC_DROP && h->len >= sizeof(d)) {
		memcpy(&d, p, sizeof(d));
		if (d.source != STORE_DROP_WRITER)
			return 0;
		w->pend_drop_records += d.records;
		w->pend_drop_batches += d.batches;
		w->pend_drop_bytes += d.bytes;
		return 1;
	}
	return 0;
}

/* Metadata that will never be written (n bytes of whole records; the lock is held): counted as
 * lost, except the writer's own loss records, whose counts go to the trailer's. */
static void meta_give_up(struct store_trace_writer *w, const uint8_t *p, size_t n, int err)
{
	struct store_rec_hdr h;
	uint64_t k = 0, bytes = 0;
	for (size_t off = 0; off + sizeof(h) <= n; off += sizeof(h) + h.len) {
		memcpy(&h, p + off, sizeof(h));
		if (!loss_back(w, &h, p + off + sizeof(h))) {
			k++;
			bytes += sizeof(h) + h.len;
		}
	}
	if (k)
		count_lost(w, k, 0, bytes, err);
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

/* One record into the current batch; the lock is held.  Returns what store_trace_append does. */
static int append_locked(struct store_trace_writer *w, uint16_t type, const void *a, size_t alen,
			 const void *b, size_t blen)
{
	struct store_rec_hdr h = {type, 0, (uint32_t)(alen + blen)};
	size_t need = sizeof(h) + alen + blen;
	int dropped = w->forked ? -1 : make_room(w, need);
	if (dropped < 0) {
		w->cnt.dropped_records++;
		w->pend_drop_records++;
		w->pend_drop_bytes += need;
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
	return dropped;
}

int store_trace_append(struct store_trace_writer *w, uint16_t type, const void *a, size_t alen,
		       const void *b, size_t blen)
{
	if (alen + blen > UINT32_MAX)
		return -1;
	pthread_mutex_lock(&w->lock);
	int dropped = append_locked(w, type, a, alen, b, blen);
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

int store_trace_launch(struct store_trace_writer *w, const struct store_rec_api *a,
		       const struct store_rec_kernel *k)
{
	pthread_mutex_lock(&w->lock);
	int dropped = append_locked(w, STORE_REC_API, a, sizeof(*a), NULL, 0);
	if (k)
		dropped |= append_locked(w, STORE_REC_KERNEL, k, sizeof(*k), NULL, 0);
	pthread_mutex_unlock(&w->lock);
	return dropped;
}

int store_trace_copy(struct store_trace_writer *w, const struct store_rec_copy *e)
{
	return store_trace_append(w, STORE_REC_COPY, e, sizeof(*e), NULL, 0);
}

int store_trace_kspan(struct store_trace_writer *w, const struct store_rec_kspan *e)
{
	return store_trace_append(w, STORE_REC_KSPAN, e, sizeof(*e), NULL, 0);
}

int store_trace_kspans(struct store_trace_writer *w, const struct store_rec_kspan *e, size_t n)
{
	int dropped = 0;
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < n; i++)
		dropped |= append_locked(w, STORE_REC_KSPAN, &e[i], sizeof(e[i]), NULL, 0);
	pthread_mutex_unlock(&w->lock);
	return dropped;
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

/* Memory for it can run out, even after the reserve: then it is counted as lost (never silent). */
static int meta_record(struct store_trace_writer *w, uint16_t type, const void *a, size_t alen,
		       const struct growbuf *tail)
{
	int rc;
	pthread_mutex_lock(&w->lock);
	rc = put_record_in(w, &w->meta, type, a, alen, tail ? tail->p : NULL, tail ? tail->len : 0);
	if (rc)
		count_lost(w, 1, 0, sizeof(struct store_rec_hdr) + alen + (tail ? tail->len : 0),
			   ENOMEM);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* A metadata record whose parts could not even be put together (no memory): counted. */
static int meta_lost(struct store_trace_writer *w, size_t bytes)
{
	pthread_mutex_lock(&w->lock);
	count_lost(w, 1, 0, bytes, ENOMEM);
	pthread_mutex_unlock(&w->lock);
	return -1;
}

int store_trace_device(struct store_trace_writer *w, const struct store_rec_device *d,
		       const char *name)
{
	struct growbuf s = {0};
	int rc = put_string_in(w, &s, name) ? meta_lost(w, sizeof(*d))
					    : meta_record(w, STORE_REC_DEVICE, d, sizeof(*d), &s);
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
	int rc = (put_string_in(w, &s, name) || put_string_in(w, &s, path))
			 ? meta_lost(w, sizeof(*p))
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
	int rc = put_string_in(w, &s, message ? message : "")
			 ? meta_lost(w, sizeof(*n))
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

/* Room for one entry of the string table: from the current chunk, a new one, or, when memory
 * ran out, the reserve taken as the last chunk.  The lock is held. */
static struct strent *strent_alloc(struct store_trace_writer *w, size_t size)
{
	struct strchunk *c = w->strmem;
	size = (size + 15) & ~(size_t)15;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > STR_CHUNK ? size : STR_CHUNK;
		c = malloc(sizeof(*c) + cap);
		if (!c && META_RESERVE >= sizeof(*c) + size &&
		    (c = __atomic_exchange_n(&w->mem_reserve, NULL, __ATOMIC_ACQ_REL)))
			cap = META_RESERVE - sizeof(*c);
		if (!c)
			return NULL;
		c->next = w->strmem;
		c->used = 0;
		c->cap = cap;
		w->strmem = c;
	}
	void *e = c->data + c->used;
	c->used += size;
	return e;
}

static int strtab_grow(struct store_trace_writer *w)
{
	size_t cap = w->strcap ? w->strcap * 2 : 256;
	struct strent **t = keep_realloc(w, NULL, cap * sizeof(*t));
	if (!t)
		return -1;
	memset(t, 0, cap * sizeof(*t));
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
		goto lost;
	struct strent *e = strent_alloc(w, sizeof(*e) + n + 1);
	if (!e)
		goto lost;
	e->hash = h;
	e->id = (uint32_t)w->nstr + 1;
	memcpy(e->s, s, n + 1);
	if (put_record_in(w, &w->meta, STORE_REC_STRING, &e->id, sizeof(e->id), s, n))
		goto lost; /* its room in the chunk stays unused */
	e->next = w->strtab[h & (w->strcap - 1)];
	w->strtab[h & (w->strcap - 1)] = e;
	w->nstr++;
	id = e->id;
out:
	pthread_mutex_unlock(&w->lock);
	return id;
lost: /* the records that use it will name id 0 */
	count_lost(w, 1, 0, sizeof(struct store_rec_hdr) + 4 + n, ENOMEM);
	goto out;
}

/* ---- the compressing threads --------------------------------------------------------------------
 * Each thread takes a job (the metadata pending at that moment, and one batch), compresses it
 * outside the lock, then waits for its turn to write: jobs are numbered when taken and written
 * in that order, so frames keep the order of the batches and the metadata always precedes the
 * first record that uses it.  Several threads make the compressor, not the disk, scale. */

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

struct compressor {
	ZSTD_CCtx *cctx;
	void *work;      /* the context's memory, taken once (ZSTD_initStaticCCtx) */
	uint8_t *buf;    /* a frame of one batch fits without growing */
	size_t cap, len;
};

struct worker {
	struct store_trace_writer *w;
	pthread_t thread;
	struct compressor data;             /* its batches (metadata: the writer's metaz) */
};

/* The compressor's memory is taken here, at create: a memory limit reached later must cost
 * events, not the compressor (zstd otherwise allocates its tables at the first frame and may
 * reallocate them later).  The parameters are those of a batch at this level, fixed, so that
 * a larger input (a record larger than a batch) fits in the same tables. */
static int compressor_init(struct compressor *z, int level, size_t batch)
{
	ZSTD_compressionParameters cp = ZSTD_getCParams(level, batch, 0);
	size_t ws = ZSTD_estimateCCtxSize_usingCParams(cp);
	z->work = malloc(ws);
	z->cctx = z->work ? ZSTD_initStaticCCtx(z->work, ws) : NULL;
	z->cap = ZSTD_compressBound(batch);
	z->buf = malloc(z->cap);
	if (!z->cctx || !z->buf)
		return -1;
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_windowLog, (int)cp.windowLog);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_chainLog, (int)cp.chainLog);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_hashLog, (int)cp.hashLog);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_searchLog, (int)cp.searchLog);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_minMatch, (int)cp.minMatch);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_targetLength, (int)cp.targetLength);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_strategy, (int)cp.strategy);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 1);
	return 0;
}

static void compressor_free(struct compressor *z)
{
	free(z->work); /* a static context lives in it: nothing else to free */
	free(z->buf);
	z->cctx = NULL;
	z->work = z->buf = NULL;
}

/* Compresses n bytes of whole records into one frame in z->buf (z->len = 0 when n is 0).
 * 0, or -1 with errno: ENOMEM (no memory for a frame larger than a batch, or for the
 * compressor's tables), 0 (the compressor failed otherwise). */
static int compress_frame(struct compressor *z, const void *src, size_t n)
{
	size_t bound = ZSTD_compressBound(n);
	z->len = 0;
	if (!n)
		return 0;
	if (bound > z->cap) {
		uint8_t *p = realloc(z->buf, bound);
		if (!p) {
			errno = ENOMEM;
			return -1;
		}
		z->buf = p;
		z->cap = bound;
	}
	size_t r = z->cctx ? ZSTD_compress2(z->cctx, z->buf, z->cap, src, n) : (size_t)-1;
	if (ZSTD_isError(r)) {
		errno = !z->cctx || ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? ENOMEM : 0;
		return -1;
	}
	z->len = r;
	return 0;
}

/* ---- frames into the file ------------------------------------------------------------------- */

/* Whether a frame of n bytes may go after the last good one: under RLIMIT_FSIZE and in blocks
 * reserved on disk first, with room kept for the trailer (TRAILER_MAX bytes under the limit,
 * TRAILER_RESERVE on disk) unless this is the trailer (which takes them), and META_ROOM more
 * for metadata when this is a batch.  0, or -1 with errno
 * (EFBIG, ENOSPC, EDQUOT) and nothing written: the file still ends on a frame boundary, and no
 * write raises SIGXFSZ.  (fallocate past RLIMIT_FSIZE fails with EFBIG and raises SIGXFSZ too:
 * the limit is checked first.) */
static int frame_fits(struct store_trace_writer *w, size_t n, enum frame_kind kind)
{
	struct rlimit rl;
	uint64_t meta = kind == FRAME_DATA ? META_ROOM : 0;
	uint64_t keep = kind == FRAME_TRAILER ? 0 : TRAILER_RESERVE + meta;
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    w->good_end + n + (kind == FRAME_TRAILER ? 0 : TRAILER_MAX + meta) >
		    (uint64_t)rl.rlim_cur) {
		errno = EFBIG;
		return -1;
	}
	if (kind == FRAME_TRAILER || w->no_falloc || !w->regular)
		return 0;
	if (fallocate(w->fd, FALLOC_FL_KEEP_SIZE, (off_t)w->good_end, (off_t)(n + keep)) == 0)
		return 0;
	if (errno == ENOSPC || errno == EDQUOT)
		return -1;
	w->no_falloc = 1; /* EOPNOTSUPP and the like: write, and cut off what fails */
	return 0;
}

/* Writes a frame after the last good one, whole or not at all: a write that fails part way
 * (the disk filled between the reservation and the write, an I/O error) is cut off again, so
 * that the next frame follows the last good one directly.  0, or -1 with errno. */
static int put_frame(struct store_trace_writer *w, const uint8_t *p, size_t n,
		     enum frame_kind kind)
{
	size_t done = 0;
	if (w->broken) {
		errno = EIO;
		return -1;
	}
	if (frame_fits(w, n, kind))
		return -1;
	while (done < n) {
		ssize_t k = w->regular ? pwrite(w->fd, p + done, n - done, (off_t)(w->good_end + done))
				       : write(w->fd, p + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int err = k < 0 ? errno : ENOSPC;
			if (!w->regular ? done > 0 : done > 0 && ftruncate(w->fd, (off_t)w->good_end))
				w->broken = 1; /* a pipe keeps what it took: the stream is cut */
			errno = err;
			return -1;
		}
		done += (size_t)k;
	}
	w->good_end += n;
	return 0;
}


/* Counts a frame written. */
static void count_frame(struct store_trace_writer *w, size_t len)
{
	pthread_mutex_lock(&w->lock);
	w->cnt.frames++;
	w->cnt.compressed_bytes += len;
	pthread_mutex_unlock(&w->lock);
}

/* Compresses n bytes of whole records and writes them as one frame.  0, or -1 with errno. */
static int put_records(struct store_trace_writer *w, struct compressor *z, const uint8_t *p,
		       size_t n, enum frame_kind kind)
{
	if (compress_frame(z, p, n) || put_frame(w, z->buf, z->len, kind))
		return -1;
	count_frame(w, z->len);
	return 0;
}

struct job {
	uint64_t seq;
	struct batch *batch;
	int packed, err; /* batch compressed into the worker's data compressor; else errno */
};

/* Adds the DROP record of the writer's drops and the LOST record of its losses not yet said to
 * m; the lock is held.  When m cannot grow they stay pending (said later): returns -1 then. */
static int loss_records(struct store_trace_writer *w, struct growbuf *m)
{
	if (w->pend_drop_records || w->pend_drop_batches) {
		struct store_rec_drop d = {.ts_ns = realtime_ns(), .source = STORE_DROP_WRITER,
					   .records = w->pend_drop_records,
					   .batches = w->pend_drop_batches,
					   .bytes = w->pend_drop_bytes};
		if (put_record_in(w, m, STORE_REC_DROP, &d, sizeof(d), NULL, 0) == 0)
			w->pend_drop_records = w->pend_drop_batches = w->pend_drop_bytes = 0;
	}
	if (w->lost.records || w->lost.frames) {
		w->lost.ts_ns = realtime_ns();
		if (put_record_in(w, m, STORE_REC_LOST, &w->lost, sizeof(w->lost), NULL, 0) == 0)
			memset(&w->lost, 0, sizeof(w->lost));
	}
	return w->pend_drop_records || w->pend_drop_batches || w->lost.records || w->lost.frames
		       ? -1 : 0;
}

/* How many bytes of m from off make the next metadata frame: whole records, at most a batch
 * (the compressor's buffer), at least one record. */
static size_t meta_chunk(const struct store_trace_writer *w, const struct growbuf *m, size_t off)
{
	size_t end = off;
	struct store_rec_hdr h;
	while (end + sizeof(h) <= m->len) {
		memcpy(&h, m->p + end, sizeof(h));
		size_t next = end + sizeof(h) + h.len;
		if (next - off > w->opt.batch_bytes && end > off)
			break;
		end = next;
	}
	return end - off;
}

/* Puts m's bytes from off (metadata that could not be written) back in front of the pending
 * metadata, to be written before anything else; the lock is held.  When memory for that is
 * not there even with the reserve, they are counted as lost. */
static void meta_back(struct store_trace_writer *w, struct growbuf *m, size_t off)
{
	size_t rest = m->len - off;
	memmove(m->p, m->p + off, rest);
	m->len = rest;
	if (w->meta.len && grow_in(w, m, w->meta.len)) {
		meta_give_up(w, m->p, rest, ENOMEM);
		m->len = 0;
	}
	if (w->meta.len)
		memcpy(m->p + m->len, w->meta.p, w->meta.len);
	m->len += w->meta.len;
	w->meta.len = 0;
	if (!w->meta_spare.p) /* kept as the other buffer */
		w->meta_spare = w->meta;
	else
		free(w->meta.p);
	w->meta = *m;
}

/* Writes the pending metadata (with the loss records), in frames of at most a batch.  What
 * cannot be written goes back to be written first next time.  0, or -1 with errno. */
static int write_meta(struct store_trace_writer *w, struct compressor *z)
{
	struct growbuf m;
	size_t off = 0, n;
	pthread_mutex_lock(&w->lock);
	/* no memory to say them: not again before the next flush (a job for them would spin) */
	if (loss_records(w, &w->meta))
		w->meta_failed = 1;
	m = w->meta;
	w->meta = w->meta_spare; /* the other buffer: no allocation while this one is written */
	memset(&w->meta_spare, 0, sizeof(w->meta_spare));
	pthread_mutex_unlock(&w->lock);
	while (off < m.len && (n = meta_chunk(w, &m, off)) &&
	       put_records(w, z, m.p + off, n, FRAME_META) == 0)
		off += n;
	if (off == m.len) {
		m.len = 0;
		pthread_mutex_lock(&w->lock);
		if (!w->meta_spare.p)
			w->meta_spare = m;
		else
			free(m.p);
		pthread_mutex_unlock(&w->lock);
		retake_reserve(w);
		return 0;
	}
	int err = errno;
	pthread_mutex_lock(&w->lock);
	meta_back(w, &m, off);
	w->meta_failed = 1;
	pthread_mutex_unlock(&w->lock);
	errno = err;
	return -1;
}

/* Takes a job under the lock: the oldest full batch (at flush time the current batch joins the
 * queue first), or none with metadata or losses to say and no job in flight (which would write
 * them in its turn), unless metadata failed to go out since the last flush.  Returns 0 when
 * there is nothing to do. */
static int take_job(struct store_trace_writer *w, struct job *j)
{
	int flush = w->stop || w->flush_now || past(&w->deadline);
	if (flush) {
		w->flush_now = 0;
		if (!w->stop)
			w->meta_failed = 0;
		deadline_after(&w->deadline, w->opt.flush_ms);
		if (w->cur && w->cur->len) {
			queue_batch(w, w->cur);
			w->cur = NULL; /* the next caller takes a spare */
		}
	}
	j->batch = w->full;
	if (j->batch) {
		w->full = j->batch->next;
		if (!w->full)
			w->full_tail = &w->full;
	} else if (w->meta_failed || w->next_seq != w->write_seq ||
		   !(w->meta.len || w->pend_drop_records || w->pend_drop_batches || w->lost.records ||
		     w->lost.frames)) {
		return 0;
	}
	j->seq = w->next_seq++;
	return 1;
}

/* In the job's turn: the metadata pending now (so everything the batch's records use), then
 * the batch.  A batch after metadata that could not be written is lost too: its records
 * would name strings the file lacks. */
static void write_job(struct worker *k, struct job *j)
{
	struct store_trace_writer *w = k->w;
	int err = 0, failed = 1; /* err is 0 when the compressor failed */
	if (write_meta(w, w->metaz))
		err = errno;
	else if (j->batch && !j->packed)
		err = j->err;
	else if (j->batch && put_frame(w, k->data.buf, k->data.len, FRAME_DATA))
		err = errno;
	else
		failed = 0;
	if (!j->batch)
		return;
	if (!failed) {
		count_frame(w, k->data.len);
		return;
	}
	pthread_mutex_lock(&w->lock);
	count_lost(w, j->batch->records, 1, j->batch->len, err);
	pthread_mutex_unlock(&w->lock);
}

static void run_job(struct worker *k, struct job *j)
{
	struct store_trace_writer *w = k->w;
	j->packed = j->batch && compress_frame(&k->data, j->batch->data, j->batch->len) == 0;
	j->err = j->packed ? 0 : errno;

	pthread_mutex_lock(&w->lock);
	while (w->write_seq != j->seq)
		pthread_cond_wait(&w->turn, &w->lock);
	pthread_mutex_unlock(&w->lock);
	write_job(k, j);
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
	struct store_quiet q;
	int rc = -1;

	memcpy(h.magic, STORE_TRACE_MAGIC, sizeof(h.magic));
	errno = ENOMEM;
	store_quiet_begin(&q);
	if (!put_string(&s, p ? p->cubpf_version : NULL) && !put_string(&s, p ? p->hostname : NULL) &&
	    !put_string(&s, p ? p->cmdline : NULL) && !put_u32(&s, p ? p->ppid : 0) &&
	    !put_record(&rec, STORE_REC_HEADER, &h, sizeof(h), s.p, s.len) &&
	    !put_records(w, w->metaz, rec.p, rec.len, FRAME_META))
		rc = 0;
	int e = errno;
	store_quiet_end(&q);
	if (rc)
		snprintf(w->error, sizeof(w->error), "cannot write the trace's header: %s",
			 e ? strerror(e) : "the compressor failed");
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
	for (struct strchunk *c = w->strmem, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(w->strtab);
	free(w->meta_spare.p);
	free(w->meta.p);
	for (int i = 0; w->workers && i < w->opt.workers; i++) /* taken for all, started or not */
		compressor_free(&w->workers[i].data);
	free(w->workers);
	if (w->metaz)
		compressor_free(w->metaz);
	free(w->metaz);
	free(w->mem_reserve);
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
	if (w->opt.batch_bytes > MAX_BATCH)
		w->opt.batch_bytes = MAX_BATCH;
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

/* Everything the writer needs to go on under a memory limit, taken now: the compressors (the
 * header is written with the first) and the metadata's reserve. */
static int take_memory(struct store_trace_writer *w)
{
	w->workers = calloc((size_t)w->opt.workers, sizeof(*w->workers));
	w->mem_reserve = malloc(META_RESERVE);
	w->strtab = calloc(STR_TABLE, sizeof(*w->strtab));
	w->strcap = STR_TABLE;
	w->metaz = calloc(1, sizeof(*w->metaz));
	if (!w->workers || !w->mem_reserve || !w->strtab || !w->metaz ||
	    compressor_init(w->metaz, w->opt.level, w->opt.batch_bytes) ||
	    grow(&w->meta, STR_CHUNK) || grow(&w->meta_spare, STR_CHUNK) || !strent_alloc(w, 1))
		return -1;
	w->strmem->used = 0; /* the first chunk, taken now */
	for (int i = 0; i < w->opt.workers; i++) {
		struct worker *k = &w->workers[i];
		k->w = w;
		if (compressor_init(&k->data, w->opt.level, w->opt.batch_bytes))
			return -1;
	}
	return 0;
}

/* The threads block every signal: a signal their writes raise (SIGXFSZ past RLIMIT_FSIZE,
 * SIGPIPE) would otherwise kill the application, and the application's own signals are for
 * its threads.  They inherit the mask of the thread that creates them.  Their stacks are 1 MiB
 * (compression state lives on the heap): glibc's default of 8 MiB each counts against an
 * application's RLIMIT_AS (`ulimit -v`), where its own threads must still fit. */
#define WORKER_STACK (1u << 20)

static int start_workers(struct store_trace_writer *w)
{
	sigset_t all, old;
	pthread_attr_t attr;
	int rc = pthread_attr_init(&attr) ? -1 : 0;
	if (rc)
		return rc;
	pthread_attr_setstacksize(&attr, WORKER_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	deadline_after(&w->deadline, w->opt.flush_ms);
	for (int i = 0; i < w->opt.workers && !rc; i++) {
		rc = pthread_create(&w->workers[i].thread, &attr, worker_main, &w->workers[i]) ? -1 : 0;
		w->nworkers += !rc;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return rc;
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
	if (take_memory(w)) {
		snprintf(err, errlen, "out of memory for the trace writer");
		writer_free(w);
		return NULL;
	}
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct stat st;
	if (w->fd < 0 || fstat(w->fd, &st)) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		writer_free(w);
		return NULL;
	}
	w->regular = S_ISREG(st.st_mode);
	if (header_frame(w, p)) {
		snprintf(err, errlen, "%s: %s", path, w->error);
		if (w->regular)
			unlink(path); /* an empty file would only say "empty" */
		writer_free(w);
		return NULL;
	}
	if (start_workers(w)) {
		snprintf(err, errlen, "cannot start the trace writer threads");
		stop_workers(w);
		if (w->regular)
			unlink(path);
		writer_free(w);
		return NULL;
	}
	return w;
}

/* The last frames, from the caller's thread: the metadata still pending (what cannot be
 * written now is lost, and counted), then the trailer, into the room kept for it: the LOST
 * record of losses not yet said, and END. */
static void write_last(struct store_trace_writer *w)
{
	struct compressor *z = w->metaz;
	uint8_t tb[256]; /* DROP, LOST and END: 152 bytes, never an allocation */
	struct growbuf rec = {.p = tb, .cap = sizeof(tb)};
	struct store_quiet q;

	store_quiet_begin(&q);
	if (write_meta(w, z)) {
		int err = errno;
		pthread_mutex_lock(&w->lock);
		meta_give_up(w, w->meta.p, w->meta.len, err);
		w->meta.len = 0;
		pthread_mutex_unlock(&w->lock);
	}
	pthread_mutex_lock(&w->lock);
	struct store_rec_end end = {.end_realtime_ns = realtime_ns(), .records = w->cnt.records,
				    .dropped_records = w->cnt.dropped_records + w->cnt.lost_records,
				    .dropped_batches = w->cnt.dropped_batches};
	loss_records(w, &rec);
	pthread_mutex_unlock(&w->lock);
	if (put_record_in(w, &rec, STORE_REC_END, &end, sizeof(end), NULL, 0) ||
	    put_records(w, z, rec.p, rec.len, FRAME_TRAILER)) {
		pthread_mutex_lock(&w->lock);
		if (!w->error[0])
			snprintf(w->error, sizeof(w->error), "writing the trace's end: %s",
				 strerror(errno));
		w->cnt.io_error = 1;
		pthread_mutex_unlock(&w->lock);
	}
	store_quiet_end(&q);
}

int store_trace_close(struct store_trace_writer *w, char *err, size_t errlen)
{
	int rc;

	if (!w)
		return 0;
	if (w->forked) { /* a child after fork: the file and the threads are the parent's */
		w->fd = -1;
		writer_free(w);
		return 0;
	}
	stop_workers(w); /* they write every batch that is left before they return */
	write_last(w);
	if (w->regular)
		(void)!ftruncate(w->fd, (off_t)w->good_end); /* gives back the blocks kept past it */
	if (close(w->fd) && !w->error[0]) {
		snprintf(w->error, sizeof(w->error), "closing the trace: %s", strerror(errno));
		w->cnt.io_error = 1;
	}
	w->fd = -1;
	rc = w->cnt.io_error || w->error[0] ? -1 : 0;
	if (rc && err && (w->cnt.lost_records || w->cnt.lost_frames))
		snprintf(err, errlen, "%llu records in %llu frames not written (%s; first: %s)",
			 (unsigned long long)w->cnt.lost_records,
			 (unsigned long long)w->cnt.lost_frames,
			 store_lost_cause_name(w->cnt.lost_cause), w->error);
	else if (rc && err)
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
