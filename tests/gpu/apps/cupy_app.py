# CuPy: a RawKernel (compiled by NVRTC, loaded with cuModuleLoadData) and elementwise ops.
import cupy as cp

print("device:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
add_index = cp.RawKernel(r'''
extern "C" __global__ void add_index(unsigned int *p, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] * 3u + i;
}
''', "add_index")
n = 1 << 20
p = cp.arange(n, dtype=cp.uint32)
add_index(((n + 255) // 256,), (256,), (p, cp.uint32(n)))
print("rawkernel sum=%d first=%s" % (int(p.sum(dtype=cp.uint64)), p[:4].get().tolist()))

x = cp.linspace(0, 1, n, dtype=cp.float64)
y = cp.sin(x) * 2 + cp.sqrt(x)
print("elementwise sum=%.9e max=%.9e" % (float(y.sum()), float(y.max())))
z = (cp.arange(1000, dtype=cp.int64) ** 2) % 7
print("integer ops sum=%d" % int(z.sum()))
cp.cuda.Device(0).synchronize()
print("cupy_app: done")
