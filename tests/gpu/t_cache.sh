#!/usr/bin/env bash
# The module cache on a real GPU (shim/live/cache.c): two programs, each run twice under the
# shim with a fresh cache database ($OUT/tmp/cache.db):
#   live_count (tests/cuda/live_count.cu) with tests/live/probes/count.bpf.c, and
#   tools_known (tests/cuda/tools_known.cu) with the bundled kcount probe (build/probes).
# First run: every instrumented module a miss, JIT compiles > 0.  Second run: every instrumented
# module a hit, 0 misses, 0 JIT compiles (cuLink calls).  Both runs print what the native run
# prints, and the probes' maps read back at exit are the same in both runs.  Then: a damaged
# database is a warning and a run as if there were no cache; a file that is not one is left
# untouched; CUBPF_CACHE=off compiles again.
# The driver's own JIT cache is off (CUDA_CACHE_DISABLE=1) so that no run leans on it.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
TMP=$OUT/tmp
rm -rf "$TMP"; mkdir -p "$TMP"
export CUDA_CACHE_DISABLE=1
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
pass() { echo "PASS $*"; }

APPS="live_count tools_known"
probe_of() {
  case $1 in
    live_count) echo "$(cd "$BUILD/live-probes" 2>/dev/null && pwd)/count.bpf.o" ;;
    tools_known) echo "$(cd "$BUILD/probes" 2>/dev/null && pwd)/kcount.bpf.o" ;;
  esac
}
for app in $APPS; do
  if [ ! -x "$BUILD/gpu/$app" ] || [ ! -e "$(probe_of "$app")" ]; then
    echo "FAIL missing $BUILD/gpu/$app or $(probe_of "$app") (build them with make on the build machine)"; exit 1; fi
done

# under APP NAME ENV...: the app under the shim with its probe; stdout/stderr to $TMP/APP.NAME.*
under() {
  local app=$1 name=$2; shift 2
  env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
    CUBPF_DUMP_MAPS=1 CUBPF_PROGRAMS="$(probe_of "$app")" "$@" "$BUILD/gpu/$app" \
    >"$TMP/$app.$name.out" 2>"$TMP/$app.$name.err"
}
# counter ERRFILE WHAT: a number from the exit counters line (hits, misses, JIT compiles, ...).
counter() { sed -n "s/^cubpf: live: .*cache: \([0-9]*\) hits, \([0-9]*\) misses, \([0-9]*\) JIT compiles.*/\1 \2 \3/p" "$1" | tail -1 | awk -v w="$2" '{ print (w == "hits") ? $1 : (w == "misses") ? $2 : $3 }'; }
modules() { sed -n 's/^cubpf: live: \([0-9]*\) modules instrumented.*/\1/p' "$1" | tail -1; }
# The probes' results in a stable order: kernel ids, and the maps of count.bpf.o (kcount's hold
# %globaltimer values, which differ from run to run: its kernel ids only).
results() {
  case $1 in
    *tools_known*) grep -E '^cubpf: live: kernel id ' "$1" | sort ;;
    *) grep -E '^cubpf: (map |live: kernel id )' "$1" | sort ;;
  esac
}

for app in $APPS; do
  db=$TMP/$app.cache.db
  "$BUILD/gpu/$app" >"$TMP/$app.native.out" 2>"$TMP/$app.native.err"; rc0=$?
  under "$app" first CUBPF_CACHE="$db"; rc1=$?
  under "$app" second CUBPF_CACHE="$db"; rc2=$?
  e1=$TMP/$app.first.err; e2=$TMP/$app.second.err
  h1=$(counter "$e1" hits); m1=$(counter "$e1" misses); j1=$(counter "$e1" jit)
  h2=$(counter "$e2" hits); m2=$(counter "$e2" misses); j2=$(counter "$e2" jit)
  n1=$(modules "$e1"); n2=$(modules "$e2")
  hitlines=$(grep -c '^cubpf: live: cache hit for ' "$e2"); misslines2=$(grep -c '^cubpf: live: cache miss for ' "$e2")
  echo "RESULT cache $app first: rc=$rc1 modules_instrumented=${n1:-?} hits=${h1:-?} misses=${m1:-?} jit_compiles=${j1:-?}"
  echo "RESULT cache $app second: rc=$rc2 modules_instrumented=${n2:-?} hits=${h2:-?} misses=${m2:-?} jit_compiles=${j2:-?} hit_lines=$hitlines"
  grep -E '^cubpf: live: (cache|cuLibraryLoadData|cuModuleLoad)' "$e1" | head -4 | sed 's/^/    first:  /'
  grep -E '^cubpf: live: cache' "$e2" | head -4 | sed 's/^/    second: /'
  if [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && cmp -s "$TMP/$app.native.out" "$TMP/$app.first.out" &&
     cmp -s "$TMP/$app.native.out" "$TMP/$app.second.out"; then
    pass "$app: output identical to the native run in both runs"
  else fail "$app: rc native=$rc0 first=$rc1 second=$rc2 or the output changed"
    diff "$TMP/$app.native.out" "$TMP/$app.second.out" | head -10; tail -5 "$e2"; fi
  if [ "${n1:-0}" -ge 1 ] && [ "${m1:-0}" -ge 1 ] && [ "${j1:-0}" -ge 1 ] && [ "${h1:-x}" = 0 ]; then
    pass "$app first run: ${m1} misses, ${j1} JIT compiles"
  else fail "$app first run: expected misses and JIT compiles (hits=${h1:-?} misses=${m1:-?} jit=${j1:-?})"; fi
  # every instrumented module a hit (a module with nothing to instrument is a hit too, not counted
  # as instrumented): hits >= modules instrumented, a hit line per hit, no miss at all
  if [ "${n2:-0}" -ge 1 ] && [ "${h2:-0}" -ge "$n2" ] && [ "$hitlines" = "${h2:-x}" ] && [ "${m2:-x}" = 0 ] &&
     [ "${j2:-x}" = 0 ] && [ "$misslines2" = 0 ]; then
    pass "$app second run: every module a hit ($h2 of $n2), 0 misses, 0 JIT compiles"
  else fail "$app second run: hits=${h2:-?} of ${n2:-?} modules, misses=${m2:-?}, JIT compiles=${j2:-?}"; fi
  results "$e1" >"$TMP/$app.first.maps"; results "$e2" >"$TMP/$app.second.maps"
  if [ -s "$TMP/$app.first.maps" ] && cmp -s "$TMP/$app.first.maps" "$TMP/$app.second.maps"; then
    pass "$app: the probes' maps and kernel ids are the same with the cached cubin ($(wc -l <"$TMP/$app.first.maps") lines)"
  else fail "$app: map contents differ between the runs"; diff "$TMP/$app.first.maps" "$TMP/$app.second.maps" | head -10; fi
  if [ -x "$BUILD/bin/cubpf" ]; then
    CUBPF_CACHE="$db" "$BUILD/bin/cubpf" cache stats 2>&1 | sed 's/^/    /'; fi
done

# A damaged cubpf database (its header kept, so it says whose it is; the schema's b-tree
# behind it overwritten): one warning, moved aside, a new one made; same output.
app=live_count; db=$TMP/$app.cache.db
head -c 4000 /dev/urandom | dd of="$db" bs=1 seek=100 conv=notrunc status=none
rm -f "$db-wal" "$db-shm"
under "$app" damaged CUBPF_CACHE="$db"; rc=$?
warn=$(grep -c 'is damaged' "$TMP/$app.damaged.err")
echo "RESULT cache damaged: rc=$rc warnings=$warn hits=$(counter "$TMP/$app.damaged.err" hits) misses=$(counter "$TMP/$app.damaged.err" misses)"
if [ "$rc" -eq 0 ] && [ "$warn" -ge 1 ] && cmp -s "$TMP/$app.native.out" "$TMP/$app.damaged.out" &&
   cmp -s "$TMP/$app.first.maps" <(results "$TMP/$app.damaged.err"); then
  pass "a damaged cache database: a warning, the same results"
else fail "damaged cache database"; tail -5 "$TMP/$app.damaged.err"; fi

# A file whose header is gone cannot say it was cubpf's: left untouched (byte for byte), the run
# goes on without the cache, with a warning; same output.
head -c 8192 /dev/urandom | dd of="$db" conv=notrunc status=none
rm -f "$db-wal" "$db-shm"; cp "$db" "$TMP/$app.foreign.copy"
under "$app" foreign CUBPF_CACHE="$db"; rc=$?
warn=$(grep -c 'not a cubpf cache.*left untouched' "$TMP/$app.foreign.err")
echo "RESULT cache foreign: rc=$rc warnings=$warn untouched=$(cmp -s "$db" "$TMP/$app.foreign.copy" && echo yes || echo no)"
if [ "$rc" -eq 0 ] && [ "$warn" -ge 1 ] && cmp -s "$db" "$TMP/$app.foreign.copy" &&
   cmp -s "$TMP/$app.native.out" "$TMP/$app.foreign.out" &&
   cmp -s "$TMP/$app.first.maps" <(results "$TMP/$app.foreign.err"); then
  pass "a file that is not a cubpf cache: left untouched, a warning, the same results"
else fail "foreign file at CUBPF_CACHE"; tail -5 "$TMP/$app.foreign.err"; fi

# CUBPF_CACHE=off: no lookups, the JIT runs again.
under "$app" off CUBPF_CACHE=off; rc=$?
j=$(counter "$TMP/$app.off.err" jit)
echo "RESULT cache off: rc=$rc jit_compiles=${j:-?}"
if [ "$rc" -eq 0 ] && [ "${j:-0}" -ge 1 ] && grep -q 'module cache off' "$TMP/$app.off.err" &&
   ! grep -q 'cache hit for' "$TMP/$app.off.err"; then pass "CUBPF_CACHE=off: no cache, JIT compiles"
else fail "CUBPF_CACHE=off"; fi

echo "RESULT cache failures=$failed"
[ "$failed" -eq 0 ]
