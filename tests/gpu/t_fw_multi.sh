#!/usr/bin/env bash
# Issue 20: PyTorch on two GPUs under cubpf.
#   torch_multi: one process, tensors on cuda:0 and cuda:1, a Triton kernel on each, a peer copy;
#   torch_dist:  two processes (torch.multiprocessing spawn), one GPU each, NCCL all-reduce and
#                all-gather (NVLink multicast off), a Triton kernel in each.
# Each runs natively, then under kcount and memtrace (`cubpf run -t TOOL --json`): stdout
# identical to the native run; kcount's report names both GPUs, counts every instrumented kernel
# exactly (GPU runs = launches, thread entries = grid x block) and equals the program's "expect"
# lines, which for torch_dist are the sum over the two processes (one merged report); NCCL's
# kernels are listed as not instrumented, with the reason.  Needs two GPUs: on one it fails.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$(cd "$BUILD/bin" && pwd)/cubpf
PY=${PYTHON:-python3}
export CUBLAS_WORKSPACE_CONFIG=:4096:8 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
WORK=$(mktemp -d /tmp/cubpf-multi.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ndev=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
echo "RESULT fw_multi: GPUs=$ndev"
[ "$ndev" -ge 2 ] || { echo "FAIL fw_multi: needs two GPUs (nvidia-h100-x2 or nvidia-h200-x2)"; exit 1; }

one() {
  local name=$1 base=$OUT/fw_$1 cmd="$PY tests/gpu/apps/${1}_app.py"
  TRITON_CACHE_DIR=$WORK/$name/native timeout 240 $cmd >"$base.native" 2>"$base.native.err"
  local rc=$?
  echo "--- $name native: rc=$rc"; cat "$base.native"
  if [ "$rc" -ne 0 ]; then fail "$name: the native run failed"; tail -15 "$base.native.err"; return; fi
  for t in kcount memtrace; do
    local s; s=$(date +%s%N)
    TRITON_CACHE_DIR=$WORK/$name/$t CUBPF_CACHE=$WORK/$name/cubpf-$t.db timeout 240 \
      "$CUBPF" run -t "$t" --json -- sh -c "exec $cmd > '$base.$t.app'" >"$base.$t.json" 2>"$base.$t.err"
    rc=$?
    echo "RESULT fw_multi $name $t: rc=$rc ms=$(( ($(date +%s%N) - s) / 1000000 ))"
    [ "$rc" -eq 0 ] || { fail "$name under $t: rc=$rc"; tail -20 "$base.$t.err"; }
    if cmp -s "$base.native" "$base.$t.app"; then echo "RESULT fw_multi $name $t: identical_stdout=yes"
    else fail "$name $t: stdout differs from the native run"; diff "$base.native" "$base.$t.app" | head -10; fi
  done
  $PY tests/gpu/fw_check.py kcount "$name" "$base.kcount.json" "$base.native" || failed=$((failed + 1))
  $PY tests/gpu/fw_check.py memtrace "$name" "$base.memtrace.json" "$base.native" || failed=$((failed + 1))
  $PY tests/gpu/fw_check.py multi "$name" "$base.kcount.json" "$base.memtrace.json" || failed=$((failed + 1))
}

one torch_multi
one torch_dist
echo "RESULT fw_multi: $failed failed"
[ "$failed" -eq 0 ]
