#!/usr/bin/env bash
# vm/ on the CPU: interpreter speed on an ALU loop and a hash-map-heavy loop, the cost of one
# empty program run (a host uprobe's floor), and the verifier's time on a 4096-instruction
# program (tests/bench/vm_bench.c).  Target: >= 300 M eBPF instructions/s on the ALU loop.
set -u
BUILD=${BUILD:-build}
BIN=$BUILD/bench/vm_bench
if [ ! -x "$BIN" ]; then
  echo "b_vm: missing $BIN (make bench-build)"; exit 1
fi
echo "b_vm: $(uname -m), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//')"
out=$("$BIN") || { echo "$out"; echo "b_vm: vm_bench failed"; exit 1; }
echo "$out"
alu=$(echo "$out" | sed -n 's/^RESULT vm_alu_loop_Minsn_per_s=//p')
if awk -v v="$alu" 'BEGIN { exit !(v >= 300) }'; then
  echo "TARGET vm_alu_loop_Minsn_per_s = $alu (>= 300): met"
else
  echo "TARGET vm_alu_loop_Minsn_per_s = $alu (>= 300): MISSED"; exit 1
fi
