/* libFuzzer target: any bytes as the file at the module cache's path, read the ways cubpf reads
 * it: `cubpf cache stats` and `ls` (store_cache_stats, store_cache_list), the shim's lookups
 * (with and without the PTX) and the use counts written back at close, then a put (which may
 * find the damage and set the database aside).  Nothing may crash, leak or allocate more than
 * the file holds (smoke.sh runs it with -malloc_limit_mb); a file that is not a cubpf
 * database must come out byte for byte as it went in.
 *
 * Seeds (tests/fuzz/corpus/fuzz_store_cache) are small cubpf databases (512-byte pages, made
 * by tests/fuzz/cache_seeds.sh), so that mutations reach the tables and not just the header. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"

static char dir[64], path[128];

/* Everything the cache left in the folder: the database, -wal, -shm, .broken-* files. */
static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
}

static void remove_dir(void)
{
	empty_dir();
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof(dir), "%s/fuzz-cache-XXXXXX", base);
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	atexit(remove_dir);
	return 0;
}

static int count_entry(void *ctx, const store_key *key, const struct store_cache_entry *e)
{
	(void)key;
	*(size_t *)ctx += e->ptx_size + e->cubin_size + (e->name ? strlen(e->name) : 0);
	return 0;
}

/* A key the seeds hold (store_key_compute of "img" at sm_90, as cache_seeds.sh puts it) and
 * one they do not. */
static store_key seed_key(int which)
{
	struct store_key_input in = {.image = {which ? "other" : "img", which ? 5 : 3}, .sm = 90};
	store_key k;
	store_key_compute(&in, &k);
	return k;
}

static void read_cache(struct store_cache *c)
{
	struct store_cache_stats st;
	struct store_cache_entry e;
	size_t bytes = 0;
	(void)store_cache_stats(c, &st);
	(void)store_cache_list(c, count_entry, &bytes);
	for (int which = 0; which < 2; which++) {
		store_key k = seed_key(which);
		if (store_cache_lookup(c, &k, &e, STORE_CACHE_NO_PTX) == 1)
			store_cache_entry_free(&e);
		if (store_cache_get(c, &k, &e) == 1)
			store_cache_entry_free(&e);
	}
	store_key k = seed_key(1);
	struct store_cache_entry put = {.ptx = "ptx", .ptx_size = 3, .cubin = "cubin",
					.cubin_size = 5, .name = "fuzz", .sm = 90};
	(void)store_cache_put(c, &k, &put);
	(void)store_cache_delete(c, &k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[STORE_ERRLEN];
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f))
		abort();
	struct store_cache_options o = {.busy_timeout_ms = 50};
	struct store_cache *c = store_cache_open(path, &o, err, sizeof(err));
	if (c) {
		read_cache(c);
		store_cache_close(c);
	} else if (strstr(err, "left untouched")) { /* refused: the file must be as it was */
		f = fopen(path, "rb");
		uint8_t *back = malloc(size + 1);
		if (!f || !back || fread(back, 1, size + 1, f) != size || memcmp(back, data, size))
			abort();
		free(back);
		fclose(f);
	}
	empty_dir();
	return 0;
}
