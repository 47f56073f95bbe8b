#!/usr/bin/env bash
# Short libFuzzer run of every fuzz target ($3...), $2 seconds each, seeded from
# tests/fuzz/corpus/TARGET when present.  Writes "PASSED FAILED" (targets) to $1.
set -u
summary=$1; secs=$2; shift 2
passed=0; failed=0
mkdir -p "$(dirname "$summary")"
# The soundness fuzzer (tests/fuzz/sound.c) is no libFuzzer target: a fixed seed and program
# count (deterministic, about 15 s under ASan), then the saved reproducers, which the verifier
# must now refuse (or run safely); then the differential check of a fixed seed's programs
# (sound --ptxdiff: interpreter against the CPU PTX simulator, about 20 s) and its reproducers,
# where undefined behaviour in the code generator is a failure too.
sound_smoke() {
  local t=$1 work=$2 ub=halt_on_error=1:print_stacktrace=1
  "$t" -q -s 1 -n "${SOUND_PROGRAMS:-40000}" -o "$work/found" >"$work/log" 2>&1 &&
    "$t" --replay tests/fuzz/sound-repro/*.txt >>"$work/log" 2>&1 &&
    UBSAN_OPTIONS=$ub "$t" -q -s 1 --ptxdiff "${SOUND_PTXDIFF:-150}" -o "$work/found" >>"$work/log" 2>&1 &&
    { ! compgen -G 'tests/fuzz/ptxdiff-repro/*.txt' >/dev/null ||
      UBSAN_OPTIONS=$ub "$t" --ptxdiff 1 --replay tests/fuzz/ptxdiff-repro/*.txt >>"$work/log" 2>&1; }
}

for t in "$@"; do
  name=$(basename "$t")
  work=$(mktemp -d)
  if [ "$name" = sound ]; then
    if sound_smoke "$t" "$work"; then
      echo "fuzz $name: ok ($(grep '^sound: seed' "$work/log"))"
      echo "fuzz $name --ptxdiff: ok ($(grep -m1 '^sound ptxdiff: seed' "$work/log"))"
      passed=$((passed + 1))
    else
      echo "fuzz $name: FAILED"; tail -40 "$work/log"
      failed=$((failed + 1))
    fi
    rm -rf "$work"
    continue
  fi
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds+=("tests/fuzz/corpus/$name")
  # -malloc_limit_mb: one allocation past 512 MiB is a failure (a reader must size what it
  # allocates by what its input can hold, never by a count or id the input declares)
  if "$t" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=512 -artifact_prefix="$work/" \
       "$work" "${seeds[@]}" >"$work/log" 2>&1; then
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
