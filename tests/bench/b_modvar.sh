#!/usr/bin/env bash
# What one module-scope variable costs a module load: tests/cuda/tools_known.cu compiled to an
# sm_90 cubin as it is, with one __constant__ and with one __device__ variable that a kernel
# reads (the instrumented modules declare their map pointers as such variables,
# ptx-rewriter/ptx.h), each loaded by tests/bench/modload_bench.c in a fresh process (medians of
# REPS, default 9).  Built here with the GPU machine's nvcc: no other input.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
REPS=${REPS:-9}
BIN=$BUILD/bench/modload_bench
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
TMP=$OUT/modvar
rm -rf "$TMP"; mkdir -p "$TMP"
[ -x "$BIN" ] || { echo "b_modvar: missing $BIN"; exit 1; }
export CUDA_CACHE_DISABLE=1 CUDA_MODULE_LOADING=EAGER
src=tests/cuda/tools_known.cu
read_var='x[i] = x[i] * 0.5f + 1.0f + (float)cubpf_var;'
sed "s/^__global__ void tools_hist(/__constant__ unsigned long long cubpf_var;\n&/; s/x\[i\] = x\[i\] \* 0.5f + 1.0f;/$read_var/" "$src" >"$TMP/const.cu"
sed 's/__constant__ unsigned long long cubpf_var/__device__ unsigned long long cubpf_var/' "$TMP/const.cu" >"$TMP/device.cu"
cp "$src" "$TMP/plain.cu"
for v in plain const device; do
  "$NVCC" -I tests/cuda -cubin -arch=sm_90 -o "$TMP/$v.cubin" "$TMP/$v.cu" || { echo "FAIL nvcc $v"; exit 1; }
done
grep -q cubpf_var "$TMP/const.cu" || { echo "FAIL: the variable was not added"; exit 1; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A med
for v in plain const device; do
  for r in $(seq "$REPS"); do "$BIN" "$TMP/$v.cubin" | awk '/^load_us/ {print $2}'; done >"$TMP/$v.times"
  med[$v]=$(median <"$TMP/$v.times")
done
echo "RESULT b_modvar load of tools_known as an sm_90 cubin: plain ${med[plain]} us, one __constant__ variable ${med[const]} us, one __device__ variable ${med[device]} us (medians of $REPS fresh processes)"
