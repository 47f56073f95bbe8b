/* tools/tool_common.c: the tools' table, shared output helpers and the footer every report ends
 * with (devices, memory, what was not instrumented and why, losses). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tools/tools.h"

void tool_report_kcount(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_threadhist(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_launchlate(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_memtrace(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_kernelretsnoop(const struct tool_data *d, const struct tool_opts *o, FILE *f);
extern const struct tool_kernel_key tool_keys_kcount[], tool_keys_launchlate[], tool_keys_memtrace[];
void tool_report_maps(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_blocklat(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_syncwait(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_memdelay(const struct tool_data *d, const struct tool_opts *o, FILE *f);
extern const struct tool_kernel_key tool_keys_blocklat[], tool_keys_syncwait[],
	tool_keys_memdelay[];
void tool_report_instrcount(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_opcodehist(const struct tool_data *d, const struct tool_opts *o, FILE *f);
void tool_report_hotblocks(const struct tool_data *d, const struct tool_opts *o, FILE *f);
extern const struct tool_kernel_key tool_keys_instrcount[], tool_keys_opcodehist[],
	tool_keys_hotblocks[];

static const struct tool tools[] = {
	{"kcount", "kcount.bpf.o", NULL, "per-kernel launches, threads and GPU time",
	 "For each kernel: launches and threads (from the launch calls), launches the GPU ran,\n"
	 "and the GPU span from the first launch's start to the last block's exit.\n",
	 tool_report_kcount, tool_keys_kcount},
	{"threadhist", "threadhist.bpf.o", "threadhist_entry.bpf.o",
	 "executions per GPU thread, with an imbalance summary",
	 "Counts, for every thread of the grid (linear id = block * threads per block + thread),\n"
	 "how many times it ran the probed kernels (kernel exits; under --sanitizer, kernel\n"
	 "entries: the patching API's exit site is costly).  Prints how many threads ran N times,\n"
	 "min/max/mean/stddev, and the most and least loaded threads.  Thread (0,0,0) of each\n"
	 "block counts for the block (one update per block).  Thread ids past 2^26 - 1 (past\n"
	 "2^20 - 1 in blocks that are not whole warps) share the last slot.\n",
	 tool_report_threadhist, NULL},
	{"launchlate", "launchlate.bpf.o", NULL,
	 "launch call to GPU start latency, log2 histogram per kernel",
	 "Host time of each launch call (the trace's KERNEL records) to the GPU start of the same\n"
	 "launch (thread 0 of block 0, %globaltimer converted with the clock calibration), joined\n"
	 "by launch order per kernel.  Keeps 1024 launches per kernel (the rest are counted).\n",
	 tool_report_launchlate, tool_keys_launchlate},
	{"memtrace", "memtrace.bpf.o", NULL, "bytes loaded/stored per kernel and memory space",
	 "Per kernel: bytes and accesses per memory space and operation, the access-size\n"
	 "histogram, and a coalescing summary: the 32-byte sectors the warps' global accesses\n"
	 "touched against the ideal.  Every memory instruction is probed (one counter update\n"
	 "per warp and instruction, per SM): memory-bound kernels run somewhat slower.\n",
	 tool_report_memtrace, tool_keys_memtrace},
	{"kernelretsnoop", "kernelretsnoop.bpf.o", NULL,
	 "per-thread exit times, warp spread, slowest lanes",
	 "One ring-buffer record per thread exit (%globaltimer).  Prints the spread between the\n"
	 "first and last exit of each warp as a log2 histogram, and the lanes that left longest\n"
	 "after their warp's first lane.  Records that do not fit are dropped and counted.\n",
	 tool_report_kernelretsnoop, NULL},
	{"blocklat", "blocklat.bpf.o", NULL,
	 "thread block durations, spread per SM, stragglers and tail",
	 "Per kernel: blocks, mean/least/largest block duration (first thread in to last thread\n"
	 "out, blockprobe's begin_ns and end), the slowest block and its SM, blocks and busy time\n"
	 "per SM (least and most), the tail (first SM's last block end to the last SM's), and a\n"
	 "log2 histogram of the durations.  Runs once per block (a barrier at block entry and one\n"
	 "atomic per group of lanes leaving, in 16 bytes of the block's shared memory, or in\n"
	 "cubpf's block table in device memory where the module declares dynamic shared memory\n"
	 "or CUBPF_SHARED_SUMS=0); kernel ids from 1024 on are not counted.\n",
	 tool_report_blocklat, tool_keys_blocklat},
	{"syncwait", "syncwait.bpf.o", NULL,
	 "time threads spend at barriers, per kernel and barrier site",
	 "After every barrier, fence and mbarrier wait attempt of the probed kernels, the time\n"
	 "the thread spent in it (syncprobe's before_ns), counted once per warp for its lanes.\n"
	 "Prints the sites with the most time first: kernel, site (instruction index), kind and\n"
	 "barrier id, threads, time summed, mean, longest, share of the kernel's barrier time.\n"
	 "Kernel ids from 64 on are not counted; a function's sites from the 16th on share one\n"
	 "row (SITE marked +).\n",
	 tool_report_syncwait, tool_keys_syncwait},
	{"memdelay", "memdelay.bpf.o", NULL,
	 "slowdown of kernels when every global load waits -n NS longer",
	 "Every global load of the probed kernels waits NS nanoseconds more (-n NS, 1 to 1000000,\n"
	 "default 1000: bpf_gpu_delay_ns spins on %globaltimer), on every other launch of each\n"
	 "kernel (--sample 2, kernel spans on).  Per kernel: the mean device time of the launches\n"
	 "with and without the delay and their ratio (memory-latency sensitivity), and the loads\n"
	 "delayed.  A kernel needs two timed launches for a ratio; graph launches have no spans.\n",
	 tool_report_memdelay, tool_keys_memdelay},
	{"instrcount", "instrcount.bpf.o", NULL,
	 "dynamic PTX instructions per kernel, by threads and warps",
	 "PTX instructions each thread of the probed kernels issued (cubpf counts them in two\n"
	 "registers: an add at each basic block's entry, and for the warp-level count a test of\n"
	 "which lane was elected), summed per warp at kernel exit.  Per kernel: instructions\n"
	 "counted per thread and per warp-level execution, per thread launched, and the SIMT\n"
	 "occupancy.  Device functions' instructions are not counted; kernel ids from 256 on\n"
	 "are not counted.\n",
	 tool_report_instrcount, tool_keys_instrcount},
	{"opcodehist", "opcodehist.bpf.o", NULL,
	 "dynamic PTX instructions per kernel and opcode class",
	 "Instructions issued by threads as instrcount counts them, split by opcode class\n"
	 "(integer, fp32, fp64, fp16, special functions, logic, compare, move, global loads and\n"
	 "stores, shared, local, param/const, atomics, control, barriers, warp-level, tensor,\n"
	 "async/texture): each basic block's entries (counted in registers, summed per warp at\n"
	 "kernel exit) times its instructions of each class.  Kernel ids from 256 on are not\n"
	 "counted.\n",
	 tool_report_opcodehist, tool_keys_opcodehist},
	{"hotblocks", "hotblocks.bpf.o", NULL,
	 "the hottest basic blocks of each kernel, PTX and source lines",
	 "Entries of every basic block of the probed kernels by threads (counted in registers, one\n"
	 "instruction per block entry; summed per warp at kernel exit: bbretprobe), times its PTX\n"
	 "instructions: each kernel's blocks with the most instructions first, with the PTX line of\n"
	 "the block and its .loc source line.  Kernel ids from 16 on are not counted; blocks from\n"
	 "255 on share one row.\n",
	 tool_report_hotblocks, tool_keys_hotblocks},
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

/* ---- text from files, safe to print ----------------------------------------------------------
 * Names and messages come from traces, caches, objects and CUDA files, any of which may be
 * damaged or hostile: an escape sequence in a kernel name must not reach the user's terminal
 * (colours, titles, cursor moves, hidden text), nor invalid UTF-8 a JSON reader.  Every byte is
 * one of: printable as it is (ASCII, valid UTF-8 that is neither a C1 control nor a
 * bidirectional override), or shown escaped: \n \t \r \e \\, \xHH for other C0 bytes, DEL and
 * bytes that are not UTF-8, \uXXXX for C1 controls and bidi overrides. */

/* The length (1..4) of the printable character at p, or 0 when it must be escaped; *cp gets
 * the code point of a valid sequence (for \u), or -1 for a byte that starts none. */
static size_t printable_at(const unsigned char *p, long *cp)
{
	unsigned c = p[0];
	*cp = c;
	if (c < 0x80)
		return c >= 0x20 && c != 0x7f && c != '\\';
	size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	long v = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80) {
			n = 0;
			break;
		}
		v = v << 6 | (p[i] & 0x3f);
	}
	/* overlong forms, surrogates and code points past U+10FFFF are not UTF-8 */
	if (!n || (n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10ffff)) ||
	    (v >= 0xd800 && v <= 0xdfff)) {
		*cp = -1;
		return 0;
	}
	*cp = v;
	int hidden = v <= 0x9f || (v >= 0x202a && v <= 0x202e) || (v >= 0x2066 && v <= 0x2069);
	return hidden ? 0 : n;
}

/* The bytes of an escaped unit: one for ASCII and for a byte that starts no character
 * (cp < 0x80), else the UTF-8 length of cp. */
static size_t unit_len(long cp)
{
	return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/* The escape for the unit at p into out (at least 20 bytes); returns the bytes it covers. */
static size_t escape_at(const unsigned char *p, char *out)
{
	long cp;
	size_t n = printable_at(p, &cp);
	static const char named[] = "\n\t\r\033\\", *const names[] = {"\\n", "\\t", "\\r", "\\e", "\\\\"};
	if (n) {
		memcpy(out, p, n);
		out[n] = 0;
		return n;
	}
	const char *q = *p ? strchr(named, *p) : NULL;
	if (q)
		snprintf(out, 20, "%s", names[q - named]);
	else if (cp >= 0x80)
		snprintf(out, 20, "\\u%04lx", cp);
	else
		snprintf(out, 20, "\\x%02x", *p);
	return unit_len(cp);
}

static int needs_escape(const char *s, size_t n)
{
	long cp;
	for (size_t i = 0; i < n;) {
		size_t k = printable_at((const unsigned char *)s + i, &cp);
		if (!k || k > n - i)
			return 1;
		i += k;
	}
	return 0;
}

/* n bytes of s, escaped, into buf; cut with "..." where the whole does not fit. */
static void escape_into(const char *s, size_t n, char *buf, size_t len)
{
	size_t used = 0;
	char e[20];
	for (size_t i = 0; i < n;) {
		size_t k = escape_at((const unsigned char *)s + i, e), el = strlen(e);
		if (k > n - i) { /* a sequence cut by n: its bytes one by one */
			snprintf(e, sizeof(e), "\\x%02x", (unsigned char)s[i]);
			k = 1, el = 4;
		}
		if (used + el + 4 > len && (i + k < n || used + el + 1 > len)) {
			snprintf(buf + used, len - used, "%s", len - used > 3 ? "..." : "");
			return;
		}
		memcpy(buf + used, e, el);
		used += el;
		i += k;
	}
	buf[used] = 0;
}

const char *tool_text(const char *s, char *buf, size_t len)
{
	if (!s)
		return "";
	if (!needs_escape(s, strlen(s)))
		return s;
	escape_into(s, strlen(s), buf, len);
	return buf;
}

void tool_text_put(FILE *f, const char *s, int keep_newlines)
{
	char e[20];
	for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
		if (keep_newlines && (*p == '\n' || *p == '\t')) {
			fputc(*p++, f);
			continue;
		}
		p += escape_at(p, e);
		fputs(e, f);
	}
}

void tool_warn(const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	tool_text_put(stderr, msg, 0);
	fputc('\n', stderr);
	free(msg);
}

/* JSON: valid UTF-8 as it is (the output stays UTF-8), '"', '\\' and C0 per RFC 8259, DEL, C1
 * and bidi overrides as \uXXXX (legal, and harmless in a terminal), and a byte that is not
 * UTF-8 as the code point of the same value (\u00HH): the result always parses. */
void tool_json_string(FILE *f, const char *s)
{
	long cp;
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
		size_t n = printable_at(p, &cp);
		if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p++);
		} else if (n) {
			fwrite(p, 1, n, f);
			p += n;
		} else if (*p == '\n' || *p == '\t' || *p == '\r') {
			fputs(*p == '\n' ? "\\n" : *p == '\t' ? "\\t" : "\\r", f);
			p++;
		} else {
			fprintf(f, "\\u%04lx", cp >= 0 ? cp : (long)*p);
			p += unit_len(cp);
		}
	}
	fputc('"', f);
}

/* The demangled-looking part of a mangled name: _Z6vecaddPfS_i -> vecadd.  Good enough to
 * read a table; the full name is in --json.  Escaped for the terminal (tool_text). */
const char *tool_short_name(const char *m, char *buf, size_t len)
{
	size_t n = strlen(m);
	const char *part = m;
	if (!strncmp(m, "_Z", 2) && m[2] >= '1' && m[2] <= '9') {
		char *end;
		unsigned long k = strtoul(m + 2, &end, 10);
		if (k && k <= strlen(end))
			part = end, n = k;
	}
	escape_into(part, n, buf, len);
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
static bool not_instrumented(const struct tool_kernel *k)
{
	return !k->id && k->launches;
}

/* Kernels that got their probes through the Sanitizer backend (SASS patching); the others with
 * an id were rewritten as PTX. */
static bool sanitizer_patched(const struct tool_kernel *k)
{
	return k->id && (k->id_flags & STORE_KERNEL_ID_SANITIZER);
}

/* The kernels `pick` takes, listed: --json, every name; else the first 20 a line each (with
 * launches: their launch counts too), then a line saying how to see the rest.  How many. */
static size_t kernel_list(const struct tool_data *d, FILE *f, int json,
			  bool (*pick)(const struct tool_kernel *), bool launches)
{
	size_t n = 0;
	char t[TOOL_TEXT_MAX];
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		if (!pick(k))
			continue;
		if (json) {
			fputs(n ? "," : "", f);
			tool_json_string(f, k->name);
		} else if (n < 20 && launches) {
			fprintf(f, "  %s (%" PRIu64 " launches)\n", tool_text(k->name, t, sizeof(t)),
				k->launches);
		} else if (n < 20) {
			fprintf(f, "  %s\n", tool_text(k->name, t, sizeof(t)));
		} else if (n == 20) {
			fprintf(f, "  ... (all of them in --json)\n");
		}
		n++;
	}
	return n;
}

/* The processes of a run of several (each wrote its own trace), one line each. */
static void processes_text(const struct tool_data *d, FILE *f)
{
	char t[TOOL_TEXT_MAX];
	fprintf(f, "processes: %zu (a trace each)\n", d->nprocs);
	for (size_t i = 0; i < d->nprocs && i < 20; i++) {
		const struct tool_process *p = &d->procs[i];
		fprintf(f, "  pid %u", p->pid);
		if (p->ppid)
			fprintf(f, " (parent %u)", p->ppid);
		fprintf(f, ": %" PRIu64 " launches, trace %s: %s\n", p->launches, p->state,
			tool_text(p->cmdline, t, 120));
	}
	if (d->nprocs > 20)
		fprintf(f, "  ... %zu more (all of them in --json)\n", d->nprocs - 20);
}

/* ---- coverage: how much of the run ran with probes (issue 30) ------------------------------ */

void tool_coverage_of(const struct tool_data *d, const struct tool_process *p,
		      struct tool_coverage *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < d->nkernels; i++) {
		const struct tool_kernel *k = &d->kernels[i];
		uint64_t n = !p ? k->launches : i < p->k_cap ? p->k_launches[i] : 0;
		uint64_t ns = !p ? k->gpu_ns : i < p->k_cap ? p->k_gpu_ns[i] : 0;
		uint64_t spans = !p ? k->spans : i < p->k_cap ? p->k_spans[i] : 0;
		bool probed = k->id != 0;
		if (!n && !spans)
			continue;
		c->kernels++;
		c->kernels_probed += probed;
		c->launches += n;
		c->launches_probed += probed ? n : 0;
		c->spans += spans;
		c->gpu_ns += ns;
		c->gpu_ns_probed += probed ? ns : 0;
	}
}

static double share(uint64_t part, uint64_t all)
{
	return all ? 100.0 * (double)part / (double)all : 0.0;
}

void tool_coverage_print(const struct tool_coverage *c, int json, FILE *f)
{
	if (json) {
		fprintf(f, "\"kernels_launched\":%" PRIu64 ",\"kernels_instrumented\":%" PRIu64
			",\"launches\":%" PRIu64 ",\"launches_instrumented\":%" PRIu64
			",\"timed_launches\":%" PRIu64 ",\"gpu_ns\":%" PRIu64
			",\"gpu_ns_instrumented\":%" PRIu64, c->kernels, c->kernels_probed, c->launches,
			c->launches_probed, c->spans, c->gpu_ns, c->gpu_ns_probed);
		return;
	}
	fprintf(f, "probed: %" PRIu64 " of %" PRIu64 " kernels launched, %" PRIu64 " of %" PRIu64
		" launches (%.1f%%)", c->kernels_probed, c->kernels, c->launches_probed, c->launches,
		share(c->launches_probed, c->launches));
	if (c->spans)
		fprintf(f, ", %.1f%% of the GPU time of %" PRIu64 " timed launches (%.3f of %.3f ms)",
			share(c->gpu_ns_probed, c->gpu_ns), c->spans, (double)c->gpu_ns_probed / 1e6,
			(double)c->gpu_ns / 1e6);
	else
		fputs(", GPU time not measured (no kernel spans in the trace)", f);
	fputc('\n', f);
}

static void processes_json(const struct tool_data *d, FILE *f)
{
	fprintf(f, ",\"processes\":%zu,\"process_list\":[", d->nprocs ? d->nprocs : 1);
	for (size_t i = 0; i < d->nprocs; i++) {
		const struct tool_process *p = &d->procs[i];
		struct tool_coverage c;
		fprintf(f, "%s{\"pid\":%u,\"ppid\":%u,\"launches\":%" PRIu64 ",\"trace\":\"%s\","
			"\"cmdline\":", i ? "," : "", p->pid, p->ppid, p->launches, p->state);
		tool_json_string(f, p->cmdline);
		tool_coverage_of(d, p, &c);
		fputs(",\"coverage\":{", f);
		tool_coverage_print(&c, 1, f);
		fputs("}}", f);
	}
	fputc(']', f);
}

static void common_json(const struct tool_data *d, FILE *f)
{
	fprintf(f, "\"run\":{\"trace\":\"%s\",\"device_bytes\":%" PRIu64 ",\"pinned_bytes\":%" PRIu64
		",\"ringbuf_drops\":%" PRIu64 ",\"writer_drops\":%" PRIu64 ",\"writer_lost\":%" PRIu64
		",\"devices\":[", d->state ? d->state : "none", d->device_bytes, d->pinned_bytes,
		d->rb_drops, d->writer_drops, d->writer_lost);
	for (size_t i = 0; i < d->ndevices; i++) {
		fputs(i ? "," : "", f);
		tool_json_string(f, d->devices[i]);
	}
	fputc(']', f);
	struct tool_coverage c;
	tool_coverage_of(d, NULL, &c);
	fputs(",\"coverage\":{", f);
	tool_coverage_print(&c, 1, f);
	fputc('}', f);
	processes_json(d, f);
	fputs(",\"not_instrumented\":[", f);
	if (d->have_meta)
		kernel_list(d, f, 1, not_instrumented, true);
	fputs("],\"notes\":[", f);
	for (size_t i = 0; i < d->nnotes; i++) {
		fputs(i ? "," : "", f);
		tool_json_string(f, d->notes[i]);
	}
	fputs("],\"sanitizer_kernels\":[", f);
	if (d->have_meta)
		kernel_list(d, f, 1, sanitizer_patched, false);
	fputs("]}", f);
}

/* The run's coverage line, and each process's when there are several. */
static void coverage_text(const struct tool_data *d, FILE *f)
{
	struct tool_coverage c;
	tool_coverage_of(d, NULL, &c);
	tool_coverage_print(&c, 0, f);
	for (size_t i = 0; d->nprocs > 1 && i < d->nprocs && i < 20; i++) {
		tool_coverage_of(d, &d->procs[i], &c);
		fprintf(f, "  pid %u ", d->procs[i].pid);
		tool_coverage_print(&c, 0, f);
	}
}

void tool_report_common(const struct tool_data *d, const struct tool_opts *o, FILE *f)
{
	if (o->json) {
		common_json(d, f);
		return;
	}
	fputc('\n', f);
	for (size_t i = 0; i < d->ndevices; i++) { /* "device 0: NAME (...)", NAME the trace's */
		tool_text_put(f, d->devices[i], 0);
		fputc('\n', f);
	}
	if (d->nprocs > 1)
		processes_text(d, f);
	/* kernel ids, memory and reasons come from the trace's run metadata (format 1.2); a
	 * trace of 1.2 or later without MAP_MEMORY says no context made maps: 0 bytes */
	if ((d->have_meta || d->have_mapmem) && d->rb_state_bytes)
		fprintf(f, "maps and buffers: %" PRIu64 " device bytes (%" PRIu64 " of them ring "
			"buffer bookkeeping), %" PRIu64 " pinned host bytes\n", d->device_bytes,
			d->rb_state_bytes, d->pinned_bytes);
	else if (d->have_meta || d->have_mapmem)
		fprintf(f, "maps and buffers: %" PRIu64 " device bytes, %" PRIu64 " pinned host bytes\n",
			d->device_bytes, d->pinned_bytes);
	if (d->have_meta) {
		size_t instrumented = 0, missing = 0, patched = 0;
		for (size_t i = 0; i < d->nkernels; i++) {
			instrumented += d->kernels[i].id != 0;
			patched += sanitizer_patched(&d->kernels[i]);
			missing += not_instrumented(&d->kernels[i]);
		}
		if (patched) {
			fprintf(f, "kernels instrumented: %zu (PTX rewriting %zu, Sanitizer patching %zu)\n",
				instrumented, instrumented - patched, patched);
			fprintf(f, "kernels patched through the Sanitizer backend (SASS only):\n");
			kernel_list(d, f, 0, sanitizer_patched, false);
		} else {
			fprintf(f, "kernels instrumented: %zu\n", instrumented);
		}
		fprintf(f, "kernels launched but not instrumented: %zu\n", missing);
		kernel_list(d, f, 0, not_instrumented, true);
		if (d->nnotes)
			fprintf(f, "reasons:\n");
		size_t shown = d->nnotes < 12 ? d->nnotes : 12;
		for (size_t i = 0; i < shown; i++) { /* "live: " says nothing to a reader here */
			fputs("  - ", f);
			tool_text_put(f, d->notes[i] + (strncmp(d->notes[i], "live: ", 6) ? 0 : 6), 0);
			fputc('\n', f);
		}
		if (shown < d->nnotes)
			fprintf(f, "  ... %zu more (all of them in --json)\n", d->nnotes - shown);
		coverage_text(d, f);
	}
	if (d->rb_drops || d->writer_drops)
		fprintf(f, "lost: %" PRIu64 " ring-buffer records (device buffers full), %" PRIu64
			" trace records (writer full)\n", d->rb_drops, d->writer_drops);
	if (d->writer_lost)
		fprintf(f, "lost: %" PRIu64 " trace records the writer could not write (%s%s%s)\n",
			d->writer_lost, store_lost_cause_name(d->lost_cause), d->lost_err ? ": " : "",
			d->lost_err ? strerror(d->lost_err) : "");
	if (d->span_drops)
		fprintf(f, "note: %" PRIu64 " launches have no GPU span (cubpf's event pool was full)\n",
			d->span_drops);
	fprintf(f, "trace: %s\n", d->state ? d->state : "none");
}
