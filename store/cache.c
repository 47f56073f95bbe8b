/* The module cache: one sqlite database shared by every cubpf process of a user.
 *
 * Why sqlite: many processes (one per GPU rank) read and add entries at once; WAL mode lets
 * readers go on while one writes, and a busy timeout serialises writers without failing them.
 * sqlite does not checksum pages, so each blob carries an XXH3-64 checked on every read.  A
 * cubpf database that sqlite reports as corrupt is renamed aside and rebuilt: the cache only
 * saves time, so losing it must never cost the application anything more.  But the path is the
 * user's to type: a file cubpf cannot recognise as its own (not SQLite, another application's
 * database, a damaged SQLite file without cubpf's application id or schema) is never opened for
 * writing, moved or changed; opening the cache fails with a message that says what is there.
 * And a cache is code that others' processes load: it is used only when no other user can
 * change it (store/cache_trust.c), or read-only, trusting its owner. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <xxhash.h>

#include "store/internal.h"
#include "store/store.h"

#define CACHE_APP_ID 0x63425046 /* "cBPF" */
#define CACHE_SCHEMA 3 /* 3: manifest blob; blobs ordered manifest, cubin, ptx */
#define CACHE_DEFAULT_MAX (1ull << 30)
#define CACHE_DEFAULT_BUSY_MS 10000

enum { ST_GET, ST_GET_NO_PTX, ST_HIT, ST_MISS, ST_PUT, ST_PUT_BLOBS, ST_DEL, ST_NSTMT };

#define PEND_MAX 64
#define PEND_MS 2000

struct pending {
	store_key keys[PEND_MAX];
	uint64_t uses[PEND_MAX];
	int64_t last_ms[PEND_MAX];
	size_t n;
	uint64_t lookups, hits, corrupt, saved_ns;
	int64_t since_ms;
};

struct store_cache {
	pthread_mutex_t lock;   /* one caller at a time: the shim loads modules from many threads */
	struct pending pend;
	sqlite3 *db;
	sqlite3_stmt *st[ST_NSTMT];
	char *path;
	char *real;             /* path through no link, what sqlite opens (SQLITE_OPEN_NOFOLLOW) */
	struct store_cache_options opt;
	int ours;               /* the database was seen to be cubpf's (its application id) */
	int read_only;          /* STORE_CACHE_OPEN_READ_ONLY: nothing written, moved or made */
	int wait_ms;            /* how long the call in progress waits for another's lock */
	int failed_rc;          /* sqlite's code of the last failure (fail()) */
	char error[STORE_ERRLEN];
};

static const char *const stmt_sql[ST_NSTMT] = {
	/* Columns 0..13 are the same in both; the blobs come last, manifest and cubin before the
	 * PTX (sqlite reads a row's overflow pages in order, so a hit that skips the PTX stops
	 * before it). */
	[ST_GET] = "SELECT m.name, m.sm, m.driver, m.ptx_size, m.ptx_sum, m.cubin_size, m.cubin_sum,"
		   " m.rewrite_ns, m.jit_ns, m.hits, m.created, m.last_used, m.manifest_size,"
		   " m.manifest_sum, m.id, b.manifest, b.cubin, b.ptx"
		   " FROM modules m JOIN blobs b ON b.id = m.id WHERE m.key = ?1",
	[ST_GET_NO_PTX] = "SELECT m.name, m.sm, m.driver, m.ptx_size, m.ptx_sum, m.cubin_size,"
		   " m.cubin_sum, m.rewrite_ns, m.jit_ns, m.hits, m.created, m.last_used,"
		   " m.manifest_size, m.manifest_sum, m.id, b.manifest, b.cubin"
		   " FROM modules m JOIN blobs b ON b.id = m.id WHERE m.key = ?1",
	[ST_HIT] = "UPDATE modules SET hits = hits + ?3, last_used = max(last_used, ?2) WHERE key = ?1",
	[ST_MISS] = "UPDATE counters SET lookups = lookups + ?1, hits = hits + ?2,"
		    " misses = misses + ?3, corrupt = corrupt + ?4, saved_ns = saved_ns + ?5",
	[ST_PUT] = "INSERT INTO modules (key, name, sm, driver, ptx_size, ptx_sum, cubin_size,"
		   " cubin_sum, rewrite_ns, jit_ns, hits, created, last_used, manifest_size,"
		   " manifest_sum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0, ?11, ?11, ?12, ?13)",
	[ST_PUT_BLOBS] = "INSERT INTO blobs (id, manifest, cubin, ptx)"
			 " VALUES (last_insert_rowid(), ?1, ?2, ?3)",
	[ST_DEL] = "DELETE FROM modules WHERE key = ?1",
};

/* The blobs live in their own table: sqlite rewrites a whole row on UPDATE, so counting a use
 * in a row that held the blobs would rewrite hundreds of KiB per hit.  Deleting a module
 * deletes its blobs (trigger). */
static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS modules ("
	" id INTEGER PRIMARY KEY, key BLOB UNIQUE NOT NULL, name TEXT, sm INTEGER, driver INTEGER,"
	" ptx_size INTEGER, ptx_sum INTEGER, cubin_size INTEGER, cubin_sum INTEGER,"
	" rewrite_ns INTEGER, jit_ns INTEGER, hits INTEGER, created INTEGER, last_used INTEGER,"
	" manifest_size INTEGER, manifest_sum INTEGER);"
	"CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, manifest BLOB, cubin BLOB, ptx BLOB);"
	"CREATE TRIGGER IF NOT EXISTS modules_blobs AFTER DELETE ON modules"
	" BEGIN DELETE FROM blobs WHERE id = old.id; END;"
	"CREATE INDEX IF NOT EXISTS modules_lru ON modules (last_used);"
	"CREATE TABLE IF NOT EXISTS counters (lookups INTEGER, hits INTEGER, misses INTEGER,"
	" puts INTEGER, evictions INTEGER, corrupt INTEGER, saved_ns INTEGER);"
	"INSERT INTO counters SELECT 0,0,0,0,0,0,0 WHERE NOT EXISTS (SELECT 1 FROM counters);";

static void set_err(struct store_cache *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_err(struct store_cache *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
}

static void warn(struct store_cache *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct store_cache *c, const char *fmt, ...)
{
	char msg[STORE_ERRLEN + 128];
	va_list ap;
	if (!c->opt.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->opt.log(c->opt.log_ctx, msg);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- key -------------------------------------------------------------------------------- */

static void key_field(XXH3_state_t *st, uint32_t tag, const void *data, size_t size)
{
	uint64_t len = size;
	XXH3_128bits_update(st, &tag, sizeof(tag));
	XXH3_128bits_update(st, &len, sizeof(len));
	if (size)
		XXH3_128bits_update(st, data, size);
}

static void key_str(XXH3_state_t *st, uint32_t tag, const char *s)
{
	key_field(st, tag, s ? s : "", s ? strlen(s) : 0);
}

void store_key_compute(const struct store_key_input *in, store_key *out)
{
	XXH3_state_t *st = XXH3_createState();
	XXH128_canonical_t canon;
	uint64_t n = in->nprograms;

	if (!st) { /* out of memory: a one-shot hash of the image alone still differs per input */
		memset(out, 0, sizeof(*out));
		return;
	}
	XXH3_128bits_reset(st);
	key_field(st, 1, in->image.data, in->image.size);
	key_field(st, 2, &n, sizeof(n));
	for (size_t i = 0; i < in->nprograms; i++)
		key_field(st, 3, in->programs[i].data, in->programs[i].size);
	key_str(st, 4, in->rewriter_version);
	key_field(st, 5, &in->sm, sizeof(in->sm));
	key_field(st, 6, &in->driver_version, sizeof(in->driver_version));
	key_str(st, 7, in->jit_options);
	key_str(st, 8, in->kernel_glob);
	key_field(st, 9, &in->kernel_id_base, sizeof(in->kernel_id_base));
	if (in->origin) /* (absent: the same keys as before the field existed) */
		key_str(st, 10, in->origin);
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(st));
	XXH3_freeState(st);
	memcpy(out->b, canon.digest, sizeof(out->b));
}

void store_key_hex(const store_key *key, char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", key->b[i]);
}

/* ---- paths ------------------------------------------------------------------------------ */

/* $HOME/.cache/cubpf/cache.db, when HOME is a folder: cubpf makes .cache and .cache/cubpf in it
 * but never a home folder (an account without one, a service's, is not given one). */
static int home_path(const char *home, char *buf, size_t size, char *err, size_t errlen)
{
	struct stat st;
	if (stat(home, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "no cache path: HOME (%s) is not a folder, and cubpf does not make "
			 "one; set CUBPF_CACHE or XDG_CACHE_HOME, or CUBPF_CACHE=off", home);
		return -1;
	}
	int n = snprintf(buf, size, "%s/.cache/cubpf/cache.db", home);
	if (n < 0 || (size_t)n >= size) {
		snprintf(err, errlen, "no cache path: HOME is %zu bytes long; the cache path under it "
			 "would pass the %zu bytes a path may have", strlen(home), size - 1);
		return -1;
	}
	return 0;
}

int store_cache_default_path(char *buf, size_t size, char *err, size_t errlen)
{
	const char *env = getenv("CUBPF_CACHE");
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env && *env) {
		n = snprintf(buf, size, "%s", env);
		if (n < 0 || (size_t)n >= size) {
			snprintf(err, errlen, "CUBPF_CACHE is %zu bytes long, more than the %zu bytes a "
				 "path may have", strlen(env), size - 1);
			return -1;
		}
		return 0;
	}
	if (xdg && *xdg == '/') {
		n = snprintf(buf, size, "%s/cubpf/cache.db", xdg);
		if (n < 0 || (size_t)n >= size) {
			snprintf(err, errlen, "no cache path: XDG_CACHE_HOME is %zu bytes long; the "
				 "cache path under it would pass the %zu bytes a path may have",
				 strlen(xdg), size - 1);
			return -1;
		}
		return 0;
	}
	if (home && *home)
		return home_path(home, buf, size, err, errlen);
	snprintf(err, errlen, "no cache path: set CUBPF_CACHE, XDG_CACHE_HOME or HOME");
	return -1;
}

/* CUBPF_CACHE_GROUP: a group by name or number. */
static int env_group(const char *v, unsigned *gid, char *err, size_t errlen)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (*v >= '0' && *v <= '9' && !*end && !errno && n < (gid_t)-1) {
		*gid = (unsigned)n;
		return 0;
	}
	if (getgrnam_r(v, &gr, buf, sizeof(buf), &res) == 0 && res) {
		*gid = (unsigned)res->gr_gid;
		return 0;
	}
	snprintf(err, errlen, "CUBPF_CACHE_GROUP=%s: no such group", v);
	return -1;
}

int store_cache_env_options(struct store_cache_options *o, char *err, size_t errlen)
{
	const char *ro = getenv("CUBPF_CACHE_READONLY"), *grp = getenv("CUBPF_CACHE_GROUP");
	if (ro && *ro && strcmp(ro, "0") && strcmp(ro, "1")) {
		snprintf(err, errlen, "CUBPF_CACHE_READONLY=%s: expected 0 or 1", ro);
		return -1;
	}
	if (ro && !strcmp(ro, "1"))
		o->flags |= STORE_CACHE_OPEN_READ_ONLY;
	if (grp && *grp) {
		if (env_group(grp, &o->trusted_gid, err, errlen))
			return -1;
		o->flags |= STORE_CACHE_OPEN_TRUST_GROUP;
	}
	return 0;
}

/* mkdir -p of the folders above path, each new one 0700 (the cache holds other people's
 * kernels: not for every user of the machine to read). */
static int make_parents(struct store_cache *c, const char *path)
{
	char *dir = strdup(path);
	if (!dir) {
		set_err(c, "out of memory");
		return -1;
	}
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) && errno != EEXIST) {
			set_err(c, "cannot create folder %s: %s", dir, strerror(errno));
			free(dir);
			return -1;
		}
		*p = '/';
	}
	free(dir);
	return 0;
}

/* A new database: made here, never through a link; one that another process made meanwhile
 * is the same cache (the trust check saw the folder: only trusted users can make it). */
static int create_file(struct store_cache *c)
{
	int fd = open(c->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST)
		return 0;
	if (fd < 0) {
		set_err(c, "cannot open %s: %s", c->path, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* path.broken-TIME, or path.broken-TIME-N when that is taken (two in the same second):
 * an earlier database set aside is never overwritten. */
static void aside_name(const char *path, char *out, size_t n)
{
	long long t = (long long)time(NULL);
	snprintf(out, n, "%s.broken-%lld", path, t);
	for (int i = 2; i < 1000 && access(out, F_OK) == 0; i++)
		snprintf(out, n, "%s.broken-%lld-%d", path, t, i);
}

/* Sets a damaged cubpf database (and its -wal, which may hold the newest pages) aside so that a
 * new one can take its place; the old files stay for anyone who wants to look at them.  Only
 * for a database known to be cubpf's.  0, or -1 (message set) when it cannot be moved. */
static int move_aside(struct store_cache *c, const char *why)
{
	char aside[4096], side[4200], side_aside[4200];
	aside_name(c->path, aside, sizeof(aside));
	if (rename(c->path, aside)) {
		set_err(c, "%s is damaged (%s) and cannot be moved aside: %s", c->path, why,
			strerror(errno));
		return -1;
	}
	snprintf(side, sizeof(side), "%s-wal", c->path);
	snprintf(side_aside, sizeof(side_aside), "%s-wal", aside);
	if (rename(side, side_aside) && errno != ENOENT)
		unlink(side);
	snprintf(side, sizeof(side), "%s-shm", c->path);
	unlink(side); /* the lock index of the old file: no data */
	warn(c, "cubpf cache: %s is damaged (%s); moved it to %s and started a new one", c->path, why,
	     aside);
	return 0;
}

/* ---- what is at the path ------------------------------------------------------------------- */

enum file_kind {
	FILE_NEW,         /* nothing there, or an empty file (cubpf's, before sqlite wrote to it) */
	FILE_OURS,        /* SQLite with cubpf's application id in its header */
	FILE_SQLITE_ANON, /* SQLite without an application id: sqlite tells (through the WAL) */
	FILE_OURS_BROKEN, /* cubpf's schema behind a header that is damaged or not cubpf's */
	FILE_NOT_OURS     /* anything else: never written, moved or changed (message set) */
};

#define SQLITE_MAGIC "SQLite format 3"  /* and a NUL: the first 16 bytes of every database */
#define SQLITE_APP_ID_AT 68             /* big-endian u32 in the 100-byte header */
/* The text sqlite keeps of cubpf's blobs table (schema 3), in page 1's schema cells near the
 * page's end: what still says whose a database is when its header does not. */
#define CACHE_SCHEMA_MARK "TABLE blobs (id INTEGER PRIMARY KEY, manifest BLOB, cubin BLOB, ptx BLOB)"
#define CACHE_MARK_SCAN (128u << 10)   /* page 1 of the largest page size, and then some */

/* What in a header with SQLite's magic sqlite itself would refuse; NULL when it looks sound. */
static const char *header_damage(const uint8_t *h)
{
	unsigned ps = (unsigned)h[16] << 8 | h[17];
	if (!(ps == 1 || (ps >= 512 && ps <= 32768 && !(ps & (ps - 1)))))
		return "its page size";
	if (h[18] < 1 || h[18] > 2 || h[19] < 1 || h[19] > 2)
		return "its file format numbers";
	if (h[21] != 64 || h[22] != 32 || h[23] != 32)
		return "its payload fractions";
	return NULL;
}

/* Whether the file holds cubpf's schema text: a cubpf database whose header was damaged. */
static int has_our_schema(int fd, off_t size)
{
	size_t n = size < (off_t)CACHE_MARK_SCAN ? (size_t)size : CACHE_MARK_SCAN;
	uint8_t *buf = malloc(n ? n : 1);
	ssize_t got = buf ? pread(fd, buf, n, 0) : -1;
	int found = got > 0 && memmem(buf, (size_t)got, CACHE_SCHEMA_MARK,
				      sizeof(CACHE_SCHEMA_MARK) - 1) != NULL;
	free(buf);
	return found;
}

static enum file_kind not_ours(struct store_cache *c, int fd, off_t size, const char *broken,
			      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A header that does not say cubpf: the schema behind it may still (FILE_OURS_BROKEN, the
 * message says what is wrong with the header: broken); else the message is fmt's. */
static enum file_kind not_ours(struct store_cache *c, int fd, off_t size, const char *broken,
			      const char *fmt, ...)
{
	if (has_our_schema(fd, size)) {
		set_err(c, "%s, cubpf's schema behind it", broken);
		return FILE_OURS_BROKEN;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
	return FILE_NOT_OURS;
}

/* Tells from the file's header, before sqlite opens it, whether cubpf may use the file at its
 * path.  A new cubpf database has application id 0 in its file header until the first
 * checkpoint (the id sits in the WAL), hence FILE_SQLITE_ANON. */
static enum file_kind header_kind(struct store_cache *c, int fd, const struct stat *st)
{
	uint8_t h[100];
	ssize_t n = pread(fd, h, sizeof(h), 0);
	if (n == 0)
		return FILE_NEW;
	if (n < (ssize_t)sizeof(h) || memcmp(h, SQLITE_MAGIC, sizeof(SQLITE_MAGIC))) {
		/* whatever follows: a file that does not even say SQLite is never taken */
		set_err(c, "%s is not a cubpf cache (%lld bytes, not an SQLite database); left "
			"untouched: point CUBPF_CACHE (or --db) at another path", c->path,
			(long long)st->st_size);
		return FILE_NOT_OURS;
	}
	const char *bad = header_damage(h);
	if (bad)
		return not_ours(c, fd, st->st_size, "a damaged SQLite header",
				"%s has a damaged SQLite header (%s): nothing in it says it was a "
				"cubpf cache; left untouched: remove it if it was, or point "
				"CUBPF_CACHE (or --db) at another path", c->path, bad);
	uint32_t app = (uint32_t)h[SQLITE_APP_ID_AT] << 24 | (uint32_t)h[SQLITE_APP_ID_AT + 1] << 16 |
		       (uint32_t)h[SQLITE_APP_ID_AT + 2] << 8 | h[SQLITE_APP_ID_AT + 3];
	if (app == CACHE_APP_ID)
		return FILE_OURS;
	if (app == 0)
		return FILE_SQLITE_ANON;
	return not_ours(c, fd, st->st_size, "another application's id in its header",
			"%s is an SQLite database of another application "
			"(application id 0x%08x), not a cubpf cache; left untouched: point CUBPF_CACHE "
			"(or --db) at another path", c->path, app);
}

/* What is at the path, looked at without following a link or blocking on a FIFO. */
static enum file_kind file_kind(struct store_cache *c)
{
	struct stat st;
	int fd = store_file_open(c->path, STORE_FILE_NOFOLLOW, &st, c->error, sizeof(c->error));
	if (fd < 0 && errno == ENOENT)
		return FILE_NEW;
	if (fd < 0) {
		size_t n = strlen(c->error);
		snprintf(c->error + n, sizeof(c->error) - n, ", so not a cubpf cache; left untouched");
		return FILE_NOT_OURS;
	}
	enum file_kind k = header_kind(c, fd, &st);
	close(fd);
	return k;
}

/* ---- opening ---------------------------------------------------------------------------- */

static void db_close(struct store_cache *c)
{
	for (int i = 0; i < ST_NSTMT; i++) {
		sqlite3_finalize(c->st[i]);
		c->st[i] = NULL;
	}
	if (c->db)
		sqlite3_close_v2(c->db);
	c->db = NULL;
}

static int is_damage(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_FORMAT;
}

static int64_t pragma_int(struct store_cache *c, const char *sql, int *rc)
{
	sqlite3_stmt *s = NULL;
	int64_t v = -1;
	*rc = sqlite3_prepare_v2(c->db, sql, -1, &s, NULL);
	if (*rc == SQLITE_OK) {
		*rc = sqlite3_step(s);
		if (*rc == SQLITE_ROW) {
			v = sqlite3_column_int64(s, 0);
			*rc = SQLITE_OK;
		} else if (*rc == SQLITE_DONE) {
			*rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(s);
	return v;
}

static int exec(struct store_cache *c, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		set_err(c, "%s: %s", c->path, msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	return rc;
}

/* An SQLite file with no id and no table is taken for the cache (nothing in it to lose: a new
 * file another process has begun, or an emptied one) only when sqlite finds it sound: a
 * damaged file can look empty.  SQLITE_OK, or SQLITE_CORRUPT (message set). */
static int holds_nothing(struct store_cache *c)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(c->db, "PRAGMA quick_check(1)", -1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		const unsigned char *v = sqlite3_column_text(s, 0);
		rc = v && !strcmp((const char *)v, "ok") ? SQLITE_OK : SQLITE_CORRUPT;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_OK && is_damage(rc))
		set_err(c, "%s: an empty SQLite database that fails its integrity check", c->path);
	return rc;
}

/* Whose database this is, by reads only (through the WAL: a new cubpf database has its id
 * there until the first checkpoint).  cubpf's, or one that holds nothing (no id, no version, no
 * table: a new file): SQLITE_OK.  Anything else: SQLITE_MISMATCH, and nothing is written. */
static int identify(struct store_cache *c)
{
	sqlite3_stmt *s = NULL;
	int64_t app = -1, ver = -1, tables = -1;
	/* one statement, so one snapshot: another process may be making the schema meanwhile */
	int rc = sqlite3_prepare_v2(c->db, "SELECT (SELECT * FROM pragma_application_id),"
				    " (SELECT * FROM pragma_user_version),"
				    " (SELECT count(*) FROM sqlite_schema)", -1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		app = sqlite3_column_int64(s, 0);
		ver = sqlite3_column_int64(s, 1);
		tables = sqlite3_column_int64(s, 2);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_OK)
		return rc;
	if (app == CACHE_APP_ID) {
		c->ours = 1;
		return SQLITE_OK;
	}
	if (app == 0 && ver == 0 && tables == 0)
		return holds_nothing(c);
	set_err(c, "%s is an SQLite database that is not a cubpf cache (application id %lld, %lld "
		"tables); left untouched: point CUBPF_CACHE (or --db) at another path", c->path,
		(long long)app, (long long)tables);
	return SQLITE_MISMATCH;
}

/* Makes the schema of a new database, or replaces an older schema (the cache is disposable).
 * Called once identify() has found the database to be cubpf's or empty.  Returns an sqlite
 * result code. */
static int ensure_schema(struct store_cache *c)
{
	int rc;
	int64_t app = pragma_int(c, "PRAGMA application_id", &rc);
	if (rc != SQLITE_OK)
		return rc;
	int64_t ver = pragma_int(c, "PRAGMA user_version", &rc);
	if (rc != SQLITE_OK)
		return rc;
	if (app == CACHE_APP_ID && ver == CACHE_SCHEMA)
		return SQLITE_OK;
	if (app == CACHE_APP_ID && ver > CACHE_SCHEMA) {
		set_err(c, "%s was made by a newer cubpf (cache schema %lld; this one knows %d)",
			c->path, (long long)ver, CACHE_SCHEMA);
		return SQLITE_MISMATCH;
	}
	/* Another process may be making the schema at the same moment: look again under the
	 * write lock before replacing anything. */
	if ((rc = exec(c, "BEGIN IMMEDIATE")) != SQLITE_OK)
		return rc;
	app = pragma_int(c, "PRAGMA application_id", &rc);
	if (rc == SQLITE_OK)
		ver = pragma_int(c, "PRAGMA user_version", &rc);
	if (rc == SQLITE_OK && app == CACHE_APP_ID && ver == CACHE_SCHEMA)
		return exec(c, "COMMIT");
	char sql[256 + sizeof(schema_sql)];
	snprintf(sql, sizeof(sql),
		 "DROP TABLE IF EXISTS modules; DROP TABLE IF EXISTS blobs; DROP TABLE IF EXISTS counters; %s"
		 " PRAGMA application_id = %d; PRAGMA user_version = %d; COMMIT;",
		 schema_sql, CACHE_APP_ID, CACHE_SCHEMA);
	if (rc == SQLITE_OK)
		rc = exec(c, sql);
	if (rc != SQLITE_OK)
		sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* Waiting for another process's write (the compile workers and the main process of a job
 * store modules at once).  SQLite's own busy handler sleeps 1, 2, 5 .. 100 ms between tries
 * (whole seconds where it was built without usleep), so a waiter could sleep past many short
 * writes and lose every race to the others: measured, 8 processes storing 650 KB modules
 * waited up to 5 s.  A write here takes about a millisecond, so poll every 200 us, with a
 * little jitter so that waiters do not wake in step, until the busy timeout. */
static int busy_wait(void *arg, int tries)
{
	const struct store_cache *c = arg;
	struct timespec ts = {0, (long)(200000 + (unsigned)tries * 7919u % 100000u)};
	if ((int64_t)tries * 250 >= (int64_t)c->wait_ms * 1000)
		return 0; /* given up: the caller gets SQLITE_BUSY and says so */
	nanosleep(&ts, NULL);
	return 1;
}

/* Opens the file when it may be cubpf's; SQLITE_MISMATCH (message set) when it is not. */
static int db_connect(struct store_cache *c)
{
	enum file_kind k = file_kind(c);
	if (k == FILE_OURS_BROKEN) {
		c->ours = 1;
		return SQLITE_CORRUPT; /* db_open sets it aside, or says why not */
	}
	if (k == FILE_NOT_OURS)
		return SQLITE_MISMATCH;
	c->ours |= k == FILE_OURS;
	if (k == FILE_NEW && c->read_only) {
		set_err(c, "no cubpf cache at %s (read-only: none is made)", c->path);
		return SQLITE_CANTOPEN;
	}
	if (k == FILE_NEW && create_file(c))
		return SQLITE_CANTOPEN;
	int flags = (c->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
		    SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_FULLMUTEX;
	int rc = sqlite3_open_v2(c->real, &c->db, flags, NULL);
	if (rc != SQLITE_OK) {
		set_err(c, "%s: %s", c->path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		return rc;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_handler(c->db, busy_wait, c);
	if ((rc = identify(c)) != SQLITE_OK && !c->error[0])
		set_err(c, "%s: %s", c->path, sqlite3_errmsg(c->db));
	return rc;
}

/* Read-only: the schema must be there already, nothing is set or made. */
static int db_check_schema(struct store_cache *c)
{
	int rc;
	int64_t ver = pragma_int(c, "PRAGMA user_version", &rc);
	if (rc == SQLITE_OK && (!c->ours || ver != CACHE_SCHEMA)) {
		set_err(c, "%s holds no cubpf cache of schema %d (schema %lld); read-only: not "
			"changed", c->path, CACHE_SCHEMA, (long long)ver);
		return SQLITE_MISMATCH;
	}
	if (rc != SQLITE_OK && !c->error[0])
		set_err(c, "%s: %s", c->path, sqlite3_errmsg(c->db));
	return rc;
}

static int db_open_once(struct store_cache *c)
{
	int rc = db_connect(c);
	if (rc != SQLITE_OK)
		return rc;
	if (c->read_only)
		return db_check_schema(c);
	/* A new file: large pages (a module is hundreds of KiB; 4 KiB pages make a blob a long
	 * chain of page reads) and incremental vacuum (eviction gives space back).  Both must be
	 * set before WAL and before the first table. */
	if (pragma_int(c, "PRAGMA page_count", &rc) == 0 && rc == SQLITE_OK &&
	    (rc = exec(c, "PRAGMA page_size = 65536; PRAGMA auto_vacuum = INCREMENTAL")) != SQLITE_OK)
		return rc;
	if (rc != SQLITE_OK) {
		set_err(c, "%s: %s", c->path, sqlite3_errmsg(c->db));
		return rc;
	}
	/* WAL is a property of the file: set it only once, so that later opens need no lock. */
	sqlite3_stmt *s = NULL;
	int wal = 0;
	rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode", -1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		const unsigned char *mode = sqlite3_column_text(s, 0);
		wal = mode && !strcmp((const char *)mode, "wal");
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_OK) {
		set_err(c, "%s: %s", c->path, sqlite3_errmsg(c->db));
		return rc;
	}
	if (!wal && (rc = exec(c, "PRAGMA journal_mode = WAL")) != SQLITE_OK)
		return rc;
	if ((rc = exec(c, "PRAGMA synchronous = NORMAL")) != SQLITE_OK)
		return rc;
	if ((rc = ensure_schema(c)) != SQLITE_OK && !c->error[0])
		set_err(c, "%s: %s", c->path, sqlite3_errmsg(c->db));
	c->ours |= rc == SQLITE_OK; /* cubpf's schema and id, whoever made them */
	return rc;
}

static int is_busy(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

/* Opening a new database races with other processes opening it too: switching to WAL needs an
 * exclusive lock, and sqlite answers BUSY at once (without its busy handler) when two readers
 * both want to upgrade.  So retry the whole open until the busy timeout has passed. */
static int db_open_retry(struct store_cache *c)
{
	int rc;
	for (int waited = 0;; waited += 5) {
		c->error[0] = '\0';
		rc = db_open_once(c);
		if (rc == SQLITE_OK || !is_busy(rc) || waited >= c->opt.busy_timeout_ms)
			return rc;
		db_close(c);
		usleep(5000);
	}
}

/* Opens the database; when sqlite calls a database of cubpf's damaged, moves it aside and
 * tries once more.  A damaged file that cubpf cannot tell to be its own stays as it is. */
static int db_open(struct store_cache *c)
{
	int rc = db_open_retry(c);
	if (rc == SQLITE_OK)
		return 0;
	db_close(c);
	if (!is_damage(rc))
		return -1;
	char why[STORE_ERRLEN];
	snprintf(why, sizeof(why), "%s", c->error);
	if (c->read_only) {
		set_err(c, "%s is damaged (%s); read-only: left as it is", c->path, why);
		return -1;
	}
	if (!c->ours) {
		set_err(c, "%s is a damaged SQLite file that cubpf cannot tell to be its cache (%s); "
			"left untouched: remove it if it is, or point CUBPF_CACHE (or --db) at another "
			"path", c->path, why);
		return -1;
	}
	if (move_aside(c, why))
		return -1;
	rc = db_open_retry(c);
	if (rc == SQLITE_OK)
		return 0;
	db_close(c);
	return -1;
}

/* Who can change the cache decides whether it is used at all (store/cache_trust.c). */
static int trusted(struct store_cache *c)
{
	struct store_trust t = {
		.group_trusted = (c->opt.flags & STORE_CACHE_OPEN_TRUST_GROUP) != 0,
		.gid = (gid_t)c->opt.trusted_gid,
		.read_only = c->read_only,
	};
	char why[STORE_ERRLEN], real[4096];
	if (store_cache_trust(c->path, &t, real, sizeof(real), why, sizeof(why)) == 0) {
		c->real = strdup(real);
		if (c->real)
			return 0;
		snprintf(why, sizeof(why), "out of memory");
	}
	set_err(c, "%s", why);
	return -1;
}

struct store_cache *store_cache_open(const char *path, const struct store_cache_options *opt,
				     char *err, size_t errlen)
{
	char def[4096];
	struct store_cache *c = calloc(1, sizeof(*c));

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	if (opt)
		c->opt = *opt;
	if (!c->opt.max_bytes)
		c->opt.max_bytes = CACHE_DEFAULT_MAX;
	if (c->opt.busy_timeout_ms <= 0)
		c->opt.busy_timeout_ms = CACHE_DEFAULT_BUSY_MS;
	if (c->opt.write_wait_ms <= 0)
		c->opt.write_wait_ms = c->opt.busy_timeout_ms;
	c->wait_ms = c->opt.busy_timeout_ms;
	c->read_only = (c->opt.flags & STORE_CACHE_OPEN_READ_ONLY) != 0;
	if (!path && store_cache_default_path(def, sizeof(def), err, errlen) == 0)
		path = def;
	if (!path) {
		free(c);
		return NULL;
	}
	c->path = strdup(path);
	if (!c->path || (!c->read_only && make_parents(c, path)) || trusted(c) || db_open(c)) {
		snprintf(err, errlen, "%s", c->path ? c->error : "out of memory");
		store_cache_close(c);
		return NULL;
	}
	return c;
}

static void flush(struct store_cache *c);

void store_cache_close(struct store_cache *c)
{
	if (!c)
		return;
	if (c->db)
		flush(c);
	db_close(c);
	pthread_mutex_destroy(&c->lock);
	free(c->path);
	free(c->real);
	free(c);
}

const char *store_cache_path(const struct store_cache *c)
{
	return c->path;
}

const char *store_cache_error(const struct store_cache *c)
{
	return c->error;
}

/* ---- statements and damage ---------------------------------------------------------------- */

static sqlite3_stmt *stmt(struct store_cache *c, int which)
{
	if (!c->st[which] &&
	    sqlite3_prepare_v3(c->db, stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &c->st[which],
			       NULL) != SQLITE_OK) {
		set_err(c, "%s: %s", c->path, sqlite3_errmsg(c->db));
		return NULL;
	}
	return c->st[which];
}

/* After a failed call: records the message and, when sqlite says the file is damaged, replaces
 * the database so that the next call works.  Always returns -1. */
static int fail(struct store_cache *c, int rc, const char *what)
{
	int rc8 = rc & 0xff;
	c->failed_rc = rc;
	/* sqlite's own message only for an error: after a ROW or DONE it says "not an error" */
	if (rc8 == SQLITE_OK || rc8 == SQLITE_ROW || rc8 == SQLITE_DONE)
		set_err(c, "%s: %s: %s", c->path, what,
			rc8 == SQLITE_DONE ? "no row where one was expected" : "unexpected result");
	else
		set_err(c, "%s: %s: %s", c->path, what,
			c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
	if (c->db)
		sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
	if (is_damage(rc)) {
		char why[STORE_ERRLEN];
		snprintf(why, sizeof(why), "%s", c->error);
		db_close(c);
		if (c->read_only)
			set_err(c, "%s is damaged (%s); read-only: left as it is", c->path, why);
		else if (c->ours && move_aside(c, why) == 0) /* once opened, seen to be cubpf's */
			db_open(c); /* a new, empty cache for the next call */
	}
	return -1;
}

static int step_done(struct store_cache *c, sqlite3_stmt *s, const char *what)
{
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_DONE)
		return fail(c, rc, what);
	return 0;
}

/* ---- get ---------------------------------------------------------------------------------- */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#define LARGE_BLOB (256u << 10)

/* A buffer for a blob.  A large one is faulted in by one madvise call rather than one page
 * fault per 4 KiB as it is written (8 MiB: 2048 faults, milliseconds on a virtual machine);
 * where the kernel does not know the call, the faults happen as before. */
static void *blob_alloc(size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	if (p && n >= LARGE_BLOB) {
		uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
		uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
		if (e > a)
			madvise((void *)a, e - a, MADV_POPULATE_WRITE);
	}
	return p;
}

/* Column col of the row under s (blobs table row id), want bytes with checksum sum.  A large blob
 * is read straight into its buffer (sqlite3_blob_read: sqlite's own copy of the whole blob,
 * which column_blob makes, would be a second copy and twice the page faults).  Sets *bad when
 * the size or the checksum is wrong. */
static void *copy_blob(sqlite3 *db, sqlite3_stmt *s, int col, const char *name, int64_t want,
		       int64_t sum, int *bad)
{
	void *out;
	if (want < 0 || want > INT32_MAX) {
		*bad = 1;
		return NULL;
	}
	if (want >= LARGE_BLOB) {
		sqlite3_blob *b = NULL;
		int64_t row = sqlite3_column_int64(s, 14);
		if (sqlite3_blob_open(db, "main", "blobs", name, row, 0, &b) != SQLITE_OK ||
		    sqlite3_blob_bytes(b) != want) {
			sqlite3_blob_close(b);
			*bad = 1;
			return NULL;
		}
		out = blob_alloc((size_t)want);
		int rc = out ? sqlite3_blob_read(b, out, (int)want, 0) : SQLITE_NOMEM;
		sqlite3_blob_close(b);
		if (rc != SQLITE_OK || (int64_t)XXH3_64bits(out, (size_t)want) != sum) {
			*bad = out != NULL;
			free(out);
			return NULL;
		}
		return out;
	}
	const void *p = sqlite3_column_blob(s, col);
	int n = sqlite3_column_bytes(s, col);
	if (n != want || (n && (int64_t)XXH3_64bits(p, (size_t)n) != sum)) {
		*bad = 1;
		return NULL;
	}
	out = malloc(n ? (size_t)n : 1);
	if (out && n)
		memcpy(out, p, (size_t)n);
	return out;
}

/* Reads the row under the statement (ST_GET or ST_GET_NO_PTX) into e; 1 = good, 0 = a blob
 * failed its checksum, -1 = out of memory. */
static int read_row(sqlite3 *db, sqlite3_stmt *s, struct store_cache_entry *e, int with_ptx)
{
	int bad = 0;
	const unsigned char *name = sqlite3_column_text(s, 0);

	memset(e, 0, sizeof(*e));
	e->sm = (uint32_t)sqlite3_column_int64(s, 1);
	e->driver_version = (uint32_t)sqlite3_column_int64(s, 2);
	e->ptx_size = (size_t)sqlite3_column_int64(s, 3);
	e->cubin_size = (size_t)sqlite3_column_int64(s, 5);
	e->rewrite_ns = (uint64_t)sqlite3_column_int64(s, 7);
	e->jit_ns = (uint64_t)sqlite3_column_int64(s, 8);
	e->hits = (uint64_t)sqlite3_column_int64(s, 9) + 1;
	e->created_ms = sqlite3_column_int64(s, 10);
	e->last_used_ms = sqlite3_column_int64(s, 11);
	e->manifest_size = (size_t)sqlite3_column_int64(s, 12);
	e->name = strdup(name ? (const char *)name : "");
	e->manifest = copy_blob(db, s, 15, "manifest", sqlite3_column_int64(s, 12),
				sqlite3_column_int64(s, 13), &bad);
	if (!bad)
		e->cubin = copy_blob(db, s, 16, "cubin", sqlite3_column_int64(s, 5),
				     sqlite3_column_int64(s, 6), &bad);
	if (!bad && with_ptx)
		e->ptx = copy_blob(db, s, 17, "ptx", sqlite3_column_int64(s, 3),
				   sqlite3_column_int64(s, 4), &bad);
	if (bad) {
		store_cache_entry_free(e);
		return 0;
	}
	if ((with_ptx && !e->ptx) || !e->manifest || !e->cubin || !e->name) {
		store_cache_entry_free(e);
		return -1;
	}
	return 1;
}

static int drop_entry(struct store_cache *c, const store_key *key)
{
	sqlite3_stmt *s = stmt(c, ST_DEL);
	if (!s)
		return -1;
	sqlite3_bind_blob(s, 1, key->b, sizeof(key->b), SQLITE_STATIC);
	return step_done(c, s, "deleting an entry");
}

/* The counters live in one row, which the schema makes; a database whose row is gone (by hand,
 * by damage) gets it back at the next write instead of losing every count silently.  Reads
 * sum over the table, so none or several rows read as counts too. */
static int counters_row(struct store_cache *c)
{
	int rc = sqlite3_exec(c->db, "INSERT INTO counters SELECT 0,0,0,0,0,0,0"
				     " WHERE NOT EXISTS (SELECT 1 FROM counters)", NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : fail(c, rc, "restoring the counters");
}

/* Lookups are counted in memory and written in one transaction now and then (every
 * PEND_MAX distinct hits, every PEND_MS, and at stats, list, put and close): a hit then costs
 * one read, not a write transaction.  A process killed before a flush loses only counts. */
static int flush_pending(struct store_cache *c)
{
	struct pending *p = &c->pend;
	sqlite3_stmt *s;
	int rc;

	if (!p->lookups && !p->corrupt)
		return 0;
	if ((rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL)) != SQLITE_OK)
		return fail(c, rc, "starting a transaction");
	if (counters_row(c))
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		if (!(s = stmt(c, ST_HIT)))
			return fail(c, SQLITE_ERROR, "preparing");
		sqlite3_bind_blob(s, 1, p->keys[i].b, sizeof(p->keys[i].b), SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, p->last_ms[i]);
		sqlite3_bind_int64(s, 3, (int64_t)p->uses[i]);
		if (step_done(c, s, "updating use counts"))
			return -1;
	}
	if (!(s = stmt(c, ST_MISS)))
		return fail(c, SQLITE_ERROR, "preparing");
	sqlite3_bind_int64(s, 1, (int64_t)p->lookups);
	sqlite3_bind_int64(s, 2, (int64_t)p->hits);
	sqlite3_bind_int64(s, 3, (int64_t)(p->lookups - p->hits));
	sqlite3_bind_int64(s, 4, (int64_t)p->corrupt);
	sqlite3_bind_int64(s, 5, (int64_t)p->saved_ns);
	if (step_done(c, s, "counting lookups"))
		return -1;
	if ((rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK)
		return fail(c, rc, "committing");
	memset(p, 0, sizeof(*p));
	p->since_ms = now_ms();
	return 0;
}

/* Counts are statistics: when they cannot be written (a lock held past the busy timeout),
 * say so and let them go rather than fail the caller's real work. */
static void flush(struct store_cache *c)
{
	if (flush_pending(c)) {
		warn(c, "cubpf cache: use counts not saved: %s", c->error);
		memset(&c->pend, 0, sizeof(c->pend));
	}
}

/* From a lookup or a put: the counts are written when no other process is writing, else at a
 * later call; a module load waits for nobody's write to save statistics.  When the list of
 * hits is full and the lock still taken, those counts go (with the warning flush gives). */
static void flush_now_or_later(struct store_cache *c)
{
	c->wait_ms = 0;
	int rc = flush_pending(c);
	c->wait_ms = c->opt.busy_timeout_ms;
	if (rc && c->pend.n == PEND_MAX) {
		warn(c, "cubpf cache: use counts not saved: %s", c->error);
		memset(&c->pend, 0, sizeof(c->pend));
	}
}

static void note_lookup(struct store_cache *c, const store_key *key, uint64_t saved_ns)
{
	struct pending *p = &c->pend;
	size_t i = 0;
	int64_t t = now_ms();

	if (!p->lookups)
		p->since_ms = t;
	p->lookups++;
	if (key) {
		p->hits++;
		p->saved_ns += saved_ns;
		while (i < p->n && memcmp(p->keys[i].b, key->b, sizeof(key->b)))
			i++;
		if (i == p->n) {
			p->keys[p->n] = *key;
			p->uses[p->n++] = 0;
		}
		p->uses[i]++;
		p->last_ms[i] = t;
	}
	if (p->n == PEND_MAX || t - p->since_ms >= PEND_MS)
		flush_now_or_later(c);
}

static int get_locked(struct store_cache *c, const store_key *key, struct store_cache_entry *out,
		      unsigned flags)
{
	sqlite3_stmt *s;
	int rc, got = 0, corrupt = 0;

	memset(out, 0, sizeof(*out));
	if (!c->db && db_open(c))
		return -1;
	int with_ptx = !(flags & STORE_CACHE_NO_PTX);
	if (!(s = stmt(c, with_ptx ? ST_GET : ST_GET_NO_PTX)))
		return -1;
	sqlite3_bind_blob(s, 1, key->b, sizeof(key->b), SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		got = read_row(c->db, s, out, with_ptx);
		corrupt = got == 0;
	} else if (rc != SQLITE_DONE) {
		sqlite3_reset(s);
		fail(c, rc, "looking up");
		return is_damage(rc) ? 0 : -1; /* a rebuilt cache simply misses */
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (got < 0) {
		set_err(c, "out of memory reading an entry");
		return -1;
	}
	if (corrupt && c->read_only) {
		char hex[33];
		store_key_hex(key, hex);
		warn(c, "cubpf cache: entry %s in %s failed its checksum; read-only: left there, "
		     "taken as a miss", hex, c->path);
		return 0;
	}
	if (corrupt) {
		char hex[33];
		store_key_hex(key, hex);
		warn(c, "cubpf cache: entry %s in %s failed its checksum; dropped it", hex, c->path);
		c->pend.corrupt++;
		if (drop_entry(c, key))
			return -1;
	}
	if (!c->read_only) /* a read-only cache counts nothing: counting is writing */
		note_lookup(c, got == 1 ? key : NULL, got == 1 ? out->rewrite_ns + out->jit_ns : 0);
	return got == 1;
}

void store_cache_entry_free(struct store_cache_entry *e)
{
	free(e->ptx);
	free(e->cubin);
	free(e->manifest);
	free(e->name);
	e->ptx = e->cubin = e->manifest = NULL;
	e->name = NULL;
}

/* ---- put and eviction ----------------------------------------------------------------------- */

static int64_t total_bytes(struct store_cache *c)
{
	int rc;
	int64_t v = pragma_int(c, "SELECT coalesce(sum(ptx_size + cubin_size), 0) FROM modules", &rc);
	if (rc != SQLITE_OK)
		fail(c, rc, "summing sizes");
	return rc == SQLITE_OK ? v : -1;
}

/* Deletes least recently used entries until the total fits; returns how many, or -1. */
static int64_t evict(struct store_cache *c, const store_key *keep)
{
	sqlite3_stmt *s = NULL;
	int64_t total = total_bytes(c), n = 0;
	int rc;

	if (total < 0)
		return -1;
	if ((uint64_t)total <= c->opt.max_bytes)
		return 0;
	rc = sqlite3_prepare_v2(c->db,
				"SELECT id, ptx_size + cubin_size FROM modules WHERE key != ?1"
				" ORDER BY last_used, id",
				-1, &s, NULL);
	if (rc != SQLITE_OK)
		return fail(c, rc, "choosing entries to evict");
	sqlite3_bind_blob(s, 1, keep->b, sizeof(keep->b), SQLITE_STATIC);
	char sql[128];
	while ((uint64_t)total > c->opt.max_bytes && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		snprintf(sql, sizeof(sql), "DELETE FROM modules WHERE id = %lld",
			 (long long)sqlite3_column_int64(s, 0));
		total -= sqlite3_column_int64(s, 1);
		if ((rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL)) != SQLITE_OK)
			break;
		n++;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
		return fail(c, rc, "evicting");
	snprintf(sql, sizeof(sql), "UPDATE counters SET evictions = evictions + %lld", (long long)n);
	if ((rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL)) != SQLITE_OK)
		return fail(c, rc, "counting evictions");
	return n;
}

static int bind_entry(sqlite3_stmt *s, const store_key *key, const struct store_cache_entry *e)
{
	sqlite3_bind_blob(s, 1, key->b, sizeof(key->b), SQLITE_STATIC);
	sqlite3_bind_text(s, 2, e->name ? e->name : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, e->sm);
	sqlite3_bind_int64(s, 4, e->driver_version);
	sqlite3_bind_int64(s, 5, (int64_t)e->ptx_size);
	sqlite3_bind_int64(s, 6, (int64_t)XXH3_64bits(e->ptx, e->ptx_size));
	sqlite3_bind_int64(s, 7, (int64_t)e->cubin_size);
	sqlite3_bind_int64(s, 8, (int64_t)XXH3_64bits(e->cubin, e->cubin_size));
	sqlite3_bind_int64(s, 9, (int64_t)e->rewrite_ns);
	sqlite3_bind_int64(s, 10, (int64_t)e->jit_ns);
	sqlite3_bind_int64(s, 12, (int64_t)e->manifest_size);
	sqlite3_bind_int64(s, 13, (int64_t)XXH3_64bits(e->manifest, e->manifest_size));
	return sqlite3_bind_int64(s, 11, now_ms());
}

static int bind_blobs(sqlite3_stmt *s, const struct store_cache_entry *e)
{
	sqlite3_bind_blob64(s, 1, e->manifest_size ? e->manifest : "", e->manifest_size,
			    SQLITE_STATIC);
	sqlite3_bind_blob64(s, 2, e->cubin_size ? e->cubin : "", e->cubin_size, SQLITE_STATIC);
	return sqlite3_bind_blob64(s, 3, e->ptx_size ? e->ptx : "", e->ptx_size, SQLITE_STATIC);
}

static int put_once(struct store_cache *c, const store_key *key, const struct store_cache_entry *e,
		    int64_t *evicted)
{
	sqlite3_stmt *s;
	int rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		return fail(c, rc, "starting a transaction");
	if (drop_entry(c, key)) /* replacing: the old blobs go with it */
		return -1;
	if (!(s = stmt(c, ST_PUT)))
		return fail(c, SQLITE_ERROR, "preparing");
	if ((rc = bind_entry(s, key, e)) != SQLITE_OK) {
		sqlite3_reset(s);
		return fail(c, rc, "binding");
	}
	if (step_done(c, s, "inserting"))
		return -1;
	if (!(s = stmt(c, ST_PUT_BLOBS)))
		return fail(c, SQLITE_ERROR, "preparing");
	if ((rc = bind_blobs(s, e)) != SQLITE_OK) {
		sqlite3_reset(s);
		return fail(c, rc, "binding");
	}
	if (step_done(c, s, "inserting blobs"))
		return -1;
	if (counters_row(c))
		return -1;
	if ((rc = sqlite3_exec(c->db, "UPDATE counters SET puts = puts + 1", NULL, NULL, NULL)))
		return fail(c, rc, "counting");
	if ((*evicted = evict(c, key)) < 0)
		return -1;
	rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : fail(c, rc, "committing");
}

static int put_locked(struct store_cache *c, const store_key *key, const struct store_cache_entry *e)
{
	int64_t evicted = 0;
	uint64_t size = (uint64_t)e->ptx_size + e->cubin_size;

	if (size > c->opt.max_bytes) {
		set_err(c, "entry of %llu bytes is larger than the cache limit (%llu bytes)",
			(unsigned long long)size, (unsigned long long)c->opt.max_bytes);
		return -1;
	}
	if (c->read_only) {
		set_err(c, "%s is read-only: not stored", c->path);
		return 1;
	}
	if (!c->db && db_open(c))
		return -1;
	/* A module load waits on another process's write for write_wait_ms at most: past it the
	 * module runs all the same, and the next load stores it. */
	c->wait_ms = c->opt.write_wait_ms;
	int rc = put_once(c, key, e, &evicted);
	c->wait_ms = c->opt.busy_timeout_ms;
	if (rc && is_busy(c->failed_rc)) {
		set_err(c, "another process kept the cache %s for over %d ms: not stored", c->path,
			c->opt.write_wait_ms);
		return 1;
	}
	/* A damaged database is replaced by fail(); the entry then goes into the new one. */
	if (rc && (!c->db || put_once(c, key, e, &evicted)))
		return -1;
	flush_now_or_later(c);
	if (evicted > 0)
		sqlite3_exec(c->db, "PRAGMA incremental_vacuum", NULL, NULL, NULL);
	return 0;
}

/* ---- stats, list, clear ------------------------------------------------------------------------ */

static uint64_t file_size(const char *path, const char *suffix)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s%s", path, suffix);
	return stat(p, &st) ? 0 : (uint64_t)st.st_size;
}

static int stats_locked(struct store_cache *c, struct store_cache_stats *out)
{
	sqlite3_stmt *s = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!c->db && db_open(c))
		return -1;
	flush(c);
	rc = sqlite3_prepare_v2(c->db,
				"SELECT (SELECT count(*) FROM modules),"
				" (SELECT coalesce(sum(ptx_size + cubin_size), 0) FROM modules),"
				" coalesce(sum(lookups), 0), coalesce(sum(hits), 0), coalesce(sum(misses), 0),"
				" coalesce(sum(puts), 0), coalesce(sum(evictions), 0),"
				" coalesce(sum(corrupt), 0), coalesce(sum(saved_ns), 0) FROM counters",
				-1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint64_t *f[] = {&out->entries, &out->bytes, &out->lookups, &out->hits, &out->misses,
				 &out->puts, &out->evictions, &out->corrupt_blobs, &out->saved_ns};
		for (int i = 0; i < 9; i++)
			*f[i] = (uint64_t)sqlite3_column_int64(s, i);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_OK)
		return fail(c, rc, "reading statistics");
	out->max_bytes = c->opt.max_bytes;
	out->file_bytes = file_size(c->path, "") + file_size(c->path, "-wal");
	return 0;
}

static int list_locked(struct store_cache *c,
		       int (*fn)(void *ctx, const store_key *key, const struct store_cache_entry *e),
		       void *ctx)
{
	sqlite3_stmt *s = NULL;
	int rc, n = 0;

	if (!c->db && db_open(c))
		return -1;
	flush(c);
	rc = sqlite3_prepare_v2(c->db,
				"SELECT key, name, sm, driver, ptx_size, cubin_size, rewrite_ns, jit_ns,"
				" hits, created, last_used, manifest_size FROM modules ORDER BY last_used DESC, id DESC",
				-1, &s, NULL);
	if (rc != SQLITE_OK)
		return fail(c, rc, "listing");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		store_key key = {{0}};
		struct store_cache_entry e = {0};
		const void *k = sqlite3_column_blob(s, 0);
		if (k && sqlite3_column_bytes(s, 0) == (int)sizeof(key.b))
			memcpy(key.b, k, sizeof(key.b));
		e.name = (char *)sqlite3_column_text(s, 1);
		e.sm = (uint32_t)sqlite3_column_int64(s, 2);
		e.driver_version = (uint32_t)sqlite3_column_int64(s, 3);
		e.ptx_size = (size_t)sqlite3_column_int64(s, 4);
		e.cubin_size = (size_t)sqlite3_column_int64(s, 5);
		e.rewrite_ns = (uint64_t)sqlite3_column_int64(s, 6);
		e.jit_ns = (uint64_t)sqlite3_column_int64(s, 7);
		e.hits = (uint64_t)sqlite3_column_int64(s, 8);
		e.created_ms = sqlite3_column_int64(s, 9);
		e.last_used_ms = sqlite3_column_int64(s, 10);
		e.manifest_size = (size_t)sqlite3_column_int64(s, 11);
		n++;
		if (fn(ctx, &key, &e)) {
			rc = SQLITE_DONE;
			break;
		}
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return fail(c, rc, "listing");
	return n;
}

static int64_t clear_locked(struct store_cache *c)
{
	int64_t n;
	int rc;

	if (c->read_only) {
		set_err(c, "%s is opened read-only: not cleared", c->path);
		return -1;
	}
	if (!c->db && db_open(c))
		return -1;
	flush(c);
	if ((rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE; DELETE FROM modules", NULL, NULL, NULL)))
		return fail(c, rc, "clearing");
	n = sqlite3_changes64(c->db);
	rc = sqlite3_exec(c->db,
			  "UPDATE counters SET lookups = 0, hits = 0, misses = 0, puts = 0,"
			  " evictions = 0, corrupt = 0, saved_ns = 0; COMMIT",
			  NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return fail(c, rc, "clearing");
	sqlite3_exec(c->db, "PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL,
		     NULL);
	return n;
}

/* ---- the public calls, one at a time ------------------------------------------------------------ */

int store_cache_lookup(struct store_cache *c, const store_key *key, struct store_cache_entry *out,
		       unsigned flags)
{
	pthread_mutex_lock(&c->lock);
	int rc = get_locked(c, key, out, flags);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int store_cache_get(struct store_cache *c, const store_key *key, struct store_cache_entry *out)
{
	return store_cache_lookup(c, key, out, 0);
}

static int delete_locked(struct store_cache *c, const store_key *key)
{
	if (c->read_only)
		return 0; /* nothing is changed in a read-only cache */
	if (!c->db && db_open(c))
		return -1;
	if (drop_entry(c, key))
		return -1;
	return sqlite3_changes(c->db) > 0;
}

int store_cache_delete(struct store_cache *c, const store_key *key)
{
	pthread_mutex_lock(&c->lock);
	int rc = delete_locked(c, key);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int store_cache_put(struct store_cache *c, const store_key *key, const struct store_cache_entry *e)
{
	pthread_mutex_lock(&c->lock);
	int rc = put_locked(c, key, e);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int store_cache_stats(struct store_cache *c, struct store_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	int rc = stats_locked(c, out);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int64_t store_cache_clear(struct store_cache *c)
{
	pthread_mutex_lock(&c->lock);
	int64_t rc = clear_locked(c);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int store_cache_list(struct store_cache *c,
		     int (*fn)(void *ctx, const store_key *key, const struct store_cache_entry *e),
		     void *ctx)
{
	pthread_mutex_lock(&c->lock);
	int rc = list_locked(c, fn, ctx);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
