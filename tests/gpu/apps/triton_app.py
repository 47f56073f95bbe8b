# Triton: a vector-add kernel (compiled by Triton, loaded with cuModuleLoadData).
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


n = 98432
x = torch.arange(n, dtype=torch.int32, device="cuda")
y = (torch.arange(n, dtype=torch.int32, device="cuda") * 7) % 1000
out = torch.empty_like(x)
grid = triton.cdiv(n, 1024)
compiled = add_kernel[(grid,)](x, y, out, n, BLOCK=1024)
torch.cuda.synchronize()
ok = bool(torch.equal(out, x + y))
print("triton add sum=%d matches_torch=%s" % (int(out.sum().item()), ok))
# what a probe must count (tests/gpu/frameworks.sh): one launch of grid x num_warps x 32 threads,
# the unmasked elements' bytes
warps = getattr(getattr(compiled, "metadata", compiled), "num_warps", 4)
print("expect kcount add_kernel 1 %d" % (grid * warps * 32))
print("expect memtrace add_kernel global load %d" % (2 * n * 4))
print("expect memtrace add_kernel global store %d" % (n * 4))
print("triton_app: done" if ok else "triton_app: MISMATCH")
