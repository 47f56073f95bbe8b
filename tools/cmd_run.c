/* cubpf run: starts a program with the shim first on LD_LIBRARY_PATH (or in LD_PRELOAD) and
 * the probe settings in the environment (the contract of DESIGN.md), follows what it records,
 * and returns its exit status.  With -t TOOL (a bundled probe + formatter) or -p PROG.bpf.o it
 * reads the trace and the shim's log lines (through a pipe named by CUBPF_LOG_FD: the program
 * keeps its own stderr) and prints a report every -i seconds and at exit, also when the
 * program fails. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <time.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim/shim.h"
#include "store/store.h"
#include "tools/commands.h"
#include "tools/tools.h"
#include "vm/include/cubpf_abi.h"

struct run_opts {
	const char *tool;
	char programs[8192]; /* colon-separated probe objects */
	const char *kernel_glob;
	const char *trace;
	const char *log_level;
	const char *real_libcuda;
	const char *cache;
	const char *ringbuf_mb, *map_max_mb, *sample; /* validated numbers, passed on as text */
	const char *control;
	const char *sanitizer;       /* --sanitizer[=PATH]: "auto" or the library's path */
	const char *metrics;         /* --metrics [ADDR:]PORT */
	int disable;
	int preload; /* --preload: the shim through LD_PRELOAD, LD_LIBRARY_PATH left alone */
	int json, help, list_tools;
	double interval_s, duration_s; /* 0 = none */
	int have_prog;
	const char *delay_ns;        /* -n NS: memdelay's delay per global load */
	char patched[PATH_MAX];      /* memdelay's probe with the delay written in (removed) */
};

static void run_usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf run [OPTIONS] -- CMD [ARGS...]\n"
		"\n"
		"Runs CMD with cubpf's libcuda.so.1 first on LD_LIBRARY_PATH (or preloaded: --preload):\n"
		"every CUDA driver call of the program goes through cubpf, which forwards it to the\n"
		"real driver.\n"
		"\n"
		"options:\n"
		"  -t, --tool TOOL         a bundled tool (--list-tools; -t TOOL --help for its output)\n"
		"  -p, --prog PROG.bpf.o   a probe object (repeatable); its maps are printed at exit\n"
		"                          as `bpftool map dump` does\n"
		"  -k, --kernel GLOB       probe only kernels whose name matches GLOB\n"
		"  -n NS                   memdelay: nanoseconds added to each global load (1 to\n"
		"                          1000000, default 1000)\n"
		"  -i, --interval SECONDS  print the tool's view every SECONDS while CMD runs\n"
		"  -d, --duration SECONDS  stop CMD after SECONDS (SIGINT, then SIGTERM 5 s later)\n"
		"      --json              the report as one JSON object per view\n"
		"      --list-tools        the bundled tools\n"
		"  -o, --output TRACE|DIR  keep the traces, kernel spans included (default: temporary\n"
		"                          ones without spans, removed).  Each process that uses\n"
		"                          CUDA writes its own: TRACE for the first, TRACE.PID for\n"
		"                          the others; with a folder (DIR/), DIR/cubpf-PID.trace.\n"
		"                          An earlier run's traces there are replaced\n"
		"  -l, --log LEVEL         off, error, warn (default), info, debug (CUBPF_LOG)\n"
		"      --real-libcuda PATH the real driver, when cubpf cannot find it\n"
		"      --cache PATH        module cache database, or off (CUBPF_CACHE)\n"
		"      --ringbuf-mb N      pinned host memory for ring buffers per GPU (default 64;\n"
		"                          CUBPF_RINGBUF_MB)\n"
		"      --map-max-mb N      largest device memory the maps may take per context\n"
		"                          (default 4096; CUBPF_MAP_MAX_MB)\n"
		"      --sample N          run the GPU probes on every Nth launch of each kernel\n"
		"                          (CUBPF_SAMPLE)\n"
		"      --control FILE      switch GPU probes while CMD runs: lines 'off', 'on',\n"
		"                          'off PROGRAM', 'on PROGRAM' (CUBPF_CONTROL)\n"
		"      --sanitizer[=PATH]  experimental: probe kernels shipped without PTX (SASS\n"
		"                          only: cuBLAS, cuDNN...) through NVIDIA's Compute\n"
		"                          Sanitizer library, found in the CUDA toolkit or the\n"
		"                          nvidia-cuda-sanitizer-api wheel, or at PATH\n"
		"                          (CUBPF_SANITIZER); not yet verified on a GPU\n"
		"      --metrics [ADDR:]PORT  serve the run's metrics while CMD runs, in Prometheus's\n"
		"                          text format at http://ADDR:PORT/metrics (ADDR defaults to\n"
		"                          127.0.0.1): the tool's maps per process, device and kernel,\n"
		"                          and cubpf's health; one endpoint for every process\n"
		"      --disable           pure pass-through, nothing intercepted (CUBPF_DISABLE=1)\n"
		"      --preload           load cubpf's libcuda.so.1 through LD_PRELOAD (after your\n"
		"                          own preloads) instead of putting its folder first on\n"
		"                          LD_LIBRARY_PATH: for programs that set their own\n"
		"                          LD_LIBRARY_PATH or load the driver by full path\n"
		"  -h, --help              this text\n"
		"\n"
		"The report (stdout) ends with the devices, the memory the maps take, the kernels that\n"
		"could not be instrumented and why, and the events lost.  Exit status: CMD's.\n"
		"\n"
		"examples:\n"
		"  cubpf run -t kcount -- ./my_cuda_app --size 1024\n"
		"  cubpf run -t threadhist -k 'vecadd*' -i 1 -d 10 -- python train.py\n"
		"  cubpf run -p myprobe.bpf.o -o run.trace -- ./my_cuda_app\n");
}

/* The shim's folder: next to the binary in the build tree (build/bin -> build/lib), or the
 * installed layout (PREFIX/bin -> PREFIX/lib/cubpf). */
/* The folder of this program's binary. */
static int exe_dir(char *exe, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", exe, size - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

static int find_shim_dir(char *out, size_t len)
{
	char exe[PATH_MAX];
	if (exe_dir(exe, sizeof(exe)) != 0)
		return -1;
	static const char *const candidates[] = {"%s/../lib", "%s/../lib/cubpf"};
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char dir[PATH_MAX], lib[PATH_MAX + 32];
		snprintf(dir, sizeof(dir), candidates[i], exe);
		snprintf(lib, sizeof(lib), "%s/libcuda.so.1", dir);
		if (access(lib, R_OK) == 0 && realpath(dir, out) && strlen(out) < len)
			return 0;
	}
	return -1;
}

static int add_program(struct run_opts *o, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "cubpf run: cannot read probe object '%s': %s\n", path,
			errno ? strerror(errno) : "not a regular file");
		return -1;
	}
	size_t used = strlen(o->programs);
	if (used + strlen(path) + 2 > sizeof(o->programs)) {
		fprintf(stderr, "cubpf run: too many probe objects\n");
		return -1;
	}
	if (used)
		strcat(o->programs, ":");
	strcat(o->programs, path);
	return 0;
}

/* Seconds as a positive decimal ("0.5", "10"); -1 on anything else. */
static double parse_seconds(const char *opt, const char *v)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(d) || d <= 0 || d > 1e7) {
		fprintf(stderr, "cubpf run: %s '%s': expected a positive number of seconds\n", opt, v);
		return -1;
	}
	return d;
}

/* An option that becomes a CUBPF_* variable: checked by the shim's own table (settings.c), so
 * that the option and the variable take the same values and are refused the same way. */
static const char *parse_count(enum shim_setting_id id, const char *v)
{
	char err[256];
	uint64_t n;
	if (shim_setting_parse(id, v, &n, err, sizeof(err))) {
		fprintf(stderr, "cubpf run: %s\n", err);
		return NULL;
	}
	return v;
}

static int parse_run_opts(int argc, char **argv, struct run_opts *o)
{
	enum { OPT_REAL = 256, OPT_CACHE, OPT_DISABLE, OPT_JSON, OPT_LIST, OPT_RINGBUF, OPT_MAPMAX,
	       OPT_SAMPLE, OPT_CONTROL, OPT_PRELOAD, OPT_METRICS, OPT_SANITIZER };
	static const struct option longopts[] = {
		{"tool", required_argument, 0, 't'},     {"prog", required_argument, 0, 'p'},
		{"kernel", required_argument, 0, 'k'},   {"output", required_argument, 0, 'o'},
		{"log", required_argument, 0, 'l'},      {"real-libcuda", required_argument, 0, OPT_REAL},
		{"cache", required_argument, 0, OPT_CACHE}, {"disable", no_argument, 0, OPT_DISABLE},
		{"interval", required_argument, 0, 'i'}, {"duration", required_argument, 0, 'd'},
		{"json", no_argument, 0, OPT_JSON},      {"list-tools", no_argument, 0, OPT_LIST},
		{"ringbuf-mb", required_argument, 0, OPT_RINGBUF},
		{"map-max-mb", required_argument, 0, OPT_MAPMAX},
		{"sample", required_argument, 0, OPT_SAMPLE},
		{"control", required_argument, 0, OPT_CONTROL},
		{"preload", no_argument, 0, OPT_PRELOAD},
		{"metrics", required_argument, 0, OPT_METRICS},
		{"sanitizer", optional_argument, 0, OPT_SANITIZER},
		{"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
	};
	int c;
	optind = 1;
	opterr = 1;
	while ((c = getopt_long(argc, argv, "+t:p:k:o:l:i:d:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't': o->tool = optarg; break;
		case 'p': if (add_program(o, optarg)) return -1; o->have_prog = 1; break;
		case 'k': o->kernel_glob = optarg; break;
		case 'n': o->delay_ns = optarg; break;
		case 'o': o->trace = optarg; break;
		case 'l': o->log_level = optarg; break;
		case 'i': if ((o->interval_s = parse_seconds("-i", optarg)) < 0) return -1; break;
		case 'd': if ((o->duration_s = parse_seconds("-d", optarg)) < 0) return -1; break;
		case OPT_REAL: o->real_libcuda = optarg; break;
		case OPT_CACHE: o->cache = optarg; break;
		case OPT_DISABLE: o->disable = 1; break;
		case OPT_PRELOAD: o->preload = 1; break;
		case OPT_JSON: o->json = 1; break;
		case OPT_LIST: o->list_tools = 1; break;
		case OPT_RINGBUF:
			if (!(o->ringbuf_mb = parse_count(SHIM_SET_RINGBUF_MB, optarg)))
				return -1;
			break;
		case OPT_MAPMAX:
			if (!(o->map_max_mb = parse_count(SHIM_SET_MAP_MAX_MB, optarg)))
				return -1;
			break;
		case OPT_CONTROL: o->control = optarg; break;
		case OPT_METRICS: o->metrics = optarg; break;
		case OPT_SANITIZER: o->sanitizer = optarg && *optarg ? optarg : "auto"; break;
		case OPT_SAMPLE:
			if (!(o->sample = parse_count(SHIM_SET_SAMPLE, optarg)))
				return -1;
			break;
		case 'h': o->help = 1; break;
		default: run_usage(stderr); return -1;
		}
	}
	if (o->help || o->list_tools)
		return optind;
	if (optind >= argc) {
		fprintf(stderr, "cubpf run: no command given (cubpf run [OPTIONS] -- CMD ARGS...)\n");
		return -1;
	}
	return optind;
}

static void list_tools(FILE *f)
{
	size_t n;
	const struct tool *t = tool_list(&n);
	fprintf(f, "bundled tools (cubpf run -t TOOL --help for details):\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-16s %s\n", t[i].name, t[i].summary);
}

static void tool_help(const struct tool *t, FILE *f)
{
	fprintf(f, "usage: cubpf run -t %s%s [-k GLOB] [-i SECONDS] [-d SECONDS] [--json] [-o TRACE] "
		"-- CMD [ARGS...]\n\n%s: %s\n\n%s\nprobe program: %s%s%s (tools/probes/ in the "
		"sources)\n",
		t->name, strcmp(t->name, "memdelay") ? "" : " [-n NS]", t->name, t->summary, t->help,
		t->probe, t->sanitizer_probe ? ", under --sanitizer " : "",
		t->sanitizer_probe ? t->sanitizer_probe : "");
}

/* The folder next to the binary holding `sub` (build/bin -> build/SUB, PREFIX/bin ->
 * PREFIX/lib/cubpf/SUB). */
static int find_beside(const char *sub, char *out, size_t len)
{
	char exe[PATH_MAX];
	if (exe_dir(exe, sizeof(exe)) != 0)
		return -1;
	static const char *const candidates[] = {"%s/../%s", "%s/../lib/cubpf/%s"};
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char dir[PATH_MAX + 64];
		snprintf(dir, sizeof(dir), candidates[i], exe, sub);
		if (access(dir, R_OK) == 0 && realpath(dir, out) && strlen(out) < len)
			return 0;
	}
	return -1;
}

/* memdelay: a copy of its probe with -n's delay in its .rodata (the verifier then knows the
 * bound), run on every other launch of each kernel (unless --sample says otherwise) with kernel
 * spans on, so that the report compares launches with and without the delay. */
static int memdelay_probe(struct run_opts *o, const char *probe)
{
	char *end, err[256];
	const char *dir = getenv("TMPDIR");
	errno = 0;
	unsigned long long ns = o->delay_ns ? strtoull(o->delay_ns, &end, 10) : 1000;
	if (o->delay_ns && (errno || end == o->delay_ns || *end || !ns || ns > CUBPF_MAX_DELAY_NS)) {
		fprintf(stderr, "cubpf run: -n '%s': expected nanoseconds from 1 to %u\n", o->delay_ns,
			CUBPF_MAX_DELAY_NS);
		return -1;
	}
	snprintf(o->patched, sizeof(o->patched), "%s/cubpf-memdelay-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(o->patched);
	if (fd < 0) {
		fprintf(stderr, "cubpf run: memdelay: cannot make a temporary file: %s\n", strerror(errno));
		o->patched[0] = 0;
		return -1;
	}
	close(fd);
	if (tool_patch_rodata_u64(probe, "delay_ns", ns, o->patched, err, sizeof(err))) {
		fprintf(stderr, "cubpf run: memdelay: %s: %s\n", probe, err);
		return -1;
	}
	if (!o->sample)
		o->sample = "2";
	if (setenv("CUBPF_SPANS", "1", 0) != 0) {
		fprintf(stderr, "cubpf run: cannot set the environment: %s\n", strerror(errno));
		return -1;
	}
	return add_program(o, o->patched);
}

static int add_tool_probe(struct run_opts *o, const struct tool *t)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	if (find_beside("probes", dir, sizeof(dir)) != 0) {
		fprintf(stderr, "cubpf run: tool '%s': cannot find the probes folder next to cubpf "
				"(../probes or ../lib/cubpf/probes): run 'make'\n", t->name);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir,
		 o->sanitizer && t->sanitizer_probe ? t->sanitizer_probe : t->probe);
	if (!strcmp(t->name, "memdelay"))
		return memdelay_probe(o, path);
	if (o->delay_ns) {
		fprintf(stderr, "cubpf run: -n is memdelay's option, not %s's\n", t->name);
		return -1;
	}
	return add_program(o, path);
}

/* XLA_FLAGS: the user's flags with --xla_gpu_generate_line_info=true added (XLA writes line info,
 * and so .nv_debug_ptx_txt, only when asked), unless they name the flag themselves. */
static int set_xla_flags(void)
{
	static const char flag[] = "--xla_gpu_generate_line_info=true";
	const char *xla = getenv("XLA_FLAGS");
	if (xla && strstr(xla, "xla_gpu_generate_line_info"))
		return 0;
	size_t len = (xla ? strlen(xla) : 0) + sizeof(flag) + 1;
	char *v = malloc(len);
	if (!v)
		return -1;
	snprintf(v, len, "%s%s%s", xla && *xla ? xla : "", xla && *xla ? " " : "", flag);
	int rc = setenv("XLA_FLAGS", v, 1);
	free(v);
	return rc;
}

/* LD_PRELOAD: cubpf's libnvrtc.so.13 and libnvJitLink.so.13 before the user's preloads, and
 * libcubpf-exit.so after them.  Python packages load the CUDA wheels' copies of the first two by
 * full path (CuPy 14 through cuda.pathfinder), which LD_LIBRARY_PATH does not reach; preloaded,
 * cubpf's copies are the ones the program calls (measured: CuPy's cubins then carry their PTX).
 * They load the real library on the first call only.  libcubpf-exit.so lets a process that
 * ends with _exit() (fork()ed workers) finish its trace; last, so that a sanitizer runtime the
 * user preloads stays first.  With --preload (shim), cubpf's libcuda.so.1 comes right after the
 * user's preloads: an interposer of the driver the user preloads is then called first and its
 * calls to the next definition (dlsym(RTLD_NEXT)) reach cubpf, which calls the real driver; one
 * placed after cubpf would see no call, as cubpf holds the real driver privately (shim/find.c).
 * framework = 0 (--disable): the shim only.  Skipped when the folder's name cannot be written
 * in LD_PRELOAD (an error with --preload). */
static int set_preload(const char *shim_dir, int shim, int framework)
{
	static const char *const before[] = {
#if !defined(__SANITIZE_ADDRESS__)
		/* a sanitized build's drop-ins need the ASan runtime first in the process, which
		 * the programs run here (sh, the test programs) do not have */
		"libnvrtc.so.13", "libnvJitLink.so.13",
#endif
		NULL};
	if (strpbrk(shim_dir, " :\t\n")) {
		if (!shim)
			return 0;
		fprintf(stderr, "cubpf run: --preload: cubpf's folder '%s' cannot be named in "
				"LD_PRELOAD (a space or colon in it)\n", shim_dir);
		errno = EINVAL;
		return -1;
	}
	const char *old = getenv("LD_PRELOAD");
	size_t len = 4 * (strlen(shim_dir) + 24) + (old ? strlen(old) : 0) + 4;
	char *v = calloc(1, len), path[PATH_MAX + 32];
	if (!v)
		return -1;
	for (size_t i = 0; framework && before[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", shim_dir, before[i]);
		if (access(path, R_OK) == 0)
			snprintf(v + strlen(v), len - strlen(v), "%s%s", v[0] ? ":" : "", path);
	}
	if (old && *old)
		snprintf(v + strlen(v), len - strlen(v), "%s%s", v[0] ? ":" : "", old);
	if (shim)
		snprintf(v + strlen(v), len - strlen(v), "%s%s/libcuda.so.1", v[0] ? ":" : "",
			 shim_dir);
#if !defined(__SANITIZE_ADDRESS__)
	/* not in a sanitized build either: its programs (the tests') need the ASan runtime first,
	 * and a preloaded library comes before it; the plain build tests processes ending in
	 * _exit() */
	snprintf(path, sizeof(path), "%s/libcubpf-exit.so", shim_dir);
	if (framework && access(path, R_OK) == 0)
		snprintf(v + strlen(v), len - strlen(v), "%s%s", v[0] ? ":" : "", path);
#endif
	int rc = v[0] ? setenv("LD_PRELOAD", v, 1) : 0;
	free(v);
	return rc;
}

/* CUPY_CACHE_DIR: a folder of cubpf's own inside the user's CuPy cache (CUPY_CACHE_DIR, else
 * ~/.cupy/kernel_cache): there CuPy keeps the cubins the drop-in NVRTC made with line info, and
 * the user's own cache is left exactly as a run without cubpf leaves it (a cubin cached there
 * without line info would also hide its PTX from cubpf). */
static int set_cupy_cache(void)
{
	const char *dir = getenv("CUPY_CACHE_DIR"), *home = getenv("HOME");
	char v[PATH_MAX + 64];
	if (dir && *dir)
		snprintf(v, sizeof(v), "%s/cubpf-lineinfo", dir);
	else if (home && *home)
		snprintf(v, sizeof(v), "%s/.cupy/kernel_cache/cubpf-lineinfo", home);
	else
		return 0;
	return setenv("CUPY_CACHE_DIR", v, 1);
}

/* What frameworks need so that the kernels they compile carry their PTX (README, "Variables
 * cubpf run sets").  Triton and Inductor emit line info by default: cubpf sets nothing for them,
 * but says when the user turned it off. */
static int set_framework_environment(const char *shim_dir, int preload)
{
	int rc = set_xla_flags() | set_preload(shim_dir, preload, 1) | set_cupy_cache();
	const char *tl = getenv("TRITON_DISABLE_LINE_INFO");
	if (tl && *tl && strcmp(tl, "0") && strcasecmp(tl, "false"))
		fprintf(stderr, "cubpf run: note: TRITON_DISABLE_LINE_INFO=%s: Triton's kernels will "
				"carry no PTX and cannot be instrumented (unset it to instrument them)\n", tl);
	return rc;
}

/* LD_LIBRARY_PATH: cubpf's folder first (the default), so that the program's libcuda.so.1 is
 * cubpf's; untouched with --preload, where LD_PRELOAD brings it in (the dynamic linker then
 * answers every later request for the soname libcuda.so.1 with the preloaded shim). */
static int set_library_path(const struct run_opts *o, const char *shim_dir)
{
	if (o->preload)
		return 0;
	const char *old = getenv("LD_LIBRARY_PATH");
	size_t len = strlen(shim_dir) + (old ? strlen(old) : 0) + 2;
	char *path = malloc(len);
	if (!path)
		return -1;
	snprintf(path, len, "%s%s%s", shim_dir, old && *old ? ":" : "", old ? old : "");
	int rc = setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	return rc;
}

static int set_environment(const struct run_opts *o, const char *shim_dir)
{
	int rc = set_library_path(o, shim_dir);
	if (o->programs[0])
		rc |= setenv("CUBPF_PROGRAMS", o->programs, 1);
	if (o->kernel_glob)
		rc |= setenv("CUBPF_KERNELS", o->kernel_glob, 1);
	if (o->trace)
		rc |= setenv("CUBPF_TRACE", o->trace, 1);
	/* info: what -l shows, or the terminal when no report is made (the report itself reads
	 * only the trace's records, whatever the level, off included) */
	if (o->log_level)
		rc |= setenv("CUBPF_LOG", o->log_level, 1);
	else if (o->programs[0])
		rc |= setenv("CUBPF_LOG", "info", 1);
	if (o->interval_s > 0) {
		char ms[32];
		snprintf(ms, sizeof(ms), "%ld", lround(o->interval_s * 1000 < 100 ? 100 :
						       o->interval_s * 1000));
		rc |= setenv("CUBPF_INTERVAL_MS", ms, 1);
	}
	if (o->real_libcuda)
		rc |= setenv("CUBPF_REAL_LIBCUDA", o->real_libcuda, 1);
	if (o->cache)
		rc |= setenv("CUBPF_CACHE", o->cache, 1);
	if (o->disable)
		rc |= setenv("CUBPF_DISABLE", "1", 1) | (o->preload ? set_preload(shim_dir, 1, 0) : 0);
	else
		rc |= set_framework_environment(shim_dir, o->preload);
	if (o->ringbuf_mb)
		rc |= setenv("CUBPF_RINGBUF_MB", o->ringbuf_mb, 1);
	if (o->map_max_mb)
		rc |= setenv("CUBPF_MAP_MAX_MB", o->map_max_mb, 1);
	if (o->sample)
		rc |= setenv("CUBPF_SAMPLE", o->sample, 1);
	if (o->control)
		rc |= setenv("CUBPF_CONTROL", o->control, 1);
	if (o->sanitizer)
		rc |= setenv("CUBPF_SANITIZER", o->sanitizer, 1);
	return rc;
}

/* ---- following the child ------------------------------------------------------------------- */
struct follow {
	const struct run_opts *o;
	const struct tool *tool;
	struct tool_data data;
	char line[4096];
	size_t used;
	int echo_cubpf;             /* pass the shim's lines through (-l given, or no tool) */
	const char *trace_base;     /* own temporary trace: each process writes BASE.PID */
	int out_dir;                /* -o DIR: each process writes DIR/cubpf-PID.trace */
	pid_t child;                /* the process cubpf run started */
	struct tool_metrics_server *metrics; /* --metrics: started once the child is */
	int claim_fd;               /* -o: the lock held for the run's life (claim_output), or -1 */
	char claim[PATH_MAX + 16];
	struct tool_metrics_traces *mtraces; /* --metrics: the traces as the scrapes read them */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One line of the shim's log (CUBPF_LOG_FD): to our stderr, unchanged, when asked (-l) or
 * when no report is made.  Nothing of the report comes from it: the trace says it all. */
static void child_line(struct follow *fw, const char *line, size_t n)
{
	int shim = n >= 7 && !strncmp(line, "cubpf: ", 7), nl = n && line[n - 1] == '\n';
	char buf[sizeof(fw->line) + 1];
	snprintf(buf, sizeof(buf), "%.*s", (int)(n - nl), line);
	if (!shim || fw->echo_cubpf) { /* the shim quotes the program's kernel and module names */
		tool_text_put(stderr, buf, 0);
		if (nl)
			fputc('\n', stderr);
	}
}

static void child_output(struct follow *fw, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fw->line[fw->used++] = buf[i];
		if (buf[i] == '\n' || fw->used == sizeof(fw->line)) {
			child_line(fw, fw->line, fw->used);
			fw->used = 0;
		}
	}
}

/* ---- the traces of a run ------------------------------------------------------------------- */
/* Every process of the run writes a trace of its own: BASE.PID (cubpf run's temporary traces),
 * FILE then FILE.PID (-o FILE: the first process, then the others: the shim never writes into
 * another's), DIR/cubpf-PID.trace (-o DIR). */
struct trace_set {
	char **path;
	size_t n;
};

static void set_free(struct trace_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->path[i]);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

static int set_add(struct trace_set *s, const char *dir, const char *name)
{
	char **q = realloc(s->path, (s->n + 1) * sizeof(*q));
	if (!q)
		return -1;
	s->path = q;
	size_t len = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
	if (!(q[s->n] = malloc(len)))
		return -1;
	snprintf(q[s->n], len, "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
	s->n++;
	return 0;
}

/* name = prefix, digits (a pid), suffix */
static int numbered(const char *name, const char *prefix, const char *suffix)
{
	size_t np = strlen(prefix), ns = strlen(suffix), n = strlen(name);
	if (n <= np + ns || strncmp(name, prefix, np) || strcmp(name + n - ns, suffix))
		return 0;
	for (size_t i = np; i < n - ns; i++)
		if (name[i] < '0' || name[i] > '9')
			return 0;
	return 1;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_numbered(const char *dir, const char *prefix, const char *suffix,
			  struct trace_set *s)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t from = s->n;
	if (!d)
		return;
	while ((e = readdir(d)))
		if (numbered(e->d_name, prefix, suffix) && set_add(s, dir, e->d_name) != 0)
			break;
	closedir(d);
	if (s->n > from) /* none found: no array to sort */
		qsort(s->path + from, s->n - from, sizeof(*s->path), cmp_path);
}

/* FILE's folder and name ("." for a bare name). */
static void split_path(const char *path, char *dir, size_t len, char *name, size_t nlen)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, len, ".");
	else
		snprintf(dir, len, "%.*s", (int)(slash == path ? 1 : slash - path), path);
	snprintf(name, nlen, "%s", slash ? slash + 1 : path);
}

static int non_empty(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* The run's traces; the program's own first, then by name.  With only_written, files with
 * nothing in them yet are left out. */
static void run_traces(const struct follow *fw, struct trace_set *s, int only_written)
{
	const char *base = fw->trace_base ? fw->trace_base : fw->o->trace;
	char dir[PATH_MAX], name[NAME_MAX + 8], first[PATH_MAX + 32] = "";
	if (!base)
		return;
	if (fw->out_dir) {
		list_numbered(base, "cubpf-", ".trace", s);
		snprintf(first, sizeof(first), "%s/cubpf-%d.trace", base, (int)fw->child);
	} else {
		split_path(base, dir, sizeof(dir), name, sizeof(name) - 1);
		strcat(name, ".");
		if (!fw->trace_base && (!only_written || non_empty(base)) && access(base, F_OK) == 0)
			set_add(s, NULL, base);
		list_numbered(dir, name, "", s);
		snprintf(first, sizeof(first), "%s.%d", base, (int)fw->child);
	}
	size_t n = 0;
	for (size_t i = 0; i < s->n; i++) { /* drop the empty ones, keep the order */
		if (only_written && !non_empty(s->path[i]))
			free(s->path[i]);
		else
			s->path[n++] = s->path[i];
	}
	s->n = n;
	for (size_t i = 1; i < s->n; i++)
		if (!strcmp(s->path[i], first)) { /* the program's own trace first */
			char *own = s->path[i];
			memmove(s->path + 1, s->path, i * sizeof(*s->path));
			s->path[0] = own;
		}
}

/* A run of several processes: every trace read into one report. */
static void load_processes(const struct follow *fw, const struct trace_set *s,
			   struct tool_data *d, int final)
{
	const struct tool_kernel_key *keys = fw->tool ? fw->tool->kernel_keys : NULL;
	for (size_t i = 0; i < s->n; i++) {
		char err[512] = "";
		int rc = tool_data_load_process(d, s->path[i], keys, err, sizeof(err));
		if (err[0] && final)
			tool_warn("cubpf run: %s%s", err, rc ? " (left out of the report)" : "");
	}
}

/* Why a program makes no driver call through cubpf, the usual two reasons. */
#define NO_CALL_WHY "it never loaded libcuda.so.1, or it loaded a driver by its absolute path, " \
		    "which LD_LIBRARY_PATH cannot redirect"
/* The other reason a process leaves no trace: its header could not be written. */
#define NO_TRACE_WHY "a full disk, a file size limit: -l warn shows cubpf's warning"

/* One trace: read into fw->data (kernels keep their ids between reads).  0, or -1 (said when
 * final). */
static int load_one(struct follow *fw, const char *trace, int final)
{
	char err[512] = "";
	tool_data_reset_trace(&fw->data);
	if (tool_data_load(&fw->data, trace, err, sizeof(err)) != 0) {
		if (final)
			fprintf(stderr, "cubpf run: no report: %s\n", err);
		return -1;
	}
	if (err[0])
		fprintf(stderr, "cubpf run: %s\n", err);
	return 0;
}

static void print_report(struct follow *fw, int final)
{
	const struct run_opts *o = fw->o;
	struct trace_set s = {0};
	struct tool_data merged = {0}, *d = &fw->data;
	run_traces(fw, &s, 1);
	if (!s.n) {
		if (final)
			fprintf(stderr, "cubpf run: no report: the program made no CUDA driver call "
					"through cubpf (%s%s%s%s), or cubpf could not write its trace "
					"(%s)\n", fw->trace_base ? "" : "nothing was recorded in ",
				fw->trace_base ? "" : o->trace, fw->trace_base ? "" : "; ", NO_CALL_WHY,
				NO_TRACE_WHY);
		return;
	}
	if (s.n > 1) {
		d = &merged;
		load_processes(fw, &s, d, final);
	} else if (load_one(fw, s.path[0], final) != 0) {
		set_free(&s);
		return;
	}
	set_free(&s);
	struct tool_opts to = {.json = o->json, .top = 10};
	if (!o->json) {
		time_t t = time(NULL);
		struct tm tm;
		char stamp[16];
		strftime(stamp, sizeof(stamp), "%H:%M:%S", localtime_r(&t, &tm));
		printf("%s%s %s\n", final ? "\n" : "", stamp, final ? "--- at exit ---" : "---");
	} else {
		printf("{\"final\":%s,", final ? "true" : "false");
	}
	if (fw->tool) /* JSON: each part prints its members with a trailing comma */
		fw->tool->report(d, &to, stdout);
	if (o->have_prog)
		tool_report_maps(d, &to, stdout);
	if (final || o->json)
		tool_report_common(d, &to, stdout);
	if (o->json)
		printf("}\n");
	else if (!final)
		printf("\n");
	fflush(stdout);
	if (d == &merged)
		tool_data_free(&merged);
}

/* -d: SIGINT first (the program may report and clean up), SIGTERM after a grace period, SIGKILL
 * after another. */
static void stop_child(pid_t pid, double since, double *next)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGKILL};
	static int step;
	if (step >= 3)
		return;
	fprintf(stderr, "cubpf run: duration over after %.1f s: sending %s\n", since,
		strsignal(sigs[step]));
	kill(pid, sigs[step++]);
	*next += 5;
}

static int wait_status(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static void follow_child(struct follow *fw, pid_t pid, int fd)
{
	const struct run_opts *o = fw->o;
	double start = now_s();
	double next_view = o->interval_s > 0 ? start + o->interval_s : INFINITY;
	double stop_at = o->duration_s > 0 ? start + o->duration_s : INFINITY;
	for (;;) {
		double now = now_s(), wake = next_view < stop_at ? next_view : stop_at;
		int ms = isinf(wake) ? -1 : (int)(wake > now ? (wake - now) * 1000 + 1 : 0);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, ms);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0) {
			char buf[65536];
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break; /* the child (and whatever inherited the log pipe) is done */
			child_output(fw, buf, (size_t)n);
		}
		now = now_s();
		if (now >= next_view) {
			print_report(fw, 0);
			next_view += o->interval_s;
		}
		if (now >= stop_at)
			stop_child(pid, now - start, &stop_at);
	}
	if (fw->used)
		child_line(fw, fw->line, fw->used);
}

/* ---- --metrics: the run's traces, each read alone, as Prometheus metrics ----------------------
 * Called by the server's thread on each scrape (tools/tool_metrics_http.c): it follows the files
 * the program's processes write (what each gained since the last scrape) and never touches what
 * the main thread reads (fw->data), so a scrape neither waits for nor slows the report, nor the
 * program. */
static void metrics_body(void *ctx, FILE *f)
{
	struct follow *fw = ctx;
	struct trace_set s = {0};
	run_traces(fw, &s, 1);
	tool_metrics_traces_write(fw->mtraces, f, fw->tool ? fw->tool->name : NULL, s.path, s.n);
	set_free(&s);
}

static int run_child(char **cmd, struct follow *fw)
{
	/* Without a report to make nor a duration to keep, the shim logs to the program's stderr. */
	int capture = fw->tool || fw->o->have_prog || fw->o->duration_s > 0;
	int pipefd[2] = {-1, -1};
	if (capture && pipe(pipefd) != 0) {
		fprintf(stderr, "cubpf run: pipe: %s\n", strerror(errno));
		return 1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "cubpf run: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		if (capture) {
			/* the shim writes its lines to the pipe; the program keeps its stderr.  The
			 * pipe's identity goes along, so that a program that closes the descriptor
			 * and reuses its number never receives the shim's lines. */
			char fd[64];
			struct stat st;
			if (fstat(pipefd[1], &st) != 0)
				_exit(127);
			snprintf(fd, sizeof(fd), "%d:%llu:%llu", pipefd[1],
				 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
			close(pipefd[0]);
			if (setenv("CUBPF_LOG_FD", fd, 1) != 0)
				_exit(127);
		}
		execvp(cmd[0], cmd);
		fprintf(stderr, "cubpf run: cannot run '%s': %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	fw->child = pid;
	if (fw->metrics && (!(fw->mtraces = tool_metrics_traces_new()) ||
			    tool_metrics_start(fw->metrics, metrics_body, fw) != 0))
		fprintf(stderr, "cubpf run: --metrics: cannot start the server thread\n");
	/* Ctrl-C reaches the child through the process group; we stay to print the report. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	if (capture) {
		close(pipefd[1]);
		follow_child(fw, pid, pipefd[0]);
		close(pipefd[0]);
	}
	return wait_status(pid);
}

/* Whether path is a trace (cubpf's reader takes its header) or an empty file (a process that
 * claimed the name and wrote nothing): what an earlier run may leave where -o points. */
static int is_trace(const char *path)
{
	char err[256];
	if (!non_empty(path))
		return access(path, F_OK) == 0;
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	if (r)
		store_trace_close_reader(r);
	return r != NULL;
}

/* -o: the traces an earlier run left there go, as a new -o FILE replaces FILE (the shim never
 * overwrites a trace: a process that finds its name taken writes FILE.PID).  FILE itself goes
 * whatever it holds, as before; the numbered ones only when they are traces. */
static int clear_old_traces(const struct follow *fw)
{
	struct trace_set s = {0};
	int rc = 0;
	run_traces(fw, &s, 0);
	for (size_t i = 0; i < s.n; i++) {
		struct stat st;
		int own_name = !fw->out_dir && !strcmp(s.path[i], fw->o->trace);
		if (lstat(s.path[i], &st) != 0 || !S_ISREG(st.st_mode) ||
		    (!own_name && !is_trace(s.path[i])))
			continue;
		if (unlink(s.path[i]) != 0) {
			fprintf(stderr, "cubpf run: cannot replace the trace %s: %s\n", s.path[i],
				strerror(errno));
			rc = -1;
		}
	}
	set_free(&s);
	return rc;
}

/* ---- the claim on -o ------------------------------------------------------------------------
 * Two `cubpf run -o SAME` at once: the second would remove the first's live trace as an
 * earlier run's, and the first would then report the second's data as its own.  So a run
 * claims its -o for its whole life with a lock file beside it (FILE.lock, DIR/cubpf.lock),
 * flock()ed, and a second run is refused with the first's pid.  A lock file, not the trace:
 * the trace is removed and made again by the program's processes.  Making it is also the check
 * that the trace can be made at all (a missing folder, a read-only or full file system), said
 * before the program runs. */

/* The lock open in fd is the one at fw->claim now (not one its last holder removed). */
static int claim_current(const struct follow *fw, int fd)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(fw->claim, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Says who holds the claim (its pid, as it wrote it) and refuses. */
static int claim_refused(const struct follow *fw, int fd)
{
	char pid[32] = "";
	ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
	pid[n > 0 ? n : 0] = 0;
	pid[strcspn(pid, "\n")] = 0;
	fprintf(stderr, "cubpf run: %s is the output of another cubpf run still running (process "
			"%s, lock %s): give this run another -o\n", fw->o->trace, *pid ? pid : "?",
		fw->claim);
	close(fd);
	return -1;
}

/* Takes the claim on fw->o->trace (a file, or the folder when fw->out_dir); 0, or -1 said. */
static int claim_output(struct follow *fw)
{
	char pid[32];
	snprintf(fw->claim, sizeof(fw->claim), fw->out_dir ? "%s/cubpf.lock" : "%s.lock",
		 fw->o->trace);
	for (int tries = 0; tries < 8; tries++) {
		int fd = open(fw->claim, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			break;
		int locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
		if (!locked && errno == EWOULDBLOCK)
			return claim_refused(fw, fd);
		if (!locked) { /* no locks on this file system: said, as any failure */
			int e = errno;
			close(fd);
			errno = e;
			break;
		}
		if (!claim_current(fw, fd)) { /* its holder ended and removed it meanwhile */
			close(fd);
			continue;
		}
		int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
		struct rlimit rl; /* a write past RLIMIT_FSIZE would kill cubpf run (SIGXFSZ) */
		int big = getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur < (rlim_t)n;
		if (big)
			errno = EFBIG;
		if (big || ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
			int e = errno;
			unlink(fw->claim);
			close(fd);
			errno = e;
			break;
		}
		fw->claim_fd = fd;
		return 0;
	}
	fprintf(stderr, "cubpf run: cannot make the trace %s: %s (making %s)\n", fw->o->trace,
		strerror(errno), fw->claim);
	return -1;
}

/* Ends the claim: the lock file goes before its lock is let go, so that a run that opened it
 * meanwhile finds it gone (claim_current) and makes its own. */
static void claim_release(struct follow *fw)
{
	if (fw->claim_fd < 0)
		return;
	unlink(fw->claim);
	close(fw->claim_fd);
	fw->claim_fd = -1;
}

/* -o DIR (a folder, or a name ending in '/', made here): each process writes DIR/cubpf-PID.trace
 * (the shim does so when CUBPF_TRACE names a folder). */
static int prepare_output(struct run_opts *o, struct follow *fw, char *dir, size_t len)
{
	struct stat st;
	size_t n = strlen(o->trace);
	if (strchr(o->trace, '%'))
		return 0; /* the user's own per-process pattern: the shim expands it (no claim: each
			   * process has a name of its own) */
	fw->out_dir = (n && o->trace[n - 1] == '/') || (stat(o->trace, &st) == 0 && S_ISDIR(st.st_mode));
	if (fw->out_dir) {
		snprintf(dir, len, "%.*s", (int)(n > 1 && o->trace[n - 1] == '/' ? n - 1 : n), o->trace);
		if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
			fprintf(stderr, "cubpf run: cannot make the trace folder %s: %s\n", dir,
				strerror(errno));
			return -1;
		}
		o->trace = dir;
	}
	if (claim_output(fw) != 0)
		return -1;
	return clear_old_traces(fw);
}

/* -o without a tool: the user asked for traces and gets none when the program never went
 * through cubpf's libcuda.so.1; say so, and the two usual reasons. */
static void say_if_no_trace(const struct follow *fw, const char *program)
{
	struct trace_set s = {0};
	if (strchr(fw->o->trace, '%'))
		return;
	run_traces(fw, &s, 0);
	if (!s.n)
		fprintf(stderr, "cubpf run: no trace written %s %s: %s made no CUDA driver call "
				"through cubpf (%s), or cubpf could not write its trace (%s)\n",
			fw->out_dir ? "in" : "to", fw->o->trace, program, NO_CALL_WHY, NO_TRACE_WHY);
	else if (s.n > 1)
		fprintf(stderr, "cubpf run: %zu processes wrote a trace each: %s%s (cubpf trace "
				"reads them together)\n", s.n, fw->o->trace,
			fw->out_dir ? "/cubpf-PID.trace" : " and its .PID siblings");
	set_free(&s);
}

/* Removes the traces of every process (BASE.*) and BASE itself. */
static void remove_traces(const char *base)
{
	char pat[PATH_MAX + 8];
	glob_t g;
	snprintf(pat, sizeof(pat), "%s.*", base);
	if (glob(pat, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
	unlink(base);
}

/* A temporary trace when -o is not given (the report reads it; removed at the end). */
static int temp_trace(char *path, size_t len)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, len, "%s/cubpf-run-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "cubpf run: cannot make a temporary trace in %s: %s (use -o TRACE)\n",
			dir && *dir ? dir : "/tmp", strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* --metrics: the port taken before the program starts (one in use: said, nothing run). */
static int listen_metrics(const struct run_opts *o, struct follow *fw)
{
	char err[512];
	if (!(fw->metrics = tool_metrics_listen(o->metrics, err, sizeof(err)))) {
		fprintf(stderr, "cubpf run: --metrics %s: %s\n", o->metrics, err);
		return -1;
	}
	fprintf(stderr, "cubpf run: metrics at http://%s/metrics\n", tool_metrics_address(fw->metrics));
	return 0;
}

/* Checks what can be checked before the program starts; 0, 1 (done: help/list), -1 (error). */
static int prepare(struct run_opts *o, const struct tool **tool)
{
	if (o->list_tools) {
		list_tools(stdout);
		return 1;
	}
	if (o->tool && !(*tool = tool_find(o->tool))) {
		fprintf(stderr, "cubpf run: unknown tool '%s'\n", o->tool);
		list_tools(stderr);
		return -1;
	}
	if (o->help) {
		if (*tool)
			tool_help(*tool, stdout);
		else
			run_usage(stdout);
		return 1;
	}
	if (*tool && add_tool_probe(o, *tool) != 0)
		return -1;
	if (!*tool && o->delay_ns) {
		fprintf(stderr, "cubpf run: -n is memdelay's option (-t memdelay -n NS)\n");
		return -1;
	}
	if ((o->interval_s > 0 || o->json) && !*tool && !o->have_prog) {
		fprintf(stderr, "cubpf run: -i and --json need a tool (-t) or a program (-p)\n");
		return -1;
	}
	return 0;
}

static int run_main(struct run_opts *o, int argc, char **argv)
{
	const struct tool *tool = NULL;
	int first = parse_run_opts(argc, argv, o);
	if (first < 0)
		return 2;
	int p = prepare(o, &tool);
	if (p != 0)
		return p > 0 ? 0 : 2;
	char shim_dir[PATH_MAX], tmp[PATH_MAX], per_process[PATH_MAX + 8], out_dir[PATH_MAX];
	if (find_shim_dir(shim_dir, sizeof(shim_dir)) != 0) {
		fprintf(stderr, "cubpf run: cannot find cubpf's libcuda.so.1 next to this program "
				"(looked in ../lib and ../lib/cubpf): reinstall cubpf or run 'make'\n");
		return 2;
	}
	int own_trace = (tool || o->have_prog || o->metrics) && !o->trace;
	if (own_trace) {
		if (temp_trace(tmp, sizeof(tmp)) != 0)
			return 2;
		/* One trace per process ("%p"): a framework's helper processes (Inductor's compile
		 * workers load the shim too) would otherwise write into the program's trace. */
		snprintf(per_process, sizeof(per_process), "%s.%%p", tmp);
		o->trace = per_process;
		/* The reports read probes, not kernel spans, whose two timing events per launch
		 * cost the GPU 4-5 us each (b_trace_app.sh): a trace of one's own keeps them
		 * (-o), an environment that asks for them too. */
		if (setenv("CUBPF_SPANS", "0", 0) != 0) {
			fprintf(stderr, "cubpf run: cannot set the environment: %s\n", strerror(errno));
			return 2;
		}
	}
	struct follow fw = {.o = o, .tool = tool, .echo_cubpf = o->log_level || !(tool || o->have_prog),
			    .trace_base = own_trace ? tmp : NULL, .claim_fd = -1};
	if (!own_trace && o->trace && prepare_output(o, &fw, out_dir, sizeof(out_dir)) != 0) {
		claim_release(&fw);
		return 2;
	}
	if (set_environment(o, shim_dir) != 0) {
		fprintf(stderr, "cubpf run: cannot set the environment: %s\n", strerror(errno));
		claim_release(&fw);
		return 2;
	}
	if (o->metrics && listen_metrics(o, &fw) != 0) {
		claim_release(&fw);
		if (own_trace)
			remove_traces(tmp);
		return 2;
	}
	/* the variables the program gets, the user's own included: refused as the options are */
	char bad[256];
	if (shim_settings_check_env(bad, sizeof(bad))) {
		fprintf(stderr, "cubpf run: %s\n", bad);
		return 2;
	}
	int rc = run_child(argv + first, &fw);
	if (tool || o->have_prog)
		print_report(&fw, 1);
	else if (o->trace)
		say_if_no_trace(&fw, argv[first]);
	if (rc != 0)
		fprintf(stderr, "cubpf run: %s exited with status %d\n", argv[first], rc);
	tool_metrics_stop(fw.metrics);
	tool_metrics_traces_free(fw.mtraces);
	tool_data_free(&fw.data);
	claim_release(&fw);
	if (own_trace)
		remove_traces(tmp);
	return rc;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o = {0};
	int rc = run_main(&o, argc, argv);
	if (o.patched[0])
		unlink(o.patched);
	return rc;
}
