# shim/: the drop-in libcuda.so.1.
