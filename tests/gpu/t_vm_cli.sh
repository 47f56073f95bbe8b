#!/usr/bin/env bash
# vm/ binaries on the GPU machine (built elsewhere, glibc 2.39 here): the bundled probes verify
# and disassemble with `cubpf`, and cubpf-bpf-plugin runs the conformance vectors when the
# shared folder is present (CUBPF_SHARED, default ../shared).  No GPU work: it checks that the
# carried binaries work on this machine.
set -u
BUILD=${BUILD:-build}
fail=0
for f in "$BUILD/bin/cubpf" "$BUILD/bin/cubpf-bpf-plugin"; do
  [ -x "$f" ] || { echo "t_vm_cli: missing $f"; exit 1; }
done
ls "$BUILD"/probes/*.bpf.o >/dev/null 2>&1 || { echo "t_vm_cli: no $BUILD/probes/*.bpf.o"; exit 1; }
if "$BUILD/bin/cubpf" verify -v "$BUILD"/probes/*.bpf.o; then
  echo "ok: every bundled probe verifies"
else
  echo "FAIL: a bundled probe was rejected"; fail=1
fi
"$BUILD/bin/cubpf" disasm "$BUILD/probes/kcount.bpf.o" >/tmp/t_vm_cli.disasm 2>&1 || fail=1
grep -q 'call bpf_get_globaltimer#502' /tmp/t_vm_cli.disasm && echo "ok: disasm" || { echo "FAIL: disasm"; fail=1; }
out=$(echo b70000002a0000009500000000000000 | "$BUILD/bin/cubpf-bpf-plugin")
if [ "$out" = "2a" ]; then echo "ok: plugin r0=2a"; else echo "FAIL: plugin printed '$out', expected 2a"; fail=1; fi
shared=${CUBPF_SHARED:-../shared}
if [ -d "$shared/bpf_conformance/raw" ]; then
  pass=0; bad=0
  for f in "$shared"/bpf_conformance/tests/*.data; do
    n=$(basename "$f" .data)
    mem=$(awk '/^-- mem/{m=1;next} /^--/{m=0} m' "$f" | sed 's/#.*//' | tr -d ' \n')
    exp=$(awk '/^-- result/{m=1;next} /^--/{m=0} m' "$f" | sed 's/#.*//' | tr -d ' \n')
    got=$("$BUILD/bin/cubpf-bpf-plugin" $mem < "$shared/bpf_conformance/raw/$n.hex" 2>&1)
    if [[ "$got" =~ ^[0-9a-f]+$ ]] && [ "$((exp))" = "$((0x$got))" ]; then pass=$((pass + 1))
    else bad=$((bad + 1)); echo "FAIL conformance $n: expected $exp, got '$got'"; fi
  done
  echo "conformance through the plugin: $pass passed, $bad failed"
  [ "$bad" -eq 0 ] || fail=1
else
  echo "conformance: $shared/bpf_conformance not here, skipped (the CPU tests run it)"
fi
exit $fail
