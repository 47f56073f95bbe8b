#!/usr/bin/env bash
# `make gpu-test`: every GPU test, on the GPU machine, from prebuilt binaries in $BUILD.
# Each test script tests/gpu/t_*.sh prints its own lines and exits non-zero on failure; its log
# goes to $BUILD/gpu-out/NAME.log.  When $OUT is set (the device tool's output folder, which
# takes few files), all logs are packed into $OUT/gpu-test-logs.tar.gz.
# TESTS="t_a t_b" runs a subset.
set -u
BUILD=${BUILD:-build}; export BUILD
dest=${OUT:-}
OUT=$BUILD/gpu-out; export OUT
rm -rf "$OUT"; mkdir -p "$OUT"
echo "gpu-test: $(date -u +%Y-%m-%dT%H:%MZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
passed=0; failed=0
for t in tests/gpu/t_*.sh; do
  [ -e "$t" ] || continue
  name=$(basename "$t" .sh)
  if [ -n "${TESTS:-}" ] && ! [[ " $TESTS " == *" $name "* ]]; then continue; fi
  start=$(date +%s)
  # a hung test must not eat the whole device call: each gets TEST_TIMEOUT seconds (300)
  if timeout "${TEST_TIMEOUT:-300}" bash "$t" >"$OUT/$name.log" 2>&1; then passed=$((passed + 1)); echo "ok   $name ($(( $(date +%s) - start ))s)"
  else failed=$((failed + 1)); echo "FAIL $name ($(( $(date +%s) - start ))s)"; tail -40 "$OUT/$name.log"; fi
  grep -E '^(RESULT|FIGURE)' "$OUT/$name.log" | sed 's/^/     /'
done
echo "gpu-test: $passed passed, $failed failed"
if [ -n "$dest" ]; then tar -czf "$dest/gpu-test-logs.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")"; fi
[ "$failed" -eq 0 ]
