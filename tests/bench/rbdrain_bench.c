/* tests/bench/rbdrain_bench.c: the host side of GPU ring buffers on the CPU alone.  Producer
 * threads fill the lanes of one map with the CPU model of the device producer
 * (shim_live_rb_produce_batch: batches of -K kernelretsnoop-sized 48-byte records, 32 by default as
 * a full warp writes them; 8448 lanes of 7808 bytes as the shim sizes its 64 MiB budget on an
 * H100's 132 SMs x 64 warp slots) while drain threads take them with the shim's drain path into
 * a real trace file.
 *
 *   rbdrain_bench [-p producers] [-d drain threads] [-l lanes] [-b lane bytes] [-s seconds]
 *                 [-w trace workers] [-o trace path | -n (no trace: count only)]
 *                 [-m batch|record] [-K records per batch] [-F rounds] [-k]
 *
 * -m record is the drain as it was before batching (shim_live_rb_drain, one clock read and one
 * store_trace_probe per record), kept to compare.  Prints the records and bytes taken per second
 * (ring bytes per record: the payload and its share of the batch's header and padding), the records produced and dropped, the trace
 * writer's losses and the file's size, then one RESULT line.  -F N: N rounds of "fill every lane,
 * then one timed drain pass", no producer running alongside: the drain's own cost per record
 * (wall and CPU time).  -k keeps the trace file. */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim/live/rb.h"
#include "store/store.h"

#define PAYLOAD 48

static struct {
	int producers, drains, workers, seconds, per_record, fill_rounds, keep;
	uint32_t lanes, batch;
	uint64_t lane_bytes;
	const char *path;
} opt = { 2, 1, 2, 3, 0, 0, 0, 8448, 32, 7808, "/tmp/rbdrain_bench.cubpf" };

/* Ring bytes per record: the batch's header and padding shared by its records. */
static double ring_bytes_per_record(void)
{
	return (double)CUBPF_RB_BATCH_BYTES(opt.batch, PAYLOAD) / opt.batch;
}

static void *map;
static struct store_trace_writer *trace;
static atomic_int stop_producers, stop_drains;
static atomic_uint_fast64_t produced, taken, drain_cpu_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Producer p writes batches to lanes p, p + P, ... in turn, like warps of several SMs. */
static void *producer(void *arg)
{
	uint32_t p = (uint32_t)(uintptr_t)arg, lane = p;
	uint64_t rec[32][PAYLOAD / 8] = { { 0 } }, n = 0;
	while (!atomic_load_explicit(&stop_producers, memory_order_relaxed)) {
		for (int k = 0; k < 64; k++) {
			for (uint32_t r = 0; r < opt.batch; r++)
				rec[r][0] = n++, rec[r][1] = p;
			shim_live_rb_produce_batch(map, lane, rec, opt.batch, PAYLOAD);
			lane += (uint32_t)opt.producers;
			if (lane >= opt.lanes)
				lane = p;
		}
	}
	atomic_fetch_add(&produced, n);
	return NULL;
}

/* ---- the drain before batching: one record at a time (the old rb_record) ---- */
static void per_record(void *user, uint32_t lane, const void *data, uint32_t len)
{
	(void)user;
	(void)lane;
	atomic_fetch_add_explicit(&taken, 1, memory_order_relaxed);
	if (trace) {
		struct store_rec_probe p = { .ts_ns = now_ns(), .prog = 0, .map = 0, .device = 0 };
		store_trace_probe(trace, &p, data, len);
	}
}

/* One pass of drain thread k over its lanes (k, k + drains, ...), as the shim's rb_drain_all:
 * the batched path with the shim's trace sink, or the per-record path. */
static uint64_t drain_pass(uint32_t k, void *scratch)
{
	uint64_t damaged = 0, n;
	if (opt.per_record) {
		n = shim_live_rb_drain(map, scratch, per_record, NULL, &damaged);
	} else {
		struct live_rb_trace sink = { trace, { .prog = 0, .map = 0, .device = 0 }, NULL };
		struct live_rb_taken t = { 0 };
		n = shim_live_rb_drain_runs(map, k, (uint32_t)opt.drains, scratch, shim_live_rb_to_trace,
				       &sink, &t);
		atomic_fetch_add_explicit(&taken, n, memory_order_relaxed);
	}
	if (k == 0) /* the shim's thread 0: the tails to the producers, the drops back */
		shim_live_rb_sync(map);
	return n;
}

static void *drainer(void *arg)
{
	uint32_t k = (uint32_t)(uintptr_t)arg;
	void *scratch = malloc(opt.lane_bytes);
	uint64_t got = 0;
	while (!atomic_load(&stop_drains)) {
		if (got == 0) /* as the shim: idle, one look per millisecond */
			nanosleep(&(struct timespec){ 0, 1000 * 1000 }, NULL);
		got = drain_pass(k, scratch);
	}
	free(scratch);
	struct timespec ts; /* the drain's own CPU time: its cost per record, whatever the sharing */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	atomic_fetch_add(&drain_cpu_ns, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	return NULL;
}

static int parse(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "p:d:l:b:s:w:o:nm:K:F:k")) != -1) {
		switch (c) {
		case 'p': opt.producers = atoi(optarg); break;
		case 'd': opt.drains = atoi(optarg); break;
		case 'l': opt.lanes = (uint32_t)atoi(optarg); break;
		case 'b': opt.lane_bytes = strtoull(optarg, NULL, 0); break;
		case 's': opt.seconds = atoi(optarg); break;
		case 'w': opt.workers = atoi(optarg); break;
		case 'o': opt.path = optarg; break;
		case 'n': opt.path = NULL; break;
		case 'm': opt.per_record = !strcmp(optarg, "record"); break;
		case 'K': opt.batch = (uint32_t)atoi(optarg); break;
		case 'F': opt.fill_rounds = atoi(optarg); break;
		case 'k': opt.keep = 1; break;
		default: return -1;
		}
	}
	if (opt.producers < 1 || opt.drains < 1 || opt.drains > 16 || !opt.lanes ||
	    opt.lane_bytes < 128 || opt.lane_bytes % 128 || opt.seconds < 1 || opt.batch < 1 ||
	    opt.batch > 32)
		return -1;
	if (opt.per_record)
		opt.drains = 1; /* shim_live_rb_drain takes every lane: one thread only */
	return 0;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* -F N: the drain alone, without sharing the CPU with producers.  N rounds: fill every lane
 * (not timed), then one timed drain pass over all lanes into the trace. */
static int fill_then_drain(void)
{
	void *scratch = malloc(opt.lane_bytes);
	uint64_t rec[32][PAYLOAD / 8] = { { 0 } }, ns = 0, cpu = 0, n = 0, made = 0;
	for (int r = 0; r < opt.fill_rounds; r++) {
		for (uint32_t lane = 0; lane < opt.lanes; lane++)
			while (shim_live_rb_produce_batch(map, lane, rec, opt.batch, PAYLOAD) == 0)
				made += opt.batch;
		uint64_t t0 = now_ns(), c0 = cpu_ns();
		for (uint32_t k = 0; k < (uint32_t)opt.drains; k++)
			drain_pass(k, scratch);
		ns += now_ns() - t0;
		cpu += cpu_ns() - c0;
	}
	n = atomic_load(&taken);
	free(scratch);
	struct store_trace_counters tc = { 0 };
	char err[STORE_ERRLEN];
	if (trace) {
		store_trace_counters(trace, &tc);
		store_trace_close(trace, err, sizeof(err));
	}
	printf("RESULT rbdrain_fill mode=%s trace=%s rounds=%d records=%llu drain_ns_per_record=%.1f "
	       "drain_cpu_ns_per_record=%.1f drain_Mrps=%.2f drain_MBps=%.0f writer_dropped=%llu\n",
	       opt.per_record ? "record" : "batch", opt.path ? "file" : "none", opt.fill_rounds,
	       (unsigned long long)n, (double)ns / (double)n, (double)cpu / (double)n, (double)n / ((double)ns / 1e9) / 1e6,
	       (double)n * ring_bytes_per_record() / ((double)ns / 1e9) / 1e6,
	       (unsigned long long)tc.dropped_records);
	if (opt.path && !opt.keep)
		unlink(opt.path);
	free(map);
	return made == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	char err[STORE_ERRLEN];
	if (parse(argc, argv)) {
		fprintf(stderr, "usage: rbdrain_bench [-p producers] [-d drains] [-l lanes] "
			"[-b lane_bytes] [-s seconds] [-w workers] [-o trace | -n] [-m batch|record] "
			"[-K records per batch] [-F rounds] [-k]\n");
		return 2;
	}
	/* the ring, then the producers' part (device memory on the GPU; host memory here) */
	uint64_t ring = (shim_live_rb_bytes(opt.lanes, opt.lane_bytes) + 4095) & ~4095ull;
	map = aligned_alloc(4096, ring + ((shim_live_rb_state_bytes(opt.lanes) + 4095) & ~4095ull));
	if (!map)
		return 1;
	uint8_t *state = (uint8_t *)map + ring;
	memset(state, 0, shim_live_rb_state_bytes(opt.lanes));
	struct cubpf_rb_state sh = shim_live_rb_state_header(opt.lanes, 64, opt.lane_bytes,
							(uintptr_t)state, (uintptr_t)map);
	memcpy(state, &sh, sizeof(sh));
	shim_live_rb_init(map, opt.lanes, 64, opt.lane_bytes, (uintptr_t)state);
	if (opt.path) {
		struct store_trace_options o = { .workers = opt.workers };
		trace = store_trace_create(opt.path, NULL, &o, err, sizeof(err));
		if (!trace) {
			fprintf(stderr, "rbdrain_bench: %s\n", err);
			return 1;
		}
	}
	if (opt.fill_rounds > 0)
		return fill_then_drain();
	pthread_t pt[64], dt[16];
	int np = opt.producers > 64 ? 64 : opt.producers;
	for (int i = 0; i < opt.drains; i++)
		pthread_create(&dt[i], NULL, drainer, (void *)(uintptr_t)i);
	uint64_t t0 = now_ns();
	for (int i = 0; i < np; i++)
		pthread_create(&pt[i], NULL, producer, (void *)(uintptr_t)i);
	sleep((unsigned)opt.seconds);
	atomic_store(&stop_producers, 1);
	for (int i = 0; i < np; i++)
		pthread_join(pt[i], NULL);
	uint64_t t1 = now_ns(), taken_run = atomic_load(&taken);
	atomic_store(&stop_drains, 1);
	for (int i = 0; i < opt.drains; i++)
		pthread_join(dt[i], NULL);
	void *scratch = malloc(opt.lane_bytes);
	for (uint32_t k = 0; k < (uint32_t)opt.drains; k++) /* what the run left in the lanes */
		drain_pass(k, scratch);
	free(scratch);

	struct store_trace_counters tc = { 0 };
	long long file_bytes = 0;
	if (trace) {
		store_trace_counters(trace, &tc);
		if (store_trace_close(trace, err, sizeof(err))) {
			fprintf(stderr, "rbdrain_bench: %s\n", err);
			return 1;
		}
		struct stat st;
		if (stat(opt.path, &st) == 0)
			file_bytes = (long long)st.st_size;
	}
	uint64_t drops = shim_live_rb_drops(map), all = atomic_load(&taken), made = atomic_load(&produced);
	double s = (double)(t1 - t0) / 1e9, rps = (double)taken_run / s;
	double mbps = rps * ring_bytes_per_record() / 1e6;
	printf("mode=%s producers=%d drains=%d lanes=%u lane_bytes=%llu batch=%u seconds=%.2f "
	       "trace=%s\n", opt.per_record ? "record" : "batch", np, opt.drains, opt.lanes,
	       (unsigned long long)opt.lane_bytes, opt.batch, s, opt.path ? opt.path : "none");
	printf("attempted=%llu produced=%llu dropped=%llu (%.1f%%) taken=%llu lost=%lld\n",
	       (unsigned long long)made, (unsigned long long)(made - drops),
	       (unsigned long long)drops, made ? 100.0 * (double)drops / (double)made : 0.0,
	       (unsigned long long)all, (long long)(made - drops) - (long long)all);
	double cpu = (double)atomic_load(&drain_cpu_ns) / 1e9;
	printf("drain: cpu_s=%.2f ns_per_record=%.1f capacity_Mrps_per_core=%.2f "
	       "capacity_MBps_per_core=%.0f\n", cpu, taken_run ? cpu * 1e9 / (double)all : 0.0,
	       cpu > 0 ? (double)all / cpu / 1e6 : 0.0,
	       cpu > 0 ? (double)all * ring_bytes_per_record() / cpu / 1e6 : 0.0);
	printf("writer: records=%llu dropped_records=%llu dropped_batches=%llu file_bytes=%lld\n",
	       (unsigned long long)tc.records, (unsigned long long)tc.dropped_records,
	       (unsigned long long)tc.dropped_batches, file_bytes);
	printf("RESULT rbdrain mode=%s producers=%d drains=%d taken_Mrps=%.2f taken_MBps=%.0f "
	       "drain_ns_per_record=%.1f ring_drops=%llu writer_dropped=%llu trace_bytes=%lld\n",
	       opt.per_record ? "record" : "batch", np, opt.drains, rps / 1e6, mbps,
	       all ? cpu * 1e9 / (double)all : 0.0,
	       (unsigned long long)drops, (unsigned long long)tc.dropped_records, file_bytes);
	if (opt.path && !opt.keep)
		unlink(opt.path);
	free(map);
	return (long long)(made - drops) == (long long)all ? 0 : 1;
}
