#!/usr/bin/env bash
# Runs cmocka test programs, one after the other, and writes "PASSED FAILED" totals to $1.
# A program that dies without printing cmocka's summary counts as one failure.
set -u
summary=$1; shift
passed=0; failed=0
mkdir -p "$(dirname "$summary")"
for t in "$@"; do
  name=$(basename "$t")
  log=$(mktemp)
  echo "-- $name"
  "$t" >"$log" 2>&1
  rc=$?
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  rm -f "$log"
  if [ -z "$p" ] && [ -z "$f" ]; then
    echo "!! $name exited with status $rc without a cmocka summary"
    failed=$((failed + 1)); continue
  fi
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ "$rc" -ne 0 ] && [ -z "$f" ]; then failed=$((failed + 1)); fi
done
echo "$passed $failed" >"$summary"
echo "== $(basename "$(dirname "$summary")"): $passed passed, $failed failed =="
[ "$failed" -eq 0 ]
