#!/usr/bin/env python3
"""Runs the first memory-probe site of a module instrumented with tests/ptx/probes/unique.bpf.c
(return bpf_warp_count_unique(ctx->addr)) on a model of one warp: its 32 lanes in step, each with
its own registers, so that the warp-level instructions (activemask, shfl.sync, vote.sync,
match.any.sync, %lanemask_lt) see each other.  Branches must be uniform over the active lanes
(the helper's are: they test votes and the active mask), anything else raises an error.
For each pattern of addresses and active lanes, every active lane must return the number of
distinct addresses among the active lanes, and the fast path (shuffles and votes, no match.any)
must be taken exactly when the warp is whole and its values rise by 0 or 1 from lane to lane.
usage: ptxsim_warp.py MODULE.ptx   prints "N passed, M failed"; exit status 1 on any failure."""
import random, re, sys

M64 = (1 << 64) - 1
FULL = 0xffffffff


def site(text):
    """The first memory-probe site's statements (up to its end label) and the address register
    its code reads the access's address from."""
    start = text.index('// cubpf: memprobe')
    end = text.index('$__cb0_end:', start)
    lines = [ln.strip() for ln in text[start:end].split('\n')]
    lines = [ln for ln in lines if ln and not ln.startswith('//')] + ['$__cb0_end:']
    addr = re.search(r'add\.s64 %__cb_r1, (%\w+), 0;', text[start:end]).group(1)
    return lines, addr


class Warp:
    """One warp's lanes in step over `lines`.  mem: a dict address -> byte shared by the warps
    of a test; syms: symbol -> address; sregs: per-lane special registers (callable(lane, name)
    or missing).  A divergent branch runs the lanes that take it, then the others, each to the
    end (the code this models never reconverges before its end)."""

    def __init__(self, lines, regs, active, mem=None, syms=None, sreg=None):
        self.code, self.labels = [], {}
        for ln in lines:
            if ln.endswith(':'):
                self.labels[ln[:-1]] = len(self.code)
            elif not ln.startswith('.'):
                self.code.append(ln.rstrip(';'))
        self.active = active
        self.reg = regs
        self.mem = {} if mem is None else mem
        self.syms = syms or {}
        self.sreg = sreg or (lambda lane, name: 0)
        self.matched = False

    def rd(self, a, n):
        return int.from_bytes(bytes(self.mem.get(a + i, 0) for i in range(n)), 'little')

    def wr(self, a, n, v):
        for i, b in enumerate((v & ((1 << 8 * n) - 1)).to_bytes(n, 'little')):
            self.mem[a + i] = b

    def val(self, lane, op):
        op = op.strip()
        if op == '%lanemask_lt':
            return (1 << lane) - 1
        if op in ('%smid', '%laneid') or op.startswith('%tid') or op.startswith('%ntid'):
            return lane if op == '%laneid' else self.sreg(lane, op)
        if op.startswith('%'):  # a register no statement wrote yet holds garbage: 0 here
            return self.reg[lane].get(op, 0)
        return int(op, 0) & M64

    def addr(self, lane, op):
        m = re.match(r'^\[([%\w]+)(?:\+(-?\d+))?\]$', op.strip())
        base = self.syms[m.group(1)] if m.group(1) in self.syms else self.val(lane, m.group(1))
        return (base + int(m.group(2) or 0)) & M64

    def pred(self, lane, g):
        neg = g.startswith('!')
        v = bool(self.reg[lane][g.lstrip('!')])
        return v != neg

    def lanes(self, mask):
        return [i for i in range(32) if mask >> i & 1]

    max_steps = 10000

    def issued(self, body, active):
        """Each statement the lanes in `active` reach (a subclass counts them)."""

    def ret(self, on, active):
        """The lanes still running after a ret that the lanes in `on` take: here the warp's."""
        return 0

    def run(self, pc=0, active=None):
        active = self.active if active is None else active
        steps = 0
        while pc < len(self.code) and active:
            steps += 1
            if steps > self.max_steps:
                raise Exception('too many steps')
            ins = self.code[pc]
            m = re.match(r'^@(!?%\w+)\s+(.*)$', ins)
            guard, body = (m.group(1), m.group(2)) if m else (None, ins)
            on = sum(1 << l for l in self.lanes(active) if not guard or self.pred(l, guard))
            self.issued(body, active)
            if body.startswith('bra'):
                target = self.labels[body.split()[1]]
                if on and on != active:  # divergent: the taken side first, then the other
                    self.run(target, on)
                    active &= ~on
                    pc += 1
                    continue
                pc = target if on else pc + 1
                continue
            if body.startswith('ret'):
                active = self.ret(on, active)
                pc += 1
                continue
            if on:
                self.step(body, on, active)
            pc += 1

    def step(self, ins, on, active):
        opc, _, rest = ins.partition(' ')
        ops = [o.strip() for o in re.split(r',\s*(?![^{]*\})', rest)] if rest else []
        parts = opc.split('.')
        root, R = parts[0], self.reg
        bits = 32 if parts[-1].endswith('32') else 64
        full = (1 << bits) - 1
        if root in ('membar', 'bar'):
            return
        snap = {l: dict(R[l]) for l in self.lanes(active)}  # warp-wide reads see the old values
        for ln in self.lanes(on):
            v = lambda o: self.val(ln, o)
            if opc == 'activemask.b32':
                R[ln][ops[0]] = active
            elif root == 'mov' and ops[0].startswith('{'):
                lo, hi = [x.strip() for x in ops[0].strip('{}').split(',')]
                R[ln][lo], R[ln][hi] = v(ops[1]) & FULL, v(ops[1]) >> 32
            elif root == 'mov' and ops[1].startswith('{'):
                lo, hi = [x.strip() for x in ops[1].strip('{}').split(',')]
                R[ln][ops[0]] = (v(hi) << 32 | v(lo)) & M64
            elif root == 'mov' or opc == 'cvt.u64.u32':
                R[ln][ops[0]] = v(ops[1]) & (FULL if parts[-1].endswith('32') else M64)
            elif opc == 'cvt.u32.u64':
                R[ln][ops[0]] = v(ops[1]) & FULL
            elif opc.startswith('mul.wide.u32'):
                R[ln][ops[0]] = (v(ops[1]) & FULL) * (v(ops[2]) & FULL)
            elif root == 'mad' and parts[1] == 'lo':
                R[ln][ops[0]] = (v(ops[1]) * v(ops[2]) + v(ops[3])) & full
            elif root == 'min':
                R[ln][ops[0]] = min(v(ops[1]) & full, v(ops[2]) & full)
            elif root == 'createpolicy':
                R[ln][ops[0]] = 0
            elif root in ('add', 'sub', 'and', 'or', 'xor', 'shl', 'shr', 'mul'):
                a, b = v(ops[1]), v(ops[2])
                if root == 'and' and parts[1] == 'pred':
                    r = self.pred(ln, ops[1]) and self.pred(ln, ops[2])
                else:
                    r = {'add': lambda: a + b, 'sub': lambda: a - b, 'and': lambda: a & b,
                     'xor': lambda: a ^ b,
                         'or': lambda: a | b, 'shl': lambda: a << min(b, bits),
                         'shr': lambda: (a & full) >> min(b, bits),  # clamped, as PTX's
                         'mul': lambda: a * b}[root]()
                R[ln][ops[0]] = r & full if not isinstance(r, bool) else r
            elif opc == 'bfe.u32':
                R[ln][ops[0]] = (v(ops[1]) & FULL) >> v(ops[2]) & ((1 << v(ops[3])) - 1)
            elif root == 'selp':
                R[ln][ops[0]] = v(ops[1]) if self.pred(ln, ops[3]) else v(ops[2])
            elif opc.startswith('mad.wide.u32'):
                R[ln][ops[0]] = ((v(ops[1]) & FULL) * (v(ops[2]) & FULL) + v(ops[3])) & M64
            elif root == 'popc':
                R[ln][ops[0]] = bin(v(ops[1]) & FULL).count('1')
            elif root == 'brev':
                R[ln][ops[0]] = int('{:032b}'.format(v(ops[1]) & FULL)[::-1], 2)
            elif root == 'clz':
                R[ln][ops[0]] = 32 - (v(ops[1]) & FULL).bit_length()
            elif root == 'setp':
                a, b = v(ops[1]) & full, v(ops[2]) & full
                R[ln][ops[0]] = {'eq': a == b, 'ne': a != b, 'le': a <= b, 'lt': a < b,
                                 'ge': a >= b, 'gt': a > b}[parts[1]]
            elif opc == 'shfl.sync.up.b32' or opc == 'shfl.sync.idx.b32':
                if v(ops[4]) & active != active:
                    raise Exception('shfl member mask misses active lanes: ' + ins)
                src = ln - v(ops[2]) if parts[2] == 'up' else v(ops[2]) & 31
                if src >= 0 and not active >> src & 1:
                    raise Exception('shuffle from an inactive lane: ' + ins)
                R[ln][ops[0]] = snap[src if src >= 0 else ln][ops[1]] & FULL
            elif root == 'vote':
                mask = v(ops[2]) & active
                ps = {l: (bool(snap[l][ops[1].lstrip('!')]) != ops[1].startswith('!'))
                      for l in self.lanes(mask)}
                R[ln][ops[0]] = (all(ps.values()) if parts[2] == 'all'
                                 else sum(1 << l for l, p in ps.items() if p))
            elif opc == 'redux.sync.add.u32':
                mask = v(ops[2]) & active
                R[ln][ops[0]] = sum(snap[l][ops[1]] for l in self.lanes(mask)) & FULL
            elif opc == 'match.any.sync.b64':
                self.matched = True
                mask = v(ops[2]) & active
                me = v(ops[1])
                R[ln][ops[0]] = sum(1 << l for l in self.lanes(mask) if snap[l][ops[1]] == me)
            elif root == 'ld':
                n = int(parts[-1][1:]) // 8
                R[ln][ops[0]] = self.rd(self.addr(ln, ops[1]), n)
            elif root == 'st':
                n = int(parts[-1][1:]) // 8
                self.wr(self.addr(ln, ops[0]), n, v(ops[1]))
            elif root in ('red', 'atom'):
                n = int(parts[-1][1:]) // 8
                i = 1 if root == 'atom' else 0
                a = self.addr(ln, ops[i])
                old = self.rd(a, n)
                self.wr(a, n, old + v(ops[i + 1]))
                if root == 'atom':
                    R[ln][ops[0]] = old
            else:
                raise Exception('statement not modelled: ' + ins)


def patterns():
    B, rnd = 0x7f3a12345600, random.Random(31)
    lane = range(32)
    yield 'coalesced 4-byte sectors (v = B + i/8)', [B + i // 8 for i in lane], FULL, True
    yield '8-byte sectors (B + i/4)', [B + i // 4 for i in lane], FULL, True
    yield '16-byte sectors (B + i/2)', [B + i // 2 for i in lane], FULL, True
    yield 'steps of 1 (B + i)', [B + i for i in lane], FULL, True
    yield 'misaligned start (B + (i + 3)/8)', [B + (i + 3) // 8 for i in lane], FULL, True
    yield 'one value for the warp', [B] * 32, FULL, True
    yield 'wraparound past 2^64 - 1', [(M64 - 1 + i // 8) & M64 for i in lane], FULL, True
    yield 'carry into the high word', [0xfffffffe + i // 8 for i in lane], FULL, True
    rises = [rnd.random() < 0.4 for _ in lane]
    yield 'irregular rises of 0 and 1', [B + sum(rises[1:i + 1]) for i in lane], FULL, True
    yield 'stride 2 (B + 2i)', [B + 2 * i for i in lane], FULL, False
    yield 'strided with duplicates (B + i%4)', [B + i % 4 for i in lane], FULL, False
    yield 'falling (B - i/8)', [B - i // 8 for i in lane], FULL, False
    yield 'alternating (B + i%2)', [B + i % 2 for i in lane], FULL, False
    yield 'rises of 2^32 (high word only)', [B + (i // 8 << 32) for i in lane], FULL, False
    yield 'low words rising by 1, high words apart', [(i << 32) + i for i in lane], FULL, False
    yield 'scattered with duplicates', [B + rnd.randrange(6) * 32 for _ in lane], FULL, False
    yield 'scattered 64-bit', [rnd.getrandbits(64) for _ in lane], FULL, False
    yield 'partial warp, first 20 lanes (B + i/8)', [B + i // 8 for i in lane], (1 << 20) - 1, False
    yield 'partial warp, odd lanes', [B + i // 8 for i in lane], 0xaaaaaaaa, False
    yield 'one lane', [B + i for i in lane], 1 << 17, False
    yield 'random mask, scattered', [B + rnd.randrange(5) for _ in lane], rnd.getrandbits(32) | 1, False
    yield 'all but lane 31, one value', [B] * 32, FULL >> 1, False


def main():
    lines, addr = site(open(sys.argv[1]).read())
    ok = fail = 0
    for name, values, active, fast in patterns():
        regs = [{addr: values[i] & M64} for i in range(32)]
        w = Warp(lines, regs, active)
        try:
            w.run()
            got = {ln: regs[ln]['%__cb_r0'] for ln in range(32) if active >> ln & 1}
        except Exception as e:
            print('FAIL  %s: %s' % (name, e))
            fail += 1
            continue
        want = len({values[i] & M64 for i in range(32) if active >> i & 1})
        good = set(got.values()) == {want} and w.matched == (not fast)
        print('%s  %s: %s (expected %d, %s path)' % ('ok  ' if good else 'FAIL', name,
              sorted(set(got.values())), want, 'match.any' if w.matched else 'fast'))
        ok, fail = ok + good, fail + (not good)
    print('%d passed, %d failed' % (ok, fail))
    return 1 if fail else 0


if __name__ == '__main__':
    sys.exit(main())
