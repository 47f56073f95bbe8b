#!/usr/bin/env python3
"""Runs one kernel of an instrumented module on ptxsim.py's model, every thread one after the
other (each a warp of one lane, on SM 0), and prints the map's non-zero 64-bit words, so that
a test can check what the probes' deferred counters (ptx-rewriter/accs.c: register adds at the
sites, a flush at each thread's exit) left there against the answer it knows.
Blocks of 8 threads; a block's sums (shared memory) reach the map when its last thread leaves.
usage: ptxsim_defer.py INSTRUMENTED.ptx KERNEL MAP THREADS VALID
  (the kernel's first params are pointers, each to memory of its own; its last is the count,
  given VALID)   prints "word OFFSET VALUE" lines, then "threads N"."""
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim import VM, Mem

SYMS, MAPS, BUFS = 0x1000, 0x30000000, 0x40000000
NTID = 8


def kernel(text, name):
    m = re.search(r'\.entry ' + re.escape(name) + r'\((.*?)\)\s*\{\n(.*?)\n\}\n', text, re.S)
    params = re.findall(r'\.param \.\w+ (\w+)', m.group(1))
    # one-lane warps: redux.sync over the lane itself is its own value
    body = re.sub(r'redux\.sync\.add\.u32 (%\w+), (%\w+), %\w+;', r'mov.u32 \1, \2;', m.group(2))
    return params, body


def main():
    text, name, mi = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
    threads, valid = int(sys.argv[4]), int(sys.argv[5])
    if threads % NTID:
        raise SystemExit('THREADS must be whole blocks of %d' % NTID)
    params, body = kernel(text, name)
    mem, syms = Mem(), {}
    for i in sorted(set(int(x) for x in re.findall(r'__cubpf_map_(\d+)', text))):
        syms['__cubpf_map_%d' % i] = SYMS + 8 * i
        mem.wr(SYMS + 8 * i, 8, MAPS + i * 0x10000000)
    for t in range(threads):
        sregs = {'%tid.x': t % NTID, '%tid.y': 0, '%tid.z': 0, '%ntid.x': NTID, '%ntid.y': 1,
                 '%ntid.z': 1, '%ctaid.x': t // NTID, '%ctaid.y': 0, '%ctaid.z': 0,
                 '%nctaid.x': (threads + NTID - 1) // NTID, '%nctaid.y': 1, '%nctaid.z': 1,
                 '%lanemask_lt': 0, '%smid': 0, '%laneid': 0, '%warpid': 0}
        vm = VM(body, mem, 0, 0, syms, sregs)
        vm.params = {p: BUFS + k * 0x1000000 for k, p in enumerate(params[:-1])}
        vm.params[params[-1]] = valid
        vm.run()
    base = MAPS + mi * 0x10000000
    for a in sorted(x for x in mem.m if base <= x < base + 0x10000000 and (x - base) % 8 == 0):
        v = mem.rd(a, 8)
        if v:
            print('word %d %d' % (a - base, v))
    print('threads %d' % threads)
    return 0


if __name__ == '__main__':
    sys.exit(main())
