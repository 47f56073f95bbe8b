#!/usr/bin/env bash
# tests/gpu/frameworks.sh NAME...: the programs of issue 15 under cubpf (run by t_fw_python.sh
# and t_fw_native.sh).  For each program: a native run, then one run under each of kcount,
# memtrace and threadhist (`cubpf run -t TOOL --json`), each with fresh framework caches
# (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, CUPY_CACHE_DIR, JAX's compilation cache);
#   - the program's stdout under each tool is identical to the native run's;
#   - kcount: every instrumented kernel ran on the GPU as launched (GPU runs = launches, thread
#     entries = grid x block), the program's "expect" lines hold; coverage table as RESULT lines;
#   - memtrace: bytes per space and op = the program's "expect" lines;
#   - threadhist: thread runs (its entries) = kcount's threads;
#   - the caches written under cubpf hold no cubpf code, and a native run reusing them (cache
#     hits) prints exactly what the first native run printed.
# NAME: triton inductor jax cupy nvrtc jitlink culink rdc triton_fmad torch_sass.  torch_sass
# runs under `cubpf run --sanitizer` (the Sanitizer backend: its kernels ship SASS only).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$(cd "$BUILD/bin" && pwd)/cubpf
PY=${PYTHON:-python3}
CHECK="$PY tests/gpu/fw_check.py"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 XLA_PYTHON_CLIENT_PREALLOCATE=false
WORK=$(mktemp -d /tmp/cubpf-fw.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

command_of() {
  case $1 in
    triton|inductor|jax|triton_fmad|torch_sass) echo "$PY tests/gpu/apps/${1}_app.py" ;;
    cupy) echo "$PY tests/gpu/apps/cupy_kernels_app.py" ;;
    nvrtc|jitlink|culink) echo "$BUILD/gpu/rtc_app $1" ;;
    rdc) echo "$BUILD/gpu/rdc_app" ;;
  esac
}

# caches DIR: the environment that puts every framework cache under DIR (JAX writes its cache
# only with a folder set and, here, for every compilation).
caches() {
  echo "TRITON_CACHE_DIR=$1/triton TORCHINDUCTOR_CACHE_DIR=$1/inductor CUPY_CACHE_DIR=$1/cupy" \
       "JAX_COMPILATION_CACHE_DIR=$1/jax JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0" \
       "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0"
}

same_output() { # NAME WHAT FILE: FILE must equal the native stdout
  if cmp -s "$OUT/fw_$1.native" "$3"; then echo "RESULT frameworks $1 $2: identical_stdout=yes"
  else fail "$1 $2: stdout differs from the native run"; diff "$OUT/fw_$1.native" "$3" | head -10; fi
}

one() {
  local name=$1 cmd; cmd=$(command_of "$1")
  local backend=""; [ "$name" = torch_sass ] && backend=--sanitizer
  local base=$OUT/fw_$name
  # shellcheck disable=SC2046
  env $(caches "$WORK/$name/native") $cmd >"$base.native" 2>"$base.native.err"
  local rc=$?
  echo "--- $name native: rc=$rc"; cat "$base.native"
  if [ "$rc" -ne 0 ]; then fail "$name: the native run failed"; tail -15 "$base.native.err"; return; fi
  # FW_EXTRA_TOOLS="launchlate ...": more tools, whose runs must leave the output identical too
  for t in kcount memtrace threadhist ${FW_EXTRA_TOOLS:-}; do
    local s; s=$(date +%s%N)
    # shellcheck disable=SC2046
    env $(caches "$WORK/$name/$t") CUBPF_CACHE="$WORK/$name/cubpf-$t.db" \
      "$CUBPF" run $backend -t "$t" --json -- sh -c "exec $cmd > '$base.$t.app'" >"$base.$t.json" 2>"$base.$t.err"
    rc=$?
    echo "RESULT frameworks $name $t: rc=$rc ms=$(( ($(date +%s%N) - s) / 1000000 ))"
    [ "$rc" -eq 0 ] || { fail "$name under $t: rc=$rc"; tail -20 "$base.$t.err"; }
    same_output "$name" "$t" "$base.$t.app"
  done
  $CHECK kcount "$name" "$base.kcount.json" "$base.native" || failed=$((failed + 1))
  $CHECK memtrace "$name" "$base.memtrace.json" "$base.native" || failed=$((failed + 1))
  $CHECK threadhist "$name" "$base.threadhist.json" "$base.kcount.json" || failed=$((failed + 1))
  # Deliver 3: the framework caches written under cubpf, then reused natively.
  $CHECK scan "$name" "$WORK/$name/kcount" "$WORK/$name/memtrace" "$WORK/$name/threadhist" ||
    failed=$((failed + 1))
  # shellcheck disable=SC2046
  env $(caches "$WORK/$name/kcount") $cmd >"$base.after" 2>"$base.after.err"
  same_output "$name" "native-after-cubpf-caches" "$base.after"
  grep -h '^cubpf: ' "$base.kcount.err" | head -5
}

for name in "$@"; do one "$name"; done
echo "RESULT frameworks $*: $failed failed"
[ "$failed" -eq 0 ]
