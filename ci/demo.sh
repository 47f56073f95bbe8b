#!/usr/bin/env bash
# `make demo`: the main job on the repo's sample CUDA program (tests/cuda/vecadd.cu).
# With a GPU: a real tool on the running program.  Without one: the offline pipeline on the
# same program.  Each capability joins here as it lands.
set -euo pipefail
BUILD=${BUILD:-build}
NVCC=${NVCC:-nvcc}
cubpf=$BUILD/bin/cubpf
app=$BUILD/samples/vecadd
mkdir -p "$BUILD/samples"
if [ ! -x "$app" ] || [ tests/cuda/vecadd.cu -nt "$app" ]; then
  echo "+ $NVCC -arch=sm_90 -o $app tests/cuda/vecadd.cu"
  "$NVCC" -arch=sm_90 -o "$app" tests/cuda/vecadd.cu
fi

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi

echo "== what the program carries: cubpf inspect $app"
"$cubpf" inspect "$app"

if [ "$have_gpu" = 1 ]; then
  echo "== the program on the GPU"
  "$app"
else
  echo "== no GPU here: offline pipeline only"
fi
