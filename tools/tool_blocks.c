/* tools/tool_blocks.c: the formatters of the tools built on issue 32's attach points: blocklat
 * (thread block durations per kernel and per SM, from blockretprobe), syncwait (time at
 * barriers per kernel and site, from syncprobe) and memdelay (kernels' slowdown when every
 * global load waits longer, from bpf_gpu_delay_ns).  They read the maps of the
 * trace's latest snapshots only, as the other tools do (tools/tools.h). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vm/include/cubpf_abi.h"
#include "tools/tools.h"

void tool_report_blocklat(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_syncwait(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_memdelay(const struct tool_data *d, const struct tool_opts *o, FILE *f);
extern const struct tool_kernel_key tool_keys_blocklat[], tool_keys_syncwait[],
	tool_keys_memdelay[];

/* Word `word` of copy `copy` (an SM slot of a per-SM map; a context of a map several GPUs
 * merged) of the value at key; 0 when absent. */
static uint64_t copy_u64(const struct tool_map *m, uint32_t key, uint32_t copy, uint32_t word)
{
	uint32_t n = tool_map_copies(m), vs = m->value_size / n;
	size_t pair = (size_t)m->key_size + m->value_size;
	if (m->key_size != 4 || copy >= n || (word + 1) * 8u > vs)
		return 0;
	for (size_t i = 0; i < m->count; i++) {
		uint32_t k;
		memcpy(&k, m->kv + i * pair, 4);
		if (k != key)
			continue;
		uint64_t v;
		memcpy(&v, m->kv + i * pair + 4 + (size_t)copy * vs + word * 8u, 8);
		return v;
	}
	return 0;
}

/* ---- blocklat ------------------------------------------------------------------------------- */
/* blstats: per kernel id and SM, struct blstat of tools/probes/blocklat.bpf.c (words: blocks,
 * sum, max, min + 1, first begin, last end, slowest block + 1); blhist: key = id * 32 + log2 slot
 * of the duration. */
#define BL_SLOTS 32
const struct tool_kernel_key tool_keys_blocklat[] = {{"blstats", 1, 0}, {"blhist", BL_SLOTS, 0},
						     {NULL, 0, 0}};

struct bl_kernel {
	uint64_t blocks, sum, min, max, slowest;
	uint32_t slowest_sm, sms;
	uint64_t busy_min, busy_max;  /* per SM: the sum of its blocks' durations */
	uint64_t blocks_min, blocks_max;
	uint64_t end_min, end_max;    /* per SM: its last block's end; the spread is the tail */
	uint64_t first_begin;
	uint64_t hist[BL_SLOTS];
};

static void bl_sm(struct bl_kernel *b, const struct tool_map *m, uint32_t id, uint32_t s)
{
	uint64_t n = copy_u64(m, id, s, 0);
	if (!n)
		return;
	uint64_t sum = copy_u64(m, id, s, 1), max = copy_u64(m, id, s, 2);
	uint64_t min = copy_u64(m, id, s, 3), t0 = copy_u64(m, id, s, 4), t1 = copy_u64(m, id, s, 5);
	bool first = b->sms++ == 0;
	b->blocks += n;
	b->sum += sum;
	if (max > b->max || first) {
		b->max = max;
		b->slowest = copy_u64(m, id, s, 6);
		b->slowest_sm = s;
	}
	if (min && (!b->min || min - 1 < b->min))
		b->min = min - 1;
	if (first || sum < b->busy_min)
		b->busy_min = sum;
	if (sum > b->busy_max)
		b->busy_max = sum;
	if (first || n < b->blocks_min)
		b->blocks_min = n;
	if (n > b->blocks_max)
		b->blocks_max = n;
	if (first || t1 < b->end_min)
		b->end_min = t1;
	if (t1 > b->end_max)
		b->end_max = t1;
	if (t0 && (!b->first_begin || t0 < b->first_begin))
		b->first_begin = t0;
}

/* The figures of kernel `id` over every SM (and GPU) copy; false when no block of it ended. */
static bool bl_kernel_of(const struct tool_data *d, uint32_t id, struct bl_kernel *b)
{
	const struct tool_map *m = tool_map_by_name(d, "blstats");
	memset(b, 0, sizeof(*b));
	if (!m || m->key_size != 4 || m->value_size / tool_map_copies(m) < 56)
		return false;
	for (uint32_t s = 0; s < tool_map_copies(m); s++)
		bl_sm(b, m, id, s);
	const struct tool_map *h = tool_map_by_name(d, "blhist");
	for (uint32_t i = 0; h && i < BL_SLOTS; i++)
		b->hist[i] = tool_map_u64(h, id * BL_SLOTS + i, 0);
	return b->blocks > 0;
}

static void bl_json(const struct tool_kernel *k, const struct bl_kernel *b, bool first, FILE *f)
{
	fprintf(f, "%s{\"name\":", first ? "" : ",");
	tool_json_string(f, k->name);
	fprintf(f, ",\"blocks\":%" PRIu64 ",\"mean_ns\":%" PRIu64 ",\"min_ns\":%" PRIu64
		",\"max_ns\":%" PRIu64 ",\"slowest_block\":%" PRId64 ",\"slowest_sm_slot\":%u"
		",\"sms\":%u,\"sm_blocks_min\":%" PRIu64 ",\"sm_blocks_max\":%" PRIu64
		",\"sm_busy_min_ns\":%" PRIu64 ",\"sm_busy_max_ns\":%" PRIu64 ",\"tail_ns\":%" PRIu64
		",\"hist_log2_ns\":[", b->blocks, b->sum / b->blocks, b->min, b->max,
		(int64_t)b->slowest - 1, b->slowest_sm, b->sms, b->blocks_min, b->blocks_max,
		b->busy_min, b->busy_max, b->end_max - b->end_min);
	for (int i = 0; i < BL_SLOTS; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", b->hist[i]);
	fputs("]}", f);
}

static void bl_text(const struct tool_kernel *k, const struct bl_kernel *b, FILE *f)
{
	char sn[48];
	fprintf(f, "%-28s %8" PRIu64 " %10.1f %10.1f %10.1f %8" PRId64 " %5u %4u %5" PRIu64 "-%-5"
		PRIu64 " %11.1f %11.1f %10.1f\n", tool_short_name(k->name, sn, sizeof(sn)), b->blocks,
		(double)b->sum / (double)b->blocks / 1e3, (double)b->min / 1e3, (double)b->max / 1e3,
		(int64_t)b->slowest - 1, b->slowest_sm, b->sms, b->blocks_min, b->blocks_max,
		(double)b->busy_min / 1e3, (double)b->busy_max / 1e3,
		(double)(b->end_max - b->end_min) / 1e3);
}

void tool_report_blocklat(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	struct bl_kernel b;
	bool first = true;
	if (o->json)
		fputs("\"tool\":\"blocklat\",\"kernels\":[", f);
	else
		fprintf(f, "%-28s %8s %10s %10s %10s %8s %5s %4s %11s %11s %11s %10s\n", "KERNEL",
			"BLOCKS", "MEAN_us", "MIN_us", "MAX_us", "SLOWEST", "ON_SM", "SMS",
			"BLOCKS/SM", "BUSY_MIN_us", "BUSY_MAX_us", "TAIL_us");
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		if (!k->id || !bl_kernel_of(d, k->id, &b))
			continue;
		if (o->json)
			bl_json(k, &b, first, f);
		else
			bl_text(k, &b, f);
		first = false;
	}
	if (o->json) {
		fputs("],", f);
		return;
	}
	if (first) {
		fputs("(no thread block ended in a probed kernel)\n", f);
		return;
	}
	fputs("\nMEAN/MIN/MAX: block durations (first thread in to last thread out); SLOWEST: its\n"
	      "linear block index and ON_SM the SM (slot: %smid % 256) it ran on; per SM: the least\n"
	      "and most blocks and busy time (the sum of its blocks' durations); TAIL: from the first\n"
	      "SM's last block end to the last SM's.\n", f);
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		char sn[48];
		if (!k->id || !bl_kernel_of(d, k->id, &b))
			continue;
		fprintf(f, "\n%s: block durations\n", tool_short_name(k->name, sn, sizeof(sn)));
		tool_log2_hist(f, "ns", b.hist, BL_SLOTS);
	}
}

/* ---- syncwait ------------------------------------------------------------------------------- */
/* swsites: key = kernel id * 16 + site (the barrier's place among its function's sync sites,
 * 15 for the rest), per SM, 128 bytes: threads, wait_ns, max_ns, kind << 32 | id, instruction
 * index + 1 (struct swstat, tools/probes/syncwait.bpf.c; max_ns, what and the index only on
 * copies some sampled warp wrote: 0 there). */
#define SW_SITES 16
const struct tool_kernel_key tool_keys_syncwait[] = {{"swsites", SW_SITES, 0}, {NULL, 0, 0}};

struct sw_row {
	const struct tool_kernel *k;
	uint32_t site, kind, id; /* site: the instruction index (or the place, when unknown) */
	bool shared;             /* the last record: every site from SW_SITES - 1 on */
	uint64_t threads, wait, max, kernel_wait;
};

static const char *sync_kind_name(uint32_t kind)
{
	static const char *const names[] = {"?", "bar.sync", "bar.arrive", "bar.red",
					    "bar.warp.sync", "barrier.cluster", "mbarrier.wait",
					    "fence"};
	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/* Traces of cubpf before 2026-11-28: 64 sites by instruction index, 32-byte records. */
#define SW_OLD_SITES 64
#define SW_OLD_BYTES 32

/* The site's record over every SM copy; false when no thread passed it. */
static bool sw_site(const struct tool_map *m, uint32_t key, struct sw_row *r)
{
	uint32_t n = tool_map_copies(m);
	bool old = m->value_size / n < 40;
	r->threads = r->wait = r->max = 0;
	for (uint32_t c = 0; c < n; c++) {
		uint64_t t = copy_u64(m, key, c, 0);
		if (!t)
			continue;
		uint64_t what = copy_u64(m, key, c, 3), mx = copy_u64(m, key, c, 2);
		r->threads += t;
		r->wait += copy_u64(m, key, c, 1);
		r->max = mx > r->max ? mx : r->max;
		uint64_t insn = old ? 0 : copy_u64(m, key, c, 4);
		if (insn)
			r->site = (uint32_t)(insn - 1);
		if (!what) /* this copy's warps did not write it (syncwait.bpf.c writes it rarely) */
			continue;
		r->kind = (uint32_t)(what >> 32);
		r->id = (uint32_t)what;
	}
	return r->threads > 0;
}

static int sw_cmp(const void *a, const void *b)
{
	const struct sw_row *x = a, *y = b;
	return x->wait < y->wait ? 1 : x->wait > y->wait ? -1 : 0;
}

/* Every site of every probed kernel that a thread passed, most time first. */
static struct sw_row *sw_rows(const struct tool_data *d, size_t *n)
{
	const struct tool_map *m = tool_map_by_name(d, "swsites");
	struct sw_row *rows = NULL;
	size_t cap = 0;
	*n = 0;
	if (!m || m->key_size != 4 || m->value_size / tool_map_copies(m) < SW_OLD_BYTES)
		return NULL;
	uint32_t sites = m->value_size / tool_map_copies(m) < 40 ? SW_OLD_SITES : SW_SITES;
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		uint64_t total = 0;
		size_t first = *n;
		for (uint32_t s = 0; k->id && s < sites; s++) {
			struct sw_row r = {.k = k, .site = s, .shared = s == sites - 1};
			if (!sw_site(m, k->id * sites + s, &r))
				continue;
			if (*n == cap) {
				struct sw_row *g = realloc(rows, (cap = cap ? 2 * cap : 16) * sizeof(*g));
				if (!g)
					break;
				rows = g;
			}
			rows[(*n)++] = r;
			total += r.wait;
		}
		for (size_t j = first; j < *n; j++)
			rows[j].kernel_wait = total;
	}
	if (*n)
		qsort(rows, *n, sizeof(*rows), sw_cmp);
	return rows;
}

static void sw_json(const struct sw_row *r, size_t n, FILE *f)
{
	fputs("\"tool\":\"syncwait\",\"sites\":[", f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"kernel\":", i ? "," : "");
		tool_json_string(f, r[i].k->name);
		fprintf(f, ",\"site\":%u,\"kind\":\"%s\",\"id\":%" PRId64 ",\"threads\":%" PRIu64
			",\"wait_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"kernel_wait_ns\":%" PRIu64 "}",
			r[i].site, sync_kind_name(r[i].kind),
			r[i].id == CUBPF_SYNC_ID_NONE ? (int64_t)-1 : (int64_t)r[i].id, r[i].threads,
			r[i].wait, r[i].max, r[i].kernel_wait);
	}
	fputs("],", f);
}

void tool_report_syncwait(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	size_t n;
	struct sw_row *r = sw_rows(d, &n);
	if (o->json) {
		sw_json(r, n, f);
		free(r);
		return;
	}
	if (!n) {
		fputs("(no thread passed a barrier or fence in a probed kernel)\n", f);
		free(r);
		return;
	}
	fprintf(f, "%-28s %5s %-15s %4s %10s %12s %10s %10s %6s\n", "KERNEL", "SITE", "KIND", "ID",
		"THREADS", "WAIT_us", "MEAN_ns", "MAX_us", "SHARE");
	size_t top = o->top > 0 && (size_t)o->top < n ? (size_t)o->top : n;
	for (size_t i = 0; i < top; i++) {
		char sn[48], id[16] = "-", site[16];
		if (r[i].id != CUBPF_SYNC_ID_NONE)
			snprintf(id, sizeof(id), "%u", r[i].id);
		snprintf(site, sizeof(site), "%u%s", r[i].site, r[i].shared ? "+" : "");
		fprintf(f, "%-28s %5s %-15s %4s %10" PRIu64 " %12.1f %10.0f %10.1f %5.1f%%\n",
			tool_short_name(r[i].k->name, sn, sizeof(sn)), site,
			sync_kind_name(r[i].kind), id, r[i].threads, (double)r[i].wait / 1e3,
			(double)r[i].wait / (double)r[i].threads, (double)r[i].max / 1e3,
			r[i].kernel_wait ? 100.0 * (double)r[i].wait / (double)r[i].kernel_wait : 0.0);
	}
	if (top < n)
		fprintf(f, "(%zu more sites)\n", n - top);
	fputs("\nSITE: the barrier's instruction index in its function (+: this and every barrier\n"
	      "after the 15th of the function, counted together);\n"
	      "WAIT: the threads' time in it, summed (each warp's time counted for each of its\n"
	      "lanes); MAX: the longest a warp spent there; SHARE: of the kernel's time at barriers.\n",
	      f);
	free(r);
}

/* ---- memdelay ------------------------------------------------------------------------------- */
/* mdstats: per kernel id and SM, the global loads delayed and the delay.  The probes ran on
 * every other launch of each kernel (cubpf run sets --sample 2: the shim enables them on its
 * launches 0, 2, 4, ... of the kernel), so that a kernel's timed launches (KSPAN) split into
 * delayed ones (even places among its launches, in launch order) and native ones. */
const struct tool_kernel_key tool_keys_memdelay[] = {{"mdstats", 1, 0}, {NULL, 0, 0}};

struct md_kernel {
	uint64_t delayed, native;       /* timed launches of each kind */
	uint64_t delayed_ns, native_ns; /* their device times, summed */
	uint64_t loads, delay_ns;
};

/* The place of launch `corr` among the kernel's launches (launch_corr rises in record order),
 * or -1. */
static int64_t md_place(const struct tool_kernel *k, uint64_t corr)
{
	size_t lo = 0, hi = k->nlaunch;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->launch_corr[mid] < corr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->nlaunch && k->launch_corr[lo] == corr ? (int64_t)lo : -1;
}

static void md_kernel_of(const struct tool_data *d, const struct tool_kernel *k,
			 struct md_kernel *m)
{
	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < k->nspan; i++) {
		int64_t at = md_place(k, k->span_corr[i]);
		if (at < 0)
			continue;
		if (at % 2 == 0)
			m->delayed++, m->delayed_ns += k->span_ns[i];
		else
			m->native++, m->native_ns += k->span_ns[i];
	}
	const struct tool_map *s = tool_map_by_name(d, "mdstats");
	if (s && k->id) {
		m->loads = tool_map_u64(s, k->id, 0);
		m->delay_ns = tool_map_reduce(s, k->id, 1, TOOL_MAX);
	}
}

static double md_slowdown(const struct md_kernel *m)
{
	if (!m->delayed || !m->native || !m->native_ns)
		return 0;
	return ((double)m->delayed_ns / (double)m->delayed) / ((double)m->native_ns / (double)m->native);
}

static void md_json(const struct tool_kernel *k, const struct md_kernel *m, bool first, FILE *f)
{
	fprintf(f, "%s{\"name\":", first ? "" : ",");
	tool_json_string(f, k->name);
	fprintf(f, ",\"launches\":%" PRIu64 ",\"delayed_runs\":%" PRIu64 ",\"native_runs\":%" PRIu64
		",\"delayed_mean_ns\":%" PRIu64 ",\"native_mean_ns\":%" PRIu64 ",\"slowdown\":%.4f"
		",\"loads_delayed\":%" PRIu64 ",\"delay_ns\":%" PRIu64 "}", k->launches, m->delayed,
		m->native, m->delayed ? m->delayed_ns / m->delayed : 0,
		m->native ? m->native_ns / m->native : 0, md_slowdown(m), m->loads, m->delay_ns);
}

static void md_text(const struct tool_kernel *k, const struct md_kernel *m, FILE *f)
{
	char sn[48], slow[16] = "-";
	double sd = md_slowdown(m);
	if (sd > 0)
		snprintf(slow, sizeof(slow), "%.3fx", sd);
	fprintf(f, "%-28s %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %12.1f %12.1f %9s %14" PRIu64
		" %8" PRIu64 "\n", tool_short_name(k->name, sn, sizeof(sn)), k->launches, m->delayed,
		m->native, m->delayed ? (double)m->delayed_ns / (double)m->delayed / 1e3 : 0.0,
		m->native ? (double)m->native_ns / (double)m->native / 1e3 : 0.0, slow, m->loads,
		m->delay_ns);
}

void tool_report_memdelay(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	struct md_kernel m;
	bool first = true;
	if (o->json)
		fputs("\"tool\":\"memdelay\",\"kernels\":[", f);
	else
		fprintf(f, "%-28s %8s %8s %8s %12s %12s %9s %14s %8s\n", "KERNEL", "LAUNCHES",
			"DELAYED", "NATIVE", "DELAYED_us", "NATIVE_us", "SLOWDOWN", "LOADS_DELAYED",
			"DELAY_ns");
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		if (!k->id || !k->launches)
			continue;
		md_kernel_of(d, k, &m);
		if (o->json)
			md_json(k, &m, first, f);
		else
			md_text(k, &m, f);
		first = false;
	}
	if (o->json) {
		fputs("],", f);
		return;
	}
	fputs("\nDELAYED/NATIVE: timed launches with and without the delay (the probes run on every\n"
	      "other launch of each kernel) and their mean device time; SLOWDOWN: delayed over\n"
	      "native (\"-\": a kernel needs two timed launches); LOADS_DELAYED: global loads that\n"
	      "waited DELAY_ns, thread by thread, over the delayed launches.\n", f);
}
