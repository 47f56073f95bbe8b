# Issue 33 (CUBPF_METRICS): a Triton kernel launched for about 6 seconds, then 3 s idle.  Triton
# loads its kernels as PTX or cubins with PTX through cuModuleLoadData, which cubpf instruments
# (PyTorch's own kernels are SASS only on recent GPUs), so kcount's map counts them on the GPU
# while the program runs and the process's endpoint can be scraped for the counts.
import time

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 0.5 + 1.0, mask=mask)


x = torch.randn(1 << 20, device="cuda")
end = time.time() + 6
steps = 0
while time.time() < end:
    scale_kernel[(x.numel() // 1024,)](x, x.numel(), BLOCK=1024)
    steps += 1
    if steps % 100 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
time.sleep(3)  # idle: scrapes after the last launch see the final counts (the exit dump's)
print("metrics_triton_app: steps=%d done" % steps)
