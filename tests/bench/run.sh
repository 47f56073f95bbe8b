#!/usr/bin/env bash
# `make bench`: every benchmark tests/bench/b_*.sh (on the GPU machine where it needs one).
# Each prints its figures; lines starting with RESULT are collected at the end.  Logs go to
# $BUILD/bench-out/NAME.log, packed into $OUT/bench-logs.tar.gz when $OUT is set.
# BENCHES="b_a b_b" runs a subset.
set -u
BUILD=${BUILD:-build}; export BUILD
dest=${OUT:-}
OUT=$BUILD/bench-out; export OUT
rm -rf "$OUT"; mkdir -p "$OUT"
echo "bench: $(date -u +%Y-%m-%dT%H:%MZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'no GPU')"
rc=0
for b in tests/bench/b_*.sh; do
  [ -e "$b" ] || continue
  name=$(basename "$b" .sh)
  if [ -n "${BENCHES:-}" ] && ! [[ " $BENCHES " == *" $name "* ]]; then continue; fi
  echo "== $name"
  # a hung benchmark must not eat the whole device call: BENCH_TIMEOUT seconds each (300)
  if ! timeout "${BENCH_TIMEOUT:-300}" bash "$b" >"$OUT/$name.log" 2>&1; then rc=1; echo "FAIL $name"; tail -20 "$OUT/$name.log"; fi
  grep -E '^RESULT' "$OUT/$name.log" | sed 's/^/   /'
done
if [ -n "$dest" ]; then tar -czf "$dest/bench-logs.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")"; fi
exit $rc
