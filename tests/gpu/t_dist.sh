#!/usr/bin/env bash
# Issue 19 on the GPU: `make dist`'s tarball unpacked to a fresh prefix, and from there:
#   - an nvcc program (tests/cuda/live_multi.cu: a kernel on every GPU, exact counts it prints)
#     and PyTorch (tests/gpu/apps/torch_app.py, which dlopens libcuda.so.1) under library-path
#     mode (`cubpf run -t kcount`), preload mode (`cubpf run --preload -t kcount`), and preload
#     mode for a program whose environment sets its own LD_LIBRARY_PATH: stdout identical to the
#     native run's, kcount's thread count of the nvcc program's kernel exact;
#   - LD_PRELOAD=PREFIX/lib/libcuda.so.1 by hand (no cubpf run) on the driver-API torture program
#     (its issue-16 reproducer): output identical, the module instrumented;
#   - a second driver interposer preloaded before cubpf (tests/shim/interposer.c): both see the
#     program's calls, output identical.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
TAR=$(ls "$BUILD"/dist/cubpf-*-x86_64.tar.gz 2>/dev/null | head -1)
APP=$(cd "$BUILD/gpu" && pwd)/live_multi
TORTURE=$(cd "$BUILD/gpu" && pwd)/torture_drv
INTERPOSER=$(cd "$BUILD/tests/interposer" 2>/dev/null && pwd)/libcuda.so.1
PY=${PYTHON:-python3}
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
[ -f "$TAR" ] && [ -x "$APP" ] && [ -x "$TORTURE" ] && [ -f "$INTERPOSER" ] ||
  { echo "FAIL missing: tarball ($TAR), $APP, $TORTURE or $INTERPOSER"; exit 1; }
P=$(mktemp -d /tmp/cubpf-prefix.XXXXXX)
trap 'rm -rf "$P"' EXIT
tar -xzf "$TAR" --strip-components=2 -C "$P"
C=$P/bin/cubpf
echo "RESULT dist: $(basename "$TAR") unpacked to $P"
"$APP" >"$OUT/dist.native" 2>/dev/null || fail "native run of live_multi"
total=0
for t in $(sed -n 's/^expect device [0-9]* live_vecadd threads=\([0-9]*\)/\1/p' "$OUT/dist.native"); do
  total=$((total + t)); done
$PY tests/gpu/apps/torch_app.py >"$OUT/dist.torch.native" 2>/dev/null || fail "native run of torch_app"

# mode NAME OPTIONS...: both programs under `cubpf run OPTIONS -t kcount`
mode() {
  local name=$1; shift
  "$C" run "$@" -t kcount -- sh -c "exec $APP > '$OUT/dist.$name.app'" >"$OUT/dist.$name.rep" 2>"$OUT/dist.$name.err"
  local rc=$?
  local threads; threads=$(grep '^live_vecadd ' "$OUT/dist.$name.rep" | tail -1 | awk '{print $3, $4}')
  local same=no; cmp -s "$OUT/dist.native" "$OUT/dist.$name.app" && same=yes
  echo "RESULT dist $name nvcc: rc=$rc identical_stdout=$same threads,gpu_runs=${threads:-none} expected_threads=$total"
  [ "$rc" -eq 0 ] && [ "$same" = yes ] && [ "${threads%% *}" = "$total" ] || { fail "$name: nvcc program"; tail -5 "$OUT/dist.$name.err"; }
  "$C" run "$@" -t kcount -- sh -c "exec $PY tests/gpu/apps/torch_app.py > '$OUT/dist.$name.torch'" \
    >"$OUT/dist.$name.trep" 2>"$OUT/dist.$name.terr"
  rc=$?; same=no; cmp -s "$OUT/dist.torch.native" "$OUT/dist.$name.torch" && same=yes
  local launched; launched=$(grep -c '^_\|^[a-z]' "$OUT/dist.$name.trep")
  echo "RESULT dist $name pytorch: rc=$rc identical_stdout=$same report_lines=$launched"
  [ "$rc" -eq 0 ] && [ "$same" = yes ] && grep -q 'kernels launched but not instrumented: [1-9]' "$OUT/dist.$name.trep" ||
    { fail "$name: pytorch"; tail -5 "$OUT/dist.$name.terr"; }
}
mode libpath
mode preload --preload
# an image's own LD_LIBRARY_PATH: preload mode does not depend on it
"$C" run --preload -t kcount -- env LD_LIBRARY_PATH=/nonexistent sh -c "exec $APP > '$OUT/dist.ownlib.app'" \
  >"$OUT/dist.ownlib.rep" 2>"$OUT/dist.ownlib.err"
threads=$(grep '^live_vecadd ' "$OUT/dist.ownlib.rep" | tail -1 | awk '{print $3}')
cmp -s "$OUT/dist.native" "$OUT/dist.ownlib.app" && [ "${threads:-}" = "$total" ] &&
  echo "RESULT dist own LD_LIBRARY_PATH under --preload: identical_stdout=yes threads=$threads" ||
  fail "own LD_LIBRARY_PATH under --preload: threads=${threads:-none}"

# LD_PRELOAD by hand, and a second interposer before cubpf
"$TORTURE" repro >"$OUT/dist.torture.native" 2>/dev/null; nrc=$?
run_preloaded() { # NAME PRELOAD
  LD_PRELOAD=$2 CUBPF_PROGRAMS=$P/probes/kcount.bpf.o CUBPF_LOG=info CUBPF_CACHE=off \
    "$TORTURE" repro >"$OUT/dist.$1.out" 2>"$OUT/dist.$1.err"
  rc=$?
  local same=no; cmp -s "$OUT/dist.torture.native" "$OUT/dist.$1.out" && same=yes
  local inst; inst=$(grep -o 'instrumented [0-9]* of [0-9]* kernels' "$OUT/dist.$1.err" | head -1)
  echo "RESULT dist $1: rc=$rc (native $nrc) identical_stdout=$same ${inst:-not instrumented} $(grep -h '^interposer:' "$OUT/dist.$1.err")"
  [ "$rc" -eq "$nrc" ] && [ "$same" = yes ] && [ -n "$inst" ] || { fail "$1"; tail -5 "$OUT/dist.$1.err"; }
}
run_preloaded ld_preload "$P/lib/libcuda.so.1"
run_preloaded chain "$INTERPOSER:$P/lib/libcuda.so.1"
grep -q '^interposer: [1-9][0-9]* calls, [1-9]' "$OUT/dist.chain.err" || fail "the interposer before cubpf saw no launch"
echo "RESULT dist: $failed failed"
[ "$failed" -eq 0 ]
