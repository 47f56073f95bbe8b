#!/usr/bin/env bash
# Benchmark (CPU; no GPU needed): the host side of kernelretsnoop's stream.  Producer threads
# fill 8448 lanes of 7808 bytes (an H100's warp slots, 64 MiB) with batches of 32 48-byte records
# through the CPU model of the device producer (shim_live_rb_produce_batch) while the shim's drain
# path takes them into a real trace file in $TMPDIR.
# Prints records/s and MB/s taken (ring bytes: payload + its share of the batch header), ring
# drops, the trace writer's
# losses and the file's size, for the drain before batching (-m record) and the batched drain
# with 1, 2 and 4 drain threads; first the drain alone on full lanes (-F: no producer competing,
# wall and CPU ns per record).  The figure that matters on the GPU host is MB/s taken against
# the device-to-host bandwidth (b_rbstream.sh); here the producers share the CPU with the drain.
# Needs $BUILD/bench/rbdrain_bench (make bench-build).
set -u
BUILD=${BUILD:-build}; OUT=${OUT:-$BUILD/bench-out}; mkdir -p "$OUT"
BENCH=$BUILD/bench/rbdrain_bench
SECS=${RBDRAIN_SECONDS:-3}
PRODUCERS=${RBDRAIN_PRODUCERS:-2}
[ -x "$BENCH" ] || { echo "FAIL: $BENCH missing (run make bench-build)"; exit 1; }
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/b_rbdrain.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rc=0
run() {
  echo "-- rbdrain_bench $*"
  "$BENCH" -s "$SECS" -p "$PRODUCERS" -o "$tmp/t.cubpf" "$@" || { echo "FAIL: rbdrain_bench $*"; rc=1; }
}
fill() {
  echo "-- rbdrain_bench -F 200 $*"
  "$BENCH" -F 200 -o "$tmp/t.cubpf" "$@" || { echo "FAIL: rbdrain_bench -F $*"; rc=1; }
}
# the drain alone (lanes filled, then one timed pass), per record and batched, with and without
# the trace
fill -m record; fill -m batch; fill -m record -n; fill -m batch -n
# streaming: producers and drains at once
run -m record
for d in 1 2 4; do run -m batch -d "$d"; done
run -m batch -d 1 -n
exit $rc
