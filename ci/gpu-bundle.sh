#!/usr/bin/env bash
# Builds what the GPU machine needs into one folder (default build-gpu) and keeps only what its
# tests and benchmarks read: that machine has no clang and few headers, and the device tool
# carries at most 64 MiB.  Then, there:
#   BUILD=build-gpu CUBPF_SHARED=build-gpu/shared tests/gpu/run.sh      (TESTS="t_a t_b")
#   BUILD=build-gpu tests/bench/run.sh                                   (BENCHES="b_a b_b")
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-gpu}
shared=${SHARED:-../shared}
make --no-print-directory BUILD="$out" SHARED="$shared" -j"$(nproc)" all bench-build dist \
  "$out/tests/interposer/libcuda.so.1"
# the soundness fuzzer's programs with the interpreter's results, for t_ptx_safety on the GPU
# (sound is a clang ASan build: it runs here and does not travel)
make --no-print-directory BUILD="$out" SHARED="$shared" "$out/fuzz/sound"
rm -rf "$out/gpu/diff-sound"
"$out/fuzz/sound" -s 1 --ptxdiff 100 -W "$out/gpu/diff-sound" -q
mkdir -p "$out/shared"
rm -rf "$out/shared/bpf_conformance"
cp -r "$shared/bpf_conformance" "$out/shared/"
# intermediate files only: objects, dependency files, the sources of the bundled libraries
rm -rf "$out/obj" "$out/asan" "$out/fuzz" "$out/sqlite" "$out/zstd" "$out/gpu-out" "$out/bench-out" "$out/dist/stage"
find "$out" -name '*.d' -delete
size=$(du -sm "$out" | cut -f1)
echo "gpu-bundle: $out is $size MiB"
if [ "$size" -gt 60 ]; then
  echo "gpu-bundle: over 60 MiB: the device tool may refuse to carry it" >&2
  exit 1
fi
