#!/usr/bin/env python3
"""The deferred counters' flush (ptx-rewriter/accs.c) of one kernel, run on ptxsim_warp.py's
32-lane model: a block of 3 warps whose lanes hold chosen counter values leave in groups (a
whole warp, a warp in two groups, a warp in three), on SM 5, shared memory starting as garbage.
Every counter's map word must end as the sum of its lanes' values (mod 2^64), at the place the
caller names; nothing else in the map may change; with the block's sums (shared memory) nothing
may reach the map before the block's last group leaves.
usage: ptxsim_flush.py MODULE.ptx KERNEL STRIDE OFF0,OFF1,...
  (OFFi: byte offset in the map of counter i's slot-0 copy; STRIDE: the per-SM copy's stride,
  0 for a map of one copy)   prints "N passed, M failed"; exit status 1 on any failure."""
import os, random, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim_warp import Warp, M64

SYMS, MAP, SHARED, SMID, WARPS = 0x1000, 0x30000000, 0x60000000, 5, 3


def pieces(text, name):
    body = re.search(r'\.entry ' + re.escape(name) + r'\(.*?\)\s*\{\n(.*?)\n\}\n', text,
                     re.S).group(1)
    lines = [ln.strip() for ln in body.split('\n')]
    lines = [ln for ln in lines if ln and not ln.startswith('//')]
    a0 = lines.index('mov.b64 %__cb_a0, 0;')
    end = lines.index('bar.sync 0;', a0) + 1 if 'bar.sync 0;' in lines else a0
    while lines[end].startswith('mov.b64 %__cb_a'):
        end += 1
    x = lines.index('$__cubpf_exit:')
    return lines[a0:end], lines[x:lines.index('ret;', x) + 1]


def groups():
    """The order in which (warp, lane mask) groups leave."""
    return [(1, 0x3ff), (0, 0xffffffff), (2, 0x55555555), (1, ~0x3ff & 0xffffffff),
            (2, 0xaaaaaaaa & ~0x2), (2, 0x2)]


def values(kind, n, rnd):
    """Per counter, per thread (96) values."""
    v = [[0] * (32 * WARPS) for _ in range(n)]
    for i in range(n):
        for t in range(32 * WARPS):
            if kind == 'leaders':   # memtrace: the warp's leader holds its counts
                v[i][t] = (64 >> i) if t % 32 == 0 and i % 2 == 0 else 0
            elif kind == 'all':      # large values: carries across 16 and 32 bits, wrap
                v[i][t] = rnd.choice([1, 0xffff, 0x1ffff, 0xffffffff, 1 << 63, M64,
                                      rnd.getrandbits(64)])
            else:                    # some lanes, some counters
                v[i][t] = rnd.getrandbits(40) if rnd.random() < 0.3 else 0
    return v


def run(text, name, stride, offs, kind, rnd):
    entry, flush = pieces(text, name)
    block = any('__cubpf_accs' in ln for ln in entry)
    n = len(offs)
    mem = {SHARED + i: 0xab for i in range(8 * (n + 1))}   # shared memory starts undefined
    syms = {'__cubpf_map_0': SYMS, '__cubpf_accs': SHARED}
    mem.update({SYMS + i: b for i, b in enumerate(MAP.to_bytes(8, 'little'))})
    sreg = lambda w: (lambda lane, r: {'%tid.x': 32 * w + lane, '%ntid.x': 32 * WARPS,
                                       '%smid': SMID}.get(r, 0 if r.startswith('%tid') else 1))
    regs = [[{} for _ in range(32)] for _ in range(WARPS)]
    for w in range(WARPS):  # the entry, every thread (the barrier: all before any leaves)
        Warp(entry, regs[w], 0xffffffff, mem, syms, sreg(w)).run()
    v = values(kind, n, rnd)
    for w in range(WARPS):
        for lane in range(32):
            for i in range(n):
                regs[w][lane]['%%__cb_a%d' % i] = v[i][32 * w + lane]
    mapmem = lambda: {a: b for a, b in mem.items() if MAP <= a < MAP + (1 << 28) and b}
    early = False
    for k, (w, mask) in enumerate(groups()):
        Warp(flush, regs[w], mask, mem, syms, sreg(w)).run()
        early |= block and k < len(groups()) - 1 and bool(mapmem())
    got = mapmem()
    ok = not early
    w = Warp([], [], 0, mem)
    for i, off in enumerate(offs):
        a = MAP + off + SMID * stride
        want = sum(v[i]) & M64
        ok &= w.rd(a, 8) == want
        for b in range(8):
            got.pop(a + b, None)
    return ok and not got, block


def main():
    text, name = open(sys.argv[1]).read(), sys.argv[2]
    stride, offs = int(sys.argv[3]), [int(x) for x in sys.argv[4].split(',')]
    rnd, ok, fail = random.Random(5), 0, 0
    for kind in ('leaders', 'all', 'some'):
        try:
            good, block = run(text, name, stride, offs, kind, rnd)
            what = ''
        except Exception as e:
            good, block, what = False, False, ': ' + str(e)
        print('%s  %s, %s%s' % ('ok  ' if good else 'FAIL', kind,
                                'block sums' if block else 'per warp', what))
        ok, fail = ok + good, fail + (not good)
    print('%d passed, %d failed' % (ok, fail))
    return 1 if fail else 0


if __name__ == '__main__':
    sys.exit(main())
