/* The cubpf trace and cubpf cache commands, run as a user runs them ($CUBPF_BUILD/bin/cubpf),
 * on files written by the library.  The Chrome export is parsed by Python's json module and its
 * events checked against what was written. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/tests.h"

#define NKERN 50
#define CLOCK_OFFSET 7000 /* host - gpu, ns */

static char *cubpf_path(void)
{
	const char *b = getenv("CUBPF_BUILD");
	char p[4096];
	snprintf(p, sizeof(p), "%s/bin/cubpf", b && *b ? b : "build");
	if (access(p, X_OK))
		fail_msg("%s is missing: build it first (CUBPF_BUILD=%s)", p, b ? b : "unset");
	return strdup(p);
}

/* A small but complete trace: a device with a clock calibration, a program, NKERN launches
 * (API call + kernel with device times), copies, probe events, a histogram snapshot. */
static void write_sample(const char *path)
{
	char err[STORE_ERRLEN];
	struct store_trace_process p = {.pid = 321, .driver_version = 13000, .cubpf_version = "0.1.0",
					.hostname = "box", .cmdline = "./vecadd 1024"};
	struct store_trace_writer *w = store_trace_create(path, &p, NULL, err, sizeof(err));
	if (!w)
		fail_msg("%s", err);
	struct store_rec_device d = {.ordinal = 0, .sm = 90, .memory_bytes = 1ull << 36};
	store_trace_device(w, &d, "NVIDIA H100 80GB HBM3");
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now); /* near the header's start, as in a real trace */
	uint64_t t0 = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	struct store_rec_clock c = {.host_ns = t0 + CLOCK_OFFSET, .gpu_ns = t0, .uncertainty_ns = 40};
	store_trace_clock(w, &c);
	struct store_rec_program pr = {.index = 0, .nmaps = 2};
	store_trace_program(w, &pr, "kernelretsnoop", "probes/kernelretsnoop.bpf.o");
	uint32_t launch = store_trace_intern(w, "cuLaunchKernel");
	uint32_t copy = store_trace_intern(w, "cuMemcpyHtoDAsync_v2");
	uint32_t kname = store_trace_intern(w, "_Z6vecAddPKfS0_Pfi");
	for (unsigned i = 0; i < NKERN; i++) {
		uint64_t base = t0 + 1000000ull * (i + 1);
		struct store_rec_api a = {.begin_ns = base, .end_ns = base + 3000, .stream = 0x55,
					  .corr = 2 * i + 1, .name = launch, .tid = 1234};
		store_trace_api(w, &a);
		struct store_rec_kernel k = {.launch_ns = base, .gpu_start = base + 10000 - CLOCK_OFFSET,
					     .gpu_end = base + 10000 - CLOCK_OFFSET + 2000 + 100 * i,
					     .stream = 0x55, .corr = 2 * i + 1, .name = kname,
					     .grid = {4, 1, 1}, .block = {256, 1, 1}, .tid = 1234};
		store_trace_kernel(w, &k);
		struct store_rec_api ac = {.begin_ns = base + 20000, .end_ns = base + 21000,
					   .stream = 0x55, .bytes = 4096, .corr = 2 * i + 2,
					   .name = copy, .tid = 1234};
		store_trace_api(w, &ac);
		struct store_rec_copy cp = {.launch_ns = base + 20000, .gpu_start = base + 30000,
					    .gpu_end = base + 31000, .stream = 0x55,
					    .corr = 2 * i + 2, .bytes = 4096, .kind = STORE_COPY_HTOD};
		store_trace_copy(w, &cp);
		struct store_rec_probe pe = {.ts_ns = base + 11000 - CLOCK_OFFSET, .prog = 0, .map = 1,
					     .flags = STORE_PROBE_GPU_TIME};
		uint32_t payload[2] = {i, 7};
		store_trace_probe(w, &pe, payload, sizeof(payload));
	}
	struct store_rec_map m = {.ts_ns = t0 + 999, .prog = 0, .map = 0,
				  .name = store_trace_intern(w, "latency_hist"), .map_type = 2,
				  .key_size = 4, .value_size = 8, .count = 3};
	uint8_t kv[36];
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t v = 100 * (i + 1);
		memcpy(kv + 12 * i, &i, 4);
		memcpy(kv + 12 * i + 4, &v, 8);
	}
	store_trace_map(w, &m, kv, sizeof(kv));
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
}

static const char checker[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1]))\n"
	"ev=d['traceEvents']\n"
	"k=[e for e in ev if e.get('cat')=='kernel' and e['ph']=='X']\n"
	"a=[e for e in ev if e.get('cat')=='api' and e['ph']=='X']\n"
	"c=[e for e in ev if e.get('cat')=='copy' and e['ph']=='X']\n"
	"p=[e for e in ev if e.get('cat')=='probe']\n"
	"assert len(k)==%d and len(a)==%d and len(c)==%d and len(p)==%d, (len(k),len(a),len(c),len(p))\n"
	"assert all(e['name']=='_Z6vecAddPKfS0_Pfi' for e in k)\n"
	"api={e['args']['corr']:e for e in a}\n"
	"k.sort(key=lambda e:e['ts'])\n"
	"for i,e in enumerate(k):\n"
	"  assert abs(e['ts']-k[0]['ts']-1000*i)<2e-3, e\n"
	"  assert abs(e['ts']-api[e['args']['corr']]['ts']-10)<2e-3, e\n"
	"  assert abs(e['dur']-(2+0.1*i))<2e-3, e\n"
	"assert {e['pid'] for e in k}!={e['pid'] for e in a}\n"
	"names={e['args']['name'] for e in ev if e['ph']=='M'}\n"
	"assert 'stream 0x55' in names and any('H100' in n for n in names), names\n"
	"flows=[e for e in ev if e['ph'] in 's' or e['ph']=='f']\n"
	"assert len(flows)==4*%d, len(flows)\n"
	"print('chrome ok', len(ev))\n";

static void test_trace_commands(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), trace[4200], cmd[32768], *out;
	snprintf(trace, sizeof(trace), "%s/sample.cubpf", dir);
	write_sample(trace);

	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "api=100 kernel=50 copy=50 probe=50 map=1"));
	assert_non_null(strstr(out, "state     complete"));
	assert_non_null(strstr(out, "NVIDIA H100"));
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace stats %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	/* 50 kernels of 2000 + 100 i ns: total 222.5 us, p50 = 4.4 us (25th), max 6.9 us. */
	assert_non_null(strstr(out, "222.500"));
	assert_non_null(strstr(out, "4.400"));
	assert_non_null(strstr(out, "6.900  _Z6vecAddPKfS0_Pfi"));
	assert_non_null(strstr(out, "cuMemcpyHtoDAsync_v2"));
	/* issue 30: no kernel id in the trace, so none of its kernels ran with probes */
	assert_non_null(strstr(out, "probed: 0 of 1 kernels launched, 0 of 50 launches (0.0%), 0.0% "
				    "of the GPU time of 50 timed launches (0.000 of 0.223 ms)"));
	free(out);

	char json[4200], py[4200];
	snprintf(json, sizeof(json), "%s/out.json", dir);
	snprintf(py, sizeof(py), "%s/check.py", dir);
	FILE *f = fopen(py, "w");
	fprintf(f, checker, NKERN, 2 * NKERN, NKERN, NKERN, NKERN);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s trace export --format chrome -o %s %s && python3 %s %s", bin,
		 json, trace, py, json);
	int rc = run(cmd, &out);
	if (rc)
		fail_msg("export/check failed (%d): %s", rc, out);
	assert_non_null(strstr(out, "chrome ok"));
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace export --format csv %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "ts_ns,prog,map,name,key,value\n"));
	assert_non_null(strstr(out, ",0,0,latency_hist,2,300\n"));
	free(out);

	snprintf(cmd, sizeof(cmd),
		 "%s trace dump --json %s | python3 -c 'import json,sys; n=[json.loads(l) for l in sys.stdin];"
		 " print(\"lines\", len(n), sum(1 for x in n if x[\"type\"]==\"kernel\"))'",
		 bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, " 50\n"));
	free(out);
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* ---- several processes (issue 17) -----------------------------------------------------------
 * A launcher (pid 500) and two workers it started (501, 502), written as `cubpf run -o run.trace`
 * names them: run.trace, run.trace.501, run.trace.502; a note beside them that is no trace. */
#define PROC_OFFSET 3000 /* host - gpu, ns */

static void write_proc(const char *path, uint32_t pid, uint32_t ppid, const char *cmdline,
		       unsigned nk, uint64_t dur)
{
	char err[STORE_ERRLEN];
	struct store_trace_process p = {.pid = pid, .ppid = ppid, .cubpf_version = "0.1.0",
					.hostname = "box", .cmdline = cmdline};
	struct store_trace_writer *w = store_trace_create(path, &p, NULL, err, sizeof(err));
	if (!w)
		fail_msg("%s", err);
	struct store_rec_device d = {.ordinal = 0, .sm = 90};
	store_trace_device(w, &d, "NVIDIA H100");
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t t0 = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	struct store_rec_clock c = {.host_ns = t0 + PROC_OFFSET, .gpu_ns = t0};
	store_trace_clock(w, &c);
	uint32_t launch = store_trace_intern(w, "cuLaunchKernel");
	uint32_t kname = store_trace_intern(w, "_Z4stepv");
	for (unsigned i = 0; i < nk; i++) {
		uint64_t base = t0 + 100000ull * (i + 1);
		struct store_rec_api a = {.begin_ns = base, .end_ns = base + 1000, .stream = 0x10,
					  .corr = i + 1, .name = launch, .tid = pid};
		store_trace_api(w, &a);
		struct store_rec_kernel k = {.launch_ns = base, .gpu_start = base + 5000 - PROC_OFFSET,
					     .gpu_end = base + 5000 - PROC_OFFSET + dur, .stream = 0x10,
					     .corr = i + 1, .name = kname, .grid = {1, 1, 1},
					     .block = {32, 1, 1}, .tid = pid};
		store_trace_kernel(w, &k);
	}
	struct store_rec_map m = {.ts_ns = t0 + 500, .name = store_trace_intern(w, "calls"),
				  .map_type = 2, .key_size = 4, .value_size = 8, .count = 1};
	uint8_t kv[12] = {0};
	uint64_t v = pid;
	memcpy(kv + 4, &v, 8);
	store_trace_map(w, &m, kv, sizeof(kv));
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
}

/* The run's folder: *parent gets the launcher's trace path. */
static void write_run(const char *dir, char *parent, size_t n)
{
	char path[4200];
	snprintf(parent, n, "%s/run.trace", dir);
	write_proc(parent, 500, 1, "./launcher", 2, 1000);
	snprintf(path, sizeof(path), "%s/run.trace.501", dir);
	write_proc(path, 501, 500, "./worker 1", 3, 2000);
	snprintf(path, sizeof(path), "%s/run.trace.502", dir);
	write_proc(path, 502, 500, "./worker 2", 3, 2000);
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	spit(path, "launched by hand\n", 17);
}

static const char multi_checker[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1]))\n"
	"ev=d['traceEvents']\n"
	"pids={500,501,502}\n"
	"names={e['pid']:e['args']['name'] for e in ev if e['ph']=='M' and e['name']=='process_name'}\n"
	"assert pids<=set(names), names\n"
	"assert names[500]=='./launcher' and names[501]=='./worker 1 (child of pid 500)', names\n"
	"gpu=[n for p,n in names.items() if p not in pids]\n"
	"assert len(gpu)==3 and all('of pid 50' in n for n in gpu), gpu\n"
	"a=[e for e in ev if e.get('cat')=='api']\n"
	"k=[e for e in ev if e.get('cat')=='kernel' and e['ph']=='X']\n"
	"assert {e['pid'] for e in a}==pids and len(a)==8, a\n"
	"assert len({e['pid'] for e in k})==3 and not pids&{e['pid'] for e in k} and len(k)==8, k\n"
	"s=[e['id'] for e in ev if e['ph']=='s']\n"
	"f=[e['id'] for e in ev if e['ph']=='f']\n"
	"assert len(s)==8 and len(set(s))==8 and set(s)==set(f), (s,f)\n"
	"first=min(e['ts'] for e in a)\n"
	"assert 0<first<1e6, first\n" /* one time axis: from the earliest start, not each its own */
	"print('multi chrome ok')\n";

/* Every subcommand over the run's folder or several of its files. */
static void test_trace_several_processes(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), parent[4200], cmd[32768], *out;
	write_run(dir, parent, sizeof(parent));

	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, dir);
	assert_int_equal(run(cmd, &out), 0);
	if (!strstr(out, "processes: 3 (2 started by another of them") ||
	    !strstr(out, "  pid 500      parent 1          +") ||
	    !strstr(out, "  pid 501      parent 500 *      +") ||
	    !strstr(out, "  pid 502      parent 500 *      +") || !strstr(out, "s  ./worker 2\n"))
		fail_msg("info: %s", out);
	size_t sections = 0;
	for (const char *p = out; (p = strstr(p, "\ntrace     ")); p++)
		sections++;
	assert_int_equal(sections, 3); /* notes.txt is no trace and no error */
	assert_null(strstr(out, "also:"));
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace stats %s", bin, dir);
	assert_int_equal(run(cmd, &out), 0);
	/* 2 kernels of 1 us and 6 of 2 us: total 14 us, mean 1.75, p50 (4th of 8) 2 us */
	char row[256], api[256];
	const char *fmt = "  %-10zu %14.3f %12.3f %12.3f %12.3f %12.3f %12.3f  %s\n";
	snprintf(row, sizeof(row), fmt, (size_t)8, 14.0, 1.75, 2.0, 2.0, 2.0, 2.0, "_Z4stepv");
	snprintf(api, sizeof(api), fmt, (size_t)8, 8.0, 1.0, 1.0, 1.0, 1.0, 1.0, "cuLaunchKernel");
	if (!strstr(out, "processes: 3 (pids 500 501 502)") || !strstr(out, row) ||
	    !strstr(out, api))
		fail_msg("stats: %s", out);
	free(out);

	char json[4200], py[4200];
	snprintf(json, sizeof(json), "%s/out.json", dir);
	snprintf(py, sizeof(py), "%s/check.py", dir);
	spit(py, multi_checker, sizeof(multi_checker) - 1);
	snprintf(cmd, sizeof(cmd), "%s trace export --format chrome -o %s %s && python3 %s %s", bin,
		 json, dir, py, json);
	if (run(cmd, &out) || !strstr(out, "multi chrome ok"))
		fail_msg("export: %s", out);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace export --format csv %s", bin, dir);
	assert_int_equal(run(cmd, &out), 0);
	if (!strstr(out, "pid,ts_ns,prog,map,name,key,value\n") || !strstr(out, ",calls,0,500\n") ||
	    !strstr(out, "\n502,") || !strstr(out, ",calls,0,502\n"))
		fail_msg("csv: %s", out);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace dump %s %s/run.trace.502", bin, parent, dir);
	assert_int_equal(run(cmd, &out), 0);
	if (!strstr(out, "== trace ") || !strstr(out, "run.trace (pid 500)\nheader  v1.6 pid=500") ||
	    !strstr(out, "run.trace.502 (pid 502)\nheader  v1.6 pid=502") || strstr(out, "pid=501"))
		fail_msg("dump: %s", out);
	free(out);
	snprintf(cmd, sizeof(cmd),
		 "%s trace dump --json %s %s/run.trace.502 | python3 -c 'import json,sys;"
		 " n=[json.loads(l) for l in sys.stdin]; assert all(\"pid\" in x for x in n);"
		 " k=[x[\"pid\"] for x in n if x[\"type\"]==\"kernel\"];"
		 " assert k==[500]*2+[502]*3, k; print(\"json ok\")'", bin, parent, dir);
	if (run(cmd, &out) || !strstr(out, "json ok"))
		fail_msg("dump --json: %s", out);
	free(out);

	/* one file of the run: said to be one of several, otherwise as always */
	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, parent);
	assert_int_equal(run(cmd, &out), 0);
	char also[9000];
	snprintf(also, sizeof(also), "also: %s.501 %s.502 (other processes of the run); give them or "
		 "the folder to see all\n", parent, parent);
	if (!strstr(out, also) || strstr(out, "processes:") || strncmp(out, "trace     ", 10))
		fail_msg("info FILE: %s", out);
	free(out);
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* A path typed wrong, a folder without traces: said, nothing read, exit 1 (as for one missing
 * file).  A damaged trace among good ones: named, the others' output still there, exit 1. */
static void test_trace_several_bad(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), parent[4200], path[4200], cmd[32768], *out;
	write_run(dir, parent, sizeof(parent));

	snprintf(cmd, sizeof(cmd), "%s trace stats %s %s/nope.trace", bin, parent, dir);
	assert_int_equal(run(cmd, &out), 1);
	if (!strstr(out, "cannot open") || !strstr(out, "nope.trace") || strstr(out, "GPU kernels"))
		fail_msg("missing: %s", out);
	free(out);
	snprintf(path, sizeof(path), "%s/empty", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, path);
	assert_int_equal(run(cmd, &out), 1);
	assert_non_null(strstr(out, "empty: no cubpf trace in this folder"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s trace info %s %s/notes.txt", bin, parent, dir);
	assert_int_equal(run(cmd, &out), 1); /* named, so it must be a trace */
	assert_non_null(strstr(out, "notes.txt"));
	free(out);

	/* a byte of a later frame flipped: the header reads, the records do not */
	snprintf(path, sizeof(path), "%s/run.trace.501", dir);
	size_t n;
	uint8_t *img = slurp(path, &n);
	img[n - n / 3] ^= 0xff;
	spit(path, img, n);
	free(img);
	static const struct {
		const char *sub, *of_502; /* something of the next trace, read all the same */
	} subs[] = {{"info", "process   pid 502 on box: ./worker 2\n"},
		    {"stats", "  2.000  _Z4stepv\n"},
		    {"dump", "header  v1.6 pid=502"},
		    {"export --format chrome", "\"pid\":502,\"tid\":502"},
		    {"export --format csv", "\n502,"}};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s trace %s %s", bin, subs[i].sub, dir);
		int rc = run(cmd, &out);
		char want[4400];
		snprintf(want, sizeof(want), "cubpf trace: %s: damaged trace: ", path);
		if (rc != 1 || !strstr(out, want) || !strstr(out, subs[i].of_502))
			fail_msg("trace %s (%d): %s", subs[i].sub, rc, out);
		free(out);
	}
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* ---- kernel spans (format 1.1) -------------------------------------------------------------
 * 20 launches on two streams, KERNEL records without device times; KSPAN records (host ns) for
 * all but launch 6, the one of launch 4 written before its KERNEL; a span whose KERNEL is
 * missing (writer drop).  The export draws 20 complete kernel events (19 + the orphan) and one instant. */
#define NSPAN 20

static void write_spans(const char *path, uint64_t *t0_out)
{
	char err[STORE_ERRLEN];
	struct store_trace_process p = {.pid = 99, .cubpf_version = "0.1.0", .hostname = "box",
					.cmdline = "./spans_app"};
	struct store_trace_writer *w = store_trace_create(path, &p, NULL, err, sizeof(err));
	if (!w)
		fail_msg("%s", err);
	struct store_rec_device d = {.ordinal = 0, .sm = 90};
	store_trace_device(w, &d, "NVIDIA H200");
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t t0 = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	*t0_out = t0;
	uint32_t launch = store_trace_intern(w, "cuLaunchKernel_ptsz");
	uint32_t kname = store_trace_intern(w, "_Z4spinm");
	for (unsigned i = 0; i < NSPAN; i++) {
		uint64_t base = t0 + 1000000ull * (i + 1), stream = i % 2 ? 2 : 0x77;
		struct store_rec_kspan sp = {.corr = i + 1, .begin_ns = base + 5000,
					     .end_ns = base + 5000 + 1000ull * (i + 1), .stream = stream,
					     .name = kname, .ref_uncertainty_ns = 800};
		if (i == 3)
			store_trace_kspan(w, &sp);
		struct store_rec_api a = {.begin_ns = base, .end_ns = base + 2000, .stream = stream,
					  .corr = i + 1, .name = launch, .tid = 4321};
		store_trace_api(w, &a);
		struct store_rec_kernel k = {.launch_ns = base, .stream = stream, .corr = i + 1,
					     .name = kname, .grid = {1, 1, 1}, .block = {32, 1, 1},
					     .tid = 4321};
		store_trace_kernel(w, &k);
		if (i != 3 && i != 5)
			store_trace_kspan(w, &sp);
	}
	struct store_rec_kspan orphan = {.corr = 1000, .begin_ns = t0 + 900000000ull,
					 .end_ns = t0 + 900050000ull, .stream = 0x77,
					 .name = store_trace_intern(w, "orphan_k")};
	store_trace_kspan(w, &orphan);
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
}

static const char span_checker[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1]))\n"
	"t0=d['otherData']['start_realtime_ns']; base=int(sys.argv[2])\n"
	"ev=d['traceEvents']\n"
	"x=[e for e in ev if e.get('cat')=='kernel' and e['ph']=='X']\n"
	"i=[e for e in ev if e.get('cat')=='kernel' and e['ph']=='i']\n"
	"assert len(x)==20 and len(i)==1, (len(x),len(i))\n"
	"k={e['args']['corr']:e for e in x}\n"
	"for n in range(20):\n"
	"  if n==5: continue\n"
	"  e=k[n+1]\n"
	"  assert e['name']=='_Z4spinm', e\n"
	"  assert abs(e['dur']-(n+1))<1e-6, e\n"
	"  assert abs(e['ts']-((base-t0)/1e3+1000*(n+1)+5))<1e-3, (e, base-t0)\n"
	"  assert e['args']['timing']=='cuda events' and e['args']['clock_uncertainty_ns']==800\n"
	"assert k[1000]['name']=='orphan_k' and abs(k[1000]['dur']-50)<1e-6\n"
	"assert i[0]['args']['corr']==6\n"
	"tracks={e['tid']:e['args']['name'] for e in ev if e['ph']=='M' and e['name']=='thread_name'}\n"
	"assert tracks[k[2]['tid']]=='stream 0x2 (per-thread default)', tracks\n"
	"assert tracks[k[1]['tid']]=='stream 0x77', tracks\n"
	"assert k[1]['pid']==k[2]['pid'] and k[1]['tid']!=k[2]['tid']\n"
	"api=[e for e in ev if e.get('cat')=='api' and e['ph']=='X']\n"
	"assert len(api)==20 and all(e['tid']==4321 for e in api)\n"
	"assert all(e['pid']!=k[1]['pid'] for e in api)\n"
	"f=[e for e in ev if e['ph']=='f']; s=[e for e in ev if e['ph']=='s']\n"
	"assert len(s)==20 and len(f)==20, (len(s), len(f))\n"
	"print('spans ok', len(x))\n";

static void test_trace_spans(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), trace[4200], cmd[32768], *out;
	uint64_t t0;
	snprintf(trace, sizeof(trace), "%s/spans.cubpf", dir);
	write_spans(trace, &t0);

	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "(format 1.6)"));
	assert_non_null(strstr(out, "kernel=20 end=1 kspan=20"));
	assert_non_null(strstr(out, "spans     20 kernel spans, 0 launches without one"));
	free(out);

	/* 19 spans of _Z4spinm: 1..20 us without 6: total 204, p50 (10th) 11, max 20 */
	snprintf(cmd, sizeof(cmd), "%s trace stats %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "  19 "));
	assert_non_null(strstr(out, "204.000"));
	assert_non_null(strstr(out, "11.000"));
	assert_non_null(strstr(out, "20.000  _Z4spinm"));
	assert_non_null(strstr(out, "50.000  orphan_k"));
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace dump %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "kspan   "));
	assert_non_null(strstr(out, " +4000ns _Z4spinm stream=0x2 dev=0 corr=4 +-800ns"));
	free(out);

	char json[4200], py[4200];
	snprintf(json, sizeof(json), "%s/spans.json", dir);
	snprintf(py, sizeof(py), "%s/spans.py", dir);
	FILE *f = fopen(py, "w");
	fputs(span_checker, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s trace export --format chrome -o %s %s && python3 %s %s %llu",
		 bin, json, trace, py, json, (unsigned long long)t0);
	int rc = run(cmd, &out);
	if (rc)
		fail_msg("export/check failed (%d): %s", rc, out);
	assert_non_null(strstr(out, "spans ok 20"));
	free(out);
	free(bin);
	rm_tree(dir);
	free(dir);
}

static void test_trace_bad_input(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), path[4200], cmd[32768], *out;
	snprintf(path, sizeof(path), "%s/sample.cubpf", dir);
	write_sample(path);
	size_t n;
	uint8_t *img = slurp(path, &n);
	spit(path, img, n - 10); /* the END frame is cut */
	free(img);
	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, path);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "cut short"));
	assert_non_null(strstr(out, "kernel=50"));
	free(out);

	snprintf(path, sizeof(path), "%s/junk", dir);
	spit(path, "not a trace at all", 18);
	snprintf(cmd, sizeof(cmd), "%s trace dump %s", bin, path);
	assert_int_equal(run(cmd, &out), 1);
	assert_non_null(strstr(out, "not a cubpf trace"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s trace export %s", bin, path);
	assert_int_equal(run(cmd, &out), 2);
	assert_non_null(strstr(out, "--format"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s trace info", bin);
	assert_int_equal(run(cmd, NULL), 2);
	snprintf(cmd, sizeof(cmd), "%s trace --help", bin);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "export --format chrome|csv"));
	free(out);
	free(bin);
	rm_tree(dir);
	free(dir);
}

static void test_cache_commands(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), db[4200], cmd[32768], *out, err[STORE_ERRLEN];
	snprintf(db, sizeof(db), "%s/c/cache.db", dir);
	snprintf(cmd, sizeof(cmd), "%s cache stats --db %s", bin, db);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "no cache at"));
	free(out);

	struct store_cache *c = store_cache_open(db, NULL, err, sizeof(err));
	assert_non_null(c);
	store_key k[3];
	for (int i = 0; i < 3; i++) {
		char img[16], name[32];
		snprintf(img, sizeof(img), "img%d", i);
		snprintf(name, sizeof(name), "module_%d", i);
		struct store_key_input in = {.image = {img, strlen(img)}, .sm = 90};
		store_key_compute(&in, &k[i]);
		struct store_cache_entry e = {.ptx = img, .ptx_size = 4, .cubin = name, .cubin_size = 8,
					      .name = name, .sm = 90, .rewrite_ns = 2000000,
					      .jit_ns = 30000000};
		assert_int_equal(store_cache_put(c, &k[i], &e), 0);
	}
	struct store_cache_entry e;
	assert_int_equal(store_cache_get(c, &k[1], &e), 1);
	store_cache_entry_free(&e);
	store_cache_close(c);

	setenv("CUBPF_CACHE", db, 1); /* the default path, as the shim and users set it */
	snprintf(cmd, sizeof(cmd), "%s cache ls", bin);
	assert_int_equal(run(cmd, &out), 0);
	char hex[33];
	store_key_hex(&k[1], hex);
	assert_non_null(strstr(out, hex));
	assert_non_null(strstr(out, "3 entries"));
	assert_true(strstr(out, "module_1") < strstr(out, "module_0")); /* most recent first */
	free(out);
	snprintf(cmd, sizeof(cmd), "%s cache stats", bin);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "lookups    1: 1 hits, 0 misses"));
	assert_non_null(strstr(out, "saved      0.032 s"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s cache clear", bin);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "removed 3 entries"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s cache frobnicate", bin);
	assert_int_equal(run(cmd, NULL), 2);
	unsetenv("CUBPF_CACHE");
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* Replay: the fixture's host programs over recorded calls (some with arguments). */
static void test_replay(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), trace[4200], obj[4200], cmd[32768], *out;
	const char *clang = getenv("CLANG");
	size_t n;
	snprintf(trace, sizeof(trace), "%s/calls.cubpf", dir);
	snprintf(obj, sizeof(obj), "%s/replay.bpf.o", dir);
	snprintf(cmd, sizeof(cmd),
		 "%s -O2 -g -target bpf -I tools/include -I/usr/include/x86_64-linux-gnu"
		 " -c tests/store/replay.bpf.c -o %s",
		 clang && *clang ? clang : "clang", obj);
	if (run(cmd, &out) != 0)
		fail_msg("cannot build the replay fixture with clang (set CLANG): %s", out);
	free(out);

	char err[STORE_ERRLEN];
	struct store_trace_writer *w = store_trace_create(trace, NULL, NULL, err, sizeof(err));
	assert_non_null(w);
	uint32_t launch = store_trace_intern(w, "cuLaunchKernel_ptsz");
	uint32_t sync = store_trace_intern(w, "cuStreamSynchronize");
	uint64_t want_sum = 0;
	for (unsigned i = 0; i < 25; i++) {
		struct store_rec_api a = {.begin_ns = 100 * i, .end_ns = 100 * i + 5, .name = launch,
					  .tid = 9};
		uint64_t args[11] = {1000 + i, 2, 1, 1, 128, 1, 1, 0, 0, 0, 0};
		want_sum += args[0];
		assert_int_equal(store_trace_api_args(w, &a, 42, args, 11), 0);
		struct store_rec_api b = {.begin_ns = 100 * i + 6, .end_ns = 100 * i + 9, .name = sync,
					  .tid = 9, .result = i == 7 ? 719 : 0};
		assert_int_equal(store_trace_api(w, &b), 0);
	}
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);

	snprintf(cmd, sizeof(cmd), "%s trace replay -p %s %s", bin, obj, trace);
	int rc = run(cmd, &out);
	if (rc)
		fail_msg("replay failed (%d): %s", rc, out);
	char line[128];
	snprintf(line, sizeof(line), "  0: 25\n  1: %llu\n  2: 719\n", (unsigned long long)want_sum);
	if (!strstr(out, line))
		fail_msg("replay output lacks the expected map values:\n%s", out);
	/* 719 = 0x2cf, tid 9: one ring-buffer record for the failing call. */
	assert_non_null(strstr(out, "ringbuf failures: cf020000000000000900000000000000\n"));
	assert_non_null(strstr(out, "replayed 50 API calls: 75 program runs, 0 faults"));
	free(out);

	/* two processes' traces: each replayed with maps of its own, under its heading */
	char copy[4200];
	snprintf(copy, sizeof(copy), "%s/calls2.cubpf", dir);
	uint8_t *img = slurp(trace, &n);
	spit(copy, img, n);
	free(img);
	snprintf(cmd, sizeof(cmd), "%s trace replay -p %s %s %s", bin, obj, trace, copy);
	if ((rc = run(cmd, &out)) || !strstr(out, "== replay ") || !strstr(out, "calls2.cubpf (pid") ||
	    !strstr(strstr(out, "calls2.cubpf (pid"), line) ||
	    !strstr(strstr(out, "calls2.cubpf (pid"), "replayed 50 API calls: 75 program runs"))
		fail_msg("replay of two traces (%d):\n%s", rc, out);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace replay %s", bin, trace);
	assert_int_equal(run(cmd, &out), 2);
	assert_non_null(strstr(out, "-p PROG.bpf.o is required"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s trace replay -p %s %s", bin, trace, trace);
	assert_int_equal(run(cmd, &out), 1); /* a trace is not an eBPF object */
	free(out);
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* Format 1.2: `trace info` lists the devices, the instrumented kernels and the kernels that are
 * not instrumented with their reasons, from the trace alone; dump shows the new records. */
static void test_trace_run_metadata(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), trace[4200], cmd[8192], *out, err[STORE_ERRLEN];
	snprintf(trace, sizeof(trace), "%s/meta.cubpf", dir);
	struct store_trace_process p = {.pid = 9, .cubpf_version = "0.1.0", .hostname = "h",
					.cmdline = "./app"};
	struct store_trace_writer *w = store_trace_create(trace, &p, NULL, err, sizeof(err));
	assert_non_null(w);
	struct store_rec_device d = {.ordinal = 1, .sm = 90, .memory_bytes = 80ull << 30};
	store_trace_device(w, &d, "NVIDIA H100");
	struct store_rec_map_memory mm = {.ts_ns = 1, .context = 0x55, .device_bytes = 8192,
					  .pinned_bytes = 4096, .device = 1, .nmaps = 2, .ctx = 1};
	store_trace_map_memory(w, &mm, 0);
	struct store_rec_kernel_id k = {.id = 1, .name = store_trace_intern(w, "_Z4spinm")};
	store_trace_kernel_id(w, &k);
	struct store_rec_not_instrumented n = {.ts_ns = 2, .reason = STORE_NOINST_JIT, .kernels = 1,
					       .sm = 90, .device = 1,
					       .api = store_trace_intern(w, "cuModuleLoadData"),
					       .label = store_trace_intern(w, "_Z3badv")};
	const char *msg = "live: cuModuleLoadData: _Z3badv not instrumented, the original module "
			  "runs: the driver's JIT refused \"it\"";
	store_trace_not_instrumented(w, &n, msg);
	store_trace_not_instrumented(w, &n, msg); /* loaded twice: listed once */
	n.reason = STORE_NOINST_NO_PTX;
	n.label = 0;
	store_trace_not_instrumented(w, &n, "live: cuModuleLoadData: 3 kernels not instrumentable: "
					    "no PTX for sm_90 in the image (1 cubins, SASS only)");
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);

	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "device  1 sm_90 85899345920 bytes NVIDIA H100"));
	assert_non_null(strstr(out, "maps      8192 device bytes, 4096 pinned bytes in 1 context\n"));
	assert_non_null(strstr(out, "kernels   1 instrumented"));
	assert_non_null(strstr(out, "  id 1     _Z4spinm\n"));
	assert_non_null(strstr(out, "not instrumented (2):\n  [JIT] cuModuleLoadData: _Z3badv not "
				    "instrumented, the original module runs: the driver's JIT refused"));
	assert_non_null(strstr(out, "  [no PTX] cuModuleLoadData: 3 kernels not instrumentable"));
	assert_non_null(strstr(out, "kernel_id=1 not_instrumented=3 map_memory=1"));
	free(out);

	snprintf(cmd, sizeof(cmd), "%s trace dump %s", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "kid     1 _Z4spinm backend=ptx\n"));
	assert_non_null(strstr(out, "noinst  2 reason=JIT kernels=1 sm_90 dev=1 cuModuleLoadData _Z3badv: "));
	assert_non_null(strstr(out, "mapmem  1 ctx=1 context=0x55 dev=1 8192 device bytes, 4096 pinned"));
	free(out);

	snprintf(cmd, sizeof(cmd),
		 "%s trace dump --json %s | python3 -c 'import json,sys; n=[json.loads(l) for l in sys.stdin];"
		 "k=[e for e in n if e[\"type\"]==\"kernel_id\"][0];"
		 "m=[e for e in n if e[\"type\"]==\"not_instrumented\"];"
		 "g=[e for e in n if e[\"type\"]==\"map_memory\"][0];"
		 "assert k[\"id\"]==1 and k[\"name\"]==\"_Z4spinm\", k;"
		 "assert len(m)==3 and m[0][\"reason_name\"]==\"JIT\" and m[0][\"message\"].endswith(\"it\\\"\"), m;"
		 "assert g[\"device_bytes\"]==8192 and g[\"ctx\"]==1, g; print(\"json ok\")'",
		 bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	if (!strstr(out, "json ok"))
		fail_msg("%s", out);
	free(out);

	/* the Chrome export marks when kernels went without probes */
	snprintf(cmd, sizeof(cmd),
		 "%s trace export --format chrome %s | python3 -c 'import json,sys; d=json.load(sys.stdin);"
		 "e=[x for x in d[\"traceEvents\"] if x.get(\"cat\")==\"cubpf\"];"
		 "assert len(e)==3 and e[0][\"name\"]==\"not instrumented (JIT)\", e;"
		 "assert e[2][\"args\"][\"kernels\"]==1, e; print(\"chrome ok\")'", bin, trace);
	assert_int_equal(run(cmd, &out), 0);
	if (!strstr(out, "chrome ok"))
		fail_msg("%s", out);
	free(out);
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* `cubpf cache ls|stats|clear` with CUBPF_CACHE at a file cubpf did not make (a path typed
 * wrong): exit status 1, a message saying what is there, the file as it was and nothing beside
 * it (it used to be renamed to .broken-TIME and replaced by a new cache).  And `cache stats`
 * on a cubpf database whose counters table is empty: zeros, not "not an error". */
static void test_cache_foreign_file_and_empty_counters(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), path[4200], cmd[8192], *out, err[STORE_ERRLEN];
	static const char notes[] = "my notes: do not lose\n";
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	spit(path, notes, sizeof(notes) - 1);
	setenv("CUBPF_CACHE", path, 1);
	const char *const subs[] = {"ls", "stats", "clear"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(cmd, sizeof(cmd), "{ %s cache %s; ls -A %s; }", bin, subs[i], dir);
		run(cmd, &out);
		if (!strstr(out, "is not a cubpf cache (22 bytes, not an SQLite database); left "
				 "untouched") || strstr(out, "broken") || strstr(out, "-wal"))
			fail_msg("cache %s: %s", subs[i], out);
		free(out);
		snprintf(cmd, sizeof(cmd), "%s cache %s", bin, subs[i]);
		assert_int_equal(run(cmd, NULL), 1);
		size_t n;
		uint8_t *now = slurp(path, &n);
		assert_int_equal(n, sizeof(notes) - 1);
		assert_memory_equal(now, notes, n);
		free(now);
	}

	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = store_cache_open(path, NULL, err, sizeof(err));
	assert_non_null(c);
	struct store_key_input in = {.image = {"img", 3}, .sm = 90};
	store_key k;
	store_key_compute(&in, &k);
	struct store_cache_entry e = {.ptx = "p", .ptx_size = 1, .cubin = "c", .cubin_size = 1,
				      .name = "m", .sm = 90};
	assert_int_equal(store_cache_put(c, &k, &e), 0);
	store_cache_close(c);
	snprintf(cmd, sizeof(cmd), "python3 -c 'import sqlite3; d=sqlite3.connect(\"%s\");"
		 " d.execute(\"DELETE FROM counters\"); d.commit()'", path);
	assert_int_equal(run(cmd, NULL), 0);
	setenv("CUBPF_CACHE", path, 1);
	snprintf(cmd, sizeof(cmd), "%s cache stats", bin);
	int rc = run(cmd, &out);
	if (rc || !strstr(out, "entries    1,") || !strstr(out, "lookups    0: 0 hits, 0 misses"))
		fail_msg("cache stats (%d): %s", rc, out);
	free(out);
	unsetenv("CUBPF_CACHE");
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* `cubpf cache ls` and `stats` only look: on a damaged cubpf database they say so and exit 1,
 * and the file stays as it was, with nothing set aside or made beside it (ls used to rebuild
 * the cache and exit 0, an empty listing). */
static void test_cache_ls_damaged(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), path[4200], cmd[8192], *out, err[STORE_ERRLEN];
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	struct store_cache *c = store_cache_open(path, NULL, err, sizeof(err));
	assert_non_null(c);
	struct store_key_input in = {.image = {"img", 3}, .sm = 90};
	store_key k;
	store_key_compute(&in, &k);
	struct store_cache_entry e = {.ptx = "p", .ptx_size = 1, .cubin = "c", .cubin_size = 1,
				      .name = "m", .sm = 90};
	assert_int_equal(store_cache_put(c, &k, &e), 0);
	store_cache_close(c);
	size_t n, m;
	uint8_t *img = slurp(path, &n);
	memset(img + 100, 0x5a, 4000); /* the schema's b-tree, header kept */
	spit(path, img, n);
	setenv("CUBPF_CACHE", path, 1);
	const char *const subs[] = {"ls", "stats"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(cmd, sizeof(cmd), "%s cache %s", bin, subs[i]);
		int rc = run(cmd, &out);
		if (rc != 1 || !strstr(out, "is damaged") || !strstr(out, "left as it is"))
			fail_msg("cache %s (%d): %s", subs[i], rc, out);
		free(out);
		uint8_t *now = slurp(path, &m);
		assert_int_equal(m, n);
		assert_memory_equal(now, img, n);
		free(now);
		snprintf(cmd, sizeof(cmd), "ls %s | grep -c broken", dir);
		run(cmd, &out);
		assert_int_equal(atoi(out), 0);
		free(out);
	}
	unsetenv("CUBPF_CACHE");
	free(img);
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* Ids near 2^32 (a STRING record's own, a name no STRING defines, a copy kind): every command
 * reads the trace in memory that follows its records.  `trace stats` used to size a table by
 * the largest id (128 GiB: "out of memory", then "damaged trace: " with nothing after it). */
static void test_trace_stats_huge_ids(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), trace[4200], cmd[8192], *out, err[STORE_ERRLEN];
	snprintf(trace, sizeof(trace), "%s/huge.cubpf", dir);
	struct store_trace_process p = {.pid = 9, .cubpf_version = "0.1.0", .hostname = "h",
					.cmdline = "./app"};
	struct store_trace_writer *w = store_trace_create(trace, &p, NULL, err, sizeof(err));
	assert_non_null(w);
	uint32_t huge = 0xFFFFFFF0u, undefined = 0xFFFFFFF7u;
	assert_int_equal(store_trace_append(w, STORE_REC_STRING, &huge, 4, "huge_kernel", 11), 0);
	struct store_rec_api a = {.begin_ns = 100, .end_ns = 1100, .name = huge};
	store_trace_api(w, &a);
	a.name = undefined;
	store_trace_api(w, &a);
	struct store_rec_kernel k = {.launch_ns = 100, .gpu_start = 200, .gpu_end = 2200, .name = huge};
	store_trace_kernel(w, &k);
	k.name = undefined;
	store_trace_kernel(w, &k);
	struct store_rec_copy c = {.launch_ns = 100, .gpu_start = 300, .gpu_end = 800, .bytes = 8,
				   .kind = 0xFFFFFFFFu};
	store_trace_copy(w, &c);
	struct store_rec_map m = {.ts_ns = 5, .name = huge, .key_size = 4, .value_size = 4, .count = 1};
	uint32_t kv[2] = {1, 2};
	store_trace_map(w, &m, kv, sizeof(kv));
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);

	snprintf(cmd, sizeof(cmd), "%s trace stats %s", bin, trace);
	int rc = run(cmd, &out);
	if (rc || strstr(out, "out of memory") || strstr(out, "damaged"))
		fail_msg("trace stats (%d): %s", rc, out);
	assert_non_null(strstr(out, "  1                   2.000        2.000        2.000        2.000        2.000        2.000  huge_kernel\n"));
	assert_non_null(strstr(out, "huge_kernel\n"));
	assert_non_null(strstr(out, "#4294967287\n"));
	assert_non_null(strstr(out, "copies ?      count 1 total 0.500 us"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s trace info %s", bin, trace);
	assert_int_equal(run(cmd, NULL), 0);
	const char *const others[] = {"dump", "dump --json", "export --format chrome",
				      "export --format csv"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s trace %s %s", bin, others[i], trace);
		if ((rc = run(cmd, &out)) || !strstr(out, "huge_kernel"))
			fail_msg("trace %s (%d): %s", others[i], rc, out);
		free(out);
	}
	free(bin);
	rm_tree(dir);
	free(dir);
}

/* Fails when out holds a raw control character a terminal acts on (ESC, BEL, C1 CSI), whether
 * or not it is well formed UTF-8. */
static void no_raw_controls(const char *what, const char *out)
{
	for (const unsigned char *c = (const unsigned char *)out; *c; c++)
		if (*c == 0x1b || *c == 0x07 || *c == 0x9b || (c[0] == 0xc2 && c[1] == 0x9b))
			fail_msg("%s: a raw control character at byte %zu of:\n%s", what,
				 (size_t)(c - (const unsigned char *)out), out);
}

static const char evil_probe[] =
	"#include \"cubpf_helpers.h\"\n"
	"struct { __uint(type, CUBPF_MAP_ARRAY); __uint(max_entries, 1); __type(key, __u32);\n"
	"	 __type(value, __u64); } counts SEC(\".maps\");\n"
	"SEC(\"uprobe/cu\\x1b]0;pwned\\x07*\") int evil(void *ctx) { return 0; }\n"
	"SEC(\"uprobe/*\") int loud(void *ctx) { bpf_printk(\"\\x1b[2Jcleared\"); return 0; }\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\\x1b[5m\";\n";

/* Names from traces, the cache and objects with escape sequences in them (ESC, BEL, OSC, C1
 * CSI, bytes that are not UTF-8) reach no terminal raw: every text output shows them escaped
 * (\e, \x07, \u009b, \xff), `dump --json` and the Chrome export stay valid JSON that gives the
 * names back, CSV stays one line per pair. */
static void test_names_escaped(void **state)
{
	(void)state;
	char *dir = temp_dir(), *bin = cubpf_path(), trace[4200], cmd[32768], *out, err[STORE_ERRLEN];
	static const char k[] = "_Z4evil\x1b]0;owned\x07\x1b[2J\xc2\x9b" "31m", /* valid UTF-8 */
			  raw[] = "api\x9b\xff,\"x\"\nnext";                        /* not UTF-8 */
	snprintf(trace, sizeof(trace), "%s/evil.cubpf", dir);
	struct store_trace_process p = {.pid = 9, .cubpf_version = "0.1.0\x1b[1m",
					.hostname = "h\x1b[8m", .cmdline = "./app \x1b]2;title\x07"};
	struct store_trace_writer *w = store_trace_create(trace, &p, NULL, err, sizeof(err));
	assert_non_null(w);
	struct store_rec_device d = {.ordinal = 0, .sm = 90};
	store_trace_device(w, &d, "GPU\x1b[5m");
	struct store_rec_program pr = {.index = 0};
	store_trace_program(w, &pr, "prog\x1b[1m", "/tmp/\x1b[2J.bpf.o");
	uint32_t kid = store_trace_intern(w, k), aid = store_trace_intern(w, raw);
	struct store_rec_kernel_id ki = {.id = 1, .name = kid, .module = aid};
	store_trace_kernel_id(w, &ki);
	struct store_rec_not_instrumented ni = {.reason = STORE_NOINST_JIT, .api = aid, .label = kid};
	store_trace_not_instrumented(w, &ni, "live: refused \x1b[8mhidden");
	struct store_rec_api a = {.begin_ns = 100, .end_ns = 200, .name = aid};
	store_trace_api(w, &a);
	struct store_rec_kernel kr = {.launch_ns = 100, .gpu_start = 200, .gpu_end = 300, .name = kid};
	store_trace_kernel(w, &kr);
	struct store_rec_map m = {.ts_ns = 5, .name = aid, .key_size = 4, .value_size = 4, .count = 1};
	uint32_t kv[2] = {1, 2};
	store_trace_map(w, &m, kv, sizeof(kv));
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);

	static const struct {
		const char *sub, *want;
	} text[] = {
		{"info", "  id 1     _Z4evil\\e]0;owned\\x07\\e[2J\\u009b31m\n"},
		{"info", "process   pid 9 on h\\e[8m: ./app \\e]2;title\\x07\ncubpf     0.1.0\\e[1m,"},
		{"info", "device  0 sm_90 0 bytes GPU\\e[5m\n"},
		{"info", "program 0 prog\\e[1m /tmp/\\e[2J.bpf.o\n"},
		{"info", "  [JIT] refused \\e[8mhidden\n"},
		{"dump", "kid     1 _Z4evil\\e]0;owned\\x07\\e[2J\\u009b31m module=api\\x9b\\xff,\"x\"\\nnext backend=ptx\n"},
		{"dump", "api     100 +100ns api\\x9b\\xff,\"x\"\\nnext tid=0"},
		{"dump", "cmd=./app \\e]2;title\\x07\n"},
		{"stats", "  _Z4evil\\e]0;owned\\x07\\e[2J\\u009b31m\n"},
		{"export --format csv", "5,0,0,\"api\\x9b\\xff,\"\"x\"\"\\nnext\",1,2\n"},
	};
	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s trace %s %s", bin, text[i].sub, trace);
		int rc = run(cmd, &out);
		no_raw_controls(text[i].sub, out);
		if (rc || !strstr(out, text[i].want))
			fail_msg("trace %s (%d): no '%s' in:\n%s", text[i].sub, rc, text[i].want, out);
		free(out);
	}
	/* JSON: strict UTF-8, the kernel's name back as written, the other one's bytes kept */
	snprintf(cmd, sizeof(cmd),
		 "%s trace dump --json %s | python3 -c 'import json,sys;"
		 " n=[json.loads(l) for l in sys.stdin.buffer.read().decode(\"utf-8\").splitlines()];"
		 " k=[e for e in n if e[\"type\"]==\"kernel_id\"][0];"
		 " assert k[\"name\"]==\"_Z4evil\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\", k;"
		 " assert k[\"module\"]==\"api\\x9b\\xff,\\\"x\\\"\\nnext\", k; print(\"json ok\")'",
		 bin, trace);
	if (run(cmd, &out) || !strstr(out, "json ok"))
		fail_msg("dump --json: %s", out);
	free(out);
	snprintf(cmd, sizeof(cmd),
		 "%s trace export --format chrome %s | python3 -c 'import json,sys;"
		 " d=json.loads(sys.stdin.buffer.read().decode(\"utf-8\"));"
		 " k=[e for e in d[\"traceEvents\"] if e.get(\"cat\")==\"kernel\"][0];"
		 " assert k[\"name\"]==\"_Z4evil\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\", k; print(\"chrome ok\")'",
		 bin, trace);
	if (run(cmd, &out) || !strstr(out, "chrome ok"))
		fail_msg("export --format chrome: %s", out);
	free(out);

	/* the cache: a module named by the shim from what it loaded */
	char db[4200];
	snprintf(db, sizeof(db), "%s/cache.db", dir);
	struct store_cache *c = store_cache_open(db, NULL, err, sizeof(err));
	assert_non_null(c);
	struct store_key_input in = {.image = {"img", 3}, .sm = 90};
	store_key key;
	store_key_compute(&in, &key);
	struct store_cache_entry e = {.ptx = "p", .ptx_size = 1, .cubin = "c", .cubin_size = 1,
				      .name = (char *)k, .sm = 90};
	assert_int_equal(store_cache_put(c, &key, &e), 0);
	store_cache_close(c);
	snprintf(cmd, sizeof(cmd), "%s cache ls --db %s", bin, db);
	assert_int_equal(run(cmd, &out), 0);
	no_raw_controls("cache ls", out);
	assert_non_null(strstr(out, "  _Z4evil\\e]0;owned\\x07\\e[2J\\u009b31m\n"));
	free(out);

	/* an object: section names, license, printk output of a replay */
	const char *clang = getenv("CLANG");
	char src[4200], obj[4200];
	snprintf(src, sizeof(src), "%s/evil.bpf.c", dir);
	snprintf(obj, sizeof(obj), "%s/evil.bpf.o", dir);
	spit(src, evil_probe, sizeof(evil_probe) - 1);
	snprintf(cmd, sizeof(cmd), "%s -O2 -g -target bpf -I tools/include "
		 "-I/usr/include/x86_64-linux-gnu -c %s -o %s", clang && *clang ? clang : "clang", src, obj);
	if (run(cmd, &out))
		fail_msg("cannot build the object with clang (set CLANG): %s", out);
	free(out);
	static const struct {
		const char *cmd, *want;
	} objs[] = {
		{"verify", "evil (uprobe/cu\\e]0;pwned\\x07*): OK"},
		{"disasm", "license \"GPL\\e[5m\""},
		{"trace replay -p", "printk: \\e[2Jcleared\n"},
	};
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s %s %s %s", bin, objs[i].cmd, obj,
			 strstr(objs[i].cmd, "replay") ? trace : "");
		int rc = run(cmd, &out);
		no_raw_controls(objs[i].cmd, out);
		if (rc || !strstr(out, objs[i].want))
			fail_msg("%s (%d): no '%s' in:\n%s", objs[i].cmd, rc, objs[i].want, out);
		free(out);
	}
	free(bin);
	rm_tree(dir);
	free(dir);
}

const struct CMUnitTest cli_tests[] = {
	cmocka_unit_test(test_replay),
	cmocka_unit_test(test_trace_commands),
	cmocka_unit_test(test_trace_spans),
	cmocka_unit_test(test_trace_run_metadata),
	cmocka_unit_test(test_trace_bad_input),
	cmocka_unit_test(test_trace_several_processes),
	cmocka_unit_test(test_trace_several_bad),
	cmocka_unit_test(test_cache_commands),
	cmocka_unit_test(test_trace_stats_huge_ids),
	cmocka_unit_test(test_cache_foreign_file_and_empty_counters),
	cmocka_unit_test(test_cache_ls_damaged),
	cmocka_unit_test(test_names_escaped),
};
const size_t n_cli_tests = sizeof(cli_tests) / sizeof(cli_tests[0]);
