# CUPTI in the same process as cubpf (issue 29): PyTorch's profiler (Kineto, on CUPTI's activity
# API) records the GPU kernels of a matmul, a convolution and a softmax (SASS-only library
# kernels) while cubpf's Sanitizer backend patches them.  Prints the results' digests and how
# many kernel activities the profiler saw (both must be the same with and without cubpf).
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from sass_common import digest, setup

dev = setup()

a = torch.randn(256, 256).to(dev)
x = torch.randn(4, 3, 32, 32).to(dev)
w = torch.randn(8, 3, 3, 3).to(dev)
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    c = a @ a
    y = torch.nn.functional.conv2d(x, w, padding=1)
    s = torch.softmax(c, dim=1)
    torch.cuda.synchronize()
print("matmul", digest(c), "conv2d", digest(y), "softmax", digest(s))
gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
# A CUPTI profile shows the whole process's GPU work: cubpf's own kernels (its clock calibration
# and map scans, cubpf_*) and its copies and memsets (maps zeroed and read back) too.  Only the
# program's kernels are compared with a native run; the rest is counted on stderr.
copies = [e for e in gpu if e.name.startswith(("Memcpy", "Memset"))]
own = [e for e in gpu if e.name.startswith("cubpf_")]
print("profiler kernel activities:", len(gpu) - len(copies) - len(own))
print("profiler activities: %d copies and memsets, %d of cubpf's own kernels" %
      (len(copies), len(own)), file=sys.stderr)
