/* libFuzzer target: any bytes as a trace file, read by the commands a user runs on it: `cubpf
 * trace info`, `dump` (text and --json), `stats`, `export` (chrome and csv) and `replay -p` with
 * host programs, and the reports of `cubpf run -t TOOL` (tool_data_load and every tool's
 * formatter, text and JSON).  Whatever the bytes, nothing may read out of bounds, leak, crash
 * or ask for more memory than the file can fill: smoke.sh runs it with -malloc_limit_mb, so
 * an allocation sized from a declared count or id is a failure.
 *
 * The input goes to a memfd (the commands take paths); their output goes to /dev/null.  The
 * replay's object is tests/store/replay.bpf.c, built beside this binary
 * (fuzz_trace_cmd.bpf.o). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tools/commands.h"
#include "tools/tools.h"

static char trace_path[64], object_path[4096];
static int trace_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ssize_t n = readlink("/proc/self/exe", object_path, sizeof(object_path) - 16);
	if (n <= 0 || (trace_fd = memfd_create("fuzz-trace", MFD_CLOEXEC)) < 0)
		abort();
	memcpy(object_path + n, ".bpf.o", 7);
	snprintf(trace_path, sizeof(trace_path), "/proc/self/fd/%d", trace_fd);
	/* the commands print to stdout and stderr; libFuzzer keeps its own copy of stderr */
	if (!freopen("/dev/null", "w", stdout) || !(stderr = fopen("/dev/null", "w")))
		abort();
	return 0;
}

static void trace_cmd(const char *const *args, int n)
{
	char *argv[8];
	for (int i = 0; i < n; i++)
		argv[i] = (char *)args[i];
	argv[n] = NULL;
	(void)cmd_trace(n, argv);
}

/* What `cubpf run -t TOOL` makes of the trace: every tool's report. */
static void tool_reports(void)
{
	struct tool_data d;
	char err[512];
	size_t n;
	const struct tool *tools = tool_list(&n);
	memset(&d, 0, sizeof(d));
	if (tool_data_load(&d, trace_path, err, sizeof(err)) == 0)
		for (int json = 0; json < 2; json++) {
			struct tool_opts o = {.json = json, .top = 10};
			for (size_t i = 0; i < n; i++)
				tools[i].report(&d, &o, stdout);
			tool_report_maps(&d, &o, stdout);
			tool_report_common(&d, &o, stdout);
		}
	tool_data_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (ftruncate(trace_fd, 0) || pwrite(trace_fd, data, size, 0) != (ssize_t)size)
		abort();
	const char *const info[] = {"trace", "info", trace_path};
	const char *const dump[] = {"trace", "dump", trace_path};
	const char *const json[] = {"trace", "dump", "--json", trace_path};
	const char *const stats[] = {"trace", "stats", trace_path};
	const char *const chrome[] = {"trace", "export", "--format", "chrome", trace_path};
	const char *const csv[] = {"trace", "export", "--format", "csv", trace_path};
	const char *const replay[] = {"trace", "replay", "-p", object_path, trace_path};
	trace_cmd(info, 3);
	trace_cmd(dump, 3);
	trace_cmd(json, 4);
	trace_cmd(stats, 3);
	trace_cmd(chrome, 5);
	trace_cmd(csv, 5);
	trace_cmd(replay, 5);
	tool_reports();
	fflush(stdout);
	return 0;
}
