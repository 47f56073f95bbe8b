/* tools/tool_data.c: what a `cubpf run` recorded, gathered for the tools' formatters: the
 * trace's records only.  The shim's log is for people: a reworded line, or a run with the log
 * off, changes no report (store/FORMAT.md, "Run metadata"). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "ptx-rewriter/layout.h"
#include "tools/tools.h"
#include "vm/vm.h"

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return p;
	size_t n = *cap ? *cap * 2 : 16;
	while (n < need)
		n *= 2;
	void *q = realloc(p, n * size);
	if (q)
		*cap = n;
	return q;
}

/* How one trace's numbers enter d: a process of a run of several has its contexts, devices and
 * kernel ids put apart from the other processes' (tools.h, TOOL_PROCESS_CTX). */
struct load {
	uint32_t ctx_base, dev_base;
	int renumber;               /* kernel ids into the run's, through d->remap */
	struct tool_process *proc;
};

static struct tool_kernel *kernel_get(struct tool_data *d, const char *name)
{
	for (size_t i = 0; i < d->nkernels; i++)
		if (!strcmp(d->kernels[i].name, name))
			return &d->kernels[i];
	struct tool_kernel *k = realloc(d->kernels, (d->nkernels + 1) * sizeof(*k));
	if (!k)
		return NULL;
	d->kernels = k;
	k = &d->kernels[d->nkernels];
	memset(k, 0, sizeof(*k));
	if (!(k->name = strdup(name)))
		return NULL;
	d->nkernels++;
	return k;
}

static int add_string(char ***v, size_t *n, const char *s)
{
	char **q = realloc(*v, (*n + 1) * sizeof(*q));
	if (!q)
		return -1;
	*v = q;
	if (!(q[*n] = strdup(s)))
		return -1;
	(*n)++;
	return 0;
}

/* One note (a reason something runs without probes), once: PyTorch loads modules that get the
 * same reason many times, and the processes of a run share their reasons. */
static int add_note(struct tool_data *d, const char *line)
{
	for (size_t i = 0; i < d->nnotes; i++)
		if (!strcmp(d->notes[i], line))
			return 0;
	return add_string(&d->notes, &d->nnotes, line);
}

/* Process p's counters of kernel index i, grown as kernels appear. */
static int proc_slot(struct tool_process *p, size_t i)
{
	if (i < p->k_cap)
		return 0;
	size_t cap = p->k_cap ? p->k_cap : 16;
	while (cap <= i)
		cap *= 2;
	uint64_t *a[3] = { p->k_launches, p->k_gpu_ns, p->k_spans };
	for (int j = 0; j < 3; j++) {
		uint64_t *g = realloc(a[j], cap * sizeof(*g));
		if (!g)
			return -1;
		memset(g + p->k_cap, 0, (cap - p->k_cap) * sizeof(*g));
		a[j] = g;
		if (j == 0)
			p->k_launches = g;
		else if (j == 1)
			p->k_gpu_ns = g;
		else
			p->k_spans = g;
	}
	p->k_cap = cap;
	return 0;
}

static int on_kernel(struct tool_data *d, const struct load *ld, const struct store_trace_reader *r,
		     const struct store_trace_record *rec)
{
	struct store_rec_kernel k;
	if (!store_rec_fixed(rec, &k, sizeof(k), NULL))
		return 0;
	const char *name = store_trace_string(r, k.name);
	struct tool_kernel *t = kernel_get(d, name ? name : "?");
	if (!t)
		return -1;
	size_t i = (size_t)(t - d->kernels);
	if (proc_slot(ld->proc, i) != 0)
		return -1;
	t->launches++;
	ld->proc->launches++;
	ld->proc->k_launches[i]++;
	if (k.gpu_start && k.gpu_end >= k.gpu_start) { /* device times in the record itself */
		t->gpu_ns += k.gpu_end - k.gpu_start;
		t->spans++;
		ld->proc->k_gpu_ns[i] += k.gpu_end - k.gpu_start;
		ld->proc->k_spans[i]++;
	}
	t->threads += (uint64_t)k.grid[0] * k.grid[1] * k.grid[2] * k.block[0] * k.block[1] *
		      k.block[2];
	k.device += ld->dev_base;
	t->device = k.device;
	if (!(t->launch_ns = grow(t->launch_ns, &t->cap, t->nlaunch + 1, sizeof(uint64_t))) ||
	    !(t->launch_dev = grow(t->launch_dev, &t->dev_cap, t->nlaunch + 1, sizeof(uint32_t))) ||
	    !(t->launch_corr = grow(t->launch_corr, &t->corr_cap, t->nlaunch + 1, sizeof(uint64_t))))
		return -1;
	t->launch_dev[t->nlaunch] = k.device;
	t->launch_corr[t->nlaunch] = k.corr;
	t->launch_ns[t->nlaunch++] = k.launch_ns;
	return 0;
}

/* A launch's GPU begin and end (format 1.1), by its kernel's name. */
static int on_kspan(struct tool_data *d, const struct load *ld, const struct store_trace_reader *r,
		    const struct store_trace_record *rec)
{
	struct store_rec_kspan s;
	if (!store_rec_fixed(rec, &s, sizeof(s), NULL) || s.end_ns < s.begin_ns)
		return 0;
	const char *name = store_trace_string(r, s.name);
	struct tool_kernel *t = kernel_get(d, name ? name : "?");
	size_t i = t ? (size_t)(t - d->kernels) : 0;
	if (!t || proc_slot(ld->proc, i) != 0)
		return -1;
	t->gpu_ns += s.end_ns - s.begin_ns;
	t->spans++;
	ld->proc->k_gpu_ns[i] += s.end_ns - s.begin_ns;
	ld->proc->k_spans[i]++;
	if (!(t->span_corr = grow(t->span_corr, &t->span_cap, t->nspan + 1, sizeof(uint64_t))) ||
	    !(t->span_ns = grow(t->span_ns, &t->span_ns_cap, t->nspan + 1, sizeof(uint64_t))))
		return -1;
	t->span_corr[t->nspan] = s.corr;
	t->span_ns[t->nspan++] = s.end_ns - s.begin_ns;
	return 0;
}

/* A MAP or HOST_MAP record's header and its key/value pairs, or NULL when the record is too
 * short for what its header says (a damaged trace). */
static const uint8_t *map_pairs(const struct store_trace_record *rec, struct store_rec_map *h)
{
	size_t rest;
	const uint8_t *kv = store_rec_fixed(rec, h, sizeof(*h), &rest);
	size_t pair = kv ? (size_t)h->key_size + h->value_size : 0;
	return kv && pair && (uint64_t)h->count * pair <= rest ? kv : NULL;
}

/* A map is (program, map index, name): the name too, so that a writer numbering maps of
 * several objects alike cannot mix two maps up.  A snapshot is that and the context. */
static struct tool_map *snap_slot(struct tool_data *d, uint32_t prog, uint32_t map,
				  const char *name, uint32_t ctx)
{
	for (size_t i = 0; i < d->nsnaps; i++)
		if (d->snaps[i].prog == prog && d->snaps[i].map == map && d->snaps[i].ctx == ctx &&
		    d->snaps[i].name && !strcmp(d->snaps[i].name, name))
			return &d->snaps[i];
	struct tool_map *m = realloc(d->snaps, (d->nsnaps + 1) * sizeof(*m));
	if (!m)
		return NULL;
	d->snaps = m;
	m = &d->snaps[d->nsnaps++];
	memset(m, 0, sizeof(*m));
	m->prog = prog;
	m->map = map;
	m->ctx = ctx;
	return m;
}

/* The latest snapshot of each context wins.  The shim writes a context's snapshot again (same
 * ts_ns) when it has no newer one (the periodic trace, the exit report after the teardown
 * read): a record whose time is not newer is a copy or stale and is skipped.  Records without
 * a context (before format 1.2) all count as one context: with several GPUs only the latest
 * is shown then, since summing by time would count one context's snapshots twice. */
static int on_map(struct tool_data *d, const struct load *ld, const struct store_trace_reader *r,
		  const struct store_trace_record *rec)
{
	struct store_rec_map h;
	const uint8_t *kv = map_pairs(rec, &h);
	if (!kv)
		return 0;
	size_t pair = (size_t)h.key_size + h.value_size;
	const char *name = store_trace_string(r, h.name);
	name = name ? name : "?";
	if (ld->renumber && h.ctx >= TOOL_PROCESS_CTX)
		return 0; /* a context number no process of a run of several can have */
	struct tool_map *m = snap_slot(d, h.prog, h.map, name, h.ctx + ld->ctx_base);
	if (!m)
		return -1;
	if (m->name && h.ts_ns <= m->ts)
		return 0;
	free(m->name);
	free(m->kv);
	m->kv = NULL;
	m->count = 0;
	m->ts = h.ts_ns;
	m->type = h.map_type;
	m->key_size = h.key_size;
	m->value_size = h.value_size;
	m->contexts = 1;
	if (!(m->name = strdup(name)))
		return -1;
	/* one record's keys are unique: a plain copy (threadhist sends up to 2^20 pairs) */
	if (h.count && !(m->kv = malloc((size_t)h.count * pair)))
		return -1;
	if (h.count)
		memcpy(m->kv, kv, (size_t)h.count * pair);
	m->count = h.count;
	return 0;
}

static int same_map(const struct tool_map *a, const struct tool_map *b)
{
	return a->prog == b->prog && a->map == b->map && a->name && b->name &&
	       !strcmp(a->name, b->name);
}

static int same_shape(const struct tool_map *a, const struct tool_map *b)
{
	return a->type == b->type && a->key_size == b->key_size && a->value_size == b->value_size;
}

struct kv_ref {
	const uint8_t *key;
	uint32_t key_size, slot;    /* slot: the context's place in the merged value */
};

static int kv_ref_cmp(const void *a, const void *b)
{
	const struct kv_ref *x = a, *y = b;
	int c = memcmp(x->key, y->key, x->key_size);
	return c ? c : (x->slot > y->slot) - (x->slot < y->slot);
}

/* The merged table holds, per distinct key, every context's value: as large as the snapshots
 * when the contexts share their keys (GPUs running the same kernels), but keys x contexts when
 * each has keys of its own, which a damaged trace of many one-key contexts would make
 * quadratic.  Past this many times the snapshots' bytes, the latest context is shown alone. */
#define MERGE_MAX_GROWTH 16

/* One map from the snapshots s[0..n) of its contexts (same shape): keys merged, values side
 * by side.  0, 1 when the merged table would be too sparse (nothing made), -1 out of memory. */
static int merge_contexts(struct tool_map *out, struct tool_map *const *s, uint32_t n)
{
	size_t total = 0, k = 0, ks = s[0]->key_size, vs = s[0]->value_size, keys = 0;
	for (uint32_t c = 0; c < n; c++)
		total += s[c]->count;
	struct kv_ref *refs = malloc((total ? total : 1) * sizeof(*refs));
	if (!refs)
		return -1;
	for (uint32_t c = 0; c < n; c++)
		for (size_t i = 0; i < s[c]->count; i++)
			refs[k++] = (struct kv_ref){s[c]->kv + i * (ks + vs), (uint32_t)ks, c};
	qsort(refs, total, sizeof(*refs), kv_ref_cmp);
	for (size_t i = 0; i < total; i++)
		keys += !i || memcmp(refs[i].key, refs[i - 1].key, ks);
	size_t pair = ks + vs * n;
	if ((double)keys * (double)pair > MERGE_MAX_GROWTH * (double)total * (double)(ks + vs) + 65536) {
		free(refs);
		return 1;
	}
	if (!(out->kv = calloc(keys ? keys : 1, pair))) {
		free(refs);
		return -1;
	}
	out->value_size = (uint32_t)(vs * n);
	out->contexts = n;
	out->count = 0;
	for (size_t i = 0; i < total; i++) {
		uint8_t *p;
		if (!i || memcmp(refs[i].key, refs[i - 1].key, ks)) {
			p = out->kv + out->count++ * pair;
			memcpy(p, refs[i].key, ks);
		} else {
			p = out->kv + (out->count - 1) * pair;
		}
		memcpy(p + ks + refs[i].slot * vs, refs[i].key + ks, vs);
	}
	free(refs);
	return 0;
}

static void maps_free(struct tool_map *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].kv);
	}
	free(v);
}

/* m (a copy of latest's fields) gets latest's pairs alone. */
static int copy_latest(struct tool_map *m, const struct tool_map *latest)
{
	size_t bytes = latest->count * ((size_t)latest->key_size + latest->value_size);
	m->contexts = 1;
	if (!latest->count)
		return 0;
	if (!(m->kv = malloc(bytes)))
		return -1;
	memcpy(m->kv, latest->kv, bytes);
	return 0;
}

/* One map from the snapshots of its n contexts; the latest alone, with a note, when they share
 * too few keys to be combined in bounded memory. */
static int map_from_group(struct tool_data *d, struct tool_map *m, const struct tool_map *latest,
			  struct tool_map *const *group, uint32_t n)
{
	int rc = n == 1 ? copy_latest(m, latest) : merge_contexts(m, group, n);
	if (rc <= 0)
		return rc;
	char note[160];
	snprintf(note, sizeof(note), "map %.60s: %u contexts with too few keys in common to "
		 "combine; the latest shown alone", latest->name, n);
	return add_note(d, note) || copy_latest(m, latest) ? -1 : 0;
}

/* d->maps from d->snaps: one map per (program, map, name), its contexts merged; contexts whose
 * snapshot has another shape than the latest one are left out. */
static int merge_maps(struct tool_data *d)
{
	maps_free(d->maps, d->nmaps);
	d->maps = NULL;
	d->nmaps = 0;
	struct tool_map **group = malloc((d->nsnaps ? d->nsnaps : 1) * sizeof(*group));
	if (!group || !(d->maps = calloc(d->nsnaps ? d->nsnaps : 1, sizeof(*d->maps)))) {
		free(group);
		return -1;
	}
	for (size_t i = 0; i < d->nsnaps; i++) {
		struct tool_map *latest = &d->snaps[i];
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = same_map(&d->snaps[j], latest);
		if (seen || !latest->name)
			continue;
		for (size_t j = i + 1; j < d->nsnaps; j++)
			if (same_map(&d->snaps[j], latest) && d->snaps[j].ts > latest->ts)
				latest = &d->snaps[j];
		uint32_t n = 0;
		for (size_t j = i; j < d->nsnaps; j++)
			if (same_map(&d->snaps[j], latest) && same_shape(&d->snaps[j], latest))
				group[n++] = &d->snaps[j];
		struct tool_map *m = &d->maps[d->nmaps];
		*m = *latest;
		m->ctx = 0;
		m->kv = NULL;
		if (!(m->name = strdup(latest->name)) || map_from_group(d, m, latest, group, n)) {
			free(m->name);
			free(group);
			return -1;
		}
		d->nmaps++;
	}
	free(group);
	return 0;
}

static uint64_t warp_hash(const struct tool_warp *w)
{
	uint64_t h = w->kernel_id * 0x9E3779B97F4A7C15ull;
	h ^= (w->ctaid[0] + 0x10000ull * w->ctaid[1] + 0x100000000ull * w->ctaid[2]) * 0xC2B2AE3D27D4EB4Full;
	h ^= w->warp * 0x165667B19E3779F9ull;
	return h ^ (h >> 29);
}

static int warp_rehash(struct tool_data *d)
{
	size_t cap = d->nwarps_cap ? d->nwarps_cap * 2 : 1024;
	struct tool_warp *n = calloc(cap, sizeof(*n));
	if (!n)
		return -1;
	for (size_t i = 0; i < d->nwarps_cap; i++) {
		if (!d->warps[i].used)
			continue;
		size_t j = warp_hash(&d->warps[i]) & (cap - 1);
		while (n[j].used)
			j = (j + 1) & (cap - 1);
		n[j] = d->warps[i];
	}
	free(d->warps);
	d->warps = n;
	d->nwarps_cap = cap;
	return 0;
}

/* kernelretsnoop's samples, folded per warp as they come (a run may send millions). */
static int on_exit_event(struct tool_data *d, const struct tool_exit_event *e)
{
	if ((d->nwarps + 1) * 2 > d->nwarps_cap && warp_rehash(d) != 0)
		return -1;
	struct tool_warp key = {.kernel_id = e->kernel_id,
				.ctaid = {e->ctaid_x, e->ctaid_y, e->ctaid_z},
				.warp = (e->tid_x + e->ntid_x * (e->tid_y + e->ntid_y * e->tid_z)) / 32};
	size_t j = warp_hash(&key) & (d->nwarps_cap - 1);
	struct tool_warp *w;
	for (;; j = (j + 1) & (d->nwarps_cap - 1)) {
		w = &d->warps[j];
		if (!w->used || (w->kernel_id == key.kernel_id && w->warp == key.warp &&
				 !memcmp(w->ctaid, key.ctaid, sizeof(key.ctaid))))
			break;
	}
	if (!w->used) {
		*w = key;
		w->used = 1;
		w->first = w->last = e->ts;
		d->nwarps++;
	}
	if (e->ts < w->first)
		w->first = e->ts;
	if (e->ts >= w->last) {
		w->last = e->ts;
		w->slow_tid[0] = e->tid_x;
		w->slow_tid[1] = e->tid_y;
		w->slow_tid[2] = e->tid_z;
	}
	w->exits++;
	return 0;
}

static uint32_t run_kernel_id(const struct tool_data *d, const struct load *ld, uint32_t id)
{
	return ld->renumber && id < d->nremap && d->remap[id] ? d->remap[id] : id;
}

static int on_probe(struct tool_data *d, const struct load *ld, const struct store_trace_record *rec)
{
	struct store_rec_probe p;
	size_t rest;
	const uint8_t *data = store_rec_fixed(rec, &p, sizeof(p), &rest);
	d->probes++;
	if (data && rest == sizeof(struct tool_exit_event)) {
		struct tool_exit_event e;
		memcpy(&e, data, sizeof(e));
		e.kernel_id = run_kernel_id(d, ld, e.kernel_id);
		return on_exit_event(d, &e);
	}
	return 0;
}

/* A device line once: every process of a run that uses a GPU names it. */
static int add_device(struct tool_data *d, const char *line)
{
	for (size_t i = 0; i < d->ndevices; i++)
		if (!strcmp(d->devices[i], line))
			return 0;
	return add_string(&d->devices, &d->ndevices, line);
}

static int on_meta(struct tool_data *d, const struct load *ld, const struct store_trace_record *rec)
{
	if (rec->type == STORE_REC_CLOCK) {
		struct store_rec_clock c;
		struct tool_clock *q = realloc(d->clocks, (d->nclocks + 1) * sizeof(*q));
		if (!q)
			return -1;
		d->clocks = q;
		if (store_rec_fixed(rec, &c, sizeof(c), NULL))
			d->clocks[d->nclocks++] = (struct tool_clock){c.device + ld->dev_base, c.host_ns,
								      c.gpu_ns, c.uncertainty_ns};
	} else if (rec->type == STORE_REC_DROP) {
		struct store_rec_drop dr;
		if (store_rec_fixed(rec, &dr, sizeof(dr), NULL)) {
			if (dr.source == STORE_DROP_RINGBUF)
				d->rb_drops += dr.records;
			else if (dr.source == STORE_DROP_SPANS)
				d->span_drops += dr.records;
			else
				d->writer_drops += dr.records;
		}
	} else if (rec->type == STORE_REC_LOST) {
		struct store_rec_lost l;
		if (store_rec_fixed(rec, &l, sizeof(l), NULL)) {
			d->writer_lost += l.records;
			d->lost_cause = l.cause;
			d->lost_err = l.err;
		}
	} else if (rec->type == STORE_REC_DEVICE) {
		struct store_rec_device dv;
		size_t n;
		const uint8_t *p = store_rec_fixed(rec, &dv, sizeof(dv), &n);
		char *name = p ? store_rec_string(&p, &n) : NULL;
		char line[256];
		snprintf(line, sizeof(line), "device %u: %s (sm_%u, %.0f GiB)", dv.ordinal,
			 name ? name : "?", dv.sm, (double)dv.memory_bytes / (1u << 30));
		free(name);
		if (p)
			return add_device(d, line);
	}
	return 0;
}

/* Which device a context number (MAP records' ctx) stands for: launchlate joins each GPU's
 * starts with that GPU's own launches. */
static int note_ctx_device(struct tool_data *d, const struct load *ld, uint32_t ctx,
			   uint32_t device)
{
	if (ctx == 0 || ctx > 4096)
		return 0;
	ctx += ld->ctx_base;
	device += ld->dev_base;
	if (ctx >= d->nctx_device) {
		uint32_t *q = realloc(d->ctx_device, (ctx + 1) * sizeof(*q));
		if (!q)
			return -1;
		memset(q + d->nctx_device, 0, (ctx + 1 - d->nctx_device) * sizeof(*q));
		d->ctx_device = q;
		d->nctx_device = ctx + 1;
	}
	d->ctx_device[ctx] = device + 1;
	return 0;
}

int tool_ctx_device(const struct tool_data *d, uint32_t ctx)
{
	return ctx < d->nctx_device && d->ctx_device[ctx] ? (int)(d->ctx_device[ctx] - 1) : -1;
}

/* An id for kernel t in the run: its own id in this process when no other kernel has it (a
 * run's first process keeps its numbers), else one past the largest. */
static uint32_t free_run_id(const struct tool_data *d, uint32_t want)
{
	uint32_t max = 0;
	int taken = 0;
	for (size_t i = 0; i < d->nkernels; i++) {
		taken |= d->kernels[i].id == want;
		max = d->kernels[i].id > max ? d->kernels[i].id : max;
	}
	return taken ? max + 1 : want;
}

#define TOOL_MAX_LOCAL_ID (1u << 20) /* ids past it (a damaged trace) are not renumbered */

static int renumber_kernel(struct tool_data *d, struct tool_kernel *t, uint32_t local)
{
	if (!t->id)
		t->id = free_run_id(d, local);
	if (local >= TOOL_MAX_LOCAL_ID)
		return 0;
	if (local >= d->nremap) {
		size_t n = local + 1 > 2 * d->nremap ? local + 1 : 2 * d->nremap;
		uint32_t *q = realloc(d->remap, n * sizeof(*q));
		if (!q)
			return -1;
		memset(q + d->nremap, 0, (n - d->nremap) * sizeof(*q));
		d->remap = q;
		d->nremap = n;
	}
	d->remap[local] = t->id;
	return 0;
}

/* 1.5 follows the fixed part with the ring buffers' bookkeeping bytes; older records say 0. */
static int on_map_memory(struct tool_data *d, const struct load *ld,
			 const struct store_trace_record *rec)
{
	struct store_rec_map_memory m;
	uint64_t rb = 0;
	size_t rest;
	const uint8_t *p = store_rec_fixed(rec, &m, sizeof(m), &rest);
	if (!p)
		return 0;
	if (rest >= sizeof(rb))
		memcpy(&rb, p, sizeof(rb));
	if (note_ctx_device(d, ld, m.ctx, m.device) < 0)
		return -1;
	d->device_bytes += m.device_bytes;
	d->pinned_bytes += m.pinned_bytes;
	d->rb_state_bytes += rb;
	d->have_mapmem = 1;
	return 0;
}

/* RINGBUF (1.5): a ring buffer's counts at exit, a note in the words the shim logs them. */
static int on_ringbuf(struct tool_data *d, const struct store_trace_reader *r,
		      const struct store_trace_record *rec)
{
	struct store_rec_ringbuf b;
	if (!store_rec_fixed(rec, &b, sizeof(b), NULL))
		return 0;
	const char *name = store_trace_string(r, b.name);
	char note[512];
	snprintf(note, sizeof(note), "live: ring buffer %s: %" PRIu64 " records taken, %" PRIu64
		 " dropped on device %d (lanes full); tails copied to the device %" PRIu64 " times (%"
		 PRIu64 " times the last copy was still running)", name ? name : "?", b.taken,
		 b.dropped, (int)b.device, b.syncs, b.sync_busy);
	return add_note(d, note);
}

/* HOST_MAP (1.5): a host map's entries, one "map NAME[KEY] = VALUE (host)" line each. */
static int on_host_map(struct tool_data *d, const struct store_trace_reader *r,
		       const struct store_trace_record *rec)
{
	struct store_rec_map h;
	const uint8_t *kv = map_pairs(rec, &h);
	if (!kv)
		return 0;
	size_t pair = (size_t)h.key_size + h.value_size;
	const char *name = store_trace_string(r, h.name);
	for (uint32_t i = 0; i < h.count; i++, kv += pair) {
		char kt[200], vt[200], line[512];
		vm_map_format_bytes(kv, h.key_size, kt, sizeof(kt));
		vm_map_format_bytes(kv + h.key_size, h.value_size, vt, sizeof(vt));
		snprintf(line, sizeof(line), "map %s[%s] = %s (host)", name ? name : "?", kt, vt);
		if (add_string(&d->maplines, &d->nmaplines, line) != 0)
			return -1;
	}
	return 0;
}

static int on_run_meta(struct tool_data *d, const struct load *ld,
		       const struct store_trace_reader *r, const struct store_trace_record *rec)
{
	d->have_meta = 1;
	if (rec->type == STORE_REC_KERNEL_ID) {
		struct store_rec_kernel_id k;
		const char *name;
		if (!store_rec_fixed(rec, &k, sizeof(k), NULL) || !(name = store_trace_string(r, k.name)))
			return 0;
		struct tool_kernel *t = kernel_get(d, name);
		if (!t)
			return -1;
		t->id_flags |= k.flags;
		if (ld->renumber)
			return renumber_kernel(d, t, k.id);
		t->id = k.id;
	} else if (rec->type == STORE_REC_NOT_INSTRUMENTED) {
		struct store_rec_not_instrumented n;
		size_t rest;
		const uint8_t *p = store_rec_fixed(rec, &n, sizeof(n), &rest);
		char *msg = p ? store_rec_string(&p, &rest) : NULL;
		int rc = msg && *msg ? add_note(d, msg) : 0;
		free(msg);
		return rc;
	} else if (rec->type == STORE_REC_MAP_MEMORY) {
		return on_map_memory(d, ld, rec);
	} else if (rec->type == STORE_REC_RINGBUF) {
		return on_ringbuf(d, r, rec);
	}
	return 0;
}

static int on_record(struct tool_data *d, const struct load *ld,
		     const struct store_trace_reader *r, const struct store_trace_record *rec)
{
	switch (rec->type) {
	case STORE_REC_KERNEL_ID:
	case STORE_REC_NOT_INSTRUMENTED:
	case STORE_REC_MAP_MEMORY:
	case STORE_REC_RINGBUF: return on_run_meta(d, ld, r, rec);
	case STORE_REC_HOST_MAP: return on_host_map(d, r, rec);
	case STORE_REC_KERNEL: return on_kernel(d, ld, r, rec);
	case STORE_REC_KSPAN: return on_kspan(d, ld, r, rec);
	case STORE_REC_MAP: return on_map(d, ld, r, rec);
	case STORE_REC_PROBE: return on_probe(d, ld, rec);
	default: return on_meta(d, ld, rec);
	}
}

/* ---- the processes of a run ------------------------------------------------------------------ */
static const struct tool_kernel_key *key_layout(const struct tool_kernel_key *keys,
						const char *name)
{
	for (; keys && keys->map; keys++)
		if (!strcmp(keys->map, name))
			return keys;
	return NULL;
}

struct key_ref {
	uint32_t key;
	size_t at;
};

static int key_ref_cmp(const void *a, const void *b)
{
	const struct key_ref *x = a, *y = b;
	return x->key != y->key ? (x->key > y->key) - (x->key < y->key) : (x->at > y->at) - (x->at < y->at);
}

/* m's pairs sorted by key, the values of equal keys added word by word: the maps renumbered are
 * counters, and memtrace folds kernel ids modulo 64, so that two of one process's kernels can
 * meet under the run's numbering. */
static int fold_equal_keys(struct tool_map *m)
{
	size_t pair = 4 + (size_t)m->value_size, n = 0;
	struct key_ref *ref = malloc((m->count ? m->count : 1) * sizeof(*ref));
	uint8_t *kv = malloc(m->count ? m->count * pair : 1);
	if (!ref || !kv) {
		free(ref), free(kv);
		return -1;
	}
	for (size_t i = 0; i < m->count; i++) {
		memcpy(&ref[i].key, m->kv + i * pair, 4);
		ref[i].at = i;
	}
	qsort(ref, m->count, sizeof(*ref), key_ref_cmp);
	for (size_t i = 0; i < m->count; i++) {
		const uint8_t *src = m->kv + ref[i].at * pair;
		if (n && ref[i].key == ref[i - 1].key) {
			uint8_t *dst = kv + (n - 1) * pair + 4;
			for (size_t w = 0; w + 8 <= m->value_size && m->value_size % 8 == 0; w += 8) {
				uint64_t a, b;
				memcpy(&a, dst + w, 8), memcpy(&b, src + 4 + w, 8);
				a += b;
				memcpy(dst + w, &a, 8);
			}
			continue;
		}
		memcpy(kv + n++ * pair, src, pair);
	}
	free(ref);
	free(m->kv);
	m->kv = kv;
	m->count = n;
	return 0;
}

/* The keys of one process's snapshot m, in the run's kernel ids (layout k). */
static int renumber_map(const struct tool_data *d, struct tool_map *m,
			const struct tool_kernel_key *k)
{
	size_t pair = 4 + (size_t)m->value_size;
	for (size_t i = 0; i < m->count; i++) {
		uint32_t key, local, rest;
		memcpy(&key, m->kv + i * pair, 4);
		local = key / k->per_kernel, rest = key % k->per_kernel;
		if ((k->kernels && local >= k->kernels) || local >= d->nremap || !d->remap[local])
			continue; /* not a kernel's key (another region of the map), or no id known */
		uint64_t run = k->kernels ? d->remap[local] % k->kernels : d->remap[local];
		uint64_t renumbered = run * k->per_kernel + rest;
		if (renumbered > UINT32_MAX)
			continue;
		key = (uint32_t)renumbered;
		memcpy(m->kv + i * pair, &key, 4);
	}
	return fold_equal_keys(m);
}

static int renumber_keys(struct tool_data *d, const struct tool_kernel_key *keys, uint32_t ctx_base)
{
	for (size_t i = 0; i < d->nsnaps; i++) {
		struct tool_map *m = &d->snaps[i];
		const struct tool_kernel_key *k = m->name ? key_layout(keys, m->name) : NULL;
		if (k && k->per_kernel && m->key_size == 4 && m->ctx >= ctx_base &&
		    m->ctx - ctx_base < TOOL_PROCESS_CTX && renumber_map(d, m, k) != 0)
			return -1;
	}
	return 0;
}

static struct tool_process *process_add(struct tool_data *d, const struct store_trace_reader *r)
{
	struct tool_process *q = realloc(d->procs, (d->nprocs + 1) * sizeof(*q));
	if (!q)
		return NULL;
	d->procs = q;
	const char *cmd = store_trace_header_string(r, 2);
	struct tool_process *p = &q[d->nprocs];
	*p = (struct tool_process){.pid = store_trace_header(r)->pid,
				   .ppid = store_trace_parent_pid(r), .state = "running"};
	if (!(p->cmdline = strdup(cmd ? cmd : "")))
		return NULL;
	d->nprocs++;
	return p;
}

static const char *const trace_states[] = {"running", "complete", "cut short (process killed?)",
					   "no end record (process killed?)", "damaged"};

/* The run's state: its processes' when they agree. */
static const char *run_state(const struct tool_data *d)
{
	for (size_t i = 1; i < d->nprocs; i++)
		if (strcmp(d->procs[i].state, d->procs[0].state))
			return "not the same in every process (see the processes)";
	return d->nprocs ? d->procs[0].state : "none";
}

/* Where one trace's numbers go in d (a fresh process of d's run), and whether its trace names
 * kernel ids and reasons itself.  -1: out of memory. */
static int load_begin(struct tool_data *d, struct load *ld, const struct store_trace_reader *r,
		      int several)
{
	*ld = (struct load){.renumber = several};
	if (several) {
		ld->ctx_base = (uint32_t)d->nprocs * TOOL_PROCESS_CTX;
		ld->dev_base = (uint32_t)d->nprocs * TOOL_PROCESS_DEVICE;
		if (d->nremap)
			memset(d->remap, 0, d->nremap * sizeof(*d->remap));
	}
	const struct store_rec_header *h = store_trace_header(r);
	if (h->major > 1 || h->minor >= 2) /* the trace names kernel ids and reasons itself */
		d->have_meta = 1;
	return (ld->proc = process_add(d, r)) ? 0 : -1;
}

/* The records r has now, folded into d; the maps merged again and the state said.  0, 1 when
 * the reader stopped at damage (message in err, the records before it kept), -1 out of memory. */
static int load_records(struct tool_data *d, struct load *ld, struct store_trace_reader *r,
			const char *trace, const struct tool_kernel_key *keys, char *err,
			size_t errlen)
{
	struct store_trace_record rec;
	int rc;
	while ((rc = store_trace_next(r, &rec)) == 1)
		if (on_record(d, ld, r, &rec) != 0)
			return -1;
	if ((ld->renumber && renumber_keys(d, keys, ld->ctx_base) != 0) || merge_maps(d) != 0)
		return -1;
	ld->proc->state = trace_states[store_trace_state(r)];
	d->state = run_state(d);
	if (rc >= 0)
		return 0;
	snprintf(err, errlen, "%s: %s (records before it are kept)", trace,
		 store_trace_reader_error(r));
	return 1;
}

static int load_trace(struct tool_data *d, const char *trace, int several,
		      const struct tool_kernel_key *keys, char *err, size_t errlen)
{
	struct store_trace_reader *r = store_trace_open(trace, err, errlen);
	if (!r)
		return -1;
	struct load ld;
	int rc = load_begin(d, &ld, r, several);
	if (rc == 0)
		rc = load_records(d, &ld, r, trace, keys, err, errlen);
	store_trace_close_reader(r);
	if (rc >= 0)
		return 0;
	snprintf(err, errlen, "out of memory reading %s", trace);
	return -1;
}

/* ---- a trace followed as it grows ------------------------------------------------------------
 * The reader stays open between updates and goes on where it stopped, so an update costs what
 * was appended since the last, not the trace's length: every record handler here folds into
 * what d holds (launches add up, the latest snapshot of a map wins by its time, notes and
 * devices once), which is what a read of the whole file would have made. */
struct tool_follow {
	struct store_trace_reader *r;
	struct tool_data d;
	struct load ld;
	char *path;
	uint64_t read_before;       /* bytes consumed before the last update */
};

struct tool_follow *tool_follow_open(const char *trace, char *err, size_t errlen)
{
	struct tool_follow *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(trace))) {
		snprintf(err, errlen, "out of memory");
		free(f);
		return NULL;
	}
	if (!(f->r = store_trace_open_follow(trace, err, errlen)))
		goto fail;
	if (load_begin(&f->d, &f->ld, f->r, 0) != 0) {
		snprintf(err, errlen, "out of memory reading %s", trace);
		goto fail;
	}
	return f;
fail:
	tool_follow_close(f);
	return NULL;
}

int tool_follow_update(struct tool_follow *f, char *err, size_t errlen)
{
	store_trace_reader_sizes(f->r, &f->read_before, NULL, NULL);
	if (store_trace_refresh(f->r, err, errlen) < 0)
		return -1;
	int rc = load_records(&f->d, &f->ld, f->r, f->path, NULL, err, errlen);
	if (rc < 0)
		snprintf(err, errlen, "out of memory reading %s", f->path);
	return rc < 0 ? -1 : 0;
}

const struct tool_data *tool_follow_data(const struct tool_follow *f)
{
	return &f->d;
}

void tool_follow_bytes(const struct tool_follow *f, uint64_t *total, uint64_t *last_update)
{
	uint64_t now = 0;
	store_trace_reader_sizes(f->r, &now, NULL, NULL);
	if (total)
		*total = now;
	if (last_update)
		*last_update = now - f->read_before;
}

void tool_follow_close(struct tool_follow *f)
{
	if (!f)
		return;
	store_trace_close_reader(f->r);
	tool_data_free(&f->d);
	free(f->path);
	free(f);
}

int tool_data_load(struct tool_data *d, const char *trace, char *err, size_t errlen)
{
	return load_trace(d, trace, 0, NULL, err, errlen);
}

int tool_data_load_process(struct tool_data *d, const char *trace,
			   const struct tool_kernel_key *keys, char *err, size_t errlen)
{
	if (d->nprocs >= UINT32_MAX / TOOL_PROCESS_DEVICE) {
		snprintf(err, errlen, "%s: more processes than a report reads (%u)", trace,
			 UINT32_MAX / TOOL_PROCESS_DEVICE);
		return -1;
	}
	return load_trace(d, trace, 1, keys, err, errlen);
}

const struct tool_kernel *tool_kernel_by_id(const struct tool_data *d, uint32_t id)
{
	for (size_t i = 0; i < d->nkernels; i++)
		if (d->kernels[i].id == id)
			return &d->kernels[i];
	return NULL;
}

const struct tool_map *tool_map_by_name(const struct tool_data *d, const char *name)
{
	for (size_t i = 0; i < d->nmaps; i++)
		if (!strcmp(d->maps[i].name, name))
			return &d->maps[i];
	return NULL;
}

/* Per-SM maps (CUBPF_MAP_PERCPU_ARRAY) come with CUBPF_PERCPU_SLOTS copies of each value, one
 * per SM slot, slot s at s * value size (the shim's MAP records, as Linux's per-CPU lookups). */
uint32_t tool_map_copies(const struct tool_map *m)
{
	uint32_t c = m && m->contexts > 1 ? m->contexts : 1, vs = m ? m->value_size / c : 0;
	return (m && m->type == CUBPF_MAP_PERCPU_ARRAY && vs % CUBPF_PERCPU_SLOTS == 0
			? CUBPF_PERCPU_SLOTS
			: 1) * c;
}

uint64_t tool_map_reduce(const struct tool_map *m, uint32_t key, uint32_t word,
			 enum tool_reduce how)
{
	uint32_t n = tool_map_copies(m), vs = m ? m->value_size / n : 0;
	if (!m || m->key_size != 4 || (word + 1) * 8u > vs)
		return 0;
	size_t pair = (size_t)m->key_size + m->value_size;
	for (size_t i = 0; i < m->count; i++) {
		uint32_t k;
		memcpy(&k, m->kv + i * pair, 4);
		if (k != key)
			continue;
		uint64_t r = 0;
		for (uint32_t s = 0; s < n; s++) {
			uint64_t v;
			memcpy(&v, m->kv + i * pair + 4 + (size_t)s * vs + word * 8u, 8);
			if (how == TOOL_SUM)
				r += v;
			else if (how == TOOL_MAX)
				r = v > r ? v : r;
			else if (v && (!r || v < r)) /* TOOL_MIN: the least non-zero copy */
				r = v;
		}
		return r;
	}
	return 0;
}

uint64_t tool_map_u64(const struct tool_map *m, uint32_t key, uint32_t word)
{
	return tool_map_reduce(m, key, word, TOOL_SUM);
}

uint64_t tool_gpu_to_host(const struct tool_data *d, uint32_t device, uint64_t t)
{
	const struct tool_clock *best = NULL;
	for (size_t i = 0; i < d->nclocks; i++) {
		const struct tool_clock *c = &d->clocks[i];
		if (c->device != device)
			continue;
		if (!best || (c->gpu_ns <= t && (best->gpu_ns > t || c->gpu_ns > best->gpu_ns)))
			best = c;
	}
	return best ? t + (best->host_ns - best->gpu_ns) : t;
}

static void strings_free(char ***v, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

void tool_data_reset_trace(struct tool_data *d)
{
	for (size_t i = 0; i < d->nkernels; i++) {
		struct tool_kernel *k = &d->kernels[i];
		free(k->launch_ns);
		free(k->launch_dev);
		free(k->launch_corr);
		free(k->span_corr);
		free(k->span_ns);
		k->launch_ns = NULL;
		k->launch_dev = NULL;
		k->launch_corr = k->span_corr = k->span_ns = NULL;
		k->nlaunch = k->cap = k->dev_cap = k->corr_cap = 0;
		k->nspan = k->span_cap = k->span_ns_cap = 0;
		k->launches = k->threads = k->gpu_ns = k->spans = 0;
	}
	maps_free(d->maps, d->nmaps);
	d->maps = NULL;
	d->nmaps = 0;
	maps_free(d->snaps, d->nsnaps);
	d->snaps = NULL;
	d->nsnaps = 0;
	free(d->clocks);
	d->clocks = NULL;
	d->nclocks = 0;
	for (size_t i = 0; i < d->ndevices; i++)
		free(d->devices[i]);
	free(d->devices);
	d->devices = NULL;
	d->ndevices = 0;
	free(d->warps);
	d->warps = NULL;
	d->nwarps = d->nwarps_cap = 0;
	d->probes = d->rb_drops = d->writer_drops = d->span_drops = d->writer_lost = 0;
	d->device_bytes = d->pinned_bytes = d->rb_state_bytes = 0;
	d->have_mapmem = d->have_meta = 0;
	strings_free(&d->notes, &d->nnotes);
	strings_free(&d->maplines, &d->nmaplines);
	free(d->ctx_device);
	d->ctx_device = NULL;
	d->nctx_device = 0;
	for (size_t i = 0; i < d->nprocs; i++) {
		free(d->procs[i].cmdline);
		free(d->procs[i].k_launches);
		free(d->procs[i].k_gpu_ns);
		free(d->procs[i].k_spans);
	}
	free(d->procs);
	d->procs = NULL;
	d->nprocs = 0;
	free(d->remap);
	d->remap = NULL;
	d->nremap = 0;
}

void tool_data_free(struct tool_data *d)
{
	tool_data_reset_trace(d);
	for (size_t i = 0; i < d->nkernels; i++)
		free(d->kernels[i].name);
	free(d->kernels);
	memset(d, 0, sizeof(*d));
}
