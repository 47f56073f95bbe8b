#!/usr/bin/env bash
# Puts zstd's library sources (lib/) into DEST, for a position-independent build with hidden
# symbols: Debian's libzstd.a is not position-independent (its zstd_compress.o has R_X86_64_PC32
# relocations), so the shim, which compresses traces, cannot link it.
#
# Source: Debian's source package libzstd of bookworm (zstd 1.5.4, with Debian's patches; the
# build's only zstd: every object includes this zstd.h and every program links it), fetched from
# Debian's archive and checked against the SHA-256 pins below by store/debian-source.sh (which
# says where it looks, and why), cached outside git in $CUBPF_DEPS_CACHE (default
# ~/.cache/cubpf-deps); once cached, no network.  DEST/SOURCE records what it was made from.
#
# usage: store/fetch-zstd.sh DEST_DIR      (DEST_DIR/lib/... afterwards)
set -euo pipefail

DS_WHO=store/fetch-zstd.sh
DS_PACKAGE=libzstd
DS_VERSION=1.5.4+dfsg2-5
DS_PINS="
8f602f92b575aa8b5e979196fb6ee82d78f233521dc9636526d3ecba1f63c1b1 96102b900f2902d56ddf0b77d81a19dc6b1f7f97 libzstd_1.5.4+dfsg2-5.dsc
82ce911445772861d0838bd4545f93bc50658bc7f3cefdb17a307dfb8ffca5d8 7c5a8135d2e62e1d53be1bdc3e685ba5299c39dc libzstd_1.5.4+dfsg2-5.debian.tar.xz
8cf4bbb65e77ec348d052c8d6230eba66d435bddf64c8b5be2fcb16880c19953 37d1ae64b2e2f1882401b3ec596dd21ed20359ae libzstd_1.5.4+dfsg2.orig.tar.xz
be007507630aabfc7d88d5d3c467115935ca22025253491d525e0119bbb23d40 c5077a159c76298359255ab0086b74162d14a64d libzstd_1.5.4+dfsg2.orig.tar.xz.asc
"

dest=${1:?usage: store/fetch-zstd.sh DEST_DIR}
mkdir -p "$dest"
. "$(dirname "$0")/debian-source.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/cubpf-zstd.XXXXXX")
trap 'rm -rf "$work"' EXIT
debian_source_unpack "$work/src"
rm -rf "${dest:?}/lib"
mv "$work/src/lib" "$dest/lib"
mv "$work/src/LICENSE" "$dest/LICENSE"
echo "$ds_record" >"$dest/SOURCE"
version=$(awk '/define ZSTD_VERSION_(MAJOR|MINOR|RELEASE)/ {printf "%s%s", sep, $3; sep="."}' \
  "$dest/lib/zstd.h")
echo "$DS_WHO: zstd $version ($(head -1 "$dest/SOURCE" | cut -d: -f1)) in $dest"
