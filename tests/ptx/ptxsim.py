#!/usr/bin/env python3
"""A small interpreter for the PTX subset that ptx-rewriter's code generator emits, so that the
conformance module (tests/ptx/gpu/conf_gen) can be checked on a machine without a GPU.

It models the PTX ISA's integer semantics and its alignment rule (an access not aligned to its
size faults, as on the GPU) (two's complement, truncation and sign/zero extension
of ld/st/cvt, C-like div/rem, predicates, prmt, bfe, atomics) for the instructions the generator
uses; anything else raises an error.  It is a model: the GPU run (tests/gpu/t_ptx_conformance.sh)
remains the reference.  usage: ptxsim.py conformance.ptx conformance.txt
Prints one line per failing program and "N passed, M failed"; exit status 1 on any failure."""
import re, sys, struct

M64 = (1 << 64) - 1
def mask(v, bits): return v & ((1 << bits) - 1)
def sx(v, bits):
    v = mask(v, bits)
    return v - (1 << bits) if v >> (bits - 1) else v

class Mem:
    def __init__(self): self.m = {}
    def rd(self, a, n): return int.from_bytes(bytes(self.m.get(a + i, 0) for i in range(n)), 'little')
    def wr(self, a, n, v):
        for i, b in enumerate(mask(v, 8 * n).to_bytes(n, 'little')): self.m[a + i] = b

ATOM_OPS = ('add', 'and', 'or', 'xor', 'exch', 'max', 'min', 'cas')

def tybits(t):
    m = re.search(r'(\d+)$', t)
    return int(m.group(1)) if m else 64

def parse_funcs(text):
    funcs = {}
    for m in re.finditer(r'//\s*(\S+)\n\.func \(\.param \.b64 __cb_ret\) (conf_\d+)\(.*?\)\n\{\n(.*?)\n\}\n', text, re.S):
        funcs[m.group(2)] = (m.group(1), m.group(3))
    return funcs

def split_ops(s):
    ops, depth, cur = [], 0, ''
    for c in s:
        if c in '[{(': depth += 1
        if c in ']})': depth -= 1
        if c == ',' and depth == 0: ops.append(cur.strip()); cur = ''
        else: cur += c
    if cur.strip(): ops.append(cur.strip())
    return ops

class VM:
    SHARED = {}  # (gridid, ctaid, name) -> address of a .shared array
    # syms: module-scope symbols (map pointers) -> their address in mem; sregs: special
    # registers of the simulated thread ('%tid.x', '%smid', ...).
    def __init__(self, body, mem, r1, r2, syms=None, sregs=None):
        self.reg = {}; self.mem = mem; self.params = {'__cb_mem': r1, '__cb_len': r2}
        self.local = {}; self.syms = syms or {}; self.sregs = sregs or {}
        self.code = []; self.labels = {}
        for line in body.split('\n'):
            line = line.strip()
            if not line or line.startswith('//'): continue
            if line.endswith(':'): self.labels[line[:-1]] = len(self.code); continue
            if line.startswith('.reg'): continue
            m = re.match(r'\.local \.align \d+ \.b8 (\w+)\[(\d+)\];', line)
            if m:
                self.local[m.group(1)] = 0x70000000 + 0x10000 * len(self.local); continue
            m = re.match(r'\.shared \.align \d+ \.b8 (\w+)\[(\d+)\];', line)
            if m:  # one copy per thread block (of its grid): threads of a block share it
                key = tuple(self.sregs.get(r, 0) for r in
                            ('%gridid', '%ctaid.x', '%ctaid.y', '%ctaid.z')) + (m.group(1),)
                self.local[m.group(1)] = VM.SHARED.setdefault(key, 0x60000000 + 0x10000 * len(VM.SHARED))
                continue
            assert line.endswith(';'), line
            self.code.append(line[:-1])

    def val(self, op, bits=64):
        op = op.strip()
        if op.startswith('%'):
            if op == '%globaltimer': return 123456789
            if op in self.sregs: return self.sregs[op]
            return self.reg.get(op, 0)
        if op in self.local: return self.local[op]
        if re.match(r'^-?(0x[0-9a-fA-F]+|\d+)U?$', op): return mask(int(op.rstrip('U'), 0), 64)
        raise Exception('operand ' + op)

    def aligned(self, a, n, ins):
        # The GPU faults ("misaligned address") on an access not aligned to its own size,
        # where eBPF allows any alignment: the generator must never emit one.
        if not isinstance(a, tuple) and a % n:
            raise Exception('misaligned %d-byte access at %#x: %s' % (n, a, ins))

    def addr(self, op):
        inner = op.strip()[1:-1]
        m = re.match(r'^([%\w]+)(?:\+(-?\d+))?$', inner)
        base, off = m.group(1), int(m.group(2) or 0)
        if base in self.params: return ('param', base)
        if base in self.local: return self.local[base] + off
        if base in self.syms: return self.syms[base] + off
        if base == '__cb_ret': return ('param', base)
        return mask(self.val(base) + off, 64)

    def set(self, r, v, bits=64): self.reg[r] = mask(v, 64)

    # bar.red.{or,and}.pred d, a, {!}c: a block of this one thread (ptxsim_blocks.py models more)
    def bar_red(self, parts, ops):
        c = ops[-1]
        self.reg[ops[0]] = bool(self.reg.get(c.lstrip('!'), 0)) != c.startswith('!')

    def run(self):
        pc, steps = 0, 0
        while pc < len(self.code):
            steps += 1
            if steps > 100000: raise Exception('too many steps')
            ins = self.code[pc]; pc += 1
            guard = None
            m = re.match(r'^@(!?)(%\w+)\s+(.*)$', ins)
            if m:
                p = self.reg.get(m.group(2), 0)
                if m.group(1): p = not p
                ins = m.group(3)
                if not p: continue
            opc, _, rest = ins.partition(' ')
            if opc == 'ret': return self.params.get('__cb_ret')
            ops = split_ops(rest)
            parts = opc.split('.')
            root = parts[0]
            if root == 'bra': pc = self.labels[ops[0]]; continue
            if root == 'mov':
                if ops[0].startswith('{'):
                    lo, hi = [x.strip() for x in ops[0][1:-1].split(',')]
                    v = self.val(ops[1]); self.reg[lo] = mask(v, 32); self.reg[hi] = v >> 32
                elif ops[1].startswith('{'):
                    lo, hi = [x.strip() for x in ops[1][1:-1].split(',')]
                    self.reg[ops[0]] = mask(self.val(lo), 32) | (mask(self.val(hi), 32) << 32)
                else:
                    self.reg[ops[0]] = mask(self.val(ops[1]), tybits(parts[-1]))
                continue
            if root == 'cvta': self.reg[ops[0]] = self.val(ops[1]); continue
            if root == 'isspacep':  # .local: within the thread's .local arrays
                a = self.val(ops[1]); lo = 0x70000000
                self.reg[ops[0]] = parts[1] == 'local' and lo <= a < lo + 0x10000 * len(self.local)
                continue
            if root == 'ld' or root == 'st':
                ty = parts[-1]; n = tybits(ty) // 8
                a = self.addr(ops[1] if root == 'ld' else ops[0])
                self.aligned(a, n, ins)
                if root == 'ld' and ops[0].startswith('{'):
                    els = [x.strip() for x in ops[0].strip('{}').split(',')]
                    self.aligned(a, n * len(els), ins)
                    for i, e in enumerate(els): self.reg[e] = self.mem.rd(a + i * n, n)
                elif root == 'ld':
                    if isinstance(a, tuple): v = self.params[a[1]]
                    else: v = self.mem.rd(a, n)
                    if ty[0] == 's': v = mask(sx(v, 8 * n), 64)
                    self.reg[ops[0]] = v
                elif 'v2' in parts or 'v4' in parts:
                    els = [x.strip() for x in ops[1].strip('{}').split(',')]
                    self.aligned(a, n * len(els), ins)
                    for i, e in enumerate(els): self.mem.wr(a + i * n, n, self.val(e))
                else:
                    v = self.val(ops[1])
                    if isinstance(a, tuple): self.params[a[1]] = v
                    else: self.mem.wr(a, n, v)
                continue
            if root in ('atom', 'red'):
                # the operation among the qualifiers (.acquire.gpu.global.cas, .add.L2::cache_hint)
                ty = parts[-1]; bits = tybits(ty); n = bits // 8
                op = [q for q in parts[1:-1] if q in ATOM_OPS][0]
                i = 1 if root == 'atom' else 0
                a = self.addr(ops[i]); self.aligned(a, n, ins)
                old = self.mem.rd(a, n); b = self.val(ops[i + 1])
                if op == 'cas':
                    new = self.val(ops[i + 2]) if mask(old, bits) == mask(b, bits) else old
                else:
                    new = {'add': old + b, 'and': old & b, 'or': old | b, 'xor': old ^ b, 'exch': b,
                           'max': max(old, mask(b, bits)), 'min': min(old, mask(b, bits))}[op]
                self.mem.wr(a, n, new)
                if root == 'atom': self.reg[ops[0]] = mask(old, bits)
                continue
            if root == 'setp':
                cmp, ty = parts[1], parts[-1]; bits = tybits(ty)
                a, b = self.val(ops[1]), self.val(ops[2])
                if ty[0] == 's': a, b = sx(a, bits), sx(b, bits)
                else: a, b = mask(a, bits), mask(b, bits)
                r = {'eq': a == b, 'ne': a != b, 'gt': a > b, 'ge': a >= b, 'lt': a < b, 'le': a <= b}[cmp]
                if len(parts) == 4:  # setp.CMP.BOOLOP.type d, a, b, c
                    c = self.reg.get(ops[3], 0)
                    r = {'and': r and c, 'or': r or c, 'xor': bool(r) != bool(c)}[parts[2]]
                self.reg[ops[0]] = r
                continue
            if root == 'or' and parts[1] == 'pred':
                self.reg[ops[0]] = self.reg.get(ops[1], 0) or self.reg.get(ops[2], 0); continue
            if root == 'and' and parts[1] == 'pred':
                self.reg[ops[0]] = self.reg.get(ops[1], 0) and self.reg.get(ops[2], 0); continue
            if root in ('membar', 'fence'): continue
            if root == 'createpolicy': self.reg[ops[0]] = 0; continue
            # one-lane warps: every vote is the lane's own predicate, every match the lane itself
            if root == 'vote': self.reg[ops[0]] = self.reg.get(ops[1].lstrip('!'), 0) != ops[1].startswith('!'); continue
            if root == 'match': self.reg[ops[0]] = 1; continue
            if root == 'bar' and parts[1] == 'red': self.bar_red(parts, ops); continue
            if root == 'bar': continue  # bar.warp.sync: a warp of one lane
            # one simulated thread is a warp whose only active lane is lane 0
            if root == 'activemask': self.reg[ops[0]] = 1; continue
            if root == 'elect':  # elect.sync %r|%p, mask: lane 0, the only one, is elected
                r, pr = ops[0].split('|')
                self.reg[r.strip()], self.reg[pr.strip()] = 0, True; continue
            if root == 'shfl':
                if self.val(ops[2]) != 0: raise Exception('shuffle from an inactive lane: ' + ins)
                self.reg[ops[0]] = mask(self.val(ops[1]), 32); continue
            if root == 'popc': self.reg[ops[0]] = bin(mask(self.val(ops[1]), tybits(parts[-1]))).count('1'); continue
            if root == 'brev':
                bits = tybits(parts[-1]); v = mask(self.val(ops[1]), bits)
                self.reg[ops[0]] = int(format(v, '0%db' % bits)[::-1], 2); continue
            if root == 'clz':
                bits = tybits(parts[-1]); v = mask(self.val(ops[1]), bits)
                self.reg[ops[0]] = bits - v.bit_length(); continue
            if root == 'selp':
                self.reg[ops[0]] = self.val(ops[1]) if self.reg.get(ops[3], 0) else self.val(ops[2]); continue
            if root == 'cvt':
                dt, st = parts[1], parts[2]; v = self.val(ops[1])
                v = sx(v, tybits(st)) if st[0] == 's' else mask(v, tybits(st))
                self.reg[ops[0]] = mask(v, tybits(dt)); continue
            ty = parts[-1]; bits = tybits(ty)
            if root == 'neg': self.reg[ops[0]] = mask(-self.val(ops[1]), bits); continue
            if root == 'bfe':
                v = self.val(ops[1]); pos = self.val(ops[2]); ln = self.val(ops[3])
                f = (mask(v, bits) >> pos) & ((1 << ln) - 1)
                self.reg[ops[0]] = mask(sx(f, ln) if ty[0] == 's' else f, bits); continue
            if root == 'prmt':
                a, b, sel = mask(self.val(ops[1]), 32), mask(self.val(ops[2]), 32), self.val(ops[3])
                bs = (a | (b << 32)).to_bytes(8, 'little'); r = 0
                for i in range(4): r |= bs[(sel >> (4 * i)) & 7] << (8 * i)
                self.reg[ops[0]] = r; continue
            if root == 'mad' and 'wide' in parts:
                self.reg[ops[0]] = mask(mask(self.val(ops[1]), 32) * mask(self.val(ops[2]), 32) + self.val(ops[3]), 64); continue
            if root == 'mad':
                self.reg[ops[0]] = mask(self.val(ops[1]) * self.val(ops[2]) + self.val(ops[3]), bits); continue
            if root == 'mul' and 'wide' in parts:
                self.reg[ops[0]] = mask(self.val(ops[1]), 32) * mask(self.val(ops[2]), 32); continue
            a, b = self.val(ops[1]), self.val(ops[2])
            sgn = ty[0] == 's'
            if root in ('div', 'rem'):
                if sgn: a, b = sx(a, bits), sx(b, bits)
                else: a, b = mask(a, bits), mask(b, bits)
                if b == 0: raise Exception('division by zero executed: ' + ins)
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                r = a - q * b
                self.reg[ops[0]] = mask(q if root == 'div' else r, bits); continue
            if root == 'shl': self.reg[ops[0]] = mask(mask(a, bits) << b, bits) if b < bits else 0; continue
            if root == 'shr':
                if sgn: self.reg[ops[0]] = mask(sx(a, bits) >> min(b, bits - 1), bits)
                else: self.reg[ops[0]] = mask(a, bits) >> b if b < bits else 0
                continue
            if root in ('min', 'max'):
                a, b = (sx(a, bits), sx(b, bits)) if sgn else (mask(a, bits), mask(b, bits))
                self.reg[ops[0]] = mask(min(a, b) if root == 'min' else max(a, b), bits); continue
            f = {'add': lambda: a + b, 'sub': lambda: a - b, 'mul': lambda: a * b, 'and': lambda: a & b,
                 'or': lambda: a | b, 'xor': lambda: a ^ b}[root]
            self.reg[ops[0]] = mask(f(), bits)
        raise Exception('fell off the end')

def main():
    text = open(sys.argv[1]).read()
    funcs = parse_funcs(text)
    ok = bad = 0
    for line in open(sys.argv[2]):
        p = line.split()
        if p[0] != 'T': continue
        idx, name, exp, memhex = int(p[1]), p[2], int(p[3], 16), p[4]
        fname = 'conf_%d' % idx
        mem = Mem(); base = 0x100000
        data = bytes.fromhex(memhex) if memhex != '-' else b''
        for i, b in enumerate(data): mem.m[base + i] = b
        try:
            vm = VM(funcs[fname][1], mem, base, len(data))
            got = vm.run()
        except Exception as e:
            print('ERROR', name, e); bad += 1; continue
        if got == exp: ok += 1
        else: print('FAIL %-30s got %#x expected %#x' % (name, got or 0, exp)); bad += 1
    print('%d passed, %d failed' % (ok, bad))
    return 1 if bad or not ok else 0

if __name__ == '__main__':
    sys.exit(main())
