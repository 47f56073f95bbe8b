#!/usr/bin/env bash
# Adds up the phase summaries written by run-tests.sh and fuzz/smoke.sh; a missing summary
# means the phase did not run (build failure) and counts as a failure.
set -u
passed=0; failed=0
for s in "$@"; do
  if [ -f "$s" ]; then
    read -r p f <"$s"
    passed=$((passed + p)); failed=$((failed + f))
  else
    echo "!! no results from $s (the phase failed to build or run)"
    failed=$((failed + 1))
  fi
done
echo "Total: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
