#!/usr/bin/env bash
# `make demo`: the main job on the repo's sample CUDA program (tests/cuda/vecadd.cu).
#   everywhere:   what the program carries (cubpf inspect), then the offline pipeline: a probe
#                 (tools/examples/hello.bpf.c) built with clang, verified, disassembled, compiled
#                 to PTX and injected into the program's kernels, the result checked by ptxas;
#   with a GPU:   the program itself, natively and under cubpf's libcuda.so.1 (cubpf run), with
#                 the probe when live probes are in the build.
set -euo pipefail
BUILD=${BUILD:-build}
NVCC=${NVCC:-nvcc}
CLANG=${CLANG:-clang}
PTXAS=${PTXAS:-$(dirname "$NVCC")/ptxas}
cubpf=$BUILD/bin/cubpf
demo=$BUILD/demo
app=$demo/vecadd
mkdir -p "$demo"

step() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

if [ ! -x "$app" ] || [ tests/cuda/vecadd.cu -nt "$app" ]; then
  step "building the sample program"
  run "$NVCC" -arch=sm_90 -o "$app" tests/cuda/vecadd.cu
fi

step "what the program carries"
run "$cubpf" inspect "$app"

step "a probe: tools/examples/hello.bpf.c, built with clang -target bpf, verified, disassembled"
run "$CLANG" -O2 -g -target bpf -I tools/include -I "/usr/include/$(uname -m)-linux-gnu" \
  -c tools/examples/hello.bpf.c -o "$demo/hello.bpf.o"
run "$cubpf" verify "$demo/hello.bpf.o"
run "$cubpf" disasm "$demo/hello.bpf.o" | head -20

step "the probe compiled to PTX and injected into the program's kernels"
run "$NVCC" -arch=sm_90 -ptx tests/cuda/vecadd.cu -o "$demo/vecadd.ptx"
run "$cubpf" ptx -p "$demo/hello.bpf.o" "$demo/vecadd.ptx" -o "$demo/vecadd.probed.ptx"
printf '$ ptxas -arch=sm_90 -v (registers per kernel, native -> instrumented)\n'
regs() { "$PTXAS" -arch=sm_90 -v "$1" -o /dev/null 2>&1 |
         awk '/Compiling entry/ {k=$7; gsub("\047", "", k)} /Used [0-9]+ registers/ {print k, $5}'; }
join <(regs "$demo/vecadd.ptx" | sort) <(regs "$demo/vecadd.probed.ptx" | sort) |
  awk '{printf "  %-34s %3s -> %3s registers\n", $1, $2, $3}'

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi
if [ "$have_gpu" = 1 ]; then
  step "the program on the GPU, natively"
  run "$app"
  step "the same program under cubpf (every driver call through build/lib/libcuda.so.1)"
  run "$cubpf" run -l info -- "$app"
else
  step "no GPU here: the offline pipeline above is the demo (on a GPU machine the program runs under cubpf)"
fi
