#!/usr/bin/env bash
# tests/gpu/fw_facts.sh: what the frameworks of the machine do with NVRTC, nvJitLink and line
# info (a diagnostic for issue 15, not a test): versions, where libnvrtc/libnvJitLink are and
# which copy each framework loads (natively and with cubpf's folder first), whether the cubins
# the frameworks cache carry .nv_debug_ptx_txt.
set -u
BUILD=${BUILD:-build}
LIB=$(cd "$BUILD/lib" && pwd)
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/cubpf-facts.XXXXXX)
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
$PY -m pip list 2>/dev/null | grep -iE '^(torch|triton|jax|jaxlib|jax-cuda|cupy|nvidia|cuda)' 
echo "== libraries on disk"
find / -xdev \( -name 'libnvrtc.so*' -o -name 'libnvJitLink.so*' -o -name 'ptxas' -o -name 'libnvptxcompiler*' \) 2>/dev/null | grep -v "^$LIB" | head -30
ldconfig -p | grep -E 'nvrtc|nvJitLink'
echo "== cupy nvrtc binding"
$PY - <<'PY' 2>&1 | head -20
import cupy, cupy_backends.cuda.libs.nvrtc as m
print(cupy.__version__, m.__file__)
try:
    import cuda.pathfinder as pf; print("cuda.pathfinder", getattr(pf, "__version__", "?"))
except Exception as e: print("no cuda.pathfinder:", e)
PY
maps_of() { # LABEL ENV... -- script: runs the script, then prints the libraries of interest mapped
  local label=$1; shift
  env "$@" $PY -c "
import runpy, sys
sys.argv = ['$script']
runpy.run_path('$script', run_name='__main__')
seen = set()
for l in open('/proc/self/maps'):
    p = l.split()[-1]
    if any(k in p for k in ('nvrtc', 'nvJitLink', 'nvptx', 'libcuda.so')) and p not in seen:
        seen.add(p); print('MAP $label', p)
" 2>&1 | grep -E '^MAP|Error|error' | head -12
}
for app in cupy_kernels triton jax; do
  script=tests/gpu/apps/${app}_app.py
  echo "== $app"
  maps_of "$app native" TRITON_CACHE_DIR=$W/n/triton CUPY_CACHE_DIR=$W/n/cupy TORCHINDUCTOR_CACHE_DIR=$W/n/ind
  maps_of "$app dropin" LD_LIBRARY_PATH=$LIB CUBPF_LOG=debug TRITON_CACHE_DIR=$W/d/triton CUPY_CACHE_DIR=$W/d/cupy TORCHINDUCTOR_CACHE_DIR=$W/d/ind XLA_FLAGS=--xla_gpu_generate_line_info=true
done
echo "== cache cubins with .nv_debug_ptx_txt (native n / drop-in d)"
for d in $W/n $W/d; do
  for f in $(find "$d" -type f | head -400); do
    if grep -q -a 'nv_debug_ptx_txt' "$f"; then echo "PTXTXT yes $f"; elif grep -q -a -m1 $'\x7fELF' "$f" || [[ $f == *.cubin ]]; then echo "PTXTXT no  $f"; fi
  done | sed "s|$W/||" | sort | uniq | head -40
done
echo "== cupy with LD_PRELOAD of the drop-in"
script=tests/gpu/apps/cupy_kernels_app.py
maps_of "cupy preload" LD_PRELOAD=$LIB/libnvrtc.so.13 CUBPF_LOG=debug CUPY_CACHE_DIR=$W/p/cupy
for f in $(find $W/p -type f); do grep -q -a nv_debug_ptx_txt "$f" && echo "PTXTXT preload yes $f" || echo "PTXTXT preload no $f"; done | head
echo "== jax: shim view with line info"
XLA_FLAGS=--xla_gpu_generate_line_info=true LD_LIBRARY_PATH=$LIB CUBPF_LOG=info $PY tests/gpu/apps/jax_app.py 2>&1 | grep -E '^cubpf: (load|summary)' | cut -c1-200 | sort | uniq -c | sort -rn | head -12
echo "== jax env of xla: ptxas / nvjitlink use"
XLA_FLAGS="--xla_gpu_generate_line_info=true --xla_dump_to=$W/xla" $PY tests/gpu/apps/jax_app.py >/dev/null 2>&1; ls $W/xla | sed 's/.*\.//' | sort | uniq -c | head
f=$(ls $W/xla/*.ptx 2>/dev/null | head -1); [ -n "$f" ] && { echo "ptx $f: $(grep -c '\.loc' "$f") .loc lines, $(grep -c '\.file' "$f") .file"; }
rm -rf "$W"
