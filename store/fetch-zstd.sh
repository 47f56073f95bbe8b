#!/usr/bin/env bash
# Puts zstd's library sources (lib/ of zstd 1.5.7) into DEST, for a position-independent build
# with hidden symbols: Debian's libzstd.a is not position-independent (its zstd_compress.o has
# R_X86_64_PC32 relocations), so the shim, which compresses traces, cannot link it.
#
# Source: the npm package zstd-napi@0.0.13 ships zstd's lib/ folder unmodified in deps/zstd/lib
# (its own gyp file compiles exactly these files).  The npm tarball is pinned by SHA-256.  The
# download is cached outside git in $CUBPF_DEPS_CACHE (default ~/.cache/cubpf-deps).
#
# usage: store/fetch-zstd.sh DEST_DIR      (DEST_DIR/lib/... afterwards)
set -euo pipefail

NPM_PKG=zstd-napi@0.0.13
NPM_TGZ=zstd-napi-0.0.13.tgz
NPM_SHA256=5b76defc67c808989c5f3920e14f662d6318b84b8d53ac3e94b99463d8d65e76

dest=${1:?usage: store/fetch-zstd.sh DEST_DIR}
cache=${CUBPF_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cubpf-deps}
mkdir -p "$cache" "$dest"

check() { echo "$2  $1" | sha256sum -c --quiet - >/dev/null 2>&1; }

if ! [ -f "$cache/$NPM_TGZ" ] || ! check "$cache/$NPM_TGZ" "$NPM_SHA256"; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "store/fetch-zstd.sh: npm is needed once to fetch $NPM_PKG (apt-get install npm)" >&2
    exit 1
  fi
  echo "store/fetch-zstd.sh: fetching $NPM_PKG (zstd sources) into $cache"
  tmp=$(mktemp -d "$cache/tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$NPM_PKG" >/dev/null 2>"$tmp/npm.log") || {
    cat "$tmp/npm.log" >&2
    echo "store/fetch-zstd.sh: 'npm pack $NPM_PKG' failed" >&2
    exit 1
  }
  mv "$tmp/$NPM_TGZ" "$cache/$NPM_TGZ"
fi
if ! check "$cache/$NPM_TGZ" "$NPM_SHA256"; then
  echo "store/fetch-zstd.sh: $cache/$NPM_TGZ does not have the pinned SHA-256 $NPM_SHA256" >&2
  exit 1
fi

work=$(mktemp -d "$cache/x.XXXXXX")
tar --no-same-owner -xzf "$cache/$NPM_TGZ" -C "$work" package/deps/zstd/lib package/deps/zstd/LICENSE
rm -rf "$dest/lib"
mv "$work/package/deps/zstd/lib" "$dest/lib"
mv "$work/package/deps/zstd/LICENSE" "$dest/LICENSE"
rm -rf "$work"
echo "store/fetch-zstd.sh: zstd $(awk '/define ZSTD_VERSION_(MAJOR|MINOR|RELEASE)/ {printf "%s%s", sep, $3; sep="."}' "$dest/lib/zstd.h") in $dest"
