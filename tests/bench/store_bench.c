/* store_bench: CPU benchmarks of store/.
 *   store_bench trace [-t THREADS] [-s SECONDS] [-l LEVEL] [-w WORKERS] [-o FILE]
 *       sustained ingest of probe-like events (kernelretsnoop-shaped ring-buffer samples):
 *       raw MB/s accepted and written, compression ratio, drops, append latency
 *   store_bench cache [-n ENTRIES] [-o FILE]
 *       lookup time of a hit (and a miss, and a put) in a cache of realistic module sizes
 *   store_bench procs [-t PROCESSES] [-n ENTRIES] [-w WAIT_MS] [-o FILE]
 *       one cache database, PROCESSES processes at once (a framework's compile workers and its
 *       main process, issue 17), each looking up ENTRIES modules, half of them shared by all,
 *       and storing those it misses, a store waiting WAIT_MS at most for another's (the shim's
 *       setting, CUBPF_CACHE_WAIT_MS): every lookup's and store's time against one process
 *       alone, and the stores given up
 * Prints one "RESULT" line per figure, for tests/bench/RESULTS.md. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

struct args {
	int threads, level, workers, entries;
	double seconds;
	const char *out;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- trace ingest ------------------------------------------------------------------------- */

/* What kernelretsnoop sends per thread block: timestamps, ids, a duration. */
struct sample {
	uint64_t end_ns;
	uint32_t kernel_id, smid;
	uint32_t block_x, block_y;
	uint32_t warp, lane_mask;
	uint64_t duration_ns;
};

struct producer {
	struct store_trace_writer *w;
	atomic_int *stop;
	int id;
	uint64_t appended, dropped_calls;
	uint64_t *lat;
	size_t nlat;
};

#define LAT_SAMPLES (1 << 20)

static void *produce(void *arg)
{
	struct producer *p = arg;
	struct store_rec_probe h = {.prog = 0, .map = 1, .flags = STORE_PROBE_GPU_TIME};
	struct sample s = {.kernel_id = 3 + (uint32_t)p->id, .lane_mask = 0xffffffffu};
	uint64_t ts = 1700000000000000000ull, x = 88172645463325252ull + (uint64_t)p->id;

	while (!atomic_load_explicit(p->stop, memory_order_relaxed)) {
		for (int k = 0; k < 256; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: jitter */
			ts += 32 * (1 + (x & 7));
			s.end_ns = ts;
			s.smid = (uint32_t)(x >> 8) % 132;
			s.block_x = (uint32_t)(p->appended & 4095);
			s.block_y = 0;
			s.warp = (uint32_t)(x >> 20) & 31;
			s.duration_ns = 4000 + ((x >> 32) & 1023);
			h.ts_ns = ts;
			if ((p->appended & 63) == 0 && p->nlat < LAT_SAMPLES) {
				uint64_t t0 = now_ns();
				p->dropped_calls += (uint64_t)store_trace_probe(p->w, &h, &s, sizeof(s));
				p->lat[p->nlat++] = now_ns() - t0;
			} else {
				p->dropped_calls += (uint64_t)store_trace_probe(p->w, &h, &s, sizeof(s));
			}
			p->appended++;
		}
	}
	return NULL;
}

static int bench_trace(const struct args *a)
{
	char err[STORE_ERRLEN], path[4096];
	struct store_trace_options o = {.level = a->level, .workers = a->workers};
	struct store_trace_process proc = {.cubpf_version = "bench", .cmdline = "store_bench trace"};
	snprintf(path, sizeof(path), "%s", a->out ? a->out : "/tmp/store_bench.cubpf");
	struct store_trace_writer *w = store_trace_create(path, &proc, &o, err, sizeof(err));
	if (!w) {
		fprintf(stderr, "store_bench: %s\n", err);
		return 1;
	}
	atomic_int stop = 0;
	struct producer *p = calloc((size_t)a->threads, sizeof(*p));
	pthread_t *th = calloc((size_t)a->threads, sizeof(*th));
	uint64_t t0 = now_ns();
	for (int i = 0; i < a->threads; i++) {
		p[i] = (struct producer){.w = w, .stop = &stop, .id = i,
					 .lat = malloc(LAT_SAMPLES * sizeof(uint64_t))};
		pthread_create(&th[i], NULL, produce, &p[i]);
	}
	usleep((useconds_t)(a->seconds * 1e6));
	atomic_store(&stop, 1);
	uint64_t t_app = now_ns() - t0, lat_n = 0;
	for (int i = 0; i < a->threads; i++) {
		pthread_join(th[i], NULL);
		lat_n += p[i].nlat;
	}
	struct store_trace_counters c;
	store_trace_counters(w, &c);
	if (store_trace_close(w, err, sizeof(err))) {
		fprintf(stderr, "store_bench: %s\n", err);
		return 1;
	}
	uint64_t t_all = now_ns() - t0;
	struct stat st;
	stat(path, &st);
	uint64_t *lat = malloc((lat_n ? lat_n : 1) * sizeof(*lat)), k = 0;
	for (int i = 0; i < a->threads; i++)
		for (size_t j = 0; j < p[i].nlat; j++)
			lat[k++] = p[i].lat[j];
	qsort(lat, lat_n, sizeof(*lat), cmp_u64);
	uint64_t raw_offered = c.bytes, kept = c.bytes - c.dropped_bytes;
	double ev_size = c.records ? (double)c.bytes / (double)c.records : 0;
	printf("RESULT trace_ingest threads=%d level=%d workers=%d event_bytes=%.0f seconds=%.2f\n",
	       a->threads, a->level ? a->level : 1, a->workers, ev_size, t_app / 1e9);
	printf("RESULT trace_ingest offered_MBps=%.0f written_raw_MBps=%.0f events_per_s=%.0f\n",
	       raw_offered / (t_app / 1e3), kept / (t_all / 1e3), (double)c.records / (t_app / 1e9));
	printf("RESULT trace_ingest dropped_batches=%llu dropped_pct=%.1f file_MB=%.1f ratio=%.1f\n",
	       (unsigned long long)c.dropped_batches,
	       raw_offered ? 100.0 * (double)c.dropped_bytes / (double)raw_offered : 0.0,
	       st.st_size / 1e6, st.st_size ? (double)kept / (double)st.st_size : 0.0);
	if (lat_n)
		printf("RESULT trace_append_ns p50=%llu p99=%llu p999=%llu max=%llu (%llu samples)\n",
		       (unsigned long long)lat[lat_n / 2], (unsigned long long)lat[lat_n * 99 / 100],
		       (unsigned long long)lat[lat_n * 999 / 1000], (unsigned long long)lat[lat_n - 1],
		       (unsigned long long)lat_n);
	for (int i = 0; i < a->threads; i++)
		free(p[i].lat);
	free(lat);
	free(p);
	free(th);
	if (!a->out)
		unlink(path);
	return 0;
}

/* ---- cache lookups ------------------------------------------------------------------------ */

static store_key key_of(int i)
{
	struct store_key_input in = {.image = {&i, sizeof(i)}, .rewriter_version = "bench", .sm = 90};
	store_key k;
	store_key_compute(&in, &k);
	return k;
}

static void report(const char *what, uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	printf("RESULT cache_%s_us mean=%.1f p50=%.1f p99=%.1f max=%.1f (%zu runs)\n", what,
	       sum / 1e3 / (double)n, v[n / 2] / 1e3, v[n * 99 / 100] / 1e3, v[n - 1] / 1e3, n);
}

static int bench_cache(const struct args *a)
{
	char err[STORE_ERRLEN], path[4096];
	snprintf(path, sizeof(path), "%s", a->out ? a->out : "/tmp/store_bench_cache.db");
	unlink(path);
	struct store_cache *c = store_cache_open(path, NULL, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "store_bench: %s\n", err);
		return 1;
	}
	size_t ptx_n = 400 << 10, cubin_n = 250 << 10; /* a mid-size instrumented module */
	uint8_t *ptx = malloc(ptx_n), *cubin = malloc(cubin_n);
	for (size_t i = 0; i < ptx_n; i++)
		ptx[i] = (uint8_t)("\tld.global.f32 %f1, [%rd4];\n"[i % 28]);
	for (size_t i = 0; i < cubin_n; i++)
		cubin[i] = (uint8_t)(i * 2654435761u >> 13);
	int n = a->entries, runs = 2000;
	uint64_t *t = malloc((size_t)(runs > n ? runs : n) * sizeof(*t));
	for (int i = 0; i < n; i++) {
		store_key k = key_of(i);
		struct store_cache_entry e = {.ptx = ptx, .ptx_size = ptx_n, .cubin = cubin,
					      .cubin_size = cubin_n, .name = "bench", .sm = 90};
		uint64_t t0 = now_ns();
		if (store_cache_put(c, &k, &e)) {
			fprintf(stderr, "store_bench: put: %s\n", store_cache_error(c));
			return 1;
		}
		t[i] = now_ns() - t0;
	}
	report("put", t, (size_t)n);
	for (int r = 0; r < runs; r++) {
		store_key k = key_of(r % n);
		struct store_cache_entry e;
		uint64_t t0 = now_ns();
		if (store_cache_get(c, &k, &e) != 1) {
			fprintf(stderr, "store_bench: expected a hit: %s\n", store_cache_error(c));
			return 1;
		}
		t[r] = now_ns() - t0;
		store_cache_entry_free(&e);
	}
	report("hit", t, (size_t)runs);
	for (int r = 0; r < runs; r++) {
		store_key k = key_of(n + r);
		struct store_cache_entry e;
		uint64_t t0 = now_ns();
		store_cache_get(c, &k, &e);
		t[r] = now_ns() - t0;
	}
	report("miss", t, (size_t)runs);
	/* The key itself: hashing a module image of this size. */
	for (int r = 0; r < 200; r++) {
		struct store_key_input in = {.image = {ptx, ptx_n}, .sm = 90};
		store_key k;
		uint64_t t0 = now_ns();
		store_key_compute(&in, &k);
		t[r] = now_ns() - t0;
	}
	report("key_400KiB", t, 200);
	printf("RESULT cache_entry ptx_bytes=%zu cubin_bytes=%zu entries=%d\n", ptx_n, cubin_n, n);
	store_cache_close(c);
	free(ptx);
	free(cubin);
	free(t);
	if (!a->out) {
		char side[4200];
		unlink(path);
		snprintf(side, sizeof(side), "%s-wal", path);
		unlink(side);
		snprintf(side, sizeof(side), "%s-shm", path);
		unlink(side);
	}
	return 0;
}

/* ---- one cache, several processes ---------------------------------------------------------- */
struct module_bytes {
	uint8_t *ptx, *cubin;
	size_t ptx_n, cubin_n;
};

/* What one process of a run does at each module load: look the module up, store it when it
 * misses.  Keys: half shared by every process (the same kernels compiled in each), half its
 * own.  t[2 * i] the lookup's time, t[2 * i + 1] the store's (0 when it hit). */
#define GIVEN_UP (1ull << 63) /* a store's time with this bit: not stored (another was writing) */

static int procs_child(const char *path, int who, int n, int wait_ms, const struct module_bytes *m,
		       uint64_t *t)
{
	char err[STORE_ERRLEN];
	struct store_cache_options o = {.write_wait_ms = wait_ms};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "store_bench: %s\n", err);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		store_key k = key_of(i % 2 ? 1000000 * (who + 1) + i : i);
		struct store_cache_entry e;
		uint64_t t0 = now_ns();
		int hit = store_cache_get(c, &k, &e) == 1;
		t[2 * i] = now_ns() - t0;
		if (hit) {
			store_cache_entry_free(&e);
			continue;
		}
		e = (struct store_cache_entry){.ptx = m->ptx, .ptx_size = m->ptx_n, .cubin = m->cubin,
					       .cubin_size = m->cubin_n, .name = "bench", .sm = 90};
		t0 = now_ns();
		int rc = store_cache_put(c, &k, &e);
		if (rc < 0) {
			fprintf(stderr, "store_bench: put: %s\n", store_cache_error(c));
			return 1;
		}
		t[2 * i + 1] = (now_ns() - t0) | (rc ? GIVEN_UP : 0);
	}
	store_cache_close(c);
	return 0;
}

/* procs processes at once on a fresh database; the lookups' and stores' times into report. */
static int procs_round(const char *path, int procs, int n, int wait_ms,
		       const struct module_bytes *m, const char *label)
{
	size_t per = 2 * (size_t)n, bytes = per * (size_t)procs * sizeof(uint64_t);
	uint64_t *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char side[4200];
	if (t == MAP_FAILED)
		return 1;
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path), unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path), unlink(side);
	int rc = 0;
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(procs_child(path, p, n, wait_ms, m, t + per * (size_t)p));
	}
	for (int p = 0; p < procs; p++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			rc = 1;
	}
	uint64_t *get = malloc(bytes / 2 + 8), *put = malloc(bytes / 2 + 8);
	size_t ng = 0, np = 0, given_up = 0;
	for (size_t i = 0; i < per * (size_t)procs; i += 2) {
		get[ng++] = t[i];
		given_up += (t[i + 1] & GIVEN_UP) != 0;
		if (t[i + 1])
			put[np++] = t[i + 1] & ~GIVEN_UP;
	}
	char what[64];
	snprintf(what, sizeof(what), "%s_lookup", label);
	report(what, get, ng);
	snprintf(what, sizeof(what), "%s_store", label);
	if (np)
		report(what, put, np);
	printf("RESULT cache_%s stores=%zu given_up=%zu (another process writing past %d ms)\n",
	       label, np, given_up, wait_ms);
	free(get), free(put);
	munmap(t, bytes);
	return rc;
}

static int bench_procs(const struct args *a)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s", a->out ? a->out : "/tmp/store_bench_procs.db");
	struct module_bytes m = {.ptx_n = 400 << 10, .cubin_n = 250 << 10};
	m.ptx = malloc(m.ptx_n), m.cubin = malloc(m.cubin_n);
	for (size_t i = 0; i < m.ptx_n; i++)
		m.ptx[i] = (uint8_t)("\tld.global.f32 %f1, [%rd4];\n"[i % 28]);
	for (size_t i = 0; i < m.cubin_n; i++)
		m.cubin[i] = (uint8_t)(i * 2654435761u >> 13);
	char label[32];
	int wait = a->workers > 0 ? a->workers : 5;
	int rc = procs_round(path, 1, a->entries, wait, &m, "procs1");
	snprintf(label, sizeof(label), "procs%d", a->threads);
	rc |= procs_round(path, a->threads, a->entries, wait, &m, label);
	printf("RESULT cache_procs processes=%d modules_each=%d (half shared) entry=%zu+%zu bytes\n",
	       a->threads, a->entries, m.ptx_n, m.cubin_n);
	free(m.ptx), free(m.cubin);
	return rc;
}

int main(int argc, char **argv)
{
	struct args a = {.threads = 1, .seconds = 3, .entries = 200};
	int opt;
	if (argc < 2 || (strcmp(argv[1], "trace") && strcmp(argv[1], "cache") &&
			 strcmp(argv[1], "procs"))) {
		fprintf(stderr, "usage: store_bench trace [-t THREADS] [-s SECONDS] [-l LEVEL] [-w WORKERS] [-o FILE]\n"
				"       store_bench cache [-n ENTRIES] [-o FILE]\n"
				"       store_bench procs [-t PROCESSES] [-n ENTRIES] [-o FILE]\n");
		return 2;
	}
	optind = 2;
	while ((opt = getopt(argc, argv, "t:s:l:w:n:o:")) != -1) {
		switch (opt) {
		case 't': a.threads = atoi(optarg); break;
		case 's': a.seconds = atof(optarg); break;
		case 'l': a.level = atoi(optarg); break;
		case 'w': a.workers = atoi(optarg); break;
		case 'n': a.entries = atoi(optarg); break;
		case 'o': a.out = optarg; break;
		default: return 2;
		}
	}
	if (a.threads < 1 || a.threads > 256 || a.seconds <= 0 || a.entries < 1) {
		fprintf(stderr, "store_bench: bad option value\n");
		return 2;
	}
	if (!strcmp(argv[1], "procs"))
		return bench_procs(&a);
	return !strcmp(argv[1], "trace") ? bench_trace(&a) : bench_cache(&a);
}
