# Inductor: a small model compiled with torch.compile (default mode); Inductor generates Triton
# kernels for the pointwise and reduction parts (the matmuls stay cuBLAS calls).  Sums are
# printed rounded to 6 significant digits: Inductor may pick among reduction configs by timing,
# which changes the order of float additions, never the rounded result.
import torch

torch.manual_seed(0)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 512)
        self.norm = torch.nn.LayerNorm(512)
        self.fc2 = torch.nn.Linear(512, 64)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.norm(self.fc1(x)))
        return torch.softmax(self.fc2(h) * 0.5, dim=-1)


model = Model().cuda()
x = torch.randn(1024, 256, device="cuda")
with torch.no_grad():
    eager = model(x)
    compiled = torch.compile(model)
    y = compiled(x)
    y2 = compiled(x + 1)
torch.cuda.synchronize()
close = bool(torch.allclose(eager, y, atol=1e-5, rtol=1e-4))
print("inductor sum=%.6g row0max=%.6g sum2=%.6g matches_eager=%s" %
      (float(y.sum()), float(y[0].max()), float(y2.sum()), close))
print("inductor_app: done" if close else "inductor_app: MISMATCH")
