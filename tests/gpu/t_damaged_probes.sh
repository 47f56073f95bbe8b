#!/usr/bin/env bash
# Issue 14, on the GPU: a damaged or hostile probe object never harms the application.  A real
# CUDA program (tests/cuda/vecadd.cu) runs natively, then under the shim with CUBPF_PROGRAMS
# naming one damaged object at a time: the BTF-cycle seeds of tests/fuzz/corpus/fuzz_shim_load and
# objects made here from a good probe (tests/live/probes/count.bpf.o): truncated at 24 lengths,
# 24 with random bytes overwritten (fixed seed), an empty file, ELF magic alone, a missing path.
# Each run must exit as the native run did with the same stdout, and the log must name the
# object with a refusal (one warning).  Then each damaged object beside a good one (the bundled
# kcount probe, which attaches to every kernel; count.bpf.o attaches to live_* kernels only):
# the good one must still instrument the program's kernels.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
APP=$BUILD/gpu/safety_vecadd
GOOD=$BUILD/live-probes/count.bpf.o
BESIDE=$BUILD/probes/kcount.bpf.o
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
W=$OUT/damaged; rm -rf "$W"; mkdir -p "$W"
failed=0; runs=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
if [ ! -x "$APP" ] || [ ! -f "$GOOD" ] || [ ! -f "$BESIDE" ]; then echo "FAIL missing $APP, $GOOD or $BESIDE"; exit 1; fi

cp tests/fuzz/corpus/fuzz_shim_load/btf_*.elf "$W/" 2>/dev/null
python3 - "$GOOD" "$W" <<'EOF'
import os, random, sys
good, w = sys.argv[1], sys.argv[2]
data = open(good, 'rb').read()
rng = random.Random(14)
for i in range(24):
    n = rng.randrange(1, len(data))
    open(os.path.join(w, 'trunc%02d.o' % i), 'wb').write(data[:n])
for i in range(24):
    b = bytearray(data)
    for _ in range(rng.randrange(1, 16)):
        at = rng.randrange(len(b))
        b[at] = rng.randrange(256)
    open(os.path.join(w, 'flip%02d.o' % i), 'wb').write(bytes(b))
open(os.path.join(w, 'empty.o'), 'wb').write(b'')
open(os.path.join(w, 'magic.o'), 'wb').write(b'\x7fELF')
EOF

"$APP" >"$W/native.out" 2>"$W/native.err"; nrc=$?
echo "RESULT damaged_probes native: rc=$nrc"
[ "$nrc" -eq 0 ] || fail "native run rc=$nrc"

# under PROGRAMS NAME: the program under the shim with CUBPF_PROGRAMS=PROGRAMS
under() {
  LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_PROGRAMS="$1" \
    CUBPF_LOG=info CUBPF_CACHE="$W/cache.db" timeout -s KILL 120 "$APP" >"$W/$2.out" 2>"$W/$2.err"
  rc=$?; runs=$((runs + 1))
}

objs=$(cd "$W" && ls *.o *.elf 2>/dev/null) 
refused=0; instrumented_beside=0; n=0
for o in $objs missing.o; do
  n=$((n + 1)); name=${o%.*}
  under "$W/$o" "$name"
  if [ "$rc" -ne "$nrc" ] || ! cmp -s "$W/native.out" "$W/$name.out"; then
    fail "$o alone: rc=$rc (native $nrc), stdout $(cmp -s "$W/native.out" "$W/$name.out" && echo same || echo DIFFERENT)"
    tail -5 "$W/$name.err"
  fi
  # A damaged object is refused (loader or checker), or loads and has its programs rejected by
  # the verifier; either way the log names it.  A flip may leave a still-valid object: then it
  # runs as a probe, which is fine as long as the output is the same.
  grep -q "$o" "$W/$name.err" && refused=$((refused + 1))
  under "$W/$o:$BESIDE" "$name.beside"
  if [ "$rc" -ne "$nrc" ] || ! cmp -s "$W/native.out" "$W/$name.beside.out"; then
    fail "$o beside the good object: rc=$rc, stdout differs or run failed"; tail -5 "$W/$name.beside.err"
  fi
  grep -q "live: .*instrumented [1-9]\|live: cache hit for .*([1-9][0-9]* kernel" "$W/$name.beside.err" &&
    instrumented_beside=$((instrumented_beside + 1))
done
echo "RESULT damaged_probes objects=$n runs=$runs named_in_log=$refused good_beside_instrumented=$instrumented_beside failures=$failed"
[ "$instrumented_beside" -eq "$n" ] || fail "the good object instrumented in $instrumented_beside of $n runs beside a damaged one"
[ "$failed" -eq 0 ]
