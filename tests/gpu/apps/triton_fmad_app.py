# Triton kernels whose float code -fmad can change (issue 30): a multiply-add, a softmax and a
# matmul, each compiled with enable_fp_fusion on (Triton's default) and off, next to a plain add.
# Their cubins keep the PTX (Triton's line info) but not ptxas's options (no .note.nv.tkinfo):
# cubpf must find -fmad by reproducing each cubin's machine code, or refuse with the reason.
# Prints a hash of every output's bytes (the check is bit for bit against the native run) and,
# for tests/gpu/frameworks.sh, what kcount must count.
import hashlib

import torch
import triton
import triton.language as tl


@triton.jit
def fadd_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def madd_kernel(x_ptr, y_ptr, z_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    z = tl.load(z_ptr + offs, mask=m)
    tl.store(o_ptr + offs, x * y + z, mask=m)


@triton.jit
def softmax_kernel(x_ptr, o_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=m, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(o_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=m)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def digest(t):
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]


def expect(name, compiled, grid):
    warps = getattr(getattr(compiled, "metadata", compiled), "num_warps", 4)
    return grid, grid * warps * 32


g = torch.Generator(device="cuda").manual_seed(7)
n = 1 << 16
x = torch.randn(n, device="cuda", generator=g)
y = torch.randn(n, device="cuda", generator=g)
z = torch.randn(n, device="cuda", generator=g)
rows, cols = 64, 1000
s = torch.randn(rows, cols, device="cuda", generator=g)
M = N = K = 128
a = torch.randn(M, K, device="cuda", generator=g, dtype=torch.float16)
b = torch.randn(K, N, device="cuda", generator=g, dtype=torch.float16)
counts = {}

for fusion in (True, False):
    o = torch.empty_like(x)
    grid = triton.cdiv(n, 1024)
    k = fadd_kernel[(grid,)](x, y, o, n, BLOCK=1024, enable_fp_fusion=fusion)
    print("fadd fusion=%s %s" % (fusion, digest(o)))
    counts.setdefault("fadd_kernel", []).append(expect("fadd", k, grid))
    k = madd_kernel[(grid,)](x, y, z, o, n, BLOCK=1024, enable_fp_fusion=fusion)
    print("madd fusion=%s %s" % (fusion, digest(o)))
    counts.setdefault("madd_kernel", []).append(expect("madd", k, grid))
    so = torch.empty_like(s)
    k = softmax_kernel[(rows,)](s, so, cols, BLOCK=1024, enable_fp_fusion=fusion)
    print("softmax fusion=%s %s" % (fusion, digest(so)))
    counts.setdefault("softmax_kernel", []).append(expect("softmax", k, rows))
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    k = matmul_kernel[(M // 64, N // 64)](a, b, c, M, N, K, BM=64, BN=64, BK=32,
                                          enable_fp_fusion=fusion)
    print("matmul fusion=%s %s" % (fusion, digest(c)))
    counts.setdefault("matmul_kernel", []).append(expect("matmul", k, (M // 64) * (N // 64)))
torch.cuda.synchronize()
for name, runs in counts.items():
    print("expect kcount %s %d %d" % (name, sum(r[0] > 0 for r in runs), sum(r[1] for r in runs)))
print("triton_fmad_app: done")
