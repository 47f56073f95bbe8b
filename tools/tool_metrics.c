/* tools/tool_metrics.c: a run's maps and health in the Prometheus text exposition format
 * (version 0.0.4), for `cubpf run --metrics` (tools/cmd_run_metrics.c serves it).
 *
 * Naming lives here, beside the reports (tools/tool_reports.c), because the tools already say
 * how their maps read: kcount's `kstats` holds runs and threads per kernel id, launchlate's
 * `starts` GPU starts to join with launch calls, memtrace's `counts` accesses per space,
 * operation and size.  The metrics are the reports' numbers, read from the same struct
 * tool_data, so that a scrape after the program's last snapshot equals the report at exit.
 *
 * Labels: `pid` (one series set per process of the run), `device` (the kernel's GPU), `kernel`
 * (the readable name, as the reports print it) and `name` (the mangled name, which keeps two
 * instantiations of one template apart).  Bounded: the first TOOL_METRICS_KERNELS kernels of a
 * process, in the order the trace names them (stable while the trace grows, so a counter never
 * moves from one series to another), get their own series; the rest are summed into one,
 * kernel="_other".  Counters only grow as the maps do: the probes only add. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"
#include "vm/vm.h"

#define MT_KERNELS 64 /* memtrace's layout (tools/probes/memtrace.bpf.c) */
#define MT_SPACES 8
#define MT_OPS 4
#define MT_SIZES 6

/* Families, label escaping and the kernel labels are vm/metrics.c's, the formatter the shim's
 * endpoint (CUBPF_METRICS) uses too: one spelling of every shared series. */
static void family(FILE *f, const char *name, const char *type, const char *help)
{
	vm_metrics_family(f, name, type, help);
}

/* {pid="..",device="..",kernel="..",name=".."; the caller adds its labels and the brace. */
static void kernel_labels(FILE *f, uint32_t pid, const struct tool_kernel *k)
{
	fprintf(f, "{pid=\"%u\",", pid);
	if (!k) {
		fputs("device=\"any\",kernel=\"_other\",name=\"_other\"", f);
		return;
	}
	fprintf(f, "device=\"%u\",", k->device);
	vm_metrics_kernel_labels(f, k->name);
}

static int kernel_listed(const struct tool_kernel *k)
{
	return k->launches || k->id;
}

/* One value per kernel of every process, summed into "_other" past the cap. */
typedef uint64_t (*kernel_value)(const struct tool_data *d, const struct tool_kernel *k);

static void per_kernel(FILE *f, const char *name, const struct tool_metrics_proc *p, size_t n,
		       kernel_value val)
{
	for (size_t i = 0; i < n; i++) {
		const struct tool_data *d = p[i].d;
		uint64_t other = 0;
		size_t named = 0;
		int folded = 0;
		for (size_t j = 0; j < d->nkernels; j++) {
			const struct tool_kernel *k = &d->kernels[j];
			if (!kernel_listed(k))
				continue;
			uint64_t v = val(d, k);
			if (named++ >= TOOL_METRICS_KERNELS) {
				other += v, folded = 1;
				continue;
			}
			fputs(name, f);
			kernel_labels(f, p[i].pid, k);
			fprintf(f, "} %" PRIu64 "\n", v);
		}
		if (folded) {
			fputs(name, f);
			kernel_labels(f, p[i].pid, NULL);
			fprintf(f, "} %" PRIu64 "\n", other);
		}
	}
}

/* ---- every run: launches from the trace's KERNEL records ------------------------------------ */

static uint64_t launches(const struct tool_data *d, const struct tool_kernel *k)
{
	(void)d;
	return k->launches;
}

static uint64_t threads(const struct tool_data *d, const struct tool_kernel *k)
{
	(void)d;
	return k->threads;
}

/* ---- kcount ----------------------------------------------------------------------------------- */

static uint64_t kstats_word(const struct tool_data *d, const struct tool_kernel *k, uint32_t w)
{
	const struct tool_map *m = tool_map_by_name(d, "kstats");
	return m && k->id && m->key_size == 4 ? tool_map_u64(m, k->id, w) : 0;
}

static uint64_t gpu_runs(const struct tool_data *d, const struct tool_kernel *k)
{
	return kstats_word(d, k, 0);
}

static uint64_t gpu_threads(const struct tool_data *d, const struct tool_kernel *k)
{
	return kstats_word(d, k, 1);
}

static void kcount(FILE *f, const struct tool_metrics_proc *p, size_t n)
{
	family(f, "cubpf_kcount_gpu_runs_total", "counter",
	       "kernel runs the kcount probe counted on the GPU (its kstats map)");
	per_kernel(f, "cubpf_kcount_gpu_runs_total", p, n, gpu_runs);
	family(f, "cubpf_kcount_gpu_threads_total", "counter",
	       "threads the kcount probe counted on the GPU (its kstats map)");
	per_kernel(f, "cubpf_kcount_gpu_threads_total", p, n, gpu_threads);
}

/* ---- launchlate: a Prometheus histogram per kernel ------------------------------------------- */

struct ll_hist {
	uint64_t slots[64], n, total;
};

static void ll_series(FILE *f, uint32_t pid, const struct tool_kernel *k, const struct ll_hist *h)
{
	static const char name[] = "cubpf_launchlate_latency_seconds";
	int top = 63;
	while (top > 0 && !h->slots[top])
		top--;
	uint64_t cum = 0;
	for (int b = 0; b <= top; b++) { /* slot b holds latencies below 2^(b+1) ns */
		cum += h->slots[b];
		fprintf(f, "%s_bucket", name);
		kernel_labels(f, pid, k);
		fprintf(f, ",le=\"%.9g\"} %" PRIu64 "\n", (double)(2ull << b) / 1e9, cum);
	}
	fprintf(f, "%s_bucket", name);
	kernel_labels(f, pid, k);
	fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n%s_sum", h->n, name);
	kernel_labels(f, pid, k);
	fprintf(f, "} %.9f\n%s_count", (double)h->total / 1e9, name);
	kernel_labels(f, pid, k);
	fprintf(f, "} %" PRIu64 "\n", h->n);
}

static void launchlate(FILE *f, const struct tool_metrics_proc *p, size_t n)
{
	family(f, "cubpf_launchlate_latency_seconds", "histogram",
	       "launch call to GPU start, per kernel (launchlate; log2 buckets)");
	for (size_t i = 0; i < n; i++) {
		struct ll_hist other = {{0}, 0, 0};
		size_t named = 0;
		for (size_t j = 0; j < p[i].d->nkernels; j++) {
			const struct tool_kernel *k = &p[i].d->kernels[j];
			struct ll_hist h;
			if (!kernel_listed(k))
				continue;
			tool_launchlate_latencies(p[i].d, k, h.slots, &h.n, &h.total);
			if (named++ < TOOL_METRICS_KERNELS) {
				if (h.n)
					ll_series(f, p[i].pid, k, &h);
				continue;
			}
			for (int b = 0; b < 64; b++)
				other.slots[b] += h.slots[b];
			other.n += h.n, other.total += h.total;
		}
		if (other.n)
			ll_series(f, p[i].pid, NULL, &other);
	}
}

/* ---- threadhist: executions per GPU thread ---------------------------------------------------
 * One histogram per process (threadhist counts by thread id over every kernel): an observation
 * per thread, its value the thread's executions.  Unlike launchlate's, a thread moves to a
 * higher bucket as it runs again, so lower buckets can shrink: read it as it is
 * (histogram_quantile over the series, not over rate()). */
static void threadhist(FILE *f, const struct tool_metrics_proc *p, size_t n)
{
	static const char name[] = "cubpf_threadhist_executions";
	family(f, name, "histogram", "executions per GPU thread id, over every instrumented kernel "
	       "(threadhist; log2 buckets, a distribution: buckets may shrink)");
	for (size_t i = 0; i < n; i++) {
		size_t nrows;
		struct tool_th_row *rows = tool_threadhist_rows(p[i].d, &nrows);
		uint64_t slots[65] = {0}, threads = 0, sum = 0;
		int top = 0;
		for (size_t r = 0; r < nrows; r++) { /* slot b: executions <= 2^b */
			int b = 0;
			while (b < 64 && (1ull << b) < rows[r].executions)
				b++;
			slots[b] += rows[r].threads;
			top = b > top ? b : top;
			threads += rows[r].threads;
			sum += rows[r].executions * rows[r].threads;
		}
		free(rows);
		if (!threads)
			continue;
		uint64_t cum = 0;
		for (int b = 0; b <= top && b < 64; b++) {
			cum += slots[b];
			fprintf(f, "%s_bucket{pid=\"%u\",le=\"%llu\"} %" PRIu64 "\n", name, p[i].pid,
				1ull << b, cum);
		}
		fprintf(f, "%s_bucket{pid=\"%u\",le=\"+Inf\"} %" PRIu64 "\n%s_sum{pid=\"%u\"} %" PRIu64
			"\n%s_count{pid=\"%u\"} %" PRIu64 "\n", name, p[i].pid, threads, name, p[i].pid,
			sum, name, p[i].pid, threads);
	}
}

/* ---- memtrace: bytes and accesses per kernel, space and operation ----------------------------- */

static const char *const mt_spaces[MT_SPACES] = {"generic", "global", "shared", "local",
						 "const", "param", "space6", "space7"};
static const char *const mt_ops[MT_OPS] = {"load", "store", "atomic", "reduce"};

struct mt_cell {
	uint64_t bytes[MT_SPACES][MT_OPS], accesses[MT_SPACES][MT_OPS];
};

static void mt_add(const struct tool_map *m, const struct tool_kernel *k, struct mt_cell *c)
{
	for (uint32_t sp = 0; sp < MT_SPACES; sp++)
		for (uint32_t op = 0; op < MT_OPS; op++)
			for (uint32_t z = 0; z < MT_SIZES; z++) {
				uint64_t a = tool_map_u64(m, (k->id % MT_KERNELS) * MT_SPACES + sp,
							  op * MT_SIZES + z);
				c->accesses[sp][op] += a;
				c->bytes[sp][op] += a << z;
			}
}

static void mt_series(FILE *f, uint32_t pid, const struct tool_kernel *k, const struct mt_cell *c,
		      int bytes)
{
	for (uint32_t sp = 0; sp < MT_SPACES; sp++)
		for (uint32_t op = 0; op < MT_OPS; op++) {
			if (!c->accesses[sp][op])
				continue;
			fputs(bytes ? "cubpf_memtrace_bytes_total" : "cubpf_memtrace_accesses_total", f);
			kernel_labels(f, pid, k);
			fprintf(f, ",space=\"%s\",op=\"%s\"} %" PRIu64 "\n", mt_spaces[sp], mt_ops[op],
				bytes ? c->bytes[sp][op] : c->accesses[sp][op]);
		}
}

static void memtrace_family(FILE *f, const struct tool_metrics_proc *p, size_t n, int bytes)
{
	family(f, bytes ? "cubpf_memtrace_bytes_total" : "cubpf_memtrace_accesses_total", "counter",
	       bytes ? "bytes thread accesses moved, per kernel, memory space and operation (memtrace)"
		     : "thread accesses, per kernel, memory space and operation (memtrace)");
	for (size_t i = 0; i < n; i++) {
		const struct tool_map *m = tool_map_by_name(p[i].d, "counts");
		struct mt_cell other;
		size_t named = 0;
		memset(&other, 0, sizeof(other));
		for (size_t j = 0; m && m->key_size == 4 && j < p[i].d->nkernels; j++) {
			const struct tool_kernel *k = &p[i].d->kernels[j];
			struct mt_cell c;
			if (!k->id)
				continue;
			memset(&c, 0, sizeof(c));
			mt_add(m, k, named++ < TOOL_METRICS_KERNELS ? &c : &other);
			mt_series(f, p[i].pid, k, &c, bytes);
		}
		mt_series(f, p[i].pid, NULL, &other, bytes);
	}
}

/* ---- cubpf's own health ---------------------------------------------------------------------- */

static size_t instrumented(const struct tool_data *d)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nkernels; i++)
		n += d->kernels[i].id != 0;
	return n;
}

static void health(FILE *f, const struct tool_metrics_proc *p, size_t n)
{
	family(f, "cubpf_processes", "gauge", "processes of the run with a trace");
	fprintf(f, "cubpf_processes %zu\n", n);
	family(f, "cubpf_kernels_instrumented", "gauge", "kernels that run with probes (kernel ids)");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "cubpf_kernels_instrumented{pid=\"%u\"} %zu\n", p[i].pid, instrumented(p[i].d));
	family(f, "cubpf_not_instrumented_total", "counter",
	       "module loads or probe programs refused: kernels run without probes (NOT_INSTRUMENTED)");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "cubpf_not_instrumented_total{pid=\"%u\"} %zu\n", p[i].pid, p[i].d->nnotes);
	family(f, "cubpf_dropped_records_total", "counter",
	       "events lost: writer (trace buffers full), ringbuf (device ring buffer full), spans "
	       "(kernel spans not measured)");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "cubpf_dropped_records_total{pid=\"%u\",source=\"writer\"} %" PRIu64 "\n"
			   "cubpf_dropped_records_total{pid=\"%u\",source=\"ringbuf\"} %" PRIu64 "\n"
			   "cubpf_dropped_records_total{pid=\"%u\",source=\"spans\"} %" PRIu64 "\n",
			p[i].pid, p[i].d->writer_drops, p[i].pid, p[i].d->rb_drops, p[i].pid,
			p[i].d->span_drops);
	family(f, "cubpf_trace_bytes", "gauge", "bytes of the process's trace file read so far (whole frames)");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "cubpf_trace_bytes{pid=\"%u\"} %" PRIu64 "\n", p[i].pid, p[i].trace_bytes);
	family(f, "cubpf_map_memory_bytes", "gauge", "memory the probes' maps take (MAP_MEMORY)");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "cubpf_map_memory_bytes{pid=\"%u\",kind=\"device\"} %" PRIu64 "\n"
			   "cubpf_map_memory_bytes{pid=\"%u\",kind=\"pinned\"} %" PRIu64 "\n",
			p[i].pid, p[i].d->device_bytes, p[i].pid, p[i].d->pinned_bytes);
}

/* ---- every map, whatever the tool: the generic series the shim's endpoint has too ------------
 * Each context's latest snapshot (device labelled), and the kernel ids' names to join them on. */
static void generic(FILE *f, const struct tool_metrics_proc *p, size_t n)
{
	family(f, "cubpf_kernel_info", "gauge", "cubpf's kernel ids and their kernels (join "
	       "cubpf_map_value on key where a map's key is a kernel id)");
	for (size_t i = 0; i < n; i++) {
		char labels[32];
		size_t named = 0;
		snprintf(labels, sizeof(labels), "pid=\"%u\"", p[i].pid);
		for (size_t j = 0; j < p[i].d->nkernels && named < TOOL_METRICS_KERNELS; j++)
			if (p[i].d->kernels[j].id && ++named)
				vm_metrics_kernel_info(f, labels, p[i].d->kernels[j].id,
						       p[i].d->kernels[j].name);
	}
	family(f, "cubpf_map_value", "gauge", "a map's value per key and word (u64 words, summed "
	       "over per-SM copies; non-zero ones)");
	for (size_t i = 0; i < n; i++) {
		char labels[32];
		snprintf(labels, sizeof(labels), "pid=\"%u\"", p[i].pid);
		for (size_t j = 0; j < p[i].d->nsnaps; j++) {
			const struct tool_map *m = &p[i].d->snaps[j];
			uint32_t copies = tool_map_copies(m);
			if (!m->name || !copies)
				continue;
			struct vm_metrics_map vm = {.name = m->name, .key_size = m->key_size,
				.device = tool_ctx_device(p[i].d, m->ctx), .copies = copies,
				.value_size = m->value_size / copies, .kv = m->kv, .count = m->count};
			vm_metrics_map_values(f, labels, &vm);
		}
	}
}

void tool_metrics_write(FILE *f, const char *tool, const struct tool_metrics_proc *p, size_t n)
{
	health(f, p, n);
	generic(f, p, n);
	family(f, "cubpf_kernel_launches_total", "counter", "kernel launches (KERNEL records)");
	per_kernel(f, "cubpf_kernel_launches_total", p, n, launches);
	family(f, "cubpf_kernel_threads_total", "counter", "threads launched (grid x block)");
	per_kernel(f, "cubpf_kernel_threads_total", p, n, threads);
	if (tool && !strcmp(tool, "kcount"))
		kcount(f, p, n);
	else if (tool && !strcmp(tool, "launchlate"))
		launchlate(f, p, n);
	else if (tool && !strcmp(tool, "threadhist"))
		threadhist(f, p, n);
	else if (tool && !strcmp(tool, "memtrace")) {
		memtrace_family(f, p, n, 1);
		memtrace_family(f, p, n, 0);
	}
}

/* ---- the run's traces, followed from scrape to scrape ------------------------------------------
 * A scrape reads what each trace gained since the one before (tool_follow): its cost follows
 * the program's rate of records, not the length of the run.  Traces are kept by path; one that
 * cannot be opened yet (its header not written) is tried again at the next scrape. */
struct tool_metrics_traces {
	struct tool_follow **follow;
	char **path;
	size_t n;
};

struct tool_metrics_traces *tool_metrics_traces_new(void)
{
	return calloc(1, sizeof(struct tool_metrics_traces));
}

static struct tool_follow *traces_find(struct tool_metrics_traces *t, const char *path)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->path[i], path))
			return t->follow[i];
	char err[512];
	struct tool_follow *f = tool_follow_open(path, err, sizeof(err));
	struct tool_follow **q = f ? realloc(t->follow, (t->n + 1) * sizeof(*q)) : NULL;
	char **p = q ? (t->follow = q, realloc(t->path, (t->n + 1) * sizeof(*p))) : NULL;
	char *copy = p ? (t->path = p, strdup(path)) : NULL;
	if (!copy) {
		tool_follow_close(f);
		return NULL;
	}
	t->follow[t->n] = f;
	t->path[t->n++] = copy;
	return f;
}

void tool_metrics_traces_write(struct tool_metrics_traces *t, FILE *f, const char *tool,
			       char *const *paths, size_t n)
{
	struct tool_metrics_proc *p = calloc(n ? n : 1, sizeof(*p));
	size_t np = 0;
	for (size_t i = 0; p && i < n; i++) {
		char err[512];
		struct tool_follow *fl = traces_find(t, paths[i]);
		if (!fl || tool_follow_update(fl, err, sizeof(err)) != 0)
			continue;
		const struct tool_data *d = tool_follow_data(fl);
		if (!d->nprocs)
			continue;
		p[np] = (struct tool_metrics_proc){.pid = d->procs[0].pid, .d = d};
		tool_follow_bytes(fl, &p[np].trace_bytes, NULL);
		np++;
	}
	tool_metrics_write(f, tool, p, np);
	free(p);
}

void tool_metrics_traces_free(struct tool_metrics_traces *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		tool_follow_close(t->follow[i]);
		free(t->path[i]);
	}
	free(t->follow);
	free(t->path);
	free(t);
}
