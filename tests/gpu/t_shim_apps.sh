#!/usr/bin/env bash
# The shim under real applications: each program runs without the shim and with it
# (LD_LIBRARY_PATH=$BUILD/lib, CUBPF_LOG=info); their stdout must be identical, both must
# succeed, and the shim's log must list module loads and launches.
#   shim_app (nvcc, runtime + driver API, streams, graphs), PyTorch, CuPy, Triton, JAX,
#   and shim_app again with CUBPF_DISABLE=1 (pure pass-through: no cubpf lines at all).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
APP=$BUILD/gpu/shim_app
export CUBLAS_WORKSPACE_CONFIG=:4096:8 XLA_PYTHON_CLIENT_PREALLOCATE=false
failed=0

# run_pair NAME EXTRA_ENV CMD...: runs CMD natively and under the shim (with EXTRA_ENV).
run_pair() {
  local name=$1 extra=$2; shift 2
  local base=$OUT/shim_$name
  "$@" >"$base.native.out" 2>"$base.native.err"; local rc1=$?
  env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info $extra \
    "$@" >"$base.shim.out" 2>"$base.shim.err"; local rc2=$?
  local loads launches same=no
  loads=$(grep -c '^cubpf: load ' "$base.shim.err")
  launches=$(sed -n 's/^cubpf: summary: [^)]*), \([0-9]*\) launches of.*/\1/p' "$base.shim.err" | tail -1)
  cmp -s "$base.native.out" "$base.shim.out" && same=yes
  echo "RESULT shim_apps $name: native_rc=$rc1 shim_rc=$rc2 identical_stdout=$same module_loads=$loads launches=${launches:-none}"
  if [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ] || [ "$same" != yes ]; then
    echo "FAIL $name"; failed=$((failed + 1))
    echo "--- native stdout"; cat "$base.native.out"; echo "--- native stderr (tail)"; tail -15 "$base.native.err"
    echo "--- shim stdout"; cat "$base.shim.out"; echo "--- shim stderr (tail)"; tail -25 "$base.shim.err"
    return 1
  fi
  echo "--- $name stdout (same both ways)"; cat "$base.shim.out"
  echo "--- $name shim log: first module loads and the summary"
  grep '^cubpf: load ' "$base.shim.err" | head -8
  sed -n '/^cubpf: summary/,$p' "$base.shim.err" | head -12
  return 0
}

# expect NAME PATTERN WHAT: the shim log of NAME must contain PATTERN (extended regexp).
expect() {
  if grep -Eq "$2" "$OUT/shim_$1.shim.err"; then echo "ok   $1: $3"
  else echo "FAIL $1: $3 (no line matching '$2' in the shim log)"; failed=$((failed + 1)); fi
}

if [ -x "$APP" ]; then
  if run_pair shim_app "" "$APP"; then
    expect shim_app '^cubpf: load cuLibraryLoadData (fatbin|fatbin-wrapper) ' "the runtime's fatbin load is seen"
    expect shim_app '^cubpf: load cuModuleLoadData PTX .*1 kernel, 0 cubins, PTX available' "the driver-API PTX module is seen"
    expect shim_app '^cubpf: load cuLibraryLoadData PTX ' "the driver-API PTX library is seen"
    expect shim_app '^cubpf: +4  _Z3mixPKjPjji$' "4 runtime launches of mix (streams)"
    expect shim_app '^cubpf: +3  _Z9incrementPji$' "3 captured launches of increment"
    expect shim_app '^cubpf: +3  add_index$' "3 driver launches of add_index (CUfunction, CUkernel, Ex)"
    expect shim_app ', 7 graph launches$' "7 graph launches (5 runtime, 2 driver)"
  fi
  run_pair shim_app_disabled "CUBPF_DISABLE=1" "$APP"
  if grep -q '^cubpf:' "$OUT/shim_shim_app_disabled.shim.err"; then
    echo "FAIL shim_app_disabled: CUBPF_DISABLE=1 printed cubpf lines"; failed=$((failed + 1))
  else echo "ok   shim_app_disabled: no cubpf output in pass-through"; fi
else
  echo "FAIL shim_app: $APP missing (build it with make on the build machine)"; failed=$((failed + 1))
fi

PY=${PYTHON:-python3}
for app in torch cupy triton jax; do
  if run_pair "$app" "" "$PY" "tests/gpu/apps/${app}_app.py"; then
    expect "$app" '^cubpf: (load |summary)' "the shim was loaded and saw the program"
  fi
done
expect torch '^cubpf: load cuLibraryLoadData ' "PyTorch's fatbins are seen"
expect cupy '^cubpf: load cu(ModuleLoadData|ModuleLoadDataEx|LibraryLoadData) (cubin|PTX|fatbin)' "CuPy's RawKernel module is seen"
expect triton '^cubpf: load cu(ModuleLoadData|ModuleLoadDataEx|LibraryLoadData) (cubin|PTX|fatbin)' "Triton's module is seen"
expect jax '^cubpf: load cu(ModuleLoad|LibraryLoad)' "XLA's modules are seen"

echo "RESULT shim_apps failures=$failed"
[ "$failed" -eq 0 ]
