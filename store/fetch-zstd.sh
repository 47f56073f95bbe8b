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

. "$(dirname "$0")/npm-fetch.sh"
npm_fetch_pinned store/fetch-zstd.sh "$NPM_PKG" "$NPM_TGZ" "$NPM_SHA256" "$cache"

work=$(mktemp -d "$cache/x.XXXXXX")
tar --no-same-owner -xzf "$cache/$NPM_TGZ" -C "$work" package/deps/zstd/lib package/deps/zstd/LICENSE
rm -rf "$dest/lib"
mv "$work/package/deps/zstd/lib" "$dest/lib"
mv "$work/package/deps/zstd/LICENSE" "$dest/LICENSE"
rm -rf "$work"
echo "store/fetch-zstd.sh: zstd $(awk '/define ZSTD_VERSION_(MAJOR|MINOR|RELEASE)/ {printf "%s%s", sep, $3; sep="."}' "$dest/lib/zstd.h") in $dest"
