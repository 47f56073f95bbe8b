#!/usr/bin/env bash
# Installs the Debian packages cubpf builds against when they are missing.  `make` calls it once
# per build directory; developers may run it by hand.  Prints what it does, changes nothing when
# everything is already there.
set -euo pipefail

# header or file that proves a package is installed -> package name
declare -A need=(
  [/usr/include/zstd.h]=libzstd-dev
  [/usr/include/lz4.h]=liblz4-dev
  [/usr/include/xxhash.h]=libxxhash-dev
  [/usr/include/cmocka.h]=libcmocka-dev
  [/usr/include/sqlite3.h]=libsqlite3-dev
  [/usr/include/linux/bpf.h]=linux-libc-dev
)

missing=()
for f in "${!need[@]}"; do
  [ -e "$f" ] || missing+=("${need[$f]}")
done
# store/ builds SQLite and zstd from sources it fetches, hash-pinned, through npm
# (store/fetch-sqlite.sh, store/fetch-zstd.sh): Debian's static archives are not PIC.
command -v npm >/dev/null 2>&1 || missing+=(npm)
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
