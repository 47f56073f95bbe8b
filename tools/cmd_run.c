/* cubpf run: starts a program with the shim first on LD_LIBRARY_PATH and the probe settings in
 * the environment (the contract of DESIGN.md), waits for it and returns its exit status. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/commands.h"

struct run_opts {
	const char *tool;
	char programs[8192]; /* colon-separated probe objects */
	const char *kernel_glob;
	const char *trace;
	const char *log_level;
	const char *real_libcuda;
	const char *cache;
	int disable;
};

static void run_usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf run [OPTIONS] -- CMD [ARGS...]\n"
		"\n"
		"Runs CMD with cubpf's libcuda.so.1 first on LD_LIBRARY_PATH: every CUDA driver call\n"
		"of the program goes through cubpf, which forwards it to the real driver.\n"
		"\n"
		"options:\n"
		"  -t, --tool TOOL         a bundled tool: kcount, threadhist, launchlate, memtrace,\n"
		"                          kernelretsnoop\n"
		"  -p, --prog PROG.bpf.o   a probe object (repeatable)\n"
		"  -k, --kernel GLOB       probe only kernels whose name matches GLOB\n"
		"  -o, --output TRACE      record a trace file (CUBPF_TRACE)\n"
		"  -l, --log LEVEL         off, error, warn (default), info, debug (CUBPF_LOG)\n"
		"      --real-libcuda PATH the real driver, when cubpf cannot find it\n"
		"      --cache PATH        module cache database (CUBPF_CACHE)\n"
		"      --disable           pure pass-through, nothing intercepted (CUBPF_DISABLE=1)\n"
		"  -h, --help              this text\n"
		"\n"
		"example: cubpf run -l info -- ./my_cuda_app --size 1024\n");
}

/* The shim's folder: next to the binary in the build tree (build/bin -> build/lib), or the
 * installed layout (PREFIX/bin -> PREFIX/lib/cubpf). */
static int find_shim_dir(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
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

static int parse_run_opts(int argc, char **argv, struct run_opts *o)
{
	enum { OPT_REAL = 256, OPT_CACHE, OPT_DISABLE };
	static const struct option longopts[] = {
		{"tool", required_argument, 0, 't'},     {"prog", required_argument, 0, 'p'},
		{"kernel", required_argument, 0, 'k'},   {"output", required_argument, 0, 'o'},
		{"log", required_argument, 0, 'l'},      {"real-libcuda", required_argument, 0, OPT_REAL},
		{"cache", required_argument, 0, OPT_CACHE}, {"disable", no_argument, 0, OPT_DISABLE},
		{"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+t:p:k:o:l:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't': o->tool = optarg; break;
		case 'p': if (add_program(o, optarg)) return -1; break;
		case 'k': o->kernel_glob = optarg; break;
		case 'o': o->trace = optarg; break;
		case 'l': o->log_level = optarg; break;
		case OPT_REAL: o->real_libcuda = optarg; break;
		case OPT_CACHE: o->cache = optarg; break;
		case OPT_DISABLE: o->disable = 1; break;
		case 'h': run_usage(stdout); exit(0);
		default: run_usage(stderr); return -1;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "cubpf run: no command given (cubpf run [OPTIONS] -- CMD ARGS...)\n");
		return -1;
	}
	return optind;
}

static int set_environment(const struct run_opts *o, const char *shim_dir)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	size_t len = strlen(shim_dir) + (old ? strlen(old) : 0) + 2;
	char *path = malloc(len);
	if (!path)
		return -1;
	snprintf(path, len, "%s%s%s", shim_dir, old && *old ? ":" : "", old ? old : "");
	int rc = setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	if (o->programs[0])
		rc |= setenv("CUBPF_PROGRAMS", o->programs, 1);
	if (o->kernel_glob)
		rc |= setenv("CUBPF_KERNELS", o->kernel_glob, 1);
	if (o->trace)
		rc |= setenv("CUBPF_TRACE", o->trace, 1);
	if (o->log_level)
		rc |= setenv("CUBPF_LOG", o->log_level, 1);
	if (o->real_libcuda)
		rc |= setenv("CUBPF_REAL_LIBCUDA", o->real_libcuda, 1);
	if (o->cache)
		rc |= setenv("CUBPF_CACHE", o->cache, 1);
	if (o->disable)
		rc |= setenv("CUBPF_DISABLE", "1", 1);
	return rc;
}

/* Runs the child and returns its status the way a shell would (128+signal when killed).
 * SIGINT/SIGTERM reach the child through the process group; we only wait. */
static int run_child(char **cmd)
{
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "cubpf run: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		execvp(cmd[0], cmd);
		fprintf(stderr, "cubpf run: cannot run '%s': %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o = {0};
	int first = parse_run_opts(argc, argv, &o);
	if (first < 0)
		return 2;
	if (o.tool) {
		fprintf(stderr, "cubpf run: tool '%s': the bundled tools need live probes, which this "
				"build does not have yet (issue 6)\n", o.tool);
		return 2;
	}
	char shim_dir[PATH_MAX];
	if (find_shim_dir(shim_dir, sizeof(shim_dir)) != 0) {
		fprintf(stderr, "cubpf run: cannot find cubpf's libcuda.so.1 next to this program "
				"(looked in ../lib and ../lib/cubpf): reinstall cubpf or run 'make'\n");
		return 2;
	}
	if (set_environment(&o, shim_dir) != 0) {
		fprintf(stderr, "cubpf run: cannot set the environment: %s\n", strerror(errno));
		return 2;
	}
	return run_child(argv + first);
}
