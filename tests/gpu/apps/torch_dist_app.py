# Two processes, one GPU each, an all-reduce over NCCL (issue 20): torch.multiprocessing starts
# the workers with "spawn" (each a new python that loads libcuda itself).  Each worker runs a
# Triton kernel (probed: it carries its PTX) and NCCL's kernels (SASS only); rank 0 prints the
# results of both, so that the output does not depend on the order the workers finish in.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take a shared host's GPUs down.
import os
import socket

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import triton
import triton.language as tl

N = 98432


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def worker(rank, world, port):
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world, device_id=dev)
    x = torch.arange(N, dtype=torch.int32, device=dev) * (rank + 1)
    y = torch.ones(N, dtype=torch.int32, device=dev)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(N, 1024),)](x, y, out, N, BLOCK=1024)
    dist.all_reduce(out)                   # sum over the ranks, on each rank
    check = torch.tensor([int(out.sum().item()), rank + 1], dtype=torch.int64, device=dev)
    gathered = [torch.zeros_like(check) for _ in range(world)]
    dist.all_gather(gathered, check)
    torch.cuda.synchronize()
    if rank == 0:
        for r, g in enumerate(gathered):
            print("rank %d: all-reduced sum=%d rank+1=%d" % (r, int(g[0].item()), int(g[1].item())))
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    if torch.cuda.device_count() < 2:
        raise SystemExit("torch_dist_app: needs two GPUs, found %d" % torch.cuda.device_count())
    world = 2
    mp.spawn(worker, args=(world, free_port()), nprocs=world, join=True)
    grid = triton.cdiv(N, 1024)
    expected = sum(sum(range(N)) * (r + 1) + N for r in range(world))
    print("expected all-reduced sum=%d" % expected)
    # what a merged report must count: add_kernel once in each process, grid x 4 warps x 32
    print("expect kcount add_kernel %d %d" % (world, world * grid * 4 * 32))
    print("torch_dist_app: done")
