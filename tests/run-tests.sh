#!/usr/bin/env bash
# Runs cmocka test programs, one after the other, and writes "PASSED FAILED" totals to $1.
# A program that dies without printing cmocka's summary counts as one failure.
#
# A program that runs longer than TEST_PROGRAM_TIMEOUT seconds (default 900) is stopped and
# counts as a failure: a hang must show up as a failed test with its threads' stacks, never as
# CI running out of time with nothing said.  The stacks come from gdb when the machine has it.
set -u
summary=$1; shift
limit=${TEST_PROGRAM_TIMEOUT:-900}
passed=0; failed=0
mkdir -p "$(dirname "$summary")"

# Every thread's stack of pid $1 and of its descendants, when gdb is there.
dump_stacks() {
  local pid=$1 kid
  command -v gdb >/dev/null 2>&1 || { echo "   (no gdb here: no stacks)"; return; }
  for kid in $(pgrep -P "$pid"); do dump_stacks "$kid"; done
  echo "   -- stacks of process $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null))"
  timeout 60 gdb -batch -nx -p "$pid" -ex "thread apply all bt" 2>&1 | grep -E '^(Thread|#)'
}

# Runs "$@" with its output in $log; returns its status, or 124 after the limit.
run_watched() {
  "$@" >"$log" 2>&1 &
  local pid=$! waited=0   # in fifths of a second: short programs lose little to the watch
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge $((limit * 5)) ]; then
      echo "!! $name still running after ${limit} s: stopped (a hang); its stacks:"
      dump_stacks "$pid"
      pkill -KILL -P "$pid" 2>/dev/null
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      return 124
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  wait "$pid"
}

for t in "$@"; do
  name=$(basename "$t")
  log=$(mktemp)
  echo "-- $name"
  run_watched "$t"
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
