#!/usr/bin/env python3
"""Writes damaged eBPF objects whose .BTF type graph has cycles or absurd nesting, as seeds for
fuzz_vm_object and fuzz_shim_load (issue 14, class 8): each must end in a loader error, never a
crash or a hang.  Usage: btf_cycles.py INTACT.bpf.o OUTDIR.  The input must carry a map whose
__type(key, ...) is a typedef (every clang -g object built with cubpf_helpers.h does)."""
import struct, sys, os

ARRAY, PTR, TYPEDEF, VOLATILE, CONST, STRUCT = 3, 2, 8, 9, 10, 4
TRAILER = {1: lambda v: 4, 3: lambda v: 12, 4: lambda v: 12 * v, 5: lambda v: 12 * v,
           6: lambda v: 8 * v, 13: lambda v: 8 * v, 14: lambda v: 4, 15: lambda v: 12 * v,
           17: lambda v: 4, 19: lambda v: 12 * v}

def sections(b):
    shoff, = struct.unpack_from('<Q', b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', b, 0x3a)
    hdr = lambda i: struct.unpack_from('<IIQQQQIIQQ', b, shoff + i * shentsize)
    stroff = hdr(shstrndx)[4]
    out = {}
    for i in range(shnum):
        h = hdr(i)
        name = b[stroff + h[0]:b.index(b'\0', stroff + h[0])].decode()
        out[name] = (h[4], h[5])
    return out

def btf_types(b, base):
    hdr_len, type_off, type_len = struct.unpack_from('<I I I', b, base + 4)[0], \
        struct.unpack_from('<I', b, base + 8)[0], struct.unpack_from('<I', b, base + 12)[0]
    start = base + hdr_len + type_off
    types, off = [None], 0
    while off < type_len:
        name_off, info, st = struct.unpack_from('<III', b, start + off)
        kind, vlen = (info >> 24) & 0x1f, info & 0xffff
        types.append((start + off, kind))
        off += 12 + TRAILER.get(kind, lambda v: 0)(vlen)
    return types

def main(src, outdir):
    orig = bytearray(open(src, 'rb').read())
    off, size = sections(orig)['.BTF']
    types = btf_types(orig, off)
    ids = lambda k: [i for i in range(1, len(types)) if types[i][1] == k]
    arrays, typedefs, ptrs = ids(ARRAY), ids(TYPEDEF), ids(PTR)
    assert arrays and len(typedefs) >= 2 and ptrs, 'object lacks arrays/typedefs/pointers'
    set_type = lambda b, i, t: struct.pack_into('<I', b, types[i][0] + 8, t)
    set_elem = lambda b, i, t: struct.pack_into('<I', b, types[i][0] + 12, t)
    set_nelems = lambda b, i, n: struct.pack_into('<I', b, types[i][0] + 20, n)
    variants = {}
    b = bytearray(orig)           # every pointer (__type(value, T) among them) -> a self array
    for p in ptrs: set_type(b, p, arrays[0])
    set_elem(b, arrays[0], arrays[0]); variants['btf_array_self'] = b
    b = bytearray(orig)           # array -> typedef -> array
    for p in ptrs: set_type(b, p, arrays[0])
    set_elem(b, arrays[0], typedefs[0]); set_type(b, typedefs[0], arrays[0])
    variants['btf_array_typedef_cycle'] = b
    b = bytearray(orig)           # every typedef refers to itself
    for t in typedefs: set_type(b, t, t)
    variants['btf_typedef_self'] = b
    b = bytearray(orig)           # typedefs in a ring
    for k, t in enumerate(typedefs): set_type(b, t, typedefs[(k + 1) % len(typedefs)])
    variants['btf_typedef_ring'] = b
    b = bytearray(orig)           # arrays of arrays with huge counts: sizes that overflow
    for p in ptrs: set_type(b, p, arrays[0])
    for k, a in enumerate(arrays): set_elem(b, a, arrays[(k + 1) % len(arrays)]); set_nelems(b, a, 1 << 30)
    variants['btf_array_overflow'] = b
    b = bytearray(orig)           # pointers to themselves, structs holding themselves
    for p in ptrs: set_type(b, p, p)
    variants['btf_ptr_self'] = b
    os.makedirs(outdir, exist_ok=True)
    for name, data in variants.items():
        open(os.path.join(outdir, name + '.elf'), 'wb').write(data)
        print(name)

main(sys.argv[1], sys.argv[2])
