#!/usr/bin/env bash
# Short libFuzzer run of every fuzz target ($3...), $2 seconds each, seeded from
# tests/fuzz/corpus/TARGET when present.  Writes "PASSED FAILED" (targets) to $1.
set -u
summary=$1; secs=$2; shift 2
passed=0; failed=0
mkdir -p "$(dirname "$summary")"
for t in "$@"; do
  name=$(basename "$t")
  work=$(mktemp -d)
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds+=("tests/fuzz/corpus/$name")
  if "$t" -max_total_time="$secs" -rss_limit_mb=2048 -artifact_prefix="$work/" "$work" "${seeds[@]}" \
       >"$work/log" 2>&1; then
    echo "fuzz $name: ok ($(grep -o 'Done [0-9]* runs' "$work/log" | tail -1))"
    passed=$((passed + 1))
  else
    echo "fuzz $name: FAILED"; tail -40 "$work/log"
    failed=$((failed + 1))
  fi
  rm -rf "$work"
done
echo "$passed $failed" >"$summary"
echo "== fuzz: $passed passed, $failed failed =="
[ "$failed" -eq 0 ]
