/* cubin_bench FILE [ROUNDS]: the cost of reading a file's fatbins with cubin/, against a bare
 * decompression loop over the same payloads, in the same run.
 *
 *   bare:  ZSTD_decompressDCtx / LZ4_decompress_safe over every compressed payload, into one
 *          reused buffer, with the offsets and sizes taken beforehand (the floor: pure
 *          decompression, no parsing, no allocation).
 *   cubin: cubin_image_open() on the mapped file (every ELF section, fatbin and entry header
 *          parsed and checked) and cubin_entry_data() + cubin_entry_release() on every entry.
 *
 * Rates are uncompressed bytes of compressed payloads per second; each side runs ROUNDS times
 * (default 3, interleaved) and the best round counts.  The outputs of both sides are hashed
 * and compared, so that the two loops are known to do the same work.  Exit status 1 when the
 * ratio is below CUBIN_BENCH_TARGET (default 0.80) or on any error. */
#include <fcntl.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "cubin/cubin.h"

struct job {
	const uint8_t *src;
	size_t csize, usize;
	enum cubin_compression comp;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The payload list, taken once from a first open (its cost is not part of the bare loop). */
static size_t collect_jobs(struct cubin_image *img, struct job **jobs, size_t *max_usize,
			   uint64_t *total)
{
	size_t n = 0;
	*jobs = calloc(img->entry_count ? img->entry_count : 1, sizeof(**jobs));
	*max_usize = 1;
	*total = 0;
	for (size_t i = 0; i < img->entry_count; i++) {
		const struct cubin_entry *e = &img->entries[i];
		const uint8_t *d;
		size_t sz;
		if (e->compression == CUBIN_RAW)
			continue;
		/* cubin_entry_data trims zstd padding off compressed_size: use its view. */
		if (cubin_entry_data(img, i, &d, &sz))
			continue;
		cubin_entry_release(img, i);
		(*jobs)[n++] = (struct job){e->payload, e->compressed_size, e->size, e->compression};
		*max_usize = e->size > *max_usize ? e->size : *max_usize;
		*total += e->size;
	}
	return n;
}

static double bare_round(const struct job *jobs, size_t n, uint8_t *buf, size_t cap,
			 ZSTD_DCtx *dctx, uint64_t *hash)
{
	double t0 = now();
	uint64_t h = 0;
	for (size_t i = 0; i < n; i++) {
		size_t got = jobs[i].comp == CUBIN_ZSTD
				     ? ZSTD_decompressDCtx(dctx, buf, cap, jobs[i].src, jobs[i].csize)
				     : (size_t)LZ4_decompress_safe((const char *)jobs[i].src, (char *)buf,
								  (int)jobs[i].csize, (int)cap);
		if (hash)
			h ^= XXH3_64bits(buf, got) + i;
	}
	if (hash)
		*hash = h;
	return now() - t0;
}

static double cubin_round(const uint8_t *map, size_t size, uint64_t *hash, int *failed)
{
	double t0 = now();
	struct cubin_image *img;
	char err[256];
	uint64_t h = 0;
	size_t k = 0;
	if (cubin_image_open(&img, map, size, 0, err, sizeof(err))) {
		fprintf(stderr, "cubin_bench: %s\n", err);
		*failed = 1;
		return 0;
	}
	for (size_t i = 0; i < img->entry_count; i++) {
		const uint8_t *d;
		size_t sz;
		if (cubin_entry_data(img, i, &d, &sz)) {
			fprintf(stderr, "cubin_bench: %s\n", img->error);
			*failed = 1;
			break;
		}
		if (hash && img->entries[i].compression != CUBIN_RAW)
			h ^= XXH3_64bits(d, sz) + k++;
		cubin_entry_release(img, i);
	}
	cubin_image_free(img);
	if (hash)
		*hash = h;
	return now() - t0;
}

static const uint8_t *map_file(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || st.st_size == 0) {
		fprintf(stderr, "cubin_bench: cannot read %s\n", path);
		exit(1);
	}
	*size = (size_t)st.st_size;
	void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, "cubin_bench: cannot map %s\n", path);
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: cubin_bench FILE [ROUNDS]\n");
		return 2;
	}
	int rounds = argc > 2 ? atoi(argv[2]) : 3, failed = 0;
	const char *target_env = getenv("CUBIN_BENCH_TARGET");
	double target = target_env ? atof(target_env) : 0.80;
	size_t size, max_usize;
	uint64_t total, hb = 0, hc = 0;
	const uint8_t *map = map_file(argv[1], &size);
	struct cubin_image *img;
	char err[256];
	if (cubin_image_open(&img, map, size, 0, err, sizeof(err))) {
		fprintf(stderr, "cubin_bench: %s: %s\n", argv[1], err);
		return 1;
	}
	struct job *jobs;
	size_t n = collect_jobs(img, &jobs, &max_usize, &total);
	printf("file:        %s (%.1f MB)\n", argv[1], size / 1e6);
	printf("fatbins:     %zu, entries %zu, compressed %zu\n", img->fatbin_count, img->entry_count, n);
	printf("payloads:    %.1f MB uncompressed from compressed entries\n", total / 1e6);
	cubin_image_free(img);
	if (!n) {
		printf("no compressed payloads: nothing to compare\n");
		return 1;
	}
	uint8_t *buf = malloc(max_usize);
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	/* Same outputs on both sides, checked once outside the timed rounds. */
	bare_round(jobs, n, buf, max_usize, dctx, &hb);
	cubin_round(map, size, &hc, &failed);
	if (failed || hb != hc) {
		fprintf(stderr, "cubin_bench: outputs differ (bare %016llx, cubin %016llx)\n",
			(unsigned long long)hb, (unsigned long long)hc);
		return 1;
	}
	double best_bare = 1e30, best_cubin = 1e30;
	for (int r = 0; r < rounds; r++) {
		double b = bare_round(jobs, n, buf, max_usize, dctx, NULL);
		double c = cubin_round(map, size, NULL, &failed);
		best_bare = b < best_bare ? b : best_bare;
		best_cubin = c < best_cubin ? c : best_cubin;
	}
	double rb = total / best_bare / 1e6, rc = total / best_cubin / 1e6, ratio = rc / rb;
	printf("bare loop:   %.3f s  %.0f MB/s\n", best_bare, rb);
	printf("cubin/:      %.3f s  %.0f MB/s  (open + every entry, best of %d)\n", best_cubin, rc, rounds);
	printf("ratio:       %.3f (target >= %.2f): %s\n", ratio, target, ratio >= target ? "PASS" : "FAIL");
	ZSTD_freeDCtx(dctx);
	free(buf);
	free(jobs);
	return failed || ratio < target;
}
