#!/usr/bin/env bash
# Seeds for fuzz_store_cache (tests/fuzz/corpus/fuzz_store_cache): small databases, made with
# 512-byte pages so that mutations reach the tables, not only the header.  store/ keeps the page
# size of a database that already has pages, so each seed starts as an empty SQLite file of
# 512-byte pages that the cache library then fills (keys as fuzz_store_cache.c looks them up).
#   tests/fuzz/cache_seeds.sh [BUILD]       (BUILD: the plain build, default build)
set -eu
build=${1:-build}
out=tests/fuzz/corpus/fuzz_store_cache
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

cat >"$work/fill.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store/store.h"
/* fill PATH N: N entries (the first keyed "img" at sm_90), one lookup that hits, one miss */
int main(int argc, char **argv)
{
	char err[STORE_ERRLEN], name[32], blob[700];
	struct store_cache *c = store_cache_open(argv[1], NULL, err, sizeof(err));
	if (!c || argc < 3)
		return fprintf(stderr, "%s\n", c ? "usage: fill PATH N" : err), 1;
	for (int i = 0; i < atoi(argv[2]); i++) {
		char img[16];
		snprintf(img, sizeof(img), i ? "img%d" : "img", i);
		struct store_key_input in = {.image = {img, strlen(img)}, .sm = 90};
		store_key k;
		store_key_compute(&in, &k);
		memset(blob, 'a' + i, sizeof(blob)); /* longer than a page: overflow pages */
		snprintf(name, sizeof(name), "_Z6kernel%di", i);
		struct store_cache_entry e = {.ptx = blob, .ptx_size = 100 + 300 * i, .cubin = blob,
					      .cubin_size = 40, .manifest = "cubpf-kernels 1\n",
					      .manifest_size = 16, .name = name, .sm = 90};
		if (store_cache_put(c, &k, &e))
			return fprintf(stderr, "%s\n", store_cache_error(c)), 1;
		struct store_cache_entry g;
		if (store_cache_get(c, &k, &g) == 1)
			store_cache_entry_free(&g);
	}
	store_cache_close(c);
	return 0;
}
EOF
${CC:-cc} -I. -I"$build/zstd/lib" -o "$work/fill" "$work/fill.c" "$build/lib/libcubpf-store.a" \
  "$build/lib/libcubpf-zstd.a" -Wl,-Bstatic -lxxhash -Wl,-Bdynamic -lpthread -ldl -lm

small_db() { # an empty SQLite file of 512-byte pages
  python3 -c "import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.execute('PRAGMA page_size=512');
d.execute('CREATE TABLE t(x)'); d.execute('DROP TABLE t'); d.commit(); d.execute('VACUUM'); d.close()" "$1"
}

small_db "$work/two.db" && "$work/fill" "$work/two.db" 2
small_db "$work/one.db" && "$work/fill" "$work/one.db" 1
python3 -c "import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.execute('DELETE FROM counters');
d.commit(); d.close()" "$work/one.db"
small_db "$work/foreign.db"
python3 -c "import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.execute('CREATE TABLE b(u)');
d.execute(\"INSERT INTO b VALUES('x')\"); d.commit(); d.close()" "$work/foreign.db"
cp "$work/two.db" "$out/two_entries.db"
cp "$work/one.db" "$out/empty_counters.db"
cp "$work/foreign.db" "$out/foreign.db"
ls -l "$out"
