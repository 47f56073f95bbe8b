#!/usr/bin/env python3
"""Instruction counts (issue 32: bbprobe, bbretprobe, ctx->insns) checked on ptxsim.py's model
against the model itself: the kernel runs natively, every thread one after the other, and the
instructions each thread fetches (predicated-off ones included, its final ret too) are
counted; then the instrumented module runs the same threads (each a warp of one lane, so that
a warp-level count equals the thread's) and the probe's map must hold the sum.
usage: ptxsim_instr.py NATIVE.ptx INSTRUMENTED.ptx KERNEL MAP THREAD_SLOT WARP_SLOT
  (MAP: the i of __cubpf_map_<i> of the probe's `counts`; *_SLOT: the word of counts that holds
  the threads' and the warps' instructions, or words joined by '+' whose sum does, -1: none)
  A 7th argument `wide` makes every bpf_warp_sum take its path for values of 2^27 and more
  (the threshold of its one-reduction path set to 0).   prints "N passed, M failed"."""
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim import VM, Mem

SYMS, MAPS, OUT = 0x1000, 0x30000000, 0x40000000
NTID, NBLOCKS, NVALID = 16, 4, 16 * 4 - 5   # the last 5 threads leave at once
ITERS = 5                                    # any further parameter (a trip count)


class Fetches(list):
    """The kernel's code: counts every instruction the model fetches."""
    n = 0

    def __getitem__(self, i):
        Fetches.n += 1
        return list.__getitem__(self, i)


class IVM(VM):
    def run(self):
        self.code = Fetches(self.code)
        return VM.run(self)


def kernel(text, name):
    m = re.search(r'\.entry ' + re.escape(name) + r'\((.*?)\)\s*\{\n(.*?)\n\}\n', text, re.S)
    params = re.findall(r'\.param \.\w+ (\w+)', m.group(1))
    # one-lane warps: redux.sync over the lane itself is its own value
    body = re.sub(r'redux\.sync\.add\.u32 (%\w+), (%\w+), %\w+;', r'mov.u32 \1, \2;', m.group(2))
    return params, body


def run_threads(text, name, mem, syms):
    params, body = kernel(text, name)
    per = []
    for b in range(NBLOCKS):
        for t in range(NTID):
            sregs = {'%tid.x': t, '%tid.y': 0, '%tid.z': 0, '%ntid.x': NTID, '%ntid.y': 1,
                     '%ntid.z': 1, '%ctaid.x': b, '%ctaid.y': 0, '%ctaid.z': 0,
                     '%nctaid.x': NBLOCKS, '%nctaid.y': 1, '%nctaid.z': 1, '%lanemask_lt': 0,
                     '%smid': 0, '%laneid': 0, '%warpid': 0}
            vm = IVM(body, mem, 0, 0, syms, sregs)
            vm.params = {params[0]: OUT, params[1]: NVALID}
            vm.params.update({p: ITERS for p in params[2:]})
            Fetches.n = 0
            vm.run()
            per.append(Fetches.n)
    return per


def main():
    native, inst, name = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
    if sys.argv[7:] == ['wide']:
        inst, n = re.subn(r'(setp\.lt\.u64 %__cb_p1, %__cb_r1, )134217728;', r'\g<1>0;', inst)
        assert n, 'no bpf_warp_sum to widen'

    cm = int(sys.argv[4])
    ts, ws = ([int(w) for w in a.split('+')] for a in sys.argv[5:7])
    results = []

    def check(cond, what):
        results.append(cond)
        print(('ok    ' if cond else 'FAIL  ') + what)

    mem0 = Mem()
    per = run_threads(native, name, mem0, {})
    want = sum(per)
    mem = Mem()
    syms = {}
    for i in sorted(set(int(x) for x in re.findall(r'__cubpf_map_(\d+);', inst))):
        syms['__cubpf_map_%d' % i] = SYMS + 8 * i
        mem.wr(SYMS + 8 * i, 8, MAPS + i * 0x100000)
    run_threads(inst, name, mem, syms)
    cnt = lambda ks: sum(mem.rd(MAPS + cm * 0x100000 + 8 * k, 8) for k in ks)
    print('native: %d instructions by %d threads (%s)' % (want, len(per), sorted(set(per))))
    if ts[0] >= 0:
        check(cnt(ts) == want, 'threads: %d, expected %d' % (cnt(ts), want))
    if ws[0] >= 0:
        check(cnt(ws) == want, 'warps of one lane: %d, expected %d' % (cnt(ws), want))
    same = all(mem.rd(OUT + 4 * i, 4) == mem0.rd(OUT + 4 * i, 4) for i in range(NVALID))
    check(same, "the kernel's own results")
    ok = sum(results)
    print('%d passed, %d failed' % (ok, len(results) - ok))
    return 0 if ok == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
