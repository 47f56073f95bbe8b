#!/usr/bin/env bash
# Installs the Debian packages cubpf builds against when they are missing.  `make` calls it once
# per build directory; developers may run it by hand.  Prints what it does, changes nothing when
# everything is already there.
set -euo pipefail

# header or file that proves a package is installed -> package name
declare -A need=(
  [/usr/include/lz4.h]=liblz4-dev
  [/usr/include/xxhash.h]=libxxhash-dev
  [/usr/include/cmocka.h]=libcmocka-dev
  [/usr/include/linux/bpf.h]=linux-libc-dev
  # store/ compiles SQLite and zstd from Debian's source packages (store/fetch-*.sh): Debian's
  # static archives are not PIC.  That zstd is the build's only one: no libzstd-dev.  Fetching, checking and unpacking them takes apt-get source
  # (apt), the archive keyring and dpkg-source; SQLite's amalgamation is made with tclsh.
  [/usr/share/keyrings/debian-archive-keyring.gpg]=debian-archive-keyring
  [/usr/bin/dpkg-source]=dpkg-dev
  [/usr/bin/xz]=xz-utils
  [/usr/bin/tclsh]=tcl
  # the tests of issue 33 read what cubpf writes with other people's tools: the SQLite export
  # with the sqlite3 command-line tool, the metrics endpoint with a Prometheus server (and its
  # promtool); a test that cannot find them fails and says so
  [/usr/bin/sqlite3]=sqlite3
  [/usr/bin/prometheus]=prometheus
  [/usr/bin/promtool]=prometheus
)

missing=()
for f in "${!need[@]}"; do
  [ -e "$f" ] || missing+=("${need[$f]}")
done
# libFuzzer's runtime (make fuzz) comes with clang's compiler-rt
if command -v clang >/dev/null 2>&1; then
  rt=$(clang -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a
  [ -e "$rt" ] || missing+=("libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev")
fi

[ ${#missing[@]} -eq 0 ] && exit 0

echo "ci/deps.sh: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "ci/deps.sh: missing packages (${missing[*]}) and not root: install them, then run make again" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
