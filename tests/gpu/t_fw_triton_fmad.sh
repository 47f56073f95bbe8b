#!/usr/bin/env bash
# Issue 30: Triton kernels whose float code -fmad can change (a multiply-add, a softmax, a
# matmul, each with enable_fp_fusion on and off, beside a plain add): their cubins keep the PTX
# but not ptxas's options, so cubpf finds -fmad by reproducing each cubin's machine code with the
# driver's JIT.  Checked by tests/gpu/frameworks.sh: outputs bit for bit as native under kcount,
# memtrace and threadhist, every kernel instrumented (or the reason printed: a cubin of another
# ptxas version than the driver's), kcount's counts exact; the coverage line of each report.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
bash tests/gpu/frameworks.sh triton_fmad
rc=$?
for t in kcount memtrace threadhist; do
  grep -h '"coverage"' "$OUT/fw_triton_fmad.$t.json" 2>/dev/null | tail -1 |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("RESULT coverage '"$t"'", d["run"]["coverage"])' 2>/dev/null
done
exit $rc
