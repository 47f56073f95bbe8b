#!/usr/bin/env bash
# Checks cubpf's own declarations of the Compute Sanitizer API (shim/live/sanitizer.h, and the
# site ids of ptx-rewriter/ptx.h) against NVIDIA's headers, where they are installed: every
# constant's value, the launch callback data's field offsets, the callback's signature.  Not
# part of `make test` (CI has no sanitizer headers); run it by hand after a CUDA upgrade:
#   tests/live/san_header_check.sh [INCLUDE_DIR]   (default: $CUDA_HOME/compute-sanitizer/include,
#                                                  then /usr/local/cuda's, then /tmp/sanitizer-include)
# Exit 0 when everything matches, 1 with the mismatches, 2 when no header is found.
set -u
cd "$(dirname "$0")/../.."
inc=${1:-}
for d in "${CUDA_HOME:-}/compute-sanitizer/include" /usr/local/cuda/compute-sanitizer/include \
         /tmp/sanitizer-include; do
  [ -z "$inc" ] && [ -f "$d/sanitizer.h" ] && inc=$d
done
[ -n "$inc" ] && [ -f "$inc/sanitizer.h" ] || { echo "no sanitizer.h found (give its folder)"; exit 2; }
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
src=$(mktemp --suffix=.c) bin=$(mktemp)
trap 'rm -f "$src" "$bin"' EXIT
cat >"$src" <<'C'
#include <stddef.h>
#include <sanitizer.h>
#include "shim/live/sanitizer.h"
#include "ptx-rewriter/ptx.h"
#define SAME(a, b) _Static_assert((long)(a) == (long)(b), #a " != " #b)
#define OFF(f) _Static_assert(offsetof(Sanitizer_LaunchData, f) == \
	offsetof(struct shim_san_launch_data, f), "offset of " #f)
SAME(SHIM_SAN_SUCCESS, SANITIZER_SUCCESS);
SAME(SHIM_SAN_DOMAIN_RESOURCE, SANITIZER_CB_DOMAIN_RESOURCE);
SAME(SHIM_SAN_DOMAIN_LAUNCH, SANITIZER_CB_DOMAIN_LAUNCH);
SAME(SHIM_SAN_CBID_LAUNCH_BEGIN, SANITIZER_CBID_LAUNCH_BEGIN);
SAME(PTX_PATCH_BLOCK_ENTER, SANITIZER_INSTRUCTION_BLOCK_ENTER);
SAME(PTX_PATCH_BLOCK_EXIT, SANITIZER_INSTRUCTION_BLOCK_EXIT);
SAME(PTX_PATCH_GLOBAL_ACCESS, SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS);
SAME(PTX_PATCH_SHARED_ACCESS, SANITIZER_INSTRUCTION_SHARED_MEMORY_ACCESS);
SAME(PTX_PATCH_LOCAL_ACCESS, SANITIZER_INSTRUCTION_LOCAL_MEMORY_ACCESS);
SAME(PTX_PATCH_MEMCPY_ASYNC, SANITIZER_INSTRUCTION_MEMCPY_ASYNC);
/* the memory access flags the patch functions decode (patch.c, mem_op) */
SAME(1, SANITIZER_MEMORY_DEVICE_FLAG_READ);
SAME(2, SANITIZER_MEMORY_DEVICE_FLAG_WRITE);
SAME(4, SANITIZER_MEMORY_DEVICE_FLAG_ATOMSYS);
SAME(0, SANITIZER_PATCH_SUCCESS);
OFF(context); OFF(stream); OFF(hStream); OFF(module); OFF(function); OFF(functionName);
OFF(gridDim_x); OFF(blockDim_z); OFF(clusterDim_z); OFF(gridId); OFF(hLaunch);
_Static_assert(sizeof(Sanitizer_CallbackDomain) == sizeof(int), "domain is an int");
_Static_assert(sizeof(Sanitizer_CallbackId) == sizeof(uint32_t), "cbid is 32 bits");
_Static_assert(sizeof(SanitizerResult) == sizeof(shim_san_result), "result is an int");
int main(void) { return 0; }
C
if cc -std=gnu11 -I. -I"$inc" -I"$cuda_inc" -c "$src" -o "$bin" 2>&1; then
  echo "shim/live/sanitizer.h and ptx.h's patch sites match $inc"
  exit 0
fi
echo "MISMATCH with $inc (above)"
exit 1
