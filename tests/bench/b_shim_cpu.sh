#!/usr/bin/env bash
# The shim's own cost per call, without a GPU: the fake driver of tests/shim stands in for the
# real one (tests/bench/shim_cpubench.c); direct and through-the-shim calls interleaved.
set -u
BUILD=${BUILD:-build}
BIN=$BUILD/bench/shim_cpubench
SHIM=$(cd "$BUILD/lib" && pwd)/libcuda.so.1
FAKE=$(cd "$BUILD/tests" && pwd)/libcuda-fake.so
if [ ! -x "$BIN" ] || [ ! -e "$SHIM" ] || [ ! -e "$FAKE" ]; then
  echo "b_shim_cpu: missing $BIN, $SHIM or $FAKE (make bench-build and the shim tests)"; exit 1
fi
"$BIN" "$SHIM" "$FAKE"
