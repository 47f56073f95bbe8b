#!/usr/bin/env bash
# Loading cubins whose PTX is embedded (.nv_debug_ptx_txt, issue 15): the cubins Triton and
# Inductor compile, taken from fresh caches of tests/gpu/apps/triton_app.py and inductor_app.py
# run on this machine, loaded by tests/bench/modload_bench.c (one cuModuleLoadData in a fresh
# process, after a warm-up load) in three variants, interleaved, REPS runs each (default 7),
# medians kept:
#   native  no shim;
#   cold    the shim with the kcount probe and an empty module cache: PTX read out of the
#           cubin, rewritten, JIT-compiled with the recorded options, stored;
#   hit     the shim with the kcount probe and the cache filled: no rewrite, no JIT.
# CUDA_CACHE_DISABLE=1 and CUDA_MODULE_LOADING=EAGER as in b_modload.sh.  Prints FIGURE lines;
# fails when a variant fails or when the cold load did not instrument (the shim's log says why).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
REPS=${REPS:-7}
BIN=$BUILD/bench/modload_bench
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
PROBE=$(cd "$BUILD/probes" 2>/dev/null && pwd)/kcount.bpf.o
PY=${PYTHON:-python3}
TMP=$OUT/embedded
rm -rf "$TMP"; mkdir -p "$TMP"
for f in "$BIN" "$PROBE"; do [ -e "$f" ] || { echo "b_embedded: missing $f (make bench-build)"; exit 1; }; done
echo "b_embedded: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $REPS runs per variant"

# The images: Triton's add_kernel, and Inductor's largest cubin.
TRITON_CACHE_DIR=$TMP/triton $PY tests/gpu/apps/triton_app.py >/dev/null 2>"$TMP/triton.err" ||
  { echo "FAIL b_embedded: triton_app failed"; tail -5 "$TMP/triton.err"; exit 1; }
TORCHINDUCTOR_CACHE_DIR=$TMP/inductor TRITON_CACHE_DIR=$TMP/inductor/triton \
  $PY tests/gpu/apps/inductor_app.py >/dev/null 2>"$TMP/inductor.err" ||
  { echo "FAIL b_embedded: inductor_app failed"; tail -5 "$TMP/inductor.err"; exit 1; }
triton=$(find "$TMP/triton" -name '*.cubin' | head -1)
inductor=$(find "$TMP/inductor" -name '*.cubin' -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2)

export CUDA_CACHE_DISABLE=1 CUDA_MODULE_LOADING=EAGER
failed=0
one() { # IMAGE VARIANT DB LOG: prints the load time in us
  case $2 in
    native) "$BIN" "$1" >"$4.out" 2>"$4.err" ;;
    *) env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
         CUBPF_PROGRAMS="$PROBE" CUBPF_CACHE="$3" "$BIN" "$1" >"$4.out" 2>"$4.err" ;;
  esac || { echo "FAIL $2 $(basename "$1"): $(tail -2 "$4.err")" >&2; return; }
  awk '/^load_us/ {print $2}' "$4.out"
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for name in triton inductor; do
  img=${!name}
  if [ -z "$img" ]; then echo "FAIL b_embedded: no $name cubin in its cache"; failed=$((failed + 1)); continue; fi
  ptxtxt=$(grep -c -a 'nv_debug_ptx_txt' "$img")
  hitdb=$TMP/$name.hit.db; colddb=$TMP/$name.cold.db
  one "$img" cold "$hitdb" "$TMP/$name.fill" >/dev/null
  grep -E 'live: .*(instrumented|not instrument|cannot|PTX)' "$TMP/$name.fill.err" | head -3 | cut -c1-240 | sed 's/^/    /'
  if ! grep -q 'live: .*instrumented [1-9]' "$TMP/$name.fill.err"; then
    echo "FAIL b_embedded $name: the cold load did not instrument the kernel"; failed=$((failed + 1))
  fi
  for v in native cold hit; do : >"$TMP/$name.$v.times"; done
  for r in $(seq "$REPS"); do
    for v in native cold hit; do
      rm -f "$colddb" "$colddb-wal" "$colddb-shm"
      db=$hitdb; [ "$v" = cold ] && db=$colddb
      t=$(one "$img" "$v" "$db" "$TMP/$name.$v")
      if [ -z "$t" ]; then failed=$((failed + 1)); continue; fi
      echo "$t" >>"$TMP/$name.$v.times"
    done
  done
  grep -m1 'cache:' "$TMP/$name.hit.err" | sed 's/^/    /'
  n=$(median <"$TMP/$name.native.times"); c=$(median <"$TMP/$name.cold.times"); h=$(median <"$TMP/$name.hit.times")
  echo "FIGURE embedded_load $name ($(stat -c %s "$img") B, .nv_debug_ptx_txt: $ptxtxt): native ${n:-?} us, first load (rewrite + JIT) ${c:-?} us, cache hit ${h:-?} us; hit/native $(awk -v a="${h:-0}" -v b="${n:-0}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')x, cold/native $(awk -v a="${c:-0}" -v b="${n:-0}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')x (medians of $REPS)"
done
echo "RESULT embedded_load failures=$failed"
[ "$failed" -eq 0 ]
