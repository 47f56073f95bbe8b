# Python multiprocessing over cubpf's libcuda.so.1 and the fake driver (issue 17): two workers
# started with the start method given (spawn: new interpreters; fork: copies of this one, which
# has not touched CUDA yet, as CUDA requires) each load a module and launch its kernel 3 times
# (5 x 32 threads), then the parent does the same.  Exit status 0 when every process succeeded.
import ctypes
import multiprocessing as mp
import sys

PTX = (b".version 8.0\n.target sm_90\n.address_size 64\n\n"
       b".visible .entry tools_k(\n\t.param .u64 tools_k_param_0\n)\n{\n\tret;\n}\n\0")


def use_cuda(who):
    cu = ctypes.CDLL("libcuda.so.1")
    mod, f = ctypes.c_void_p(), ctypes.c_void_p()
    if cu.cuModuleLoadData(ctypes.byref(mod), PTX) != 0:
        raise SystemExit("mp_app: %s: module load failed" % who)
    if cu.cuModuleGetFunction(ctypes.byref(f), mod, b"tools_k") != 0:
        raise SystemExit("mp_app: %s: no function" % who)
    for _ in range(3):
        if cu.cuLaunchKernel(f, 5, 1, 1, 32, 1, 1, 0, None, None, None) != 0:
            raise SystemExit("mp_app: %s: launch failed" % who)


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    workers = [ctx.Process(target=use_cuda, args=("worker %d" % i,)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if any(w.exitcode != 0 for w in workers):
        raise SystemExit("mp_app: a worker failed: %s" % [w.exitcode for w in workers])
    use_cuda("parent")
    print("mp_app: done (%s)" % sys.argv[1])
