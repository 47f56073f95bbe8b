#!/usr/bin/env bash
# `make gpu-test`: every GPU test, on the GPU machine, from prebuilt binaries in $BUILD.
# Each test script tests/gpu/t_*.sh prints its own lines and exits non-zero on failure.
# Logs go to $OUT (the device tool's output folder) when set.
set -u
BUILD=${BUILD:-build}; export BUILD
OUT=${OUT:-$BUILD/gpu-out}; export OUT
mkdir -p "$OUT"
passed=0; failed=0
for t in tests/gpu/t_*.sh; do
  [ -e "$t" ] || continue
  name=$(basename "$t" .sh)
  echo "== $name"
  if bash "$t" >"$OUT/$name.log" 2>&1; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; tail -30 "$OUT/$name.log"; fi
done
echo "gpu-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
