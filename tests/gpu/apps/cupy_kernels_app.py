# CuPy with its default settings (NVRTC to a cubin, cached in CUPY_CACHE_DIR): a RawKernel and an
# ElementwiseKernel, with integer results and the counts a probe must find for the RawKernel.
import cupy as cp

n = 1 << 18
block = 256
raw = cp.RawKernel(r'''
extern "C" __global__ void cupy_raw_mix(const unsigned int *a, unsigned int *b, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i] * 3u + (i ^ 5u);
}
''', "cupy_raw_mix")
ew = cp.ElementwiseKernel("uint32 x, uint32 y", "uint32 z", "z = (x * 7u) ^ (y + 1u)",
                          "cupy_ew_mix")
a = cp.arange(n, dtype=cp.uint32)
b = cp.empty_like(a)
for _ in range(3):
    raw((n // block,), (block,), (a, b, cp.uint32(n)))
z = ew(a, b)
cp.cuda.Device(0).synchronize()
print("cupy raw sum=%d ew sum=%d" % (int(b.sum(dtype=cp.uint64)), int(z.sum(dtype=cp.uint64))))
print("expect kcount cupy_raw_mix 3 %d" % (3 * n))
print("expect memtrace cupy_raw_mix global load %d" % (3 * n * 4))
print("expect memtrace cupy_raw_mix global store %d" % (3 * n * 4))
print("cupy_kernels_app: done")
