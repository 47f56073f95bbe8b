#!/usr/bin/env bash
# Issue 17 on the GPU: a torch.compile'd model (Inductor starts compile workers that load
# libcuda too) under `cubpf run -t kcount -o DIR`: the program's stdout identical to a native
# run, one trace per process in DIR, none damaged (`cubpf trace info` reads each to its end),
# the report merges the processes and holds the main process's kernels: every Triton kernel
# Inductor compiled instrumented, with exact counts (tests/gpu/fw_check.py kcount).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$(cd "$BUILD/bin" && pwd)/cubpf
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/cubpf-mp.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
base=$OUT/mp_inductor
caches() { echo "TRITON_CACHE_DIR=$1/triton TORCHINDUCTOR_CACHE_DIR=$1/inductor"; }
# shellcheck disable=SC2046
env $(caches "$WORK/native") $PY tests/gpu/apps/inductor_app.py >"$base.native" 2>"$base.native.err" ||
  { fail "native run"; tail -15 "$base.native.err"; }
# shellcheck disable=SC2046
env $(caches "$WORK/cubpf") CUBPF_CACHE="$WORK/cubpf.db" "$CUBPF" run -t kcount --json -o "$WORK/traces/" -- \
  sh -c "exec $PY tests/gpu/apps/inductor_app.py > '$base.app'" >"$base.json" 2>"$base.err"
rc=$?
echo "RESULT multiproc inductor: rc=$rc"
[ "$rc" -eq 0 ] || { fail "under kcount: rc=$rc"; tail -20 "$base.err"; }
if cmp -s "$base.native" "$base.app"; then echo "RESULT multiproc inductor: identical_stdout=yes"
else fail "stdout differs"; diff "$base.native" "$base.app" | head; fi
n=0; bad=0
for t in "$WORK"/traces/cubpf-*.trace; do
  [ -e "$t" ] || continue
  n=$((n + 1))
  info=$("$CUBPF" trace info "$t" 2>&1); irc=$?
  if [ "$irc" -ne 0 ] || echo "$info" | grep -qi 'damaged'; then
    bad=$((bad + 1)); echo "--- $t"; echo "$info" | tail -5
  fi
done
procs=$($PY -c "import json,sys
last=[l for l in open(sys.argv[1]) if l.startswith('{')][-1]
r=json.loads(last)['run']; print(r.get('processes'), sum(1 for p in r.get('process_list',[]) if p['launches']))" "$base.json")
echo "RESULT multiproc inductor: traces=$n damaged=$bad report_processes(all, with launches)=$procs"
[ "$n" -ge 1 ] && [ "$bad" -eq 0 ] || fail "traces: $n, damaged $bad"
[ "${procs%% *}" = "$n" ] || fail "the report merges ${procs%% *} processes, $n traces written"
grep '^cubpf run' "$base.err" | head -3
$PY tests/gpu/fw_check.py kcount inductor "$base.json" "$base.native" || failed=$((failed + 1))
echo "RESULT multiproc: $failed failed"
[ "$failed" -eq 0 ]
