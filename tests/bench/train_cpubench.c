/* CPU-only cost of cubpf per launch in a launch-bound training step (issue 31), with the fake
 * driver of tests/shim standing in for the real one: what cubpf adds to the application's
 * thread, without the driver's own time.  The step is shaped like a small MLP's in PyTorch
 * (tests/gpu/apps/train_app.py): kernels of several libraries (the runtime registers every
 * fatbin with cuLibraryLoadData and launches CUkernel handles), small grids, launches
 * alternating between libraries, one host-to-device copy and one ordering event per step, and
 * a device-to-host copy with a stream synchronisation every 10 steps (loss.item()).
 *   train_cpubench LIBCUDA [STEPS [PACE_US]]
 * LIBCUDA is the fake driver itself (native) or cubpf's libcuda.so.1 over it (CUBPF_REAL_LIBCUDA,
 * CUBPF_PROGRAMS, CUBPF_TRACE, ... set by the caller, tests/bench/b_train_cpu.sh).  Prints
 * "ns_per_launch N thread_cpu_ns C": a step's wall time and its thread's CPU time over its
 * launches, medians of 5 rounds.  PACE_US (0): each step starts PACE_US after the last began,
 * the thread spinning meanwhile (not counted): the Python work of a real step, which keeps the
 * launch rate near a real loop's (about 20,000 a second), so that cubpf's threads (the spans'
 * poller, the trace's compressors) and its pools see the load they would; without it the
 * fake's launches come 50 times faster, and the span pool runs dry between two polls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/bench/median.h"

#define LIBS 4
#define PER_LIB 6
#define LAUNCHES (LIBS * PER_LIB)
#define ROUNDS 5

typedef int (*libload_t)(void **, const void *, void *, void *, unsigned, void *, void *, unsigned);
typedef int (*getkernel_t)(void **, void *, const char *);
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			unsigned, void *, void **, void **);
typedef int (*htod_t)(uint64_t, const void *, size_t, void *);
typedef int (*dtoh_t)(void *, uint64_t, size_t, void *);
typedef int (*record_t)(void *, void *);
typedef int (*sync_t)(void *);

static struct {
	launch_t launch;
	htod_t htod;
	dtoh_t dtoh;
	record_t record;
	sync_t sync;
	void *kernels[LAUNCHES]; /* in launch order: library i % LIBS */
	void *stream, *event;
	uint64_t dev;
} app;

/* A kernel name of PyTorch's length (elementwise kernels' mangled names run to 200-400 bytes). */
static void kernel_name(char *out, size_t n, int lib, int k)
{
	snprintf(out, n, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_"
		 "15binary_internal10MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_lib%dk%d", lib, k);
}

static char *library_ptx(int lib)
{
	size_t cap = 16384, len = 0;
	char *p = malloc(cap), name[256];
	if (!p)
		return NULL;
	len += (size_t)snprintf(p, cap, ".version 8.0\n.target sm_90\n.address_size 64\n\n");
	for (int k = 0; k < PER_LIB; k++) {
		kernel_name(name, sizeof(name), lib, k);
		len += (size_t)snprintf(p + len, cap - len, ".visible .entry %s(\n\t.param .u64 "
					"%s_param_0\n)\n{\n\tret;\n}\n", name, name);
	}
	return p;
}

static int setup(void *cu)
{
	libload_t libload = (libload_t)dlsym(cu, "cuLibraryLoadData");
	getkernel_t getkernel = (getkernel_t)dlsym(cu, "cuLibraryGetKernel");
	int (*ctx_create)(void **, void *, unsigned, int) =
		(int (*)(void **, void *, unsigned, int))dlsym(cu, "cuCtxCreate_v4");
	int (*stream_create)(void **, unsigned) = (int (*)(void **, unsigned))dlsym(cu, "cuStreamCreate");
	int (*event_create)(void **, unsigned) = (int (*)(void **, unsigned))dlsym(cu, "cuEventCreate");
	int (*alloc)(uint64_t *, size_t) = (int (*)(uint64_t *, size_t))dlsym(cu, "cuMemAlloc_v2");
	app.launch = (launch_t)dlsym(cu, "cuLaunchKernel");
	app.htod = (htod_t)dlsym(cu, "cuMemcpyHtoDAsync_v2");
	app.dtoh = (dtoh_t)dlsym(cu, "cuMemcpyDtoHAsync_v2");
	app.record = (record_t)dlsym(cu, "cuEventRecord");
	app.sync = (sync_t)dlsym(cu, "cuStreamSynchronize");
	void *ctx = NULL;
	char params[64] = { 0 }, name[256];
	if (!libload || !getkernel || !ctx_create || !stream_create || !event_create || !alloc ||
	    ctx_create(&ctx, params, 0, 0) || stream_create(&app.stream, 1) ||
	    event_create(&app.event, 2 /* CU_EVENT_DISABLE_TIMING */) || alloc(&app.dev, 4096))
		return -1;
	for (int l = 0; l < LIBS; l++) {
		void *lib = NULL;
		char *ptx = library_ptx(l);
		if (!ptx || libload(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0))
			return -1; /* the library may keep reading the image: not freed */
		for (int k = 0; k < PER_LIB; k++) {
			kernel_name(name, sizeof(name), l, k);
			if (getkernel(&app.kernels[k * LIBS + l], lib, name))
				return -1;
		}
	}
	return 0;
}

static int step(int s)
{
	static float host[64];
	uint64_t arg = app.dev;
	void *params[] = { &arg };
	int rc = app.htod(app.dev, host, sizeof(host), app.stream);
	for (int i = 0; i < LAUNCHES; i++)
		rc |= app.launch(app.kernels[i], 2 + i % 3, 1, 1, 128, 1, 1, 0, app.stream, params, NULL);
	rc |= app.record(app.event, app.stream);
	if (s % 10 == 9)
		rc |= app.dtoh(host, app.dev, 4, app.stream) | app.sync(app.stream);
	return rc;
}

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Spins until `until` (CLOCK_MONOTONIC seconds); the thread CPU time it took. */
static double spin(double until)
{
	double c = clock_s(CLOCK_THREAD_CPUTIME_ID);
	while (clock_s(CLOCK_MONOTONIC) < until)
		;
	return clock_s(CLOCK_THREAD_CPUTIME_ID) - c;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: train_cpubench LIBCUDA [STEPS]\n");
		return 2;
	}
	int steps = argc > 2 ? atoi(argv[2]) : 4000;
	long pace_us = argc > 3 ? atol(argv[3]) : 0;
	void *cu = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!cu || setup(cu)) {
		fprintf(stderr, "train_cpubench: set-up failed: %s\n", cu ? "a driver call" : dlerror());
		return 1;
	}
	for (int s = 0; s < 200; s++) { /* warm: first launches, per-thread caches, span pools */
		double t = clock_s(CLOCK_MONOTONIC);
		if (step(s))
			return 1;
		if (pace_us) /* at the same rate: a burst would run the span pool dry */
			spin(t + pace_us * 1e-6);
	}
	double ns[ROUNDS], cpu[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		double wall = 0, c = clock_s(CLOCK_THREAD_CPUTIME_ID), paused = 0;
		for (int s = 0; s < steps; s++) {
			double t = clock_s(CLOCK_MONOTONIC);
			if (step(s)) {
				fprintf(stderr, "train_cpubench: a call failed in step %d\n", s);
				return 1;
			}
			wall += clock_s(CLOCK_MONOTONIC) - t;
			if (pace_us) /* spun, not slept: Python keeps its core busy (and warm) */
				paused += spin(t + pace_us * 1e-6);
		}
		ns[r] = wall / ((double)steps * LAUNCHES) * 1e9;
		cpu[r] = (clock_s(CLOCK_THREAD_CPUTIME_ID) - c - paused) / ((double)steps * LAUNCHES) * 1e9;
	}
	/* wall: what the step takes; thread CPU: the application thread's own work, without the
	 * time cubpf's threads take from it on a machine with few cores */
	printf("ns_per_launch %.1f thread_cpu_ns %.1f (a step of %d launches, 1 copy, 1 event; "
	       "median of %d rounds x %d steps)\n", bench_median(ns, ROUNDS),
	       bench_median(cpu, ROUNDS), LAUNCHES, ROUNDS, steps);
	return 0;
}
