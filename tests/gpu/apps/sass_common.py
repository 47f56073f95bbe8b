# What the Sanitizer backend's PyTorch programs share (torch_sass_app.py, torch_cupti_app.py):
# deterministic algorithms and a fixed seed, and a digest of a tensor's bytes, so that runs with
# and without cubpf print the same lines.
import hashlib

import torch


def setup():
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    return torch.device("cuda")


def digest(t):
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
