/* tools/tool_reports.c: the formatters of the bundled tools (what each prints at -i and exit). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vm/include/cubpf_abi.h"
#include "tools/tools.h"

void tool_report_kcount(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_threadhist(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_launchlate(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_memtrace(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_kernelretsnoop(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_maps(const struct tool_data *d, const struct tool_opts *o, FILE *f);
extern const struct tool_kernel_key tool_keys_kcount[], tool_keys_launchlate[], tool_keys_memtrace[];

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint32_t key_at(const struct tool_map *m, size_t i)
{
	uint32_t k;
	memcpy(&k, m->kv + i * ((size_t)m->key_size + m->value_size), 4);
	return k;
}

/* The word of entry i, summed over the contexts (GPUs) merged in the map. */
static uint64_t val_at(const struct tool_map *m, size_t i, uint32_t word)
{
	uint32_t n = m->contexts > 1 ? m->contexts : 1, vs = m->value_size / n;
	uint64_t v, sum = 0;
	for (uint32_t c = 0; c < n; c++) {
		memcpy(&v, m->kv + i * ((size_t)m->key_size + m->value_size) + m->key_size +
				   (size_t)c * vs + word * 8u, 8);
		sum += v;
	}
	return sum;
}

static int map_ok(const struct tool_map *m, uint32_t min_value)
{
	return m && m->key_size == 4 && m->value_size / (m->contexts > 1 ? m->contexts : 1) >= min_value;
}

/* ---- kcount --------------------------------------------------------------------------------- */
/* kstats: key = kernel id */
const struct tool_kernel_key tool_keys_kcount[] = {{"kstats", 1, 0}, {NULL, 0, 0}};

void tool_report_kcount(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	const struct tool_map *m = tool_map_by_name(d, "kstats");
	if (!map_ok(m, 32))
		m = NULL;
	char sn[48];
	if (o->json)
		fputs("\"tool\":\"kcount\",\"kernels\":[", f);
	else
		fprintf(f, "%-40s %9s %12s %9s %14s\n", "KERNEL", "LAUNCHES", "THREADS", "GPU_RUNS",
			"GPU_SPAN_us");
	int first = 1;
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		if (!k->launches && !k->id)
			continue;
		uint64_t runs = 0, gthreads = 0, t0 = 0, t1 = 0;
		if (m && k->id) {
			runs = tool_map_u64(m, k->id, 0);
			gthreads = tool_map_u64(m, k->id, 1);
			t0 = tool_map_reduce(m, k->id, 2, TOOL_MIN); /* first entry on any SM */
			t1 = tool_map_reduce(m, k->id, 3, TOOL_MAX); /* last exit on any SM */
		}
		double span = t0 && t1 > t0 ? (double)(t1 - t0) / 1e3 : 0;
		if (o->json) {
			fprintf(f, "%s{\"name\":", first ? "" : ",");
			tool_json_string(f, k->name);
			fprintf(f, ",\"instrumented\":%s,\"launches\":%" PRIu64 ",\"threads\":%" PRIu64
				",\"gpu_runs\":%" PRIu64 ",\"gpu_threads\":%" PRIu64 ",\"gpu_span_ns\":%"
				PRIu64 "}", k->id ? "true" : "false", k->launches, k->threads, runs, gthreads,
				t0 && t1 > t0 ? t1 - t0 : 0);
		} else if (k->id) {
			fprintf(f, "%-40s %9" PRIu64 " %12" PRIu64 " %9" PRIu64 " %14.1f\n",
				tool_short_name(k->name, sn, sizeof(sn)), k->launches, k->threads, runs, span);
		} else {
			fprintf(f, "%-40s %9" PRIu64 " %12" PRIu64 " %9s %14s\n",
				tool_short_name(k->name, sn, sizeof(sn)), k->launches, k->threads, "-", "-");
		}
		first = 0;
	}
	if (o->json)
		fputs("],", f);
}

/* ---- threadhist ----------------------------------------------------------------------------- */
/* The probe counts blocks of 2^c warps in `blocks` (one counter per block, in a region per block
 * size, see block_groups), other blocks of a multiple of 32 threads in `edges`, a difference
 * array over groups of 32 thread ids (+1 at a block's first group, -1 past its last: a group's
 * count is the sum of the edges up to it), and other blocks in `tedges`, the same over thread
 * ids: a thread's count is the sum of its group's and its own.  Traces of earlier versions count
 * whole warps per group in `warps`, and odd-sized blocks thread by thread in `threads` (key =
 * thread id); all are read (but not `blocks` as two versions that never shipped laid it out:
 * their keys mean other groups).  Grids reach 2^26 threads and more, so the threads are never
 * listed one by one: counts are read on the fly from two dense arrays, the distribution built
 * from runs of 32 equal counts where a group has no per-thread extras. */
#define TH_GROUPS (1u << 21)
#define TH_THREADS (1u << 20)
/* `blocks`, as tools/probes/threadhist.bpf.c lays it out: 64 units of 2^16 counters; blocks of w
 * warps (w = 1, 2, 4 .. 32) at unit (TH_REGIONS >> w) & 63, block b at the region's start + b
 * for b < TH_GROUPS / w; one counter outside the regions, at unit 1, holds the blocks past the
 * end of their region. */
#define TH_REGIONS 0x20c40ull
#define TH_UNIT 16

struct thist {
	uint64_t *groups, *threads;   /* dense: groups[g], threads[t] */
	uint64_t ngroups, nthreads;   /* array lengths (highest non-zero key + 1) */
	uint64_t n;                   /* thread ids 0 .. n - 1 (the highest that ran, + 1) */
};

struct dist_row {
	uint64_t executions, threads;
};

static uint64_t th_count(const struct thist *h, uint64_t t)
{
	return (t / 32 < h->ngroups ? h->groups[t / 32] : 0) + (t < h->nthreads ? h->threads[t] : 0);
}

static uint64_t *dense(const struct tool_map *m, uint64_t *len)
{
	uint64_t max = 0;
	*len = 0;
	if (!m || m->key_size != 4 || m->value_size < 8)
		return NULL;
	for (size_t i = 0; i < m->count; i++)
		if (val_at(m, i, 0) && key_at(m, i) + 1ull > max)
			max = key_at(m, i) + 1ull;
	uint64_t *a = calloc(max + 1, sizeof(*a));
	if (!a)
		return NULL;
	for (size_t i = 0; i < m->count; i++)
		if (key_at(m, i) < max)
			a[key_at(m, i)] += val_at(m, i, 0);
	*len = max;
	return a;
}

/* Adds the prefix sums of the difference array e[0 .. n - 1] (freed here) to the counts a[0 ..
 * *len - 1] (groups or threads; grown as needed).  Unsigned arithmetic: the -1 edges wrap, and
 * every prefix of a whole launch's edges is >= 0. */
static int add_diff(uint64_t **a, uint64_t *len, uint64_t *e, uint64_t n)
{
	if (!e)
		return 0;
	if (n > *len) {
		uint64_t *g = realloc(*a, n * sizeof(*g));
		if (!g) {
			free(e);
			return -1;
		}
		memset(g + *len, 0, (n - *len) * sizeof(*g));
		*a = g, *len = n;
	}
	uint64_t sum = 0;
	for (uint64_t i = 0; i < n; i++)
		(*a)[i] += sum += e[i];
	while (*len && !(*a)[*len - 1])
		--*len;
	free(e);
	return 0;
}

/* A u32 counter of entry i, summed over the contexts (GPUs) merged in the map. */
static uint64_t val32_at(const struct tool_map *m, size_t i)
{
	uint32_t n = m->contexts > 1 ? m->contexts : 1, vs = m->value_size / n, v;
	uint64_t sum = 0;
	for (uint32_t c = 0; c < n; c++) {
		memcpy(&v, m->kv + i * ((size_t)m->key_size + m->value_size) + m->key_size +
				   (size_t)c * vs, 4);
		sum += v;
	}
	return sum;
}

/* The groups first .. end - 1 that counter `key` of `blocks` stands for: block b of w warps
 * covers groups b * w .. (b + 1) * w - 1.  Blocks past the end of their region (thread ids from
 * 2^26) are given to the last group, as `edges` clamps; the probe writes no other key outside
 * the regions. */
static void block_groups(uint64_t key, uint64_t *first, uint64_t *end)
{
	for (uint64_t w = 1; w <= 32; w *= 2) {
		uint64_t at = ((TH_REGIONS >> w) & 63) << TH_UNIT;
		if (key >= at && key - at < TH_GROUPS / w) {
			*first = (key - at) * w;
			*end = *first + w;
			return;
		}
	}
	*first = TH_GROUPS - 1;
	*end = TH_GROUPS;
}

/* `blocks` as a difference array over groups, in *e (NULL: no such map); -1 out of memory. */
static int blocks_diff(const struct tool_map *m, uint64_t **e, uint64_t *len)
{
	uint64_t first, end, n = 0;
	*e = NULL, *len = 0;
	if (!m || m->key_size != 4 || m->value_size < 4)
		return 0;
	for (size_t i = 0; i < m->count; i++) {
		block_groups(key_at(m, i), &first, &end);
		if (val32_at(m, i) && end + 1 > n)
			n = end + 1;
	}
	if (!n || !(*e = calloc(n, sizeof(**e))))
		return n ? -1 : 0;
	for (size_t i = 0; i < m->count; i++) {
		uint64_t v = val32_at(m, i);
		block_groups(key_at(m, i), &first, &end);
		if (v)
			(*e)[first] += v, (*e)[end] -= v;
	}
	*len = n;
	return 0;
}

static int th_load(const struct tool_data *d, struct thist *h)
{
	memset(h, 0, sizeof(*h));
	h->groups = dense(tool_map_by_name(d, "warps"), &h->ngroups);
	uint64_t n = 0;
	uint64_t *e = dense(tool_map_by_name(d, "edges"), &n);
	if (add_diff(&h->groups, &h->ngroups, e, n) < 0)
		return -1;
	if (blocks_diff(tool_map_by_name(d, "blocks"), &e, &n) < 0 ||
	    add_diff(&h->groups, &h->ngroups, e, n) < 0)
		return -1;
	h->threads = dense(tool_map_by_name(d, "threads"), &h->nthreads);
	e = dense(tool_map_by_name(d, "tedges"), &n);
	if (add_diff(&h->threads, &h->nthreads, e, n) < 0)
		return -1;
	if (!h->groups && !h->threads)
		return -1;
	h->n = h->ngroups * 32 > h->nthreads ? h->ngroups * 32 : h->nthreads;
	while (h->n && !th_count(h, h->n - 1)) /* a group's lanes past the grid never ran */
		h->n--;
	return h->n ? 0 : -1;
}

/* Adds `threads` threads of count c to the distribution (few distinct counts: linear). */
static int dist_add(struct dist_row **rows, size_t *nrows, uint64_t c, uint64_t threads)
{
	for (size_t i = 0; i < *nrows; i++)
		if ((*rows)[i].executions == c) {
			(*rows)[i].threads += threads;
			return 0;
		}
	struct dist_row *q = realloc(*rows, (*nrows + 1) * sizeof(*q));
	if (!q)
		return -1;
	*rows = q;
	q[(*nrows)++] = (struct dist_row){c, threads};
	return 0;
}

static int cmp_dist_desc(const void *a, const void *b)
{
	uint64_t x = ((const struct dist_row *)a)->executions;
	uint64_t y = ((const struct dist_row *)b)->executions;
	return x > y ? -1 : x < y;
}

static struct dist_row *th_dist(const struct thist *h, size_t *nrows)
{
	struct dist_row *rows = NULL;
	*nrows = 0;
	for (uint64_t t = 0; t < h->n;) {
		bool plain = t % 32 == 0 && t + 32 <= h->n; /* a whole group, no extras */
		for (uint64_t i = t; plain && i < t + 32 && i < h->nthreads; i++)
			plain = h->threads[i] == 0;
		if (plain) { /* a run of 32 equal counts */
			if (dist_add(&rows, nrows, th_count(h, t), 32) != 0)
				goto oom;
			t += 32;
		} else {
			if (dist_add(&rows, nrows, th_count(h, t), 1) != 0)
				goto oom;
			t++;
		}
	}
	qsort(rows, *nrows, sizeof(*rows), cmp_dist_desc);
	return rows;
oom:
	free(rows);
	return NULL;
}

/* The `top` most loaded threads (highest counts, lower ids first) or least loaded (lowest
 * counts, higher ids first), as the old per-thread sort ordered them. */
static size_t th_extremes(const struct thist *h, const struct dist_row *rows, size_t nrows,
			  bool most, size_t top, uint64_t *ids, uint64_t *counts)
{
	size_t got = 0;
	for (size_t r = 0; r < nrows && got < top; r++) {
		uint64_t c = rows[most ? r : nrows - 1 - r].executions;
		for (uint64_t i = 0; i < h->n && got < top; i++) {
			uint64_t t = most ? i : h->n - 1 - i;
			if (th_count(h, t) == c) {
				ids[got] = t;
				counts[got++] = c;
			}
		}
	}
	return got;
}

static void threadhist_rows(const struct dist_row *rows, size_t nrows, const struct tool_opts *o,
			    FILE *f)
{
	if (!o->json)
		fprintf(f, "%12s  %12s\n", "EXECUTIONS", "THREADS");
	for (size_t i = 0; i < nrows; i++) {
		if (o->json)
			fprintf(f, "%s{\"executions\":%" PRIu64 ",\"threads\":%" PRIu64 "}", i ? "," : "",
				rows[i].executions, rows[i].threads);
		else
			fprintf(f, "%12" PRIu64 "  %12" PRIu64 "\n", rows[i].executions, rows[i].threads);
	}
}

/* Threads the launch calls asked for, of the kernels that have an id (instrumented): what the
 * executions add up to when every launch ran probed, in the same run (a framework that
 * autotunes launches another set of configurations in each run). */
static uint64_t probed_launch_threads(const struct tool_data *d)
{
	uint64_t n = 0;
	for (size_t i = 0; i < d->nkernels; i++)
		if (d->kernels[i].id)
			n += d->kernels[i].threads;
	return n;
}

void tool_report_threadhist(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	struct thist h;
	size_t nrows = 0;
	struct dist_row *rows = th_load(d, &h) == 0 ? th_dist(&h, &nrows) : NULL;
	if (o->json)
		fputs("\"tool\":\"threadhist\",", f);
	if (!rows || !nrows) {
		fputs(o->json ? "\"threads\":0," : "no thread executions recorded\n", f);
		free(rows), free(h.groups), free(h.threads);
		return;
	}
	double sum = 0, sq = 0, n = (double)h.n;
	for (size_t i = 0; i < nrows; i++)
		sum += (double)rows[i].executions * (double)rows[i].threads;
	double mean = sum / n;
	for (size_t i = 0; i < nrows; i++)
		sq += ((double)rows[i].executions - mean) * ((double)rows[i].executions - mean) *
		      (double)rows[i].threads;
	double sd = sqrt(sq / n);
	uint64_t max = rows[0].executions, min = rows[nrows - 1].executions;
	size_t top = (size_t)o->top;
	uint64_t *ids = calloc(2 * top + 2, sizeof(*ids)), *cnt = calloc(2 * top + 2, sizeof(*cnt));
	size_t nm = ids && cnt ? th_extremes(&h, rows, nrows, true, top, ids, cnt) : 0;
	size_t nl = ids && cnt ? th_extremes(&h, rows, nrows, false, top, ids + top + 1,
					      cnt + top + 1) : 0;
	if (o->json) {
		fprintf(f, "\"threads\":%" PRIu64 ",\"min\":%" PRIu64 ",\"max\":%" PRIu64 ",\"mean\":"
			"%.3f,\"stddev\":%.3f,\"launched_threads\":%" PRIu64 ",\"distribution\":[", h.n,
			min, max, mean, sd, probed_launch_threads(d));
		/* ascending executions, as before */
		struct dist_row *asc = calloc(nrows, sizeof(*asc));
		for (size_t i = 0; asc && i < nrows; i++)
			asc[i] = rows[nrows - 1 - i];
		threadhist_rows(asc ? asc : rows, nrows, o, f);
		free(asc);
		fputs("],\"most\":[", f);
		for (size_t i = 0; i < nm; i++)
			fprintf(f, "%s[%" PRIu64 ",%" PRIu64 "]", i ? "," : "", ids[i], cnt[i]);
		fputs("],\"least\":[", f);
		for (size_t i = 0; i < nl; i++)
			fprintf(f, "%s[%" PRIu64 ",%" PRIu64 "]", i ? "," : "", ids[top + 1 + i],
				cnt[top + 1 + i]);
		fputs("],", f);
	} else {
		struct dist_row *asc = calloc(nrows, sizeof(*asc));
		for (size_t i = 0; asc && i < nrows; i++)
			asc[i] = rows[nrows - 1 - i];
		threadhist_rows(asc ? asc : rows, nrows, o, f);
		free(asc);
		fprintf(f, "\nthreads %" PRIu64 " (ids 0..%" PRIu64 ")  min %" PRIu64 "  max %" PRIu64
			"  mean %.3f  stddev %.3f  max/mean %.2f\n", h.n, h.n - 1, min, max, mean, sd,
			mean > 0 ? (double)max / mean : 0);
		fprintf(f, "executions %.0f of %" PRIu64 " threads launched (instrumented kernels)\n",
			sum, probed_launch_threads(d));
		fprintf(f, "most loaded: ");
		for (size_t i = 0; i < nm; i++)
			fprintf(f, "%s%" PRIu64 "=%" PRIu64, i ? " " : "", ids[i], cnt[i]);
		fprintf(f, "\nleast loaded:");
		for (size_t i = 0; i < nl; i++)
			fprintf(f, " %" PRIu64 "=%" PRIu64, ids[top + 1 + i], cnt[top + 1 + i]);
		fputc('\n', f);
		if (h.ngroups >= TH_GROUPS || h.nthreads >= TH_THREADS)
			fprintf(f, "note: thread ids past %u (or, in blocks that are not whole warps, "
				"past %u) share the last slot\n", TH_GROUPS * 32 - 1, TH_THREADS - 1);
	}
	free(ids), free(cnt), free(rows), free(h.groups), free(h.threads);
}

/* The report's distribution for the metrics endpoint: (executions, threads) rows, most
 * executions first; NULL when nothing was recorded. */
struct tool_th_row *tool_threadhist_rows(const struct tool_data *d, size_t *n)
{
	struct thist h;
	size_t nrows = 0;
	struct dist_row *rows = th_load(d, &h) == 0 ? th_dist(&h, &nrows) : NULL;
	struct tool_th_row *out = rows && nrows ? calloc(nrows, sizeof(*out)) : NULL;
	for (size_t i = 0; out && i < nrows; i++)
		out[i] = (struct tool_th_row){rows[i].executions, rows[i].threads};
	*n = out ? nrows : 0;
	free(rows), free(h.groups), free(h.threads);
	return out;
}

/* ---- launchlate ----------------------------------------------------------------------------- */
#define LL_LAUNCHES 1024

/* launches: key = kernel id; starts: kernel id * LL_LAUNCHES + the launch's number */
const struct tool_kernel_key tool_keys_launchlate[] = {
	{"launches", 1, 0}, {"starts", LL_LAUNCHES, 0}, {NULL, 0, 0}};

/* The GPU starts of kernel id, sorted (launch order on one stream = start order). */
static size_t gpu_starts(const struct tool_map *m, uint32_t id, uint64_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < m->count; i++) {
		uint32_t k = key_at(m, i);
		if (k / LL_LAUNCHES == id && val_at(m, i, 0))
			out[n++] = val_at(m, i, 0);
	}
	qsort(out, n, sizeof(*out), cmp_u64);
	return n;
}

/* Latencies of a kernel's launches, over every GPU. */
struct ll_acc {
	uint64_t slots[64], total;
	size_t n, neg;
};

/* One GPU's launches of k: the GPU starts of one context's snapshot of `starts`, joined in
 * order with the launch calls made on that context's device (dev < 0, a trace that does not
 * say: all of them), converted with that device's clock. */
static void launchlate_join(const struct tool_data *d, const struct tool_kernel *k,
			    const struct tool_map *s, int dev, struct ll_acc *a)
{
	uint64_t starts[LL_LAUNCHES];
	size_t ns = gpu_starts(s, k->id, starts), nh = 0;
	uint64_t *host = malloc((k->nlaunch + 1) * sizeof(*host));
	if (!host)
		return;
	for (size_t i = 0; i < k->nlaunch; i++)
		if (dev < 0 || k->launch_dev[i] == (uint32_t)dev)
			host[nh++] = k->launch_ns[i];
	qsort(host, nh, sizeof(*host), cmp_u64);
	uint32_t clock_dev = dev < 0 ? k->device : (uint32_t)dev;
	for (size_t i = 0; i < ns && i < nh; i++) {
		uint64_t g = tool_gpu_to_host(d, clock_dev, starts[i]);
		uint64_t lat = g > host[i] ? g - host[i] : 0;
		a->neg += g <= host[i];
		a->total += lat;
		a->n++;
		int b = 0;
		while (b < 63 && (lat >> (b + 1)))
			b++;
		a->slots[b]++;
	}
	free(host);
}

/* Every GPU's launches of k joined (the report and the metrics endpoint read the same). */
static void launchlate_acc(const struct tool_data *d, const struct tool_kernel *k, struct ll_acc *a)
{
	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < d->nsnaps; i++) {
		const struct tool_map *s = &d->snaps[i];
		if (s->name && !strcmp(s->name, "starts") && map_ok(s, 8))
			launchlate_join(d, k, s, tool_ctx_device(d, s->ctx), a);
	}
}

void tool_launchlate_latencies(const struct tool_data *d, const struct tool_kernel *k,
			       uint64_t slots[64], uint64_t *n, uint64_t *total_ns)
{
	struct ll_acc a;
	const struct tool_map *m = tool_map_by_name(d, "starts");
	if (!m || !map_ok(m, 8) || !k->id || !k->nlaunch) {
		memset(slots, 0, 64 * sizeof(*slots));
		*n = *total_ns = 0;
		return;
	}
	launchlate_acc(d, k, &a);
	memcpy(slots, a.slots, sizeof(a.slots));
	*n = a.n;
	*total_ns = a.total;
}

static void launchlate_kernel(const struct tool_data *d, const struct tool_kernel *k,
			      const struct tool_opts *o, FILE *f, int *first)
{
	struct ll_acc a;
	launchlate_acc(d, k, &a);
	size_t n = a.n, neg = a.neg;
	uint64_t total = a.total, *slots = a.slots;
	char sn[64];
	if (o->json) {
		fprintf(f, "%s{\"name\":", *first ? "" : ",");
		tool_json_string(f, k->name);
		fprintf(f, ",\"launches\":%" PRIu64 ",\"samples\":%zu,\"mean_ns\":%" PRIu64
			",\"log2_ns\":[", k->launches, n, n ? total / n : 0);
		for (int i = 0; i < 64; i++)
			fprintf(f, "%s%" PRIu64, i ? "," : "", slots[i]);
		fputs("]}", f);
	} else {
		fprintf(f, "\nkernel = %s  (%zu samples of %" PRIu64 " launches, mean %.1f us%s)\n",
			tool_short_name(k->name, sn, sizeof(sn)), n, k->launches,
			n ? (double)total / (double)n / 1e3 : 0.0,
			neg ? ", some GPU starts before the call: clock uncertainty" : "");
		tool_log2_hist(f, "nsecs", slots, 64);
	}
	*first = 0;
}

void tool_report_launchlate(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	const struct tool_map *m = tool_map_by_name(d, "starts");
	const struct tool_map *lost = tool_map_by_name(d, "lost");
	int first = 1;
	if (o->json)
		fputs("\"tool\":\"launchlate\",\"kernels\":[", f);
	else
		fprintf(f, "launch call -> GPU start latency, per kernel%s\n",
			d->nclocks ? "" : " (no CLOCK record: GPU times taken as host times)");
	for (size_t i = 0; m && map_ok(m, 8) && i < d->nkernels; i++)
		if (d->kernels[i].id && d->kernels[i].nlaunch)
			launchlate_kernel(d, &d->kernels[i], o, f, &first);
	uint64_t nlost = lost && map_ok(lost, 8) ? tool_map_u64(lost, 0, 0) : 0;
	if (o->json)
		fprintf(f, "],\"not_kept\":%" PRIu64 ",", nlost);
	else if (nlost)
		fprintf(f, "\n%" PRIu64 " launches not kept (over 1024 per kernel or kernel id >= 256)\n",
			nlost);
}

/* ---- memtrace ------------------------------------------------------------------------------- */
/* The probe's per-SM map `counts` (summed over the SMs), key (kernel % 64) * 8 + space, value
 * {u64 accesses[op - 1][log2 size] (4 x 6), s64 waste[op - 1] (4), padding}.  PTX access
 * sizes are powers of two, so bytes = accesses << log2 size; the 32-byte sectors the warps'
 * accesses touched = (bytes + waste) / 32 (waste: the sectors' bytes beyond those accessed). */
#define MT_KERNELS 64
#define MT_SPACES 8
#define MT_OPS 4
#define MT_SIZES 6

const struct tool_kernel_key tool_keys_memtrace[] = {{"counts", MT_SPACES, MT_KERNELS},
						     {NULL, 0, 0}};

static const char *const space_names[MT_SPACES] = {"generic", "global", "shared", "local",
						   "const", "param", "space6", "space7"};
static const char *const op_names[MT_OPS] = {"load", "store", "atomic", "reduce"};

static void memtrace_kernel(const struct tool_data *d, const struct tool_kernel *k,
			    const struct tool_opts *o, FILE *f, int *first)
{
	const struct tool_map *a = tool_map_by_name(d, "counts");
	uint32_t kk = k->id % MT_KERNELS;
	char sn[64];
	uint64_t gbytes = 0, gacc = 0, gsec = 0, sizes[MT_SIZES] = {0};
	if (o->json) {
		fprintf(f, "%s{\"name\":", *first ? "" : ",");
		tool_json_string(f, k->name);
		fputs(",\"traffic\":[", f);
	} else {
		fprintf(f, "\nkernel = %s\n%10s %8s %16s %14s %10s\n", tool_short_name(k->name, sn,
			sizeof(sn)), "SPACE", "OP", "BYTES", "ACCESSES", "B/ACCESS");
	}
	int row = 0;
	for (uint32_t sp = 0; sp < MT_SPACES; sp++)
		for (uint32_t op = 0; op < MT_OPS; op++) {
			uint32_t key = kk * MT_SPACES + sp;
			uint64_t nb = 0, na = 0;
			for (uint32_t z = 0; z < MT_SIZES; z++) {
				uint64_t n = tool_map_u64(a, key, op * MT_SIZES + z);
				na += n;
				nb += n << z;
				sizes[z] += n;
			}
			if (!na)
				continue;
			if (sp == CUBPF_SPACE_GLOBAL || sp == CUBPF_SPACE_GENERIC) {
				gbytes += nb;
				gacc += na;
				gsec += (nb + tool_map_u64(a, key, MT_OPS * MT_SIZES + op)) / 32;
			}
			if (o->json)
				fprintf(f, "%s{\"space\":\"%s\",\"op\":\"%s\",\"bytes\":%" PRIu64
					",\"accesses\":%" PRIu64 "}", row ? "," : "", space_names[sp],
					op_names[op], nb, na);
			else
				fprintf(f, "%10s %8s %16" PRIu64 " %14" PRIu64 " %10.1f\n", space_names[sp],
					op_names[op], nb, na, (double)nb / (double)na);
			row++;
		}
	uint64_t ideal = (gbytes + 31) / 32;
	if (o->json) {
		fputs("],\"size_log2\":[", f);
		for (int i = 0; i < MT_SIZES; i++)
			fprintf(f, "%s%" PRIu64, i ? "," : "", sizes[i]);
		fprintf(f, "],\"global_bytes\":%" PRIu64 ",\"global_accesses\":%" PRIu64
			",\"ideal_sectors\":%" PRIu64 ",\"sectors\":%" PRIu64 "}", gbytes, gacc, ideal,
			gsec);
	} else {
		fprintf(f, "access sizes:\n");
		tool_log2_hist(f, "bytes", sizes, MT_SIZES);
		fprintf(f, "coalescing (global + generic): %" PRIu64 " bytes in %" PRIu64
			" thread accesses; 32-byte sectors touched %" PRIu64 " (counted per warp "
			"access), ideal %" PRIu64 ": %.1f%% efficiency, %.1f bytes used per sector\n",
			gbytes, gacc, gsec, ideal, gsec ? 100.0 * (double)ideal / (double)gsec : 0.0,
			gsec ? (double)gbytes / (double)gsec : 0.0);
	}
	*first = 0;
}

void tool_report_memtrace(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	int first = 1;
	if (o->json)
		fputs("\"tool\":\"memtrace\",\"kernels\":[", f);
	else
		fprintf(f, "memory traffic per kernel (thread accesses, before caches)\n");
	for (size_t i = 0; i < d->nkernels; i++)
		if (d->kernels[i].id)
			memtrace_kernel(d, &d->kernels[i], o, f, &first);
	if (o->json)
		fputs("],", f);
}

/* ---- kernelretsnoop ------------------------------------------------------------------------- */
static int cmp_warp_lag(const void *a, const void *b)
{
	const struct tool_warp *x = *(struct tool_warp *const *)a, *y = *(struct tool_warp *const *)b;
	uint64_t lx = x->last - x->first, ly = y->last - y->first;
	return lx > ly ? -1 : lx < ly;
}

static int cmp_warp_block(const void *a, const void *b)
{
	const struct tool_warp *x = *(struct tool_warp *const *)a, *y = *(struct tool_warp *const *)b;
	if (x->kernel_id != y->kernel_id)
		return x->kernel_id < y->kernel_id ? -1 : 1;
	for (int i = 2; i >= 0; i--)
		if (x->ctaid[i] != y->ctaid[i])
			return x->ctaid[i] < y->ctaid[i] ? -1 : 1;
	return 0;
}

struct warp_lag {
	const struct tool_warp *w;
	uint64_t lag; /* last exit of the warp minus the first exit of its block */
};

static int cmp_lag(const void *a, const void *b)
{
	uint64_t x = ((const struct warp_lag *)a)->lag, y = ((const struct warp_lag *)b)->lag;
	return x > y ? -1 : x < y;
}

/* Lanes of a warp usually leave together (the compiler reconverges them before the exit), so a
 * slow lane shows as a slow warp: warps ranked by how far their last exit trails the first exit
 * of their block.  The records do not tell launches of a kernel apart, so the figure is
 * meaningful for kernels launched once in the traced interval. */
static void report_slow_warps(struct tool_warp **w, size_t n, const struct tool_data *d,
			      const struct tool_opts *o, FILE *f)
{
	struct warp_lag *l = calloc(n + 1, sizeof(*l));
	if (!l)
		return;
	qsort(w, n, sizeof(*w), cmp_warp_block);
	for (size_t i = 0, j; i < n; i = j) {
		uint64_t first = w[i]->first;
		for (j = i; j < n && cmp_warp_block(&w[i], &w[j]) == 0; j++)
			first = w[j]->first < first ? w[j]->first : first;
		for (size_t k = i; k < j; k++)
			l[k] = (struct warp_lag){w[k], w[k]->last - first};
	}
	qsort(l, n, sizeof(*l), cmp_lag);
	size_t top = (size_t)o->top < n ? (size_t)o->top : n;
	char sn[40];
	if (o->json)
		fputs("\"slowest_in_block\":[", f);
	else
		fprintf(f, "\nslowest warps (last exit behind the first exit of their block):\n"
			"%-28s %-16s %-8s %-14s %12s\n", "KERNEL", "BLOCK", "WARP", "LAST_LANE", "LAG_ns");
	for (size_t i = 0; i < top; i++) {
		const struct tool_warp *x = l[i].w;
		const struct tool_kernel *k = tool_kernel_by_id(d, x->kernel_id);
		const char *name = k ? k->name : "?";
		if (o->json) {
			fprintf(f, "%s{\"kernel\":", i ? "," : "");
			tool_json_string(f, name);
			fprintf(f, ",\"block\":[%u,%u,%u],\"warp\":%u,\"lag_ns\":%" PRIu64 "}",
				x->ctaid[0], x->ctaid[1], x->ctaid[2], x->warp, l[i].lag);
		} else {
			char blk[48], thr[48];
			snprintf(blk, sizeof(blk), "(%u,%u,%u)", x->ctaid[0], x->ctaid[1], x->ctaid[2]);
			snprintf(thr, sizeof(thr), "(%u,%u,%u)", x->slow_tid[0], x->slow_tid[1],
				 x->slow_tid[2]);
			fprintf(f, "%-28s %-16s %-8u %-14s %12" PRIu64 "\n",
				tool_short_name(name, sn, sizeof(sn)), blk, x->warp, thr, l[i].lag);
		}
	}
	if (o->json)
		fputs("],", f);
	free(l);
}

void tool_report_kernelretsnoop(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	uint64_t slots[64] = {0};
	struct tool_warp **w = calloc(d->nwarps + 1, sizeof(*w));
	size_t n = 0;
	for (size_t i = 0; w && i < d->nwarps_cap; i++)
		if (d->warps[i].used) {
			w[n++] = &d->warps[i];
			uint64_t lag = d->warps[i].last - d->warps[i].first;
			int s = 0;
			while (s < 63 && (lag >> (s + 1)))
				s++;
			slots[s]++;
		}
	if (w)
		qsort(w, n, sizeof(*w), cmp_warp_lag);
	size_t top = (size_t)o->top < n ? (size_t)o->top : n;
	char sn[40];
	if (o->json) {
		fprintf(f, "\"tool\":\"kernelretsnoop\",\"exits\":%" PRIu64 ",\"warps\":%zu,"
			"\"spread_log2_ns\":[", d->probes, n);
		for (int i = 0; i < 64; i++)
			fprintf(f, "%s%" PRIu64, i ? "," : "", slots[i]);
		fputs("],\"slowest\":[", f);
	} else {
		fprintf(f, "%" PRIu64 " thread exits in %zu warps\nwarp spread (last exit - first exit):\n",
			d->probes, n);
		tool_log2_hist(f, "nsecs", slots, 64);
		fprintf(f, "\nslowest lanes (behind their warp's first exit):\n%-28s %-16s %-14s %12s\n",
			"KERNEL", "BLOCK", "THREAD", "LAG_ns");
	}
	for (size_t i = 0; i < top; i++) {
		const struct tool_kernel *k = tool_kernel_by_id(d, w[i]->kernel_id);
		const char *name = k ? k->name : "?";
		char blk[48], thr[48];
		snprintf(blk, sizeof(blk), "(%u,%u,%u)", w[i]->ctaid[0], w[i]->ctaid[1], w[i]->ctaid[2]);
		snprintf(thr, sizeof(thr), "(%u,%u,%u)", w[i]->slow_tid[0], w[i]->slow_tid[1],
			 w[i]->slow_tid[2]);
		if (o->json) {
			fprintf(f, "%s{\"kernel\":", i ? "," : "");
			tool_json_string(f, name);
			fprintf(f, ",\"block\":[%u,%u,%u],\"thread\":[%u,%u,%u],\"lag_ns\":%" PRIu64 "}",
				w[i]->ctaid[0], w[i]->ctaid[1], w[i]->ctaid[2], w[i]->slow_tid[0],
				w[i]->slow_tid[1], w[i]->slow_tid[2], w[i]->last - w[i]->first);
		} else {
			fprintf(f, "%-28s %-16s %-14s %12" PRIu64 "\n", tool_short_name(name, sn, sizeof(sn)),
				blk, thr, w[i]->last - w[i]->first);
		}
	}
	if (o->json)
		fputs("],", f);
	if (w)
		report_slow_warps(w, n, d, o, f);
	free(w);
}

/* ---- -p: every map as `bpftool map dump` prints it ------------------------------------------ */
static void hex_bytes(FILE *f, const uint8_t *p, size_t n, int json)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, json ? "%s\"0x%02x\"" : "%s%02x", i ? (json ? "," : " ") : "", p[i]);
}

void tool_report_maps(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	if (o->json)
		fputs("\"maps\":[", f);
	for (size_t i = 0; i < d->nmaps; i++) {
		const struct tool_map *m = &d->maps[i];
		size_t pair = (size_t)m->key_size + m->value_size;
		if (o->json) {
			fprintf(f, "%s{\"name\":", i ? "," : "");
			tool_json_string(f, m->name);
			fprintf(f, ",\"prog\":%u,\"map\":%u,\"type\":%u,\"entries\":[", m->prog, m->map,
				m->type);
		} else {
			char t[TOOL_TEXT_MAX];
			fprintf(f, "%smap %s (program %u, map %u, type %u, key %u B, value %u B; "
				"non-zero entries):\n", i ? "\n" : "", tool_text(m->name, t, sizeof(t)),
				m->prog, m->map, m->type, m->key_size, m->value_size);
		}
		uint32_t n = tool_map_copies(m), vs = m->value_size / n;
		for (size_t j = 0; j < m->count; j++) {
			const uint8_t *p = m->kv + j * pair;
			fputs(o->json ? (j ? ",{\"key\":[" : "{\"key\":[") : "key: ", f);
			hex_bytes(f, p, m->key_size, o->json);
			if (n == 1) {
				fputs(o->json ? "],\"value\":[" : "  value: ", f);
				hex_bytes(f, p + m->key_size, m->value_size, o->json);
				fputs(o->json ? "]}" : "\n", f);
				continue;
			}
			/* per-SM maps: the SM copies that hold something, as bpftool shows per-CPU
			 * values */
			fputs(o->json ? "],\"values\":[" : "\n", f);
			int any = 0;
			for (uint32_t s = 0; s < n; s++) {
				const uint8_t *v = p + m->key_size + (size_t)s * vs;
				int zero = 1;
				for (uint32_t b = 0; b < vs && zero; b++)
					zero = !v[b];
				if (zero)
					continue;
				/* several GPUs (contexts): their copies one after the other */
				uint32_t nc = m->contexts > 1 ? m->contexts : 1, per = n / nc;
				if (o->json && nc > 1)
					fprintf(f, "%s{\"context\":%u,\"sm\":%u,\"value\":[", any ? "," : "",
						s / per, per > 1 ? s % per : 0);
				else if (o->json)
					fprintf(f, "%s{\"sm\":%u,\"value\":[", any ? "," : "", s);
				else if (nc > 1 && per > 1)
					fprintf(f, "  value (context %u, SM %u): ", s / per, s % per);
				else if (nc > 1)
					fprintf(f, "  value (context %u): ", s);
				else
					fprintf(f, "  value (SM %u): ", s);
				hex_bytes(f, v, vs, o->json);
				fputs(o->json ? "]}" : "\n", f);
				any = 1;
			}
			if (o->json)
				fputs("]}", f);
		}
		if (o->json)
			fputs("]}", f);
		else
			fprintf(f, "Found %zu element%s\n", m->count, m->count == 1 ? "" : "s");
	}
	if (o->json) {
		fputs("],\"host_maps\":[", f);
		for (size_t i = 0; i < d->nmaplines; i++) {
			fputs(i ? "," : "", f);
			tool_json_string(f, d->maplines[i]);
		}
		fputs("],", f);
	} else {
		for (size_t i = 0; i < d->nmaplines; i++) { /* HOST_MAP records, as the shim logs them */
			tool_text_put(f, d->maplines[i], 0);
			fputc('\n', f);
		}
	}
}
