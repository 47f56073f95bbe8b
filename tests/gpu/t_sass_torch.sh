#!/usr/bin/env bash
# Issue 29 on real libraries: PyTorch eager kernels (ATen's own), a cuBLAS GEMM, a cuDNN
# convolution and an NCCL all-reduce on a one-rank communicator (tests/gpu/apps/torch_sass_app.py),
# every one shipped as SASS only, under `cubpf run --sanitizer` with kcount, memtrace and
# threadhist (tests/gpu/frameworks.sh torch_sass): stdout identical to native (digests of the
# results' bytes), every launched kernel instrumented by one backend or the other, kcount's
# GPU-counted runs and threads = the launches and grid x block, threadhist's thread runs = kcount's
# entries.  Prints which kernels went through the Sanitizer backend.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
bash tests/gpu/frameworks.sh torch_sass
rc=$?
python3 - "$OUT/fw_torch_sass.kcount.json" <<'PY' || rc=1
import json, sys
last = [l for l in open(sys.argv[1]) if l.startswith("{")][-1]
d = json.loads(last)
san = d["run"].get("sanitizer_kernels", [])
print("RESULT sass torch: %d kernels through the Sanitizer backend" % len(san))
for k in san[:40]:
    print("RESULT sass torch kernel:", k[:100])
if not san:
    print("FAIL no kernel went through the Sanitizer backend")
    sys.exit(1)
PY
exit $rc
