/* cubpf cache: look at or clear the instrumented-module cache (store/ part 1).
 *   ls [--db PATH]       entries, most recently used first
 *   stats [--db PATH]    entries, bytes, hits, misses, time saved
 *   clear [--db PATH]    delete every entry */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "tools/commands.h"
#include "tools/tools.h"

static const char usage_text[] =
	"usage: cubpf cache ls|stats|clear [--db PATH]\n"
	"\n"
	"  ls      entries, most recently used first: key, SM, sizes, rewrite and JIT time, uses\n"
	"  stats   entries, bytes against the limit, lookups, hits, misses, time the hits saved\n"
	"  clear   delete every entry (the file stays; other processes may keep using it)\n"
	"\n"
	"The database is $CUBPF_CACHE, else $XDG_CACHE_HOME/cubpf/cache.db, else\n"
	"~/.cache/cubpf/cache.db; --db names another.  ls and stats only read it (a damaged\n"
	"database is reported, exit status 1, and left as it is).  A cache another user could\n"
	"change is not used: CUBPF_CACHE_GROUP=NAME trusts a group, CUBPF_CACHE_READONLY=1 reads\n"
	"another's cache without writing it.\n";

static void log_stderr(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "%s\n", msg);
}

static void when(int64_t ms, char *buf, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, n, "?");
}

static int print_entry(void *ctx, const store_key *key, const struct store_cache_entry *e)
{
	char hex[33], used[32], t[TOOL_TEXT_MAX];
	(void)ctx;
	store_key_hex(key, hex);
	when(e->last_used_ms, used, sizeof(used));
	printf("%s  sm_%-3u %10zu %10zu %9.1f %9.1f %6" PRIu64 "  %s  %s\n", hex, e->sm, e->ptx_size,
	       e->cubin_size, e->rewrite_ns / 1e6, e->jit_ns / 1e6, e->hits, used,
	       tool_text(e->name, t, sizeof(t))); /* the cache's, as the shim wrote it from a module */
	return 0;
}

static int do_ls(struct store_cache *c)
{
	printf("%-32s  %-6s %10s %10s %9s %9s %6s  %-19s  %s\n", "key", "sm", "ptx_bytes",
	       "cubin_bytes", "rewrite_ms", "jit_ms", "uses", "last_used", "name");
	int n = store_cache_list(c, print_entry, NULL);
	if (n < 0) {
		fprintf(stderr, "cubpf cache: %s\n", store_cache_error(c));
		return 1;
	}
	printf("%d entries in %s\n", n, store_cache_path(c));
	return 0;
}

static int do_stats(struct store_cache *c)
{
	struct store_cache_stats s;
	if (store_cache_stats(c, &s)) {
		fprintf(stderr, "cubpf cache: %s\n", store_cache_error(c));
		return 1;
	}
	printf("database   %s (%.1f MiB on disk)\n", store_cache_path(c), s.file_bytes / 1048576.0);
	printf("entries    %" PRIu64 ", %.1f MiB of %.1f MiB allowed\n", s.entries, s.bytes / 1048576.0,
	       s.max_bytes / 1048576.0);
	printf("lookups    %" PRIu64 ": %" PRIu64 " hits, %" PRIu64 " misses (hit rate %.1f%%)\n",
	       s.lookups, s.hits, s.misses, s.lookups ? 100.0 * s.hits / s.lookups : 0.0);
	printf("stored     %" PRIu64 " entries, %" PRIu64 " evicted, %" PRIu64 " failed their checksum\n",
	       s.puts, s.evictions, s.corrupt_blobs);
	printf("saved      %.3f s of rewriting and JIT compiling\n", s.saved_ns / 1e9);
	return 0;
}

static int do_clear(struct store_cache *c)
{
	int64_t n = store_cache_clear(c);
	if (n < 0) {
		fprintf(stderr, "cubpf cache: %s\n", store_cache_error(c));
		return 1;
	}
	printf("removed %" PRId64 " entries from %s\n", n, store_cache_path(c));
	return 0;
}

int cmd_cache(int argc, char **argv)
{
	const char *db = NULL, *sub = argc > 1 ? argv[1] : NULL;
	char err[STORE_ERRLEN];
	int (*fn)(struct store_cache *) = NULL;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return 0;
		}
	if (sub && !strcmp(sub, "ls"))
		fn = do_ls;
	else if (sub && !strcmp(sub, "stats"))
		fn = do_stats;
	else if (sub && !strcmp(sub, "clear"))
		fn = do_clear;
	if (!fn) {
		if (sub)
			fprintf(stderr, "cubpf cache: unknown subcommand '%s'\n", sub);
		fputs(usage_text, stderr);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--db") && i + 1 < argc)
			db = argv[++i];
		else if (!strncmp(argv[i], "--db=", 5))
			db = argv[i] + 5;
		else {
			fprintf(stderr, "cubpf cache: unexpected argument '%s'\n%s", argv[i], usage_text);
			return 2;
		}
	}
	/* Looking must not create: say there is no cache instead. */
	char def[4096];
	if (!db && store_cache_default_path(def, sizeof(def), err, sizeof(err)) != 0) {
		fprintf(stderr, "cubpf cache: %s\n", err);
		return 1;
	}
	if (!db)
		db = def;
	struct stat st;
	if (lstat(db, &st) != 0 && errno == ENOENT) {
		printf("no cache at %s (nothing cached yet)\n", db);
		return 0;
	}
	struct store_cache_options opt = {.log = log_stderr};
	if (store_cache_env_options(&opt, err, sizeof(err))) {
		fprintf(stderr, "cubpf cache: %s\n", err);
		return 1;
	}
	/* Looking must not repair either: ls and stats read the file as it is, and a damaged one
	 * is reported (exit 1) and left where it is for whoever wants to look at it. */
	if (fn != do_clear)
		opt.flags |= STORE_CACHE_OPEN_READ_ONLY;
	struct store_cache *c = store_cache_open(db, &opt, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "cubpf cache: %s\n", err);
		return 1;
	}
	int rc = fn(c);
	store_cache_close(c);
	return rc;
}
