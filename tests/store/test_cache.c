/* The module cache on real sqlite files: round trips, permissions, two writers at once,
 * damaged files (truncated, a flipped byte in a blob, a damaged schema), files that are not
 * cubpf's (garbage, other databases: never touched), an empty counters table,
 * LRU eviction, default paths. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store.h"
#include "tests/store/tests.h"

struct logbook {
	int warnings;
	char last[512];
};

static void log_cb(void *ctx, const char *msg)
{
	struct logbook *l = ctx;
	l->warnings++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
}

static struct store_cache *open_at(const char *path, uint64_t max, struct logbook *l)
{
	char err[STORE_ERRLEN] = "";
	struct store_cache_options o = {.max_bytes = max, .log = l ? log_cb : NULL, .log_ctx = l};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	if (!c)
		fail_msg("store_cache_open(%s): %s", path, err);
	return c;
}

static store_key key_of(unsigned i)
{
	char img[64];
	struct store_key_input in = {0};
	store_key k;
	snprintf(img, sizeof(img), "module image %u", i);
	in.image = (struct store_blob){img, strlen(img)};
	in.rewriter_version = "test";
	in.sm = 90;
	store_key_compute(&in, &k);
	return k;
}

/* Content derived from i so that any mix-up between entries shows. */
static void fill(uint8_t *p, size_t n, unsigned i)
{
	for (size_t j = 0; j < n; j++)
		p[j] = (uint8_t)(i * 131 + j * 7 + (j >> 8));
}

static int put_n(struct store_cache *c, unsigned i, size_t ptx_n, size_t cubin_n)
{
	uint8_t *ptx = malloc(ptx_n + 1), *cubin = malloc(cubin_n + 1);
	char name[32];
	store_key k = key_of(i);
	snprintf(name, sizeof(name), "kernel_%u", i);
	fill(ptx, ptx_n, i);
	fill(cubin, cubin_n, i + 1000);
	struct store_cache_entry e = {.ptx = ptx, .ptx_size = ptx_n, .cubin = cubin,
				      .cubin_size = cubin_n, .name = name, .sm = 90,
				      .driver_version = 13000, .rewrite_ns = 1000 + i, .jit_ns = 5000};
	int rc = store_cache_put(c, &k, &e);
	free(ptx);
	free(cubin);
	return rc;
}

/* 1 = hit with the right content, 0 = miss; fails the test on wrong content or an error. */
static int check_get(struct store_cache *c, unsigned i, size_t ptx_n, size_t cubin_n)
{
	store_key k = key_of(i);
	struct store_cache_entry e;
	int rc = store_cache_get(c, &k, &e);
	if (rc < 0)
		fail_msg("get %u: %s", i, store_cache_error(c));
	if (rc == 0)
		return 0;
	uint8_t *want = malloc(ptx_n > cubin_n ? ptx_n + 1 : cubin_n + 1);
	assert_int_equal(e.ptx_size, ptx_n);
	assert_int_equal(e.cubin_size, cubin_n);
	fill(want, ptx_n, i);
	assert_memory_equal(e.ptx, want, ptx_n);
	fill(want, cubin_n, i + 1000);
	assert_memory_equal(e.cubin, want, cubin_n);
	char name[32];
	snprintf(name, sizeof(name), "kernel_%u", i);
	assert_string_equal(e.name, name);
	assert_int_equal(e.rewrite_ns, 1000 + i);
	free(want);
	store_cache_entry_free(&e);
	return 1;
}

static void test_roundtrip_and_modes(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/a/b/cache.db", dir);
	struct store_cache *c = open_at(path, 0, NULL);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);

	assert_int_equal(check_get(c, 1, 10, 10), 0);
	assert_int_equal(put_n(c, 1, 5000, 70000), 0);
	assert_int_equal(put_n(c, 2, 0, 100), 0); /* empty PTX is allowed */
	assert_int_equal(check_get(c, 1, 5000, 70000), 1);
	assert_int_equal(check_get(c, 1, 5000, 70000), 1);
	assert_int_equal(check_get(c, 2, 0, 100), 1);
	struct store_cache_stats s;
	assert_int_equal(store_cache_stats(c, &s), 0);
	assert_int_equal(s.entries, 2);
	assert_int_equal(s.bytes, 75100);
	assert_int_equal(s.lookups, 4);
	assert_int_equal(s.hits, 3);
	assert_int_equal(s.misses, 1);
	assert_int_equal(s.puts, 2);
	assert_int_equal(s.saved_ns, 2 * (1001 + 5000) + (1002 + 5000));
	store_cache_close(c);

	/* A second open sees the same entries (the data is on disk, not in a cache). */
	snprintf(path, sizeof(path), "%s/a/b/cache.db", dir);
	c = open_at(path, 0, NULL);
	assert_int_equal(check_get(c, 1, 5000, 70000), 1);
	assert_int_equal(store_cache_clear(c), 2);
	assert_int_equal(check_get(c, 1, 5000, 70000), 0);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

static void test_key_inputs(void **state)
{
	(void)state;
	struct store_blob p1[] = {{"ab", 2}, {"c", 1}}, p2[] = {{"a", 1}, {"bc", 2}};
	struct store_key_input a = {.image = {"img", 3}, .programs = p1, .nprograms = 2,
				    .rewriter_version = "1", .sm = 90, .driver_version = 13000,
				    .jit_options = "-O3"};
	struct store_key_input b = a;
	store_key ka, kb;
	store_key_compute(&a, &ka);
	store_key_compute(&b, &kb);
	assert_memory_equal(ka.b, kb.b, 16);
	b.programs = p2; /* same bytes, framed differently */
	store_key_compute(&b, &kb);
	assert_memory_not_equal(ka.b, kb.b, 16);
	b = a;
	b.sm = 100;
	store_key_compute(&b, &kb);
	assert_memory_not_equal(ka.b, kb.b, 16);
	b = a;
	b.driver_version = 13001;
	store_key_compute(&b, &kb);
	assert_memory_not_equal(ka.b, kb.b, 16);
	b = a;
	b.jit_options = "-O2";
	store_key_compute(&b, &kb);
	assert_memory_not_equal(ka.b, kb.b, 16);
	b = a;
	b.origin = "embedded PTX: ptxas -arch sm_90"; /* the same image, its PTX found elsewhere */
	store_key_compute(&b, &kb);
	assert_memory_not_equal(ka.b, kb.b, 16);
	store_key cb;
	b.origin = "fatbin PTX";
	store_key_compute(&b, &cb);
	assert_memory_not_equal(kb.b, cb.b, 16);
	assert_memory_not_equal(ka.b, cb.b, 16);
	b = a;
	b.kernel_glob = "vec*";
	store_key_compute(&b, &kb);
	assert_memory_not_equal(ka.b, kb.b, 16);
	b.kernel_glob = ""; /* no glob and an empty one are the same selection */
	store_key_compute(&b, &kb);
	assert_memory_equal(ka.b, kb.b, 16);
	b = a;
	b.kernel_id_base = 7;
	store_key_compute(&b, &kb);
	assert_memory_not_equal(ka.b, kb.b, 16);
	char hex[33];
	store_key_hex(&ka, hex);
	assert_int_equal(strlen(hex), 32);
}

static void writer_child(const char *path, unsigned base)
{
	char err[STORE_ERRLEN];
	alarm(120);
	struct store_cache *c = store_cache_open(path, NULL, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "child: %s\n", err);
		_exit(10);
	}
	for (unsigned i = 0; i < 150; i++) {
		if (put_n(c, base + i, 3000, 20000))
			_exit(11);
		store_key k = key_of(base + i / 2);
		struct store_cache_entry e;
		if (store_cache_get(c, &k, &e) != 1)
			_exit(12);
		store_cache_entry_free(&e);
	}
	store_cache_close(c);
	_exit(0);
}

/* Eight processes writing and reading one database at once (a program's compile workers and
 * its main process): no entry lost, the counters add up. */
#define WRITERS 8

static void test_eight_processes(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	pid_t pids[WRITERS];
	for (int i = 0; i < WRITERS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			writer_child(path, 10000 * (unsigned)(i + 1));
	}
	for (int i = 0; i < WRITERS; i++) {
		int st;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	struct store_cache *c = open_at(path, 0, NULL);
	for (unsigned w = 1; w <= WRITERS; w++)
		for (unsigned i = 0; i < 150; i++)
			assert_int_equal(check_get(c, 10000 * w + i, 3000, 20000), 1);
	struct store_cache_stats s;
	assert_int_equal(store_cache_stats(c, &s), 0);
	assert_int_equal(s.entries, 150 * WRITERS);
	assert_int_equal(s.puts, 150 * WRITERS);
	assert_int_equal(s.hits, 2 * 150 * WRITERS);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Another process holds the write lock (here: a connection of this one in a write
 * transaction): a put gives up after write_wait_ms with 1 and a message, a lookup answers at
 * once, and once the lock is free the put stores. */
static void test_put_waits_a_bounded_time(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], err[STORE_ERRLEN];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *first = open_at(path, 0, NULL);
	assert_int_equal(put_n(first, 1, 300, 200), 0);
	for (unsigned i = 100; i < 170; i++) /* more distinct hits than the counts list holds */
		assert_int_equal(put_n(first, i, 30, 20), 0);
	store_cache_close(first);
	struct store_cache_options o = {.write_wait_ms = 20};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	assert_non_null(c);
	sqlite3 *other;
	assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(put_n(c, 2, 300, 200), 1);
	double waited = seconds_since(&t0);
	assert_true(waited >= 0.015 && waited < 1.0);
	assert_non_null(strstr(store_cache_error(c), "for over 20 ms: not stored"));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 100; i++) /* hits: their use counts wait for a free lock */
		assert_int_equal(check_get(c, 1, 300, 200), 1);
	assert_int_equal(check_get(c, 2, 300, 200), 0);
	assert_true(seconds_since(&t0) < 1.0);
	/* a full list of counts with the lock still taken: they go, the lookups do not wait */
	for (unsigned i = 100; i < 170; i++)
		assert_int_equal(check_get(c, i, 30, 20), 1);
	assert_true(seconds_since(&t0) < 1.0);
	assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(other);
	assert_int_equal(put_n(c, 2, 300, 200), 0);
	assert_int_equal(check_get(c, 2, 300, 200), 1);
	struct store_cache_stats st;
	assert_int_equal(store_cache_stats(c, &st), 0);
	/* kept while the lock was taken, until the list was full: then those went (warned); the 7
	 * hits after them and the last one were written once the lock was free */
	assert_int_equal(st.hits, 8);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

struct thread_arg {
	struct store_cache *c;
	unsigned base;
	int failures;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	for (unsigned i = 0; i < 60; i++) {
		if (put_n(a->c, a->base + i, 2000, 3000))
			a->failures++;
		store_key k = key_of(a->base + i / 2);
		struct store_cache_entry e;
		if (store_cache_get(a->c, &k, &e) != 1)
			a->failures++;
		else
			store_cache_entry_free(&e);
	}
	return NULL;
}

/* One cache shared by threads of a process (the shim loads modules from many threads). */
static void test_threads_share_one_cache(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = open_at(path, 0, NULL);
	pthread_t th[4];
	struct thread_arg args[4];
	for (unsigned i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){c, 1000 * (i + 1), 0};
		assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
	for (unsigned i = 0; i < 4; i++)
		for (unsigned j = 0; j < 60; j++)
			assert_int_equal(check_get(c, 1000 * (i + 1) + j, 2000, 3000), 1);
	struct store_cache_stats st;
	assert_int_equal(store_cache_stats(c, &st), 0);
	assert_int_equal(st.entries, 240);
	assert_int_equal(st.hits, 240 + 240);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

static int count_broken(const char *dir)
{
	char pat[4200];
	glob_t g;
	snprintf(pat, sizeof(pat), "%s/cache.db.broken-*", dir);
	int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
	globfree(&g);
	return n;
}

static void test_truncated(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	struct logbook l = {0};
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = open_at(path, 0, NULL);
	for (unsigned i = 0; i < 40; i++)
		assert_int_equal(put_n(c, i, 20000, 30000), 0);
	store_cache_close(c);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 40 * 50000);
	assert_int_equal(truncate(path, st.st_size / 2), 0);

	c = open_at(path, 0, &l);
	int hits = 0;
	for (unsigned i = 0; i < 40; i++)
		hits += check_get(c, i, 20000, 30000); /* right content or a miss, never wrong */
	assert_true(hits < 40);
	assert_true(l.warnings >= 1);
	assert_int_equal(count_broken(dir), 1);
	/* The rebuilt cache works. */
	assert_int_equal(put_n(c, 77, 100, 100), 0);
	assert_int_equal(check_get(c, 77, 100, 100), 1);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

/* Finds the first offset of needle in hay. */
static long find(const uint8_t *hay, size_t n, const uint8_t *needle, size_t k)
{
	for (size_t i = 0; i + k <= n; i++)
		if (!memcmp(hay + i, needle, k))
			return (long)i;
	return -1;
}

static void test_flipped_byte(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	struct logbook l = {0};
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = open_at(path, 0, NULL);
	assert_int_equal(put_n(c, 5, 3000, 3000), 0);
	assert_int_equal(put_n(c, 6, 3000, 3000), 0);
	store_cache_close(c);

	size_t n;
	uint8_t *img = slurp(path, &n), want[3000];
	fill(want, sizeof(want), 5); /* entry 5's PTX */
	long at = find(img, n, want + 1000, 64);
	assert_true(at > 0);
	img[at + 10] ^= 0x40;
	spit(path, img, n);
	free(img);

	c = open_at(path, 0, &l);
	assert_int_equal(check_get(c, 5, 3000, 3000), 0); /* checksum caught it: a miss */
	assert_int_equal(l.warnings, 1);
	assert_non_null(strstr(l.last, "checksum"));
	assert_int_equal(check_get(c, 6, 3000, 3000), 1); /* the other entry is untouched */
	struct store_cache_stats s;
	assert_int_equal(store_cache_stats(c, &s), 0);
	assert_int_equal(s.corrupt_blobs, 1);
	assert_int_equal(s.entries, 1);
	assert_int_equal(put_n(c, 5, 3000, 3000), 0);
	assert_int_equal(check_get(c, 5, 3000, 3000), 1);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

/* Every file of a folder but the ones named, so that a test sees anything the cache made. */
static int others_in(const char *dir, const char *a, const char *b)
{
	char pat[4200];
	glob_t g;
	int n = 0;
	snprintf(pat, sizeof(pat), "%s/*", dir);
	if (glob(pat, 0, NULL, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc; i++) {
			const char *base = strrchr(g.gl_pathv[i], '/') + 1;
			n += strcmp(base, a) && (!b || strcmp(base, b));
		}
	globfree(&g);
	return n;
}

/* Opens path and expects a refusal naming `why`, with the file byte for byte as it was and
 * nothing made beside it. */
static void refused_untouched(const char *dir, const char *name, const char *why)
{
	char path[4200], err[STORE_ERRLEN] = "";
	struct logbook l = {0};
	size_t n0, n1;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	uint8_t *before = slurp(path, &n0);
	struct store_cache_options o = {.log = log_cb, .log_ctx = &l};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	if (c)
		fail_msg("%s: opened as a cache", name);
	if (!strstr(err, why) || !strstr(err, "left untouched"))
		fail_msg("%s: message '%s' lacks '%s'", name, err, why);
	assert_int_equal(l.warnings, 0);
	uint8_t *after = slurp(path, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	assert_int_equal(others_in(dir, name, NULL), 0);
	free(before);
	free(after);
}

/* Files cubpf did not make are never moved, written or joined by -wal/-shm files: garbage, a
 * database of another application (with its own application id, or none but tables of its
 * own), a damaged SQLite file without cubpf's id.  Each opening fails with what is there. */
static void test_foreign_files_untouched(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	char junk[8192];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 37 + 11);
	spit(path, junk, sizeof(junk));
	refused_untouched(dir, "notes.txt", "not an SQLite database");
	unlink(path);

	sqlite3 *db;
	snprintf(path, sizeof(path), "%s/other.db", dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA application_id=7; CREATE TABLE t(x);"
				      " INSERT INTO t VALUES(1)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	refused_untouched(dir, "other.db", "another application (application id 0x00000007)");
	unlink(path);

	/* no application id (most programs set none), a rollback journal: cubpf used to switch
	 * it to WAL before it looked whose it was */
	snprintf(path, sizeof(path), "%s/places.sqlite", dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE bookmarks(url); INSERT INTO bookmarks"
				      " VALUES('https://example.org')", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	refused_untouched(dir, "places.sqlite", "not a cubpf cache (application id 0, 1 tables)");

	/* the same, damaged past its header: sqlite calls it corrupt, and it is not cubpf's */
	size_t n;
	uint8_t *img = slurp(path, &n);
	assert_true(n > 200);
	memset(img + 100, 0xa5, n - 100);
	spit(path, img, n);
	free(img);
	refused_untouched(dir, "places.sqlite", "cannot tell to be its cache");
	unlink(path);

	/* an emptied database (no table left) whose freelist is damaged: it looks like nothing
	 * to lose, but sqlite's check says damaged (a fuzz_store_cache find: it was switched to
	 * WAL before the damage showed) */
	snprintf(path, sizeof(path), "%s/emptied.db", dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA page_size=512; CREATE TABLE t(x);"
				      " WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n"
				      " WHERE i<4) INSERT INTO t SELECT randomblob(400) FROM n;"
				      " DROP TABLE t", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	img = slurp(path, &n);
	assert_true(n >= 1024);
	memcpy(img + 32, "\0\0\0\x63", 4); /* the first freelist trunk page: past the end */
	spit(path, img, n);
	free(img);
	refused_untouched(dir, "emptied.db", "is a damaged SQLite file");
	unlink(path);

	/* a short file that starts like SQLite */
	snprintf(path, sizeof(path), "%s/short.db", dir);
	spit(path, "SQLite format 3", 16);
	refused_untouched(dir, "short.db", "not an SQLite database");
	unlink(path);
	rm_tree(dir);
	free(dir);
}

/* A damaged cubpf database (its header says so) is set aside with a warning naming where it
 * went (its -wal beside it), and a new cache takes its place; a second one in the same second
 * gets its own name. */
static void test_damaged_cubpf_set_aside(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	for (int round = 0; round < 2; round++) {
		struct logbook l = {0};
		struct store_cache *c = open_at(path, 0, NULL);
		assert_int_equal(put_n(c, 1, 100, 100), 0);
		store_cache_close(c);
		size_t n;
		uint8_t *img = slurp(path, &n);
		memset(img + 100, 0x5a, 4000); /* the schema's b-tree on page 1, header kept */
		spit(path, img, n);
		c = open_at(path, 0, &l);
		assert_int_equal(l.warnings, 1);
		assert_non_null(strstr(l.last, "is damaged"));
		const char *to = strstr(l.last, "moved it to ");
		assert_non_null(to);
		char aside[4200];
		snprintf(aside, sizeof(aside), "%.*s", (int)(strstr(to, " and started") - to - 12),
			 to + 12);
		size_t m;
		uint8_t *kept = slurp(aside, &m);
		assert_int_equal(m, n);
		assert_memory_equal(kept, img, n);
		free(kept);
		free(img);
		assert_int_equal(count_broken(dir), round + 1);
		assert_int_equal(check_get(c, 1, 100, 100), 0); /* a new, empty cache */
		assert_int_equal(put_n(c, 2, 10, 10), 0);
		assert_int_equal(check_get(c, 2, 10, 10), 1);
		store_cache_close(c);
	}
	rm_tree(dir);
	free(dir);
}

/* A counters table left empty (by hand, by damage): statistics read as zeros, not "reading
 * statistics: not an error", and the next write brings the row back. */
static void test_empty_counters(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = open_at(path, 0, NULL);
	assert_int_equal(put_n(c, 1, 100, 100), 0);
	store_cache_close(c);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DELETE FROM counters", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	c = open_at(path, 0, NULL);
	struct store_cache_stats st;
	if (store_cache_stats(c, &st))
		fail_msg("stats: %s", store_cache_error(c));
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.lookups, 0);
	assert_int_equal(st.puts, 0);
	assert_int_equal(check_get(c, 1, 100, 100), 1);
	assert_int_equal(put_n(c, 2, 100, 100), 0);
	assert_int_equal(store_cache_stats(c, &st), 0);
	assert_int_equal(st.lookups, 1);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.puts, 1);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

static void test_eviction(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = open_at(path, 100000, NULL);
	for (unsigned i = 0; i < 10; i++) {
		assert_int_equal(put_n(c, i, 10000, 20000), 0);
		usleep(2000); /* distinct last-use times */
		assert_int_equal(check_get(c, 0, 10000, 20000), 1); /* keep entry 0 in use */
		usleep(2000);
	}
	struct store_cache_stats s;
	assert_int_equal(store_cache_stats(c, &s), 0);
	assert_true(s.bytes <= 100000);
	assert_int_equal(s.entries, 3);
	assert_int_equal(s.evictions, 7);
	assert_int_equal(check_get(c, 0, 10000, 20000), 1);
	assert_int_equal(check_get(c, 9, 10000, 20000), 1);
	assert_int_equal(check_get(c, 8, 10000, 20000), 1);
	assert_int_equal(check_get(c, 1, 10000, 20000), 0);
	/* Larger than the whole limit: refused with a message. */
	assert_int_equal(put_n(c, 50, 60000, 60000), -1);
	assert_non_null(strstr(store_cache_error(c), "larger than the cache limit"));
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

static void test_default_path(void **state)
{
	(void)state;
	char buf[4096], err[STORE_ERRLEN] = "", *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	setenv("CUBPF_CACHE", "/x/y.db", 1);
	assert_int_equal(store_cache_default_path(buf, sizeof(buf), err, sizeof(err)), 0);
	assert_string_equal(buf, "/x/y.db");
	/* an over-long CUBPF_CACHE says so, not "no cache path" */
	char *big = malloc(5001);
	memset(big, 'a', 5000);
	big[0] = '/', big[5000] = 0;
	setenv("CUBPF_CACHE", big, 1);
	free(big);
	assert_int_equal(store_cache_default_path(buf, sizeof(buf), err, sizeof(err)), -1);
	if (!strstr(err, "CUBPF_CACHE is 5000 bytes long, more than the 4095 bytes a path may have"))
		fail_msg("%s", err);
	unsetenv("CUBPF_CACHE");
	setenv("XDG_CACHE_HOME", "/xdg", 1);
	assert_int_equal(store_cache_default_path(buf, sizeof(buf), err, sizeof(err)), 0);
	assert_string_equal(buf, "/xdg/cubpf/cache.db");
	unsetenv("XDG_CACHE_HOME");
	char *dir = temp_dir();
	setenv("HOME", dir, 1);
	assert_int_equal(store_cache_default_path(buf, sizeof(buf), err, sizeof(err)), 0);
	assert_string_equal(buf + strlen(dir), "/.cache/cubpf/cache.db");
	assert_int_equal(store_cache_default_path(buf, 8, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "HOME is"));
	/* a HOME that does not exist is not made, by the path or by an open of the default */
	char gone[4200];
	snprintf(gone, sizeof(gone), "%s/nobody-home", dir);
	setenv("HOME", gone, 1);
	assert_int_equal(store_cache_default_path(buf, sizeof(buf), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not a folder, and cubpf does not make one"));
	err[0] = 0;
	assert_null(store_cache_open(NULL, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "does not make one"));
	struct stat st;
	assert_int_equal(stat(gone, &st), -1);
	if (home)
		setenv("HOME", home, 1);
	free(home);
	rm_tree(dir);
	free(dir);
}

/* Opens path and expects a refusal whose message holds want (and says what to do), with
 * nothing made or changed at path. */
static void refused_with(const char *path, unsigned flags, unsigned gid, const char *want)
{
	char err[STORE_ERRLEN] = "";
	struct logbook l = {0};
	struct stat before, after;
	int had = lstat(path, &before) == 0;
	struct store_cache_options o = {.log = log_cb, .log_ctx = &l, .flags = flags,
					.trusted_gid = gid};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	if (c)
		fail_msg("%s: opened, wanted a refusal with '%s'", path, want);
	int says_what_to_do = (strstr(err, "CUBPF_CACHE_GROUP") &&
			       strstr(err, "CUBPF_CACHE_READONLY=1")) ||
			      strstr(err, "name the file itself"); /* a link */
	if (!strstr(err, want) || !says_what_to_do)
		fail_msg("%s: message '%s' lacks '%s' or what to do", path, err, want);
	assert_int_equal(l.warnings, 0);
	assert_int_equal(lstat(path, &after) == 0, had);
	if (had) {
		assert_int_equal(after.st_size, before.st_size);
		assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
	}
}

static void make_cache(const char *path, unsigned n)
{
	struct store_cache *c = open_at(path, 0, NULL);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(put_n(c, i, 100 + i, 200), 0);
	store_cache_close(c);
}

/* A cache another user can change is not used (issue 28): a database owned by another user,
 * one every user may write, a folder its group may write, a folder writable by all even with
 * the sticky bit (others could make its -wal), a link for the database, a link among the
 * folders that another user owns.  Each refusal says why and how to share safely; a trusted
 * group (the explicit setting) lets the group-writable one be used. */
static void test_untrusted_cache_refused(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4300], sub[4200], link[4300], err[STORE_ERRLEN];
	snprintf(sub, sizeof(sub), "%s/c", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(path, sizeof(path), "%s/cache.db", sub);
	make_cache(path, 2);

	assert_int_equal(chown(path, 65534, 65534), 0);
	refused_with(path, 0, 0, "database ");
	refused_with(path, 0, 0, "is owned by");
	assert_int_equal(chown(path, 0, 0), 0);

	assert_int_equal(chmod(path, 0606), 0);
	refused_with(path, 0, 0, "is writable by every user");
	assert_int_equal(chmod(path, 0600), 0);

	/* writable by a group of others (nogroup here), unless that group is trusted */
	assert_int_equal(chown(sub, 0, 65534), 0);
	assert_int_equal(chmod(sub, 0770), 0);
	refused_with(path, 0, 0, "is writable by group");
	struct store_cache_options o = {.flags = STORE_CACHE_OPEN_TRUST_GROUP, .trusted_gid = 65534};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	if (!c)
		fail_msg("a trusted group's folder: %s", err);
	assert_int_equal(check_get(c, 1, 101, 200), 1);
	store_cache_close(c);
	/* writable by the user's private group (root's "root" here, as a user's own under umask
	 * 002): the user's alone, used */
	assert_int_equal(chown(sub, 0, 0), 0);
	c = open_at(path, 0, NULL);
	assert_int_equal(check_get(c, 1, 101, 200), 1);
	store_cache_close(c);
	assert_int_equal(chmod(sub, 01777), 0);
	refused_with(path, 0, 0, "is writable by every user");
	assert_int_equal(chmod(sub, 0700), 0);

	/* a folder another user owns, even one only that user can write */
	assert_int_equal(chown(sub, 65534, 65534), 0);
	refused_with(path, 0, 0, "is owned by");
	assert_int_equal(chown(sub, 0, 0), 0);

	snprintf(link, sizeof(link), "%s/link.db", dir);
	assert_int_equal(symlink(path, link), 0);
	refused_with(link, 0, 0, "is a symbolic link");
	snprintf(link, sizeof(link), "%s/linked-folder", dir);
	assert_int_equal(symlink(sub, link), 0);
	assert_int_equal(lchown(link, 65534, 65534), 0);
	snprintf(link, sizeof(link), "%s/linked-folder/cache.db", dir);
	refused_with(link, 0, 0, "link ");
	/* the same link, owned by this user: the folder it leads to is checked and used */
	snprintf(link, sizeof(link), "%s/linked-folder", dir);
	assert_int_equal(lchown(link, 0, 0), 0);
	snprintf(link, sizeof(link), "%s/linked-folder/cache.db", dir);
	c = open_at(link, 0, NULL);
	assert_int_equal(check_get(c, 0, 100, 200), 1);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

struct snapshot {
	struct stat st[3];
	int there[3];
	uint8_t *bytes;
	size_t n;
};

static void snap(const char *path, struct snapshot *s)
{
	static const char *const suffix[] = {"", "-wal", "-shm"};
	char p[4200];
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
		s->there[i] = stat(p, &s->st[i]) == 0;
	}
	s->bytes = slurp(path, &s->n);
}

/* A read-only cache gives hits and writes nothing: no count, no put, no drop, no file made or
 * changed (bytes, size, time), also when the database is another user's (the owner is who a
 * read-only user trusts) and when it is damaged (reported, left as it is). */
static void test_read_only_cache(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], err[STORE_ERRLEN];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	make_cache(path, 3);
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(chmod(path, 0644), 0);
	struct snapshot a, b;
	snap(path, &a);
	usleep(20000); /* a write now would show in the times */
	struct logbook l = {0};
	struct store_cache_options o = {.flags = STORE_CACHE_OPEN_READ_ONLY, .log = log_cb,
					.log_ctx = &l};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	if (!c)
		fail_msg("read-only: %s", err);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(check_get(c, i, 100 + i, 200), 1);
	assert_int_equal(check_get(c, 7, 10, 10), 0);
	assert_int_equal(put_n(c, 9, 10, 10), 1);
	assert_non_null(strstr(store_cache_error(c), "read-only: not stored"));
	store_key k = key_of(1);
	assert_int_equal(store_cache_delete(c, &k), 0);
	assert_int_equal(store_cache_clear(c), -1);
	store_cache_close(c);
	snap(path, &b);
	/* the database as it was; sqlite, as any reader of a WAL database, may make its lock
	 * index (-shm) and an empty -wal beside it where the folder lets it: no data */
	assert_int_equal(a.st[0].st_size, b.st[0].st_size);
	assert_int_equal(a.st[0].st_mtim.tv_sec, b.st[0].st_mtim.tv_sec);
	assert_int_equal(a.st[0].st_mtim.tv_nsec, b.st[0].st_mtim.tv_nsec);
	assert_true(!b.there[1] || b.st[1].st_size == 0);
	assert_int_equal(others_in(dir, "cache.db-wal", "cache.db-shm"), 1);
	assert_int_equal(a.n, b.n);
	assert_memory_equal(a.bytes, b.bytes, a.n);
	assert_int_equal(l.warnings, 0);
	free(b.bytes);
	/* read-only does not make a cache, and does not mend a damaged one */
	char none[4200];
	snprintf(none, sizeof(none), "%s/none.db", dir);
	assert_null(store_cache_open(none, &o, err, sizeof(err)));
	assert_non_null(strstr(err, "read-only: none is made"));
	assert_int_equal(access(none, F_OK), -1);
	memset(a.bytes + 100, 0x5a, 4000);
	spit(path, a.bytes, a.n);
	snap(path, &b);
	c = store_cache_open(path, &o, err, sizeof(err));
	if (c) { /* sqlite may see the damage only at the first read */
		store_key k1 = key_of(1);
		struct store_cache_entry e;
		assert_int_equal(store_cache_get(c, &k1, &e), -1);
		snprintf(err, sizeof(err), "%s", store_cache_error(c));
		store_cache_close(c);
	}
	if (!strstr(err, "read-only: left as it is"))
		fail_msg("damaged, read-only: %s", err);
	assert_int_equal(count_broken(dir), 0);
	size_t n;
	uint8_t *now = slurp(path, &n);
	assert_int_equal(n, b.n);
	assert_memory_equal(now, b.bytes, n);
	free(now);
	free(a.bytes);
	free(b.bytes);
	rm_tree(dir);
	free(dir);
}

/* A cubpf database whose header is damaged, or carries another id, but whose schema still says
 * it is cubpf's, is set aside and rebuilt like any damaged cubpf database (it used to be called
 * "another application's database" at every run); a header damaged in a file with no cubpf
 * schema is not called another application's either, and is left as it is. */
static void test_damaged_header(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	static const struct { size_t at; const char *bytes; size_t n; const char *why; } cases[] = {
		{16, "\x12\x34\xff\xff\x00\x40\x20\x20", 8, "a damaged SQLite header"},
		{68, "\x11\x22\x33\x44", 4, "another application's id in its header"},
	};
	/* no SQLite header at all: left untouched, whatever follows (tests/gpu/t_cache.sh) */
	make_cache(path, 1);
	size_t n0;
	uint8_t *img0 = slurp(path, &n0);
	memcpy(img0, "garbage garbage!", 16);
	spit(path, img0, n0);
	free(img0);
	refused_untouched(dir, "cache.db", "not an SQLite database");
	unlink(path);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		make_cache(path, 2);
		size_t n;
		uint8_t *img = slurp(path, &n);
		memcpy(img + cases[i].at, cases[i].bytes, cases[i].n);
		spit(path, img, n);
		struct logbook l = {0};
		struct store_cache *c = open_at(path, 0, &l);
		assert_int_equal(l.warnings, 1);
		if (!strstr(l.last, "is damaged") || !strstr(l.last, cases[i].why) ||
		    !strstr(l.last, "cubpf's schema behind it") || !strstr(l.last, "moved it to"))
			fail_msg("case %zu: %s", i, l.last);
		assert_int_equal(count_broken(dir), (int)i + 1);
		assert_int_equal(check_get(c, 1, 101, 200), 0);
		store_cache_close(c);
		unlink(path);
		free(img);
	}
	/* no schema of cubpf's behind a damaged header: not "another application's" */
	snprintf(path, sizeof(path), "%s/other.db", dir);
	uint8_t h[4096] = "SQLite format 3";
	h[16] = 0x12, h[17] = 0x34;
	spit(path, h, sizeof(h));
	char err[STORE_ERRLEN];
	assert_null(store_cache_open(path, NULL, err, sizeof(err)));
	if (!strstr(err, "has a damaged SQLite header (its page size)") ||
	    !strstr(err, "left untouched") || strstr(err, "another application"))
		fail_msg("%s", err);
	rm_tree(dir);
	free(dir);
}

/* Schema 3: the caller's manifest travels with the entry and is checksummed; a lookup without
 * the PTX leaves it out; one entry can be deleted; an older schema is replaced on open. */
static void test_manifest_lookup_delete(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	struct logbook l = {0};
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = open_at(path, 0, &l);
	store_key k = key_of(1);
	static const char manifest[] = "cubpf-kernels 1\n3 _Z3fooPi\n4 bar\n";
	struct store_cache_entry e = {.ptx = "PTXTEXT", .ptx_size = 7, .cubin = "CUBIN", .cubin_size = 5,
				      .manifest = (void *)manifest, .manifest_size = sizeof(manifest) - 1,
				      .name = "_Z3fooPi, ...", .sm = 90};
	assert_int_equal(store_cache_put(c, &k, &e), 0);
	struct store_cache_entry g;
	assert_int_equal(store_cache_lookup(c, &k, &g, STORE_CACHE_NO_PTX), 1);
	assert_null(g.ptx);
	assert_int_equal(g.ptx_size, 7);
	assert_int_equal(g.cubin_size, 5);
	assert_memory_equal(g.cubin, "CUBIN", 5);
	assert_int_equal(g.manifest_size, sizeof(manifest) - 1);
	assert_memory_equal(g.manifest, manifest, sizeof(manifest) - 1);
	store_cache_entry_free(&g);
	assert_int_equal(store_cache_get(c, &k, &g), 1);
	assert_memory_equal(g.ptx, "PTXTEXT", 7);
	assert_memory_equal(g.manifest, manifest, sizeof(manifest) - 1);
	store_cache_entry_free(&g);
	/* An entry without a manifest reads back an empty one. */
	store_key k2 = key_of(2);
	e.manifest = NULL, e.manifest_size = 0;
	assert_int_equal(store_cache_put(c, &k2, &e), 0);
	assert_int_equal(store_cache_lookup(c, &k2, &g, STORE_CACHE_NO_PTX), 1);
	assert_int_equal(g.manifest_size, 0);
	store_cache_entry_free(&g);
	assert_int_equal(store_cache_delete(c, &k), 1);
	assert_int_equal(store_cache_delete(c, &k), 0);
	assert_int_equal(store_cache_lookup(c, &k, &g, STORE_CACHE_NO_PTX), 0);
	assert_int_equal(store_cache_lookup(c, &k2, &g, 0), 1);
	store_cache_entry_free(&g);
	store_cache_close(c);

	/* A flipped byte in the manifest is caught like one in a blob. */
	static const char other[] = "cubpf-kernels 1\n9 flip_me_kernel\n";
	c = open_at(path, 0, &l);
	e.manifest = (void *)other, e.manifest_size = sizeof(other) - 1;
	assert_int_equal(store_cache_put(c, &k, &e), 0);
	store_cache_close(c);
	size_t n;
	uint8_t *img = slurp(path, &n);
	long at = find(img, n, (const uint8_t *)"flip_me_kernel", 14);
	assert_true(at > 0);
	img[at + 3] ^= 0x20;
	spit(path, img, n);
	free(img);
	c = open_at(path, 0, &l);
	int warned = l.warnings;
	assert_int_equal(store_cache_lookup(c, &k, &g, STORE_CACHE_NO_PTX), 0);
	assert_int_equal(l.warnings, warned + 1);
	assert_non_null(strstr(l.last, "checksum"));
	store_cache_close(c);

	/* A schema-2 database (no manifest columns) is replaced, not misread. */
	snprintf(path, sizeof(path), "%s/old.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE modules (id INTEGER PRIMARY KEY, key BLOB);"
				      " CREATE TABLE blobs (id INTEGER PRIMARY KEY, ptx BLOB, cubin BLOB);"
				      " INSERT INTO modules VALUES (1, x'00');"
				      " PRAGMA application_id = 1665290310; PRAGMA user_version = 2;",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	c = open_at(path, 0, NULL);
	assert_int_equal(store_cache_put(c, &k, &e), 0);
	assert_int_equal(store_cache_lookup(c, &k, &g, STORE_CACHE_NO_PTX), 1);
	assert_memory_equal(g.manifest, other, sizeof(other) - 1);
	store_cache_entry_free(&g);
	struct store_cache_stats st;
	assert_int_equal(store_cache_stats(c, &st), 0);
	assert_int_equal(st.entries, 1);
	store_cache_close(c);
	rm_tree(dir);
	free(dir);
}

const struct CMUnitTest cache_tests[] = {
	cmocka_unit_test(test_manifest_lookup_delete),
	cmocka_unit_test(test_roundtrip_and_modes),
	cmocka_unit_test(test_key_inputs),
	cmocka_unit_test(test_eight_processes),
	cmocka_unit_test(test_put_waits_a_bounded_time),
	cmocka_unit_test(test_threads_share_one_cache),
	cmocka_unit_test(test_truncated),
	cmocka_unit_test(test_flipped_byte),
	cmocka_unit_test(test_foreign_files_untouched),
	cmocka_unit_test(test_damaged_cubpf_set_aside),
	cmocka_unit_test(test_empty_counters),
	cmocka_unit_test(test_eviction),
	cmocka_unit_test(test_default_path),
	cmocka_unit_test(test_untrusted_cache_refused),
	cmocka_unit_test(test_read_only_cache),
	cmocka_unit_test(test_damaged_header),
};
const size_t n_cache_tests = sizeof(cache_tests) / sizeof(cache_tests[0]);
