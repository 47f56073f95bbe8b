#!/usr/bin/env python3
"""Runs a kernel instrumented with tests/ptx/probes/block.bpf.c (blockprobe/blockretprobe) on
ptxsim.py's model, every thread of several grids one after the other, and checks the block end's
protocol over the context's block table (ptx-rewriter/layout.h, "thread block table"), whose
key, start slot and slot layout are re-derived here independently of the C macros:
  - each block's thread (0,0,0) runs first (the entry barrier's guarantee: it inserts the block
    before any thread of it looks the block up), the other threads after, shuffled across all
    blocks of all grids, so that many blocks are live at once;
  - grid B's %gridid is chosen so that its blocks start at the slots of grid A's: they probe
    past them; grid C runs after A and B are done and starts on the slots they freed;
  - grid D (one block) finds its CUBPF_BLOCK_PROBES slots taken: it is not tracked, its end
    runs no probe, the table counts it.
Expected: counts[0] (begins) = every block, counts[1] (ends) = every tracked block, each by its
own index (counts[2], counts[3]), no end before its begin, ctx->end 0 at begin, begin_ns the
begin's own time (counts[4..6] = 0), every slot EMPTY or TOMB at the end (but D's fillers).
Threads are one-lane warps: each leaves alone.  Concurrency is not modelled (the GPU run,
tests/gpu/t_blocks.sh, is the reference for it).
Also: each block's end probe runs when its last thread leaves, never before; its ctx->begin_ns
(block.bpf.c's begins[b]) is the time the block began (the clock ticks 32 per read here); every
slot a block took is EMPTY again after it (a freed slot needs no tombstone: the scan for a
key never stops at a free slot); a slot an older cubpf left TOMB is taken too.
usage: ptxsim_blocks.py MODULE.ptx KERNEL C T B   (C, T, B: the i of the __cubpf_map_<i> of
block.bpf.c's maps counts, times, begins)      prints "N passed, M failed"."""
import os, random, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim import VM, Mem, mask

M64 = (1 << 64) - 1
SLOTS, PROBES, SLOT_BYTES, EMPTY, TOMB = 32768, 128, 32, 0, 2
MUL = 0x9E3779B97F4A7C15
SYMS = 0x1000            # the module's __cubpf_* pointers
TABLE = 0x20000000       # the block table
MAPS = 0x30000000        # map i at MAPS + i * 0x100000
OUT = 0x40000000         # the kernel's output array

def key(gridid, cta):
    rot = ((gridid << 32) | (gridid >> 32)) & M64
    return (((rot ^ cta) << 1) | 1) & M64

def start(k):
    return ((k * MUL) & M64) >> (64 - 15)

clock = [1000]
votes = {}  # (gridid, block) -> the OR of the votes of the block's threads at its bar.red
class BVM(VM):
    # bar.red.or.pred: every thread of the block gets the OR of all votes.  Thread (0,0,0)
    # runs first (see above) and the others vote false (inject.c's block_begin): the OR is
    # what thread (0,0,0) voted, which the model hands to the threads that run after it.
    def bar_red(self, parts, ops):
        assert parts[2:] == ['or', 'pred'], parts
        k = (self.sregs['%gridid'], self.sregs['%ctaid.x'])
        c = ops[-1]
        own = bool(self.reg.get(c.lstrip('!'), 0)) != c.startswith('!')
        votes[k] = votes.get(k, False) or own
        self.reg[ops[0]] = votes[k]

    def val(self, op, bits=64):
        if op.strip() == '%globaltimer':
            clock[0] += 32
            return clock[0]
        return VM.val(self, op, bits)

def kernel(text, name):
    m = re.search(r'\.entry ' + re.escape(name) + r'\((.*?)\)\s*\{\n(.*?)\n\}\n', text, re.S)
    params = re.findall(r'\.param \.\w+ (\w+)', m.group(1))
    return params, m.group(2)

results = []
def check(cond, what):
    results.append(cond)
    print(('ok    ' if cond else 'FAIL  ') + what)

def main():
    text = open(sys.argv[1]).read()
    params, body = kernel(text, sys.argv[2])
    mem = Mem()
    syms = {}
    for i in sorted(set(int(x) for x in re.findall(r'__cubpf_map_(\d+);', text))):
        syms['__cubpf_map_%d' % i] = SYMS + 8 * i
        mem.wr(SYMS + 8 * i, 8, MAPS + i * 0x100000)
    syms['__cubpf_blocks'] = SYMS + 0x800
    mem.wr(SYMS + 0x800, 8, TABLE)
    ntid, n_valid = 8, 8 * 5 - 3       # threads past n_valid leave at once (pred_ret)
    grids = {'A': (5, 6)}  # name: (%gridid, blocks)
    a_slots = {start(key(5, b)) for b in range(6)}
    gb = next(g for g in range(6, 1 << 20) if start(key(g, 0)) in a_slots)
    grids['B'] = (gb, 6)
    gc = next(g for g in range(gb + 1, 1 << 22) if start(key(g, 0)) in a_slots)
    grids['C'] = (gc, 6)
    gd = gc + 1
    d_start = start(key(gd, 0))
    for i in range(PROBES):  # grid D's block finds every slot it may try taken
        mem.wr(TABLE + ((d_start + i) % SLOTS) * SLOT_BYTES, 8, (0xF00D0000 + 2 * i) | 1)
    grids['D'] = (gd, 1)

    cm, tm, bm = (int(x) for x in sys.argv[3:6])
    cnt = lambda k: mem.rd(MAPS + cm * 0x100000 + 8 * k, 8)
    remaining = {(g, b): ntid for g, (_, nb) in grids.items() for b in range(nb)}
    early, slots, begun = [], {}, {}

    def find(g, b):  # the slot holding the block's key (re-derived probing), or None
        k = key(grids[g][0], b)
        for i in range(PROBES):
            s = (start(k) + i) % SLOTS
            if mem.rd(TABLE + s * SLOT_BYTES, 8) == k:
                return s
        return None

    def run(g, b, t):
        ends = cnt(1)
        run1(g, b, t)
        remaining[(g, b)] -= 1
        if t == 0:
            slots[(g, b)] = find(g, b)
            if slots[(g, b)] is not None:  # the slot's begin, the blockprobe's time_ns
                begun[(g, b)] = (mem.rd(TABLE + slots[(g, b)] * SLOT_BYTES + 8, 8),
                                 mem.rd(MAPS + tm * 0x100000 + 16 * b, 8))
        if cnt(1) != ends and (remaining[(g, b)] or cnt(1) != ends + 1):
            early.append((g, b, t))
        if cnt(1) != ends and b < 4096:  # the end's begin_ns: the slot's, the block's own
            seen = mem.rd(MAPS + bm * 0x100000 + 8 * b, 8)
            if begun.get((g, b)) != (seen, seen + 32):
                early.append((g, b, 'begin_ns %d' % seen))

    def run1(g, b, t):
        gridid, nb = grids[g]
        sregs = {'%tid.x': t, '%tid.y': 0, '%tid.z': 0, '%ntid.x': ntid, '%ntid.y': 1,
                 '%ntid.z': 1, '%ctaid.x': b, '%ctaid.y': 0, '%ctaid.z': 0, '%nctaid.x': nb,
                 '%nctaid.y': 1, '%nctaid.z': 1, '%gridid': gridid, '%lanemask_lt': 0,
                 '%smid': 0, '%laneid': 0, '%warpid': 0}
        vm = BVM(body, mem, 0, 0, syms, sregs)
        vm.params = {params[0]: OUT, params[1]: n_valid}
        vm.run()

    rng = random.Random(32)
    # A and B: every thread 0 first (all 12 blocks live at once), the rest shuffled
    rest = []
    for g in 'AB':
        for b in range(grids[g][1]):
            run(g, b, 0)
            rest += [(g, b, t) for t in range(1, ntid)]
    live = [s for s in range(SLOTS) if mem.rd(TABLE + s * SLOT_BYTES, 8) & 1]
    check(len(live) == 12 + PROBES, 'A and B: 12 blocks live in the table (%d slots with keys)'
          % (len(live) - PROBES))
    rng.shuffle(rest)
    for g, b, t in rest:
        run(g, b, t)
    ab = {s for gb, s in slots.items() if gb[0] in 'AB'}
    check(None not in ab and all(mem.rd(TABLE + s * SLOT_BYTES, 8) == EMPTY for s in ab),
          'A and B done: every slot they took is EMPTY again (%d slots)' % len(ab))
    # C after A and B: on the slots they freed, as an older cubpf would have left them (TOMB);
    # D: not tracked
    tombs = set(ab) - {None}
    for s in tombs:
        mem.wr(TABLE + s * SLOT_BYTES, 8, TOMB)
    for g in 'CD':
        for b in range(grids[g][1]):
            run(g, b, 0)
        order = [(b, t) for b in range(grids[g][1]) for t in range(1, ntid)]
        rng.shuffle(order)
        for b, t in order:
            run(g, b, t)
    counts = [cnt(k) for k in range(8)]
    blocks = sum(nb for _, nb in grids.values())
    tracked = blocks - 1
    sums = sum(nb * (nb + 1) // 2 for _, nb in grids.values())
    check(counts[0] == blocks, 'begins %d = blocks %d' % (counts[0], blocks))
    check(counts[1] == tracked, 'ends %d = tracked blocks %d (D has no slot)' % (counts[1], tracked))
    check(counts[2] == sums and counts[3] == sums - 1,
          'each block by its index: %d / %d (expected %d / %d)' % (counts[2], counts[3], sums, sums - 1))
    check(counts[4] == 0 and counts[5] == 0 and counts[6] == 0,
          'no end before its begin, ctx->end 0 at begin, begin_ns its own: %s' % counts[4:7])
    check(mem.rd(TABLE + SLOTS * SLOT_BYTES, 8) == 1, 'the table counts the untracked block')
    left = [s for s in range(SLOTS) if mem.rd(TABLE + s * SLOT_BYTES, 8) & 1
            and not 0xF00D0000 <= mem.rd(TABLE + s * SLOT_BYTES, 8) < 0xF00D0000 + 2 * PROBES]
    check(not left, 'every block left its slot: %d live keys remain' % len(left))
    taken = {s for gb, s in slots.items() if gb[0] != 'D'}
    c_slots = {s for gb, s in slots.items() if gb[0] == 'C'}
    tomb_taken = c_slots & tombs
    check(None not in taken and all(mem.rd(TABLE + s * SLOT_BYTES, 8) ==
                                    (TOMB if s in tombs - c_slots else EMPTY) for s in taken),
          'every slot a block took is EMPTY again, but TOMBs C did not take (%d slots)' % len(taken))
    reused = {s for gb, s in slots.items() if gb[0] == 'C'} & {s for gb, s in slots.items() if gb[0] in 'AB'}
    check(len(reused) > 0, 'C reused the slots A and B freed (%d slots)' % len(reused))
    check(len(tomb_taken) > 0, 'C took slots an older cubpf left TOMB (%d)' % len(tomb_taken))
    check(slots[('D', 0)] is None, 'D took no slot')
    check(not early, 'each end probe ran as its block\'s last thread left, with its begin time: %s'
          % early[:4])
    out = [mem.rd(OUT + 4 * i, 4) for i in range(n_valid)]
    want = [[10, 11, 12, 13][i % 4] for i in range(n_valid)]
    check(out == want, "the kernel's own results")
    ok = sum(results)
    print('%d passed, %d failed' % (ok, len(results) - ok))
    return 0 if ok == len(results) else 1

if __name__ == '__main__':
    sys.exit(main())
