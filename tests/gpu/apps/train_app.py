# A launch-bound PyTorch training loop (issue 31): a small MLP, SGD, batch 64, on the GPU.
# Prints steps per second over TRAIN_STEPS timed steps (after a warm-up), a digest of the final
# weights (identical with and without cubpf) and the process's peak resident memory (VmHWM: the
# shim runs in this process, so under cubpf it includes cubpf's own).  tests/bench/b_train.sh.
import hashlib
import os
import time

# deterministic cuBLAS (PyTorch refuses deterministic algorithms without it)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
dev = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                            torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device=dev)
y = torch.randint(0, 10, (64,), device=dev)
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss


for _ in range(50):
    step()
torch.cuda.synchronize()
n = int(os.environ.get("TRAIN_STEPS", "1000"))
t0 = time.perf_counter()
for _ in range(n):
    loss = step()
torch.cuda.synchronize()
dt = time.perf_counter() - t0
w = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu().numpy().tobytes()
hwm = 0
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
print("train digest %s" % hashlib.sha256(w).hexdigest()[:16])
print("steps_per_s %.1f" % (n / dt))
print("vmhwm_kb %d" % hwm)
