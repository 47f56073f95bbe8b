#!/usr/bin/env python3
"""Runs a module and cases file written by tests/ptx/ptxdiff.c (ptxdiff_prepare) on the CPU PTX
model (ptxsim.py) and compares r0 and every map byte with what the interpreter gave.
usage: ptxdiff.py MODULE.ptx CASES.txt
Prints "same: N runs" or one line per differing run ("DIFF run K: ..."); exit status 1 on any
difference or error."""
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim import VM, Mem

MAPS = 0x1000          # __cubpf_map_<i> pointers
BASE = 0x10000000      # map i's storage at BASE + i * 0x1000000
CTX = 0x100000         # r1: the context bytes

def unhex(s): return b'' if s == '-' else bytes.fromhex(s)

def func_body(text, name):
    m = re.search(r'\.func \(\.param \.b64 __cb_ret\) %s\(.*?\)\n\{\n(.*?)\n\}\n' % name, text, re.S)
    if not m: raise SystemExit('ptxdiff.py: no function %s in the module' % name)
    return m.group(1)

def run_case(body, nmaps, ctx, ins):
    mem = Mem(); syms = {}
    for i in range(nmaps):
        mem.wr(MAPS + 8 * i, 8, BASE + i * 0x1000000)
        syms['__cubpf_map_%d' % i] = MAPS + 8 * i
        for j, b in enumerate(ins[i]): mem.m[BASE + i * 0x1000000 + j] = b
    for j, b in enumerate(ctx): mem.m[CTX + j] = b
    r0 = VM(body, mem, CTX, len(ctx), syms, {}).run()
    outs = [bytes(mem.m.get(BASE + i * 0x1000000 + j, 0) for j in range(len(ins[i])))
            for i in range(nmaps)]
    return r0, outs

def main():
    text = open(sys.argv[1]).read()
    body = func_body(text, 'ptxdiff_f')
    nmaps, runs, bad = 0, 0, 0
    for line in open(sys.argv[2]):
        p = line.split()
        if not p: continue
        if p[0] == 'M': nmaps = int(p[1]); continue
        if p[0] != 'C': continue
        ctx, exp = unhex(p[1]), int(p[2], 16)
        ins = [unhex(x) for x in p[3].split(',')] if nmaps else []
        outs = [unhex(x) for x in p[4].split(',')] if nmaps else []
        runs += 1
        try:
            r0, got = run_case(body, nmaps, ctx, ins)
        except Exception as e:
            print('DIFF run %d: the PTX model stopped: %s' % (runs, e)); bad += 1; continue
        if r0 != exp:
            print('DIFF run %d: r0 %#x on the PTX path, %#x on the interpreter' % (runs, r0 or 0, exp))
            bad += 1; continue
        for i in range(nmaps):
            if got[i] != outs[i]:
                j = next(k for k in range(len(outs[i])) if got[i][k] != outs[i][k])
                print('DIFF run %d: map %d byte %d: %#x on the PTX path, %#x on the interpreter'
                      % (runs, i, j, got[i][j], outs[i][j]))
                bad += 1; break
    if not runs: print('ptxdiff.py: no runs in %s' % sys.argv[2]); return 1
    if not bad: print('same: %d runs' % runs)
    return 1 if bad else 0

if __name__ == '__main__':
    sys.exit(main())
