#!/usr/bin/env bash
# tests/gpu/stacks.sh PID...: every thread's backtrace of processes that preload
# build/gpu/segv_trace.so (no gdb on the GPU machine): SIGUSR2 to each thread in turn (tgkill),
# the stacks land in the process's stderr; also each thread's name and kernel wait channel here.
for p in "$@"; do
  for t in /proc/"$p"/task/*; do
    tid=${t##*/}
    echo "thread $tid $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null) $(awk '{print "state=" $3}' "$t/stat" 2>/dev/null)"
    python3 -c 'import ctypes,sys; ctypes.CDLL(None).syscall(234, int(sys.argv[1]), int(sys.argv[2]), 12)' "$p" "$tid"
    sleep 0.2
  done
done
