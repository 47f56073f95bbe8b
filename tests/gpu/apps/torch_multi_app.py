# Two GPUs in one process (issue 20): a Triton kernel (it carries its PTX, so cubpf probes it) and
# PyTorch's own kernels on cuda:0 and on cuda:1, and a peer copy between the two.  Integer-valued
# data, so that every run prints the same lines.
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


if torch.cuda.device_count() < 2:
    raise SystemExit("torch_multi_app: needs two GPUs, found %d" % torch.cuda.device_count())
n = 98432
grid = triton.cdiv(n, 1024)
warps = 4
ok = True
outs = []
for d in (0, 1):
    dev = torch.device("cuda", d)
    with torch.cuda.device(d):
        x = torch.arange(n, dtype=torch.int32, device=dev) * (d + 1)
        y = (torch.arange(n, dtype=torch.int32, device=dev) * 7) % 1000
        out = torch.empty_like(x)
        compiled = add_kernel[(grid,)](x, y, out, n, BLOCK=1024)
        warps = getattr(getattr(compiled, "metadata", compiled), "num_warps", 4)
        torch.cuda.synchronize(d)
        same = bool(torch.equal(out, x + y))
        ok = ok and same
        print("cuda:%d triton add sum=%d matches_torch=%s" % (d, int(out.sum().item()), same))
        outs.append(out)
# PyTorch's kernels on both GPUs, and a copy from one GPU's memory to the other's
a = (torch.arange(256 * 256, dtype=torch.float32) % 17).reshape(256, 256)
a0 = a.to("cuda:0")
a1 = a0.to("cuda:1")                      # device to device
c1 = a1 @ a1
back = c1.to("cuda:0")
moved = outs[1].to("cuda:0") - outs[0]    # the second GPU's result, read on the first
torch.cuda.synchronize(0)
torch.cuda.synchronize(1)
print("peer access 0->1: %s" % torch.cuda.can_device_access_peer(0, 1))
print("matmul on cuda:1 sum=%d, copied to cuda:0 sum=%d" % (int(c1.sum().item()), int(back.sum().item())))
print("difference of the two GPUs' results sum=%d" % int(moved.sum().item()))
# what a probe must count (tests/gpu/t_fw_multi.sh): add_kernel once per GPU, grid x warps x 32
# threads each; the unmasked elements' bytes
print("expect kcount add_kernel 2 %d" % (2 * grid * warps * 32))
print("expect memtrace add_kernel global load %d" % (2 * 2 * n * 4))
print("expect memtrace add_kernel global store %d" % (2 * n * 4))
print("torch_multi_app: done" if ok else "torch_multi_app: MISMATCH")
