/* tools/tool_reports.c: the formatters of the bundled tools (what each prints at -i and exit). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

void tool_report_kcount(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_threadhist(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_launchlate(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_memtrace(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_kernelretsnoop(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_maps(const struct tool_data *d, const struct tool_opts *o, FILE *f);

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

static uint64_t val_at(const struct tool_map *m, size_t i, uint32_t word)
{
	uint64_t v;
	memcpy(&v, m->kv + i * ((size_t)m->key_size + m->value_size) + m->key_size + word * 8u, 8);
	return v;
}

static int map_ok(const struct tool_map *m, uint32_t min_value)
{
	return m && m->key_size == 4 && m->value_size >= min_value;
}

/* ---- kcount --------------------------------------------------------------------------------- */
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
			t0 = tool_map_u64(m, k->id, 2);
			t1 = tool_map_u64(m, k->id, 3);
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
struct tcount {
	uint32_t id;
	uint64_t n;
};

static int cmp_tcount_desc(const void *a, const void *b)
{
	const struct tcount *x = a, *y = b;
	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Threads 0..max id, zeros included (a thread below the highest that never ran is idle). */
static struct tcount *thread_counts(const struct tool_map *m, size_t *n)
{
	uint32_t max = 0;
	for (size_t i = 0; i < m->count; i++)
		if (val_at(m, i, 0) && key_at(m, i) > max)
			max = key_at(m, i);
	struct tcount *t = calloc((size_t)max + 1, sizeof(*t));
	if (!t)
		return NULL;
	for (uint32_t i = 0; i <= max; i++)
		t[i].id = i;
	for (size_t i = 0; i < m->count; i++)
		t[key_at(m, i)].n += val_at(m, i, 0);
	*n = (size_t)max + 1;
	return t;
}

static void threadhist_dist(const struct tcount *t, size_t n, const struct tool_opts *o, FILE *f)
{
	/* sorted by count descending: runs of equal counts are the distribution's rows */
	if (!o->json)
		fprintf(f, "%12s  %12s\n", "EXECUTIONS", "THREADS");
	int first = 1;
	for (size_t i = n; i > 0;) {
		size_t j = i;
		while (j > 0 && t[j - 1].n == t[i - 1].n)
			j--;
		if (o->json)
			fprintf(f, "%s{\"executions\":%" PRIu64 ",\"threads\":%zu}", first ? "" : ",",
				t[i - 1].n, i - j);
		else
			fprintf(f, "%12" PRIu64 "  %12zu\n", t[i - 1].n, i - j);
		first = 0;
		i = j;
	}
}

void tool_report_threadhist(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	const struct tool_map *m = tool_map_by_name(d, "executions");
	size_t n = 0;
	struct tcount *t = map_ok(m, 8) && m->count ? thread_counts(m, &n) : NULL;
	if (o->json)
		fputs("\"tool\":\"threadhist\",", f);
	if (!t) {
		fputs(o->json ? "\"threads\":0," : "no thread executions recorded\n", f);
		return;
	}
	double sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)t[i].n;
	double mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		sq += ((double)t[i].n - mean) * ((double)t[i].n - mean);
	double sd = sqrt(sq / (double)n);
	qsort(t, n, sizeof(*t), cmp_tcount_desc);
	size_t top = (size_t)o->top < n ? (size_t)o->top : n;
	if (o->json) {
		fprintf(f, "\"threads\":%zu,\"min\":%" PRIu64 ",\"max\":%" PRIu64 ",\"mean\":%.3f,"
			"\"stddev\":%.3f,\"distribution\":[", n, t[n - 1].n, t[0].n, mean, sd);
		threadhist_dist(t, n, o, f);
		fputs("],\"most\":[", f);
		for (size_t i = 0; i < top; i++)
			fprintf(f, "%s[%u,%" PRIu64 "]", i ? "," : "", t[i].id, t[i].n);
		fputs("],\"least\":[", f);
		for (size_t i = 0; i < top; i++)
			fprintf(f, "%s[%u,%" PRIu64 "]", i ? "," : "", t[n - 1 - i].id, t[n - 1 - i].n);
		fputs("],", f);
	} else {
		threadhist_dist(t, n, o, f);
		fprintf(f, "\nthreads %zu (ids 0..%zu)  min %" PRIu64 "  max %" PRIu64
			"  mean %.3f  stddev %.3f  max/mean %.2f\n", n, n - 1, t[n - 1].n, t[0].n, mean,
			sd, mean > 0 ? (double)t[0].n / mean : 0);
		fprintf(f, "most loaded: ");
		for (size_t i = 0; i < top; i++)
			fprintf(f, "%s%u=%" PRIu64, i ? " " : "", t[i].id, t[i].n);
		fprintf(f, "\nleast loaded:");
		for (size_t i = 0; i < top; i++)
			fprintf(f, " %u=%" PRIu64, t[n - 1 - i].id, t[n - 1 - i].n);
		fputc('\n', f);
		if (n >= (1u << 20))
			fprintf(f, "note: threads past id %u share the last slot\n", (1u << 20) - 1);
	}
	free(t);
}

/* ---- launchlate ----------------------------------------------------------------------------- */
#define LL_LAUNCHES 1024

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

static void launchlate_kernel(const struct tool_data *d, const struct tool_kernel *k,
			      const struct tool_map *m, const struct tool_opts *o, FILE *f, int *first)
{
	uint64_t starts[LL_LAUNCHES], slots[64] = {0};
	size_t ns = gpu_starts(m, k->id, starts);
	uint64_t *host = malloc((k->nlaunch + 1) * sizeof(*host));
	if (!host)
		return;
	memcpy(host, k->launch_ns, k->nlaunch * sizeof(*host));
	qsort(host, k->nlaunch, sizeof(*host), cmp_u64);
	size_t n = ns < k->nlaunch ? ns : k->nlaunch, neg = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t g = tool_gpu_to_host(d, k->device, starts[i]);
		uint64_t lat = g > host[i] ? g - host[i] : 0;
		neg += g <= host[i];
		total += lat;
		int s = 0;
		while (s < 63 && (lat >> (s + 1)))
			s++;
		slots[s]++;
	}
	free(host);
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
			launchlate_kernel(d, &d->kernels[i], m, o, f, &first);
	uint64_t nlost = lost && map_ok(lost, 8) ? tool_map_u64(lost, 0, 0) : 0;
	if (o->json)
		fprintf(f, "],\"not_kept\":%" PRIu64 ",", nlost);
	else if (nlost)
		fprintf(f, "\n%" PRIu64 " launches not kept (over 1024 per kernel or kernel id >= 256)\n",
			nlost);
}

/* ---- memtrace ------------------------------------------------------------------------------- */
#define MT_KERNELS 64
#define MT_SLOTS 64 /* 8 spaces x 8 ops */
#define MT_SIZES 16

static const char *const space_names[8] = {"generic", "global", "shared", "local", "const",
					   "param", "space6", "space7"};
static const char *const op_names[8] = {"op0", "load", "store", "atomic", "reduce", "op5", "op6",
					"op7"};

static void memtrace_kernel(const struct tool_data *d, const struct tool_kernel *k,
			    const struct tool_opts *o, FILE *f, int *first)
{
	const struct tool_map *b = tool_map_by_name(d, "bytes");
	const struct tool_map *a = tool_map_by_name(d, "accesses");
	const struct tool_map *s = tool_map_by_name(d, "size_log2");
	uint32_t base = (k->id % MT_KERNELS) * MT_SLOTS;
	char sn[64];
	uint64_t gbytes = 0, gacc = 0;
	if (o->json) {
		fprintf(f, "%s{\"name\":", *first ? "" : ",");
		tool_json_string(f, k->name);
		fputs(",\"traffic\":[", f);
	} else {
		fprintf(f, "\nkernel = %s\n%10s %8s %16s %14s %10s\n", tool_short_name(k->name, sn,
			sizeof(sn)), "SPACE", "OP", "BYTES", "ACCESSES", "B/ACCESS");
	}
	int row = 0;
	for (uint32_t i = 0; i < MT_SLOTS; i++) {
		uint64_t nb = tool_map_u64(b, base + i, 0), na = tool_map_u64(a, base + i, 0);
		if (!nb && !na)
			continue;
		if (i / 8 == 1 || i / 8 == 0) {
			gbytes += nb;
			gacc += na;
		}
		if (o->json)
			fprintf(f, "%s{\"space\":\"%s\",\"op\":\"%s\",\"bytes\":%" PRIu64
				",\"accesses\":%" PRIu64 "}", row ? "," : "", space_names[i / 8],
				op_names[i % 8], nb, na);
		else
			fprintf(f, "%10s %8s %16" PRIu64 " %14" PRIu64 " %10.1f\n", space_names[i / 8],
				op_names[i % 8], nb, na, na ? (double)nb / (double)na : 0.0);
		row++;
	}
	uint64_t sizes[MT_SIZES] = {0};
	for (uint32_t i = 0; i < MT_SIZES; i++)
		sizes[i] = tool_map_u64(s, (k->id % MT_KERNELS) * MT_SIZES + i, 0);
	if (o->json) {
		fputs("],\"size_log2\":[", f);
		for (int i = 0; i < MT_SIZES; i++)
			fprintf(f, "%s%" PRIu64, i ? "," : "", sizes[i]);
		fprintf(f, "],\"global_bytes\":%" PRIu64 ",\"global_accesses\":%" PRIu64
			",\"ideal_sectors\":%" PRIu64 "}", gbytes, gacc, (gbytes + 31) / 32);
	} else {
		fprintf(f, "access sizes:\n");
		tool_log2_hist(f, "bytes", sizes, MT_SIZES);
		fprintf(f, "coalescing (global + generic): %" PRIu64 " bytes in %" PRIu64
			" thread accesses; ideal 32-byte sectors %" PRIu64 " (%.1f thread accesses per"
			" sector); sectors actually touched are not measured\n", gbytes, gacc,
			(gbytes + 31) / 32, gbytes ? (double)gacc / (double)((gbytes + 31) / 32) : 0.0);
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
			fprintf(f, "%smap %s (program %u, map %u, type %u, key %u B, value %u B; "
				"non-zero entries):\n", i ? "\n" : "", m->name, m->prog, m->map, m->type,
				m->key_size, m->value_size);
		}
		for (size_t j = 0; j < m->count; j++) {
			const uint8_t *p = m->kv + j * pair;
			fputs(o->json ? (j ? ",{\"key\":[" : "{\"key\":[") : "key: ", f);
			hex_bytes(f, p, m->key_size, o->json);
			fputs(o->json ? "],\"value\":[" : "  value: ", f);
			hex_bytes(f, p + m->key_size, m->value_size, o->json);
			fputs(o->json ? "]}" : "\n", f);
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
		for (size_t i = 0; i < d->nmaplines; i++)
			fprintf(f, "%s\n", d->maplines[i]);
	}
}
