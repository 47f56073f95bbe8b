#!/usr/bin/env bash
# Kernel spans (issue 7): tests/cuda/spans_app.cu launches kernels of known durations (50 us,
# 200 us, 1 ms spins on %globaltimer) on two streams and on the per-thread default stream, and
# times every launch with its own cudaEventRecord pair.  Under `cubpf run -t kcount -o TRACE`,
# the trace's Chrome export must hold one complete ("X") kernel event per launch whose duration
# is within 5 us of the program's own measurement; the JSON must parse; the kernel count must
# match.  Then the same with CUBPF_SPANS=0: no spans, every kernel an instant at its launch.
# RESULT lines give the figures (max |diff|), FAIL lines what is off.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$BUILD/bin/cubpf
APP=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/spans_app
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
if [ ! -x "$CUBPF" ] || [ ! -x "$APP" ] || [ ! -e "$BUILD/probes/kcount.bpf.o" ]; then
  echo "FAIL missing $CUBPF, $APP or $BUILD/probes (build them with make on the build machine)"; exit 1
fi
command -v python3 >/dev/null || { echo "FAIL python3 is needed to check the JSON"; exit 1; }

T=$OUT/spans
rm -f "$T".*
"$CUBPF" run -t kcount -o "$T.trace" -- sh -c "exec '$APP' > '$T.app'" >"$T.report" 2>"$T.err"
rc=$?
echo "RESULT spans run: rc=$rc, $(grep -c '^launch ' "$T.app" 2>/dev/null || echo 0) timed launches"
[ "$rc" -eq 0 ] || { fail "cubpf run: rc=$rc"; tail -20 "$T.err"; }
grep 'kernel spans' "$T.err"
"$CUBPF" trace info "$T.trace" | grep -E 'format|records|dropped|state'
"$CUBPF" trace stats "$T.trace" | sed -n '1,8p'
"$CUBPF" trace export --format chrome -o "$T.json" "$T.trace" || fail "export failed"

cat >"$T.py" <<'EOF'
import json, sys
app, js, mode = sys.argv[1], sys.argv[2], sys.argv[3]
warm, runs = {}, []
for line in open(app):
    f = line.split()
    if f and f[0] == 'warmup':
        warm[f[1]] = warm.get(f[1], 0) + 1
    elif f and f[0] == 'launch':
        runs.append((int(f[1]), f[2], f[3], int(f[4]), float(f[5])))
d = json.load(open(js))            # the export must be valid JSON
ev = d['traceEvents']
names = set(warm) | {r[1] for r in runs}
x = [e for e in ev if e.get('cat') == 'kernel' and e['ph'] == 'X' and e['name'] in names]
inst = [e for e in ev if e.get('cat') == 'kernel' and e['ph'] == 'i' and e['name'] in names]
tracks = {(e['pid'], e['tid']): e['args']['name'] for e in ev
          if e['ph'] == 'M' and e['name'] == 'thread_name'}
api = [e for e in ev if e.get('cat') == 'api' and e['ph'] == 'X' and 'LaunchKernel' in e['name']]
want = sum(warm.values()) + len(runs)
bad = 0
def fail(msg):
    global bad
    bad += 1
    print('FAIL', msg)
if mode == 'off':
    print('RESULT spans off: %d X, %d instants, %d launches' % (len(x), len(inst), want))
    if x or len(inst) != want:
        fail('with CUBPF_SPANS=0: %d spans, %d instants, expected 0 and %d' % (len(x), len(inst), want))
    sys.exit(1 if bad else 0)
print('RESULT spans count: %d kernel X events, %d launches by the program (%d warm-up), %d instants, %d launch calls on host tracks'
      % (len(x), want, sum(warm.values()), len(inst), len(api)))
if len(x) != want:
    fail('kernel count: %d X events, expected %d' % (len(x), want))
by = {}
for e in sorted(x, key=lambda e: e['args']['corr']):
    by.setdefault(e['name'], []).append(e)
seen, worst, rows = {}, 0.0, []
for i, name, stream, target, el in runs:
    k = warm.get(name, 0) + seen.get(name, 0)
    seen[name] = seen.get(name, 0) + 1
    if k >= len(by.get(name, [])):
        fail('launch %d (%s): no span' % (i, name))
        continue
    e = by[name][k]
    diff = e['dur'] - el
    worst = max(worst, abs(diff))
    track = tracks.get((e['pid'], e['tid']), '?')
    rows.append((i, name, stream, track, target, el, e['dur'], diff))
    print('launch %2d %-22s stream %-10s track %-34s target %5d us  program %9.3f us  span %9.3f us  diff %+7.3f us'
          % (i, name, stream, track, target, el, e['dur'], diff))
    if e['dur'] < target:
        fail('launch %d: span %.3f us shorter than the kernel spins (%d us)' % (i, e['dur'], target))
pt = {r[3] for r in rows if r[2] == 'per-thread'}
created = {r[3] for r in rows if r[2] != 'per-thread'}
if pt != {'stream 0x2 (per-thread default)'}:
    fail('per-thread default stream launches on tracks %s' % pt)
if len(created) != 2:
    fail('the two created streams are on %d tracks: %s' % (len(created), created))
if len(api) < want:
    fail('%d launch calls on host thread tracks, expected %d' % (len(api), want))
print('RESULT spans max |span - program events| = %.3f us over %d launches (limit 5 us)' % (worst, len(rows)))
if worst > 5.0:
    fail('max |diff| %.3f us > 5 us' % worst)
sys.exit(1 if bad else 0)
EOF
python3 "$T.py" "$T.app" "$T.json" on || fail "spans check"

# Spans off: the export falls back to instants at the launch times.
rm -f "$OUT"/spans_off.*
CUBPF_SPANS=0 "$CUBPF" run -t kcount -o "$OUT/spans_off.trace" -- sh -c "exec '$APP' > '$OUT/spans_off.app'" \
  >"$OUT/spans_off.report" 2>"$OUT/spans_off.err" || fail "cubpf run with CUBPF_SPANS=0"
"$CUBPF" trace export --format chrome -o "$OUT/spans_off.json" "$OUT/spans_off.trace" || fail "export (spans off)"
python3 "$T.py" "$OUT/spans_off.app" "$OUT/spans_off.json" off || fail "spans off check"

# PyTorch times its own work with torch.cuda.Event pairs (timing events) while its allocator
# records ordering events of its own: under a trace with spans the program computes the same,
# every kernel gets a span, and the timed launches begin before the program's start event.
cat >"$OUT/spans_torch.py" <<'EOF'
import torch
torch.manual_seed(0)
a = torch.randn(1024, 1024, device="cuda")
b = torch.randn(1024, 1024, device="cuda")
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for i in range(8):
    start.record()
    c = torch.relu(a) * 2.0
    stop.record()
    stop.synchronize()
    a = a + 0.5 * c / (1.0 + c.abs().max())
print("checksum %.6e" % a.double().sum().item())
EOF
if python3 "$OUT/spans_torch.py" >"$OUT/spans_torch.native" 2>/dev/null; then
  "$CUBPF" run -l info -t kcount -o "$OUT/spans_torch.trace" -- sh -c "exec python3 '$OUT/spans_torch.py' > '$OUT/spans_torch.app'" \
    >"$OUT/spans_torch.report" 2>"$OUT/spans_torch.err"; rc=$?
  same=no; cmp -s "$OUT/spans_torch.native" "$OUT/spans_torch.app" && same=yes
  line=$(grep -m1 'kernel spans of context' "$OUT/spans_torch.err")
  early=$(echo "$line" | sed -n 's/.*written (\([0-9]*\) begun before.*/\1/p')
  written=$(echo "$line" | sed -n 's/.*: \([0-9]*\) written.*/\1/p')
  kernels=$("$CUBPF" trace info "$OUT/spans_torch.trace" | sed -n 's/.*kernel=\([0-9]*\).*/\1/p' | head -1)
  echo "RESULT spans torch: rc=$rc identical_stdout=$same kernels=${kernels:-?} spans=${written:-?} begun_before_program_event=${early:-?}"
  { [ "$rc" -eq 0 ] && [ "$same" = yes ]; } || { fail "torch under a trace with spans"; tail -15 "$OUT/spans_torch.err"; }
  { [ -n "$written" ] && [ "$written" = "$kernels" ] && [ "${early:-0}" -ge 8 ]; } ||
    fail "torch: ${written:-?} spans for ${kernels:-?} kernels, ${early:-?} begun before the program's event (expected all, and at least 8)"
else
  echo "RESULT spans torch: skipped (no PyTorch here)"
fi

if [ "$failed" -eq 0 ]; then echo "PASS t_spans"; else echo "t_spans: $failed failures"; fi
[ "$failed" -eq 0 ]
