#!/usr/bin/env bash
# cubpf-bpf-plugin --engine gpu: eBPF programs compiled to PTX by ptx-rewriter/, JIT-loaded and
# run by one GPU thread, behind the bpf_conformance plugin protocol.  Runs three built-in
# programs, then every vector of ../shared/bpf_conformance (CUBPF_SHARED) when it is here.
# Prints one line per failure and the totals; exit 1 when anything fails.
set -u
BUILD=${BUILD:-build}
P=$BUILD/bin/cubpf-bpf-plugin
[ -x "$P" ] || { echo "t_vm_plugin_gpu: missing $P"; exit 1; }
fail=0
# check NAME PROGRAM_HEX MEMORY_HEX EXPECTED_R0_HEX
check() {
  got=$(echo "$2" | "$P" --engine gpu $3 2>&1)
  if [ "$got" = "$4" ]; then echo "ok: $1 r0=$got"; else echo "FAIL: $1: got '$got', expected $4"; fail=1; fi
}
check "mov r0, 42" b70000002a0000009500000000000000 "" 2a
# r0 = *(u32 *)(r1 + 0) with memory 78 56 34 12
check "ldxw from input memory" 61100000000000009500000000000000 78563412 12345678
# r0 = r2 (the memory length)
check "r2 holds the length" bf200000000000009500000000000000 0011223344 5
shared=${CUBPF_SHARED:-../shared}
if [ -d "$shared/bpf_conformance/raw" ]; then
  pass=0; bad=0
  for f in "$shared"/bpf_conformance/tests/*.data; do
    n=$(basename "$f" .data)
    mem=$(awk '/^-- mem/{m=1;next} /^--/{m=0} m' "$f" | sed 's/#.*//' | tr -d ' \n')
    exp=$(awk '/^-- result/{m=1;next} /^--/{m=0} m' "$f" | sed 's/#.*//' | tr -d ' \n')
    got=$("$P" --engine gpu $mem < "$shared/bpf_conformance/raw/$n.hex" 2>&1)
    if [[ "$got" =~ ^[0-9a-f]+$ ]] && [ "$((exp))" = "$((0x$got))" ]; then pass=$((pass + 1))
    else bad=$((bad + 1)); echo "FAIL conformance $n: expected $exp, got '$(echo "$got" | head -c 300)'"; fi
  done
  echo "conformance on the gpu engine: $pass passed, $bad failed"
  [ "$bad" -eq 0 ] || fail=1
else
  echo "conformance: $shared/bpf_conformance not here, only the built-in programs ran"
fi
exit $fail
