#!/usr/bin/env bash
# `make bench`: every benchmark tests/bench/b_*.sh, on the GPU machine where it needs one.
# Each prints a result block; tests/bench/RESULTS.md keeps them with device and date.
set -u
BUILD=${BUILD:-build}; export BUILD
OUT=${OUT:-$BUILD/bench-out}; export OUT
mkdir -p "$OUT"
rc=0
for b in tests/bench/b_*.sh; do
  [ -e "$b" ] || continue
  name=$(basename "$b" .sh)
  echo "== $name"
  bash "$b" 2>&1 | tee "$OUT/$name.log" || rc=1
done
exit $rc
