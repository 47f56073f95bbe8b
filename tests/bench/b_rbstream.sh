#!/usr/bin/env bash
# kernelretsnoop's stream: one 48-byte record per thread exit through the GPU ring buffer in
# pinned host memory (batches of a warp's records, cubpf_abi.h: 48.5 ring bytes a record for a
# full warp), against the device-to-host copy bandwidth measured by the same program
# (tests/cuda/tools_rbstream.cu).  Delivered bandwidth = records the host took x 56 bytes (48 of
# payload + the 8-byte header of the layout before batches, kept so that figures compare across
# layouts; payload alone is 48/56 of it) / GPU time of the launches that produced them (the
# program's CUDA events; the
# untimed first launch is counted at the timed launches' mean).  Target: >= 50% of the copy
# bandwidth.  Also the app's kernel time natively vs under kernelretsnoop.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
BIN=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/tools_rbstream
CUBPF=$BUILD/bin/cubpf
THREADS=${RB_THREADS:-1048576}
REPS=${RB_REPS:-10}
if [ ! -x "$BIN" ] || [ ! -x "$CUBPF" ]; then echo "b_rbstream: missing $BIN or $CUBPF"; exit 1; fi
"$BIN" "$THREADS" "$REPS" >"$OUT/rbstream.native" 2>&1 || { echo "FAIL native run"; cat "$OUT/rbstream.native"; exit 1; }
"$CUBPF" run -t kernelretsnoop -l info -o "$OUT/rbstream.trace" -- "$BIN" "$THREADS" "$REPS" \
  >"$OUT/rbstream.tool" 2>"$OUT/rbstream.err" || { echo "FAIL under kernelretsnoop"; tail -20 "$OUT/rbstream.err"; exit 1; }
val() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
d2h=$(val d2h_gbs "$OUT/rbstream.tool"); kms=$(val kernel_ms "$OUT/rbstream.tool")
nms=$(val kernel_ms "$OUT/rbstream.native"); launches=$(val launches "$OUT/rbstream.tool")
taken=$(grep -o 'ring buffer events: [0-9]* records taken' "$OUT/rbstream.err" | awk '{s += $4} END {print s + 0}')
dropped=$(grep -o 'records taken, [0-9]* dropped' "$OUT/rbstream.err" | awk '{s += $3} END {print s + 0}')
if [ -z "$d2h" ] || [ -z "$kms" ] || [ -z "$nms" ]; then echo "FAIL: no figures"; cat "$OUT/rbstream.tool"; exit 1; fi
awk -v d2h="$d2h" -v kms="$kms" -v nms="$nms" -v l="$launches" -v taken="$taken" -v drop="$dropped" \
    -v n="$THREADS" 'BEGIN {
  gbs = taken * 56 / (kms * l * 1e-3) / 1e9; offered = n * 56 / (kms * 1e-3) / 1e9
  printf "records: %d taken, %d dropped (%d produced)\n", taken, drop, n * l
  printf "kernel: %.4f ms native, %.4f ms under kernelretsnoop (%.2fx)\n", nms, kms, kms / nms
  printf "device-to-host copy %.2f GB/s; offered %.2f GB/s; delivered %.2f GB/s = %.1f%% of the copy bandwidth\n",
         d2h, offered, gbs, 100 * gbs / d2h
  printf "RESULT b_rbstream delivered_gbs=%.2f d2h_gbs=%.2f fraction=%.3f dropped=%d slowdown=%.2fx target>=0.5 %s\n",
         gbs, d2h, gbs / d2h, drop, kms / nms, (gbs / d2h >= 0.5 ? "met" : "missed") }'
