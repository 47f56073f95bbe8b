#!/usr/bin/env bash
# Replays ci/dist/Dockerfile without a container engine: its ADD line unpacks the dist tarball (the
# layer) into a fresh root folder, its RUN lines run with their redirections into that root, and
# then cubpf runs from there over the fake driver of tests/shim:
#   - the unpacked cubpf: --help, cubpf run -t kcount, cubpf run --preload -t kcount with the
#     program's own LD_LIBRARY_PATH;
#   - the /etc/ld.so.preload line the RUN step wrote, read by the dynamic linker itself: in a
#     private mount namespace (unshare -rm, no root needed where user namespaces are allowed)
#     the root's etc/ and opt/ are laid over /etc and /opt (read-only overlays), and a program
#     started with no cubpf variable but the fake driver's path loads cubpf's libcuda.so.1,
#     also when its LD_LIBRARY_PATH names a folder with another libcuda.so.1.  Where namespaces
#     are not allowed, the preload line is given through LD_PRELOAD instead (said so).
# usage: replay-dockerfile.sh DOCKERFILE TARBALL FAKE_DRIVER FAKE_APP
# Prints "replay: ok: WHAT" per check; exit status 0 when all pass.
set -u
dockerfile=$1 tarball=$2 fake=$3 app=$4
root=$(mktemp -d /tmp/cubpf-replay-XXXXXX)
trap 'rm -rf "$root"' EXIT
fail() { echo "replay: FAILED: $*"; exit 1; }
ok() { echo "replay: ok: $*"; }

# -- the Dockerfile's steps
while read -r instr rest; do
  case "$instr" in
    ADD)  dest=${rest##* }
          mkdir -p "$root$dest" && tar -xzf "$tarball" -C "$root$dest" || fail "ADD $rest"
          ok "ADD: $(basename "$tarball") unpacked at $dest of the root" ;;
    RUN)  cmd=$(printf '%s' "$rest" | sed "s#\(>>\?\) */#\1 $root/#g")
          mkdir -p "$root/etc" && sh -c "$cmd" || fail "RUN $rest"
          ok "RUN: $rest" ;;
    FROM|ARG|ENV|'#'*|'') ;;   # the base image is this machine's own libc
    *)    fail "unknown instruction $instr" ;;
  esac
done < <(grep -v '^[[:space:]]*#' "$dockerfile")

prefix=$root/opt/cubpf
[ -x "$prefix/bin/cubpf" ] || fail "no opt/cubpf/bin/cubpf in the layer"
grep -qx /opt/cubpf/lib/libcuda.so.1 "$root/etc/ld.so.preload" || fail "no ld.so.preload line"

# -- the unpacked cubpf
out=$("$prefix/bin/cubpf" --help 2>&1) && grep -q 'cdi' <<<"$out" || fail "cubpf --help: $out"
ok "cubpf --help"
kcount_ok() { grep -Eq 'tools_k +3 +480' <<<"$1"; }
out=$("$prefix/bin/cubpf" run -t kcount --real-libcuda "$fake" -- "$app" 2>&1)
kcount_ok "$out" || fail "cubpf run -t kcount: $out"
ok "cubpf run -t kcount (3 launches)"
other=$root/other-driver && mkdir -p "$other" && ln -s "$fake" "$other/libcuda.so.1"
out=$("$prefix/bin/cubpf" run --preload -t kcount --real-libcuda "$fake" -- \
      env LD_LIBRARY_PATH="$other" "$app" 2>&1)
kcount_ok "$out" || fail "cubpf run --preload: $out"
ok "cubpf run --preload -t kcount, the program's own LD_LIBRARY_PATH (3 launches)"

# -- /etc/ld.so.preload as the image has it
check_preload() {  # output of the app run with cubpf preloaded, CUBPF_LOG=info
  grep -q 'cubpf: summary: 1 module loads (0 failed, 0 unloaded), 3 launches' <<<"$1" &&
    grep -q 'fake_app: done' <<<"$1"
}
run_in_image() {   # $1 = LD_LIBRARY_PATH of the program ("" for none)
  unshare -rm sh -c '
    mount -t overlay overlay -o "lowerdir=$0/etc:/etc" /etc &&
    mount -t overlay overlay -o "lowerdir=$0/opt:/opt" /opt || exit 99
    exec env ${1:+LD_LIBRARY_PATH=$1} CUBPF_LOG=info CUBPF_REAL_LIBCUDA="$2" "$3"' \
    "$root" "$1" "$fake" "$app" 2>&1
}
if [ -d /opt ] && out=$(run_in_image "") && [ "$out" != "" ]; then
  check_preload "$out" || fail "/etc/ld.so.preload (namespace): $out"
  ok "/etc/ld.so.preload read by the dynamic linker (private mount namespace): cubpf's shim"
  out=$(run_in_image "$other")
  check_preload "$out" || fail "/etc/ld.so.preload with the program's LD_LIBRARY_PATH: $out"
  ok "/etc/ld.so.preload, the program's LD_LIBRARY_PATH naming another libcuda.so.1: cubpf's shim"
else
  echo "replay: note: no private mount namespace here; the ld.so.preload line is given as LD_PRELOAD"
  pre=$(sed "s#^/#$root/#" "$root/etc/ld.so.preload" | paste -sd: -)
  out=$(LD_PRELOAD=$pre LD_LIBRARY_PATH=$other CUBPF_LOG=info CUBPF_REAL_LIBCUDA=$fake "$app" 2>&1)
  check_preload "$out" || fail "ld.so.preload line as LD_PRELOAD: $out"
  ok "ld.so.preload line (as LD_PRELOAD), the program's LD_LIBRARY_PATH naming another libcuda.so.1"
fi
echo "replay: all steps passed"
