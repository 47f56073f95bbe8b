/* tools/tool_common.c: the tools' table, shared output helpers and the footer every report ends
 * with (devices, memory, what was not instrumented and why, losses). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

void tool_report_kcount(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_threadhist(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_launchlate(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_memtrace(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_kernelretsnoop(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_maps(const struct tool_data *d, const struct tool_opts *o, FILE *f);

static const struct tool tools[] = {
	{"kcount", "kcount.bpf.o", "per-kernel launches, threads and GPU time",
	 "For each kernel: launches and threads (from the launch calls), launches the GPU ran,\n"
	 "and the GPU span from the first launch's start to the last block's exit.\n",
	 tool_report_kcount},
	{"threadhist", "threadhist.bpf.o", "executions per GPU thread, with an imbalance summary",
	 "Counts, for every thread of the grid (linear id = block * threads per block + thread),\n"
	 "how many times it ran the probed kernels (kernel exits).  Prints how many threads ran\n"
	 "N times, min/max/mean/stddev, and the most and least loaded threads.  A warp whose 32\n"
	 "lanes leave together is counted once (one update per warp); other exits thread by\n"
	 "thread.  Thread ids past 2^26 - 1 (past 2^20 - 1 for those) share the last slot.\n",
	 tool_report_threadhist},
	{"launchlate", "launchlate.bpf.o", "launch call to GPU start latency, log2 histogram per kernel",
	 "Host time of each launch call (the trace's KERNEL records) to the GPU start of the same\n"
	 "launch (thread 0 of block 0, %globaltimer converted with the clock calibration), joined\n"
	 "by launch order per kernel.  Keeps 1024 launches per kernel (the rest are counted).\n",
	 tool_report_launchlate},
	{"memtrace", "memtrace.bpf.o", "bytes loaded/stored per kernel and memory space",
	 "Per kernel: bytes and accesses per memory space and operation, the access-size\n"
	 "histogram, and a coalescing summary: the 32-byte sectors the warps' global accesses\n"
	 "touched against the ideal.  Every memory instruction is probed (one counter update\n"
	 "per warp and instruction, per SM): memory-bound kernels run somewhat slower.\n",
	 tool_report_memtrace},
	{"kernelretsnoop", "kernelretsnoop.bpf.o", "per-thread exit times, warp spread, slowest lanes",
	 "One ring-buffer record per thread exit (%globaltimer).  Prints the spread between the\n"
	 "first and last exit of each warp as a log2 histogram, and the lanes that left longest\n"
	 "after their warp's first lane.  Records that do not fit are dropped and counted.\n",
	 tool_report_kernelretsnoop},
};

const struct tool *tool_list(size_t *n)
{
	*n = sizeof(tools) / sizeof(tools[0]);
	return tools;
}

const struct tool *tool_find(const char *name)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		if (!strcmp(tools[i].name, name))
			return &tools[i];
	return NULL;
}

void tool_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* The demangled-looking part of a mangled name: _Z6vecaddPfS_i -> vecadd.  Good enough to
 * read a table; the full name is in --json. */
const char *tool_short_name(const char *m, char *buf, size_t len)
{
	if (strncmp(m, "_Z", 2) != 0 || m[2] < '1' || m[2] > '9') {
		snprintf(buf, len, "%s", m);
		return buf;
	}
	char *end;
	unsigned long n = strtoul(m + 2, &end, 10);
	if (n == 0 || n > strlen(end)) {
		snprintf(buf, len, "%s", m);
		return buf;
	}
	snprintf(buf, len, "%.*s", (int)(n < len - 1 ? n : len - 1), end);
	return buf;
}

/* bcc's log2 histogram: "lo -> hi : count |****|", 40 stars for the largest slot. */
void tool_log2_hist(FILE *f, const char *unit, const uint64_t *slots, int nslots)
{
	int first = -1, last = -1;
	uint64_t max = 0;
	for (int i = 0; i < nslots; i++)
		if (slots[i]) {
			if (first < 0)
				first = i;
			last = i;
			if (slots[i] > max)
				max = slots[i];
		}
	if (first < 0) {
		fprintf(f, "     (no samples)\n");
		return;
	}
	fprintf(f, "%20s : %-10s distribution\n", unit, "count");
	for (int i = first; i <= last; i++) {
		uint64_t lo = i ? 1ull << i : 0, hi = (i < 63 ? (1ull << (i + 1)) : UINT64_MAX) - 1;
		int stars = (int)(slots[i] * 40 / max);
		fprintf(f, "%9" PRIu64 " -> %-9" PRIu64 ": %-10" PRIu64 " |%-40.*s|\n", lo, hi, slots[i],
			stars, "****************************************");
	}
}

/* Kernels that launched but have no cubpf kernel id: the shim did not instrument them. */
static size_t not_instrumented(const struct tool_data *d, FILE *f, int json)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		if (k->id || !k->launches)
			continue;
		if (json) {
			fputs(n ? "," : "", f);
			tool_json_string(f, k->name);
		} else if (n < 20) {
			fprintf(f, "  %s (%" PRIu64 " launches)\n", k->name, k->launches);
		} else if (n == 20) {
			fprintf(f, "  ... (all of them in --json)\n");
		}
		n++;
	}
	return n;
}

static void common_json(const struct tool_data *d, FILE *f)
{
	fprintf(f, "\"run\":{\"trace\":\"%s\",\"device_bytes\":%" PRIu64 ",\"pinned_bytes\":%" PRIu64
		",\"ringbuf_drops\":%" PRIu64 ",\"writer_drops\":%" PRIu64 ",\"devices\":[",
		d->state ? d->state : "none", d->device_bytes, d->pinned_bytes, d->rb_drops,
		d->writer_drops);
	for (size_t i = 0; i < d->ndevices; i++) {
		fputs(i ? "," : "", f);
		tool_json_string(f, d->devices[i]);
	}
	fputs("],\"not_instrumented\":[", f);
	if (d->have_log || d->have_meta)
		not_instrumented(d, f, 1);
	fputs("],\"notes\":[", f);
	for (size_t i = 0; i < d->nnotes; i++) {
		fputs(i ? "," : "", f);
		tool_json_string(f, d->notes[i]);
	}
	fputs("]}", f);
}

void tool_report_common(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	if (o->json) {
		common_json(d, f);
		return;
	}
	fputc('\n', f);
	for (size_t i = 0; i < d->ndevices; i++)
		fprintf(f, "%s\n", d->devices[i]);
	/* kernel ids, memory and reasons come from the log or, format 1.2, from the trace */
	if ((d->have_log || d->have_mapmem) && d->log_rb_state_bytes)
		fprintf(f, "maps and buffers: %" PRIu64 " device bytes (%" PRIu64 " of them ring "
			"buffer bookkeeping), %" PRIu64 " pinned host bytes\n", d->device_bytes,
			d->log_rb_state_bytes, d->pinned_bytes);
	else if (d->have_log || d->have_mapmem)
		fprintf(f, "maps and buffers: %" PRIu64 " device bytes, %" PRIu64 " pinned host bytes\n",
			d->device_bytes, d->pinned_bytes);
	if (d->have_log || d->have_meta) {
		size_t instrumented = 0, missing = 0;
		for (size_t i = 0; i < d->nkernels; i++) {
			instrumented += d->kernels[i].id != 0;
			missing += !d->kernels[i].id && d->kernels[i].launches;
		}
		fprintf(f, "kernels instrumented: %zu\n", instrumented);
		fprintf(f, "kernels launched but not instrumented: %zu\n", missing);
		not_instrumented(d, f, 0);
		if (d->nnotes)
			fprintf(f, "reasons:\n");
		size_t shown = d->nnotes < 12 ? d->nnotes : 12;
		for (size_t i = 0; i < shown; i++) /* "live: " says nothing to a reader here */
			fprintf(f, "  - %s\n", strncmp(d->notes[i], "live: ", 6) ? d->notes[i]
									   : d->notes[i] + 6);
		if (shown < d->nnotes)
			fprintf(f, "  ... %zu more (all of them in --json)\n", d->nnotes - shown);
	}
	if (d->rb_drops || d->writer_drops)
		fprintf(f, "lost: %" PRIu64 " ring-buffer records (device buffers full), %" PRIu64
			" trace records (writer full)\n", d->rb_drops, d->writer_drops);
	if (d->span_drops)
		fprintf(f, "note: %" PRIu64 " launches have no GPU span (cubpf's event pool was full)\n",
			d->span_drops);
	fprintf(f, "trace: %s\n", d->state ? d->state : "none");
}
