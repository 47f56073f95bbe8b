/* tools/tool_bb.c: the formatters of the tools built on bbprobe (issue 32, basic block entries):
 * instrcount (dynamic PTX instructions per kernel, by threads and by warps), opcodehist (the
 * same per opcode class) and hotblocks (the blocks where each kernel's threads' instructions
 * go, with their PTX and source lines).  They read the maps of the trace's latest snapshots only, as the
 * other tools do (tools/tools.h); the layouts are those of tools/probes/{instrcount,opcodehist,
 * hotblocks}.bpf.c. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vm/include/cubpf_abi.h"
#include "tools/tools.h"

void tool_report_instrcount(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_opcodehist(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_hotblocks(const struct tool_data *d, const struct tool_opts *o, FILE *f);
extern const struct tool_kernel_key tool_keys_instrcount[], tool_keys_opcodehist[],
	tool_keys_hotblocks[];

#define IC_LANES 4
#define OH_LANES 4
#define HB_SHARDS 64
#define HB_BLOCKS 256

const struct tool_kernel_key tool_keys_instrcount[] = {{"icstats", IC_LANES, 0}, {NULL, 0, 0}};
const struct tool_kernel_key tool_keys_opcodehist[] = {{"ohstats", OH_LANES, 0}, {NULL, 0, 0}};
const struct tool_kernel_key tool_keys_hotblocks[] = {{"hbstats", HB_SHARDS * HB_BLOCKS, 0},
						      {NULL, 0, 0}};

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* ---- instrcount ----------------------------------------------------------------------------- */
/* icstats: key = kernel id * 4 + lane (the warp's slot on its SM % 4), per SM: instructions by
 * threads, by warps (struct icstat). */

struct ic_row {
	const struct tool_kernel *k;
	uint64_t threads, warps; /* instructions */
};

static int ic_cmp(const void *a, const void *b)
{
	const struct ic_row *x = a, *y = b;
	return x->threads < y->threads ? 1 : x->threads > y->threads ? -1 : 0;
}

static struct ic_row *ic_rows(const struct tool_data *d, size_t *n)
{
	const struct tool_map *m = tool_map_by_name(d, "icstats");
	*n = 0;
	if (!m || !d->nkernels)
		return NULL;
	struct ic_row *r = calloc(d->nkernels, sizeof(*r));
	for (size_t i = 0; r && i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		struct ic_row row = {.k = k};
		for (uint32_t l = 0; k->id && l < IC_LANES; l++) {
			row.threads += tool_map_u64(m, k->id * IC_LANES + l, 0);
			row.warps += tool_map_u64(m, k->id * IC_LANES + l, 1);
		}
		if (row.threads || row.warps)
			r[(*n)++] = row;
	}
	if (*n)
		qsort(r, *n, sizeof(*r), ic_cmp);
	return r;
}

void tool_report_instrcount(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	size_t n;
	struct ic_row *r = ic_rows(d, &n);
	if (o->json) {
		fputs("\"tool\":\"instrcount\",\"kernels\":[", f);
		for (size_t i = 0; i < n; i++) {
			fprintf(f, "%s{\"name\":", i ? "," : "");
			tool_json_string(f, r[i].k->name);
			fprintf(f, ",\"launches\":%" PRIu64 ",\"threads\":%" PRIu64 ",\"thread_insns\":%"
				PRIu64 ",\"warp_insns\":%" PRIu64 "}", r[i].k->launches, r[i].k->threads,
				r[i].threads, r[i].warps);
		}
		fputs("],", f);
		free(r);
		return;
	}
	if (!n) {
		fputs("(no probed kernel ran a basic block)\n", f);
		free(r);
		return;
	}
	fprintf(f, "%-28s %8s %12s %16s %16s %10s %6s\n", "KERNEL", "LAUNCHES", "THREADS",
		"THREAD_INSNS", "WARP_INSNS", "PER_THREAD", "SIMT");
	size_t top = o->top > 0 && (size_t)o->top < n ? (size_t)o->top : n;
	for (size_t i = 0; i < top; i++) {
		char sn[48];
		char simt[16] = "-";
		if (r[i].warps)
			snprintf(simt, sizeof(simt), "%.1f%%", 100.0 * ratio(r[i].threads, 32 * r[i].warps));
		fprintf(f, "%-28s %8" PRIu64 " %12" PRIu64 " %16" PRIu64 " %16" PRIu64 " %10.1f %6s\n",
			tool_short_name(r[i].k->name, sn, sizeof(sn)), r[i].k->launches,
			r[i].k->threads, r[i].threads, r[i].warps, ratio(r[i].threads, r[i].k->threads),
			simt);
	}
	if (top < n)
		fprintf(f, "(%zu more kernels)\n", n - top);
	fputs("\nPTX instructions issued (cubpf's own not counted; predicated-off ones counted):\n"
	      "THREAD_INSNS once per thread, WARP_INSNS once per warp-level execution; PER_THREAD:\n"
	      "per thread launched; SIMT: THREAD_INSNS / (32 x WARP_INSNS), the lanes' occupancy.\n",
	      f);
	free(r);
}

/* ---- opcodehist ----------------------------------------------------------------------------- */
/* ohstats: key = kernel id * 4 + lane (the warp's slot on its SM % 4), per SM: instructions of
 * each class by threads. */

static const char *const op_class_names[CUBPF_OP_CLASSES] = {
	"other", "int", "fp32", "fp64", "fp16", "sfu", "logic", "compare", "move", "ld.global",
	"st.global", "shared", "local", "param/const", "atomic", "control", "sync", "warp",
	"tensor", "async/tex",
};

struct oh_row {
	const struct tool_kernel *k;
	uint64_t threads[CUBPF_OP_CLASSES], total;
};

static int oh_cmp(const void *a, const void *b)
{
	const struct oh_row *x = a, *y = b;
	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static struct oh_row *oh_rows(const struct tool_data *d, size_t *n)
{
	const struct tool_map *m = tool_map_by_name(d, "ohstats");
	*n = 0;
	if (!m || !d->nkernels)
		return NULL;
	struct oh_row *r = calloc(d->nkernels, sizeof(*r));
	for (size_t i = 0; r && i < d->nkernels; i++) {
		struct oh_row row = {.k = &d->kernels[i]};
		for (uint32_t c = 0; row.k->id && c < CUBPF_OP_CLASSES; c++) {
			for (uint32_t l = 0; l < OH_LANES; l++)
				row.threads[c] += tool_map_u64(m, row.k->id * OH_LANES + l, c);
			row.total += row.threads[c];
		}
		if (row.total)
			r[(*n)++] = row;
	}
	if (*n)
		qsort(r, *n, sizeof(*r), oh_cmp);
	return r;
}

static void oh_json(const struct oh_row *r, size_t n, FILE *f)
{
	fputs("\"tool\":\"opcodehist\",\"kernels\":[", f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"name\":", i ? "," : "");
		tool_json_string(f, r[i].k->name);
		fprintf(f, ",\"thread_insns\":%" PRIu64 ",\"classes\":{", r[i].total);
		bool first = true;
		for (uint32_t c = 0; c < CUBPF_OP_CLASSES; c++) {
			if (!r[i].threads[c])
				continue;
			fprintf(f, "%s\"%s\":{\"threads\":%" PRIu64 "}", first ? "" : ",",
				op_class_names[c], r[i].threads[c]);
			first = false;
		}
		fputs("}}", f);
	}
	fputs("],", f);
}

void tool_report_opcodehist(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	size_t n;
	struct oh_row *r = oh_rows(d, &n);
	if (o->json) {
		oh_json(r, n, f);
		free(r);
		return;
	}
	if (!n)
		fputs("(no probed kernel ran a basic block)\n", f);
	size_t top = o->top > 0 && (size_t)o->top < n ? (size_t)o->top : n;
	for (size_t i = 0; i < top; i++) {
		char sn[48];
		fprintf(f, "%s%s: %" PRIu64 " instructions by threads\n", i ? "\n" : "",
			tool_short_name(r[i].k->name, sn, sizeof(sn)), r[i].total);
		fprintf(f, "  %-12s %16s %6s\n", "CLASS", "THREAD_INSNS", "SHARE");
		for (uint32_t c = 0; c < CUBPF_OP_CLASSES; c++)
			if (r[i].threads[c])
				fprintf(f, "  %-12s %16" PRIu64 " %5.1f%%\n", op_class_names[c],
					r[i].threads[c], 100.0 * ratio(r[i].threads[c], r[i].total));
	}
	if (top < n)
		fprintf(f, "(%zu more kernels)\n", n - top);
	free(r);
}

/* ---- hotblocks ------------------------------------------------------------------------------ */
/* hbstats: key = (kernel id * 64 + shard) * 256 + block (blocks from 255 on share 255), one
 * 128-byte record each: entries by threads, instructions << 32 | PTX line, .loc file << 32 |
 * line (struct hbstat). */

struct hb_row {
	const struct tool_kernel *k;
	uint32_t block, insns, line, file, src_line;
	uint64_t threads, thread_insns, kernel_insns;
};

static int hb_cmp(const void *a, const void *b)
{
	const struct hb_row *x = a, *y = b;
	if (x->k != y->k) /* kernels in table order, then their hottest blocks first */
		return x->k < y->k ? -1 : 1;
	if (x->thread_insns != y->thread_insns)
		return x->thread_insns < y->thread_insns ? 1 : -1;
	if (x->threads != y->threads)
		return x->threads < y->threads ? 1 : -1;
	return x->block < y->block ? -1 : x->block > y->block;
}

/* The shards and copies (contexts) of each (kernel, block) record added up into rows[kernel *
 * HB_BLOCKS + block]; the static facts from any record that has them. */
static void hb_gather(const struct tool_map *m, const struct tool_data *d, struct hb_row *rows)
{
	uint32_t copies = tool_map_copies(m), vs = m->value_size / copies;
	size_t pair = (size_t)m->key_size + m->value_size;
	for (size_t i = 0; vs >= 24 && m->key_size == 4 && i < m->count; i++) {
		uint32_t key;
		memcpy(&key, m->kv + i * pair, 4);
		uint32_t id = key / (HB_SHARDS * HB_BLOCKS), b = key % HB_BLOCKS;
		const struct tool_kernel *k = tool_kernel_by_id(d, id);
		if (!k)
			continue;
		struct hb_row *r = &rows[(size_t)(k - d->kernels) * HB_BLOCKS + b];
		for (uint32_t c = 0; c < copies; c++) {
			uint64_t v[3];
			memcpy(v, m->kv + i * pair + 4 + (size_t)c * vs, sizeof(v));
			r->k = k, r->block = b;
			r->threads += v[0];
			if (v[1])
				r->insns = (uint32_t)(v[1] >> 32), r->line = (uint32_t)v[1];
			if (v[2])
				r->file = (uint32_t)(v[2] >> 32), r->src_line = (uint32_t)v[2];
		}
	}
}

static struct hb_row *hb_rows(const struct tool_data *d, size_t *n)
{
	const struct tool_map *m = tool_map_by_name(d, "hbstats");
	*n = 0;
	if (!m || !d->nkernels)
		return NULL;
	struct hb_row *rows = calloc(d->nkernels * HB_BLOCKS, sizeof(*rows));
	if (!rows)
		return NULL;
	hb_gather(m, d, rows);
	for (size_t i = 0; i < d->nkernels * HB_BLOCKS; i++)
		if (rows[i].threads) {
			rows[i].thread_insns = rows[i].threads * rows[i].insns;
			rows[(*n)++] = rows[i];
		}
	for (size_t i = 0, j; i < *n; i = j) { /* each kernel's total, for the shares */
		uint64_t total = 0;
		for (j = i; j < *n && rows[j].k == rows[i].k; j++)
			total += rows[j].thread_insns;
		for (size_t t = i; t < j; t++)
			rows[t].kernel_insns = total;
	}
	if (*n)
		qsort(rows, *n, sizeof(*rows), hb_cmp);
	return rows;
}

static void hb_json(const struct hb_row *r, size_t n, FILE *f)
{
	fputs("\"tool\":\"hotblocks\",\"blocks\":[", f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"kernel\":", i ? "," : "");
		tool_json_string(f, r[i].k->name);
		fprintf(f, ",\"block\":%u,\"shared_slot\":%s,\"insns\":%u,\"ptx_line\":%u,"
			"\"src_file\":%u,\"src_line\":%u,\"thread_entries\":%" PRIu64
			",\"thread_insns\":%" PRIu64 ",\"kernel_thread_insns\":%" PRIu64 "}",
			r[i].block, r[i].block == HB_BLOCKS - 1 ? "true" : "false", r[i].insns,
			r[i].line, r[i].file, r[i].src_line, r[i].threads, r[i].thread_insns,
			r[i].kernel_insns);
	}
	fputs("],", f);
}

static void hb_row_print(const struct hb_row *r, FILE *f)
{
	char sn[48], block[16], line[16] = "?", src[24] = "-", insns[16] = "?";
	snprintf(block, sizeof(block), r->block == HB_BLOCKS - 1 ? "%u+" : "%u", r->block);
	if (r->line)
		snprintf(line, sizeof(line), "%u", r->line);
	if (r->src_line)
		snprintf(src, sizeof(src), "%u:%u", r->file, r->src_line);
	if (r->insns)
		snprintf(insns, sizeof(insns), "%u", r->insns);
	fprintf(f, "%-28s %6s %8s %10s %6s %14" PRIu64 " %16" PRIu64 " %5.1f%%\n",
		tool_short_name(r->k->name, sn, sizeof(sn)), block, line, src, insns, r->threads,
		r->thread_insns, 100.0 * ratio(r->thread_insns, r->kernel_insns));
}

void tool_report_hotblocks(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	size_t n;
	struct hb_row *r = hb_rows(d, &n);
	if (o->json) {
		hb_json(r, n, f);
		free(r);
		return;
	}
	if (!n) {
		fputs("(no probed kernel ran a basic block)\n", f);
		free(r);
		return;
	}
	fprintf(f, "%-28s %6s %8s %10s %6s %14s %16s %6s\n", "KERNEL", "BLOCK", "PTX_LINE",
		"SOURCE", "INSNS", "THREAD_ENTRIES", "THREAD_INSNS", "SHARE");
	size_t more = 0;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i; j < n && r[j].k == r[i].k; j++)
			if (o->top <= 0 || j - i < (size_t)o->top)
				hb_row_print(&r[j], f);
			else
				more++;
	}
	if (more)
		fprintf(f, "(%zu more blocks)\n", more);
	fputs("\nBLOCK: the basic block's index in its kernel, in PTX order (255+: blocks from 255\n"
	      "on; device functions' blocks are not counted); PTX_LINE: its first instruction's line in the\n"
	      "module's PTX; SOURCE: .loc file:line there; INSNS: its PTX instructions;\n"
	      "THREAD_INSNS = THREAD_ENTRIES x INSNS; SHARE: of the kernel's.  '?': the block ran\n"
	      "too seldom for its facts to be recorded.\n", f);
	free(r);
}
