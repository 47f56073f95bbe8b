#!/usr/bin/env bash
# Issue 14 on the GPU: "verified means safe".
# (a) The pointer shapes the PTX generator once miscompiled (tests/ptx/shapes: a stack address,
#     map value or key address chosen on branches, a stack pointer moved in a loop, a chosen
#     pointer spilled) and bpf_probe_read on good and bad addresses run on the GPU over 32 random
#     contexts and map contents each, compiled as written and folded: r0 and every map byte must
#     equal the interpreter's (recorded at build time by ptx-diff; run by ptx_diff_run).
# (b) An application (tests/cuda/vecadd.cu) under `cubpf run -p` with probes that give
#     bpf_probe_read and bpf_printk("%s") addresses they may not read: the application must
#     succeed with its output identical to a native run (the probes' one printk line aside), every
#     bad read must have returned -EFAULT with a zeroed destination, the memory probe's reads of
#     its own access must have succeeded, and the %s strings must print empty.
# (c) Issue 27, one printk grammar: the shapes that once printed a map's device address or an
#     unset register ("%16lx", "%#lx", "%-20p" of a map value, "%hx" with no argument, "%a";
#     tests/ptx/safety/printk_leaks.bpf.c) are refused by the verifier, every one, and under
#     `cubpf run` print nothing; widths, flags, precisions and h/hh/l/ll on scalars
#     (printk_grammar.bpf.c) print on the GPU exactly the lines the host formatter gives.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
G=$BUILD/gpu
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# ---- (a) differential runs --------------------------------------------------------------------
for d in diff diff-fold; do
  names=$(cd "$G/$d" 2>/dev/null && ls *.ptx 2>/dev/null | sed 's/\.ptx$//')
  if [ -z "$names" ] || [ ! -x "$G/ptx_diff_run" ]; then fail "$G/$d or $G/ptx_diff_run missing"; continue; fi
  # shellcheck disable=SC2086
  "$G/ptx_diff_run" "$G/$d" $names >"$OUT/ptx_safety.$d.log" 2>&1; rc=$?
  cat "$OUT/ptx_safety.$d.log"
  ok=$(grep -c '^ok ' "$OUT/ptx_safety.$d.log"); n=$(echo "$names" | wc -w)
  echo "RESULT ptx_safety shapes $d: $ok of $n programs agree with the interpreter (rc=$rc)"
  [ "$rc" -eq 0 ] && [ "$ok" -eq "$n" ] || fail "shapes $d"
done

# ---- (a2) the soundness fuzzer's generated programs (ci/gpu-bundle.sh writes them with
# `sound -s 1 --ptxdiff 100 -W`, each with the interpreter's results): the same on the GPU --------
if [ -d "$G/diff-sound" ]; then
  names=$(cd "$G/diff-sound" && ls *.ptx 2>/dev/null | sed 's/\.ptx$//')
  n=$(echo "$names" | wc -w)
  # shellcheck disable=SC2086
  "$G/ptx_diff_run" "$G/diff-sound" $names >"$OUT/ptx_safety.diff-sound.log" 2>&1; rc=$?
  ok=$(grep -c '^ok ' "$OUT/ptx_safety.diff-sound.log")
  echo "RESULT ptx_safety generated programs: $ok of $n agree with the interpreter (rc=$rc)"
  { [ "$rc" -eq 0 ] && [ "$n" -gt 0 ] && [ "$ok" -eq "$n" ]; } || {
    fail "generated programs"; grep -v '^ok ' "$OUT/ptx_safety.diff-sound.log" | head -20; }
else
  fail "$G/diff-sound missing (ci/gpu-bundle.sh writes it)"
fi

# ---- (b) helpers on bad addresses under a real application --------------------------------------
APP=$G/safety_vecadd
PROBE=$BUILD/ptx-safety/unsafe_helpers.bpf.o
CUBPF=$BUILD/bin/cubpf
if [ ! -x "$APP" ] || [ ! -f "$PROBE" ] || [ ! -x "$CUBPF" ]; then
  fail "missing $APP, $PROBE or $CUBPF (build them with make on the build machine)"
else
  "$APP" >"$OUT/ptx_safety.native.out" 2>"$OUT/ptx_safety.native.err"; rc1=$?
  CUBPF_DUMP_MAPS=1 "$CUBPF" run -p "$PROBE" -- sh -c "exec '$APP' > '$OUT/ptx_safety.app.out'" \
    >"$OUT/ptx_safety.run.out" 2>"$OUT/ptx_safety.run.err"; rc2=$?
  grep -v '^cubpf-safety: ' "$OUT/ptx_safety.app.out" >"$OUT/ptx_safety.app.filtered"
  same=no; cmp -s "$OUT/ptx_safety.native.out" "$OUT/ptx_safety.app.filtered" && same=yes
  # res[K] from the report's bpftool-style dump of map res ("key: 02 00 00 00  value: 00 00 90
  # 00 ..."), little-endian; a key not listed is 0
  m() { python3 - "$1" "$OUT/ptx_safety.run.out" <<'PY'
import sys
want, inmap, v = int(sys.argv[1]), False, 0
for line in open(sys.argv[2]):
    w = line.split()
    if line.startswith("map "):
        inmap = w[1] == "res"
    elif inmap and w[:1] == ["key:"] and "value:" in w:
        i = w.index("value:")
        if int("".join(reversed(w[1:i])), 16) == want:
            v = int("".join(reversed(w[i + 1:])), 16)
print(v)
PY
  }
  clean=$(m 0); unclean=$(m 1); own_ok=$(m 2); own_bad=$(m 3)
  line=$(grep -m1 '^cubpf-safety: ' "$OUT/ptx_safety.app.out")
  echo "RESULT ptx_safety app: native_rc=$rc1 probed_rc=$rc2 identical_stdout=$same"
  echo "RESULT ptx_safety bad reads: threads_all_efault_zeroed=${clean:-0} threads_otherwise=${unclean:-0}"
  echo "RESULT ptx_safety memprobe own-access reads: ok=${own_ok:-0} refused=${own_bad:-0}"
  echo "RESULT ptx_safety printk %s line: '${line}'"
  { [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$same" = yes ]; } || {
    fail "the application under the probes"; tail -20 "$OUT/ptx_safety.run.err"; }
  { [ "${clean:-0}" -gt 0 ] && [ "${unclean:-0}" -eq 0 ]; } || fail "bad reads: not every one gave -EFAULT and zeroes"
  { [ "${own_ok:-0}" -gt 0 ] && [ "${own_bad:-0}" -eq 0 ]; } || fail "a memory probe could not read its own access"
  [ "$line" = "cubpf-safety: bad strings [] []" ] || fail "printk of unreadable %s strings: '$line'"
  grep -E '^cubpf: (warning|error)' "$OUT/ptx_safety.run.err" | head -5
fi
# ---- (c) printk formats: one grammar for the verifier and both formatters ---------------------
LEAKS=$BUILD/ptx-safety/printk_leaks.bpf.o
GRAMMAR=$BUILD/ptx-safety/printk_grammar.bpf.o
if [ ! -x "$APP" ] || [ ! -f "$LEAKS" ] || [ ! -f "$GRAMMAR" ] || [ ! -x "$CUBPF" ]; then
  fail "missing $APP, $LEAKS, $GRAMMAR or $CUBPF (build them with make on the build machine)"
else
  "$CUBPF" verify "$LEAKS" >"$OUT/ptx_safety.printk_verify.log" 2>&1
  progs=$("$CUBPF" disasm "$LEAKS" | grep -c ': section ')
  refused=$(grep -c ': REJECTED$' "$OUT/ptx_safety.printk_verify.log")
  "$CUBPF" run -p "$LEAKS" -p "$GRAMMAR" -- sh -c "exec '$APP' > '$OUT/ptx_safety.printk.out'" \
    >"$OUT/ptx_safety.printk_run.out" 2>"$OUT/ptx_safety.printk_run.err"; rc3=$?
  leaks=$(grep -c 'cubpf-printk-leak' "$OUT/ptx_safety.printk.out")
  want1='cubpf-printk:             1234|0x2a|-5   |'
  want2='cubpf-printk: +007|00000003|Z|'
  got1=$(grep -cFx "$want1" "$OUT/ptx_safety.printk.out")
  got2=$(grep -cFx "$want2" "$OUT/ptx_safety.printk.out")
  other=$(grep '^cubpf-printk' "$OUT/ptx_safety.printk.out" | grep -cvFx -e "$want1" -e "$want2")
  echo "RESULT ptx_safety printk leaks: $refused of $progs programs refused by the verifier, $leaks lines printed (rc=$rc3)"
  echo "RESULT ptx_safety printk grammar: line1=$got1 line2=$got2 other=$other"
  grep '^cubpf-printk' "$OUT/ptx_safety.printk.out" | sort | uniq -c | head -5
  { [ "$progs" -gt 0 ] && [ "$refused" -eq "$progs" ]; } || {
    fail "printk leak shapes: not every program refused"; cat "$OUT/ptx_safety.printk_verify.log"; }
  { [ "$rc3" -eq 0 ] && [ "$leaks" -eq 0 ]; } || {
    fail "printk leak shapes printed under cubpf run"; tail -20 "$OUT/ptx_safety.printk_run.err"; }
  { [ "$got1" -ge 1 ] && [ "$got1" -eq "$got2" ] && [ "$other" -eq 0 ]; } || fail "printk grammar lines on the GPU"
fi
echo "RESULT ptx_safety failures=$failed"
[ "$failed" -eq 0 ]
