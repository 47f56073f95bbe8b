#!/usr/bin/env bash
# Overhead of the shim, measured against the real driver in the same run:
#   launch rate of an empty kernel and cost of a forwarded call (cuCtxGetCurrent), native and
#   through the shim in ONE process, interleaved (tests/bench/shim_bench.cu), in the default
#   mode and with CUBPF_DISABLE=1; then resident host memory (VmRSS) and device memory
#   (cuMemGetInfo) after the same workload, native vs through the shim, 5 processes each.
# Targets: launch rate >= 0.995 of native in each of B_SHIM_RUNS (5) timing runs in a row in the
# default mode (issue 31; >= 0.99 with CUBPF_DISABLE=1, one run), <= 5 ns added per forwarded
# call, <= 4 MB RSS added, no device memory added.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
BIN=$BUILD/gpu/shim_bench
SHIM=$(cd "$BUILD/lib" && pwd)/libcuda.so.1
REAL=${CUBPF_REAL_LIBCUDA:-/usr/local/nvidia/lib64/libcuda.so.1}
if [ ! -e "$REAL" ]; then
  REAL=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')
fi
if [ ! -x "$BIN" ] || [ ! -e "$SHIM" ] || [ -z "$REAL" ] || [ ! -e "$REAL" ]; then
  echo "b_shim: missing $BIN, $SHIM or the real driver ($REAL)"; exit 1
fi
echo "b_shim: real driver $REAL, shim $SHIM, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
missed=0

# check NAME VALUE OP LIMIT: prints and counts a target.
check() {
  if awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN { exit !((op == ">=") ? (v >= l) : (v <= l)) }'; then
    echo "TARGET $1 = $2 ($3 $4): met"
  else
    echo "TARGET $1 = $2 ($3 $4): MISSED"; missed=$((missed + 1))
  fi
}

RUNS=${B_SHIM_RUNS:-5}
for mode in default disabled; do
  n=$RUNS; lim=0.995
  if [ $mode = disabled ]; then export CUBPF_DISABLE=1; n=1; lim=0.99; else unset CUBPF_DISABLE; fi
  for run in $(seq 1 "$n"); do
    echo "== timing, shim in $mode mode, run $run of $n"
    CUBPF_REAL_LIBCUDA=$REAL "$BIN" time "$REAL" "$SHIM" | tee "$OUT/b_shim_time_$mode.txt"
    ratio=$(sed -n 's/^RESULT launch_rate_ratio \([0-9.]*\).*/\1/p' "$OUT/b_shim_time_$mode.txt")
    added=$(sed -n 's/^RESULT forwarded_call_added_ns \([-0-9.]*\).*/\1/p' "$OUT/b_shim_time_$mode.txt")
    if [ -z "$ratio" ] || [ -z "$added" ]; then echo "b_shim: timing run failed"; exit 1; fi
    echo "RESULT b_shim launch_rate_ratio[$mode] run $run: $ratio"
    check "launch_rate_ratio[$mode] run $run" "$ratio" ">=" "$lim"
    check "forwarded_call_added_ns[$mode] run $run" "$added" "<=" 5
  done
done
unset CUBPF_DISABLE

echo "== memory after the same workload (init, context, module, 1000 launches), 5 runs each"
: >"$OUT/b_shim_mem.txt"
for i in 1 2 3 4 5; do
  echo "native $("$BIN" mem "$REAL")" >>"$OUT/b_shim_mem.txt"
  echo "shim $(CUBPF_REAL_LIBCUDA=$REAL "$BIN" mem "$SHIM")" >>"$OUT/b_shim_mem.txt"
  echo "disabled $(CUBPF_DISABLE=1 CUBPF_REAL_LIBCUDA=$REAL "$BIN" mem "$SHIM")" >>"$OUT/b_shim_mem.txt"
done
cat "$OUT/b_shim_mem.txt"
# median FIELD KIND: the median of FIELD=... over the lines of KIND.
median() {
  grep "^$2 MEM" "$OUT/b_shim_mem.txt" | sed -n "s/.* $1=\([0-9]*\).*/\1/p" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
rss_n=$(median rss_kb native); rss_s=$(median rss_kb shim); rss_d=$(median rss_kb disabled)
free_n=$(median dev_free native); free_s=$(median dev_free shim); free_d=$(median dev_free disabled)
if [ -z "$rss_n" ] || [ -z "$rss_s" ] || [ -z "$free_n" ] || [ -z "$free_s" ]; then
  echo "b_shim: memory runs failed"; exit 1
fi
echo "VmRSS median: native ${rss_n} kB, shim ${rss_s} kB, shim disabled ${rss_d} kB"
echo "device free median: native ${free_n} B, shim ${free_s} B, shim disabled ${free_d} B"
rss_add=$(awk -v a="$rss_s" -v b="$rss_n" 'BEGIN { printf "%.2f", (a - b) / 1024 }')
rss_add_d=$(awk -v a="$rss_d" -v b="$rss_n" 'BEGIN { printf "%.2f", (a - b) / 1024 }')
dev_add=$(awk -v a="$free_n" -v b="$free_s" 'BEGIN { printf "%.0f", a - b }')
dev_add_d=$(awk -v a="$free_n" -v b="$free_d" 'BEGIN { printf "%.0f", a - b }')
echo "RESULT rss_added_mb[default] $rss_add"
echo "RESULT rss_added_mb[disabled] $rss_add_d"
echo "RESULT device_bytes_added[default] $dev_add"
echo "RESULT device_bytes_added[disabled] $dev_add_d"
check "rss_added_mb[default]" "$rss_add" "<=" 4
check "rss_added_mb[disabled]" "$rss_add_d" "<=" 4
check "device_bytes_added[default]" "$dev_add" "<=" 0
check "device_bytes_added[disabled]" "$dev_add_d" "<=" 0
echo "RESULT b_shim targets_missed=$missed"
[ "$missed" -eq 0 ]
