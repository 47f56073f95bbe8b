/* Trace files: write/read round trips, files cut at random bytes, a writer killed with SIGKILL,
 * drops when the disk does not keep up, garbage input. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "store/store.h"
#include "tests/store/tests.h"

static struct store_trace_writer *create(const char *path, const struct store_trace_options *o)
{
	char err[STORE_ERRLEN];
	struct store_trace_process p = {.pid = 4242, .ppid = 4241, .driver_version = 13000,
					.cubpf_version = "test", .hostname = "host",
					.cmdline = "./app --flag"};
	struct store_trace_writer *w = store_trace_create(path, &p, o, err, sizeof(err));
	if (!w)
		fail_msg("store_trace_create: %s", err);
	return w;
}

static struct store_trace_reader *open_r(const char *path)
{
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	if (!r)
		fail_msg("store_trace_open(%s): %s", path, err);
	return r;
}

static struct store_rec_api api_event(uint32_t name, uint64_t seq)
{
	return (struct store_rec_api){.begin_ns = 1000 + seq * 10, .end_ns = 1005 + seq * 10,
				      .stream = seq % 3, .bytes = seq * 4, .corr = seq,
				      .name = name, .tid = 77, .result = 0, .device = 0};
}

static void test_roundtrip(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/t.cubpf", dir);
	struct store_trace_options o = {.batch_bytes = 8192};
	struct store_trace_writer *w = create(path, &o);

	struct store_rec_device dev = {.ordinal = 0, .sm = 90, .memory_bytes = 80ull << 30};
	assert_int_equal(store_trace_device(w, &dev, "NVIDIA H100"), 0);
	struct store_rec_clock clk = {.host_ns = 5000, .gpu_ns = 4000, .uncertainty_ns = 3};
	assert_int_equal(store_trace_clock(w, &clk), 0);
	struct store_rec_program prog = {.index = 0, .nmaps = 1};
	assert_int_equal(store_trace_program(w, &prog, "kernelretsnoop", "/p/k.bpf.o"), 0);
	uint32_t launch = store_trace_intern(w, "cuLaunchKernel");
	uint32_t kname = store_trace_intern(w, "_Z6vecAddPfS_S_i");
	assert_int_equal(store_trace_intern(w, "cuLaunchKernel"), launch);
	assert_int_not_equal(launch, kname);
	assert_true(launch > 0 && kname > 0);

	const unsigned n = 3000;
	for (unsigned i = 0; i < n; i++) {
		struct store_rec_api a = api_event(launch, i);
		assert_int_equal(store_trace_api(w, &a), 0);
		struct store_rec_kernel k = {.launch_ns = 1000 + i * 10, .gpu_start = 2000 + i * 10,
					     .gpu_end = 2008 + i * 10, .corr = i, .name = kname,
					     .grid = {4, 1, 1}, .block = {256, 1, 1}};
		assert_int_equal(store_trace_kernel(w, &k), 0);
		struct store_rec_kspan sp = {.corr = i + 1, .begin_ns = 3000 + i * 10,
					     .end_ns = 3007 + i * 10, .stream = i % 2, .name = kname,
					     .device = 0, .ref_uncertainty_ns = 900};
		if (i % 3 == 0) /* spans are optional: only some launches have one */
			assert_int_equal(store_trace_kspan(w, &sp), 0);
		struct store_rec_probe p = {.ts_ns = 2003 + i * 10, .prog = 0, .map = 0};
		uint64_t payload[3] = {i, i * 2, i * 3};
		assert_int_equal(store_trace_probe(w, &p, payload, sizeof(payload)), 0);
	}
	struct store_rec_map m = {.ts_ns = 9, .name = store_trace_intern(w, "hist"),
				  .map_type = 2, .key_size = 4, .value_size = 8, .count = 2};
	uint8_t kv[24] = {0};
	kv[0] = 1, kv[4] = 10, kv[12] = 2, kv[16] = 20;
	assert_int_equal(store_trace_map(w, &m, kv, sizeof(kv)), 0);
	struct store_trace_counters cnt;
	store_trace_counters(w, &cnt);
	assert_int_equal(cnt.records, 3 * n + (n + 2) / 3 + 1);
	assert_int_equal(cnt.dropped_records, 0);
	char err[STORE_ERRLEN] = "";
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);

	struct store_trace_reader *r = open_r(path);
	const struct store_rec_header *h = store_trace_header(r);
	assert_int_equal(h->pid, 4242);
	assert_int_equal(h->driver_version, 13000);
	assert_int_equal(h->major, 1);
	assert_int_equal(h->minor, 6);
	assert_string_equal(store_trace_header_string(r, 2), "./app --flag");
	assert_int_equal(store_trace_parent_pid(r), 4241);
	struct store_trace_record rec;
	unsigned count[STORE_REC_MAX_KNOWN + 1] = {0}, next_api = 0, next_span = 0;
	int rc;
	while ((rc = store_trace_next(r, &rec)) == 1) {
		assert_true(rec.type <= STORE_REC_MAX_KNOWN);
		count[rec.type]++;
		if (rec.type == STORE_REC_API) {
			struct store_rec_api a, want = api_event(launch, next_api++);
			assert_non_null(store_rec_fixed(&rec, &a, sizeof(a), NULL));
			assert_memory_equal(&a, &want, sizeof(a));
			assert_string_equal(store_trace_string(r, a.name), "cuLaunchKernel");
		} else if (rec.type == STORE_REC_PROBE) {
			struct store_rec_probe p;
			size_t rest;
			const uint8_t *d = store_rec_fixed(&rec, &p, sizeof(p), &rest);
			assert_int_equal(rest, 24);
			uint64_t v[3];
			memcpy(v, d, sizeof(v));
			assert_int_equal(v[2], v[0] * 3);
		} else if (rec.type == STORE_REC_KERNEL) {
			struct store_rec_kernel k;
			store_rec_fixed(&rec, &k, sizeof(k), NULL);
			assert_string_equal(store_trace_string(r, k.name), "_Z6vecAddPfS_S_i");
		} else if (rec.type == STORE_REC_KSPAN) {
			struct store_rec_kspan sp;
			assert_int_equal(rec.len, sizeof(sp));
			assert_non_null(store_rec_fixed(&rec, &sp, sizeof(sp), NULL));
			assert_int_equal(sp.corr, next_span * 3 + 1);
			assert_int_equal(sp.begin_ns, 3000 + next_span * 30);
			assert_int_equal(sp.end_ns - sp.begin_ns, 7);
			assert_int_equal(sp.stream, (next_span * 3) % 2);
			assert_int_equal(sp.ref_uncertainty_ns, 900);
			assert_string_equal(store_trace_string(r, sp.name), "_Z6vecAddPfS_S_i");
			assert_string_equal(store_rec_type_name(rec.type), "kspan");
			next_span++;
		} else if (rec.type == STORE_REC_PROGRAM) {
			struct store_rec_program p;
			size_t rest;
			const uint8_t *s = store_rec_fixed(&rec, &p, sizeof(p), &rest);
			char *name = store_rec_string(&s, &rest);
			assert_string_equal(name, "kernelretsnoop");
			free(name);
		}
	}
	assert_int_equal(rc, 0);
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	assert_int_equal(count[STORE_REC_API], n);
	assert_int_equal(count[STORE_REC_KERNEL], n);
	assert_int_equal(count[STORE_REC_PROBE], n);
	assert_int_equal(count[STORE_REC_KSPAN], (n + 2) / 3);
	assert_int_equal(count[STORE_REC_MAP], 1);
	assert_int_equal(count[STORE_REC_DEVICE], 1);
	assert_int_equal(count[STORE_REC_CLOCK], 1);
	assert_int_equal(count[STORE_REC_STRING], 3);
	assert_int_equal(count[STORE_REC_DROP], 0);
	assert_int_equal(count[STORE_REC_END], 1);
	uint64_t fb, raw, frames;
	store_trace_reader_sizes(r, &fb, &raw, &frames);
	assert_true(frames > 10); /* 8 KiB batches: many frames */
	assert_true(raw > fb);    /* compressed */
	store_trace_close_reader(r);
	rm_tree(dir);
	free(dir);
}

/* Format 1.2: kernel ids, kernels not instrumented with the reason, the maps' memory, and the
 * context number of MAP records come back as written, after the strings they name. */
static void test_roundtrip_run_metadata(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/m.cubpf", dir);
	struct store_trace_writer *w = create(path, NULL);
	struct store_rec_kernel_id kid = {.id = 3, .name = store_trace_intern(w, "_Z1kv"),
					  .module = store_trace_intern(w, "/lib/k.cubin")};
	assert_int_equal(store_trace_kernel_id(w, &kid), 0);
	struct store_rec_not_instrumented ni = {
		.ts_ns = 77, .reason = STORE_NOINST_NO_PTX, .kernels = 5, .sm = 90, .device = 1,
		.api = store_trace_intern(w, "cuModuleLoadData"), .label = 0};
	const char *msg = "live: cuModuleLoadData: 5 kernels not instrumentable: no PTX for sm_90 "
			  "in the image (1 cubins, SASS only)";
	assert_int_equal(store_trace_not_instrumented(w, &ni, msg), 0);
	struct store_rec_map_memory mm = {.ts_ns = 78, .context = 0xabc, .device_bytes = 4096,
					  .pinned_bytes = 65536, .device = 1, .nmaps = 2, .ctx = 2};
	assert_int_equal(store_trace_map_memory(w, &mm, 1234), 0);
	uint8_t hkv[12] = {7, 0, 0, 0, 3};
	struct store_rec_map hm = {.ts_ns = 80, .name = store_trace_intern(w, "calls"),
				   .map_type = 2, .key_size = 4, .value_size = 8, .count = 1};
	assert_int_equal(store_trace_host_map(w, &hm, hkv, sizeof(hkv)), 0);
	struct store_rec_ringbuf rb = {.ts_ns = 81, .taken = 9, .dropped = 2, .syncs = 3,
				       .name = store_trace_intern(w, "events"), .device = 1};
	assert_int_equal(store_trace_ringbuf(w, &rb), 0);
	struct store_rec_map m = {.ts_ns = 79, .name = store_trace_intern(w, "counts"),
				  .map_type = 2, .key_size = 4, .value_size = 8, .count = 0, .ctx = 2};
	assert_int_equal(store_trace_map(w, &m, NULL, 0), 0);
	char err[STORE_ERRLEN] = "";
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);

	struct store_trace_reader *r = open_r(path);
	struct store_trace_record rec;
	unsigned seen = 0;
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type == STORE_REC_KERNEL_ID) {
			struct store_rec_kernel_id k;
			assert_int_equal(rec.len, sizeof(k));
			assert_non_null(store_rec_fixed(&rec, &k, sizeof(k), NULL));
			assert_int_equal(k.id, 3);
			assert_string_equal(store_trace_string(r, k.name), "_Z1kv");
			assert_string_equal(store_trace_string(r, k.module), "/lib/k.cubin");
			assert_string_equal(store_rec_type_name(rec.type), "kernel_id");
			seen |= 1;
		} else if (rec.type == STORE_REC_NOT_INSTRUMENTED) {
			struct store_rec_not_instrumented n;
			size_t rest;
			const uint8_t *p = store_rec_fixed(&rec, &n, sizeof(n), &rest);
			assert_non_null(p);
			assert_memory_equal(&n, &ni, sizeof(n));
			char *s = store_rec_string(&p, &rest);
			assert_string_equal(s, msg);
			free(s);
			assert_int_equal(rest, 0);
			assert_string_equal(store_trace_string(r, n.api), "cuModuleLoadData");
			assert_string_equal(store_noinst_reason_name(n.reason), "no PTX");
			seen |= 2;
		} else if (rec.type == STORE_REC_MAP_MEMORY) {
			struct store_rec_map_memory g;
			uint64_t rbb;
			size_t rest;
			const uint8_t *p = store_rec_fixed(&rec, &g, sizeof(g), &rest);
			assert_non_null(p);
			assert_memory_equal(&g, &mm, sizeof(g));
			assert_int_equal(rest, sizeof(rbb)); /* 1.5: the bookkeeping bytes follow */
			memcpy(&rbb, p, sizeof(rbb));
			assert_int_equal(rbb, 1234);
			seen |= 4;
		} else if (rec.type == STORE_REC_HOST_MAP) {
			struct store_rec_map g;
			size_t rest;
			const uint8_t *p = store_rec_fixed(&rec, &g, sizeof(g), &rest);
			assert_non_null(p);
			assert_memory_equal(&g, &hm, sizeof(g));
			assert_int_equal(rest, sizeof(hkv));
			assert_memory_equal(p, hkv, sizeof(hkv));
			assert_string_equal(store_rec_type_name(rec.type), "host_map");
			seen |= 16;
		} else if (rec.type == STORE_REC_RINGBUF) {
			struct store_rec_ringbuf g;
			assert_int_equal(rec.len, sizeof(g));
			assert_non_null(store_rec_fixed(&rec, &g, sizeof(g), NULL));
			assert_memory_equal(&g, &rb, sizeof(g));
			assert_string_equal(store_trace_string(r, g.name), "events");
			seen |= 32;
		} else if (rec.type == STORE_REC_MAP) {
			struct store_rec_map g;
			assert_non_null(store_rec_fixed(&rec, &g, sizeof(g), NULL));
			assert_int_equal(g.ctx, 2);
			seen |= 8;
		}
	}
	assert_int_equal(seen, 63);
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	assert_string_equal(store_noinst_reason_name(STORE_NOINST_VERIFIER), "verifier");
	assert_string_equal(store_noinst_reason_name(STORE_NOINST_PROBE_OBJECT), "probe object");
	assert_string_equal(store_noinst_reason_name(99), "unknown");
	store_trace_close_reader(r);
	rm_tree(dir);
	free(dir);
}

/* Frame end offsets of a whole file, from zstd itself. */
static size_t frame_ends(const uint8_t *p, size_t n, size_t *ends, size_t max)
{
	size_t k = 0, pos = 0;
	while (pos < n && k < max) {
		size_t f = ZSTD_findFrameCompressedSize(p + pos, n - pos);
		assert_false(ZSTD_isError(f));
		pos += f;
		ends[k++] = pos;
	}
	assert_int_equal(pos, n);
	return k;
}

/* Records in a memory image: reading must never fail on a cut image. */
static unsigned count_records(const uint8_t *p, size_t n, enum store_trace_state *st)
{
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open_mem(p, n, err, sizeof(err));
	struct store_trace_record rec;
	unsigned k = 0;
	int rc;
	if (!r)
		return 0;
	while ((rc = store_trace_next(r, &rec)) == 1)
		k++;
	assert_int_equal(rc, 0);
	*st = store_trace_state(r);
	store_trace_close_reader(r);
	return k + 1; /* the header */
}

static void test_cut_anywhere(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/t.cubpf", dir);
	struct store_trace_options o = {.batch_bytes = 4096};
	struct store_trace_writer *w = create(path, &o);
	uint32_t name = store_trace_intern(w, "cuMemcpyHtoD_v2");
	for (unsigned i = 0; i < 5000; i++) {
		struct store_rec_api a = api_event(name, i);
		store_trace_api(w, &a);
	}
	assert_int_equal(store_trace_close(w, NULL, 0), 0);

	size_t n, ends[4096], records_upto[4096];
	uint8_t *img = slurp(path, &n);
	size_t nf = frame_ends(img, n, ends, 4096);
	assert_true(nf > 20);
	enum store_trace_state st;
	for (size_t f = 0; f < nf; f++) /* records in frames 0..f */
		records_upto[f] = count_records(img, ends[f], &st);
	assert_int_equal(records_upto[nf - 1], 5000 + 1 + 1 + 1); /* + header, string, end */
	assert_int_equal(st, STORE_TRACE_COMPLETE);

	unsigned seed = (unsigned)time(NULL);
	srand(seed);
	for (int t = 0; t < 200; t++) {
		size_t cut = ends[0] + (size_t)rand() % (n - ends[0]);
		size_t whole = 0;
		while (whole + 1 < nf && ends[whole + 1] <= cut)
			whole++;
		unsigned got = count_records(img, cut, &st);
		if (got != records_upto[whole])
			fail_msg("seed %u: cut at %zu of %zu: %u records, want %zu", seed, cut, n, got,
				 records_upto[whole]);
		assert_int_equal(st, cut == ends[whole] ? STORE_TRACE_NO_END : STORE_TRACE_CUT);
	}
	/* A cut inside the header frame: not a trace, with a message, no crash. */
	char err[STORE_ERRLEN];
	assert_null(store_trace_open_mem(img, ends[0] / 2, err, sizeof(err)));
	assert_non_null(strstr(err, "not a cubpf trace"));
	free(img);
	rm_tree(dir);
	free(dir);
}

/* A trace read while it grows (store_trace_open_follow, store_trace_refresh): the file gets
 * the bytes of a finished trace in random steps, cut anywhere (inside a frame, inside a frame's
 * magic), and the reader, refreshed after each, hands out every record exactly once and in
 * order, and has consumed exactly the whole frames there are: a frame cut short is left for the
 * next refresh, never decoded twice. */
static void test_follow_growing_file(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], grow[4200], err[STORE_ERRLEN];
	snprintf(path, sizeof(path), "%s/t.cubpf", dir);
	snprintf(grow, sizeof(grow), "%s/grow.cubpf", dir);
	struct store_trace_options o = {.batch_bytes = 4096};
	struct store_trace_writer *w = create(path, &o);
	uint32_t name = store_trace_intern(w, "cuMemcpyHtoD_v2");
	for (unsigned i = 0; i < 5000; i++) {
		struct store_rec_api a = api_event(name, i);
		store_trace_api(w, &a);
	}
	assert_int_equal(store_trace_close(w, NULL, 0), 0);
	size_t n, ends[4096];
	uint8_t *img = slurp(path, &n);
	size_t nf = frame_ends(img, n, ends, 4096);
	assert_true(nf > 20);

	spit(grow, img, ends[0]); /* the header frame: what a writer writes at once */
	struct store_trace_reader *r = store_trace_open_follow(grow, err, sizeof(err));
	if (!r)
		fail_msg("%s", err);
	unsigned seed = (unsigned)time(NULL);
	srand(seed);
	uint64_t next_corr = 0, file_bytes;
	int end_seen = 0;
	for (size_t have = ends[0]; have < n;) {
		size_t step = 1 + (size_t)rand() % 3000, upto = have + step < n ? have + step : n;
		int fd = open(grow, O_WRONLY | O_APPEND);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, img + have, upto - have), (ssize_t)(upto - have));
		close(fd);
		have = upto;
		assert_int_equal(store_trace_refresh(r, err, sizeof(err)), 1);
		struct store_trace_record rec;
		int rc;
		while ((rc = store_trace_next(r, &rec)) == 1) {
			struct store_rec_api a;
			if (rec.type == STORE_REC_END) {
				end_seen = 1;
				continue;
			}
			if (rec.type != STORE_REC_API)
				continue;
			assert_non_null(store_rec_fixed(&rec, &a, sizeof(a), NULL));
			if (a.corr != next_corr)
				fail_msg("seed %u: at %zu of %zu bytes: record corr %llu, want %llu",
					 seed, have, n, (unsigned long long)a.corr,
					 (unsigned long long)next_corr);
			assert_string_equal(store_trace_string(r, a.name), "cuMemcpyHtoD_v2");
			next_corr++;
		}
		assert_int_equal(rc, 0);
		size_t whole = 0;
		while (whole + 1 < nf && ends[whole + 1] <= have)
			whole++;
		store_trace_reader_sizes(r, &file_bytes, NULL, NULL);
		if (file_bytes != ends[whole])
			fail_msg("seed %u: %zu bytes there, whole frames end at %zu, consumed %llu", seed,
				 have, ends[whole], (unsigned long long)file_bytes);
		assert_int_equal(store_trace_state(r), have == n ? STORE_TRACE_COMPLETE
					: have == ends[whole] ? STORE_TRACE_NO_END : STORE_TRACE_CUT);
	}
	assert_int_equal(next_corr, 5000);
	assert_true(end_seen);
	/* complete: nothing more to read, whatever the file does */
	assert_int_equal(store_trace_refresh(r, err, sizeof(err)), 0);
	store_trace_close_reader(r);
	/* a reader not opened to follow, or an image in memory, never refreshes */
	r = open_r(path);
	assert_int_equal(store_trace_refresh(r, err, sizeof(err)), 0);
	store_trace_close_reader(r);
	free(img);
	rm_tree(dir);
	free(dir);
}

static void test_sigkill(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	int ready[2];
	snprintf(path, sizeof(path), "%s/killed.cubpf", dir);
	assert_int_equal(pipe(ready), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(60);
		struct store_trace_writer *w = create(path, NULL); /* default 100 ms flush */
		uint32_t name = store_trace_intern(w, "cuStreamSynchronize");
		for (uint64_t i = 0;; i++) {
			struct store_rec_api a = api_event(name, i);
			store_trace_api(w, &a);
			if (i == 999 && write(ready[1], "x", 1) != 1)
				_exit(3);
			if (i >= 1000)
				usleep(100);
		}
	}
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	usleep(400 * 1000); /* > 3 flush periods after the first 1000 events */
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	assert_true(WIFSIGNALED(st));

	struct store_trace_reader *r = open_r(path);
	struct store_trace_record rec;
	uint64_t next = 0;
	int rc;
	while ((rc = store_trace_next(r, &rec)) == 1) {
		if (rec.type != STORE_REC_API)
			continue;
		struct store_rec_api a;
		store_rec_fixed(&rec, &a, sizeof(a), NULL);
		assert_int_equal(a.corr, next); /* in order, none missing */
		next++;
	}
	assert_int_equal(rc, 0);
	assert_true(next >= 1000);
	assert_true(store_trace_state(r) == STORE_TRACE_CUT || store_trace_state(r) == STORE_TRACE_NO_END);
	store_trace_close_reader(r);
	close(ready[0]);
	close(ready[1]);
	rm_tree(dir);
	free(dir);
}

struct drain {
	int fd;
	const char *out;
};

static void *drain_main(void *arg)
{
	struct drain *d = arg;
	FILE *f = fopen(d->out, "wb");
	char buf[65536];
	ssize_t k;
	int fl = fcntl(d->fd, F_GETFL);
	fcntl(d->fd, F_SETFL, fl & ~O_NONBLOCK);
	while ((k = read(d->fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)k, f);
	fclose(f);
	return NULL;
}

/* A writer into a FIFO that nobody reads yet, with a 64 KiB budget: a disk that does not keep
 * up.  *rfd is the FIFO's read end for drain_main, which copies it to `out` (dir/drained.cubpf). */
static struct store_trace_writer *stalled_writer(const char *dir, int *rfd, char *out, size_t len)
{
	char fifo[4200];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(out, len, "%s/drained.cubpf", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	*rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(*rfd >= 0);
	struct store_trace_options o = {.buffer_bytes = 64 << 10, .batch_bytes = 8 << 10, .level = 3};
	return create(fifo, &o);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A FIFO nobody reads stands for a disk that does not keep up: appends must not block, and the
 * losses must be counted in the file. */
static void test_drops_never_block(void **state)
{
	(void)state;
	char *dir = temp_dir(), out[4200];
	int rfd;
	struct store_trace_writer *w = stalled_writer(dir, &rfd, out, sizeof(out));
	uint32_t name = store_trace_intern(w, "cuLaunchKernel");
	uint64_t worst = 0;
	unsigned dropped_calls = 0;
	for (uint64_t i = 0; i < 200000; i++) {
		struct store_rec_probe p = {.ts_ns = i, .prog = 1};
		uint64_t data[4];
		for (int j = 0; j < 4; j++)
			data[j] = i * 0x9E3779B97F4A7C15ull + (uint64_t)j; /* compresses poorly */
		uint64_t t0 = now_ns();
		dropped_calls += (unsigned)store_trace_probe(w, &p, data, sizeof(data));
		uint64_t dt = now_ns() - t0;
		worst = dt > worst ? dt : worst;
	}
	(void)name;
	struct store_trace_counters cnt;
	store_trace_counters(w, &cnt);
	assert_true(dropped_calls > 0);
	assert_true(cnt.dropped_batches > 0);
	assert_true(cnt.dropped_records > 0);
	assert_true(worst < 50 * 1000000ull); /* never waited for the blocked writer */
	print_message("drops: %llu batches, %llu records; slowest append %llu ns\n",
		      (unsigned long long)cnt.dropped_batches, (unsigned long long)cnt.dropped_records,
		      (unsigned long long)worst);

	pthread_t th;
	struct drain d = {rfd, out};
	assert_int_equal(pthread_create(&th, NULL, drain_main, &d), 0);
	assert_int_equal(store_trace_close(w, NULL, 0), 0);
	pthread_join(th, NULL);
	close(rfd);

	struct store_trace_reader *r = open_r(out);
	struct store_trace_record rec;
	uint64_t probes = 0, drop_records = 0, drop_batches = 0;
	struct store_rec_end end = {0};
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type == STORE_REC_PROBE)
			probes++;
		if (rec.type == STORE_REC_DROP) {
			struct store_rec_drop dr;
			store_rec_fixed(&rec, &dr, sizeof(dr), NULL);
			assert_int_equal(dr.source, STORE_DROP_WRITER);
			drop_records += dr.records;
			drop_batches += dr.batches;
		}
		if (rec.type == STORE_REC_END)
			store_rec_fixed(&rec, &end, sizeof(end), NULL);
	}
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	assert_int_equal(drop_batches, cnt.dropped_batches);
	assert_int_equal(drop_records, cnt.dropped_records);
	assert_int_equal(probes + drop_records, 200000);
	assert_int_equal(end.dropped_records, cnt.dropped_records);
	store_trace_close_reader(r);
	rm_tree(dir);
	free(dir);
}

/* store_trace_probes writes exactly what as many store_trace_probe calls would: one PROBE record
 * per sample, in order, each with the shared fixed part and its own payload. */
static void test_probes_batch_roundtrip(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/batch.cubpf", dir);
	struct store_trace_writer *w = create(path, NULL);
	uint8_t buf[64 * 1000];
	struct store_probe_data d[100];
	uint32_t total = 0;
	for (uint32_t run = 0; run < 10; run++) {
		struct store_rec_probe p = {.ts_ns = 1000 + run, .prog = 3, .map = run % 2,
					    .device = 1, .flags = 0};
		for (uint32_t i = 0; i < 100; i++, total++) {
			uint8_t *x = buf + 64 * total;
			d[i].len = 1 + total % 64;
			for (uint32_t j = 0; j < d[i].len; j++)
				x[j] = (uint8_t)(total * 7 + j);
			d[i].data = x;
		}
		assert_int_equal(store_trace_probes(w, &p, d, 100), 0);
	}
	assert_int_equal(store_trace_probes(w, &(struct store_rec_probe){0}, d, 0), 0);
	assert_int_equal(store_trace_close(w, NULL, 0), 0);

	struct store_trace_reader *r = open_r(path);
	struct store_trace_record rec;
	uint32_t seen = 0;
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type != STORE_REC_PROBE)
			continue;
		struct store_rec_probe p;
		size_t rest = 0;
		const uint8_t *x = store_rec_fixed(&rec, &p, sizeof(p), &rest);
		assert_non_null(x);
		assert_int_equal(p.ts_ns, 1000 + seen / 100);
		assert_int_equal(p.prog, 3);
		assert_int_equal(p.map, (seen / 100) % 2);
		assert_int_equal(p.device, 1);
		assert_int_equal(rest, 1 + seen % 64);
		assert_memory_equal(x, buf + 64 * seen, rest);
		seen++;
	}
	assert_int_equal(seen, total);
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	store_trace_close_reader(r);
	rm_tree(dir);
	free(dir);
}

/* Format 1.2's PROBES records, made by hand: samples come out as PROBE records; a record whose
 * count or lengths do not match its bytes is damage (reading stops), never a read past it. */
static size_t put_rec(uint8_t *buf, size_t at, uint16_t type, const void *p, size_t n)
{
	struct store_rec_hdr h = {type, 0, (uint32_t)n};
	memcpy(buf + at, &h, sizeof(h));
	memcpy(buf + at + sizeof(h), p, n);
	return at + sizeof(h) + n;
}

static size_t probes_payload(uint8_t *p, uint32_t count, uint32_t samples, uint32_t bad_len)
{
	struct store_rec_probe pr = {.ts_ns = 77, .prog = 1, .map = 2, .device = 3};
	size_t n = 0;
	memcpy(p, &pr, sizeof(pr));
	n += sizeof(pr);
	memcpy(p + n, &count, 4);
	n += 4;
	for (uint32_t i = 0; i < samples; i++) {
		uint32_t len = i == samples - 1 && bad_len ? bad_len : 8 + i;
		memcpy(p + n, &len, 4);
		n += 4;
		for (uint32_t j = 0; j < 8 + i; j++)
			p[n + j] = (uint8_t)(i + j);
		n += 8 + i;
	}
	return n;
}

static int read_probes_image(uint32_t count, uint32_t samples, uint32_t bad_len, uint32_t *got)
{
	static uint8_t raw[4096], payload[2048], z[8192];
	struct store_rec_header h = {.major = STORE_TRACE_MAJOR, .minor = STORE_TRACE_MINOR};
	uint8_t hp[sizeof(h) + 12] = {0};
	memcpy(h.magic, STORE_TRACE_MAGIC, 8);
	memcpy(hp, &h, sizeof(h));
	size_t n = put_rec(raw, 0, STORE_REC_HEADER, hp, sizeof(hp));
	n = put_rec(raw, n, STORE_REC_PROBES, payload, probes_payload(payload, count, samples, bad_len));
	n = put_rec(raw, n, STORE_REC_END, &(struct store_rec_end){0}, sizeof(struct store_rec_end));
	size_t zn = ZSTD_compress(z, sizeof(z), raw, n, 1);
	assert_false(ZSTD_isError(zn));
	char err[STORE_ERRLEN];
	struct store_trace_reader *r = store_trace_open_mem(z, zn, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	int rc;
	*got = 0;
	while ((rc = store_trace_next(r, &rec)) == 1) {
		if (rec.type == STORE_REC_END)
			continue;
		assert_int_equal(rec.type, STORE_REC_PROBE);
		struct store_rec_probe pr;
		size_t rest = 0;
		const uint8_t *x = store_rec_fixed(&rec, &pr, sizeof(pr), &rest);
		assert_non_null(x);
		assert_int_equal(pr.ts_ns, 77);
		assert_int_equal(pr.map, 2);
		assert_int_equal(rest, 8 + *got);
		for (uint32_t j = 0; j < rest; j++)
			assert_int_equal(x[j], (uint8_t)(*got + j));
		(*got)++;
	}
	if (rc < 0)
		assert_int_equal(store_trace_next(r, &rec), -1); /* and it stays stopped */
	int state = rc < 0 ? -1 : (int)store_trace_state(r);
	store_trace_close_reader(r);
	return state;
}

static void test_probes_records_read_and_damage(void **state)
{
	(void)state;
	uint32_t got;
	assert_int_equal(read_probes_image(5, 5, 0, &got), STORE_TRACE_COMPLETE);
	assert_int_equal(got, 5);
	assert_int_equal(read_probes_image(0, 0, 0, &got), STORE_TRACE_COMPLETE);
	assert_int_equal(got, 0);
	assert_int_equal(read_probes_image(6, 5, 0, &got), -1);     /* a sample short */
	assert_int_equal(got, 5);
	assert_int_equal(read_probes_image(4, 5, 0, &got), -1);     /* bytes left over */
	assert_int_equal(got, 4);
	assert_int_equal(read_probes_image(5, 5, 1000, &got), -1);  /* a length past the end */
	assert_int_equal(got, 4);
	assert_int_equal(read_probes_image(1000, 5, 0, &got), -1);  /* count beyond the bytes */
	assert_int_equal(got, 0);
}

/* A writer that cannot keep up drops whole batches under store_trace_probes too, never blocks,
 * and every sample is either in the file or counted in its DROP records. */
static void test_probes_batch_drops_counted(void **state)
{
	(void)state;
	char *dir = temp_dir(), out[4200];
	int rfd;
	struct store_trace_writer *w = stalled_writer(dir, &rfd, out, sizeof(out));
	uint64_t data[64][6];
	struct store_probe_data d[64];
	unsigned dropped_calls = 0;
	for (uint64_t run = 0; run < 3000; run++) {
		for (int i = 0; i < 64; i++) {
			for (int j = 0; j < 6; j++)
				data[i][j] = (run * 64 + (uint64_t)i) * 0x9E3779B97F4A7C15ull + (uint64_t)j;
			d[i] = (struct store_probe_data){data[i], sizeof(data[i])};
		}
		struct store_rec_probe p = {.ts_ns = run, .prog = 1};
		dropped_calls += (unsigned)store_trace_probes(w, &p, d, 64);
	}
	struct store_trace_counters cnt;
	store_trace_counters(w, &cnt);
	assert_true(dropped_calls > 0);
	assert_true(cnt.dropped_records > 0);
	assert_int_equal(cnt.records, 3000 * 64);

	pthread_t th;
	struct drain dr = {rfd, out};
	assert_int_equal(pthread_create(&th, NULL, drain_main, &dr), 0);
	assert_int_equal(store_trace_close(w, NULL, 0), 0);
	pthread_join(th, NULL);
	close(rfd);

	struct store_trace_reader *r = open_r(out);
	struct store_trace_record rec;
	uint64_t probes = 0, drop_records = 0;
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type == STORE_REC_PROBE)
			probes++;
		if (rec.type == STORE_REC_DROP) {
			struct store_rec_drop x;
			store_rec_fixed(&rec, &x, sizeof(x), NULL);
			drop_records += x.records;
		}
	}
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	assert_int_equal(drop_records, cnt.dropped_records);
	assert_int_equal(probes + drop_records, 3000 * 64);
	store_trace_close_reader(r);
	rm_tree(dir);
	free(dir);
}

/* Batches of a thread's own (the ring buffer drain's way): 4 threads append samples through
 * store_trace_local while the main thread appends API records through the writer's lock.
 * With room, every sample and record arrives, intact; with a writer that cannot drain (a FIFO
 * nobody reads), whole batches are dropped and counted, and never block an appender. */
struct local_appender {
	struct store_trace_writer *w;
	uint64_t id, runs;
};

static void *local_main(void *p)
{
	struct local_appender *a = p;
	struct store_trace_local *l = store_trace_local_new(a->w);
	uint64_t data[32][6];
	struct store_probe_data d[32];
	assert_non_null(l);
	for (uint64_t run = 0; run < a->runs; run++) {
		for (int i = 0; i < 32; i++) {
			uint64_t v = (a->id << 40) | (run * 32 + (uint64_t)i);
			for (int j = 0; j < 6; j++)
				data[i][j] = v ^ (0x9E3779B97F4A7C15ull * (uint64_t)j);
			d[i] = (struct store_probe_data){data[i], sizeof(data[i])};
		}
		struct store_rec_probe pr = {.ts_ns = run + 1, .prog = (uint32_t)a->id};
		store_trace_probes_local(l, &pr, d, 32);
		if (run % 97 == 0)
			store_trace_local_flush(l); /* what an idle drain does */
	}
	store_trace_local_free(l);
	return NULL;
}

/* Runs the 4 local appenders and the main thread's API records; returns the samples read
 * back intact (*bad: damaged ones), adds the DROP records' samples to *dropped. */
static uint64_t local_round(struct store_trace_writer *w, const char *readback, uint64_t runs,
			    uint64_t *api, uint64_t *dropped, uint64_t *bad, int fifo_fd)
{
	struct local_appender a[4];
	pthread_t t[4];
	for (uint64_t i = 0; i < 4; i++) {
		a[i] = (struct local_appender){w, i + 1, runs};
		assert_int_equal(pthread_create(&t[i], NULL, local_main, &a[i]), 0);
	}
	for (uint64_t i = 0; i < 2000; i++) {
		struct store_rec_api e = api_event(1, i);
		store_trace_api(w, &e);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	pthread_t th;
	struct drain dr = {fifo_fd, readback};
	if (fifo_fd >= 0)
		assert_int_equal(pthread_create(&th, NULL, drain_main, &dr), 0);
	assert_int_equal(store_trace_close(w, NULL, 0), 0);
	if (fifo_fd >= 0)
		pthread_join(th, NULL);
	struct store_trace_reader *r = open_r(readback);
	struct store_trace_record rec;
	uint64_t probes = 0;
	*api = *dropped = *bad = 0;
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type == STORE_REC_API)
			++*api;
		if (rec.type == STORE_REC_DROP) {
			struct store_rec_drop x;
			store_rec_fixed(&rec, &x, sizeof(x), NULL);
			*dropped += x.records;
		}
		if (rec.type != STORE_REC_PROBE)
			continue;
		struct store_rec_probe pr;
		size_t rest = 0;
		const uint8_t *x = store_rec_fixed(&rec, &pr, sizeof(pr), &rest);
		uint64_t v[6];
		if (!x || rest != sizeof(v)) {
			++*bad;
			continue;
		}
		memcpy(v, x, sizeof(v));
		*bad += v[0] >> 40 != pr.prog || v[5] != (v[0] ^ (0x9E3779B97F4A7C15ull * 5));
		probes++;
	}
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	store_trace_close_reader(r);
	return probes;
}

static void test_local_batches(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], out[4200];
	uint64_t api, dropped, bad;
	snprintf(path, sizeof(path), "%s/local.cubpf", dir);
	struct store_trace_writer *w = create(path, NULL);
	assert_int_equal(local_round(w, path, 500, &api, &dropped, &bad, -1), 4 * 500 * 32);
	assert_int_equal(api, 2000);
	assert_int_equal(dropped, 0);
	assert_int_equal(bad, 0);

	int rfd;
	w = stalled_writer(dir, &rfd, out, sizeof(out));
	uint64_t probes = local_round(w, out, 3000, &api, &dropped, &bad, rfd);
	close(rfd);
	assert_true(dropped > 0);
	assert_int_equal(bad, 0);
	assert_int_equal(probes + dropped, 4 * 3000 * 32 + 2000 - api);
	rm_tree(dir);
	free(dir);
}

/* fork() while other threads append: the child must neither block nor write into the parent's
 * file; the parent's trace stays whole. */
static void *busy_appender(void *p)
{
	struct store_trace_writer *w = p;
	for (uint64_t i = 0; i < 20000; i++) {
		struct store_rec_api a = api_event(1, i);
		store_trace_api(w, &a);
	}
	return NULL;
}

static void test_fork(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	snprintf(path, sizeof(path), "%s/parent.cubpf", dir);
	struct store_trace_writer *w = create(path, NULL);
	uint32_t name = store_trace_intern(w, "cuMemAlloc_v2");
	assert_int_equal(name, 1);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, busy_appender, w), 0);
	store_trace_fork_prepare(w);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(20); /* alarms do not survive fork: the child needs its own */
		store_trace_fork_child(w);
		for (uint64_t i = 0; i < 1000; i++) {
			struct store_rec_api a = api_event(name, 1u << 30);
			if (store_trace_api(w, &a) != 1)
				_exit(4); /* must be counted as dropped */
		}
		_exit(store_trace_close(w, NULL, 0) == 0 ? 0 : 5);
	}
	store_trace_fork_parent(w);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	pthread_join(th, NULL);
	assert_int_equal(store_trace_close(w, NULL, 0), 0);

	struct store_trace_reader *r = open_r(path);
	struct store_trace_record rec;
	uint64_t apis = 0;
	while (store_trace_next(r, &rec) == 1)
		if (rec.type == STORE_REC_API) {
			struct store_rec_api a;
			store_rec_fixed(&rec, &a, sizeof(a), NULL);
			assert_true(a.corr < 20000); /* nothing from the child */
			apis++;
		}
	assert_int_equal(apis, 20000);
	assert_int_equal(store_trace_state(r), STORE_TRACE_COMPLETE);
	store_trace_close_reader(r);
	rm_tree(dir);
	free(dir);
}

static void test_not_a_trace(void **state)
{
	(void)state;
	char err[STORE_ERRLEN];
	uint8_t junk[1000];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 7);
	assert_null(store_trace_open_mem(junk, sizeof(junk), err, sizeof(err)));
	assert_non_null(strstr(err, "not a cubpf trace"));
	/* A valid zstd frame that holds something else. */
	uint8_t z[256];
	size_t zn = ZSTD_compress(z, sizeof(z), "hello world, not records", 24, 1);
	assert_false(ZSTD_isError(zn));
	assert_null(store_trace_open_mem(z, zn, err, sizeof(err)));
	assert_null(store_trace_open("/nonexistent/trace", err, sizeof(err)));
	assert_non_null(strstr(err, "cannot open"));
}

/* A trace image: the header frame, then each of frames[] compressed as one frame. */
static size_t trace_image(uint8_t *out, size_t cap, const uint8_t *const *frames,
			  const size_t *sizes, size_t nframes)
{
	struct store_rec_header h = {.major = STORE_TRACE_MAJOR, .minor = STORE_TRACE_MINOR};
	uint8_t hp[sizeof(h) + 12] = {0}, raw[128];
	memcpy(h.magic, STORE_TRACE_MAGIC, 8);
	memcpy(hp, &h, sizeof(h));
	size_t n = put_rec(raw, 0, STORE_REC_HEADER, hp, sizeof(hp));
	size_t at = ZSTD_compress(out, cap, raw, n, 1);
	assert_false(ZSTD_isError(at));
	for (size_t i = 0; i < nframes; i++) {
		size_t z = ZSTD_compress(out + at, cap - at, frames[i], sizes[i], 1);
		assert_false(ZSTD_isError(z));
		at += z;
	}
	return at;
}

/* Reads every record of an image; returns the state (-1 when damaged, message in err). */
static int read_image(const uint8_t *img, size_t n, uint64_t *records, char *err, size_t errlen)
{
	struct store_trace_reader *r = store_trace_open_mem(img, n, err, errlen);
	assert_non_null(r);
	struct store_trace_record rec;
	int rc;
	*records = 0;
	while ((rc = store_trace_next(r, &rec)) == 1)
		(*records)++;
	snprintf(err, errlen, "%s", store_trace_reader_error(r));
	int state = rc < 0 ? -1 : (int)store_trace_state(r);
	store_trace_close_reader(r);
	return state;
}

static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__) /* gcc; the tests are not built with clang's ASan */
	return 0; /* ASan's allocator: mallinfo2 does not see it */
#else
	return mallinfo2().uordblks;
#endif
}

/* String ids anywhere in u32: the table follows the STRING records read (2000 ids near 2^32
 * cost a few hundred KiB, not 32 GiB), every id reads back, an undefined one is NULL. */
static void test_reader_huge_string_ids(void **state)
{
	(void)state;
	enum { N = 2000 };
	static uint8_t raw[N * 24 + 64], img[1 << 20];
	size_t n = 0;
	for (uint32_t i = 0; i < N; i++) {
		uint8_t p[16];
		uint32_t id = 0xFFFFFFFFu - 2 * i;
		memcpy(p, &id, 4);
		snprintf((char *)p + 4, 12, "s%07u", i);
		n = put_rec(raw, n, STORE_REC_STRING, p, 12);
	}
	const uint8_t *frames[] = {raw};
	size_t len = trace_image(img, sizeof(img), frames, &n, 1);
	char err[STORE_ERRLEN];
	size_t before = heap_in_use();
	struct store_trace_reader *r = store_trace_open_mem(img, len, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	uint64_t got = 0;
	while (store_trace_next(r, &rec) == 1)
		got++;
	assert_int_equal(store_trace_state(r), STORE_TRACE_NO_END);
	assert_int_equal(got, N);
	if (before)
		assert_true(heap_in_use() - before < (4u << 20));
	assert_string_equal(store_trace_string(r, 0xFFFFFFFFu), "s0000000");
	assert_string_equal(store_trace_string(r, 0xFFFFFFFFu - 2 * (N - 1)), "s0001999");
	assert_null(store_trace_string(r, 0xFFFFFFFEu));
	assert_null(store_trace_string(r, 0));
	store_trace_close_reader(r);
}

/* A frame whose header declares far more decoded bytes than its blocks can hold: refused
 * before anything is allocated, with the frame's index and file offset. */
static void test_reader_frame_declares_too_much(void **state)
{
	(void)state;
	static uint8_t img[4096];
	size_t len = trace_image(img, sizeof(img), NULL, NULL, 0);
	size_t header_end = len;
	/* magic, descriptor (4-byte content size, single segment), 64 MiB, one raw last block of
	 * 8 bytes (RFC 8878) */
	const uint8_t frame[] = {0x28, 0xB5, 0x2F, 0xFD, 0xA0, 0x00, 0x00, 0x00, 0x04,
				 0x41, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8};
	memcpy(img + len, frame, sizeof(frame));
	len += sizeof(frame);
	char err[STORE_ERRLEN], want[128];
	uint64_t records;
	assert_int_equal(read_image(img, len, &records, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "frame 1 at file offset %zu: zstd frame declares 67108864 "
		 "decoded bytes, its 20 bytes hold at most", header_end);
	if (!strstr(err, want))
		fail_msg("message '%s' lacks '%s'", err, want);
}

/* Damage inside a frame: the message names the record (index, type), where it starts in the
 * frame, and the frame's index and file offset. */
static void test_reader_errors_say_where(void **state)
{
	(void)state;
	static uint8_t raw[512], img[4096];
	uint8_t str[12] = {7, 0, 0, 0, 'k', 'e', 'r', 'n', 'e', 'l', '_', 'a'};
	struct store_rec_api a = {.name = 7};
	size_t n = put_rec(raw, 0, STORE_REC_STRING, str, sizeof(str));
	n = put_rec(raw, n, STORE_REC_API, &a, sizeof(a));
	size_t bad_at = n;
	n = put_rec(raw, n, STORE_REC_API, &a, sizeof(a));
	struct store_rec_hdr h = {STORE_REC_API, 0, 1000}; /* the last record claims 1000 bytes */
	memcpy(raw + bad_at, &h, sizeof(h));
	const uint8_t *frames[] = {raw, raw};
	size_t sizes[] = {bad_at, n}; /* frame 1 is whole, frame 2 is damaged */
	size_t frame2 = trace_image(img, sizeof(img), frames, sizes, 1); /* where frame 2 starts */
	size_t len = trace_image(img, sizeof(img), frames, sizes, 2);
	char err[STORE_ERRLEN], want[160];
	uint64_t records;
	assert_int_equal(read_image(img, len, &records, err, sizeof(err)), -1);
	assert_int_equal(records, 4); /* frame 1's two and frame 2's two before the bad one */
	snprintf(want, sizeof(want), "record 5 (api) at byte %zu of frame 2 (file offset %zu): "
		 "declares 1000 payload bytes, its frame holds %zu more", bad_at, frame2,
		 sizeof(a));
	if (!strstr(err, want))
		fail_msg("message '%s' lacks '%s'", err, want);
}

const struct CMUnitTest trace_tests[] = {
	cmocka_unit_test(test_roundtrip),
	cmocka_unit_test(test_roundtrip_run_metadata),
	cmocka_unit_test(test_cut_anywhere),
	cmocka_unit_test(test_follow_growing_file),
	cmocka_unit_test(test_sigkill),
	cmocka_unit_test(test_drops_never_block),
	cmocka_unit_test(test_probes_batch_roundtrip),
	cmocka_unit_test(test_probes_records_read_and_damage),
	cmocka_unit_test(test_probes_batch_drops_counted),
	cmocka_unit_test(test_local_batches),
	cmocka_unit_test(test_fork),
	cmocka_unit_test(test_not_a_trace),
	cmocka_unit_test(test_reader_huge_string_ids),
	cmocka_unit_test(test_reader_frame_declares_too_much),
	cmocka_unit_test(test_reader_errors_say_where),
};
const size_t n_trace_tests = sizeof(trace_tests) / sizeof(trace_tests[0]);
