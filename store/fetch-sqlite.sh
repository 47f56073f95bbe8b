#!/usr/bin/env bash
# Puts SQLite's amalgamation (sqlite3.c, sqlite3.h) into DEST, for store/ to compile with -fPIC
# and hidden symbols: Debian's libsqlite3.a is not position-independent, so it cannot go into the
# shim, which must need nothing but glibc.
#
# Source: Debian's source package sqlite3 of bookworm (SQLite 3.40.1 with Debian's patches,
# security fixes included), fetched from Debian's archive and checked against the SHA-256 pins
# below by store/debian-source.sh (which says where it looks, and why), cached outside git in
# $CUBPF_DEPS_CACHE (default ~/.cache/cubpf-deps); once cached, no network.  The amalgamation is
# generated from that source tree the way SQLite's own build does (configure; make sqlite3.c),
# with Debian's tclsh (package tcl).  DEST/SOURCE records what it was made from.
#
# usage: store/fetch-sqlite.sh DEST_DIR
set -euo pipefail

DS_WHO=store/fetch-sqlite.sh
DS_PACKAGE=sqlite3
DS_VERSION=3.40.1-2+deb12u2
DS_PINS="
ee3459ae9d00939741c7708fc1b8ce1bde12d8c3fb1dfa005bbbc8651d884e23 0515bc4edf03de34d564ce21d52e0f208cc64654 sqlite3_3.40.1-2+deb12u2.dsc
0843bc12e4364076477935ce313a6d0796fd899a989ff18ebb6545540e10e4ca 4fc38879135dfcdd17f581e2bd654aa4a13e4385 sqlite3_3.40.1-2+deb12u2.debian.tar.xz
aaa776260ab4dc976db34aa7891819484c8676b5b2783123ebc6301e2ca5d655 92fa12f357ce9bc383c9612518c46f9b546ed43a sqlite3_3.40.1.orig.tar.xz
a5e95a18d1b59729278860559ded78751b9163ffb5bb906c5cd24c015f71d5fd 6bbac3be3545e2440a9ea2d9b70797e61dc3b398 sqlite3_3.40.1.orig-www.tar.xz
"

dest=${1:?usage: store/fetch-sqlite.sh DEST_DIR}
mkdir -p "$dest"
. "$(dirname "$0")/debian-source.sh"
command -v tclsh >/dev/null 2>&1 ||
  ds_fail "tclsh is needed to make SQLite's amalgamation (apt-get install tcl)"

work=$(mktemp -d "${TMPDIR:-/tmp}/cubpf-sqlite.XXXXXX")
trap 'rm -rf "$work"' EXIT
debian_source_unpack "$work/src"

# SQLite's own way: configure, then `make sqlite3.c` (tclsh scripts join the sources, lemon makes
# the parser).  The make of cubpf's build must not lend its jobserver to this one.
mkdir "$work/build"
if ! (cd "$work/build" && ../src/configure --disable-tcl --disable-readline &&
       env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make sqlite3.c) >"$work/log" 2>&1; then
  tail -n 40 "$work/log" >&2
  ds_fail "making sqlite3.c from Debian's sqlite3 source failed"
fi
mv "$work/build/sqlite3.h" "$dest/sqlite3.h"
mv "$work/build/sqlite3.c" "$dest/sqlite3.c"
echo "$ds_record" >"$dest/SOURCE"
version=$(sed -n 's/^#define SQLITE_VERSION *"\(.*\)"/\1/p' "$dest/sqlite3.h")
echo "$DS_WHO: SQLite $version ($(head -1 "$dest/SOURCE" | cut -d: -f1)) in $dest"
