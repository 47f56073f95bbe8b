# PyTorch's own kernels, cuBLAS, cuDNN and NCCL: every one shipped as SASS only, so cubpf reaches
# them only through the Sanitizer backend (issue 29; tests/gpu/t_sass_torch.sh).  Fixed inputs and
# deterministic algorithms; the digests of the results' bytes must be identical under cubpf.
import os
import tempfile

import torch
import torch.distributed as dist

from sass_common import digest, setup

dev = setup()

a = torch.randn(256, 256).to(dev)
b = torch.randn(256, 256).to(dev)
print("matmul (cuBLAS)", digest(a @ b))
x = torch.randn(4, 3, 32, 32).to(dev)
w = torch.randn(8, 3, 3, 3).to(dev)
print("conv2d (cuDNN)", digest(torch.nn.functional.conv2d(x, w, padding=1)))
print("softmax (ATen)", digest(torch.softmax(a, dim=1)))
print("layer_norm (ATen)", digest(torch.nn.functional.layer_norm(a, (256,))))
# a copy kernel's bytes are known: a dtype conversion (not a cudaMemcpy) reads n floats and
# writes n doubles
n = 1 << 20
c = torch.arange(n, dtype=torch.float32, device=dev)
print("float to double (ATen copy)", digest(c.to(torch.float64)))
print("expect memtrace ~direct_copy_kernel global load %d" % (4 * n))
print("expect memtrace ~direct_copy_kernel global store %d" % (8 * n))

# NCCL: a one-rank communicator (one GPU is enough to run its all-reduce)
store = tempfile.NamedTemporaryFile(delete=False)
store.close()
os.unlink(store.name)
dist.init_process_group("nccl", init_method="file://" + store.name, rank=0, world_size=1)
# with one rank NCCL turns a sum into a copy (or nothing, in place); an average still runs its
# one-rank reduction kernel
t = torch.arange(4096, dtype=torch.float32, device=dev)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
print("all_reduce avg (NCCL)", digest(t))
dist.destroy_process_group()
torch.cuda.synchronize()
print("torch_sass_app: done")
