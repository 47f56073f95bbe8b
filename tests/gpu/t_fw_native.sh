#!/usr/bin/env bash
# Issue 15 on programs built here: NVRTC to a cubin, nvJitLink, the driver's linker, -rdc
# (tests/gpu/frameworks.sh says what is checked); and the drop-ins with CUBPF_DISABLE=1.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
failed=0
bash tests/gpu/frameworks.sh nvrtc jitlink culink rdc || failed=1
# CUBPF_DISABLE=1: the drop-ins and the shim only forward, the output is the native one.
"$BUILD/bin/cubpf" run --disable -- "$BUILD/gpu/rtc_app" jitlink >"$OUT/fw_disabled.app" 2>"$OUT/fw_disabled.err"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$OUT/fw_disabled.app" "$OUT/fw_jitlink.native"; then
  echo "RESULT frameworks disabled: rc=0 identical_stdout=yes"
else echo "FAIL frameworks disabled: rc=$rc or output differs"; failed=1; fi
exit $failed
