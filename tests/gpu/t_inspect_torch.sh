#!/usr/bin/env bash
# GPU machine: `cubpf inspect` on PyTorch's libtorch_cuda.so.  Checks that it lists every cubin
# and PTX entry that cuobjdump lists (about 2800 cubins for PyTorch 2.11 cu130) and that no PTX
# usable on sm_90 is present (PyTorch ships SASS only), and prints the figures.
# Uses $BUILD/bin/cubpf (prebuilt); writes the full table and JSON to $OUT.
set -u
BUILD=${BUILD:-build}; OUT=${OUT:-$BUILD/gpu-out}; mkdir -p "$OUT"
CUBPF=$BUILD/bin/cubpf
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
fail=0

lib=${TORCH_LIB:-}
[ -n "$lib" ] || lib=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"))' 2>/dev/null)
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
  echo "FAIL: libtorch_cuda.so not found (python3 -c 'import torch' failed?)"; exit 1
fi
echo "file:     $lib ($(stat -L -c %s "$lib") bytes)"
echo "torch:    $(python3 -c 'import torch;print(torch.__version__)' 2>/dev/null)"

t0=$(date +%s.%N)
if ! "$CUBPF" inspect --json --summary "$lib" >"$OUT/inspect_torch.json"; then
  echo "FAIL: cubpf inspect --json exited non-zero"; exit 1
fi
t1=$(date +%s.%N)
"$CUBPF" inspect "$lib" >"$OUT/inspect_torch.txt" || { echo "FAIL: cubpf inspect (table) exited non-zero"; fail=1; }
echo "cubpf inspect --json --summary: $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"
echo "--- summary (full table: $OUT/inspect_torch.txt, $(wc -l <"$OUT/inspect_torch.txt") lines)"
sed -n '1,8p' "$OUT/inspect_torch.txt"
echo "---"

read -r fatbins sass ptx usable kernels kptx < <(python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["files"][0]
print(f["fatbin_count"], f["sass_entries"], f["ptx_entries"], f["usable_ptx_entries"],
      f["kernel_count"], f["kernels_with_usable_ptx"])' "$OUT/inspect_torch.json")
echo "cubpf:     fatbins $fatbins, cubins $sass, PTX entries $ptx, PTX usable on sm_90 $usable, kernels $kernels (with PTX for sm_90: $kptx)"

if [ ! -x "$CUOBJDUMP" ]; then
  echo "FAIL: cuobjdump not found (set CUOBJDUMP): cannot cross-check the counts"; exit 1
fi
"$CUOBJDUMP" --list-elf "$lib" >"$OUT/cuobjdump_list_elf.txt" 2>&1
"$CUOBJDUMP" --list-ptx "$lib" >"$OUT/cuobjdump_list_ptx.txt" 2>&1
c_elf=$(grep -c '^ELF file' "$OUT/cuobjdump_list_elf.txt")
c_ptx=$(grep -c '^PTX file' "$OUT/cuobjdump_list_ptx.txt")
# PTX for an arch <= 90 (the file names end in .sm_NN.ptx / .sm_NNa.ptx)
c_ptx90=$(grep '^PTX file' "$OUT/cuobjdump_list_ptx.txt" | grep -o 'sm_[0-9]*' | tr -d 'sm_' | awk '$1 <= 90' | wc -l)
echo "cuobjdump: cubins $c_elf, PTX $c_ptx, PTX for sm_<=90 $c_ptx90"

[ "$sass" -eq "$c_elf" ] || { echo "FAIL: cubin count $sass != cuobjdump's $c_elf"; fail=1; }
[ "$ptx" -eq "$c_ptx" ] || { echo "FAIL: PTX count $ptx != cuobjdump's $c_ptx"; fail=1; }
[ "$usable" -eq 0 ] && [ "$c_ptx90" -eq 0 ] || { echo "FAIL: PTX usable on sm_90 found (cubpf $usable, cuobjdump $c_ptx90)"; fail=1; }
[ "$sass" -ge 1000 ] || { echo "FAIL: only $sass cubins: not the PyTorch build expected (~2800)"; fail=1; }
[ "$fail" -eq 0 ] && echo "PASS: $sass cubins and $ptx PTX entries, as cuobjdump lists; no PTX for sm_90"
exit $fail
