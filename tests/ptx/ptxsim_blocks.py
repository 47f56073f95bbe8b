#!/usr/bin/env python3
"""Runs a kernel instrumented with tests/ptx/probes/block.bpf.c (blockprobe/blockretprobe) on
ptxsim.py's model, every thread of several grids one after the other, and checks the block end's
protocol over the block's state: in the kernel's shared memory (ptx-rewriter/layout.h, "thread
block state in shared memory": no __cubpf_blocks in the module) or in the context's block
table ("thread block table"), whose key, start slot and slot layout are re-derived here
independently of the C macros:
  - each block's thread (0,0,0) runs first (the entry barrier's guarantee: it sets the block's
    state before any thread of it counts itself out or looks the block up), the other threads
    after, shuffled across all blocks of all grids, so that many blocks are live at once;
  - the threads of a block leave in groups of lanes (a random partition of the block: the block
    end's activemask and %lanemask_lt read the group's, as if its lanes left together); the
    lowest lane of a group counts the whole group out, the others nothing;
  - grid C has 3-D blocks (2x2x2 threads) in a 3-D grid (3x2x1 blocks);
  - table only: grid B's %gridid is chosen so that its blocks start at the slots of grid A's:
    they probe past them; grid C runs after A and B are done and starts on the slots they
    freed; grid D (one block) finds its CUBPF_BLOCK_PROBES slots taken: it is not tracked, its
    end runs no probe, the table counts it.  Shared memory: D is a block like the others, the
    table is not there (no symbol: any access to it fails), and shared memory starts as
    garbage.
Expected: counts[0] (begins) = every block, counts[1] (ends) = every tracked block (all of them
with shared memory), each by its own index (counts[2], counts[3]), no end before its begin,
ctx->end 0 at begin, begin_ns the begin's own time (counts[4..6] = 0), every slot EMPTY or TOMB
at the end (but D's fillers).  Concurrency is not modelled (the GPU run, tests/gpu/t_blocks.sh,
is the reference for it).
Also: each block's end probe runs when its last group of threads is counted out, never before;
its ctx->begin_ns (block.bpf.c's begins[b]) is the time the block began (the clock ticks 32 per
read here); with the table, every slot a block took is EMPTY again after it (a freed slot needs
no tombstone: the scan for a key never stops at a free slot); a slot an older cubpf left TOMB
is taken too.
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
SHARED = (0x60000000, 0x70000000)  # ptxsim's .shared arrays

def key(gridid, cta):
    rot = ((gridid << 32) | (gridid >> 32)) & M64
    return (((rot ^ cta) << 1) | 1) & M64

def start(k):
    return ((k * MUL) & M64) >> (64 - 15)

class GMem(Mem):
    """Shared memory starts undefined: 0xab where nothing was stored."""
    def rd(self, a, n):
        return int.from_bytes(bytes(self.m.get(a + i, 0xab if SHARED[0] <= a + i < SHARED[1]
                                               else 0) for i in range(n)), 'little')

clock = [1000]
votes = {}  # (gridid, block) -> the OR of the votes of the block's threads at its bar.red
class BVM(VM):
    # bar.red.or.pred: every thread of the block gets the OR of all votes.  Thread (0,0,0)
    # runs first (see above) and the others vote false (inject.c's block_begin): the OR is
    # what thread (0,0,0) voted, which the model hands to the threads that run after it.
    def bar_red(self, parts, ops):
        assert parts[2:] == ['or', 'pred'], parts
        k = tuple(self.sregs[r] for r in ('%gridid', '%ctaid.x', '%ctaid.y', '%ctaid.z'))
        c = ops[-1]
        own = bool(self.reg.get(c.lstrip('!'), 0)) != c.startswith('!')
        votes[k] = votes.get(k, False) or own
        self.reg[ops[0]] = votes[k]

    def val(self, op, bits=64):
        if op.strip() == '%globaltimer':
            clock[0] += 32
            return clock[0]
        return VM.val(self, op, bits)

# The block end's reads of its group of lanes (inject.c, block_leader): the model's
GROUP = [('activemask.b32 %__cb_b0;', 'mov.u32 %__cb_b0, %__sim_group;'),
         ('mov.u32 %__cb_b2, %lanemask_lt;', 'mov.u32 %__cb_b2, %__sim_lanemask_lt;')]

def kernel(text, name):
    m = re.search(r'\.entry ' + re.escape(name) + r'\((.*?)\)\s*\{\n(.*?)\n\}\n', text, re.S)
    params = re.findall(r'\.param \.\w+ (\w+)', m.group(1))
    body = m.group(2)
    for old, new in GROUP:
        assert body.count(old) == 1, old
        body = body.replace(old, new)
    return params, body

results = []
def check(cond, what):
    results.append(cond)
    print(('ok    ' if cond else 'FAIL  ') + what)

def groups(n, rng):
    """A random partition of a block's n threads (lanes 0..n-1 of one warp) into groups of
    lanes leaving together: thread -> its group's mask."""
    ts = list(range(n))
    rng.shuffle(ts)
    of = {}
    while ts:
        k = rng.randint(1, min(4, len(ts)))
        g = sum(1 << t for t in ts[:k])
        for t in ts[:k]:
            of[t] = g
        ts = ts[k:]
    return of

def main():
    text = open(sys.argv[1]).read()
    table = '__cubpf_blocks' in text
    params, body = kernel(text, sys.argv[2])
    mem = GMem()
    syms = {}
    for i in sorted(set(int(x) for x in re.findall(r'__cubpf_map_(\d+);', text))):
        syms['__cubpf_map_%d' % i] = SYMS + 8 * i
        mem.wr(SYMS + 8 * i, 8, MAPS + i * 0x100000)
    if table:
        syms['__cubpf_blocks'] = SYMS + 0x800
        mem.wr(SYMS + 0x800, 8, TABLE)
    n_valid = 8 * 5 - 3       # threads past n_valid leave at once (pred_ret)
    flat = ((1, 1, 1), (8, 1, 1))
    grids = {'A': (5, (6, 1, 1), flat[1])}  # name: (%gridid, nctaid, ntid)
    a_slots = {start(key(5, b)) for b in range(6)}
    gb = next(g for g in range(6, 1 << 20) if start(key(g, 0)) in a_slots)
    grids['B'] = (gb, (6, 1, 1), flat[1])
    gc = next(g for g in range(gb + 1, 1 << 22) if start(key(g, 0)) in a_slots)
    grids['C'] = (gc, (3, 2, 1), (2, 2, 2))
    gd = gc + 1
    d_start = start(key(gd, 0))
    if table:
        for i in range(PROBES):  # grid D's block finds every slot it may try taken
            mem.wr(TABLE + ((d_start + i) % SLOTS) * SLOT_BYTES, 8, (0xF00D0000 + 2 * i) | 1)
    grids['D'] = (gd, (1, 1, 1), flat[1])
    nblocks = lambda g: grids[g][1][0] * grids[g][1][1] * grids[g][1][2]
    nthreads = lambda g: grids[g][2][0] * grids[g][2][1] * grids[g][2][2]

    cm, tm, bm = (int(x) for x in sys.argv[3:6])
    cnt = lambda k: mem.rd(MAPS + cm * 0x100000 + 8 * k, 8)
    rng = random.Random(32)
    remaining = {(g, b): nthreads(g) for g in grids for b in range(nblocks(g))}
    group = {(g, b): groups(nthreads(g), rng) for g in grids for b in range(nblocks(g))}
    early, slots, begun = [], {}, {}

    def find(g, b):  # the slot holding the block's key (re-derived probing), or None
        k = key(grids[g][0], b)
        for i in range(PROBES):
            s = (start(k) + i) % SLOTS
            if mem.rd(TABLE + s * SLOT_BYTES, 8) == k:
                return s
        return None

    def state(g, b):  # the address of the block's begin_ns: its slot's, or its shared memory's
        if table:
            slots[(g, b)] = find(g, b)
            return None if slots[(g, b)] is None else TABLE + slots[(g, b)] * SLOT_BYTES + 8
        return VM.SHARED[(grids[g][0],) + ctaid(g, b) + ('__cubpf_block',)]

    def ctaid(g, b):
        nx, ny, _ = grids[g][1]
        return (b % nx, b // nx % ny, b // (nx * ny))

    def run(g, b, t):
        ends = cnt(1)
        run1(g, b, t)
        mine = group[(g, b)][t]
        if mine & -mine == 1 << t:  # the group's lowest lane counts it out
            remaining[(g, b)] -= bin(mine).count('1')
        if t == 0:
            at = state(g, b)
            if at is not None:  # the block's begin, the blockprobe's time_ns
                begun[(g, b)] = (mem.rd(at, 8), mem.rd(MAPS + tm * 0x100000 + 16 * b, 8))
        if cnt(1) != ends and (remaining[(g, b)] or cnt(1) != ends + 1):
            early.append((g, b, t))
        if cnt(1) != ends and b < 4096:  # the end's begin_ns: the block's own
            seen = mem.rd(MAPS + bm * 0x100000 + 8 * b, 8)
            if begun.get((g, b)) != (seen, seen + 32):
                early.append((g, b, 'begin_ns %d' % seen))

    def run1(g, b, t):
        gridid, nctaid, ntid = grids[g]
        tid = (t % ntid[0], t // ntid[0] % ntid[1], t // (ntid[0] * ntid[1]))
        mine = group[(g, b)][t]
        sregs = {'%gridid': gridid, '%lanemask_lt': 0, '%smid': 0, '%laneid': 0,
                 '%warpid': 0, '%__sim_group': mine, '%__sim_lanemask_lt': (1 << t) - 1}
        for i, d in enumerate('xyz'):
            sregs.update({'%tid.' + d: tid[i], '%ntid.' + d: ntid[i],
                          '%ctaid.' + d: ctaid(g, b)[i], '%nctaid.' + d: nctaid[i]})
        vm = BVM(body, mem, 0, 0, syms, sregs)
        vm.params = {params[0]: OUT, params[1]: n_valid}
        vm.run()

    # A and B: every thread 0 first (all 12 blocks live at once), the rest shuffled
    rest = []
    for g in 'AB':
        for b in range(nblocks(g)):
            run(g, b, 0)
            rest += [(g, b, t) for t in range(1, nthreads(g))]
    live = [s for s in range(SLOTS) if mem.rd(TABLE + s * SLOT_BYTES, 8) & 1]
    if table:
        check(len(live) == 12 + PROBES,
              'A and B: 12 blocks live in the table (%d slots with keys)' % (len(live) - PROBES))
    rng.shuffle(rest)
    for g, b, t in rest:
        run(g, b, t)
    ab = {s for gb, s in slots.items() if gb[0] in 'AB'}
    if table:
        check(None not in ab and all(mem.rd(TABLE + s * SLOT_BYTES, 8) == EMPTY for s in ab),
              'A and B done: every slot they took is EMPTY again (%d slots)' % len(ab))
    # C after A and B: on the slots they freed, as an older cubpf would have left them (TOMB);
    # D: not tracked
    tombs = set(ab) - {None}
    for s in tombs:
        mem.wr(TABLE + s * SLOT_BYTES, 8, TOMB)
    for g in 'CD':
        for b in range(nblocks(g)):
            run(g, b, 0)
        order = [(b, t) for b in range(nblocks(g)) for t in range(1, nthreads(g))]
        rng.shuffle(order)
        for b, t in order:
            run(g, b, t)
    counts = [cnt(k) for k in range(8)]
    blocks = sum(nblocks(g) for g in grids)
    tracked = blocks - table
    sums = sum(nblocks(g) * (nblocks(g) + 1) // 2 for g in grids)
    check(counts[0] == blocks, 'begins %d = blocks %d' % (counts[0], blocks))
    check(counts[1] == tracked, 'ends %d = tracked blocks %d%s' %
          (counts[1], tracked, ' (D has no slot)' if table else ''))
    check(counts[2] == sums and counts[3] == sums - table,
          'each block by its index: %d / %d (expected %d / %d)' % (counts[2], counts[3], sums,
                                                                   sums - table))
    check(counts[4] == 0 and counts[5] == 0 and counts[6] == 0,
          'no end before its begin, ctx->end 0 at begin, begin_ns its own: %s' % counts[4:7])
    check(all(r == 0 for r in remaining.values()), 'every thread was counted out once')
    check(not early, 'each end probe ran as its block\'s last group left, with its begin time: %s'
          % early[:4])
    out = [mem.rd(OUT + 4 * i, 4) for i in range(n_valid)]
    want = [[10, 11, 12, 13][i % 4] for i in range(n_valid)]
    check(out == want, "the kernel's own results")
    if table:
        table_checks(mem, slots, tombs)
    else:
        check(not any(TABLE <= a < TABLE + (1 << 24) for a in mem.m),
              'shared memory: nothing written to a block table')
    ok = sum(results)
    print('%d passed, %d failed' % (ok, len(results) - ok))
    return 0 if ok == len(results) else 1

def table_checks(mem, slots, tombs):
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
    reused = c_slots & {s for gb, s in slots.items() if gb[0] in 'AB'}
    check(len(reused) > 0, 'C reused the slots A and B freed (%d slots)' % len(reused))
    check(len(tomb_taken) > 0, 'C took slots an older cubpf left TOMB (%d)' % len(tomb_taken))
    check(slots[('D', 0)] is None, 'D took no slot')

if __name__ == '__main__':
    sys.exit(main())
