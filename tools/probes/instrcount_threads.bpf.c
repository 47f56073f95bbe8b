/* instrcount_threads: instrcount without the warp-level count (its records' `warps` stay 0):
 * one instruction per basic block entry, nothing else while the kernel runs.  Not a tool of
 * its own: `cubpf run -p PREFIX/probes/instrcount_threads.bpf.o` (tests/bench/b_instr.sh
 * measures both). */
#define IC_WARPS 0
#include "instrcount.bpf.c"
