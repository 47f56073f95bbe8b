# Issue 33: a PyTorch program that keeps launching for about 8 seconds (a few kernels, many
# launches), so that `cubpf run --metrics` is scraped several times while it runs.
import time

import torch

x = torch.randn(1024, 1024, device="cuda")
end = time.time() + 8
steps = 0
while time.time() < end:
    y = torch.relu(x @ x) * 0.5
    x = y / (y.norm() + 1)
    steps += 1
    if steps % 50 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
time.sleep(3)  # idle: scrapes after the last launch see the final counts (the report's)
print("metrics_app: steps=%d done" % steps)
