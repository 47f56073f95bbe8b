/* test_metrics: `cubpf run --metrics` (tools/tool_metrics.c, tools/tool_metrics_http.c).
 *
 * - a run of two processes over the fake driver scraped by a real Prometheus server (Debian's
 *   package, started here on 127.0.0.1 with a temporary configuration and data folder, bounded
 *   in time, killed at the end); the values read back through its HTTP query API equal the
 *   tool's report at exit;
 * - the endpoint's text passes `promtool check metrics`;
 * - a port in use: cubpf run says so in one line and runs nothing;
 * - the exposition itself on traces written here: memtrace's bytes and launchlate's histogram
 *   are the reports' numbers, kernels past the cap fold into kernel="_other".
 * Prometheus, promtool or python3 missing fails the test and says which. */
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/shell.h"
#include "store/store.h"
#include "tools/tools.h"

#define BUILD TOOLS_TEST_BUILD
#define BIN BUILD "/bin/cubpf"


static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("'%s' not in:\n%s", needle, hay);
}

/* A free TCP port of 127.0.0.1 (the system's choice, released at once). */
static int free_port(void)
{
	char *out;
	assert_int_equal(sh_alloc(&out, "python3 -c 'import socket; s=socket.socket(); "
				  "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'"), 0);
	int port = atoi(out);
	free(out);
	assert_true(port > 0);
	return port;
}

static int setup(void **state)
{
	(void)state;
	static const char *const need[] = {"prometheus", "promtool", "python3"};
	int rc = 0;
	for (size_t i = 0; i < 3; i++) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null", need[i]);
		if (system(cmd) != 0) {
			fprintf(stderr, "test_metrics: %s is missing (Debian package %s; ci/deps.sh "
					"installs it)\n", need[i], i < 2 ? "prometheus" : "python3");
			rc = -1;
		}
	}
	return rc;
}

/* ---- a real Prometheus server --------------------------------------------------------------- */

/* python3: Prometheus's answer to an instant query, as "value" of the first series, "none"
 * when no series matches, "unreachable: ..." while the server is not up yet. */
static const char query_py[] =
	"import json,sys,urllib.request,urllib.parse\n"
	"u='http://127.0.0.1:'+sys.argv[1]+'/api/v1/query?query='+urllib.parse.quote(sys.argv[2])\n"
	"try:\n"
	"    r=json.load(urllib.request.urlopen(u, timeout=5))\n"
	"except OSError as e:\n"
	"    print('unreachable:', e); sys.exit(0)\n"
	"res=r['data']['result']\n"
	"print(res[0]['value'][1] if res else 'none')\n";

static char *prom_query(const char *dir, int pport, const char *q)
{
	char *out;
	if (sh_alloc(&out, "python3 %s/query.py %d '%s'", dir, pport, q) != 0)
		fail_msg("query %s: %s", q, out);
	out[strcspn(out, "\n")] = '\0';
	return out;
}

/* Waits (at most ~30 s) until Prometheus answers q with want; returns its last answer. */
static char *prom_wait(const char *dir, int pport, const char *q, const char *want)
{
	char *v = NULL;
	for (int i = 0; i < 60; i++) {
		free(v);
		v = prom_query(dir, pport, q);
		if (!strcmp(v, want))
			break;
		usleep(500 * 1000);
	}
	return v;
}

static void write_file(const char *path, const char *fmt, ...)
{
	FILE *f = fopen(path, "w");
	va_list ap;
	assert_non_null(f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* The report's kcount row for tools_k: launches and threads. */
static void report_row(const char *report, unsigned long *launches, unsigned long *threads)
{
	const char *at = strstr(report, "--- at exit ---");
	const char *row = at ? strstr(at, "\ntools_k ") : NULL;
	if (!row || sscanf(row + 9, "%lu %lu", launches, threads) != 2)
		fail_msg("no tools_k row at exit:\n%s", report);
}

static void test_metrics_prometheus(void **state)
{
	(void)state;
	char dir[] = "/tmp/cubpf-test-metrics-XXXXXX", path[512], *out, *v;
	assert_non_null(mkdtemp(dir));
	int port = free_port(), pport = free_port();
	snprintf(path, sizeof(path), "%s/query.py", dir);
	write_file(path, "%s", query_py);
	snprintf(path, sizeof(path), "%s/prometheus.yml", dir);
	write_file(path, "global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\n"
			 "scrape_configs:\n  - job_name: cubpf\n    static_configs:\n"
			 "      - targets: ['127.0.0.1:%d']\n", port);
	/* the program: two processes with CUDA, then 8 s without, so that scrapes follow the
	 * last snapshot; cubpf run in the background, its report in run.out */
	assert_int_equal(sh_alloc(&out, "cd %s && (%s run -t kcount --metrics 127.0.0.1:%d --real-libcuda "
				  "%s/tests/libcuda-fake.so -- sh -c '%s/tests/tools_fake_app 0 exec; "
				  "sleep 8' > run.out 2>&1; echo $? > run.rc) >/dev/null 2>&1 &",
			    dir, BIN, port, BUILD, BUILD), 0);
	free(out);
	assert_int_equal(sh_alloc(&out, "cd %s && (timeout 60 prometheus --config.file=prometheus.yml "
				  "--storage.tsdb.path=data --web.listen-address=127.0.0.1:%d "
				  "> prom.log 2>&1 & echo $! > prom.pid)", dir, pport), 0);
	free(out);
	/* the values while the program still runs (its sleep), from Prometheus's database */
	v = prom_wait(dir, pport, "sum(cubpf_kernel_launches_total{kernel=\"tools_k\"})", "6");
	char *threads = prom_query(dir, pport, "sum(cubpf_kernel_threads_total{kernel=\"tools_k\"})");
	char *procs = prom_query(dir, pport, "cubpf_processes");
	char *runs = prom_query(dir, pport, "sum(cubpf_kcount_gpu_runs_total)");
	/* scrapes succeeded (one may time out on a loaded machine: its up is 0 for that one) */
	char *up = prom_query(dir, pport, "max_over_time(up{job=\"cubpf\"}[1m])");
	assert_int_equal(sh_alloc(&out, "cd %s && kill $(cat prom.pid); for i in $(seq 100); do "
				  "[ -f run.rc ] && break; sleep 0.2; done; cat run.out; cat run.rc",
			    dir), 0);
	unsigned long launches, nthreads;
	report_row(out, &launches, &nthreads);
	char want[64];
	snprintf(want, sizeof(want), "%lu", launches);
	if (strcmp(v, want) || launches != 6)
		fail_msg("launches: Prometheus %s, report %lu:\n%s", v, launches, out);
	snprintf(want, sizeof(want), "%lu", nthreads);
	assert_string_equal(threads, want);
	assert_string_equal(procs, "2");
	assert_string_equal(runs, "0"); /* the fake driver runs no kernel: the map stays 0 */
	assert_string_equal(up, "1");
	assert_contains(out, "metrics at http://127.0.0.1:");
	free(out), free(v), free(threads), free(procs), free(runs), free(up);
	assert_int_equal(sh_alloc(&out, "rm -rf %s", dir), 0);
	free(out);
}

/* CUBPF_METRICS: the plain shim's endpoint, inside the process (no cubpf run), scraped by a
 * real Prometheus server: the values it stored equal the shim's report at exit, and the text
 * passes promtool.  The fake driver runs no kernel, so kcount's map stays 0 (no map series):
 * the kernel-id table, the module counts and the process's pid are what can be compared. */
static void test_metrics_shim_endpoint_prometheus(void **state)
{
	(void)state;
	char dir[] = "/tmp/cubpf-test-metrics-XXXXXX", path[512], *out, *v;
	assert_non_null(mkdtemp(dir));
	int port = free_port(), pport = free_port();
	snprintf(path, sizeof(path), "%s/query.py", dir);
	write_file(path, "%s", query_py);
	snprintf(path, sizeof(path), "%s/prometheus.yml", dir);
	write_file(path, "global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\n"
			 "scrape_configs:\n  - job_name: app\n    static_configs:\n"
			 "      - targets: ['127.0.0.1:%d']\n", port);
	assert_int_equal(sh_alloc(&out, "cd %s && (LD_LIBRARY_PATH=%s/lib CUBPF_REAL_LIBCUDA=%s/tests/"
				  "libcuda-fake.so CUBPF_PROGRAMS=%s/probes/kcount.bpf.o CUBPF_LOG=info "
				  "CUBPF_METRICS=127.0.0.1:%d CUBPF_INTERVAL_MS=200 FAKE_APP_LINGER_S=15 "
				  "%s/tests/tools_fake_app 0 > app.out 2>&1 & echo $! > app.pid; wait; "
				  "echo $? > app.rc) >/dev/null 2>&1 &", dir, BUILD, BUILD, BUILD, port,
			    BUILD), 0);
	free(out);
	assert_int_equal(sh_alloc(&out, "cd %s && (timeout 60 prometheus --config.file=prometheus.yml "
				  "--storage.tsdb.path=data --web.listen-address=127.0.0.1:%d "
				  "> prom.log 2>&1 & echo $! > prom.pid)", dir, pport), 0);
	free(out);
	v = prom_wait(dir, pport, "cubpf_kernel_info{kernel=\"tools_k\"}", "1");
	char *mods = prom_query(dir, pport, "cubpf_modules_total{outcome=\"instrumented\"}");
	char *kernels = prom_query(dir, pport, "cubpf_kernels_instrumented");
	/* the pid label is the process's own */
	assert_int_equal(sh_alloc(&out, "cat %s/app.pid", dir), 0);
	out[strcspn(out, "\n")] = '\0';
	char q[128];
	snprintf(q, sizeof(q), "cubpf_kernels_instrumented{pid=\"%s\"}", out);
	free(out);
	char *pid = prom_query(dir, pport, q);
	char *up = prom_query(dir, pport, "max_over_time(up{job=\"app\"}[1m])");
	/* promtool on the endpoint's text while the process still runs */
	int rc = sh_alloc(&out, "python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request."
			  "urlopen(\"http://127.0.0.1:%d/metrics\").read().decode())' > %s/m.txt && "
			  "promtool check metrics < %s/m.txt && cat %s/m.txt", port, dir, dir, dir);
	if (rc != 0)
		fail_msg("promtool (Prometheus said kernel_info %s): %s", v, out);
	assert_contains(out, "# TYPE cubpf_kernel_info gauge\n");
	free(out);
	assert_int_equal(sh_alloc(&out, "cd %s && kill $(cat prom.pid); for i in $(seq 100); do "
				  "[ -f app.rc ] && break; sleep 0.2; done; cat app.out; cat app.rc",
			    dir), 0);
	/* the report at exit: what Prometheus stored */
	assert_contains(out, "live: 1 modules instrumented (1 kernels)");
	assert_contains(out, "live: kernel id 1 = tools_k");
	assert_contains(out, "live: metrics at http://127.0.0.1:");
	assert_contains(out, "\n0\n"); /* the app's exit status */
	assert_string_equal(v, "1");
	assert_string_equal(mods, "1");
	assert_string_equal(kernels, "1");
	assert_string_equal(pid, "1");
	assert_string_equal(up, "1");
	free(out), free(v), free(mods), free(kernels), free(pid), free(up);
	assert_int_equal(sh_alloc(&out, "rm -rf %s", dir), 0);
	free(out);
}

/* ---- promtool, and a port in use ------------------------------------------------------------ */

static void test_metrics_promtool_and_port_in_use(void **state)
{
	(void)state;
	char dir[] = "/tmp/cubpf-test-metrics-XXXXXX", *out;
	assert_non_null(mkdtemp(dir));
	int port = free_port();
	assert_int_equal(sh_alloc(&out, "cd %s && (%s run -t kcount --metrics %d --real-libcuda "
				  "%s/tests/libcuda-fake.so -- sh -c '%s/tests/tools_fake_app 0 exec; "
				  "sleep 4' > run.out 2>&1 &) >/dev/null 2>&1", dir, BIN, port, BUILD,
			    BUILD), 0);
	free(out);
	/* scraped with python (no curl needed) once both processes' launches are in */
	int rc = sh_alloc(&out, "for i in $(seq 50); do python3 -c 'import urllib.request,sys; "
			  "sys.stdout.write(urllib.request.urlopen(\"http://127.0.0.1:%d/metrics\")"
			  ".read().decode())' > %s/m.txt 2>/dev/null && grep -q 'cubpf_processes 2' "
			  "%s/m.txt && break; sleep 0.2; done; promtool check metrics < %s/m.txt && "
			  "cat %s/m.txt", port, dir, dir, dir, dir);
	if (rc != 0)
		fail_msg("promtool: %s", out);
	assert_contains(out, "# TYPE cubpf_kernel_launches_total counter\n");
	assert_contains(out, ",kernel=\"tools_k\",name=\"tools_k\"} 3\n");
	assert_contains(out, ",id=\"1\",kernel=\"tools_k\",name=\"tools_k\"} 1\n");
	assert_contains(out, "# TYPE cubpf_map_value gauge\n");
	free(out);
	/* the same port again: one line, status 2, the command not run */
	rc = sh_alloc(&out, "%s run -t kcount --metrics 127.0.0.1:%d -- touch %s/ran", BIN, port, dir);
	assert_int_equal(rc, 2);
	assert_contains(out, "--metrics 127.0.0.1:");
	assert_contains(out, "Address already in use");
	assert_true(strchr(out, '\n') == out + strlen(out) - 1);
	free(out);
	assert_int_equal(sh_alloc(&out, "test ! -e %s/ran", dir), 0);
	free(out);
	assert_int_equal(sh_alloc(&out, "%s run --metrics 'no:port' -- true", BIN), 2);
	assert_contains(out, "is not [ADDR:]PORT");
	free(out);
	assert_int_equal(sh_alloc(&out, "sleep 4; rm -rf %s", dir), 0);
	free(out);
}

/* ---- the exposition on traces written here -------------------------------------------------- */

static char trace_path[] = "/tmp/cubpf-test-metrics-trace-XXXXXX";

static struct store_trace_writer *create(void)
{
	char err[STORE_ERRLEN];
	struct store_trace_process p = {.pid = 42, .cubpf_version = "test", .hostname = "h",
					.cmdline = "./app"};
	int fd = mkstemp(trace_path);
	assert_true(fd >= 0);
	close(fd);
	struct store_trace_writer *w = store_trace_create(trace_path, &p, NULL, err, sizeof(err));
	if (!w)
		fail_msg("%s", err);
	return w;
}

static char *exposition(struct store_trace_writer *w, const char *tool, char **report)
{
	char err[STORE_ERRLEN] = "", *buf = NULL;
	size_t len = 0;
	struct tool_data d = {0};
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
	assert_int_equal(tool_data_load(&d, trace_path, err, sizeof(err)), 0);
	struct tool_metrics_proc p = {.pid = d.procs[0].pid, .d = &d, .trace_bytes = 1};
	FILE *f = open_memstream(&buf, &len);
	tool_metrics_write(f, tool, &p, 1);
	fclose(f);
	if (report) {
		char *r = NULL;
		size_t rl = 0;
		struct tool_opts o = {.top = 10};
		f = open_memstream(&r, &rl);
		tool_find(tool)->report(&d, &o, f);
		fclose(f);
		*report = r;
	}
	tool_data_free(&d);
	unlink(trace_path);
	strcpy(trace_path, "/tmp/cubpf-test-metrics-trace-XXXXXX");
	return buf;
}

static void kernel_id(struct store_trace_writer *w, uint32_t id, const char *name)
{
	struct store_rec_kernel_id k = {.id = id, .name = store_trace_intern(w, name)};
	assert_int_equal(store_trace_kernel_id(w, &k), 0);
}

/* memtrace: kernel 1 loads 1024 x 4 B from global over two SMs (the report's 4096 bytes). */
static void test_metrics_memtrace(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel_id(w, 1, "_Z6vecaddPfS_i");
	size_t value = 256 * 32 * 8, pair = 4 + value;
	uint8_t *kv = calloc(1, pair);
	uint32_t key = 1 * 8 + 1;
	uint64_t a = 1000, b = 24;
	assert_non_null(kv);
	memcpy(kv, &key, 4);
	memcpy(kv + 4 + (0 * 32 + 2) * 8, &a, 8);
	memcpy(kv + 4 + (7 * 32 + 2) * 8, &b, 8);
	struct store_rec_map m = {.name = store_trace_intern(w, "counts"), .map_type = 6,
				  .key_size = 4, .value_size = (uint32_t)value, .count = 1};
	assert_int_equal(store_trace_map(w, &m, kv, pair), 0);
	free(kv);
	char *report, *text = exposition(w, "memtrace", &report);
	assert_contains(report, "    global     load             4096           1024");
	assert_contains(text, "cubpf_memtrace_bytes_total{pid=\"42\",device=\"0\",kernel=\"vecadd\","
			      "name=\"_Z6vecaddPfS_i\",space=\"global\",op=\"load\"} 4096\n");
	assert_contains(text, "cubpf_memtrace_accesses_total{pid=\"42\",device=\"0\",kernel=\"vecadd\","
			      "name=\"_Z6vecaddPfS_i\",space=\"global\",op=\"load\"} 1024\n");
	/* the generic series (vm/metrics.c, the shim's endpoint's too): words summed over SMs */
	assert_contains(text, "cubpf_map_value{pid=\"42\",map=\"counts\",key=\"9\",word=\"2\"} 1024\n");
	assert_contains(text, "cubpf_kernel_info{pid=\"42\",id=\"1\",kernel=\"vecadd\","
			      "name=\"_Z6vecaddPfS_i\"} 1\n");
	free(report);
	free(text);
}

/* launchlate: two launches whose GPU starts come 1000 and 3000 ns after the calls. */
static void test_metrics_launchlate(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel_id(w, 1, "_Z1kv");
	uint32_t name = store_trace_intern(w, "_Z1kv");
	for (int i = 0; i < 2; i++) {
		struct store_rec_kernel k = {.launch_ns = 1000000 + i * 10000ull, .name = name,
					     .grid = {1, 1, 1}, .block = {32, 1, 1}};
		assert_int_equal(store_trace_kernel(w, &k), 0);
	}
	/* starts: key = id * 1024 + launch number, value = the GPU start (no CLOCK: host time) */
	uint8_t kv[2][12];
	uint64_t starts[2] = {1001000, 1013000};
	for (uint32_t i = 0; i < 2; i++) {
		uint32_t key = 1024 + i;
		memcpy(kv[i], &key, 4);
		memcpy(kv[i] + 4, &starts[i], 8);
	}
	struct store_rec_map m = {.name = store_trace_intern(w, "starts"), .map_type = 1503,
				  .key_size = 4, .value_size = 8, .count = 2};
	assert_int_equal(store_trace_map(w, &m, kv, sizeof(kv)), 0);
	char *report, *text = exposition(w, "launchlate", &report);
	assert_contains(report, "(2 samples of 2 launches, mean 2.0 us)");
	static const char *const want[] = {
		/* 1000 ns in slot 9 (512..1023): le 1024 ns; 3000 in slot 11: le 4096 ns */
		"cubpf_launchlate_latency_seconds_bucket{pid=\"42\",device=\"0\",kernel=\"k\","
		"name=\"_Z1kv\",le=\"1.024e-06\"} 1\n",
		"le=\"2.048e-06\"} 1\n", "le=\"4.096e-06\"} 2\n", "le=\"+Inf\"} 2\n",
		"cubpf_launchlate_latency_seconds_sum{pid=\"42\",device=\"0\",kernel=\"k\","
		"name=\"_Z1kv\"} 0.000004000\n",
		"cubpf_launchlate_latency_seconds_count{pid=\"42\",device=\"0\",kernel=\"k\","
		"name=\"_Z1kv\"} 2\n",
		"# TYPE cubpf_launchlate_latency_seconds histogram\n"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_contains(text, want[i]);
	free(report);
	free(text);
}

/* threadhist: 5 threads ran 3 times, 5 once (the report's distribution) as a histogram. */
static void test_metrics_threadhist(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	uint8_t kv[10][12];
	for (uint32_t i = 0; i < 10; i++) {
		uint64_t v = i < 5 ? 3 : 1;
		memcpy(kv[i], &i, 4);
		memcpy(kv[i] + 4, &v, 8);
	}
	struct store_rec_map m = {.name = store_trace_intern(w, "threads"), .map_type = 1503,
				  .key_size = 4, .value_size = 8, .count = 10};
	assert_int_equal(store_trace_map(w, &m, kv, sizeof(kv)), 0);
	char *report, *text = exposition(w, "threadhist", &report);
	assert_contains(report, "           3             5\n");
	assert_contains(report, "           1             5\n");
	static const char *const want[] = {
		"# TYPE cubpf_threadhist_executions histogram\n",
		"cubpf_threadhist_executions_bucket{pid=\"42\",le=\"1\"} 5\n",
		"cubpf_threadhist_executions_bucket{pid=\"42\",le=\"2\"} 5\n",
		"cubpf_threadhist_executions_bucket{pid=\"42\",le=\"4\"} 10\n",
		"cubpf_threadhist_executions_bucket{pid=\"42\",le=\"+Inf\"} 10\n",
		"cubpf_threadhist_executions_sum{pid=\"42\"} 20\n",
		"cubpf_threadhist_executions_count{pid=\"42\"} 10\n"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_contains(text, want[i]);
	free(report);
	free(text);
}

/* More kernels than the cap: the first TOOL_METRICS_KERNELS named, the rest summed. */
static void test_metrics_kernel_cap(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	for (unsigned i = 0; i < TOOL_METRICS_KERNELS + 5; i++) {
		char name[32];
		snprintf(name, sizeof(name), "kernel_%u", i);
		struct store_rec_kernel k = {.name = store_trace_intern(w, name), .grid = {1, 1, 1},
					     .block = {i + 1, 1, 1}};
		assert_int_equal(store_trace_kernel(w, &k), 0);
	}
	char *text = exposition(w, "kcount", NULL), line[256];
	size_t series = 0;
	for (const char *p = text; (p = strstr(p, "\ncubpf_kernel_threads_total{")); p++)
		series++;
	assert_int_equal(series, TOOL_METRICS_KERNELS + 1);
	snprintf(line, sizeof(line), "kernel=\"kernel_%u\",name=\"kernel_%u\"} %u\n",
		 TOOL_METRICS_KERNELS - 1, TOOL_METRICS_KERNELS - 1, TOOL_METRICS_KERNELS);
	assert_contains(text, line);
	/* threads of the 5 folded: 201 + 202 + 203 + 204 + 205 */
	assert_contains(text, "cubpf_kernel_threads_total{pid=\"42\",device=\"any\",kernel=\"_other\","
			      "name=\"_other\"} 1015\n");
	assert_null(strstr(text, "kernel_200\""));
	free(text);
}

/* ---- scrapes follow the traces: each reads only what was appended ----------------------------
 * A kcount-like trace (50 kernels, a kstats snapshot of 50 x 256 SM copies each "second", a
 * launch of every kernel between snapshots) written whole, then given to a follower in two
 * parts, cut inside a frame: the second update decodes exactly the bytes the first had not
 * (bytes counted by the reader, no timing), the two add up to the file, and the data, the
 * exposition and kcount's report equal those of a fresh read of the whole file (the report at
 * exit).  The same through tool_metrics_traces_write, the call cubpf run's server makes.
 * METRICS_FOLLOW_SNAPSHOTS=600 makes the README's 10-minute trace and prints both costs. */
#define FOLLOW_KERNELS 50
#define KSTAT_BYTES 128

static size_t follow_trace(size_t snapshots)
{
	struct store_trace_writer *w = create();
	uint32_t names[FOLLOW_KERNELS];
	for (uint32_t k = 0; k < FOLLOW_KERNELS; k++) {
		char name[32];
		snprintf(name, sizeof(name), "_Z8kernel%02uv", k);
		kernel_id(w, k + 1, name);
		names[k] = store_trace_intern(w, name);
	}
	size_t value = KSTAT_BYTES * 256, pair = 4 + value;
	uint8_t *kv = calloc(FOLLOW_KERNELS, pair);
	assert_non_null(kv);
	for (size_t t = 0; t < snapshots; t++) {
		for (uint32_t k = 0; k < FOLLOW_KERNELS; k++) {
			struct store_rec_kernel l = {.launch_ns = t * 1000000000ull + k, .name = names[k],
						     .grid = {k + 1, 1, 1}, .block = {128, 1, 1}};
			assert_int_equal(store_trace_kernel(w, &l), 0);
			uint8_t *p = kv + k * pair;
			uint32_t key = k + 1, sm = (uint32_t)(t * 7 + k) % 256;
			uint64_t runs, threads;
			memcpy(p, &key, 4);
			memcpy(&runs, p + 4 + sm * KSTAT_BYTES, 8);
			memcpy(&threads, p + 4 + sm * KSTAT_BYTES + 8, 8);
			runs += 1, threads += (k + 1) * 128;
			memcpy(p + 4 + sm * KSTAT_BYTES, &runs, 8);
			memcpy(p + 4 + sm * KSTAT_BYTES + 8, &threads, 8);
		}
		struct store_rec_map m = {.ts_ns = (t + 1) * 1000000000ull, .ctx = 1,
					  .name = store_trace_intern(w, "kstats"), .map_type = 6,
					  .key_size = 4, .value_size = (uint32_t)value,
					  .count = FOLLOW_KERNELS};
		struct store_trace_counters c0, c;
		store_trace_counters(w, &c0);
		assert_int_equal(store_trace_map(w, &m, kv, FOLLOW_KERNELS * pair), 0);
		/* paced: a snapshot a second is what the shim writes, never more than its writer
		 * keeps up with (a test that outruns it would see batches dropped) */
		store_trace_flush(w);
		for (int i = 0; i < 10000; i++, usleep(1000)) {
			store_trace_counters(w, &c);
			if (c.frames > c0.frames)
				break;
		}
	}
	free(kv);
	char err[STORE_ERRLEN];
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
	struct stat st;
	assert_int_equal(stat(trace_path, &st), 0);
	return (size_t)st.st_size;
}

static char *expose(const struct tool_data *d, uint64_t trace_bytes, char **report)
{
	char *buf = NULL, *r = NULL;
	size_t len = 0, rl = 0;
	struct tool_metrics_proc p = {.pid = d->procs[0].pid, .d = d, .trace_bytes = trace_bytes};
	FILE *f = open_memstream(&buf, &len);
	tool_metrics_write(f, "kcount", &p, 1);
	fclose(f);
	struct tool_opts o = {.top = 100};
	f = open_memstream(&r, &rl);
	tool_find("kcount")->report(d, &o, f);
	fclose(f);
	*report = r;
	return buf;
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void copy_bytes(const char *to, const uint8_t *from, size_t n, const char *mode)
{
	FILE *f = fopen(to, mode);
	assert_non_null(f);
	assert_int_equal(fwrite(from, 1, n, f), n);
	fclose(f);
}

static void test_metrics_scrapes_read_only_new_bytes(void **state)
{
	(void)state;
	const char *env = getenv("METRICS_FOLLOW_SNAPSHOTS");
	size_t snaps = env ? strtoul(env, NULL, 10) : 40, size = follow_trace(snaps), got;
	char err[STORE_ERRLEN] = "", grow[64] = "/tmp/cubpf-test-metrics-grow-XXXXXX";
	FILE *f = fopen(trace_path, "r");
	uint8_t *img = malloc(size);
	assert_non_null(f);
	assert_non_null(img);
	assert_int_equal((got = fread(img, 1, size, f)), size);
	fclose(f);
	int fd = mkstemp(grow);
	assert_true(fd >= 0);
	close(fd);
	/* the report at exit: the whole file read at once */
	struct tool_data whole = {0};
	double t0 = seconds();
	assert_int_equal(tool_data_load(&whole, trace_path, err, sizeof(err)), 0);
	double t_whole = seconds() - t0;
	/* the first scrape sees the first part, cut 1000 bytes before the end: inside the frame
	 * that holds the END record */
	size_t cut = size - 1000;
	copy_bytes(grow, img, cut, "w");
	struct tool_follow *fl = tool_follow_open(grow, err, sizeof(err));
	if (!fl)
		fail_msg("%s", err);
	uint64_t total, first, last;
	assert_int_equal(tool_follow_update(fl, err, sizeof(err)), 0);
	tool_follow_bytes(fl, &total, &first);
	assert_true(total < cut && total > size / 2); /* whole frames only */
	assert_true(first > 0 && first < total); /* the header frame was read at open */
	assert_string_equal(tool_follow_data(fl)->state, "cut short (process killed?)");
	/* the rest arrives: the second scrape decodes it alone */
	copy_bytes(grow, img + cut, size - cut, "a");
	t0 = seconds();
	assert_int_equal(tool_follow_update(fl, err, sizeof(err)), 0);
	double t_update = seconds() - t0;
	uint64_t before = total; /* the header frame (read at open) and the first update's */
	tool_follow_bytes(fl, &total, &last);
	assert_int_equal(total, size);
	assert_int_equal(before + last, size);
	uint64_t last_bytes = last;
	assert_true(last < size / 2);
	/* a third with nothing new reads nothing */
	assert_int_equal(tool_follow_update(fl, err, sizeof(err)), 0);
	tool_follow_bytes(fl, &total, &last);
	assert_int_equal(last, 0);
	/* what the follower folded equals the whole file read at once */
	const struct tool_data *d = tool_follow_data(fl);
	assert_string_equal(d->state, "complete");
	char *rep_whole, *rep_follow;
	char *m_whole = expose(&whole, size, &rep_whole), *m_follow = expose(d, total, &rep_follow);
	assert_string_equal(m_follow, m_whole);
	assert_string_equal(rep_follow, rep_whole);
	char line[160];
	snprintf(line, sizeof(line), "cubpf_kcount_gpu_runs_total{pid=\"42\",device=\"0\","
		 "kernel=\"kernel07\",name=\"_Z8kernel07v\"} %zu\n", snaps);
	assert_contains(m_follow, line);
	snprintf(line, sizeof(line), "cubpf_kernel_launches_total{pid=\"42\",device=\"0\","
		 "kernel=\"kernel49\",name=\"_Z8kernel49v\"} %zu\n", snaps);
	assert_contains(m_follow, line);
	/* the server's call: two scrapes, the second equal to the report at exit */
	struct tool_metrics_traces *t = tool_metrics_traces_new();
	char *paths[1] = {grow}, *s1 = NULL, *s2 = NULL;
	size_t l1, l2;
	copy_bytes(grow, img, cut, "w");
	f = open_memstream(&s1, &l1);
	tool_metrics_traces_write(t, f, "kcount", paths, 1);
	fclose(f);
	copy_bytes(grow, img + cut, size - cut, "a");
	f = open_memstream(&s2, &l2);
	t0 = seconds();
	tool_metrics_traces_write(t, f, "kcount", paths, 1);
	double t_scrape = seconds() - t0;
	fclose(f);
	tool_metrics_traces_free(t);
	assert_string_equal(s2, m_whole);
	assert_null(strstr(s1, "cubpf_trace_bytes{pid=\"42\"} 0\n"));
	if (env)
		fprintf(stderr, "%zu snapshots, %zu bytes of trace: whole read %.3f s, update with "
			"the last %llu bytes %.4f s, a scrape of them (update and text) %.4f s\n",
			snaps, size, t_whole, (unsigned long long)last_bytes, t_update, t_scrape);
	free(s1), free(s2), free(m_whole), free(m_follow), free(rep_whole), free(rep_follow);
	tool_follow_close(fl);
	tool_data_free(&whole);
	free(img);
	unlink(grow);
	unlink(trace_path);
	strcpy(trace_path, "/tmp/cubpf-test-metrics-trace-XXXXXX");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_memtrace),
		cmocka_unit_test(test_metrics_launchlate),
		cmocka_unit_test(test_metrics_threadhist),
		cmocka_unit_test(test_metrics_kernel_cap),
		cmocka_unit_test(test_metrics_scrapes_read_only_new_bytes),
		cmocka_unit_test(test_metrics_promtool_and_port_in_use),
		cmocka_unit_test(test_metrics_prometheus),
		cmocka_unit_test(test_metrics_shim_endpoint_prometheus),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
