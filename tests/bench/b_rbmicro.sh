#!/usr/bin/env bash
# What each step of a GPU ring buffer producer costs the SMs (tests/cuda/tools_rbmicro.cu): a
# warp's batch written to pinned host memory (with and without the system fence) or to device
# memory, and the leader's read of, or system-scope add to, a word of pinned memory against an
# add in device memory; a kernel of 2^20 threads (32768 warps) and one of 2^23.  The layout of
# ptx-rewriter/layout.h follows from these (first measured on an H100, 2026-11-24: batches
# 45 GB/s to pinned memory; per warp, a pinned read 6.4 ns, a pinned add 10.5 ns, a device add
# 0.3 ns).
set -u
BUILD=${BUILD:-build}
BIN=$BUILD/gpu/tools_rbmicro
[ -x "$BIN" ] || { echo "b_rbmicro: missing $BIN"; exit 1; }
echo "b_rbmicro: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
for n in 1048576 8388608; do
  "$BIN" "$n" 30 | while read -r tag mode ms unit gbs rest; do
    warps=$((n / 32))
    echo "$tag $mode $ms $unit $gbs $rest"
    echo "RESULT b_rbmicro threads=$n $mode: $ms ms, $(awk -v m="$ms" -v w="$warps" 'BEGIN { printf "%.2f", m * 1e6 / w }') ns per warp, $gbs GB/s of batches"
  done
done
