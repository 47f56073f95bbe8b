#!/usr/bin/env python3
"""Expected dynamic PTX instruction counts of tests/cuda/tools_instr.cu, computed from the PTX
nvcc emitted for it (build/gpu/tools_instr.ptx) and the launch shapes, independently of cubpf's
own block splitter: an instruction is a statement ending in ';' in a kernel body that is not a
declaration or directive (.reg, .pragma, .loc, ...) and not a label.

  instr_expect.py PTX THREADS ITERS  ->  one line per kernel:
  NAME thread_insns warp_insns_min warp_insns_max loop_insns loop_first_line ld_global st_global

instr_straight: one block, every thread issues every instruction.
instr_loop: the loop is the one label with a backward branch to it; it runs ITERS times, the
  rest once.
instr_diverge: the instructions between the one forward branch and its label run in 8 lanes of
  32; the warp-level count is every instruction once per warp, plus at most the label's block
  once more where the lanes reach it in two groups.
Exits with a message when the PTX does not have these shapes (a compiler that lays them out
otherwise)."""
import re
import sys


def kernels(text):
    out = {}
    for m in re.finditer(r'\.entry\s+(\w+)\s*\(', text):
        name = m.group(1)
        open_ = text.index('{', m.end())
        depth, i = 0, open_
        while True:
            if text[i] == '{':
                depth += 1
            elif text[i] == '}':
                depth -= 1
                if depth == 0:
                    break
            i += 1
        first_line = text.count('\n', 0, open_) + 1
        body = text[open_ + 1:i].split('\n')
        stmts = []  # ('label', name, line) or ('insn', text, line)
        for k, raw in enumerate(body):
            line = first_line + k
            s = raw.split('//')[0].strip()
            if not s:
                continue
            lm = re.match(r'^([$\w]+):$', s)
            if lm:
                stmts.append(('label', lm.group(1), line))
            elif s.startswith('.') or s in ('{', '}'):
                continue
            elif s.endswith(';'):
                stmts.append(('insn', s, line))
        out[name] = stmts
    return out


def insns(stmts):
    return [s for s in stmts if s[0] == 'insn']


def branch_target(s):
    m = re.match(r'^(@!?%\w+\s+)?bra(\.uni)?\s+([$\w]+);$', s[1])
    return m.group(3) if m else None


def main():
    ptx, threads, iters = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])
    warps = threads // 32
    ks = kernels(ptx)
    rows = []
    for name, st in ks.items():
        n = len(insns(st))
        ldg = sum(1 for s in insns(st) if s[1].startswith(('ld.global', 'ldu.global')))
        stg = sum(1 for s in insns(st) if s[1].startswith('st.global'))
        labels = [s for s in st if s[0] == 'label']
        branches = [(i, branch_target(s)) for i, s in enumerate(st) if s[0] == 'insn' and branch_target(s)]
        if 'instr_straight' in name:
            if labels or branches:
                sys.exit('instr_expect: %s is not straight-line code' % name)
            rows.append((name, n * threads, n * warps, n * warps, 0, 0, ldg, stg))
        elif 'instr_loop' in name:
            if len(labels) != 1 or len(branches) != 1:
                sys.exit('instr_expect: %s: expected one label and one branch' % name)
            li = st.index(labels[0])
            bi, tgt = branches[0]
            if tgt != labels[0][1] or bi < li:
                sys.exit('instr_expect: %s: the branch is not the loop\'s back edge' % name)
            body = insns(st[li:bi + 1])
            b = len(body)
            t = (n - b) * threads + iters * b * threads
            w = (n - b) * warps + iters * b * warps
            rows.append((name, t, w, w, b, body[0][2], ldg, stg))
        elif 'instr_diverge' in name:
            if len(labels) != 1 or len(branches) != 1:
                sys.exit('instr_expect: %s: expected one label and one branch' % name)
            li = st.index(labels[0])
            bi, tgt = branches[0]
            if tgt != labels[0][1] or bi > li:
                sys.exit('instr_expect: %s: the branch does not skip forward to its label' % name)
            d = len(insns(st[bi + 1:li]))
            after = len(insns(st[li:]))
            t = (n - d) * threads + d * threads // 4
            rows.append((name, t, n * warps, (n + after) * warps, 0, 0, ldg, stg))
    for r in rows:
        print(' '.join(str(x) for x in r))


main()
