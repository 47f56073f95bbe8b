# PyTorch on the GPU: matmul, conv2d, softmax.  Deterministic algorithms and fixed inputs, so
# that runs with and without the shim print the same lines (tests/gpu/t_shim_apps.sh).
import torch

torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
torch.manual_seed(0)
dev = torch.device("cuda")
print("device:", torch.cuda.get_device_name(0))

a = torch.randn(512, 512).to(dev)
b = torch.randn(512, 512).to(dev)
c = a @ b
print("matmul  sum=%.6e absmax=%.6e" % (c.sum().item(), c.abs().max().item()))

x = torch.randn(8, 3, 64, 64).to(dev)
w = torch.randn(16, 3, 3, 3).to(dev)
y = torch.nn.functional.conv2d(x, w, padding=1)
print("conv2d  sum=%.6e absmax=%.6e shape=%s" % (y.sum().item(), y.abs().max().item(), tuple(y.shape)))

s = torch.softmax(c, dim=1)
print("softmax rowsum_mean=%.6f argmax0=%d" % (s.sum(dim=1).mean().item(), int(s[0].argmax().item())))
torch.cuda.synchronize()
print("torch_app: done")
