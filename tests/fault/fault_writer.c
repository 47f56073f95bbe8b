/* The fault suite's writer (tests/fault/test_fault.c runs it under each fault): writes a known
 * number of records to a trace with store/'s writer and says how many, so that the test can
 * check what was kept against what was written.
 *
 *   fault_writer PATH EVENTS [SLEEP_US]
 *
 * Metadata: one PROGRAM, one DEVICE, then a STRING every 500 events (each used by the KERNEL
 * records that follow it); events: API and KERNEL records, alternately, with fields that do
 * not compress away.  SLEEP_US > 0: a pause after every 100 events (a run long enough to be
 * killed in), and "appended N" lines on stdout as it goes.  FAULT_AS_SLACK=BYTES (environment):
 * after the writer is made, the address space is limited to what the process uses plus BYTES
 * and filled, so that every later allocation fails (ulimit -v reached mid-run).  Last line:
 * "written E events M metadata; counters records R dropped D lost L (cause C); close RC". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "store/store.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* The process's address space now (VmSize), in bytes. */
static size_t vm_size(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;
	if (f) {
		if (fscanf(f, "%lu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Limits the address space to what is used plus slack, then takes it all (kept, never freed). */
static void exhaust_memory(size_t slack)
{
	struct rlimit rl = {vm_size() + slack, vm_size() + slack};
	setrlimit(RLIMIT_AS, &rl);
	for (size_t sz = 64u << 20; sz >= 64; )
		if (!malloc(sz))
			sz /= 2;
}

static void event(struct store_trace_writer *w, uint64_t i, uint32_t name)
{
	if (i % 2) {
		struct store_rec_kernel k = {.launch_ns = next(), .gpu_start = next(), .corr = i,
					     .name = name, .grid = {1, 2, 3}, .tid = (uint32_t)next()};
		store_trace_kernel(w, &k);
	} else {
		struct store_rec_api a = {.begin_ns = next(), .end_ns = next(), .corr = i, .name = name,
					  .tid = (uint32_t)next()};
		store_trace_api(w, &a);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fault_writer PATH EVENTS [SLEEP_US]\n");
		return 2;
	}
	uint64_t n = strtoull(argv[2], NULL, 10), meta = 0;
	unsigned sleep_us = argc > 3 ? (unsigned)atoi(argv[3]) : 0;
	char err[STORE_ERRLEN], s[64];
	struct store_trace_options opt = {.batch_bytes = 64u << 10, .buffer_bytes = 4u << 20,
					  .flush_ms = 20};
	struct store_trace_process p = {.pid = (uint32_t)getpid(), .cubpf_version = "fault",
					.hostname = "box", .cmdline = "fault_writer"};
	struct store_trace_writer *w = store_trace_create(argv[1], &p, &opt, err, sizeof(err));
	if (!w) {
		printf("create failed: %s\n", err);
		return 3;
	}
	if (getenv("FAULT_AS_SLACK"))
		exhaust_memory(strtoull(getenv("FAULT_AS_SLACK"), NULL, 10));
	struct store_rec_program pr = {.index = 0, .nmaps = 1};
	struct store_rec_device dv = {.ordinal = 0, .sm = 90};
	meta += store_trace_program(w, &pr, "prog", "/probe.bpf.o") == 0;
	meta += store_trace_device(w, &dv, "Fake GPU") == 0;
	uint32_t name = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (i % 500 == 0) {
			snprintf(s, sizeof(s), "_Z6kernel%llu", (unsigned long long)i);
			name = store_trace_intern(w, s);
			meta++; /* written: an id 0 (lost) is counted by the writer */
		}
		event(w, i, name);
		if (sleep_us && i % 100 == 99) {
			printf("appended %llu\n", (unsigned long long)i + 1);
			fflush(stdout);
			usleep(sleep_us);
		}
	}
	struct store_trace_counters c;
	store_trace_counters(w, &c);
	int rc = store_trace_close(w, err, sizeof(err));
	printf("written %llu events %llu metadata; counters records %llu dropped %llu lost %llu "
	       "(cause %u); close %d%s%s\n", (unsigned long long)n, (unsigned long long)meta,
	       (unsigned long long)c.records, (unsigned long long)c.dropped_records,
	       (unsigned long long)c.lost_records, c.lost_cause, rc, rc ? ": " : "", rc ? err : "");
	return 0;
}
