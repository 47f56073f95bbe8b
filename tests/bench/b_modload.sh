#!/usr/bin/env bash
# Module load time with the module cache (shim/live/cache.c), tests/bench/modload_bench.c: one
# cuModuleLoadData of an image, timed inside a fresh process after a warm-up load (so the shim's
# per-process work -- cache database, device maps, clock calibration -- is not counted), for:
#   app: the device code of tests/cuda/tools_known.cu (5 kernels), a fatbin with sm_90 SASS +
#        compute_90 PTX (build/bench/modload_app.fatbin);
#   gen: 1000 generated kernels, same form (build/bench/modload_gen.fatbin);
#   appptx, genptx: the same modules as PTX only (build/bench/modload_*ptx.fatbin): a native
#        load is the driver's JIT, as for applications that ship PTX ("PTX-heavy" modules;
#        genptx: REPS_PTX runs, default 3).
# Variants, REPS runs each (default 7; cold REPS_COLD, default 2), interleaved, median kept:
#   native      no shim (the real driver loads the SASS);
#   passthrough the shim with CUBPF_DISABLE=1;
#   cold        the shim with the kcount probe and an empty cache: rewrite + driver JIT + put;
#   hit         the shim with the kcount probe and the cache filled: no rewrite, no JIT;
#   inst        no shim, the instrumented cubin a hit substitutes (read out of the cache): what
#               the driver alone takes for the bigger instrumented code.  hit / inst is the cost
#               of the cache itself (lookup, kernel ids, map pointers).
# Every variant runs with CUDA_CACHE_DISABLE=1 (the driver's own JIT cache would otherwise
# serve the cold runs after the first) and CUDA_MODULE_LOADING=EAGER (so that the load call does
# the loading rather than deferring it to the first launch).  Target: hit <= 1.2 x native.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
REPS=${REPS:-7}
BIN=$BUILD/bench/modload_bench
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
PROBE=$(cd "$BUILD/probes" 2>/dev/null && pwd)/kcount.bpf.o
TMP=$OUT/modload
rm -rf "$TMP"; mkdir -p "$TMP"
export CUDA_CACHE_DISABLE=1 CUDA_MODULE_LOADING=EAGER
for f in "$BIN" "$PROBE" "$BUILD/bench/modload_app.fatbin" "$BUILD/bench/modload_gen.fatbin" \
         "$BUILD/bench/modload_genptx.fatbin" "$BUILD/bench/modload_appptx.fatbin"; do
  [ -e "$f" ] || { echo "b_modload: missing $f (make bench-build on the build machine)"; exit 1; }
done
echo "b_modload: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $REPS runs per variant; CUDA_CACHE_DISABLE=1 CUDA_MODULE_LOADING=EAGER"
failed=0

# one IMAGE VARIANT DB: one fresh process; prints the load time in us (empty on failure).
one() {
  local img=$1 variant=$2 db=$3 log=$TMP/$(basename "$1" .fatbin).$2
  case $variant in
    native) "$BIN" "$img" >"$log.out" 2>"$log.err" ;;
    inst) MODLOAD_CUBIN_FROM="$db" "$BIN" "$img" >"$log.out" 2>"$log.err" ;;
    passthrough) env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_DISABLE=1 \
        "$BIN" "$img" >"$log.out" 2>"$log.err" ;;
    cold|hit) env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=${LOG:-info} \
        CUBPF_PROGRAMS="$PROBE" CUBPF_CACHE="$db" "$BIN" "$img" >"$log.out" 2>"$log.err" ;;
  esac
  local rc=$?
  [ "$rc" -eq 0 ] || { echo "FAIL $variant $(basename "$img"): rc=$rc $(tail -2 "$log.err")" >&2; return; }
  if [ "$variant" = hit ] && ! grep -q 'cache: 2 hits, 0 misses, 0 JIT compiles' "$log.err"; then
    echo "FAIL hit $(basename "$img"): not every load was a hit: $(grep -m1 'cache:' "$log.err")" >&2; return; fi
  if [ "$variant" = cold ] && ! grep -q 'cache: 0 hits, 2 misses, 2 JIT compiles' "$log.err"; then
    echo "FAIL cold $(basename "$img"): $(grep -m1 'cache:' "$log.err")" >&2; return; fi
  awk '/^load_us/ {print $2}' "$log.out"
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for name in ${MODLOAD_IMAGES:-app appptx gen genptx}; do
  img=$BUILD/bench/modload_$name.fatbin
  reps=$REPS; [ "$name" = genptx ] && reps=${REPS_PTX:-3}
  hitdb=$TMP/$name.hit.db; colddb=$TMP/$name.cold.db
  one "$img" cold "$hitdb" >/dev/null # fills the cache of the hit runs
  for v in native passthrough inst cold hit; do : >"$TMP/$name.$v.times"; done
  for r in $(seq "$reps"); do
    for v in native passthrough inst cold hit; do
      # a cold load of the generated module JITs for about 20 s: a few are enough
      [ "$v" = cold ] && [ "$r" -gt "${REPS_COLD:-2}" ] && continue
      rm -f "$colddb" "$colddb-wal" "$colddb-shm"
      db=$hitdb; [ "$v" = cold ] && db=$colddb
      t=$(one "$img" "$v" "$db")
      if [ -z "$t" ]; then failed=$((failed + 1)); continue; fi
      echo "$t" >>"$TMP/$name.$v.times"
    done
  done
  declare -A med
  for v in native passthrough inst cold hit; do med[$v]=$(median <"$TMP/$name.$v.times"); done
  kernels=$(awk '/^load_us/ {print $4; exit}' "$TMP/modload_$name.native.out")
  grep -m1 'cache hit for \(modload_k\|_Z\)' "$TMP/modload_$name.hit.err" | sed 's/^/    /'
  grep -m1 'cache miss for \(modload_k\|_Z\)' "$TMP/modload_$name.cold.err" | sed 's/^/    /'
  # where a hit's time goes (debug line of shim/live/module.c)
  LOG=debug one "$img" hit "$hitdb" >/dev/null
  grep 'cache hit: ' "$TMP/modload_$name.hit.err" | tail -1 | sed 's/^/    /'
  n=${med[native]:-0}
  hr=$(awk -v a="${med[hit]:-0}" -v b="$n" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  cr=$(awk -v a="${med[cold]:-0}" -v b="$n" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  pr=$(awk -v a="${med[passthrough]:-0}" -v b="$n" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  ir=$(awk -v a="${med[inst]:-0}" -v b="$n" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  hi=$(awk -v a="${med[hit]:-0}" -v b="${med[inst]:-0}" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  met=$(awk -v r="$hr" 'BEGIN { print ((r > 0 && r <= 1.2) ? "met" : "MISSED") }')
  echo "RESULT modload $name ($kernels kernels, $(stat -c %s "$img") B): native ${med[native]:-?} us, passthrough ${med[passthrough]:-?} us, instrumented cubin without the shim ${med[inst]:-?} us, cold ${med[cold]:-?} us, hit ${med[hit]:-?} us (medians of $reps, cold of at most ${REPS_COLD:-2})"
  form="SASS + PTX: the native load needs no JIT"; case $name in *ptx) form="PTX only: the native load is a JIT";; esac
  echo "RESULT modload $name ratios ($form): hit/native ${hr}x, cold/native ${cr}x, passthrough/native ${pr}x, instrumented-cubin/native ${ir}x, hit/instrumented-cubin ${hi}x; target hit <= 1.2x native: $met"
done
echo "RESULT modload failures=$failed"
[ "$failed" -eq 0 ]
