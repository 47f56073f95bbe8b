/* tools/cmd_export_sqlite.c: `cubpf trace export --format sqlite -o OUT.sqlite TRACE...|DIR`.
 *
 * One SQLite database for the traces of a run (one per process), on one time axis: every host
 * time stays the trace's CLOCK_REALTIME nanoseconds (the clock every process of a machine
 * shares), GPU times (%globaltimer) are turned into host times with the process's latest CLOCK
 * record of the device, as the tools do.  The schema is documented beside its writer in the
 * SCHEMA text below, which README.md and store/FORMAT.md quote; it is created from that text,
 * so the documentation cannot drift from the database.
 *
 * What it promises: the database appears at OUT whole or not at all.  It is written to a
 * temporary file beside OUT (journal off: nobody else sees it) and renamed over OUT at the end;
 * a damaged trace, a full disk or any SQLite error removes the temporary file and says one line
 * on stderr.  A trace that was cut or has no end (a killed writer) is exported up to its last
 * whole frame, with the state in `processes.state`, as `cubpf trace` reads it.
 *
 * Map snapshots: the shim writes a map's contents every interval; the database keeps the latest
 * of each map, context and process (what the tools' reports read), per key, with the value's
 * u64 words summed over the per-SM copies in `map_words`, so that SQL can read counters. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sqlite3.h"
#include "store/store.h"
#include "tools/commands.h"
#include "tools/tools.h"
#include "vm/include/cubpf_abi.h"

#define XS_SCHEMA_VERSION 1
#define XS_APP_ID 0x63425058 /* "cBPX": a cubpf export (the module cache is "cBPF") */
#define XS_MAX_DEVICES 64

/* The schema; README.md ("Traces as SQL") lists what each table holds. */
static const char xs_schema[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);\n"
	"CREATE TABLE processes(pid INTEGER, ppid INTEGER, cmdline TEXT, host TEXT,"
	" cubpf_version TEXT, format TEXT, driver_version INTEGER, start_ns INTEGER,"
	" end_ns INTEGER, state TEXT, records INTEGER, dropped_records INTEGER,"
	" dropped_batches INTEGER, file_bytes INTEGER, trace TEXT);\n"
	"CREATE TABLE devices(pid INTEGER, device INTEGER, name TEXT, sm INTEGER,"
	" memory_bytes INTEGER, uuid TEXT);\n"
	"CREATE TABLE clocks(pid INTEGER, device INTEGER, host_ns INTEGER, gpu_ns INTEGER,"
	" uncertainty_ns INTEGER);\n"
	"CREATE TABLE contexts(pid INTEGER, ctx INTEGER, context INTEGER, device INTEGER,"
	" device_bytes INTEGER, pinned_bytes INTEGER, ringbuf_state_bytes INTEGER, nmaps INTEGER,"
	" ts_ns INTEGER);\n"
	"CREATE TABLE streams(pid INTEGER, device INTEGER, stream INTEGER, launches INTEGER,"
	" copies INTEGER, api_calls INTEGER);\n"
	"CREATE TABLE kernels(id INTEGER PRIMARY KEY, name TEXT UNIQUE, demangled TEXT,"
	" short_name TEXT);\n"
	"CREATE TABLE kernel_ids(pid INTEGER, cubpf_id INTEGER, kernel INTEGER REFERENCES kernels,"
	" module TEXT);\n"
	"CREATE TABLE programs(pid INTEGER, prog INTEGER, name TEXT, path TEXT, hash TEXT,"
	" nmaps INTEGER);\n"
	"CREATE TABLE launches(pid INTEGER, corr INTEGER, kernel INTEGER REFERENCES kernels,"
	" device INTEGER, stream INTEGER, tid INTEGER, launch_ns INTEGER, gpu_start_ns INTEGER,"
	" gpu_end_ns INTEGER, timing TEXT, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,"
	" block_x INTEGER, block_y INTEGER, block_z INTEGER, threads INTEGER,"
	" shared_bytes INTEGER);\n"
	"CREATE TABLE kernel_spans(pid INTEGER, corr INTEGER, kernel INTEGER REFERENCES kernels,"
	" device INTEGER, stream INTEGER, begin_ns INTEGER, end_ns INTEGER,"
	" ref_uncertainty_ns INTEGER);\n"
	"CREATE TABLE copies(pid INTEGER, corr INTEGER, kind TEXT, bytes INTEGER, device INTEGER,"
	" stream INTEGER, tid INTEGER, launch_ns INTEGER, gpu_start_ns INTEGER,"
	" gpu_end_ns INTEGER);\n"
	"CREATE TABLE api_calls(pid INTEGER, tid INTEGER, name TEXT, begin_ns INTEGER,"
	" end_ns INTEGER, result INTEGER, device INTEGER, stream INTEGER, bytes INTEGER,"
	" corr INTEGER, func_id INTEGER, nargs INTEGER);\n"
	"CREATE TABLE not_instrumented(pid INTEGER, ts_ns INTEGER, reason INTEGER, why TEXT,"
	" kernels INTEGER, sm INTEGER, device INTEGER, api TEXT, label TEXT, message TEXT);\n"
	"CREATE TABLE maps(id INTEGER PRIMARY KEY, pid INTEGER, prog INTEGER, map INTEGER,"
	" name TEXT, map_type INTEGER, host INTEGER, ctx INTEGER, device INTEGER, ts_ns INTEGER,"
	" key_size INTEGER, value_size INTEGER, copies INTEGER, entries INTEGER);\n"
	"CREATE TABLE map_entries(map INTEGER REFERENCES maps, key_int INTEGER, key BLOB,"
	" value BLOB);\n"
	"CREATE TABLE map_words(map INTEGER REFERENCES maps, key_int INTEGER, word INTEGER,"
	" value INTEGER);\n"
	"CREATE TABLE ringbufs(pid INTEGER, prog INTEGER, map INTEGER, name TEXT, device INTEGER,"
	" ts_ns INTEGER, taken INTEGER, dropped INTEGER, syncs INTEGER, sync_busy INTEGER);\n"
	"CREATE TABLE ringbuf_records(pid INTEGER, prog INTEGER, map INTEGER, device INTEGER,"
	" ts_ns INTEGER, gpu_time INTEGER, data BLOB);\n"
	"CREATE TABLE kernel_exits(pid INTEGER, ts_ns INTEGER, cubpf_id INTEGER,"
	" tid_x INTEGER, tid_y INTEGER, tid_z INTEGER, ctaid_x INTEGER, ctaid_y INTEGER,"
	" ctaid_z INTEGER, ntid_x INTEGER, ntid_y INTEGER);\n"
	"CREATE TABLE drops(pid INTEGER, ts_ns INTEGER, source TEXT, prog INTEGER, map INTEGER,"
	" records INTEGER, batches INTEGER, bytes INTEGER);\n";

/* Indexes and views, made after the rows are in (faster than keeping indexes up per row). */
static const char xs_finish[] =
	"CREATE INDEX kernel_spans_corr ON kernel_spans(pid, corr);\n"
	"UPDATE launches SET gpu_start_ns = s.begin_ns, gpu_end_ns = s.end_ns, timing = 'events'"
	" FROM kernel_spans s WHERE s.pid = launches.pid AND s.corr = launches.corr"
	" AND launches.gpu_start_ns IS NULL AND launches.corr != 0;\n"
	"CREATE INDEX launches_kernel ON launches(kernel, gpu_start_ns);\n"
	"CREATE INDEX launches_corr ON launches(pid, corr);\n"
	"CREATE INDEX launches_time ON launches(launch_ns);\n"
	"CREATE INDEX api_calls_name ON api_calls(name);\n"
	"CREATE INDEX api_calls_corr ON api_calls(pid, corr);\n"
	"CREATE INDEX api_calls_time ON api_calls(begin_ns);\n"
	"CREATE INDEX kernel_ids_id ON kernel_ids(pid, cubpf_id);\n"
	"CREATE INDEX map_entries_map ON map_entries(map, key_int);\n"
	"CREATE INDEX map_words_map ON map_words(map, key_int, word);\n"
	"CREATE INDEX maps_name ON maps(name, pid);\n"
	"INSERT INTO streams SELECT pid, device, stream, SUM(l), SUM(c), SUM(a) FROM ("
	" SELECT pid, device, stream, 1 AS l, 0 AS c, 0 AS a FROM launches"
	" UNION ALL SELECT pid, device, stream, 0, 1, 0 FROM copies"
	" UNION ALL SELECT pid, device, stream, 0, 0, 1 FROM api_calls WHERE stream != 0)"
	" GROUP BY pid, device, stream;\n"
	"CREATE VIEW gpu_kernel_times AS"
	" SELECT pid, kernel, end_ns - begin_ns AS duration_ns, 'events' AS source"
	" FROM kernel_spans"
	" UNION ALL SELECT pid, kernel, gpu_end_ns - gpu_start_ns, 'globaltimer' FROM launches"
	" WHERE timing = 'globaltimer';\n"
	"CREATE VIEW module_loads AS SELECT * FROM api_calls WHERE name LIKE 'cuModuleLoad%'"
	" OR name LIKE 'cuLibraryLoad%' OR name LIKE 'cuLinkComplete%';\n"
	"CREATE VIEW modules AS SELECT pid, module, COUNT(*) AS instrumented_kernels"
	" FROM kernel_ids GROUP BY pid, module;\n";

enum xs_stmt {
	XS_PROC, XS_DEV, XS_CLOCK, XS_CTX, XS_KINS, XS_KSEL, XS_KID, XS_PROG, XS_LAUNCH, XS_SPAN,
	XS_COPY, XS_API, XS_NOINST, XS_MAP, XS_ENTRY, XS_WORD, XS_RB, XS_RBREC, XS_EXIT, XS_DROP,
	XS_META, XS_NSTMT
};

static const char *const xs_inserts[XS_NSTMT] = {
	[XS_PROC] = "INSERT INTO processes VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[XS_DEV] = "INSERT INTO devices VALUES(?,?,?,?,?,?)",
	[XS_CLOCK] = "INSERT INTO clocks VALUES(?,?,?,?,?)",
	[XS_CTX] = "INSERT INTO contexts VALUES(?,?,?,?,?,?,?,?,?)",
	[XS_KINS] = "INSERT OR IGNORE INTO kernels(name, demangled, short_name) VALUES(?,?,?)",
	[XS_KSEL] = "SELECT id FROM kernels WHERE name = ?",
	[XS_KID] = "INSERT INTO kernel_ids VALUES(?,?,?,?)",
	[XS_PROG] = "INSERT INTO programs VALUES(?,?,?,?,?,?)",
	[XS_LAUNCH] = "INSERT INTO launches VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[XS_SPAN] = "INSERT INTO kernel_spans VALUES(?,?,?,?,?,?,?,?)",
	[XS_COPY] = "INSERT INTO copies VALUES(?,?,?,?,?,?,?,?,?,?)",
	[XS_API] = "INSERT INTO api_calls VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
	[XS_NOINST] = "INSERT INTO not_instrumented VALUES(?,?,?,?,?,?,?,?,?,?)",
	[XS_MAP] = "INSERT INTO maps(pid, prog, map, name, map_type, host, ctx, device, ts_ns,"
		   " key_size, value_size, copies, entries) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[XS_ENTRY] = "INSERT INTO map_entries VALUES(?,?,?,?)",
	[XS_WORD] = "INSERT INTO map_words VALUES(?,?,?,?)",
	[XS_RB] = "INSERT INTO ringbufs VALUES(?,?,?,?,?,?,?,?,?,?)",
	[XS_RBREC] = "INSERT INTO ringbuf_records VALUES(?,?,?,?,?,?,?)",
	[XS_EXIT] = "INSERT INTO kernel_exits VALUES(?,?,?,?,?,?,?,?,?,?,?)",
	[XS_DROP] = "INSERT INTO drops VALUES(?,?,?,?,?,?,?,?)",
	[XS_META] = "INSERT OR REPLACE INTO meta VALUES(?,?)",
};

/* The latest snapshot of one map of the process being read (a copy of the MAP record). */
struct xs_snap {
	uint32_t prog, map, ctx, host;
	uint8_t *rec;               /* payload copy */
	size_t len;
};

/* One process being read: the trace's string ids of kernels -> kernels.id, the latest CLOCK
 * of each device, the latest map snapshots, which programs are kernelretsnoop's. */
struct xs_proc {
	uint32_t pid;
	struct store_ids kids;
	int64_t *krow;
	size_t kcap;
	struct store_rec_clock clock[XS_MAX_DEVICES];
	uint32_t *ctx_device;       /* [ctx] = device + 1 */
	size_t nctx;
	struct xs_snap *snaps;
	size_t nsnaps;
	uint64_t exit_progs;        /* bit i: program i is kernelretsnoop */
};

struct xs {
	sqlite3 *db;
	sqlite3_stmt *st[XS_NSTMT];
	char err[512];
	const struct store_trace_reader *r;
	struct xs_proc p;
};

/* ---- small SQLite helpers ------------------------------------------------------------------- */

static int xs_fail(struct xs *x, const char *what)
{
	if (!x->err[0])
		snprintf(x->err, sizeof(x->err), "%s: %s", what, sqlite3_errmsg(x->db));
	return -1;
}

static int xs_exec(struct xs *x, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(x->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	snprintf(x->err, sizeof(x->err), "SQLite: %s", msg ? msg : sqlite3_errmsg(x->db));
	sqlite3_free(msg);
	return -1;
}

/* Binds the arguments: 'i' int64, 'u' uint64 (as int64: SQLite has no unsigned; times and
 * handles stay below 2^63), 't' text (NULL = SQL NULL), 'b' blob (pointer, size_t), 'n' NULL,
 * '_' left as the caller bound it (bindings outlive a reset). */
static int xs_row(struct xs *x, enum xs_stmt s, const char *types, ...)
{
	sqlite3_stmt *st = x->st[s];
	va_list ap;
	va_start(ap, types);
	for (int i = 0; types[i]; i++) {
		int c = i + 1;
		switch (types[i]) {
		case 'i': sqlite3_bind_int64(st, c, va_arg(ap, int64_t)); break;
		case 'u': sqlite3_bind_int64(st, c, (int64_t)va_arg(ap, uint64_t)); break;
		case 't': {
			const char *t = va_arg(ap, const char *);
			if (t)
				sqlite3_bind_text(st, c, t, -1, SQLITE_TRANSIENT);
			else
				sqlite3_bind_null(st, c);
			break;
		}
		case 'b': {
			const void *p = va_arg(ap, const void *);
			size_t n = va_arg(ap, size_t);
			sqlite3_bind_blob64(st, c, p ? p : "", n, SQLITE_TRANSIENT);
			break;
		}
		case '_': break; /* bound by the caller */
		default: sqlite3_bind_null(st, c); break;
		}
	}
	va_end(ap);
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : xs_fail(x, "SQLite insert");
}

static const char *xs_str(const struct xs *x, uint32_t id)
{
	return id ? store_trace_string(x->r, id) : NULL;
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* The kernels.id of the trace's string id (a mangled name), added when new: a kernel that
 * several processes ran is one row.  -1 on error. */
static int64_t xs_kernel(struct xs *x, uint32_t name)
{
	long k = store_ids_add(&x->p.kids, name);
	if (k < 0)
		return xs_fail(x, "out of memory");
	if ((size_t)k >= x->p.kcap) {
		size_t cap = x->p.kcap ? x->p.kcap * 2 : 64;
		int64_t *v = realloc(x->p.krow, cap * sizeof(*v));
		if (!v)
			return xs_fail(x, "out of memory");
		memset(v + x->p.kcap, 0, (cap - x->p.kcap) * sizeof(*v));
		x->p.krow = v, x->p.kcap = cap;
	}
	if (x->p.krow[k])
		return x->p.krow[k];
	char num[32], sn[TOOL_TEXT_MAX];
	const char *s = xs_str(x, name);
	if (!s)
		snprintf(num, sizeof(num), "#%u", name), s = num;
	char *dm = tool_demangle(s);
	int rc = xs_row(x, XS_KINS, "ttt", s, dm ? dm : s, tool_short_name(s, sn, sizeof(sn)));
	free(dm);
	if (rc)
		return -1;
	sqlite3_bind_text(x->st[XS_KSEL], 1, s, -1, SQLITE_TRANSIENT);
	int64_t id = sqlite3_step(x->st[XS_KSEL]) == SQLITE_ROW
			     ? sqlite3_column_int64(x->st[XS_KSEL], 0) : -1;
	sqlite3_reset(x->st[XS_KSEL]);
	return id < 0 ? xs_fail(x, "SQLite kernel lookup") : (x->p.krow[k] = id);
}

/* A GPU time (%globaltimer) as host time, with the device's latest CLOCK; unchanged without. */
static uint64_t xs_gpu_to_host(const struct xs *x, uint32_t dev, uint64_t t)
{
	const struct store_rec_clock *c = dev < XS_MAX_DEVICES ? &x->p.clock[dev] : NULL;
	return c && c->host_ns ? t + (c->host_ns - c->gpu_ns) : t;
}

/* ---- records ------------------------------------------------------------------------------- */

static int xs_launch(struct xs *x, const struct store_rec_kernel *k)
{
	int64_t kid = xs_kernel(x, k->name);
	int timed = k->gpu_start && k->gpu_end >= k->gpu_start;
	if (kid < 0)
		return -1;
	uint64_t threads = (uint64_t)k->grid[0] * k->grid[1] * k->grid[2] * k->block[0] *
			   k->block[1] * k->block[2];
	sqlite3_stmt *st = x->st[XS_LAUNCH];
	if (timed) { /* bound here, the rest by xs_row ('_' leaves these two) */
		sqlite3_bind_int64(st, 8, (int64_t)xs_gpu_to_host(x, k->device, k->gpu_start));
		sqlite3_bind_int64(st, 9, (int64_t)xs_gpu_to_host(x, k->device, k->gpu_end));
	} else {
		sqlite3_bind_null(st, 8);
		sqlite3_bind_null(st, 9);
	}
	return xs_row(x, XS_LAUNCH, "iuiiuiu__tiiiiiiui", (int64_t)x->p.pid, k->corr, kid,
		      (int64_t)k->device, k->stream, (int64_t)k->tid, k->launch_ns,
		      timed ? "globaltimer" : NULL, (int64_t)k->grid[0], (int64_t)k->grid[1],
		      (int64_t)k->grid[2], (int64_t)k->block[0], (int64_t)k->block[1],
		      (int64_t)k->block[2], threads, (int64_t)k->shared_bytes);
}

static int xs_span(struct xs *x, const struct store_rec_kspan *s)
{
	int64_t kid = xs_kernel(x, s->name);
	return kid < 0 ? -1 : xs_row(x, XS_SPAN, "iuiiuuui", (int64_t)x->p.pid, s->corr, kid,
				     (int64_t)s->device, s->stream, s->begin_ns, s->end_ns,
				     (int64_t)s->ref_uncertainty_ns);
}

static const char *xs_copy_kind(uint32_t k)
{
	static const char *const names[] = {"?", "HtoD", "DtoH", "DtoD", "memset", "other"};
	return k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

static int xs_copy(struct xs *x, const struct store_rec_copy *c)
{
	int timed = c->gpu_start && c->gpu_end >= c->gpu_start;
	sqlite3_stmt *st = x->st[XS_COPY];
	if (timed) {
		sqlite3_bind_int64(st, 9, (int64_t)xs_gpu_to_host(x, c->device, c->gpu_start));
		sqlite3_bind_int64(st, 10, (int64_t)xs_gpu_to_host(x, c->device, c->gpu_end));
	} else {
		sqlite3_bind_null(st, 9);
		sqlite3_bind_null(st, 10);
	}
	return xs_row(x, XS_COPY, "iutuiuiu__", (int64_t)x->p.pid, c->corr, xs_copy_kind(c->kind),
		      c->bytes, (int64_t)c->device, c->stream, (int64_t)c->tid, c->launch_ns);
}

static int xs_api(struct xs *x, const struct store_trace_record *rec,
		  const struct store_rec_api *a)
{
	uint32_t func_id = 0;
	uint64_t args[16];
	int nargs = store_rec_api_args(rec, &func_id, args);
	sqlite3_stmt *st = x->st[XS_API];
	if (nargs >= 0) {
		sqlite3_bind_int64(st, 11, func_id);
		sqlite3_bind_int64(st, 12, nargs);
	} else {
		sqlite3_bind_null(st, 11);
		sqlite3_bind_null(st, 12);
	}
	return xs_row(x, XS_API, "iituuiiuuu__", (int64_t)x->p.pid, (int64_t)a->tid,
		      xs_str(x, a->name), a->begin_ns, a->end_ns, (int64_t)a->result,
		      (int64_t)a->device, a->stream, a->bytes, a->corr);
}

static int xs_device(struct xs *x, const struct store_trace_record *rec)
{
	struct store_rec_device d;
	size_t rest;
	const uint8_t *p = store_rec_fixed(rec, &d, sizeof(d), &rest);
	char *name = p ? store_rec_string(&p, &rest) : NULL, uuid[33];
	for (int i = 0; i < 16; i++)
		snprintf(uuid + 2 * i, 3, "%02x", d.uuid[i]);
	int rc = p ? xs_row(x, XS_DEV, "iitiut", (int64_t)x->p.pid, (int64_t)d.ordinal, name,
			    (int64_t)d.sm, d.memory_bytes, uuid) : 0;
	free(name);
	return rc;
}

static int xs_program(struct xs *x, const struct store_trace_record *rec)
{
	struct store_rec_program pr;
	size_t rest;
	const uint8_t *p = store_rec_fixed(rec, &pr, sizeof(pr), &rest);
	if (!p)
		return 0;
	char *name = store_rec_string(&p, &rest), *path = store_rec_string(&p, &rest), hash[33];
	for (int i = 0; i < 16; i++)
		snprintf(hash + 2 * i, 3, "%02x", pr.hash[i]);
	/* kernelretsnoop's samples are decoded (tools/tools.h says their layout) */
	const char *base = path ? strrchr(path, '/') : NULL;
	if (pr.index < 64 && ((name && !strcmp(name, "kernelretsnoop")) ||
			      (base && !strcmp(base, "/kernelretsnoop.bpf.o"))))
		x->p.exit_progs |= 1ull << pr.index;
	int rc = xs_row(x, XS_PROG, "iittti", (int64_t)x->p.pid, (int64_t)pr.index, name, path,
			hash, (int64_t)pr.nmaps);
	free(name);
	free(path);
	return rc;
}

static int xs_probe(struct xs *x, const struct store_rec_probe *p, const uint8_t *d, size_t n)
{
	if (p->prog < 64 && (x->p.exit_progs >> p->prog & 1) && n == sizeof(struct tool_exit_event)) {
		struct tool_exit_event e;
		memcpy(&e, d, sizeof(e));
		uint64_t ts = p->flags & STORE_PROBE_GPU_TIME ? xs_gpu_to_host(x, p->device, e.ts) : e.ts;
		return xs_row(x, XS_EXIT, "iuiiiiiiiii", (int64_t)x->p.pid, ts, (int64_t)e.kernel_id,
			      (int64_t)e.tid_x, (int64_t)e.tid_y, (int64_t)e.tid_z,
			      (int64_t)e.ctaid_x, (int64_t)e.ctaid_y, (int64_t)e.ctaid_z,
			      (int64_t)e.ntid_x, (int64_t)e.ntid_y);
	}
	uint64_t ts = p->flags & STORE_PROBE_GPU_TIME ? xs_gpu_to_host(x, p->device, p->ts_ns)
						     : p->ts_ns;
	return xs_row(x, XS_RBREC, "iiiiuib", (int64_t)x->p.pid, (int64_t)p->prog, (int64_t)p->map,
		      (int64_t)p->device, ts, (int64_t)(p->flags & STORE_PROBE_GPU_TIME), d, n);
}

static int xs_not_instrumented(struct xs *x, const struct store_trace_record *rec)
{
	struct store_rec_not_instrumented ni;
	size_t rest;
	const uint8_t *p = store_rec_fixed(rec, &ni, sizeof(ni), &rest);
	if (!p)
		return 0;
	char *msg = store_rec_string(&p, &rest);
	int rc = xs_row(x, XS_NOINST, "iuitiiittt", (int64_t)x->p.pid, ni.ts_ns, (int64_t)ni.reason,
			store_noinst_reason_name(ni.reason), (int64_t)ni.kernels, (int64_t)ni.sm,
			ni.device == UINT32_MAX ? (int64_t)-1 : (int64_t)ni.device,
			xs_str(x, ni.api), xs_str(x, ni.label), msg ? msg : "");
	free(msg);
	return rc;
}

static int xs_kernel_id(struct xs *x, const struct store_rec_kernel_id *k)
{
	int64_t kid = xs_kernel(x, k->name);
	return kid < 0 ? -1 : xs_row(x, XS_KID, "iiit", (int64_t)x->p.pid, (int64_t)k->id, kid,
				     xs_str(x, k->module));
}

static int xs_map_memory(struct xs *x, const struct store_trace_record *rec)
{
	struct store_rec_map_memory m;
	size_t rest;
	uint64_t rb = 0;
	const uint8_t *p = store_rec_fixed(rec, &m, sizeof(m), &rest);
	if (!p)
		return 0;
	if (rest >= 8)
		memcpy(&rb, p, 8);
	if (m.ctx < 1u << 20 && m.ctx >= x->p.nctx) { /* contexts are numbered from 1, densely */
		uint32_t *v = realloc(x->p.ctx_device, (m.ctx + 1) * sizeof(*v));
		if (!v)
			return xs_fail(x, "out of memory");
		memset(v + x->p.nctx, 0, (m.ctx + 1 - x->p.nctx) * sizeof(*v));
		x->p.ctx_device = v, x->p.nctx = m.ctx + 1;
	}
	if (m.ctx < x->p.nctx)
		x->p.ctx_device[m.ctx] = m.device + 1;
	return xs_row(x, XS_CTX, "iiuiuuuiu", (int64_t)x->p.pid, (int64_t)m.ctx, m.context,
		      (int64_t)m.device, m.device_bytes, m.pinned_bytes, rb, (int64_t)m.nmaps,
		      m.ts_ns);
}

static int xs_drop(struct xs *x, const struct store_rec_drop *d)
{
	static const char *const src[] = {"?", "writer", "ringbuf", "other", "spans"};
	return xs_row(x, XS_DROP, "iutiiuuu", (int64_t)x->p.pid, d->ts_ns,
		      d->source < 5 ? src[d->source] : "?", (int64_t)d->prog, (int64_t)d->map,
		      d->records, d->batches, d->bytes);
}

static int xs_ringbuf(struct xs *x, const struct store_rec_ringbuf *b)
{
	return xs_row(x, XS_RB, "iiitiuuuuu", (int64_t)x->p.pid, (int64_t)b->prog, (int64_t)b->map,
		      xs_str(x, b->name), (int64_t)b->device, b->ts_ns, b->taken, b->dropped, b->syncs,
		      b->sync_busy);
}

/* ---- maps: the latest snapshot of each, written when the process's trace is read ------------- */

static int xs_keep_snap(struct xs *x, const struct store_trace_record *rec, int host)
{
	struct store_rec_map m;
	if (!store_rec_fixed(rec, &m, sizeof(m), NULL))
		return 0;
	struct xs_snap *s = NULL;
	for (size_t i = 0; i < x->p.nsnaps && !s; i++)
		if (x->p.snaps[i].prog == m.prog && x->p.snaps[i].map == m.map &&
		    x->p.snaps[i].ctx == m.ctx && x->p.snaps[i].host == (uint32_t)host)
			s = &x->p.snaps[i];
	if (!s) {
		struct xs_snap *v = realloc(x->p.snaps, (x->p.nsnaps + 1) * sizeof(*v));
		if (!v)
			return xs_fail(x, "out of memory");
		x->p.snaps = v;
		s = &v[x->p.nsnaps++];
		*s = (struct xs_snap){.prog = m.prog, .map = m.map, .ctx = m.ctx, .host = host};
	}
	uint8_t *copy = malloc(rec->len ? rec->len : 1);
	if (!copy)
		return xs_fail(x, "out of memory");
	memcpy(copy, rec->payload, rec->len);
	free(s->rec);
	s->rec = copy, s->len = rec->len;
	return 0;
}

static int xs_all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* One entry's u64 words, summed over the per-SM copies, the non-zero ones. */
static int xs_words(struct xs *x, int64_t map, int64_t key, const uint8_t *v, uint32_t size,
		    uint32_t copies)
{
	uint32_t one = size / copies;
	for (uint32_t w = 0; w + 8 <= one; w += 8) {
		uint64_t sum = 0, u;
		for (uint32_t c = 0; c < copies; c++) {
			memcpy(&u, v + (size_t)c * one + w, 8);
			sum += u;
		}
		if (sum && xs_row(x, XS_WORD, "iiiu", map, key, (int64_t)(w / 8), sum))
			return -1;
	}
	return 0;
}

static int64_t xs_key_int(const uint8_t *k, uint32_t n)
{
	uint64_t v = 0;
	if (n != 1 && n != 2 && n != 4 && n != 8)
		return -1;
	memcpy(&v, k, n);
	return (int64_t)v;
}

static int xs_snap_rows(struct xs *x, const struct xs_snap *s)
{
	struct store_rec_map m;
	size_t rest;
	const struct store_trace_record rec = {.type = STORE_REC_MAP, .len = (uint32_t)s->len,
					       .payload = s->rec};
	const uint8_t *p = store_rec_fixed(&rec, &m, sizeof(m), &rest);
	size_t pair = (size_t)m.key_size + m.value_size;
	if (!p || !pair || rest / pair < m.count)
		return 0; /* a record the tools refuse too (map_pairs) */
	const struct tool_map as_tools = {.type = m.map_type, .value_size = m.value_size};
	uint32_t copies = tool_map_copies(&as_tools); /* per-SM maps: the tools' count of copies */
	int array = m.map_type != CUBPF_MAP_HASH;
	int dev = m.ctx && m.ctx < x->p.nctx ? (int)x->p.ctx_device[m.ctx] - 1 : -1;
	if (xs_row(x, XS_MAP, "iiitiiiiuiiii", (int64_t)x->p.pid, (int64_t)m.prog, (int64_t)m.map,
		   xs_str(x, m.name), (int64_t)m.map_type, (int64_t)s->host, (int64_t)m.ctx,
		   (int64_t)dev, m.ts_ns, (int64_t)m.key_size, (int64_t)m.value_size,
		   (int64_t)copies, (int64_t)m.count))
		return -1;
	int64_t id = sqlite3_last_insert_rowid(x->db);
	for (uint32_t i = 0; i < m.count; i++, p += pair) {
		const uint8_t *v = p + m.key_size;
		if (array && xs_all_zero(v, m.value_size)) /* an array's untouched slots */
			continue;
		int64_t key = xs_key_int(p, m.key_size);
		if (key < 0)
			sqlite3_bind_null(x->st[XS_ENTRY], 2);
		else
			sqlite3_bind_int64(x->st[XS_ENTRY], 2, key);
		if (xs_row(x, XS_ENTRY, "i_bb", id, p, (size_t)m.key_size, v, (size_t)m.value_size) ||
		    (key >= 0 && xs_words(x, id, key, v, m.value_size, copies)))
			return -1;
	}
	return 0;
}

/* ---- one trace ------------------------------------------------------------------------------- */

static int xs_meta_record(struct xs *x, const struct store_trace_record *rec)
{
	union {
		struct store_rec_clock c;
		struct store_rec_kernel_id k;
		struct store_rec_drop d;
		struct store_rec_ringbuf b;
	} u;
	switch (rec->type) {
	case STORE_REC_DEVICE: return xs_device(x, rec);
	case STORE_REC_PROGRAM: return xs_program(x, rec);
	case STORE_REC_NOT_INSTRUMENTED: return xs_not_instrumented(x, rec);
	case STORE_REC_MAP_MEMORY: return xs_map_memory(x, rec);
	case STORE_REC_MAP: return xs_keep_snap(x, rec, 0);
	case STORE_REC_HOST_MAP: return xs_keep_snap(x, rec, 1);
	case STORE_REC_CLOCK:
		if (!store_rec_fixed(rec, &u.c, sizeof(u.c), NULL))
			return 0;
		if (u.c.device < XS_MAX_DEVICES)
			x->p.clock[u.c.device] = u.c;
		return xs_row(x, XS_CLOCK, "iiuuu", (int64_t)x->p.pid, (int64_t)u.c.device,
			      u.c.host_ns, u.c.gpu_ns, u.c.uncertainty_ns);
	case STORE_REC_KERNEL_ID:
		return store_rec_fixed(rec, &u.k, sizeof(u.k), NULL) ? xs_kernel_id(x, &u.k) : 0;
	case STORE_REC_DROP:
		return store_rec_fixed(rec, &u.d, sizeof(u.d), NULL) ? xs_drop(x, &u.d) : 0;
	case STORE_REC_RINGBUF:
		return store_rec_fixed(rec, &u.b, sizeof(u.b), NULL) ? xs_ringbuf(x, &u.b) : 0;
	default: return 0;
	}
}

static int xs_record(struct xs *x, const struct store_trace_record *rec, struct store_rec_end *end)
{
	union {
		struct store_rec_api a;
		struct store_rec_kernel k;
		struct store_rec_kspan s;
		struct store_rec_copy c;
		struct store_rec_probe p;
	} u;
	const uint8_t *rest;
	size_t n;
	switch (rec->type) {
	case STORE_REC_API:
		return store_rec_fixed(rec, &u.a, sizeof(u.a), NULL) ? xs_api(x, rec, &u.a) : 0;
	case STORE_REC_KERNEL:
		return store_rec_fixed(rec, &u.k, sizeof(u.k), NULL) ? xs_launch(x, &u.k) : 0;
	case STORE_REC_KSPAN:
		return store_rec_fixed(rec, &u.s, sizeof(u.s), NULL) ? xs_span(x, &u.s) : 0;
	case STORE_REC_COPY:
		return store_rec_fixed(rec, &u.c, sizeof(u.c), NULL) ? xs_copy(x, &u.c) : 0;
	case STORE_REC_PROBE:
		rest = store_rec_fixed(rec, &u.p, sizeof(u.p), &n);
		return rest ? xs_probe(x, &u.p, rest, n) : 0;
	case STORE_REC_END:
		if (!store_rec_fixed(rec, end, sizeof(*end), NULL))
			memset(end, 0, sizeof(*end));
		return 0;
	default: return xs_meta_record(x, rec);
	}
}

static void xs_proc_free(struct xs_proc *p)
{
	store_ids_free(&p->kids);
	free(p->krow);
	free(p->ctx_device);
	for (size_t i = 0; i < p->nsnaps; i++)
		free(p->snaps[i].rec);
	free(p->snaps);
	memset(p, 0, sizeof(*p));
}

static const char *xs_state(enum store_trace_state s)
{
	switch (s) {
	case STORE_TRACE_COMPLETE: return "complete";
	case STORE_TRACE_CUT: return "cut";
	case STORE_TRACE_NO_END: return "no end";
	default: return "damaged";
	}
}

static int xs_process_row(struct xs *x, const char *path, const struct store_rec_end *end)
{
	const struct store_rec_header *h = store_trace_header(x->r);
	uint64_t file_bytes, raw, frames;
	char fmt[16];
	store_trace_reader_sizes(x->r, &file_bytes, &raw, &frames);
	snprintf(fmt, sizeof(fmt), "%u.%u", h->major, h->minor);
	sqlite3_stmt *st = x->st[XS_PROC];
	if (end->end_realtime_ns)
		sqlite3_bind_int64(st, 9, (int64_t)end->end_realtime_ns);
	else
		sqlite3_bind_null(st, 9);
	return xs_row(x, XS_PROC, "iittttiu_tuuuut", (int64_t)h->pid,
		      (int64_t)store_trace_parent_pid(x->r), store_trace_header_string(x->r, 2),
		      store_trace_header_string(x->r, 1), store_trace_header_string(x->r, 0), fmt,
		      (int64_t)h->driver_version, h->start_realtime_ns, xs_state(store_trace_state(x->r)), end->records,
		      end->dropped_records, end->dropped_batches, file_bytes, path);
}

/* One trace into the database.  0, or -1 with x->err (a damaged trace is an error: a database
 * that silently lacks the rest of a process would answer queries wrongly). */
static int xs_trace(struct xs *x, const char *path)
{
	char err[STORE_ERRLEN], t[TOOL_TEXT_MAX];
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	struct store_trace_record rec;
	struct store_rec_end end = {0};
	int rc = 0, n;
	if (!r) {
		snprintf(x->err, sizeof(x->err), "%s", err);
		return -1;
	}
	x->r = r;
	x->p.pid = store_trace_header(r)->pid;
	while (!rc && (n = store_trace_next(r, &rec)) == 1)
		rc = xs_record(x, &rec, &end);
	if (!rc && store_trace_state(r) == STORE_TRACE_DAMAGED) {
		snprintf(x->err, sizeof(x->err), "%s: damaged trace: %s", tool_text(path, t, sizeof(t)),
			 store_trace_reader_error(r));
		rc = -1;
	}
	for (size_t i = 0; !rc && i < x->p.nsnaps; i++)
		rc = xs_snap_rows(x, &x->p.snaps[i]);
	if (!rc)
		rc = xs_process_row(x, path, &end);
	x->r = NULL;
	store_trace_close_reader(r);
	xs_proc_free(&x->p);
	return rc;
}

/* ---- the database ------------------------------------------------------------------------------ */

static int xs_open(struct xs *x, const char *tmp)
{
	if (sqlite3_open_v2(tmp, &x->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		return xs_fail(x, "SQLite open");
	char pragmas[160];
	snprintf(pragmas, sizeof(pragmas), "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
		 " PRAGMA application_id=%d; PRAGMA user_version=%d; BEGIN;", XS_APP_ID,
		 XS_SCHEMA_VERSION);
	if (xs_exec(x, pragmas) || xs_exec(x, xs_schema))
		return -1;
	for (int i = 0; i < XS_NSTMT; i++)
		if (sqlite3_prepare_v2(x->db, xs_inserts[i], -1, &x->st[i], NULL) != SQLITE_OK)
			return xs_fail(x, "SQLite prepare");
	return 0;
}

static int xs_meta(struct xs *x, const char *key, const char *value)
{
	return xs_row(x, XS_META, "tt", key, value);
}

/* The run's metadata: what exported it, when, from which traces, and time 0 of the run. */
static int xs_run_meta(struct xs *x, size_t ntraces)
{
	char num[32], when[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	snprintf(num, sizeof(num), "%zu", ntraces);
	int rc = xs_meta(x, "schema_version", "1") || xs_meta(x, "exported_by", "cubpf " CUBPF_VERSION) ||
		 xs_meta(x, "exported_at", when) || xs_meta(x, "traces", num) ||
		 xs_meta(x, "time_unit", "ns, host CLOCK_REALTIME (GPU times converted)");
	if (!rc)
		rc = xs_exec(x, "INSERT INTO meta SELECT 't0_ns', MIN(start_ns) FROM processes;"
				"INSERT INTO meta SELECT 'cmdline', cmdline FROM processes"
				" ORDER BY start_ns LIMIT 1;");
	return rc ? -1 : 0;
}

static void xs_close(struct xs *x)
{
	for (int i = 0; i < XS_NSTMT; i++)
		sqlite3_finalize(x->st[i]);
	sqlite3_close(x->db);
	x->db = NULL;
}

/* out's folder's temporary file: "OUT.tmp-XXXXXX", made (empty) here. */
static char *xs_temp(const char *out)
{
	char *tmp;
	if (asprintf(&tmp, "%s.tmp-XXXXXX", out) < 0)
		return NULL;
	int fd = mkstemp(tmp);
	if (fd < 0) {
		free(tmp);
		return NULL;
	}
	mode_t mask = umask(0); /* the mode a created file gets, not mkstemp's 0600 */
	umask(mask);
	fchmod(fd, 0666 & ~mask);
	close(fd);
	return tmp;
}

int cmd_export_sqlite(const char *out, const char *const *traces, size_t n)
{
	struct xs x = {0};
	char t[TOOL_TEXT_MAX];
	char *tmp = xs_temp(out);
	if (!tmp) {
		fprintf(stderr, "cubpf trace export: cannot write beside %s: %s\n",
			tool_text(out, t, sizeof(t)), strerror(errno));
		return 1;
	}
	int rc = xs_open(&x, tmp);
	for (size_t i = 0; i < n && !rc; i++)
		rc = xs_trace(&x, traces[i]);
	if (!rc)
		rc = xs_exec(&x, xs_finish) || xs_run_meta(&x, n) || xs_exec(&x, "COMMIT;") ? -1 : 0;
	xs_close(&x);
	xs_proc_free(&x.p);
	if (!rc && rename(tmp, out) != 0)
		rc = snprintf(x.err, sizeof(x.err), "cannot rename %s to %s: %s", tmp, out,
			      strerror(errno)) ? -1 : -1;
	if (rc) {
		unlink(tmp);
		fprintf(stderr, "cubpf trace export: %s (no database written)\n",
			tool_text(x.err, t, sizeof(t)));
	}
	free(tmp);
	return rc ? 1 : 0;
}
