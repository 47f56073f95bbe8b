/* test_export: `cubpf trace export --format sqlite` (tools/cmd_export_sqlite.c), read back with
 * the sqlite3 command-line tool and checked against `cubpf trace stats` (export_check.py):
 * the corpus traces of tests/fuzz/corpus, a run of two processes written here with store/'s
 * writer (spans, launch latencies, a memtrace map over per-SM copies: the README's queries
 * with known answers), a run of several processes over the fake driver (`cubpf run -o DIR`),
 * and a damaged trace (one message, no database, an older database left as it was).
 * The sqlite3 tool missing is a failure that says so, not a skip. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/shell.h"
#include "store/store.h"

#define BIN TOOLS_TEST_BUILD "/bin/cubpf"
#define CHECK "python3 " TOOLS_TEST_SRC "/tests/tools/export_check.py " BIN

/* The sqlite3 tool's answer to one query, trimmed (caller frees). */
static char *query(const char *db, const char *sql)
{
	char *out;
	if (sh_alloc(&out, "sqlite3 -batch %s \"%s\"", db, sql) != 0)
		fail_msg("sqlite3 %s: %s", sql, out);
	size_t n = strlen(out);
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	return out;
}

static void assert_query(const char *db, const char *sql, const char *want)
{
	char *got = query(db, sql);
	if (strcmp(got, want))
		fail_msg("%s\n  got:  %s\n  want: %s", sql, got, want);
	free(got);
}

static char *temp_dir(void)
{
	char *d = strdup("/tmp/cubpf-test-export-XXXXXX");
	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_dir(char *d)
{
	char *out;
	if (strstr(d, "/cubpf-test-export-"))
		assert_int_equal(sh_alloc(&out, "rm -rf %s", d), 0), free(out);
	free(d);
}

/* The tools this test reads the database with: missing ones fail the test, with the reason. */
static int setup(void **state)
{
	(void)state;
	if (system("command -v sqlite3 >/dev/null && command -v python3 >/dev/null") != 0) {
		fprintf(stderr, "test_export: the sqlite3 command-line tool (Debian package sqlite3) "
				"or python3 is missing: ci/deps.sh installs them\n");
		return -1;
	}
	return 0;
}

/* ---- the corpus traces --------------------------------------------------------------------- */

static void test_export_corpus(void **state)
{
	(void)state;
	char *dir = temp_dir(), *out;
	/* a trace `cubpf trace info` reads whole is exported and checked; a damaged one (the
	 * corpus has some: joined files) is refused with no database left behind */
	int rc = sh_alloc(&out, "n=0; d=0; for t in %s/tests/fuzz/corpus/fuzz_trace_cmd/*.cubpf "
			  "%s/tests/fuzz/corpus/fuzz_store_trace/*.cubpf; do rm -f %s/db.sqlite; "
			  "if %s trace info $t >/dev/null 2>&1; then "
			  "%s trace export --format sqlite -o %s/db.sqlite $t && %s %s/db.sqlite $t "
			  "|| exit 1; n=$((n+1)); else "
			  "%s trace export --format sqlite -o %s/db.sqlite $t 2>/dev/null && exit 1; "
			  "[ -e %s/db.sqlite ] && exit 1; d=$((d+1)); fi; done; "
			  "echo traces $n damaged $d",
		    TOOLS_TEST_SRC, TOOLS_TEST_SRC, dir, BIN, BIN, dir, CHECK, dir, BIN, dir, dir);
	unsigned sound = 0, damaged = 0;
	const char *tl = out ? strstr(out, "traces ") : NULL;
	if (rc != 0 || !tl || sscanf(tl, "traces %u damaged %u", &sound, &damaged) != 2 ||
	    sound < 5 || !strstr(out, "export ok"))
		fail_msg("corpus: %s", out);
	print_message("corpus: %u traces exported and checked, %u damaged ones refused\n", sound,
		      damaged);
	free(out);
	/* replay-spans: three launches timed by spans; kcount's kstats of process 7 */
	char db[512];
	snprintf(db, sizeof(db), "%s/rs.sqlite", dir);
	assert_int_equal(sh_alloc(&out, "%s trace export --format sqlite -o %s "
				  "%s/tests/fuzz/corpus/fuzz_trace_cmd/replay-spans.cubpf", BIN, db,
			    TOOLS_TEST_SRC), 0);
	free(out);
	assert_query(db, "SELECT COUNT(*), MIN(timing), SUM(gpu_end_ns - gpu_start_ns) FROM launches",
		     "3|events|300");
	assert_query(db, "SELECT name, demangled, short_name FROM kernels", "_Z1kv|k()|k");
	assert_query(db, "SELECT pid, state, format FROM processes", "7|complete|1.3");
	rm_dir(dir);
}

/* ---- a run of two processes with known answers -------------------------------------------- */

#define OFFSET 5000 /* host - GPU clock, ns */

struct proc_spec {
	uint32_t pid, ppid;
	uint64_t t0;
};

static uint32_t intern(struct store_trace_writer *w, const char *s)
{
	return store_trace_intern(w, s);
}

/* Kernel launch i of `name`: a launch call, the KERNEL record (no device time), a span that
 * starts lat ns after the call and lasts dur ns. */
static void launch(struct store_trace_writer *w, const struct proc_spec *p, uint64_t corr,
		   const char *name, uint64_t lat, uint64_t dur)
{
	uint64_t t = p->t0 + corr * 100000;
	struct store_rec_api a = {.begin_ns = t, .end_ns = t + 2000, .stream = 0x20, .corr = corr,
				  .name = intern(w, "cuLaunchKernel"), .tid = p->pid};
	struct store_rec_kernel k = {.launch_ns = t, .stream = 0x20, .corr = corr,
				     .name = intern(w, name), .grid = {4, 1, 1}, .block = {128, 1, 1},
				     .shared_bytes = 1024, .tid = p->pid};
	struct store_rec_kspan s = {.corr = corr, .begin_ns = t + lat, .end_ns = t + lat + dur,
				    .stream = 0x20, .name = k.name};
	assert_int_equal(store_trace_api(w, &a), 0);
	assert_int_equal(store_trace_kernel(w, &k), 0);
	assert_int_equal(store_trace_kspan(w, &s), 0);
}

/* memtrace's `counts` (per-SM: 256 copies of 32 u64 words) for kernel ids 1 and 2: id 1 loads
 * 1000 x 4 B from global on SM 0 and 24 x 4 B on SM 7, id 2 stores 10 x 8 B to shared. */
static void memtrace_counts(struct store_trace_writer *w)
{
	size_t value = 256 * 32 * 8, pair = 4 + value;
	uint8_t *kv = calloc(2, pair);
	assert_non_null(kv);
	uint32_t k1 = 1 * 8 + 1, k2 = 2 * 8 + 2;
	uint64_t v;
	memcpy(kv, &k1, 4);
	v = 1000, memcpy(kv + 4 + (0 * 32 + 0 * 6 + 2) * 8, &v, 8);
	v = 24, memcpy(kv + 4 + (7 * 32 + 0 * 6 + 2) * 8, &v, 8);
	memcpy(kv + pair, &k2, 4);
	v = 10, memcpy(kv + pair + 4 + (3 * 32 + 1 * 6 + 3) * 8, &v, 8);
	struct store_rec_map m = {.ts_ns = 1, .name = intern(w, "counts"), .map_type = 6,
				  .key_size = 4, .value_size = (uint32_t)value, .count = 2, .ctx = 1};
	assert_int_equal(store_trace_map(w, &m, kv, 2 * pair), 0);
	free(kv);
}

static void write_process(const char *path, const struct proc_spec *p)
{
	char err[STORE_ERRLEN];
	struct store_trace_process pr = {.pid = p->pid, .ppid = p->ppid, .cubpf_version = "test",
					 .hostname = "box", .cmdline = "python train.py"};
	struct store_trace_writer *w = store_trace_create(path, &pr, NULL, err, sizeof(err));
	if (!w)
		fail_msg("%s", err);
	struct store_rec_device d = {.ordinal = 0, .sm = 90, .memory_bytes = 80ull << 30};
	struct store_rec_clock c = {.host_ns = p->t0 + OFFSET, .gpu_ns = p->t0};
	struct store_rec_kernel_id k1 = {.id = 1, .name = intern(w, "_Z6vecaddPfS_i")};
	struct store_rec_kernel_id k2 = {.id = 2, .name = intern(w, "_Z4gemmv")};
	struct store_rec_map_memory mm = {.context = 0xc0, .device_bytes = 4096, .ctx = 1, .nmaps = 1};
	assert_int_equal(store_trace_device(w, &d, "NVIDIA H100"), 0);
	assert_int_equal(store_trace_clock(w, &c), 0);
	assert_int_equal(store_trace_kernel_id(w, &k1) | store_trace_kernel_id(w, &k2), 0);
	assert_int_equal(store_trace_map_memory(w, &mm, 0), 0);
	/* vecadd: latencies 10..100 us (10 launches), 20 us each on the GPU; gemm: 3 of 1 ms */
	for (uint64_t i = 1; i <= 10; i++)
		launch(w, p, i, "_Z6vecaddPfS_i", i * 10000, 20000);
	for (uint64_t i = 11; i <= 13; i++)
		launch(w, p, i, "_Z4gemmv", 5000, 1000000);
	memtrace_counts(w);
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
}

/* The README's queries (section "Traces as SQL") on the two processes: answers known. */
static void test_export_run_of_two(void **state)
{
	(void)state;
	char *dir = temp_dir(), *out, path[512], db[512];
	struct proc_spec a = {700, 1, 1795000000000000000ull}, b = {701, 700, a.t0 + 1000};
	snprintf(path, sizeof(path), "%s/run.trace", dir);
	write_process(path, &a);
	snprintf(path, sizeof(path), "%s/run.trace.701", dir);
	write_process(path, &b);
	snprintf(db, sizeof(db), "%s/run.sqlite", dir);
	if (sh_alloc(&out, "%s trace export --format sqlite -o %s %s && %s %s %s", BIN, db, dir, CHECK, db,
	       dir) != 0 || !strstr(out, "export ok: 2 processes"))
		fail_msg("%s", out);
	free(out);
	assert_query(db, "SELECT COUNT(*), COUNT(DISTINCT kernel) FROM launches", "26|2");
	assert_query(db, "SELECT pid, ppid FROM processes ORDER BY pid", "700|1\n701|700");
	assert_query(db, "SELECT grid_x, block_x, threads, shared_bytes FROM launches LIMIT 1",
		     "4|128|512|1024");
	assert_query(db, "SELECT COUNT(*) FROM streams WHERE stream = 32 AND launches = 13", "2");
	assert_query(db, "SELECT pid, COUNT(*) FROM kernel_ids GROUP BY pid", "700|2\n701|2");
	/* one time axis: process 701 started 1 us after 700, its launches stay 1 us later */
	assert_query(db, "SELECT MAX(launch_ns) - MIN(launch_ns) FROM launches WHERE corr = 1",
		     "1000");
	/* the per-SM copies summed: 1000 + 24 loads of 4 B per process */
	assert_query(db, "SELECT SUM(value) FROM map_words w JOIN maps m ON m.id = w.map"
			 " WHERE m.name = 'counts' AND w.key_int = 9 AND w.word = 2", "2048");
	assert_query(db, "SELECT copies, entries, device FROM maps LIMIT 1", "256|2|0");

	char sql[4096];
	FILE *f;
	/* the README's queries, from the README itself, answers known */
	assert_int_equal(sh_alloc(&out, "python3 -c \"import re; q=re.findall(r'\\x60\\x60\\x60sql\\n(.*?)"
				  "\\x60\\x60\\x60', open('%s/README.md').read(), re.S); "
				  "[open('%s/q%%d.sql' %% i, 'w').write(x) for i, x in enumerate(q)]\"",
			    TOOLS_TEST_SRC, dir), 0);
	free(out);
	static const char *const want[] = {
		/* top kernels by GPU time */
		"gemm|6|6000.0|1000.0\nvecadd|20|400.0|20.0",
		/* launch latency percentiles (nearest rank over 20 launches of vecadd) */
		"vecadd|20|50.0|90.0|100.0\ngemm|6|5.0|5.0|5.0",
		/* memtrace bytes per kernel, space and operation */
		"vecadd|global|load|8192\ngemm|shared|store|160",
	};
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/q%d.sql", dir, i);
		assert_non_null(f = fopen(path, "r"));
		size_t n = fread(sql, 1, sizeof(sql) - 1, f);
		sql[n] = '\0';
		fclose(f);
		if (sh_alloc(&out, "sqlite3 -batch %s < %s", db, path) != 0)
			fail_msg("README query %d: %s", i, out);
		size_t len = strlen(out);
		while (len && out[len - 1] == '\n')
			out[--len] = '\0';
		if (strcmp(out, want[i]))
			fail_msg("README query %d:\n%s\n  got:  %s\n  want: %s", i, sql, out, want[i]);
		free(out);
	}
	const char *keep = getenv("CUBPF_EXPORT_KEEP"); /* the README's sample output comes from it */
	if (keep)
		assert_int_equal(sh_alloc(&out, "cp %s %s", db, keep), 0), free(out);
	rm_dir(dir);
}

/* ---- a run of several processes over the fake driver -------------------------------------- */

static void test_export_fake_run(void **state)
{
	(void)state;
	char *dir = temp_dir(), *out, db[512];
	snprintf(db, sizeof(db), "%s.sqlite", dir);
	if (sh_alloc(&out, "%s run -t kcount -o %s --real-libcuda %s/tests/libcuda-fake.so -- "
		     "%s/tests/tools_fake_app 0 exec", BIN, dir, TOOLS_TEST_BUILD, TOOLS_TEST_BUILD))
		fail_msg("cubpf run: %s", out);
	free(out);
	if (sh_alloc(&out, "%s trace export --format sqlite -o %s %s && %s %s %s", BIN, db, dir, CHECK, db,
	       dir) != 0 || !strstr(out, "export ok: 2 processes"))
		fail_msg("%s", out);
	free(out);
	/* 3 launches of 5 x 32 threads per process; the child's parent is the first process */
	assert_query(db, "SELECT COUNT(*), SUM(threads) FROM launches", "6|960");
	assert_query(db, "SELECT short_name FROM kernels", "tools_k");
	assert_query(db, "SELECT COUNT(*) FROM processes p JOIN processes q ON q.ppid = p.pid", "1");
	assert_query(db, "SELECT COUNT(DISTINCT pid) FROM kernel_ids", "2");
	assert_query(db, "SELECT COUNT(*) FROM maps WHERE name = 'kstats'", "2");
	assert_query(db, "SELECT COUNT(*), SUM(instrumented_kernels) FROM modules", "2|2");
	assert_query(db, "SELECT state FROM processes GROUP BY state", "complete");
	unlink(db);
	rm_dir(dir);
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void test_export_damaged(void **state)
{
	(void)state;
	char *dir = temp_dir(), *out, path[512], db[512];
	struct proc_spec a = {800, 1, 1795000000000000000ull};
	snprintf(path, sizeof(path), "%s/bad.trace", dir);
	write_process(path, &a);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	/* one byte of the last frame's data changed: its checksum fails */
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, st.st_size - 40, SEEK_SET), 0);
	int c = fgetc(f);
	assert_int_equal(fseek(f, st.st_size - 40, SEEK_SET), 0);
	fputc(c ^ 0x5a, f);
	fclose(f);
	snprintf(db, sizeof(db), "%s/out.sqlite", dir);
	assert_int_equal(sh_alloc(&out, "%s trace export --format sqlite -o %s %s", BIN, db, path), 1);
	if (!strstr(out, "damaged trace") || !strstr(out, "no database written") ||
	    strchr(out, '\n') != out + strlen(out) - 1)
		fail_msg("want one line naming the damage: %s", out);
	free(out);
	assert_int_equal(sh_alloc(&out, "ls -A %s", dir), 0);
	assert_string_equal(out, "bad.trace\n"); /* neither the database nor its temporary file */
	free(out);
	/* an earlier database at OUT stays as it was */
	assert_int_equal(sh_alloc(&out, "echo keep > %s", db), 0);
	free(out);
	assert_int_equal(sh_alloc(&out, "%s trace export --format sqlite -o %s %s", BIN, db, path), 1);
	free(out);
	assert_int_equal(sh_alloc(&out, "cat %s", db), 0);
	assert_string_equal(out, "keep\n");
	free(out);
	/* no -o: said before anything is read */
	assert_int_equal(sh_alloc(&out, "%s trace export --format sqlite %s", BIN, path), 2);
	assert_non_null(strstr(out, "-o FILE is required"));
	free(out);
	rm_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_export_corpus),
		cmocka_unit_test(test_export_run_of_two),
		cmocka_unit_test(test_export_fake_run),
		cmocka_unit_test(test_export_damaged),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
