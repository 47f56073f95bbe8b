#!/usr/bin/env bash
# Lists the global symbols of cubpf's own objects that lack their module's prefix, and exits 1
# if there is any (CONTRIBUTING.md: every non-static name carries its module's prefix, so that
# the archives, which the tools, tests and shim all link, never clash with each other or with
# a user's names).
#
# What is checked, in BUILD (default build):
#   lib/libcubpf-cubin.a  cubin_      lib/libcubpf-vm.a     vm_
#   lib/libcubpf-ptx.a    ptx_        lib/libcubpf-store.a  store_
#   obj/shim/**.o         shim_       obj/tools/**.o        tool_ or cmd_ (and main)
# Exempt: the bundled third-party code (sqlite3.o inside libcubpf-store.a, libcubpf-zstd.a is
# not read; lz4 and xxhash are Debian's and never in our archives), and the names the shim and
# the drop-ins export on purpose: the generated lists BUILD/shim/exports.txt and
# BUILD/dropin/*/exports.txt (driver, NVRTC and nvJitLink names; their trampolines are in
# BUILD/shim and BUILD/dropin, not read); the sanitizer's own symbols (__odr_asan.NAME of
# a global NAME).  A missing archive or folder is an error: a check
# that read nothing must not pass.
#
# usage: ci/check-names.sh [BUILD]
set -euo pipefail
build=${1:-build}

fail=0
bad=()
note() { echo "ci/check-names.sh: $*" >&2; }

# exports: the names the shared objects export on purpose, one a line.
exports=$(mktemp)
trap 'rm -f "$exports"' EXIT
for f in "$build"/shim/exports.txt "$build"/dropin/*/exports.txt; do
  [ -f "$f" ] || { note "$f missing (build first)"; exit 2; }
  cat "$f"
done | sort -u >"$exports"

# check PREFIX_REGEX WHAT FILES...: the defined global names of FILES not matching
# ^PREFIX_REGEX and not exported on purpose.  nm -A names the file (archive:member: for
# archive members), so that a report says where the name is defined.
check() {
  local re=$1 what=$2; shift 2
  local line file name
  while read -r line; do
    file=${line%:*}      # nm -A: FILE[:MEMBER]:VALUE TYPE NAME
    name=${line##* }
    case "$file" in *:sqlite3.o) continue ;; esac
    case "$name" in __odr_asan.*) continue ;; esac   # ASan's ODR indicators (SAN=1 builds)
    [[ $name =~ ^($re) ]] && continue
    grep -qxF -- "$name" "$exports" && continue
    bad+=("$what: $name (${file#"$build"/})")
  done < <(nm -A -g --defined-only "$@" | awk 'NF >= 3 {print $1 " " $NF}')
}

for m in cubin:cubin_ vm:vm_ ptx:ptx_ store:store_; do
  lib=$build/lib/libcubpf-${m%%:*}.a
  [ -f "$lib" ] || { note "$lib missing (build first)"; exit 2; }
  check "${m#*:}" "${m%%:*}" "$lib"
done
for d in shim:shim_ 'tools:tool_|cmd_|main$'; do
  dir=$build/obj/${d%%:*}
  mapfile -t objs < <(find -L "$dir" -name '*.o' 2>/dev/null | sort)
  [ ${#objs[@]} -gt 0 ] || { note "no objects in $dir (build first)"; exit 2; }
  check "${d#*:}" "${d%%:*}" "${objs[@]}"
done

if [ ${#bad[@]} -gt 0 ]; then
  note "${#bad[@]} global names without their module's prefix:"
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "ci/check-names.sh: every global name of cubin, vm, ptx, store, shim and tools has its prefix"
