/* cubpf trace: read trace files (store/FORMAT.md).
 *   info FILE...|DIR               what the files hold, and whether they ended cleanly
 *   dump [--json] FILE...|DIR      every record, as text or as JSON lines
 *   stats FILE...|DIR              per kernel and per API call: count, total, percentiles
 *   export --format chrome|csv [-o OUT] [--no-probes] FILE...|DIR
 *   replay -p PROG.bpf.o FILE...|DIR   host eBPF programs over the recorded API calls
 * A program of many processes leaves one trace per process; every command takes several, or
 * the folders that hold them, and gives one answer for the whole run (one track per process,
 * one table over all of them). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/store.h"
#include "tools/commands.h"
#include "tools/tools.h"
#include "vm/include/cubpf_abi.h"
#include "vm/vm.h"

static const char usage_text[] =
	"usage: cubpf trace info FILE... | DIR\n"
	"       cubpf trace dump [--json] FILE... | DIR\n"
	"       cubpf trace stats FILE... | DIR\n"
	"       cubpf trace export --format chrome|csv [-o OUT] [--no-probes] FILE... | DIR\n"
	"       cubpf trace export --format sqlite -o OUT.sqlite FILE... | DIR\n"
	"       cubpf trace replay -p PROG.bpf.o FILE... | DIR\n"
	"\n"
	"  info    header, devices, probe programs, record counts, drops, size and ratio\n"
	"  dump    every record; --json gives one JSON object per line\n"
	"  stats   GPU kernel times and host API call times: count, total, mean, p50, p90, p99, max\n"
	"  export  chrome: Trace Event JSON for Perfetto or chrome://tracing (host API calls on\n"
	"          thread tracks; kernels as spans on per-stream GPU tracks, timed by the shim's\n"
	"          CUDA events where the trace has them, else an instant at the launch; copies;\n"
	"          probe events); csv: map snapshots; sqlite: one database of the whole\n"
	"          run (schema in README.md, \"Traces as SQL\")\n"
	"  replay  runs the host programs (uprobe/, uretprobe/) of PROG.bpf.o over the recorded\n"
	"          API calls on the interpreter, and prints their maps and output\n"
	"\n"
	"Several traces (one per process: `cubpf run -o FILE` writes FILE and FILE.PID, `-o DIR`\n"
	"writes DIR/cubpf-PID.trace), or folders of them (every file that is a trace, by name):\n"
	"info lists the processes and their parents first, stats merges the tables, export gives\n"
	"each process its tracks on one time axis (csv: a first column pid), dump and replay take\n"
	"the traces in turn.\n";

struct opts {
	const char **paths;         /* the FILE and DIR arguments */
	size_t npaths;
	const char *out, *format, *prog;
	int json, no_probes;
};

/* ---- shared helpers ---------------------------------------------------------------------- */

static struct store_trace_reader *open_trace(const char *path)
{
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	if (!r)
		fprintf(stderr, "cubpf trace: %s\n", err);
	return r;
}

/* The string of id as the trace has it (for JSON), or "#id" when no STRING record defines it.
 * Text output shows it through tool_text: names are the file's, not to be trusted. */
static const char *str_or(const struct store_trace_reader *r, uint32_t id, char *buf, size_t n)
{
	const char *s = store_trace_string(r, id);
	if (s)
		return s;
	snprintf(buf, n, "#%u", id);
	return buf;
}

static void hex(FILE *f, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

static const char *copy_kind_name(uint32_t k)
{
	static const char *const names[] = {"?", "HtoD", "DtoH", "DtoD", "memset", "other"};
	return k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/* How reading ended, for the user: a cut or killed trace is normal, a damaged one is not.
 * label names the file when the command reads several (NULL for one: the messages it always had). */
static int report_end(const struct store_trace_reader *r, int rc, const char *label, FILE *f)
{
	char t[TOOL_TEXT_MAX];
	const char *file = label ? tool_text(label, t, sizeof(t)) : "", *sep = label ? ": " : "";
	switch (store_trace_state(r)) {
	case STORE_TRACE_COMPLETE:
		return 0;
	case STORE_TRACE_CUT:
		fprintf(f, "note: %s%sthe trace ends inside a frame (writer killed?): %s\n", file, sep,
			store_trace_reader_error(r));
		return 0;
	case STORE_TRACE_NO_END:
		fprintf(f, "note: %s%sthe trace has no end record (writer killed or still running)\n",
			file, sep);
		return 0;
	case STORE_TRACE_DAMAGED:
		fprintf(stderr, "cubpf trace: %s%sdamaged trace: %s\n", file, sep,
			store_trace_reader_error(r));
		return 1;
	default: /* the command stopped reading (it said why) */
		return rc < 0;
	}
}

/* ---- the traces of the command line ------------------------------------------------------------
 * A program of many processes leaves one trace per process: `cubpf run -o FILE` names the first
 * process's FILE and the others' FILE.PID, `-o DIR` writes DIR/cubpf-PID.trace.  Arguments are
 * any mix of files and folders; a folder stands for its files that open as traces, by name (a
 * log or a script beside them is no error), a file named on the command line must be a trace.
 * Each trace is opened once here for its header, then again by the command. */

struct trace_in {
	char *path;
	char *cmdline, *version;
	uint32_t pid, ppid;         /* ppid: format 1.4, 0 when the trace does not say */
	uint64_t start_ns;          /* CLOCK_REALTIME, the clock of the records' host times */
	dev_t dev;
	ino_t ino;
	int named;                  /* given by name, not found in a folder */
};

struct trace_set {
	struct trace_in *t;
	size_t n, cap;
};

static void set_free(struct trace_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->t[i].path);
		free(s->t[i].cmdline);
		free(s->t[i].version);
	}
	free(s->t);
}

static int set_has_file(const struct trace_set *s, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i].dev == dev && s->t[i].ino == ino)
			return 1;
	return 0;
}

static int set_has_pid(const struct trace_set *s, uint32_t pid)
{
	for (size_t i = 0; pid && i < s->n; i++)
		if (s->t[i].pid == pid)
			return 1;
	return 0;
}

/* The file's header into a new entry of s.  0, or -1 when out of memory. */
static int set_push(struct trace_set *s, const char *path, const struct store_trace_reader *r,
		    const struct stat *st, int named)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct trace_in *p = realloc(s->t, cap * sizeof(*p));
		if (!p)
			return -1;
		s->t = p;
		s->cap = cap;
	}
	const struct store_rec_header *h = store_trace_header(r);
	const char *cmd = store_trace_header_string(r, 2), *ver = store_trace_header_string(r, 0);
	struct trace_in *t = &s->t[s->n];
	*t = (struct trace_in){.path = strdup(path), .cmdline = strdup(cmd ? cmd : ""),
			       .version = strdup(ver ? ver : ""), .pid = h->pid,
			       .ppid = store_trace_parent_pid(r), .start_ns = h->start_realtime_ns,
			       .dev = st->st_dev, .ino = st->st_ino, .named = named};
	if (!t->path || !t->cmdline || !t->version) {
		free(t->path);
		free(t->cmdline);
		free(t->version);
		return -1;
	}
	s->n++;
	return 0;
}

/* Adds path when it opens as a trace: 1 (also when it is in s already: named twice, or by its
 * folder and by name); 0 when it does not and quiet; -1 (message printed) when it does not and
 * !quiet, or out of memory.  name_it: the message names the file when the reader's does not
 * (one of several arguments; for one, the message it always was). */
static int set_add(struct trace_set *s, const char *path, int quiet, int name_it)
{
	char err[STORE_ERRLEN], t[TOOL_TEXT_MAX];
	struct stat st;
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	int rc = 1;
	if (!r) {
		if (!quiet)
			fprintf(stderr, "cubpf trace: %s%s%s\n",
				name_it && !strstr(err, path) ? tool_text(path, t, sizeof(t)) : "",
				name_it && !strstr(err, path) ? ": " : "", err);
		return quiet ? 0 : -1;
	}
	if (stat(path, &st))
		memset(&st, 0, sizeof(st)); /* gone since the open: kept, as no duplicate */
	else if (set_has_file(s, st.st_dev, st.st_ino))
		goto out;
	if (set_push(s, path, r, &st, !quiet)) {
		fprintf(stderr, "cubpf trace: out of memory\n");
		rc = -1;
	}
out:
	store_trace_close_reader(r);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "dir/name", without a second slash when dir ends in one. */
static char *path_join(const char *dir, const char *name)
{
	char *p;
	size_t n = strlen(dir);
	return asprintf(&p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0 ? NULL : p;
}

/* The regular files of dir as paths, sorted by name (strcmp: the same order in every locale);
 * NULL with errno set on failure.  Only regular files: opening a FIFO would wait for a writer. */
static char **dir_files(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **v = NULL;
	size_t cap = 0;
	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		struct stat st;
		char *p = path_join(dir, e->d_name);
		if (p && (stat(p, &st) || !S_ISREG(st.st_mode))) {
			free(p);
			continue;
		}
		if (p && *n == cap) {
			char **q = realloc(v, (cap ? cap * 2 : 16) * sizeof(*v));
			if (q) {
				v = q;
				cap = cap ? cap * 2 : 16;
			}
		}
		if (!p || *n == cap) {
			free(p);
			goto oom;
		}
		v[(*n)++] = p;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_str);
	return v ? v : calloc(1, sizeof(*v));
oom:
	closedir(d);
	while (*n)
		free(v[--*n]);
	free(v);
	errno = ENOMEM;
	return NULL;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The traces of a folder, by name; -1 (message printed) when it cannot be read or holds none. */
static int set_add_dir(struct trace_set *s, const char *dir)
{
	size_t n, found = 0;
	char **names = dir_files(dir, &n), t[TOOL_TEXT_MAX];
	int rc = 0;
	if (!names) {
		fprintf(stderr, "cubpf trace: cannot read %s: %s\n", tool_text(dir, t, sizeof(t)),
			strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < n && rc >= 0; i++)
		if ((rc = set_add(s, names[i], 1, 0)) > 0)
			found++;
	free_strings(names, n);
	if (rc >= 0 && !found) {
		fprintf(stderr, "cubpf trace: %s: no cubpf trace in this folder\n",
			tool_text(dir, t, sizeof(t)));
		return -1;
	}
	return rc < 0 ? -1 : 0;
}

/* Every argument's traces into s.  0, or -1 after saying what is wrong with each argument that
 * is (a missing path, a file that is not a trace, a folder without one): the command then reads
 * nothing, as a path typed wrong is better said before pages of output. */
static int set_resolve(const struct opts *o, struct trace_set *s)
{
	int rc = 0;
	for (size_t i = 0; i < o->npaths; i++) {
		struct stat st;
		const char *p = o->paths[i];
		int dir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
		if ((dir ? set_add_dir(s, p) : set_add(s, p, 0, o->npaths > 1)) < 0)
			rc = -1;
	}
	return rc;
}

/* The file named in messages about trace i: none when the command reads one trace, so that its
 * messages stay as they were. */
static const char *set_label(const struct trace_set *s, size_t i)
{
	return s->n > 1 ? s->t[i].path : NULL;
}

/* The earliest start: time 0 of an export, the reference of `info`'s start times. */
static uint64_t set_t0(const struct trace_set *s)
{
	uint64_t t0 = UINT64_MAX;
	for (size_t i = 0; i < s->n; i++)
		t0 = s->t[i].start_ns < t0 ? s->t[i].start_ns : t0;
	return s->n ? t0 : 0;
}

/* A heading before trace i's part of the output, when there are several. */
static void set_heading(const struct trace_set *s, size_t i, const char *what)
{
	char t[TOOL_TEXT_MAX];
	if (s->n > 1)
		printf("%s== %s %s (pid %u)\n", i ? "\n" : "", what,
		       tool_text(s->t[i].path, t, sizeof(t)), s->t[i].pid);
}

/* ---- dump ---------------------------------------------------------------------------------- */

static void dump_api(const struct store_trace_reader *r, const struct store_rec_api *a, int json,
		     FILE *f)
{
	char b[32], t[TOOL_TEXT_MAX];
	const char *name = str_or(r, a->name, b, sizeof(b));
	if (json) {
		fprintf(f, "{\"type\":\"api\",\"name\":");
		tool_json_string(f, name);
		fprintf(f, ",\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"tid\":%u,\"stream\":%" PRIu64
			   ",\"bytes\":%" PRIu64 ",\"corr\":%" PRIu64 ",\"result\":%d,\"device\":%u}\n",
			a->begin_ns, a->end_ns, a->tid, a->stream, a->bytes, a->corr, a->result, a->device);
	} else {
		fprintf(f, "api     %" PRIu64 " +%" PRIu64 "ns %s tid=%u stream=0x%" PRIx64 " bytes=%" PRIu64
			   " corr=%" PRIu64 " result=%d\n",
			a->begin_ns, a->end_ns - a->begin_ns, tool_text(name, t, sizeof(t)), a->tid, a->stream,
			a->bytes, a->corr,
			a->result);
	}
}

static void dump_kernel(const struct store_trace_reader *r, const struct store_rec_kernel *k,
			int json, FILE *f)
{
	char b[32], t[TOOL_TEXT_MAX];
	const char *name = str_or(r, k->name, b, sizeof(b));
	if (json) {
		fprintf(f, "{\"type\":\"kernel\",\"name\":");
		tool_json_string(f, name);
		fprintf(f, ",\"launch_ns\":%" PRIu64 ",\"gpu_start\":%" PRIu64 ",\"gpu_end\":%" PRIu64
			   ",\"stream\":%" PRIu64 ",\"corr\":%" PRIu64 ",\"device\":%u,\"grid\":[%u,%u,%u]"
			   ",\"block\":[%u,%u,%u],\"shared_bytes\":%u,\"tid\":%u}\n",
			k->launch_ns, k->gpu_start, k->gpu_end, k->stream, k->corr, k->device, k->grid[0],
			k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shared_bytes,
			k->tid);
	} else {
		fprintf(f, "kernel  %" PRIu64 " %s grid=%ux%ux%u block=%ux%ux%u gpu=[%" PRIu64 ",%" PRIu64
			   "] %" PRIu64 "ns stream=0x%" PRIx64 " dev=%u corr=%" PRIu64 "\n",
			k->launch_ns, tool_text(name, t, sizeof(t)), k->grid[0], k->grid[1], k->grid[2],
			k->block[0], k->block[1],
			k->block[2], k->gpu_start, k->gpu_end,
			k->gpu_end > k->gpu_start ? k->gpu_end - k->gpu_start : 0, k->stream, k->device,
			k->corr);
	}
}

static void dump_kspan(const struct store_trace_reader *r, const struct store_rec_kspan *k,
		       int json, FILE *f)
{
	char b[32], t[TOOL_TEXT_MAX];
	const char *name = str_or(r, k->name, b, sizeof(b));
	if (json) {
		fprintf(f, "{\"type\":\"kspan\",\"name\":");
		tool_json_string(f, name);
		fprintf(f, ",\"corr\":%" PRIu64 ",\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64
			   ",\"stream\":%" PRIu64 ",\"device\":%u,\"ref_uncertainty_ns\":%u}\n",
			k->corr, k->begin_ns, k->end_ns, k->stream, k->device, k->ref_uncertainty_ns);
	} else {
		fprintf(f, "kspan   %" PRIu64 " +%" PRIu64 "ns %s stream=0x%" PRIx64 " dev=%u corr=%" PRIu64
			   " +-%uns\n",
			k->begin_ns, k->end_ns - k->begin_ns, tool_text(name, t, sizeof(t)), k->stream,
			k->device, k->corr,
			k->ref_uncertainty_ns);
	}
}

static void dump_copy(const struct store_rec_copy *c, int json, FILE *f)
{
	if (json)
		fprintf(f, "{\"type\":\"copy\",\"kind\":\"%s\",\"bytes\":%" PRIu64 ",\"launch_ns\":%" PRIu64
			   ",\"gpu_start\":%" PRIu64 ",\"gpu_end\":%" PRIu64 ",\"stream\":%" PRIu64
			   ",\"corr\":%" PRIu64 ",\"device\":%u,\"tid\":%u}\n",
			copy_kind_name(c->kind), c->bytes, c->launch_ns, c->gpu_start, c->gpu_end, c->stream,
			c->corr, c->device, c->tid);
	else
		fprintf(f, "copy    %" PRIu64 " %s %" PRIu64 " bytes gpu=[%" PRIu64 ",%" PRIu64
			   "] stream=0x%" PRIx64 " dev=%u corr=%" PRIu64 "\n",
			c->launch_ns, copy_kind_name(c->kind), c->bytes, c->gpu_start, c->gpu_end, c->stream,
			c->device, c->corr);
}

static void dump_probe(const struct store_rec_probe *p, const uint8_t *d, size_t n, int json, FILE *f)
{
	if (json)
		fprintf(f, "{\"type\":\"probe\",\"ts_ns\":%" PRIu64 ",\"gpu_time\":%s,\"prog\":%u,\"map\":%u"
			   ",\"device\":%u,\"data\":\"",
			p->ts_ns, p->flags & STORE_PROBE_GPU_TIME ? "true" : "false", p->prog, p->map,
			p->device);
	else
		fprintf(f, "probe   %" PRIu64 "%s prog=%u map=%u dev=%u data=", p->ts_ns,
			p->flags & STORE_PROBE_GPU_TIME ? "(gpu)" : "", p->prog, p->map, p->device);
	hex(f, d, n);
	fputs(json ? "\"}\n" : "\n", f);
}

static void dump_map(const struct store_trace_reader *r, const struct store_rec_map *m, size_t rest,
		     int json, FILE *f)
{
	char b[32], t[TOOL_TEXT_MAX];
	const char *name = str_or(r, m->name, b, sizeof(b));
	if (json) {
		fprintf(f, "{\"type\":\"map\",\"ts_ns\":%" PRIu64 ",\"prog\":%u,\"map\":%u,\"name\":",
			m->ts_ns, m->prog, m->map);
		tool_json_string(f, name);
		fprintf(f, ",\"map_type\":%u,\"key_size\":%u,\"value_size\":%u,\"count\":%u,\"ctx\":%u}\n",
			m->map_type, m->key_size, m->value_size, m->count, m->ctx);
	} else {
		fprintf(f, "map     %" PRIu64 " %s prog=%u map=%u type=%u %u entries of %u+%u bytes (%zu bytes)",
			m->ts_ns, tool_text(name, t, sizeof(t)), m->prog, m->map, m->map_type, m->count,
			m->key_size, m->value_size,
			rest);
		fprintf(f, m->ctx ? " ctx=%u\n" : "\n", m->ctx);
	}
}

/* Format 1.2: what the shim used to say only in its log. */
static void dump_kernel_id(const struct store_trace_reader *r, const struct store_rec_kernel_id *k,
			   int json, FILE *f)
{
	char b1[32], b2[32], t1[TOOL_TEXT_MAX], t2[TOOL_TEXT_MAX];
	const char *name = str_or(r, k->name, b1, sizeof(b1));
	const char *mod = k->module ? str_or(r, k->module, b2, sizeof(b2)) : "";
	const char *backend = k->flags & STORE_KERNEL_ID_SANITIZER ? "sanitizer" : "ptx";
	if (json) {
		fprintf(f, "{\"type\":\"kernel_id\",\"id\":%u,\"name\":", k->id);
		tool_json_string(f, name);
		fputs(",\"module\":", f);
		tool_json_string(f, mod);
		fprintf(f, ",\"backend\":\"%s\"}\n", backend);
	} else {
		fprintf(f, "kid     %u %s%s%s backend=%s\n", k->id, tool_text(name, t1, sizeof(t1)),
			*mod ? " module=" : "", tool_text(mod, t2, sizeof(t2)), backend);
	}
}

static void dump_not_instrumented(const struct store_trace_reader *r,
				  const struct store_rec_not_instrumented *n, const uint8_t *p,
				  size_t rest, int json, FILE *f)
{
	char b1[32], b2[32], t1[TOOL_TEXT_MAX], t2[TOOL_TEXT_MAX];
	char *msg = store_rec_string(&p, &rest);
	const char *api = n->api ? str_or(r, n->api, b1, sizeof(b1)) : "";
	const char *label = n->label ? str_or(r, n->label, b2, sizeof(b2)) : "";
	if (json) {
		fprintf(f, "{\"type\":\"not_instrumented\",\"ts_ns\":%" PRIu64 ",\"reason\":%u,"
			   "\"reason_name\":\"%s\",\"kernels\":%u,\"sm\":%u,\"device\":%d,\"api\":",
			n->ts_ns, n->reason, store_noinst_reason_name(n->reason), n->kernels, n->sm,
			n->device == UINT32_MAX ? -1 : (int)n->device);
		tool_json_string(f, api);
		fputs(",\"label\":", f);
		tool_json_string(f, label);
		fputs(",\"message\":", f);
		tool_json_string(f, msg ? msg : "");
		fputs("}\n", f);
	} else {
		fprintf(f, "noinst  %" PRIu64 " reason=%s kernels=%u sm_%u dev=%d %s%s%s: ", n->ts_ns,
			store_noinst_reason_name(n->reason), n->kernels, n->sm,
			n->device == UINT32_MAX ? -1 : (int)n->device, tool_text(api, t1, sizeof(t1)),
			*label ? " " : "", tool_text(label, t2, sizeof(t2)));
		tool_text_put(f, msg, 0);
		fputc('\n', f);
	}
	free(msg);
}

static void dump_map_memory(const struct store_rec_map_memory *m, int json, FILE *f)
{
	fprintf(f, json ? "{\"type\":\"map_memory\",\"ts_ns\":%" PRIu64 ",\"ctx\":%u,\"context\":\"0x%"
			  PRIx64 "\",\"device\":%u,\"device_bytes\":%" PRIu64 ",\"pinned_bytes\":%" PRIu64
			  ",\"nmaps\":%u}\n"
			: "mapmem  %" PRIu64 " ctx=%u context=0x%" PRIx64 " dev=%u %" PRIu64
			  " device bytes, %" PRIu64 " pinned bytes, %u maps\n",
		m->ts_ns, m->ctx, m->context, m->device, m->device_bytes, m->pinned_bytes, m->nmaps);
}

/* A string of a record: JSON, or text escaped for the terminal. */
static void put_str(FILE *f, const char *s, int json)
{
	if (json)
		tool_json_string(f, s ? s : "");
	else
		tool_text_put(f, s ? s : "", 0);
}

static void dump_meta(const struct store_trace_record *rec, int json, FILE *f)
{
	const uint8_t *p;
	size_t n;
	union {
		struct store_rec_device d;
		struct store_rec_clock c;
		struct store_rec_program pr;
		struct store_rec_drop dr;
		struct store_rec_end e;
		struct store_rec_lost l;
	} u;
	char *s1 = NULL, *s2 = NULL;
	const char *t = store_rec_type_name(rec->type);

	switch (rec->type) {
	case STORE_REC_STRING: {
		uint32_t id = 0;
		memcpy(&id, rec->payload, rec->len >= 4 ? 4 : 0);
		char *s = strndup((const char *)rec->payload + 4, rec->len >= 4 ? rec->len - 4 : 0);
		fprintf(f, json ? "{\"type\":\"string\",\"id\":%u,\"value\":" : "string  %u ", id);
		put_str(f, s, json);
		fputs(json ? "}\n" : "\n", f);
		free(s);
		return;
	}
	case STORE_REC_DEVICE:
		if (!(p = store_rec_fixed(rec, &u.d, sizeof(u.d), &n)))
			break;
		s1 = store_rec_string(&p, &n);
		fprintf(f, json ? "{\"type\":\"device\",\"ordinal\":%u,\"sm\":%u,\"memory_bytes\":%" PRIu64
				  ",\"name\":"
				: "device  %u sm_%u %" PRIu64 " bytes ",
			u.d.ordinal, u.d.sm, u.d.memory_bytes);
		put_str(f, s1, json);
		fputs(json ? "}\n" : "\n", f);
		break;
	case STORE_REC_CLOCK:
		if (!store_rec_fixed(rec, &u.c, sizeof(u.c), NULL))
			break;
		fprintf(f, json ? "{\"type\":\"clock\",\"device\":%u,\"host_ns\":%" PRIu64 ",\"gpu_ns\":%" PRIu64
				  ",\"uncertainty_ns\":%" PRIu64 "}\n"
				: "clock   dev=%u host=%" PRIu64 " gpu=%" PRIu64 " +-%" PRIu64 "ns\n",
			u.c.device, u.c.host_ns, u.c.gpu_ns, u.c.uncertainty_ns);
		break;
	case STORE_REC_PROGRAM:
		if (!(p = store_rec_fixed(rec, &u.pr, sizeof(u.pr), &n)))
			break;
		s1 = store_rec_string(&p, &n);
		s2 = store_rec_string(&p, &n);
		fprintf(f, json ? "{\"type\":\"program\",\"index\":%u,\"name\":" : "program %u ",
			u.pr.index);
		put_str(f, s1, json);
		fputs(json ? ",\"path\":" : " ", f);
		put_str(f, s2, json);
		fputs(json ? "}\n" : "\n", f);
		break;
	case STORE_REC_DROP:
		if (!store_rec_fixed(rec, &u.dr, sizeof(u.dr), NULL))
			break;
		fprintf(f, json ? "{\"type\":\"drop\",\"ts_ns\":%" PRIu64 ",\"source\":%u,\"prog\":%u,\"map\":%u"
				  ",\"records\":%" PRIu64 ",\"batches\":%" PRIu64 "}\n"
				: "drop    %" PRIu64 " source=%u prog=%u map=%u records=%" PRIu64 " batches=%" PRIu64 "\n",
			u.dr.ts_ns, u.dr.source, u.dr.prog, u.dr.map, u.dr.records, u.dr.batches);
		break;
	case STORE_REC_END:
		if (!store_rec_fixed(rec, &u.e, sizeof(u.e), NULL))
			break;
		fprintf(f, json ? "{\"type\":\"end\",\"ts_ns\":%" PRIu64 ",\"records\":%" PRIu64
				  ",\"dropped_records\":%" PRIu64 "}\n"
				: "end     %" PRIu64 " records=%" PRIu64 " dropped=%" PRIu64 "\n",
			u.e.end_realtime_ns, u.e.records, u.e.dropped_records);
		break;
	case STORE_REC_LOST:
		if (!store_rec_fixed(rec, &u.l, sizeof(u.l), NULL))
			break;
		fprintf(f, json ? "{\"type\":\"lost\",\"ts_ns\":%" PRIu64 ",\"first_ns\":%" PRIu64
				  ",\"records\":%" PRIu64 ",\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64
				  ",\"cause\":%u,\"err\":%d}\n"
				: "lost    %" PRIu64 " first=%" PRIu64 " records=%" PRIu64 " frames=%" PRIu64
				  " bytes=%" PRIu64 " cause=%u err=%d\n",
			u.l.ts_ns, u.l.first_ns, u.l.records, u.l.frames, u.l.bytes, u.l.cause, u.l.err);
		break;
	default:
		fprintf(f, json ? "{\"type\":\"%s\",\"code\":%u,\"len\":%u}\n" : "%-7s type=%u len=%u\n", t,
			rec->type, rec->len);
	}
	free(s1);
	free(s2);
}

static void dump_record(const struct store_trace_reader *r, const struct store_trace_record *rec,
			int json, FILE *f)
{
	union {
		struct store_rec_api a;
		struct store_rec_kernel k;
		struct store_rec_copy c;
		struct store_rec_probe p;
		struct store_rec_map m;
		struct store_rec_kspan s;
		struct store_rec_kernel_id ki;
		struct store_rec_not_instrumented ni;
		struct store_rec_map_memory mm;
	} u;
	const uint8_t *d;
	size_t n;

	switch (rec->type) {
	case STORE_REC_KERNEL_ID:
		if (store_rec_fixed(rec, &u.ki, sizeof(u.ki), NULL))
			return dump_kernel_id(r, &u.ki, json, f);
		break;
	case STORE_REC_NOT_INSTRUMENTED:
		if ((d = store_rec_fixed(rec, &u.ni, sizeof(u.ni), &n)))
			return dump_not_instrumented(r, &u.ni, d, n, json, f);
		break;
	case STORE_REC_MAP_MEMORY:
		if (store_rec_fixed(rec, &u.mm, sizeof(u.mm), NULL))
			return dump_map_memory(&u.mm, json, f);
		break;
	case STORE_REC_KSPAN:
		if (store_rec_fixed(rec, &u.s, sizeof(u.s), NULL))
			return dump_kspan(r, &u.s, json, f);
		break;
	case STORE_REC_API:
		if (store_rec_fixed(rec, &u.a, sizeof(u.a), NULL))
			return dump_api(r, &u.a, json, f);
		break;
	case STORE_REC_KERNEL:
		if (store_rec_fixed(rec, &u.k, sizeof(u.k), NULL))
			return dump_kernel(r, &u.k, json, f);
		break;
	case STORE_REC_COPY:
		if (store_rec_fixed(rec, &u.c, sizeof(u.c), NULL))
			return dump_copy(&u.c, json, f);
		break;
	case STORE_REC_PROBE:
		if ((d = store_rec_fixed(rec, &u.p, sizeof(u.p), &n)))
			return dump_probe(&u.p, d, n, json, f);
		break;
	case STORE_REC_MAP:
		if (store_rec_fixed(rec, &u.m, sizeof(u.m), &n))
			return dump_map(r, &u.m, n, json, f);
		break;
	default:
		return dump_meta(rec, json, f);
	}
	fprintf(f, json ? "{\"type\":\"%s\",\"short\":true,\"len\":%u}\n" : "%s (short record, %u bytes)\n",
		store_rec_type_name(rec->type), rec->len);
}

static void dump_header(const struct store_trace_reader *r, int json)
{
	const struct store_rec_header *h = store_trace_header(r);
	if (json) {
		printf("{\"type\":\"header\",\"version\":\"%u.%u\",\"pid\":%u,\"start_realtime_ns\":%" PRIu64
		       ",\"driver_version\":%u,\"cmdline\":",
		       h->major, h->minor, h->pid, h->start_realtime_ns, h->driver_version);
		tool_json_string(stdout, store_trace_header_string(r, 2));
		printf("}\n");
	} else {
		char t0[TOOL_TEXT_MAX], t1[TOOL_TEXT_MAX];
		printf("header  v%u.%u pid=%u start=%" PRIu64 " driver=%u cubpf=%s host=%s cmd=",
		       h->major, h->minor, h->pid, h->start_realtime_ns, h->driver_version,
		       tool_text(store_trace_header_string(r, 0), t0, sizeof(t0)),
		       tool_text(store_trace_header_string(r, 1), t1, sizeof(t1)));
		tool_text_put(stdout, store_trace_header_string(r, 2), 0);
		putchar('\n');
	}
}

/* A record as a JSON line that starts with its writer's pid: with several traces, the lines of
 * one process stay selectable (jq 'select(.pid == N)').  The record is formatted as for one
 * trace into mem (a memory stream, rewound each time), then written with the member added. */
static void dump_json_pid(const struct store_trace_reader *r, const struct store_trace_record *rec,
			  uint32_t pid, FILE *mem, char *const *buf, const size_t *len)
{
	rewind(mem);
	dump_record(r, rec, 1, mem);
	if (fflush(mem) || *len < 2 || (*buf)[0] != '{') {
		dump_record(r, rec, 1, stdout); /* not expected: the record as it is */
		return;
	}
	printf("{\"pid\":%u,", pid);
	fwrite(*buf + 1, 1, *len - 1, stdout);
}

/* One trace's records; with_pid: each JSON record names the pid (several traces). */
static int dump_one(const char *path, const char *label, int json, int with_pid)
{
	struct store_trace_reader *r = open_trace(path);
	struct store_trace_record rec;
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = NULL;
	int rc;
	if (!r)
		return 1;
	if (json && with_pid && !(mem = open_memstream(&buf, &len))) {
		fprintf(stderr, "cubpf trace: out of memory\n");
		store_trace_close_reader(r);
		return 1;
	}
	dump_header(r, json);
	uint32_t pid = store_trace_header(r)->pid;
	while ((rc = store_trace_next(r, &rec)) == 1)
		if (mem)
			dump_json_pid(r, &rec, pid, mem, &buf, &len);
		else
			dump_record(r, &rec, json, stdout);
	rc = report_end(r, rc, label, stderr);
	if (mem)
		fclose(mem);
	free(buf);
	store_trace_close_reader(r);
	return rc;
}

/* Each trace in turn: text parts under a heading that names the file and pid; JSON lines
 * (whose header lines separate the traces) with a "pid" member. */
static int cmd_dump(const struct opts *o, const struct trace_set *s)
{
	int rc = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (!o->json)
			set_heading(s, i, "trace");
		fflush(stdout); /* the heading before the trace's messages on stderr */
		rc |= dump_one(s->t[i].path, set_label(s, i), o->json, s->n > 1);
	}
	return rc;
}

/* ---- info ------------------------------------------------------------------------------------ */

/* What `trace info` lists from the 1.2 records: instrumented kernels, the kernels that are not
 * and why, the maps' memory. */
struct run_meta {
	struct store_rec_kernel_id *kids;
	size_t nkids;
	char **notes;               /* "reason: message", without repeats */
	size_t nnotes;
	uint64_t device_bytes, pinned_bytes, contexts;
};

static void meta_note(struct run_meta *m, const struct store_trace_record *rec)
{
	struct store_rec_not_instrumented n;
	size_t rest;
	const uint8_t *p = store_rec_fixed(rec, &n, sizeof(n), &rest);
	char *msg = p ? store_rec_string(&p, &rest) : NULL, *line = NULL;
	if (!msg)
		return;
	const char *text = strncmp(msg, "live: ", 6) ? msg : msg + 6;
	if (asprintf(&line, "[%s] %s", store_noinst_reason_name(n.reason), text) < 0)
		line = NULL;
	free(msg);
	for (size_t i = 0; line && i < m->nnotes; i++)
		if (!strcmp(m->notes[i], line)) { /* the same module loaded again */
			free(line);
			return;
		}
	char **q = line ? realloc(m->notes, (m->nnotes + 1) * sizeof(*q)) : NULL;
	if (!q) {
		free(line);
		return;
	}
	m->notes = q;
	m->notes[m->nnotes++] = line;
}

static void meta_add(struct run_meta *m, const struct store_trace_record *rec)
{
	if (rec->type == STORE_REC_KERNEL_ID) {
		struct store_rec_kernel_id k;
		struct store_rec_kernel_id *q = realloc(m->kids, (m->nkids + 1) * sizeof(*q));
		if (q && store_rec_fixed(rec, &k, sizeof(k), NULL))
			q[m->nkids++] = k;
		m->kids = q ? q : m->kids;
	} else if (rec->type == STORE_REC_NOT_INSTRUMENTED) {
		meta_note(m, rec);
	} else if (rec->type == STORE_REC_MAP_MEMORY) {
		struct store_rec_map_memory g;
		if (store_rec_fixed(rec, &g, sizeof(g), NULL)) {
			m->device_bytes += g.device_bytes;
			m->pinned_bytes += g.pinned_bytes;
			m->contexts++;
		}
	}
}

static void meta_print(const struct run_meta *m, const struct store_trace_reader *r)
{
	char b[32], t[TOOL_TEXT_MAX];
	if (m->contexts)
		printf("maps      %" PRIu64 " device bytes, %" PRIu64 " pinned bytes in %" PRIu64
		       " context%s\n", m->device_bytes, m->pinned_bytes, m->contexts,
		       m->contexts == 1 ? "" : "s");
	if (m->nkids)
		printf("kernels   %zu instrumented (cubpf kernel ids)\n", m->nkids);
	for (size_t i = 0; i < m->nkids; i++)
		printf("  id %-5u %s\n", m->kids[i].id,
		       tool_text(str_or(r, m->kids[i].name, b, sizeof(b)), t, sizeof(t)));
	if (m->nnotes)
		printf("not instrumented (%zu):\n", m->nnotes);
	for (size_t i = 0; i < m->nnotes; i++) {
		fputs("  ", stdout);
		tool_text_put(stdout, m->notes[i], 0);
		putchar('\n');
	}
}

static void meta_free(struct run_meta *m)
{
	for (size_t i = 0; i < m->nnotes; i++)
		free(m->notes[i]);
	free(m->notes);
	free(m->kids);
}

/* LOST records (format 1.6): what the writer could not put in the file, and the latest cause. */
struct lost_sum {
	uint64_t records, frames;
	uint32_t cause;
	int32_t err;
};

static void lost_add(struct lost_sum *l, const struct store_trace_record *rec)
{
	struct store_rec_lost x;
	if (rec->type != STORE_REC_LOST || !store_rec_fixed(rec, &x, sizeof(x), NULL))
		return;
	l->records += x.records;
	l->frames += x.frames;
	l->cause = x.cause;
	l->err = x.err;
}

static void lost_print(const struct lost_sum *l)
{
	if (!l->records && !l->frames)
		return;
	printf("lost      %" PRIu64 " records in %" PRIu64 " frames the writer could not write (%s%s%s)\n",
	       l->records, l->frames, store_lost_cause_name(l->cause), l->err ? ": " : "",
	       l->err ? strerror(l->err) : "");
}

static int info_one(const char *path, const char *label)
{
	struct lost_sum lost = {0};
	struct store_trace_reader *r = open_trace(path);
	struct store_trace_record rec;
	uint64_t count[STORE_REC_MAX_KNOWN + 2] = {0}, drops = 0, dropped_batches = 0, span_drops = 0;
	uint64_t first = UINT64_MAX, last = 0;
	struct run_meta meta = {0};
	int rc;
	if (!r)
		return 1;
	const struct store_rec_header *h = store_trace_header(r);
	char t0[TOOL_TEXT_MAX], t1[TOOL_TEXT_MAX];
	printf("trace     %s (format %u.%u)\n", tool_text(path, t0, sizeof(t0)), h->major, h->minor);
	printf("process   pid %u on %s: ", h->pid, tool_text(store_trace_header_string(r, 1), t1,
							     sizeof(t1)));
	tool_text_put(stdout, store_trace_header_string(r, 2), 0);
	printf("\ncubpf     %s, driver %u\n", tool_text(store_trace_header_string(r, 0), t0, sizeof(t0)),
	       h->driver_version);
	while ((rc = store_trace_next(r, &rec)) == 1) {
		count[rec.type <= STORE_REC_MAX_KNOWN ? rec.type : STORE_REC_MAX_KNOWN + 1]++;
		meta_add(&meta, &rec);
		lost_add(&lost, &rec);
		if (rec.type == STORE_REC_DEVICE || rec.type == STORE_REC_PROGRAM ||
		    rec.type == STORE_REC_CLOCK)
			dump_meta(&rec, 0, stdout);
		if (rec.type == STORE_REC_DROP) {
			struct store_rec_drop d;
			if (store_rec_fixed(&rec, &d, sizeof(d), NULL) && d.source == STORE_DROP_SPANS) {
				span_drops += d.records;
			} else if (store_rec_fixed(&rec, &d, sizeof(d), NULL)) {
				drops += d.records;
				dropped_batches += d.batches;
			}
		}
		if (rec.type == STORE_REC_API) {
			struct store_rec_api a;
			store_rec_fixed(&rec, &a, sizeof(a), NULL);
			first = a.begin_ns < first ? a.begin_ns : first;
			last = a.end_ns > last ? a.end_ns : last;
		}
	}
	uint64_t fb, raw, frames;
	store_trace_reader_sizes(r, &fb, &raw, &frames);
	printf("records  ");
	for (int t = 1; t <= STORE_REC_MAX_KNOWN; t++)
		if (count[t])
			printf(" %s=%" PRIu64, store_rec_type_name((uint16_t)t), count[t]);
	if (count[STORE_REC_MAX_KNOWN + 1])
		printf(" unknown=%" PRIu64, count[STORE_REC_MAX_KNOWN + 1]);
	printf("\n");
	meta_print(&meta, r);
	meta_free(&meta);
	if (last > first)
		printf("span      %.6f s of host API calls\n", (double)(last - first) / 1e9);
	printf("dropped   %" PRIu64 " records in %" PRIu64 " batches\n", drops, dropped_batches);
	lost_print(&lost);
	if (count[STORE_REC_KSPAN] || span_drops)
		printf("spans     %" PRIu64 " kernel spans, %" PRIu64 " launches without one (event pool "
		       "full)\n", count[STORE_REC_KSPAN], span_drops);
	printf("size      %" PRIu64 " bytes in %" PRIu64 " frames, %" PRIu64 " bytes of records (ratio %.2f)\n",
	       fb, frames, raw, fb ? (double)raw / (double)fb : 0.0);
	static const char *const states[] = {"reading", "complete", "cut short (writer killed?)",
					     "no end record (writer killed or still running)", "damaged"};
	printf("state     %s\n", states[store_trace_state(r)]);
	rc = store_trace_state(r) == STORE_TRACE_DAMAGED ? report_end(r, rc, label, stderr) : 0;
	store_trace_close_reader(r);
	return rc;
}

/* The processes first, when there are several: who started whom (a parent pid among the listed
 * pids), when each started, what it ran. */
static void info_processes(const struct trace_set *s)
{
	uint64_t t0 = set_t0(s);
	size_t children = 0;
	for (size_t i = 0; i < s->n; i++)
		children += s->t[i].ppid != s->t[i].pid && set_has_pid(s, s->t[i].ppid);
	printf("processes: %zu (%zu started by another of them, marked *; start in seconds after the "
	       "first)\n", s->n, children);
	for (size_t i = 0; i < s->n; i++) {
		const struct trace_in *t = &s->t[i];
		char parent[24];
		if (t->ppid)
			snprintf(parent, sizeof(parent), "%u%s", t->ppid,
				 t->ppid != t->pid && set_has_pid(s, t->ppid) ? " *" : "");
		else
			snprintf(parent, sizeof(parent), "?");
		printf("  pid %-8u parent %-10s +%.6f s  ", t->pid, parent,
		       (double)(t->start_ns - t0) / 1e9);
		tool_text_put(stdout, t->cmdline, 0);
		putchar('\n');
	}
	putchar('\n');
}

/* Whether name is base.<digits>: how `cubpf run -o FILE` names the traces of the processes
 * after the first. */
static int is_sibling(const char *name, const char *base, size_t blen)
{
	if (strncmp(name, base, blen) || name[blen] != '.' || !name[blen + 1])
		return 0;
	return strspn(name + blen + 1, "0123456789") == strlen(name + blen + 1);
}

/* The other traces of the run that wrote path (FILE.PID beside it) that the command was not
 * given: a note, so that `info FILE` does not pass for the whole run. */
static void note_siblings(const struct trace_set *s, const char *path)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup("."), t[TOOL_TEXT_MAX];
	size_t n, shown = 0, more = 0;
	char **files = dir ? dir_files(dir, &n) : NULL;
	for (size_t i = 0; files && i < n; i++) {
		const char *name = strrchr(files[i], '/') + 1;
		struct stat st;
		if (!is_sibling(name, base, strlen(base)) || stat(files[i], &st) ||
		    set_has_file(s, st.st_dev, st.st_ino))
			continue;
		if (shown++ == 0)
			fputs("also:", stdout);
		if (shown <= 8) /* a job of hundreds of ranks: the first few say enough */
			printf(" %s", tool_text(slash ? files[i] : name, t, sizeof(t)));
		else
			more++;
	}
	if (more)
		printf(" and %zu more", more);
	if (shown)
		printf(" (other processes of the run); give them or the folder to see all\n");
	if (files)
		free_strings(files, n);
	free(dir);
}

/* One section per trace as for one; several: the processes first. */
static int cmd_info(const struct opts *o, const struct trace_set *s)
{
	int rc = 0;
	(void)o;
	if (s->n > 1)
		info_processes(s);
	for (size_t i = 0; i < s->n; i++) {
		if (i)
			putchar('\n');
		fflush(stdout); /* the section before its trace's messages on stderr */
		rc |= info_one(s->t[i].path, set_label(s, i));
		if (s->t[i].named)
			note_siblings(s, s->t[i].path);
	}
	return rc;
}

/* ---- stats ----------------------------------------------------------------------------------- */

/* Samples per key (a string id, a copy kind): the keys are numbered by store_ids and the series
 * kept in a dense array by number, so the table grows with the records read, never with the
 * values of the keys they carry (an id near 2^32 in a damaged trace costs one series). */
struct series {
	uint32_t key;
	uint64_t *v;
	size_t n, cap;
	uint64_t total;
};

struct table {
	struct store_ids keys;
	struct series *s;          /* by the key's number */
	size_t cap;
};

static int add_sample(struct table *t, uint32_t key, uint64_t v)
{
	long k = store_ids_add(&t->keys, key);
	if (k < 0)
		return -1;
	if ((size_t)k == t->cap) { /* a new key: the next number */
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct series *p = realloc(t->s, cap * sizeof(*p));
		if (!p)
			return -1;
		memset(p + t->cap, 0, (cap - t->cap) * sizeof(*p));
		t->s = p;
		t->cap = cap;
	}
	struct series *s = &t->s[k];
	s->key = key;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		uint64_t *p = realloc(s->v, cap * sizeof(*p));
		if (!p)
			return -1;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	s->total += v;
	return 0;
}

static int cmp_series_key(const void *a, const void *b)
{
	uint32_t x = (*(struct series *const *)a)->key, y = (*(struct series *const *)b)->key;
	return x < y ? -1 : x > y;
}

/* The table's series that hold samples (*n of them), by key (for string ids, the order of
 * first use), each sorted; NULL when out of memory.  The caller frees the array. */
static struct series **table_sorted(const struct table *t, size_t *n);

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted series. */
static uint64_t pct(const struct series *s, unsigned p)
{
	size_t rank = (s->n * p + 99) / 100;
	return s->v[rank ? rank - 1 : 0];
}

static struct series **table_sorted(const struct table *t, size_t *n)
{
	struct series **v = malloc((t->cap ? t->cap : 1) * sizeof(*v));
	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->s[i].n) {
			v[(*n)++] = &t->s[i];
			qsort(t->s[i].v, t->s[i].n, sizeof(uint64_t), cmp_u64);
		}
	qsort(v, *n, sizeof(*v), cmp_series_key);
	return v;
}

/* The names of the merged tables: the string ids of every process become one numbering by
 * name, so that a kernel that several processes ran is one row.  Open addressing on the name's
 * hash: a trace may name a million kernels. */
struct names {
	char **v;                  /* by number */
	size_t n, cap;
	uint32_t *slot;            /* number + 1; 0 = free; nslots is a power of two */
	size_t nslots;
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static size_t names_probe(const struct names *t, const char *s)
{
	size_t i = name_hash(s) & (t->nslots - 1);
	while (t->slot[i] && strcmp(t->v[t->slot[i] - 1], s))
		i = (i + 1) & (t->nslots - 1);
	return i;
}

/* Slots for twice the names, so that probes stay short. */
static int names_grow(struct names *t)
{
	size_t ns = t->nslots ? t->nslots * 2 : 256;
	char **v = realloc(t->v, ns / 2 * sizeof(*v));
	uint32_t *old = t->slot;
	if (!v)
		return -1;
	t->v = v;
	if (!(t->slot = calloc(ns, sizeof(*t->slot)))) {
		t->slot = old;
		return -1;
	}
	t->cap = ns / 2;
	t->nslots = ns;
	for (size_t k = 0; k < t->n; k++)
		t->slot[names_probe(t, t->v[k])] = (uint32_t)k + 1;
	free(old);
	return 0;
}

/* The number of s, added when new; -1 when out of memory. */
static long names_add(struct names *t, const char *s)
{
	if (t->n == t->cap && names_grow(t))
		return -1;
	size_t i = names_probe(t, s);
	if (t->slot[i])
		return t->slot[i] - 1;
	if (!(t->v[t->n] = strdup(s)))
		return -1;
	t->slot[i] = (uint32_t)++t->n;
	return (long)t->n - 1;
}

static void names_free(struct names *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	free(t->slot);
}

/* Adds one process's samples (keyed by its string ids when names is given, else by a value of
 * its own such as a copy kind) to the merged table.  The process's keys go in their order, so
 * that for one trace the rows keep the order they always had (the writer's: first use). */
static int table_merge(struct table *all, struct names *names, const struct table *one,
		       const struct store_trace_reader *r)
{
	char b[32];
	size_t n;
	struct series **v = table_sorted(one, &n);
	int rc = v ? 0 : -1;
	for (size_t i = 0; i < n && !rc; i++) {
		long k = names ? names_add(names, str_or(r, v[i]->key, b, sizeof(b))) : v[i]->key;
		for (size_t j = 0; j < v[i]->n && !rc; j++)
			rc = k < 0 ? -1 : add_sample(all, (uint32_t)k, v[i]->v[j]);
	}
	free(v);
	return rc;
}

static int print_table(const char *title, const struct table *t, const struct names *names)
{
	char nb[TOOL_TEXT_MAX];
	size_t n;
	struct series **v = table_sorted(t, &n);
	if (!v)
		return -1;
	printf("%s\n", title);
	if (!n)
		printf("  (none)\n");
	else
		printf("  %-10s %14s %12s %12s %12s %12s %12s  %s\n", "count", "total_us", "mean_us",
		       "p50_us", "p90_us", "p99_us", "max_us", "name");
	for (size_t i = 0; i < n; i++) {
		const struct series *s = v[i];
		printf("  %-10zu %14.3f %12.3f %12.3f %12.3f %12.3f %12.3f  %s\n", s->n, s->total / 1e3,
		       (double)s->total / (double)s->n / 1e3, pct(s, 50) / 1e3, pct(s, 90) / 1e3,
		       pct(s, 99) / 1e3, s->v[s->n - 1] / 1e3,
		       tool_text(names->v[s->key], nb, sizeof(nb)));
	}
	free(v);
	return 0;
}

static int print_copies(const struct table *t)
{
	size_t n;
	struct series **v = table_sorted(t, &n);
	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct series *s = v[i];
		printf("\ncopies %-6s count %zu total %.3f us p50 %.3f us max %.3f us\n",
		       copy_kind_name(s->key), s->n, s->total / 1e3, pct(s, 50) / 1e3,
		       s->v[s->n - 1] / 1e3);
	}
	free(v);
	return 0;
}

static void free_table(struct table *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->s[i].v);
	free(t->s);
	store_ids_free(&t->keys);
}

/* The tables of every trace read so far. */
struct stats {
	struct table kernels, apis, copies;
	struct names names;
	uint64_t unmeasured;
	int oom;
};

/* One trace's samples, in tables keyed by its string ids, then merged into st. */
static int stats_one(const char *path, const char *label, struct stats *st)
{
	struct store_trace_reader *r = open_trace(path);
	struct store_trace_record rec;
	struct table kernels = {0}, apis = {0}, copies = {0};
	uint64_t unmeasured = 0, spans = 0, nrec = 0;
	int rc, oom = 0;
	if (!r)
		return 1;
	while (!oom && (rc = store_trace_next(r, &rec)) == 1) {
		nrec++;
		union {
			struct store_rec_api a;
			struct store_rec_kernel k;
			struct store_rec_copy c;
			struct store_rec_kspan s;
		} u;
		if (rec.type == STORE_REC_KSPAN && store_rec_fixed(&rec, &u.s, sizeof(u.s), NULL)) {
			/* CUDA events around the launch (format 1.1) */
			oom = add_sample(&kernels, u.s.name, u.s.end_ns - u.s.begin_ns);
			spans++;
		} else if (rec.type == STORE_REC_API && store_rec_fixed(&rec, &u.a, sizeof(u.a), NULL))
			oom = add_sample(&apis, u.a.name, u.a.end_ns - u.a.begin_ns);
		else if (rec.type == STORE_REC_KERNEL && store_rec_fixed(&rec, &u.k, sizeof(u.k), NULL)) {
			if (u.k.gpu_start && u.k.gpu_end >= u.k.gpu_start)
				oom = add_sample(&kernels, u.k.name, u.k.gpu_end - u.k.gpu_start);
			else
				unmeasured++;
		} else if (rec.type == STORE_REC_COPY && store_rec_fixed(&rec, &u.c, sizeof(u.c), NULL) &&
			   u.c.gpu_start && u.c.gpu_end >= u.c.gpu_start)
			oom = add_sample(&copies, u.c.kind, u.c.gpu_end - u.c.gpu_start);
	}
	if (oom)
		fprintf(stderr, "cubpf trace stats: out of memory after %" PRIu64 " records\n", nrec);
	st->unmeasured += unmeasured > spans ? unmeasured - spans : 0;
	oom |= table_merge(&st->kernels, &st->names, &kernels, r);
	oom |= table_merge(&st->apis, &st->names, &apis, r);
	oom |= table_merge(&st->copies, NULL, &copies, r);
	st->oom |= oom;
	rc = report_end(r, rc, label, stderr);
	free_table(&kernels);
	free_table(&apis);
	free_table(&copies);
	store_trace_close_reader(r);
	return rc;
}

/* How much ran with probes (issue 30): the run's line, and each process's when there are
 * several, as the tools' reports print them. */
static int stats_coverage(const struct trace_set *s)
{
	struct tool_data d = {0};
	char err[STORE_ERRLEN];
	for (size_t i = 0; i < s->n; i++)
		if (tool_data_load_process(&d, s->t[i].path, NULL, err, sizeof(err)) != 0) {
			fprintf(stderr, "cubpf trace stats: %s\n", err);
			tool_data_free(&d);
			return 1;
		}
	printf("\n");
	if (d.have_meta) {
		struct tool_coverage c;
		tool_coverage_of(&d, NULL, &c);
		tool_coverage_print(&c, 0, stdout);
		for (size_t i = 0; d.nprocs > 1 && i < d.nprocs; i++) {
			tool_coverage_of(&d, &d.procs[i], &c);
			printf("  pid %u ", d.procs[i].pid);
			tool_coverage_print(&c, 0, stdout);
		}
	} else {
		printf("probed: not known (a trace of format 1.1 or older names no kernel ids)\n");
	}
	tool_data_free(&d);
	return 0;
}

/* One set of tables over every trace: counts and totals summed, percentiles over all samples. */
static int cmd_stats(const struct opts *o, const struct trace_set *s)
{
	struct stats st = {0};
	int rc = 0;
	(void)o;
	for (size_t i = 0; i < s->n; i++)
		rc |= stats_one(s->t[i].path, set_label(s, i), &st);
	if (s->n > 1) {
		printf("processes: %zu (pids", s->n);
		for (size_t i = 0; i < s->n; i++)
			printf(" %u", s->t[i].pid);
		printf("), tables over all of them\n\n");
	}
	st.oom |= print_table("GPU kernels (device time)", &st.kernels, &st.names);
	if (st.unmeasured)
		printf("  (%" PRIu64 " launches without device times)\n", st.unmeasured);
	printf("\n");
	st.oom |= print_table("host API calls (wall time)", &st.apis, &st.names);
	st.oom |= print_copies(&st.copies);
	rc |= stats_coverage(s);
	free_table(&st.kernels);
	free_table(&st.apis);
	free_table(&st.copies);
	names_free(&st.names);
	return rc || st.oom;
}

/* ---- export ---------------------------------------------------------------------------------- */

#define MAX_DEVICES 64
#define MAX_STREAMS 4096

/* Kernel spans (KSPAN, format 1.1) by corr, read in a first pass: a span is written when its
 * kernel ends, so it may come before or after its KERNEL record. */
struct span {
	uint64_t corr, begin, end;
	struct store_rec_kspan rec;
	int used;                           /* drawn with its KERNEL record */
};

struct chrome {
	FILE *f;
	struct span *spans;
	size_t nspans;
	const struct store_trace_reader *r;
	uint64_t t0;                        /* host ns that becomes ts 0 */
	int64_t offset[MAX_DEVICES];        /* host - gpu, from the latest clock record */
	uint64_t streams[MAX_STREAMS];      /* stream handle -> track index (+1) */
	uint32_t stream_dev[MAX_STREAMS];
	size_t nstreams;
	uint32_t pid;
	int first, no_probes;
	uint64_t nprocs, proc;              /* how many traces go into the file, this one's index */
};

#define GPU_PID(c, dev) ((c)->pid * 100u + 1000000u + (dev))

/* The id of the flow arrow from a launch call to its kernel.  corr numbers a process's launches
 * from 1, so the processes of one file would share ids and Perfetto would join a call of one to
 * a kernel of another: corr * nprocs + proc is unique, and corr itself for one trace. */
static uint64_t flow_id(const struct chrome *c, uint64_t corr)
{
	return corr * c->nprocs + c->proc;
}

static void ev_begin(struct chrome *c)
{
	fputs(c->first ? "\n" : ",\n", c->f);
	c->first = 0;
}

static double us(const struct chrome *c, uint64_t host_ns)
{
	return ((double)(int64_t)(host_ns - c->t0)) / 1e3;
}

static uint64_t gpu_to_host(const struct chrome *c, uint32_t dev, uint64_t gpu_ns)
{
	return gpu_ns + (uint64_t)c->offset[dev < MAX_DEVICES ? dev : 0];
}

static size_t stream_track(struct chrome *c, uint32_t dev, uint64_t stream)
{
	for (size_t i = 0; i < c->nstreams; i++)
		if (c->streams[i] == stream && c->stream_dev[i] == dev)
			return i + 1;
	if (c->nstreams == MAX_STREAMS)
		return 0; /* the overflow track */
	c->streams[c->nstreams] = stream;
	c->stream_dev[c->nstreams] = dev;
	char label[64];
	if (stream == 0 || stream == 1)
		snprintf(label, sizeof(label), "stream 0x%" PRIx64 " (legacy default)", stream);
	else if (stream == 2)
		snprintf(label, sizeof(label), "stream 0x2 (per-thread default)");
	else
		snprintf(label, sizeof(label), "stream 0x%" PRIx64, stream);
	ev_begin(c);
	fprintf(c->f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%zu,"
		       "\"args\":{\"name\":\"%s\"}}",
		GPU_PID(c, dev), c->nstreams + 1, label);
	return ++c->nstreams;
}

static void chrome_api(struct chrome *c, const struct store_rec_api *a)
{
	char b[32];
	ev_begin(c);
	fprintf(c->f, "{\"ph\":\"X\",\"cat\":\"api\",\"name\":");
	tool_json_string(c->f, str_or(c->r, a->name, b, sizeof(b)));
	fprintf(c->f, ",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"stream\":\"0x%" PRIx64
		      "\",\"bytes\":%" PRIu64 ",\"result\":%d,\"corr\":%" PRIu64 "}}",
		c->pid, a->tid, us(c, a->begin_ns), (double)(a->end_ns - a->begin_ns) / 1e3, a->stream,
		a->bytes, a->result, a->corr);
	if (a->corr) { /* flow arrow from the call to the work it queued */
		ev_begin(c);
		fprintf(c->f, "{\"ph\":\"s\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":%" PRIu64
			      ",\"pid\":%u,\"tid\":%u,\"ts\":%.3f}",
			flow_id(c, a->corr), c->pid, a->tid, us(c, a->begin_ns));
	}
}

/* A span on the device's stream track; times in GPU clock when measured, else an instant at
 * the host launch time. */
static void chrome_gpu_span(struct chrome *c, const char *cat, const char *name, uint32_t dev,
			    uint64_t stream, uint64_t launch_ns, uint64_t gs, uint64_t ge, uint64_t corr,
			    const char *args)
{
	size_t tid = stream_track(c, dev, stream);
	double ts = gs ? us(c, gpu_to_host(c, dev, gs)) : us(c, launch_ns);
	ev_begin(c);
	if (gs && ge >= gs)
		fprintf(c->f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", cat);
	else
		fprintf(c->f, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"%s\",\"name\":", cat);
	tool_json_string(c->f, name);
	fprintf(c->f, ",\"pid\":%u,\"tid\":%zu,\"ts\":%.3f", GPU_PID(c, dev), tid, ts);
	if (gs && ge >= gs)
		fprintf(c->f, ",\"dur\":%.3f", (double)(ge - gs) / 1e3);
	fprintf(c->f, ",\"args\":{%s}}", args);
	if (corr) {
		ev_begin(c);
		fprintf(c->f, "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":%" PRIu64
			      ",\"pid\":%u,\"tid\":%zu,\"ts\":%.3f}",
			flow_id(c, corr), GPU_PID(c, dev), tid, ts);
	}
}

static int span_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct span *)a)->corr, y = ((const struct span *)b)->corr;
	return x < y ? -1 : x > y;
}

static struct span *span_find(struct chrome *c, uint64_t corr)
{
	struct span key = {.corr = corr};
	return corr && c->nspans ? bsearch(&key, c->spans, c->nspans, sizeof(key), span_cmp) : NULL;
}

/* Pass 1: every KSPAN of the file, sorted by corr.  0, or -1 (message printed). */
static int load_spans(const char *path, struct chrome *c)
{
	struct store_trace_reader *r = open_trace(path);
	struct store_trace_record rec;
	size_t cap = 0;
	if (!r)
		return -1;
	while (store_trace_next(r, &rec) == 1) {
		struct store_rec_kspan k;
		if (rec.type != STORE_REC_KSPAN || !store_rec_fixed(&rec, &k, sizeof(k), NULL))
			continue;
		if (c->nspans == cap) {
			cap = cap ? cap * 2 : 1024;
			struct span *p = realloc(c->spans, cap * sizeof(*p));
			if (!p) {
				fprintf(stderr, "cubpf trace: out of memory\n");
				store_trace_close_reader(r);
				return -1;
			}
			c->spans = p;
		}
		c->spans[c->nspans++] = (struct span){k.corr, k.begin_ns, k.end_ns, k, 0};
	}
	store_trace_close_reader(r);
	if (c->nspans)
		qsort(c->spans, c->nspans, sizeof(*c->spans), span_cmp);
	return 0;
}

/* A kernel with a span: a complete event at the span's host times (already converted). */
static void chrome_span_x(struct chrome *c, const char *name, uint32_t dev, uint64_t stream,
			  const struct span *sp, uint64_t corr, const char *args)
{
	size_t tid = stream_track(c, dev, stream);
	ev_begin(c);
	fprintf(c->f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":");
	tool_json_string(c->f, name);
	fprintf(c->f, ",\"pid\":%u,\"tid\":%zu,\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s%s\"timing\":"
		      "\"cuda events\",\"clock_uncertainty_ns\":%u}}",
		GPU_PID(c, dev), tid, us(c, sp->begin), (double)(sp->end - sp->begin) / 1e3, args,
		*args ? "," : "", sp->rec.ref_uncertainty_ns);
	if (corr) {
		ev_begin(c);
		fprintf(c->f, "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":%" PRIu64
			      ",\"pid\":%u,\"tid\":%zu,\"ts\":%.3f}",
			flow_id(c, corr), GPU_PID(c, dev), tid, us(c, sp->begin));
	}
}

static void chrome_kernel(struct chrome *c, const struct store_rec_kernel *k)
{
	char b[32], args[256];
	const char *name = str_or(c->r, k->name, b, sizeof(b));
	snprintf(args, sizeof(args), "\"grid\":\"%ux%ux%u\",\"block\":\"%ux%ux%u\",\"shared_bytes\":%u,"
				     "\"corr\":%" PRIu64,
		 k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
		 k->shared_bytes, k->corr);
	struct span *sp = span_find(c, k->corr);
	if (sp && !sp->used && sp->end >= sp->begin) {
		sp->used = 1;
		chrome_span_x(c, name, k->device, k->stream, sp, k->corr, args);
		return;
	}
	/* no span: device times of the KERNEL record if any, else an instant at the launch */
	chrome_gpu_span(c, "kernel", name, k->device, k->stream, k->launch_ns, k->gpu_start,
			k->gpu_end, k->corr, args);
}

/* Spans whose KERNEL record is not in the file (dropped by the writer): drawn from the span. */
static void chrome_orphan_spans(struct chrome *c)
{
	char b[32], args[64];
	for (size_t i = 0; i < c->nspans; i++) {
		struct span *sp = &c->spans[i];
		if (sp->used || sp->end < sp->begin)
			continue;
		snprintf(args, sizeof(args), "\"corr\":%" PRIu64, sp->corr);
		chrome_span_x(c, str_or(c->r, sp->rec.name, b, sizeof(b)), sp->rec.device,
			      sp->rec.stream, sp, 0, args);
	}
}

static void chrome_copy(struct chrome *c, const struct store_rec_copy *k)
{
	char name[64], args[128];
	snprintf(name, sizeof(name), "memcpy %s %" PRIu64 " B", copy_kind_name(k->kind), k->bytes);
	if (k->kind == STORE_COPY_MEMSET)
		snprintf(name, sizeof(name), "memset %" PRIu64 " B", k->bytes);
	snprintf(args, sizeof(args), "\"bytes\":%" PRIu64 ",\"corr\":%" PRIu64, k->bytes, k->corr);
	chrome_gpu_span(c, "copy", name, k->device, k->stream, k->launch_ns, k->gpu_start, k->gpu_end,
			k->corr, args);
}

static void chrome_probe(struct chrome *c, const struct store_rec_probe *p, const uint8_t *d, size_t n)
{
	uint64_t t = p->flags & STORE_PROBE_GPU_TIME ? gpu_to_host(c, p->device, p->ts_ns) : p->ts_ns;
	ev_begin(c);
	fprintf(c->f, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"probe\",\"name\":\"probe %u/%u\",\"pid\":%u,"
		      "\"tid\":0,\"ts\":%.3f,\"args\":{\"data\":\"",
		p->prog, p->map, GPU_PID(c, p->device), us(c, t));
	hex(c->f, d, n > 64 ? 64 : n);
	fprintf(c->f, "%s\"}}", n > 64 ? "..." : "");
}

static void chrome_meta(struct chrome *c, const struct store_trace_record *rec)
{
	const uint8_t *p;
	size_t n;
	if (rec->type == STORE_REC_CLOCK) {
		struct store_rec_clock k;
		if (store_rec_fixed(rec, &k, sizeof(k), NULL) && k.device < MAX_DEVICES)
			c->offset[k.device] = (int64_t)(k.host_ns - k.gpu_ns);
	} else if (rec->type == STORE_REC_DEVICE) {
		struct store_rec_device d;
		if (!(p = store_rec_fixed(rec, &d, sizeof(d), &n)) || d.ordinal >= MAX_DEVICES)
			return;
		char *name = store_rec_string(&p, &n), label[300];
		snprintf(label, sizeof(label), "GPU %u (%s, sm_%u)", d.ordinal, name ? name : "?", d.sm);
		if (c->nprocs > 1) /* each process has its tracks of the GPU */
			snprintf(label + strlen(label), sizeof(label) - strlen(label), " of pid %u", c->pid);
		free(name);
		ev_begin(c);
		fprintf(c->f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":",
			GPU_PID(c, d.ordinal));
		tool_json_string(c->f, label);
		fprintf(c->f, "}},\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":0,"
			      "\"args\":{\"name\":\"probe events\"}}",
			GPU_PID(c, d.ordinal));
	} else if (rec->type == STORE_REC_DROP) {
		struct store_rec_drop d;
		if (!store_rec_fixed(rec, &d, sizeof(d), NULL))
			return;
		ev_begin(c);
		fprintf(c->f, "{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"drop\",\"name\":\"dropped %" PRIu64
			      " records\",\"pid\":%u,\"tid\":0,\"ts\":%.3f}",
			d.records, c->pid, us(c, d.ts_ns));
	} else if (rec->type == STORE_REC_NOT_INSTRUMENTED) { /* format 1.2: when and why */
		struct store_rec_not_instrumented ni;
		if (!(p = store_rec_fixed(rec, &ni, sizeof(ni), &n)))
			return;
		char *msg = store_rec_string(&p, &n);
		ev_begin(c);
		fprintf(c->f, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"cubpf\",\"name\":\"not instrumented (%s)"
			      "\",\"pid\":%u,\"tid\":0,\"ts\":%.3f,\"args\":{\"kernels\":%u,\"message\":",
			store_noinst_reason_name(ni.reason), c->pid, us(c, ni.ts_ns), ni.kernels);
		tool_json_string(c->f, msg ? msg : "");
		fputs("}}", c->f);
		free(msg);
	}
}

static void chrome_record(struct chrome *c, const struct store_trace_record *rec)
{
	union {
		struct store_rec_api a;
		struct store_rec_kernel k;
		struct store_rec_copy cp;
		struct store_rec_probe p;
	} u;
	const uint8_t *d;
	size_t n;
	if (rec->type == STORE_REC_API && store_rec_fixed(rec, &u.a, sizeof(u.a), NULL))
		chrome_api(c, &u.a);
	else if (rec->type == STORE_REC_KERNEL && store_rec_fixed(rec, &u.k, sizeof(u.k), NULL))
		chrome_kernel(c, &u.k);
	else if (rec->type == STORE_REC_COPY && store_rec_fixed(rec, &u.cp, sizeof(u.cp), NULL))
		chrome_copy(c, &u.cp);
	else if (rec->type == STORE_REC_PROBE && !c->no_probes &&
		 (d = store_rec_fixed(rec, &u.p, sizeof(u.p), &n)))
		chrome_probe(c, &u.p, d, n);
	else
		chrome_meta(c, rec);
}

/* The process's track name: its command line, and with several traces whose child it is (the
 * viewers show the pid beside the name). */
static void chrome_process_name(struct chrome *c, const struct trace_set *s, const char *cmdline)
{
	const struct trace_in *t = &s->t[c->proc];
	ev_begin(c);
	fprintf(c->f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":", c->pid);
	if (s->n > 1 && t->ppid != t->pid && set_has_pid(s, t->ppid)) {
		char *name = NULL;
		if (asprintf(&name, "%s (child of pid %u)", cmdline ? cmdline : "", t->ppid) < 0)
			name = NULL;
		tool_json_string(c->f, name ? name : cmdline);
		free(name);
	} else {
		tool_json_string(c->f, cmdline);
	}
	fprintf(c->f, "}}");
}

/* One trace's events: its host threads on the track of its pid, each GPU on a track of its own
 * (GPU_PID), times from t0, the earliest start of all the traces: the records' host times are
 * CLOCK_REALTIME of one machine, so the processes line up.  *first: no event written yet. */
static int chrome_process(FILE *f, const struct trace_set *s, size_t i, uint64_t t0, int no_probes,
			  int *first)
{
	struct store_trace_reader *r = open_trace(s->t[i].path);
	struct chrome *c = r ? calloc(1, sizeof(*c)) : NULL;
	struct store_trace_record rec;
	int rc;
	if (!c || load_spans(s->t[i].path, c) != 0) {
		if (r && !c)
			fprintf(stderr, "cubpf trace: out of memory\n");
		free(c);
		store_trace_close_reader(r);
		return 1;
	}
	*c = (struct chrome){.f = f, .spans = c->spans, .nspans = c->nspans, .r = r, .t0 = t0,
			     .pid = store_trace_header(r)->pid, .first = *first,
			     .no_probes = no_probes, .nprocs = s->n, .proc = i};
	chrome_process_name(c, s, store_trace_header_string(r, 2));
	while ((rc = store_trace_next(r, &rec)) == 1)
		chrome_record(c, &rec);
	chrome_orphan_spans(c);
	*first = c->first;
	rc = report_end(r, rc, set_label(s, i), stderr);
	free(c->spans);
	free(c);
	store_trace_close_reader(r);
	return rc;
}

static int export_chrome(const struct trace_set *s, FILE *f, int no_probes)
{
	uint64_t t0 = set_t0(s);
	int first = 1, rc = 0;
	fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"cubpf_version\":");
	tool_json_string(f, s->t[0].version);
	fprintf(f, ",\"start_realtime_ns\":%" PRIu64 "},\"traceEvents\":[", t0);
	for (size_t i = 0; i < s->n; i++)
		rc |= chrome_process(f, s, i, t0, no_probes, &first);
	fprintf(f, "\n]}\n");
	return rc;
}

/* CSV of map snapshots: one line per key/value pair.  4- and 8-byte keys and values are
 * printed as unsigned numbers (counters, histogram buckets), others in hex. */
static void csv_value(FILE *f, const uint8_t *p, uint32_t n)
{
	if (n == 4 || n == 8) {
		uint64_t v = 0;
		memcpy(&v, p, n);
		fprintf(f, "%" PRIu64, v);
	} else {
		hex(f, p, n);
	}
}

/* A text field: escaped for the terminal (so no line break either), quoted per RFC 4180 when it
 * holds a comma or a quote. */
static void csv_field(FILE *f, const char *s)
{
	char t[TOOL_TEXT_MAX];
	s = tool_text(s, t, sizeof(t));
	if (!strpbrk(s, ",\"")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++)
		fputs(*s == '"' ? "\"\"" : (char[2]){*s, 0}, f);
	fputc('"', f);
}

/* One trace's rows; pid: the first column's value when the file holds several traces, else 0
 * (no such column). */
static int csv_rows(struct store_trace_reader *r, FILE *f, uint32_t pid)
{
	struct store_trace_record rec;
	int rc;
	char b[32];
	while ((rc = store_trace_next(r, &rec)) == 1) {
		struct store_rec_map m;
		const uint8_t *p;
		size_t n;
		if (rec.type != STORE_REC_MAP || !(p = store_rec_fixed(&rec, &m, sizeof(m), &n)))
			continue;
		uint64_t pair = (uint64_t)m.key_size + m.value_size;
		for (uint32_t i = 0; i < m.count && pair && n >= pair; i++, p += pair, n -= pair) {
			if (pid)
				fprintf(f, "%u,", pid);
			fprintf(f, "%" PRIu64 ",%u,%u,", m.ts_ns, m.prog, m.map);
			csv_field(f, str_or(r, m.name, b, sizeof(b)));
			fputc(',', f);
			csv_value(f, p, m.key_size);
			fputc(',', f);
			csv_value(f, p + m.key_size, m.value_size);
			fputc('\n', f);
		}
	}
	return rc;
}

/* One table of every trace's map snapshots; with several, a first column says whose. */
static int export_csv(const struct trace_set *s, FILE *f)
{
	int rc = 0;
	fprintf(f, "%sts_ns,prog,map,name,key,value\n", s->n > 1 ? "pid," : "");
	for (size_t i = 0; i < s->n; i++) {
		struct store_trace_reader *r = open_trace(s->t[i].path);
		if (!r) {
			rc = 1;
			continue;
		}
		int n = csv_rows(r, f, s->n > 1 ? s->t[i].pid : 0);
		rc |= report_end(r, n, set_label(s, i), stderr);
		store_trace_close_reader(r);
	}
	return rc;
}

static int check_export(const struct opts *o)
{
	int chrome = o->format && !strcmp(o->format, "chrome");
	int sqlite = o->format && !strcmp(o->format, "sqlite");
	if (!o->format || (!chrome && !sqlite && strcmp(o->format, "csv"))) {
		fprintf(stderr, "cubpf trace export: --format chrome, csv or sqlite is required\n");
		return 2;
	}
	if (sqlite && (!o->out || !strcmp(o->out, "-"))) {
		fprintf(stderr, "cubpf trace export: --format sqlite writes a database: -o FILE is "
				"required\n");
		return 2;
	}
	return 0;
}

/* sqlite: tools/cmd_export_sqlite.c reads the traces itself (whole database or none). */
static int export_sqlite(const struct opts *o, const struct trace_set *s)
{
	const char **paths = calloc(s->n ? s->n : 1, sizeof(*paths));
	if (!paths) {
		fprintf(stderr, "cubpf trace export: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < s->n; i++)
		paths[i] = s->t[i].path;
	int rc = cmd_export_sqlite(o->out, paths, s->n);
	free(paths);
	return rc;
}

static int cmd_export(const struct opts *o, const struct trace_set *s)
{
	if (!strcmp(o->format, "sqlite"))
		return export_sqlite(o, s);
	FILE *f = o->out && strcmp(o->out, "-") ? fopen(o->out, "w") : stdout;
	if (!f) {
		perror(o->out);
		return 1;
	}
	int rc = strcmp(o->format, "chrome") ? export_csv(s, f) : export_chrome(s, f, o->no_probes);
	if (f != stdout && fclose(f)) {
		perror(o->out);
		rc = 1;
	}
	return rc;
}

/* ---- replay ------------------------------------------------------------------------------------
 * Host programs (uprobe/uretprobe) of an object run on vm/'s interpreter over the recorded API
 * calls, in file order, with the context the shim gave them live: arguments (when the trace
 * has them), result, time, thread.  Their maps, ring buffers and trace_printk lines are printed
 * as `cubpf run` prints them.  GPU programs (kprobe, kretprobe, memprobe) ran on the device and
 * are not replayed; helpers that read the clock give the replay's time, not the recorded one. */

struct replay {
	struct vm_object *obj;
	struct vm_runtime *rt;
	struct vm_exec **ex;         /* by program index; NULL for programs not replayed */
	uint64_t calls, runs, faults;
};

static void replay_printk(void *user, const char *line)
{
	(void)user;
	fputs("printk: ", stdout);
	tool_text_put(stdout, line, 0);
	putchar('\n');
}

static void print_bytes(const uint8_t *p, uint32_t n)
{
	if (n == 4 || n == 8) {
		uint64_t v = 0;
		memcpy(&v, p, n);
		printf("%" PRIu64, v);
	} else {
		hex(stdout, p, n);
	}
}

static void drain_ringbufs(struct replay *rp)
{
	uint8_t buf[65536];
	char t[TOOL_TEXT_MAX];
	for (uint32_t m = 0; m < rp->obj->map_cnt; m++) {
		if (rp->obj->maps[m].type != CUBPF_MAP_RINGBUF && rp->obj->maps[m].type != CUBPF_MAP_GPU_RINGBUF)
			continue;
		size_t n;
		while ((n = vm_ringbuf_consume(rp->rt, m, buf, sizeof(buf))) > 0) {
			printf("ringbuf %s: ", tool_text(rp->obj->maps[m].name, t, sizeof(t)));
			hex(stdout, buf, n);
			printf("\n");
		}
	}
}

static void print_maps(struct replay *rp)
{
	for (uint32_t m = 0; m < rp->obj->map_cnt; m++) {
		const struct vm_map_def *d = &rp->obj->maps[m];
		if (d->origin != VM_MAP_USER || d->type == CUBPF_MAP_RINGBUF || d->type == CUBPF_MAP_GPU_RINGBUF)
			continue;
		uint8_t key[512], next[512], val[4096];
		if (d->key_size > sizeof(key) || d->value_size > sizeof(val))
			continue;
		char t[TOOL_TEXT_MAX];
		printf("map %s:\n", tool_text(d->name, t, sizeof(t)));
		const void *k = NULL;
		while (vm_map_next_key(rp->rt, m, k, next) == 0) {
			memcpy(key, next, d->key_size);
			k = key;
			if (vm_map_lookup(rp->rt, m, key, val) != 0)
				continue;
			int zero = 1;
			for (uint32_t i = 0; i < d->value_size; i++)
				zero &= val[i] == 0;
			if (zero && d->type != CUBPF_MAP_HASH)
				continue; /* arrays: only the slots a program wrote */
			printf("  ");
			print_bytes(key, d->key_size);
			printf(": ");
			print_bytes(val, d->value_size);
			printf("\n");
		}
	}
}

static void replay_call(struct replay *rp, const struct store_trace_reader *r,
			const struct store_trace_record *rec, const struct store_rec_api *a)
{
	const char *name = store_trace_string(r, a->name);
	struct cubpf_api_ctx ctx;
	uint64_t args[16];
	uint32_t func_id = 0;
	int n = store_rec_api_args(rec, &func_id, args);

	if (!name)
		return;
	rp->calls++;
	for (int pass = 0; pass < 2; pass++) {
		enum vm_prog_kind want = pass ? VM_PROG_URETPROBE : VM_PROG_UPROBE;
		for (uint32_t i = 0; i < rp->obj->prog_cnt; i++) {
			const struct vm_prog *pr = &rp->obj->progs[i];
			if (!rp->ex[i] || pr->kind != want || fnmatch(pr->attach, name, 0))
				continue;
			memset(&ctx, 0, sizeof(ctx));
			if (n > 0)
				memcpy(ctx.args, args, (size_t)n * 8);
			ctx.nargs = n > 0 ? (uint32_t)n : 0;
			ctx.ret = pass ? (uint64_t)(int64_t)a->result : 0;
			ctx.ts_ns = pass ? a->end_ns : a->begin_ns;
			ctx.func_id = func_id;
			ctx.tid = a->tid;
			uint64_t ret;
			char err[256];
			if (vm_exec_run(rp->ex[i], &ctx, sizeof(ctx), &ret, err, sizeof(err))) {
				if (rp->faults++ < 5)
					tool_warn("cubpf trace replay: %s: %s", pr->name, err);
			}
			rp->runs++;
		}
	}
	drain_ringbufs(rp);
}

/* Loads, verifies and prepares the host programs; returns how many, or -1.  quiet: the GPU
 * programs were named already (an earlier trace of the same command). */
static int replay_prepare(struct replay *rp, const char *path, int quiet)
{
	char err[STORE_ERRLEN], log[4096];
	int host = 0;
	if (vm_object_load_file(path, &rp->obj, err, sizeof(err))) {
		tool_warn("cubpf trace replay: %s", err);
		return -1;
	}
	if (!(rp->rt = vm_runtime_new(rp->obj, err, sizeof(err)))) {
		tool_warn("cubpf trace replay: %s", err);
		return -1;
	}
	struct vm_output out = {.printk = replay_printk};
	vm_runtime_set_output(rp->rt, &out);
	rp->ex = calloc(rp->obj->prog_cnt ? rp->obj->prog_cnt : 1, sizeof(*rp->ex));
	if (!rp->ex)
		return -1;
	for (uint32_t i = 0; i < rp->obj->prog_cnt; i++) {
		const struct vm_prog *pr = &rp->obj->progs[i];
		if (pr->kind != VM_PROG_UPROBE && pr->kind != VM_PROG_URETPROBE) {
			if (!quiet)
				tool_warn("cubpf trace replay: %s (%s) runs on the GPU: not replayed", pr->name,
				  pr->section);
			continue;
		}
		if (vm_verify(rp->obj, i, NULL, NULL, log, sizeof(log))) {
			tool_warn("cubpf trace replay: %s rejected by the verifier:", pr->name);
			tool_text_put(stderr, log, 1);
			fputc('\n', stderr);
			return -1;
		}
		if (!(rp->ex[i] = vm_exec_new(rp->rt, i, err, sizeof(err)))) {
			tool_warn("cubpf trace replay: %s: %s", pr->name, err);
			return -1;
		}
		host++;
	}
	return host;
}

static void replay_free(struct replay *rp)
{
	for (uint32_t i = 0; rp->ex && rp->obj && i < rp->obj->prog_cnt; i++)
		vm_exec_free(rp->ex[i]);
	free(rp->ex);
	if (rp->rt)
		vm_runtime_free(rp->rt);
	if (rp->obj)
		vm_object_free(rp->obj);
}

/* One trace replayed with fresh programs and maps (each process ran its own): 0, 1 when the
 * trace is damaged, -1 when the object cannot be replayed (no use trying the next trace). */
static int replay_one(const struct opts *o, const char *path, const char *label, int quiet)
{
	struct replay rp = {0};
	struct store_trace_record rec;
	int rc = -1, n;
	struct store_trace_reader *r = open_trace(path);
	if (!r)
		return 1;
	if ((n = replay_prepare(&rp, o->prog, quiet)) < 0)
		goto out;
	if (n == 0) {
		fprintf(stderr, "cubpf trace replay: %s has no host programs (uprobe/, uretprobe/)\n", o->prog);
		goto out;
	}
	while ((rc = store_trace_next(r, &rec)) == 1) {
		struct store_rec_api a;
		if (rec.type == STORE_REC_API && store_rec_fixed(&rec, &a, sizeof(a), NULL))
			replay_call(&rp, r, &rec, &a);
	}
	rc = report_end(r, rc, label, stderr);
	print_maps(&rp);
	printf("replayed %" PRIu64 " API calls: %" PRIu64 " program runs, %" PRIu64 " faults\n", rp.calls,
	       rp.runs, rp.faults);
out:
	replay_free(&rp);
	store_trace_close_reader(r);
	return rc;
}

static int check_replay(const struct opts *o)
{
	if (!o->prog) {
		fprintf(stderr, "cubpf trace replay: -p PROG.bpf.o is required\n");
		return 2;
	}
	return 0;
}

/* Each trace in turn, under a heading when there are several. */
static int cmd_replay(const struct opts *o, const struct trace_set *s)
{
	int rc = 0;
	for (size_t i = 0; i < s->n && rc >= 0; i++) {
		set_heading(s, i, "replay");
		fflush(stdout);
		int one = replay_one(o, s->t[i].path, set_label(s, i), i > 0);
		rc = one < 0 ? -1 : rc | one;
	}
	return rc != 0;
}

/* ---- arguments ---------------------------------------------------------------------------------- */

static int parse(int argc, char **argv, struct opts *o)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json"))
			o->json = 1;
		else if (!strcmp(a, "--no-probes"))
			o->no_probes = 1;
		else if ((!strcmp(a, "--format") || !strcmp(a, "-f")) && i + 1 < argc)
			o->format = argv[++i];
		else if (!strncmp(a, "--format=", 9))
			o->format = a + 9;
		else if (!strcmp(a, "-o") && i + 1 < argc)
			o->out = argv[++i];
		else if (!strcmp(a, "-p") && i + 1 < argc)
			o->prog = argv[++i];
		else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "cubpf trace: unknown or incomplete option '%s'\n", a);
			return -1;
		} else
			o->paths[o->npaths++] = a;
	}
	if (!o->npaths) {
		fprintf(stderr, "cubpf trace %s: FILE or DIR is missing\n%s", argv[1], usage_text);
		return -1;
	}
	return 0;
}

/* Options, then the traces the paths stand for, then the subcommand: a wrong option is said
 * before any file is read. */
static int run_sub(int argc, char **argv, int (*check)(const struct opts *),
		   int (*fn)(const struct opts *, const struct trace_set *))
{
	struct opts o = {.paths = calloc((size_t)argc, sizeof(char *))};
	struct trace_set s = {0};
	int rc;
	if (!o.paths) {
		fprintf(stderr, "cubpf trace: out of memory\n");
		return 1;
	}
	if (parse(argc, argv, &o))
		rc = 2;
	else if (check && (rc = check(&o)))
		;
	else
		rc = set_resolve(&o, &s) ? 1 : fn(&o, &s);
	set_free(&s);
	free(o.paths);
	return rc;
}

int cmd_trace(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*check)(const struct opts *);
		int (*fn)(const struct opts *, const struct trace_set *);
	} subs[] = {{"info", NULL, cmd_info},
		    {"dump", NULL, cmd_dump},
		    {"stats", NULL, cmd_stats},
		    {"export", check_export, cmd_export},
		    {"replay", check_replay, cmd_replay}};

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return 0;
		}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (!strcmp(argv[1], subs[i].name))
			return run_sub(argc, argv, subs[i].check, subs[i].fn);
	fprintf(stderr, "cubpf trace: unknown subcommand '%s'\n%s", argv[1], usage_text);
	return 2;
}
