#!/bin/sh
# gen_modload.sh N: a CUDA source of N distinct small kernels (extern "C": modload_k0 ...), the
# large module of tests/bench/b_modload.sh.  Each differs in its constants and loop count, so
# that neither nvcc nor the driver can fold two of them into one.
n=${1:-1000}
i=0
while [ "$i" -lt "$n" ]; do
  printf 'extern "C" __global__ void modload_k%d(float *x, const float *y, int n)\n{\n\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n\tif (i >= n)\n\t\treturn;\n\tfloat v = y[i];\n\tfor (int j = 0; j < %d; j++)\n\t\tv = v * 1.0001f + %d.5f;\n\tx[i] = v + x[(i + %d) %% n];\n}\n' \
    "$i" $((i % 7 + 2)) "$i" "$i"
  i=$((i + 1))
done
