#!/usr/bin/env bash
# Benchmark (CPU; meant for the GPU machine's host, whose cores the shim's trace writer uses):
# store/'s trace writer ingesting probe-like events (72-byte kernelretsnoop-shaped ring-buffer
# samples) for 3 s per setting, with 1, 2, 4 and 8 compressing threads and 1 or 4 producers;
# then the module cache: lookup time of a hit on a 400 KiB PTX + 250 KiB cubin entry, and 8
# processes storing and looking up modules in one database at once.
# Targets: trace ingest >= 1000 MB/s of raw events written (not dropped); prints whether met.
# Needs $BUILD/bench/store_bench (make bench-build).
set -u
BUILD=${BUILD:-build}; OUT=${OUT:-$BUILD/bench-out}; mkdir -p "$OUT"
BENCH=$BUILD/bench/store_bench
[ -x "$BENCH" ] || { echo "FAIL: $BENCH missing (run make bench-build where it is built)"; exit 1; }
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/b_store.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rc=0; best=0
for producers in 1 4; do
  for workers in 1 2 4 8; do
    echo "-- trace ingest: $producers producer(s), $workers compressing thread(s)"
    if ! "$BENCH" trace -t "$producers" -w "$workers" -s 3 -o "$tmp/t.cubpf" >"$tmp/log" 2>&1; then
      cat "$tmp/log"; echo "FAIL: store_bench trace"; rc=1; continue
    fi
    cat "$tmp/log"
    w=$(sed -n 's/.*written_raw_MBps=\([0-9]*\).*/\1/p' "$tmp/log")
    [ -n "$w" ] && [ "$w" -gt "$best" ] && best=$w
    rm -f "$tmp/t.cubpf"
  done
done
echo "-- cache"
"$BENCH" cache -n 200 -o "$tmp/cache.db" || { echo "FAIL: store_bench cache"; rc=1; }
# issue 17: 8 processes on one database, a store waiting 5 ms at most for another's (the shim's
# default): a lookup never waits for a write; the figures say how long loads took and how many
# stores were given up (stored by a later load)
echo "-- cache, 8 processes at once"
"$BENCH" procs -t 8 -n 100 -w 5 -o "$tmp/procs.db" || { echo "FAIL: store_bench procs"; rc=1; }
if [ "$best" -ge 1000 ]; then
  echo "RESULT trace_ingest_best written_raw_MBps=$best target>=1000: met"
else
  echo "RESULT trace_ingest_best written_raw_MBps=$best target>=1000: NOT met"
fi
exit $rc
