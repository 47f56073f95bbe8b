#!/usr/bin/env python3
"""Instruction counts by threads and by warps of a whole kernel on ptxsim_warp.py's 32-lane
model: the kernel runs natively, warp after warp (2 blocks of 2 warps, the last threads past
n leaving at once), and every instruction a group of lanes issues together counts once for the
warp and once per lane of the group (predicated-off ones too); a divergent branch splits the
group, which never joins again (the model's rule).  Then the instrumented module runs the same
warps and the probe's map must hold both sums: cubpf's per-block counts, its warp-uniform
loops' (ptx-rewriter/uniform.c), the exit's warp sums and the blocks' sums must agree with the
model's own count.
usage: ptxsim_warpk.py NATIVE.ptx INSTRUMENTED.ptx KERNEL MAP THREAD_WORD WARP_WORD
  (the kernel's params: an output pointer, a count, then trip counts, given ITERS)
  prints "N passed, M failed"."""
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim_warp import Warp

SYMS, MAPS, OUT, PARAMS, SHARED = 0x1000, 0x30000000, 0x40000000, 0x2000, 0x60000000
NTID, NBLOCKS, ITERS = 64, 2, 5
NVALID = NTID * NBLOCKS - 37   # a partial warp, then one with no valid thread


class CWarp(Warp):
    """Counts the instructions each group issues; a guarded ret ends only its lanes."""
    threads = warps = 0

    max_steps = 1000000

    def issued(self, body, active):
        if not body.startswith('$'):
            CWarp.warps += 1
            CWarp.threads += bin(active).count('1')

    def ret(self, on, active):
        return active & ~on


def body(text, name):
    m = re.search(r'\.entry ' + re.escape(name) + r'\((.*?)\)\s*\{\n(.*?)\n\}\n', text, re.S)
    params = re.findall(r'\.param \.\w+ (\w+)', m.group(1))
    lines = []
    for ln in m.group(2).split('\n'):
        ln = re.sub(r'//.*', '', ln).strip()
        if ln.startswith('{') or ln.startswith('}'):
            ln = ln.strip('{} ')
        if ln and not ln.startswith('.'):
            lines.append(ln)
    return params, lines


def sregs(b, w):
    """Lane -> special register of warp w of block b (y and z: 0 and 1)."""
    own = {'%ntid.x': NTID, '%ctaid.x': b, '%nctaid.x': NBLOCKS, '%smid': 0}
    return lambda lane, r: (32 * w + lane if r == '%tid.x' else own[r] if r in own
                            else 0 if r.startswith('%tid') or r.startswith('%ctaid') else 1)


def run(text, name):
    params, lines = body(text, name)
    mem, syms = {}, {'__cubpf_accs': SHARED}
    for i in sorted(set(int(x) for x in re.findall(r'__cubpf_map_(\d+);', text))):
        syms['__cubpf_map_%d' % i] = SYMS + 8 * i
        Warp([], [], 0, mem).wr(SYMS + 8 * i, 8, MAPS + i * 0x1000000)
    vals = [OUT, NVALID] + [ITERS] * (len(params) - 2)
    for k, p in enumerate(params):
        syms[p] = PARAMS + 8 * k
        Warp([], [], 0, mem).wr(PARAMS + 8 * k, 8, vals[k])
    CWarp.threads = CWarp.warps = 0
    for b in range(NBLOCKS):
        for w in range(NTID // 32):
            CWarp(lines, [{} for _ in range(32)], 0xffffffff, mem, syms, sregs(b, w)).run()
    return mem, CWarp.threads, CWarp.warps


def main():
    native, inst, name = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
    mi, tw, ww = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    mem0, threads, warps = run(native, name)
    mem, _, _ = run(inst, name)
    rd = lambda w: Warp([], [], 0, mem).rd(MAPS + mi * 0x1000000 + 8 * w, 8)
    out = lambda m: [Warp([], [], 0, m).rd(OUT + 4 * i, 4) for i in range(NVALID)]
    results = [(rd(tw) == threads, 'threads: %d, expected %d' % (rd(tw), threads)),
               (rd(ww) == warps, 'warps: %d, expected %d' % (rd(ww), warps)),
               (out(mem) == out(mem0), "the kernel's own results")]
    for ok, what in results:
        print(('ok    ' if ok else 'FAIL  ') + what)
    good = sum(ok for ok, _ in results)
    print('%d passed, %d failed' % (good, len(results) - good))
    return 0 if good == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
