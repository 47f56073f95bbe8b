#!/usr/bin/env python3
"""Runs the map programs of tests/ptx/test_ptx_gen.c (module written by its test_ptxsim_maps)
on ptxsim.py's model, one simulated thread after another, and checks the maps' memory against
the layouts of ptx-rewriter/layout.h, re-derived here independently of the C macros:
per-SM copies, per-thread copies and capacity, hash probing/insert/delete/tombstones/full table,
ring buffer batches, padding at the lane end, the device copy of tails and drops.  Concurrency is not modelled (the GPU run is the
reference for it).  usage: ptxsim_maps.py MODULE.ptx   prints "N passed, M failed"."""
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim import VM, Mem, mask

M64 = (1 << 64) - 1
MAPS = 0x1000           # __cubpf_map_<i> pointers live here
BASE = 0x10000000       # map storage
INPUT = 0x100000        # r1: the program's input memory

def funcs(text):
    return {m.group(1): m.group(2) for m in re.finditer(
        r'\.func \(\.param \.b64 __cb_ret\) (\w+)\(.*?\)\n\{\n(.*?)\n\}\n', text, re.S)}

class Run:
    def __init__(self, body):
        self.body = body; self.mem = Mem()
        self.mem.wr(MAPS, 8, BASE)
    def call(self, inp=b'', **sregs):
        for i, b in enumerate(inp): self.mem.m[INPUT + i] = b
        regs = {'%ntid.x': 1, '%ntid.y': 1, '%ntid.z': 1, '%nctaid.x': 1, '%nctaid.y': 1,
                '%nctaid.z': 1}
        regs.update({'%' + k.replace('_', '.'): v for k, v in sregs.items()})
        vm = VM(self.body, self.mem, INPUT, len(inp), {'__cubpf_map_0': MAPS}, regs)
        return vm.run()
    def u(self, addr, n=8): return self.mem.rd(addr, n)
    def put(self, addr, n, v): self.mem.wr(addr, n, v)

results = []
def check(cond, what):
    results.append(cond)
    print(('ok    ' if cond else 'FAIL  ') + what)

def le(v, n): return (v & ((1 << 8 * n) - 1)).to_bytes(n, 'little')

def percpu(body):
    r = Run(body)
    for smid, key in [(0, 0), (0, 0), (1, 0), (5, 2), (300, 0), (1, 3)]:
        r.call(le(key, 4), smid=smid)
    off = lambda k, s: BASE + (k * 256 + s) * 8
    check(r.u(off(0, 0)) == 2 and r.u(off(0, 1)) == 1 and r.u(off(0, 300 % 256)) == 1 and
          r.u(off(2, 5)) == 1, 'per-SM: each SM its own copy (slot = smid & 255), key-major')
    check(sum(r.u(off(k, s)) for k in range(3) for s in range(256)) == 5,
          'per-SM: nothing else written; key 3 (past max_entries) ignored')

def perthread(body):
    r = Run(body)
    r.put(BASE, 8, 10)                                 # header: 10 thread copies
    off = lambda k, t: BASE + 64 + (k * 10 + t) * 8
    r.call(le(0, 4), ntid_x=4, ctaid_x=2, tid_x=1)     # t = 9
    r.call(le(0, 4), ntid_x=4, ctaid_x=3, tid_x=0)     # t = 12: past the capacity
    # 3D: ntid (2,2,1), nctaid (2,1,1), ctaid (1,0,0), tid (1,1,0): t = 1*4 + (0*2+1)*2 + 1 = 7
    r.call(le(1, 4), ntid_x=2, ntid_y=2, nctaid_x=2, ctaid_x=1, tid_x=1, tid_y=1)
    check(r.u(off(0, 9)) == 1 and r.u(off(1, 7)) == 1,
          'per-thread: copy at 64 + (key * threads + global linear id) * stride')
    check(sum(r.u(BASE + 64 + 8 * i) for i in range(20)) == 2,
          'per-thread: a thread past the capacity has no copy')

def fnv(words):
    h = 0xcbf29ce484222325
    for w in words: h = ((h ^ w) * 0x100000001b3) & M64
    return h ^ (h >> 32)

def slots(r, cap, sb):
    return [(r.u(BASE + i * sb, 4), r.u(BASE + i * sb + 8), r.u(BASE + i * sb + 16))
            for i in range(cap)]

def hashmap(body, small):
    cap, sb = (128, 24) if not small else (2, 24)
    r = Run(body)
    if small:
        for k in (1, 2, 3): r.call(le(k, 8))
        s = slots(r, cap, sb)
        check(sorted((k, v) for st, k, v in s if st == 2) == [(1, 1), (2, 1)],
              'hash: a full table refuses the third key, keeps the two it has')
        return
    for k in (5, 5, 7, 5, 1 << 40): rv = r.call(le(k, 8))
    check(rv == mask(-2, 64), 'hash: deleting an absent key returns -ENOENT')
    s = slots(r, cap, sb)
    full = {k: (i, v) for i, (st, k, v) in enumerate(s) if st == 2}
    check({k: v for k, (i, v) in full.items()} == {5: 3, 7: 1, 1 << 40: 1},
          'hash: one entry per key, updated in place (5: 3, 7: 1, 2^40: 1)')
    ok = all(i == fnv([k]) & (cap - 1) or s[fnv([k]) & (cap - 1)][0] != 0
             for k, (i, v) in full.items())
    check(ok, 'hash: entries start probing at the host hash (cubpf_hash_key) of their key')
    r.call(le(12345, 8)); r.call(le(12345, 8))      # inserted then deleted, twice
    s = slots(r, cap, sb)
    tombs = [k for st, k, v in s if st == 3]
    check(tombs == [12345, 12345] or sorted(tombs) == [12345, 12345],
          'hash: delete leaves a tombstone, never reused (two tombstones for 12345)')

RING = BASE + 0x100000  # the ring (pinned memory on the GPU); BASE holds the producers' part

def ringbuf(body):
    # producers' part: header {lanes, warps, lane_bytes, heads, tails, drops, data} (64 bytes),
    # then heads, tails (the host's copy) and drops, u64 a lane, each array 128-aligned
    # ring: header, tails at 64, drops at 64 + round64(8 lanes), data at round128(after drops)
    r = Run(body)
    lanes, warps, lb = 2, 4, 80
    heads, dtails, ddrops = BASE + 64, BASE + 64 + 128, BASE + 64 + 256
    rtails, rdrops = RING + 64, RING + 64 + 64
    data0 = RING + 256
    r.put(BASE, 4, lanes); r.put(BASE + 4, 4, warps); r.put(BASE + 8, 8, lb)
    r.put(BASE + 16, 8, heads); r.put(BASE + 24, 8, dtails); r.put(BASE + 32, 8, ddrops)
    r.put(BASE + 40, 8, data0)
    data = data0 + lb                                  # smid 1, warpid 1: (1 * 4 + 1) % 2 = 1
    call = lambda: r.call(smid=1, warpid=1)
    batch = lambda off: (r.u(data + off, 4), r.u(data + off + 4, 4), r.u(data + off + 8),
                         r.u(data + off + 16), r.u(data + off + 24, 4))
    rv = [call() for _ in range(3)]
    check(rv == [0, 0, mask(-11, 64)] and r.u(heads + 8) == 64 and r.u(ddrops + 8) == 1,
          'ring buffer: two 32-byte batches fit an 80-byte lane; the third (16 bytes of '
          'padding + 32) is dropped and counted in device memory')
    check(batch(0) == (1, 12, 1, 7, 9) and batch(32) == (1, 12, 33, 7, 9),
          'ring buffer: batches {k 1, len 12}, commit = position + 1, then the payload words')
    check(r.u(rdrops + 8) == 0 and r.u(rtails + 8) == 0,
          'ring buffer: nothing of the ring but the lane data written (no PCIe round trip)')
    r.put(rtails + 8, 8, 64)                            # the host consumed both ...
    for o in range(0, 64, 8): r.put(data + o, 8, 0)
    rv = call()
    check(rv == mask(-11, 64) and r.u(heads + 8) == 64 and r.u(ddrops + 8) == 2,
          'ring buffer: room freed in the ring is not seen before the host copies the tail in')
    r.put(dtails + 8, 8, 64)                            # ... and copied its tail to the device
    rv = call()
    check(rv == 0 and r.u(heads + 8) == 112,
          'ring buffer: the device copy of the tail makes the room usable')
    check(r.u(data + 64, 8) == 0 and r.u(data + 72) == 65 and batch(0) == (1, 12, 81, 7, 9),
          'ring buffer: padding {0, 0} + commit at 64, the batch at the lane start (position 80)')
    check(r.u(heads) == 0 and r.u(ddrops) == 0 and r.u(data0) == 0 and r.u(dtails) == 0,
          'ring buffer: lane 0 untouched')

def main():
    text = open(sys.argv[1]).read()
    f = funcs(text)
    tests = [('percpu', percpu), ('perthread', perthread), ('hash', lambda b: hashmap(b, False)),
             ('hash_small', lambda b: hashmap(b, True)), ('ringbuf', ringbuf)]
    for name, fn in tests:
        if name not in f:
            check(False, 'function %s missing from the module' % name); continue
        try: fn(f[name])
        except Exception as e: check(False, '%s: %s' % (name, e))
    ok = sum(results)
    print('%d passed, %d failed' % (ok, len(results) - ok))
    return 0 if ok == len(results) else 1

if __name__ == '__main__':
    sys.exit(main())
