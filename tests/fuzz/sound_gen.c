/* The soundness fuzzer's program generator (tests/fuzz/sound.c runs what it makes).
 *
 * Structure aware: it keeps a coarse model of what each register holds (scalar, the context, a
 * stack pointer, a map value, a ring buffer record) and of which stack slots are written, and
 * builds programs from blocks that mostly make sense to the verifier — context loads, scalar
 * arithmetic, stack stores and loads, pointer spills and fills (with partial overwrites),
 * map lookups, updates and deletes, accesses through map values at constant and variable
 * offsets, pointer arithmetic including pointer subtraction, atomics, helpers (printk, ring
 * buffers, probe_read, the GPU index helpers; helper pointer arguments at the bounds of the
 * context, map values, records and the stack), forward branches, bounded loops and bpf-to-bpf
 * calls.  With a small probability each block takes a risky turn (a pointer where a scalar
 * belongs, an offset past the end, a misaligned atomic, a stale frame pointer, a read of an
 * unwritten slot): a sound verifier rejects those, and whatever it accepts must run safely.
 * Deterministic: the same seed gives the same programs.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/sound.h"

enum rtype { T_NONE, T_SCALAR, T_CTX, T_STACK, T_MAPVAL, T_REC };

struct reg {
	uint8_t t;
	uint8_t map;    /* T_MAPVAL: map index */
	bool caller;    /* T_STACK: points into the caller's frame (subprogram arguments) */
	int32_t off;    /* T_STACK: offset from its frame pointer; T_MAPVAL/T_REC: from the start */
};

struct gen {
	uint64_t *rng;
	struct bpf_insn *code;
	uint32_t n, cap;
	struct reg r[11];
	uint64_t slots;           /* 8-byte stack slots written: bit i = fp-8*(i+1) */
	uint64_t ptr_slots;       /* those holding a spilled pointer */
	uint32_t exits[256];      /* forward jumps to this function's "r0 = 0; exit" */
	uint32_t nexits;
	enum vm_prog_kind kind;
	int depth;                /* 0: main function, 1..: subprograms */
	int loop;                 /* inside a loop body (r9 is the counter) */
	int budget;               /* blocks left */
	uint32_t risk;            /* 0: a program meant to be safe; 1..: risky turns that often */
	struct builder *b;        /* the program being built */
	uint32_t calls[64][2];    /* (pc, function index) of this function's calls */
	uint32_t ncalls;
};

/* Functions as generated: [0] the main one, then subprograms in the order their calls were
 * made; laid out in that order at the end. */
struct builder {
	struct {
		struct bpf_insn *code;
		uint32_t n, calls[64][2], ncalls;
	} f[SOUND_MAX_SUBS + 1];
	uint32_t nf;
	uint32_t risk;            /* of every function of the program */
	int fmt_args[SOUND_FMT_SLOTS]; /* conversions of each .rodata format (-1: refused) */
};

static const struct sound_map_info maps[SOUND_MAPS] = {
	[SOUND_MAP_HASH] = {"h", CUBPF_MAP_HASH, 4, 8, 16},
	[SOUND_MAP_ARRAY] = {"a", CUBPF_MAP_ARRAY, 4, 16, 4},
	[SOUND_MAP_RODATA] = {".rodata", CUBPF_MAP_ARRAY, 4, SOUND_RODATA_SIZE, 1},
	[SOUND_MAP_RING] = {"rb", CUBPF_MAP_RINGBUF, 0, 0, 4096},
	[SOUND_MAP_BSS] = {".bss", CUBPF_MAP_ARRAY, 4, 64, 1},
	[SOUND_MAP_RO] = {"ro", CUBPF_MAP_ARRAY, 4, 8, 2},
};

/* The differential check's programs (sound_set_ptx_scope): the same indices, every map an
 * array (tests/ptx/ptxdiff.h compares arrays only); the hash map keeps its key and value sizes. */
static const struct sound_map_info ptx_maps[SOUND_MAPS] = {
	[SOUND_MAP_HASH] = {"h", CUBPF_MAP_ARRAY, 4, 8, 16},
	[SOUND_MAP_ARRAY] = {"a", CUBPF_MAP_ARRAY, 4, 16, 4},
	[SOUND_MAP_RODATA] = {".rodata", CUBPF_MAP_ARRAY, 4, SOUND_RODATA_SIZE, 1},
	[SOUND_MAP_RING] = {"rb", CUBPF_MAP_ARRAY, 4, 8, 1},
	[SOUND_MAP_BSS] = {".bss", CUBPF_MAP_ARRAY, 4, 64, 1},
	[SOUND_MAP_RO] = {"ro", CUBPF_MAP_ARRAY, 4, 8, 2},
};

static bool ptx_scope;

void sound_set_ptx_scope(bool on)
{
	ptx_scope = on;
}

const struct sound_map_info *sound_map(uint32_t i)
{
	return ptx_scope ? &ptx_maps[i] : &maps[i];
}

/* ---- randomness ---------------------------------------------------------------------------- */

uint64_t sound_rand(uint64_t *s)
{
	*s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static uint32_t rnd(struct gen *g, uint32_t n)
{
	return n ? (uint32_t)(sound_rand(g->rng) % n) : 0;
}

static bool chance(struct gen *g, uint32_t percent)
{
	return rnd(g, 100) < percent;
}

/* A risky turn (what a sound verifier must refuse or make safe): never in programs meant to be
 * safe, at `percent` x the program's risk level / 4 in the others. */
static bool risky(struct gen *g, uint32_t percent)
{
	return g->risk && rnd(g, 400) < percent * g->risk;
}

/* ---- emitting -------------------------------------------------------------------------------- */

static uint32_t emit(struct gen *g, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	if (g->n == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 256;
		g->code = realloc(g->code, g->cap * sizeof(*g->code));
		if (!g->code)
			abort();
	}
	g->code[g->n] = (struct bpf_insn){code, dst, src, off, imm};
	return g->n++;
}

static void mov_imm(struct gen *g, int d, int32_t imm)
{
	emit(g, BPF_ALU64 | BPF_MOV | BPF_K, (uint8_t)d, 0, 0, imm);
	g->r[d] = (struct reg){.t = T_SCALAR};
}

static void mov_reg(struct gen *g, int d, int s)
{
	emit(g, BPF_ALU64 | BPF_MOV | BPF_X, (uint8_t)d, (uint8_t)s, 0, 0);
	g->r[d] = g->r[s];
}

static void ld_map(struct gen *g, int d, uint32_t map)
{
	emit(g, BPF_LD | BPF_DW | BPF_IMM, (uint8_t)d, BPF_PSEUDO_MAP_FD, 0, (int32_t)map);
	emit(g, 0, 0, 0, 0, 0);
	g->r[d] = (struct reg){.t = T_NONE};
}

static void stack_ptr(struct gen *g, int d, int32_t off)
{
	mov_reg(g, d, 10);
	emit(g, BPF_ALU64 | BPF_ADD | BPF_K, (uint8_t)d, 0, 0, off);
	g->r[d] = (struct reg){.t = T_STACK, .off = off};
}

static void jump_exit(struct gen *g, uint8_t op, int r, int32_t imm)
{
	uint32_t at = emit(g, BPF_JMP | op | BPF_K, (uint8_t)r, 0, 0, imm);
	if (g->nexits < sizeof(g->exits) / sizeof(g->exits[0]))
		g->exits[g->nexits++] = at;
	else
		g->code[at] = (struct bpf_insn){BPF_JMP | BPF_JA, 0, 0, 0, 0}; /* harmless */
}

static void call_helper(struct gen *g, uint32_t id)
{
	emit(g, BPF_JMP | BPF_CALL, 0, 0, 0, (int32_t)id);
	for (int i = 0; i <= 5; i++)
		g->r[i] = (struct reg){.t = T_NONE};
	g->r[0].t = T_SCALAR;
}

/* ---- picking registers ----------------------------------------------------------------------- */

/* A register of type t (any when t == T_NONE: an initialised one), or -1. */
static int pick(struct gen *g, uint8_t t)
{
	int c[11], n = 0;
	for (int i = 0; i <= 10; i++)
		if ((t == T_NONE ? g->r[i].t != T_NONE : g->r[i].t == t) && !(g->loop && i == 9))
			c[n++] = i;
	return n ? c[rnd(g, (uint32_t)n)] : -1;
}

/* A destination for a new value: r0-r5 mostly, r7/r8 (kept across calls) sometimes; never the
 * context (r6 in the main function), the frame pointer or a loop counter. */
static int dest(struct gen *g)
{
	static const int regs[] = {0, 1, 2, 3, 4, 5, 7, 8, 9};
	for (;;) {
		int d = regs[rnd(g, sizeof(regs) / sizeof(regs[0]))];
		if (!(g->loop && d == 9) && !(g->depth == 0 && d == 6))
			return d;
	}
}

static int scalar(struct gen *g)
{
	int s = pick(g, T_SCALAR);
	if (s < 0) {
		s = dest(g);
		mov_imm(g, s, (int32_t)rnd(g, 64));
	}
	return s;
}

static uint8_t size_code(uint32_t bytes)
{
	return bytes == 1 ? BPF_B : bytes == 2 ? BPF_H : bytes == 4 ? BPF_W : BPF_DW;
}

static uint32_t rand_size(struct gen *g)
{
	return 1u << rnd(g, 4);
}

/* ---- blocks ---------------------------------------------------------------------------------- */

/* Does [off, off + size) of this frame overlap a spilled pointer? */
static bool spilled(const struct gen *g, int32_t off, uint32_t size)
{
	for (int32_t o = off & ~7; o < off + (int32_t)size; o += 8)
		if (o < 0 && -o / 8 - 1 < 64 && (g->ptr_slots >> (-o / 8 - 1) & 1))
			return true;
	return false;
}

static void b_imm(struct gen *g)
{
	int d = dest(g);
	if (chance(g, 20)) {
		uint64_t v = sound_rand(g->rng);
		emit(g, BPF_LD | BPF_DW | BPF_IMM, (uint8_t)d, 0, 0, (int32_t)(uint32_t)v);
		emit(g, 0, 0, 0, 0, (int32_t)(uint32_t)(v >> 32));
		g->r[d] = (struct reg){.t = T_SCALAR};
	} else
		mov_imm(g, d, (int32_t)(rnd(g, 3) ? rnd(g, 256) : (uint32_t)sound_rand(g->rng)));
}

static void b_alu(struct gen *g)
{
	static const uint8_t ops[] = {BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_MOD, BPF_OR, BPF_AND,
				      BPF_XOR, BPF_LSH, BPF_RSH, BPF_ARSH, BPF_MOV, BPF_NEG};
	int d = scalar(g);
	uint8_t op = ops[rnd(g, sizeof(ops))];
	uint8_t cls = chance(g, 70) ? BPF_ALU64 : BPF_ALU;
	if (op == BPF_NEG)
		emit(g, cls | op | BPF_K, (uint8_t)d, 0, 0, 0);
	else if (chance(g, 50)) {
		int32_t imm = (op == BPF_LSH || op == BPF_RSH || op == BPF_ARSH) ? (int32_t)rnd(g, 32)
											: (int32_t)rnd(g, 1024) - 16;
		emit(g, cls | op | BPF_K, (uint8_t)d, 0, 0, imm);
	} else {
		int s = risky(g, 5) ? pick(g, T_NONE) : scalar(g); /* risky: a pointer operand */
		emit(g, cls | op | BPF_X, (uint8_t)d, (uint8_t)(s < 0 ? d : s), 0, 0);
	}
	g->r[d] = (struct reg){.t = T_SCALAR};
}

/* A field of the context: its offset and size (the verifier wants whole fields). */
static uint32_t ctx_field(struct gen *g, uint32_t *size)
{
	uint32_t off;
	switch (g->kind) {
	case VM_PROG_MEMPROBE: /* addr (8), then 4-byte fields */
		off = rnd(g, (uint32_t)(offsetof(struct cubpf_mem_ctx, ctaid_z) + 4) / 4) * 4;
		off = off < 8 ? 0 : off;
		*size = off ? 4 : 8;
		return off;
	case VM_PROG_UPROBE:
	case VM_PROG_URETPROBE: /* args, ret, ts_ns (8), then 4-byte fields */
		off = rnd(g, sizeof(struct cubpf_api_ctx) / 4) * 4;
		*size = off < offsetof(struct cubpf_api_ctx, func_id) ? 8 : 4;
		return off & ~(*size - 1);
	default: /* 4-byte indices, then 8-byte parameters */
		off = rnd(g, sizeof(struct cubpf_kernel_ctx) / 4) * 4;
		*size = off < offsetof(struct cubpf_kernel_ctx, params) ? 4 : 8;
		return off & ~(*size - 1);
	}
}

static void b_ctx_load(struct gen *g)
{
	if (g->r[6].t != T_CTX)
		return;
	uint32_t size, off = ctx_field(g, &size);
	if (risky(g, 3))
		off += rnd(g, 16), size = rand_size(g); /* risky: a part, misaligned, past the end */
	int d = dest(g);
	emit(g, BPF_LDX | size_code(size) | BPF_MEM, (uint8_t)d, 6, (int16_t)off, 0);
	g->r[d] = (struct reg){.t = T_SCALAR};
}

static int32_t slot_off(struct gen *g, uint32_t *slot)
{
	*slot = rnd(g, 24);
	return -8 * (int32_t)(*slot + 1);
}

static void b_stack_store(struct gen *g)
{
	uint32_t slot, size = rand_size(g);
	int32_t off = slot_off(g, &slot) + (int32_t)(rnd(g, 8 / size) * size);
	if (chance(g, 50)) {
		int s = risky(g, 8) ? pick(g, T_NONE) : scalar(g);
		if (s < 0)
			return;
		emit(g, BPF_STX | size_code(size) | BPF_MEM, 10, (uint8_t)s, (int16_t)off, 0);
	} else
		emit(g, BPF_ST | size_code(size) | BPF_MEM, 10, 0, (int16_t)off,
		     (int32_t)sound_rand(g->rng));
	if (size == 8)
		g->slots |= 1ull << slot;
	if (size == 8 && g->r[10].t == T_STACK)
		g->ptr_slots &= ~(1ull << slot); /* (a pointer stored here is caught below) */
}

static void b_stack_load(struct gen *g)
{
	uint32_t slot, size = rand_size(g);
	int32_t off = slot_off(g, &slot);
	if (!(g->slots >> slot & 1) && !risky(g, 10))
		return; /* mostly written slots; sometimes an unwritten one (must be refused) */
	off += (int32_t)(rnd(g, 8 / size) * size);
	if (spilled(g, off, size) && !risky(g, 30))
		return;
	int d = dest(g);
	emit(g, BPF_LDX | size_code(size) | BPF_MEM, (uint8_t)d, 10, (int16_t)off, 0);
	g->r[d] = (struct reg){.t = spilled(g, off, size) ? T_NONE : T_SCALAR};
}

/* A pointer spilled, maybe partly overwritten, then filled back (whole or in part). */
static void b_spill(struct gen *g)
{
	int p = pick(g, T_NONE);
	if (p < 0)
		return;
	uint32_t slot;
	int32_t off = slot_off(g, &slot);
	emit(g, BPF_STX | BPF_DW | BPF_MEM, 10, (uint8_t)p, (int16_t)off, 0);
	g->slots |= 1ull << slot;
	if (g->r[p].t != T_SCALAR)
		g->ptr_slots |= 1ull << slot;
	bool partial = risky(g, 30);
	if (partial) {
		uint32_t size = 1u << rnd(g, 3);
		emit(g, BPF_ST | size_code(size) | BPF_MEM, 10, 0,
		     (int16_t)(off + (int32_t)(rnd(g, 8 / size) * size)), (int32_t)rnd(g, 256));
	}
	int d = dest(g);
	uint32_t size = g->r[p].t == T_SCALAR || risky(g, 30) ? rand_size(g) : 8;
	emit(g, BPF_LDX | size_code(size) | BPF_MEM, (uint8_t)d, 10,
	     (int16_t)(off + (int32_t)(rnd(g, 8 / size) * size)), 0);
	g->r[d] = size == 8 && !partial ? g->r[p] : (struct reg){.t = T_SCALAR};
	if (d == 10)
		abort();
}

static void b_lookup(struct gen *g)
{
	static const uint32_t which[] = {SOUND_MAP_HASH, SOUND_MAP_ARRAY, SOUND_MAP_BSS,
					 SOUND_MAP_RO, SOUND_MAP_RODATA};
	uint32_t m = which[rnd(g, sizeof(which) / sizeof(which[0]))], slot;
	int32_t off = slot_off(g, &slot);
	if (chance(g, 60))
		emit(g, BPF_ST | BPF_W | BPF_MEM, 10, 0, (int16_t)off, (int32_t)rnd(g, 6));
	else {
		int s = scalar(g);
		emit(g, BPF_STX | BPF_W | BPF_MEM, 10, (uint8_t)s, (int16_t)off, 0);
	}
	ld_map(g, 1, m);
	stack_ptr(g, 2, off);
	call_helper(g, CUBPF_FN_map_lookup_elem);
	if (!risky(g, 3)) /* risky: no NULL check */
		jump_exit(g, BPF_JEQ, 0, 0);
	int d = chance(g, 50) ? 7 : 8;
	if (g->loop && d == 9)
		d = 7;
	mov_reg(g, d, 0);
	g->r[d] = g->r[0] = (struct reg){.t = T_MAPVAL, .map = (uint8_t)m};
}

static void b_mapval_access(struct gen *g)
{
	int p = pick(g, T_MAPVAL);
	if (p < 0)
		return;
	uint32_t vs = maps[g->r[p].map].value_size, size = rand_size(g);
	int32_t off = (int32_t)(rnd(g, vs / size) * size) - g->r[p].off;
	bool ro = g->r[p].map == SOUND_MAP_RO || g->r[p].map == SOUND_MAP_RODATA;
	if (risky(g, 4))
		off += (int32_t)vs; /* risky: past the end */
	int base = p;
	if (chance(g, 25)) { /* a variable offset, bounded by a mask */
		int s = scalar(g), q = dest(g);
		if (q == p || q == s)
			return;
		emit(g, BPF_ALU64 | BPF_AND | BPF_K, (uint8_t)s, 0, 0,
		     !risky(g, 10) ? (int32_t)(vs - size) & ~(int32_t)(size - 1) : (int32_t)vs);
		mov_reg(g, q, p);
		emit(g, BPF_ALU64 | BPF_ADD | BPF_X, (uint8_t)q, (uint8_t)s, 0, 0);
		g->r[s] = (struct reg){.t = T_SCALAR};
		base = q;
		off = -g->r[p].off;
	}
	if (chance(g, 50) || (ro && !risky(g, 20))) {
		int d = dest(g);
		emit(g, BPF_LDX | size_code(size) | BPF_MEM, (uint8_t)d, (uint8_t)base, (int16_t)off, 0);
		g->r[d] = (struct reg){.t = T_SCALAR};
	} else {
		int s = risky(g, 10) ? pick(g, T_NONE) : scalar(g); /* risky: a pointer stored */
		if (s < 0)
			return;
		emit(g, BPF_STX | size_code(size) | BPF_MEM, (uint8_t)base, (uint8_t)s, (int16_t)off, 0);
	}
}

/* Pointer arithmetic: constant steps, masked variable steps, and pointer subtraction whose
 * difference is added back (class 1 of issue 14). */
static void b_ptr_alu(struct gen *g)
{
	int p = chance(g, 50) ? pick(g, T_MAPVAL) : pick(g, T_STACK);
	if (p < 0 || p == 10)
		return;
	uint32_t k = rnd(g, 4);
	if (k == 0) {
		int32_t step = (int32_t)rnd(g, 16) - 8;
		emit(g, BPF_ALU64 | BPF_ADD | BPF_K, (uint8_t)p, 0, 0, step);
		g->r[p].off += step;
	} else if (k == 1) {
		int q = pick(g, T_NONE), d = dest(g);
		if (q < 0 || d == p)
			return;
		mov_reg(g, d, p);
		emit(g, BPF_ALU64 | BPF_SUB | BPF_X, (uint8_t)d, (uint8_t)q, 0, 0);
		g->r[d] = (struct reg){.t = T_SCALAR};
		if (chance(g, 50)) { /* and the difference added back */
			emit(g, BPF_ALU64 | BPF_ADD | BPF_X, (uint8_t)p, (uint8_t)d, 0, 0);
			if (chance(g, 50))
				emit(g, BPF_STX | BPF_DW | BPF_MEM, (uint8_t)p, (uint8_t)d, 0, 0);
		}
	} else {
		int s = scalar(g);
		if (s == p)
			return;
		emit(g, BPF_ALU64 | BPF_AND | BPF_K, (uint8_t)s, 0, 0, (int32_t)(rnd(g, 4) * 8));
		emit(g, BPF_ALU64 | (k == 2 ? BPF_ADD : BPF_SUB) | BPF_X, (uint8_t)p, (uint8_t)s, 0, 0);
		g->r[s] = (struct reg){.t = T_SCALAR};
		g->r[p].off += k == 2 ? 0 : -8; /* unknown: accesses below are then mostly refused */
	}
}

static void b_atomic(struct gen *g)
{
	static const int32_t ops[] = {BPF_ADD, BPF_OR, BPF_AND, BPF_XOR, BPF_ADD | BPF_FETCH,
				      BPF_XCHG, BPF_CMPXCHG};
	int32_t op = ops[rnd(g, sizeof(ops) / sizeof(ops[0]))];
	bool dw = chance(g, 50);
	int base, off;
	int p = pick(g, T_MAPVAL);
	if (p >= 0 && (g->r[p].map == SOUND_MAP_RO || g->r[p].map == SOUND_MAP_RODATA) &&
	    !risky(g, 20))
		p = -1;
	if (p >= 0 && chance(g, 70)) {
		uint32_t vs = maps[g->r[p].map].value_size, sz = dw ? 8 : 4;
		base = p;
		off = (int)(rnd(g, vs / sz) * sz) - g->r[p].off;
		if (dw && risky(g, 10))
			off += 4; /* risky: a misaligned 64-bit atomic (class 5) */
	} else {
		uint32_t slot;
		base = 10;
		off = slot_off(g, &slot);
		if (!(g->slots >> slot & 1))
			emit(g, BPF_ST | BPF_DW | BPF_MEM, 10, 0, (int16_t)off, 0);
		g->slots |= 1ull << slot;
	}
	int s = scalar(g);
	if (op == BPF_CMPXCHG && g->r[0].t != T_SCALAR)
		mov_imm(g, 0, 0);
	emit(g, BPF_STX | (dw ? BPF_DW : BPF_W) | BPF_ATOMIC, (uint8_t)base, (uint8_t)s, (int16_t)off,
	     op);
	if (op == BPF_CMPXCHG)
		g->r[0] = (struct reg){.t = T_SCALAR};
}

static void b_update(struct gen *g)
{
	uint32_t m = chance(g, 50) ? SOUND_MAP_HASH : SOUND_MAP_ARRAY;
	uint32_t vs = maps[m].value_size;
	int32_t key = -8, val = -8 - (int32_t)vs - 8 * (int32_t)rnd(g, 4);
	emit(g, BPF_ST | BPF_W | BPF_MEM, 10, 0, (int16_t)key, (int32_t)rnd(g, 6));
	for (uint32_t i = 0; i < vs; i += 8) {
		int s = risky(g, 6) ? pick(g, T_NONE) : scalar(g); /* risky: a pointer as data */
		if (s >= 0)
			emit(g, BPF_STX | BPF_DW | BPF_MEM, 10, (uint8_t)s, (int16_t)(val + (int32_t)i), 0);
	}
	g->slots |= 1;
	ld_map(g, 1, m);
	stack_ptr(g, 2, key);
	stack_ptr(g, 3, val);
	mov_imm(g, 4, 0);
	call_helper(g, CUBPF_FN_map_update_elem);
	if (chance(g, 20)) {
		ld_map(g, 1, SOUND_MAP_HASH);
		stack_ptr(g, 2, key);
		call_helper(g, CUBPF_FN_map_delete_elem);
	}
}

/* bpf_trace_printk of one of the program's formats.  Its arguments: three scalars, or only as
 * many as the format converts (the others left as they are: unset, or pointers); risky: one
 * fewer, or any register (a pointer). */
static void b_printk(struct gen *g)
{
	int a[3];
	if (ptx_scope) /* output, not compared */
		return;
	uint32_t slot = rnd(g, SOUND_FMT_SLOTS);
	int need = g->b->fmt_args[slot];
	int set = need >= 0 && chance(g, 50) ? need : 3;
	if (set > 0 && need > 0 && risky(g, 10))
		set = need - 1;
	for (int i = 0; i < 3; i++) /* pick first: loading r1/r2 below would clobber them */
		a[i] = i >= set ? 3 + i : risky(g, 10) ? pick(g, T_NONE) : scalar(g);
	for (int i = 0; i < 3; i++)
		if (a[i] >= 0 && a[i] != 3 + i)
			mov_reg(g, 3 + i, a[i]);
	emit(g, BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_VALUE, 0, SOUND_MAP_RODATA);
	emit(g, 0, 0, 0, 0, (int32_t)(slot * SOUND_FMT_LEN));
	mov_imm(g, 2, SOUND_FMT_LEN);
	for (int i = 0; i < set; i++)
		if (a[i] < 0)
			mov_imm(g, 3 + i, 0);
	call_helper(g, CUBPF_FN_trace_printk);
}

static void b_ringbuf_output(struct gen *g)
{
	if (ptx_scope) /* ring buffers: not compared */
		return;
	int32_t off = -8 * (int32_t)(1 + rnd(g, 4));
	uint32_t size = 8 * (1 + rnd(g, 2));
	for (int32_t i = 0; i < (int32_t)size; i += 8) {
		int s = risky(g, 8) ? pick(g, T_NONE) : scalar(g);
		if (s >= 0 && off + i < 0)
			emit(g, BPF_STX | BPF_DW | BPF_MEM, 10, (uint8_t)s, (int16_t)(off + i), 0);
	}
	if (off + (int32_t)size > 0)
		size = (uint32_t)-off;
	if (spilled(g, off, size) && !risky(g, 30))
		return;
	ld_map(g, 1, SOUND_MAP_RING);
	stack_ptr(g, 2, off);
	mov_imm(g, 3, (int32_t)size);
	mov_imm(g, 4, 0);
	call_helper(g, CUBPF_FN_ringbuf_output);
}

/* Host kinds: reserve, fill, submit or discard; sometimes the record's address escapes. */
static void b_reserve(struct gen *g)
{
	if (ptx_scope) /* ring buffers: not compared */
		return;
	if (vm_kind_is_gpu(g->kind) && !risky(g, 5))
		return;
	uint32_t size = 8 * (1 + rnd(g, 3));
	ld_map(g, 1, SOUND_MAP_RING);
	mov_imm(g, 2, (int32_t)size);
	mov_imm(g, 3, 0);
	call_helper(g, CUBPF_FN_ringbuf_reserve);
	jump_exit(g, BPF_JEQ, 0, 0);
	int d = chance(g, 50) ? 7 : 8;
	mov_reg(g, d, 0);
	g->r[d] = g->r[0] = (struct reg){.t = T_REC};
	for (uint32_t i = 0; i < size; i += 8) {
		int s = risky(g, 8) ? pick(g, T_NONE) : scalar(g);
		if (s >= 0)
			emit(g, BPF_STX | BPF_DW | BPF_MEM, (uint8_t)d, (uint8_t)s, (int16_t)i, 0);
	}
	mov_reg(g, 1, d);
	mov_imm(g, 2, 0);
	call_helper(g, chance(g, 70) ? CUBPF_FN_ringbuf_submit : CUBPF_FN_ringbuf_discard);
	if (risky(g, 5)) /* risky: the released record used again */
		emit(g, BPF_STX | BPF_DW | BPF_MEM, (uint8_t)d, (uint8_t)scalar(g), 0, 0);
	g->r[d] = !risky(g, 3) ? (struct reg){.t = T_NONE} : g->r[d];
}

/* r3 = what bpf_probe_read reads in the differential check's programs: any address other than
 * a map value reads host memory on the interpreter (whatever happens to be mapped there, ASan's
 * shadow included) and nothing on the GPU, so a map value (readable on both sides) or an
 * address below 64 KiB (mapped on neither). */
static void ptx_read_source(struct gen *g)
{
	int mv = pick(g, T_MAPVAL);
	if (mv >= 0 && g->r[mv].off >= 0 &&
	    g->r[mv].off + 8 <= (int32_t)maps[g->r[mv].map].value_size && chance(g, 40)) {
		mov_reg(g, 3, mv);
		return;
	}
	int src = scalar(g);
	if (src != 3)
		mov_reg(g, 3, src);
	emit(g, BPF_ALU64 | BPF_AND | BPF_K, 3, 0, 0, 0xffff);
}

static void b_probe_read(struct gen *g)
{
	int32_t off = -8 * (int32_t)(1 + rnd(g, 8));
	int src = ptx_scope ? -1 : risky(g, 50) ? pick(g, T_NONE) : scalar(g);
	if (ptx_scope)
		ptx_read_source(g);
	else if (src >= 0 && src != 3)
		mov_reg(g, 3, src);
	else if (src < 0)
		mov_imm(g, 3, 0);
	stack_ptr(g, 1, off);
	if (chance(g, 70))
		mov_imm(g, 2, (int32_t)(rnd(g, 9)));
	else { /* a variable size, bounded */
		int s = scalar(g);
		mov_reg(g, 2, s);
		emit(g, BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 7);
	}
	if (-off < 8)
		return;
	call_helper(g, CUBPF_FN_probe_read);
}

/* ---- helper arguments at the bounds of their objects (issue 27) ----
 * A helper's pointer argument into the context, a map value, a ring buffer record or the stack,
 * at offsets just inside, at and just past either end for the bytes the helper reads or writes
 * (a constant, or a register of 1 to 16): the verifier must hold each against its object as a
 * load or store of that size, and the checked interpreter faults on what gets through. */

enum { EDGE_MAX = 16 };   /* the largest size a helper is given here */

/* An offset (from the object's start) for n bytes of [0, size): in safe programs anywhere
 * inside; in risky ones around either end. */
static int32_t edge_off(struct gen *g, int32_t size, uint32_t n)
{
	static const int32_t jitter[] = {-8, -1, 0, 0, 1, 8};
	int32_t room = size - (int32_t)n;
	if (!risky(g, 60))
		return room >= 0 ? (int32_t)rnd(g, (uint32_t)room + 1) : 0;
	return (chance(g, 50) ? 0 : room) + jitter[rnd(g, sizeof(jitter) / sizeof(jitter[0]))];
}

/* r`a` = a pointer `off` bytes into the object register p points into (p's own offset taken
 * off); the model forgets what it is (it may be out of bounds). */
static void obj_ptr(struct gen *g, int a, int p, int32_t off)
{
	mov_reg(g, a, p);
	emit(g, BPF_ALU64 | BPF_ADD | BPF_K, (uint8_t)a, 0, 0, off - g->r[p].off);
	g->r[a] = (struct reg){.t = T_NONE};
}

/* r`a` = the size: a constant n, or a register of 1 to EDGE_MAX bytes; returns its largest. */
static uint32_t edge_size(struct gen *g, int a, uint32_t n)
{
	int s = pick(g, T_SCALAR);
	if (chance(g, 60) || s < 0) {
		mov_imm(g, a, (int32_t)n);
		return n;
	}
	mov_reg(g, a, s);
	emit(g, BPF_ALU64 | BPF_AND | BPF_K, (uint8_t)a, 0, 0, EDGE_MAX - 1);
	emit(g, BPF_ALU64 | BPF_ADD | BPF_K, (uint8_t)a, 0, 0, 1);
	return EDGE_MAX;
}

/* The helper call with the object pointer (register p, `size` bytes) as its argument. */
static void edge_call(struct gen *g, int p, int32_t size)
{
	uint32_t n = 1 + rnd(g, EDGE_MAX), which = rnd(g, 4);
	if (which == 0) { /* bpf_probe_read(fp-128, n, obj + off): a source */
		obj_ptr(g, 3, p, edge_off(g, size, EDGE_MAX));
		edge_size(g, 2, n);
		stack_ptr(g, 1, -128);
		call_helper(g, CUBPF_FN_probe_read);
	} else if (which == 1) { /* bpf_probe_read(obj + off, n, NULL): a destination */
		obj_ptr(g, 1, p, edge_off(g, size, EDGE_MAX));
		edge_size(g, 2, n);
		mov_imm(g, 3, 0);
		call_helper(g, CUBPF_FN_probe_read);
	} else if (which == 2) { /* bpf_ringbuf_output(rb, obj + off, n, 0): a record's data */
		obj_ptr(g, 2, p, edge_off(g, size, EDGE_MAX));
		edge_size(g, 3, n);
		ld_map(g, 1, SOUND_MAP_RING);
		mov_imm(g, 4, 0);
		call_helper(g, CUBPF_FN_ringbuf_output);
	} else { /* bpf_map_lookup_elem(h, obj + off): a 4-byte key */
		obj_ptr(g, 2, p, edge_off(g, size, 4));
		ld_map(g, 1, SOUND_MAP_HASH);
		call_helper(g, CUBPF_FN_map_lookup_elem);
	}
}

/* The stack's top 64 bytes, written (zeros) so that reads of them are fine; fp is their end. */
static void edge_stack(struct gen *g)
{
	for (int32_t off = -8; off >= -64; off -= 8) {
		emit(g, BPF_ST | BPF_DW | BPF_MEM, 10, 0, (int16_t)off, 0);
		g->slots |= 1ull << (-off / 8 - 1);
		g->ptr_slots &= ~(1ull << (-off / 8 - 1));
	}
	int d = dest(g);
	stack_ptr(g, d, -64);
	edge_call(g, d, 64);
}

/* A record reserved, written, given to the helper, submitted. */
static void edge_record(struct gen *g)
{
	uint32_t size = 8 * (1 + rnd(g, 3));
	ld_map(g, 1, SOUND_MAP_RING);
	mov_imm(g, 2, (int32_t)size);
	mov_imm(g, 3, 0);
	call_helper(g, CUBPF_FN_ringbuf_reserve);
	jump_exit(g, BPF_JEQ, 0, 0);
	int d = chance(g, 50) ? 7 : 8;
	mov_reg(g, d, 0);
	g->r[d] = (struct reg){.t = T_REC};
	for (uint32_t i = 0; i < size; i += 8)
		emit(g, BPF_ST | BPF_DW | BPF_MEM, (uint8_t)d, 0, (int16_t)i, 0);
	edge_call(g, d, (int32_t)size);
	mov_reg(g, 1, d);
	mov_imm(g, 2, 0);
	call_helper(g, CUBPF_FN_ringbuf_submit);
	g->r[d] = (struct reg){.t = T_NONE};
}

static void b_helper_edge(struct gen *g)
{
	if (ptx_scope) /* (the differential check's programs stay as they were) */
		return;
	uint32_t which = rnd(g, 4);
	int p = pick(g, T_MAPVAL);
	if (which == 0 && g->r[6].t == T_CTX && (!vm_kind_is_gpu(g->kind) || risky(g, 20)))
		edge_call(g, 6, (int32_t)sound_ctx_size(g->kind));
	else if (which == 1 && p >= 0)
		edge_call(g, p, (int32_t)maps[g->r[p].map].value_size);
	else if (which == 2 && !g->loop && (!vm_kind_is_gpu(g->kind) || risky(g, 5)))
		edge_record(g);
	else if (which == 3)
		edge_stack(g);
}

static void b_gpu_index(struct gen *g)
{
	static const uint32_t ids[] = {CUBPF_FN_get_thread_idx, CUBPF_FN_get_block_idx,
				       CUBPF_FN_get_block_dim, CUBPF_FN_get_grid_dim};
	if (ptx_scope) /* thread indices and warp counts: not compared */
		return;
	if (!vm_kind_is_gpu(g->kind) && !risky(g, 5))
		return;
	if (chance(g, 30)) {
		int s = risky(g, 15) ? pick(g, T_NONE) : scalar(g);
		if (s >= 0 && s != 1)
			mov_reg(g, 1, s);
		call_helper(g, CUBPF_FN_warp_count_unique);
		return;
	}
	for (int i = 0; i < 3; i++)
		stack_ptr(g, 1 + i, -8 * (1 + (int32_t)rnd(g, 6)));
	call_helper(g, ids[rnd(g, 4)]);
	g->slots |= 0x3f;
}

static void block(struct gen *g);

static void merge(struct gen *g, const struct reg *before, uint64_t slots)
{
	for (int i = 0; i <= 10; i++)
		if (memcmp(&g->r[i], &before[i], sizeof(before[i])))
			g->r[i] = (struct reg){.t = T_NONE};
	g->slots &= slots;
}

static void b_branch(struct gen *g)
{
	static const uint8_t ops[] = {BPF_JEQ, BPF_JNE, BPF_JGT, BPF_JGE, BPF_JLT, BPF_JLE, BPF_JSET,
				      BPF_JSGT, BPF_JSLT};
	int c = risky(g, 5) ? pick(g, T_NONE) : scalar(g); /* risky: branch on a pointer */
	if (c < 0)
		return;
	struct reg before[11];
	memcpy(before, g->r, sizeof(before));
	uint64_t slots = g->slots;
	uint8_t cls = chance(g, 70) ? BPF_JMP : BPF_JMP32;
	uint32_t at;
	if (chance(g, 30)) {
		int s = risky(g, 5) ? pick(g, T_NONE) : scalar(g);
		at = emit(g, cls | ops[rnd(g, sizeof(ops))] | BPF_X, (uint8_t)c, (uint8_t)(s < 0 ? c : s),
			  0, 0);
	} else
		at = emit(g, cls | ops[rnd(g, sizeof(ops))] | BPF_K, (uint8_t)c, 0, 0,
			  (int32_t)rnd(g, 64));
	for (uint32_t i = 1 + rnd(g, 3); i && g->budget > 0; i--)
		block(g);
	g->code[at].off = (int16_t)(g->n - at - 1);
	merge(g, before, slots);
}

static void b_loop(struct gen *g)
{
	if (g->loop || g->n > 3000)
		return;
	mov_imm(g, 9, (int32_t)(1 + rnd(g, 6)));
	struct reg before[11];
	memcpy(before, g->r, sizeof(before));
	uint64_t slots = g->slots;
	g->loop = 1;
	uint32_t top = g->n;
	for (uint32_t i = 1 + rnd(g, 3); i && g->budget > 0; i--)
		block(g);
	emit(g, BPF_ALU64 | BPF_SUB | BPF_K, 9, 0, 0, 1);
	uint32_t at = emit(g, BPF_JMP | BPF_JNE | BPF_K, 9, 0, 0, 0);
	g->code[at].off = (int16_t)((int32_t)top - (int32_t)at - 1);
	g->loop = 0;
	merge(g, before, slots);
	g->r[9] = (struct reg){.t = T_SCALAR};
}

static void function(struct builder *b, uint32_t index, int depth, enum vm_prog_kind kind,
		     uint64_t *rng, int blocks, int *ret_stack);

/* A bpf-to-bpf call: r1 a pointer to a written slot of this frame (or a map value), r2 a
 * scalar.  The callee may return a pointer into its own frame (class 4): using it must be
 * refused. */
static void b_call(struct gen *g)
{
	if (g->depth >= 2 || g->b->nf > SOUND_MAX_SUBS || g->ncalls >= 64)
		return;
	uint32_t slot;
	int32_t off = slot_off(g, &slot);
	if (!(g->slots >> slot & 1))
		emit(g, BPF_ST | BPF_DW | BPF_MEM, 10, 0, (int16_t)off, (int32_t)rnd(g, 100));
	g->slots |= 1ull << slot;
	int s = scalar(g);
	if (s != 2)
		mov_reg(g, 2, s);
	int mv = pick(g, T_MAPVAL);
	if (mv >= 0 && chance(g, 30))
		mov_reg(g, 1, mv);
	else
		stack_ptr(g, 1, off);
	uint32_t sub = g->b->nf++;
	int ret_stack = 0;
	function(g->b, sub, g->depth + 1, g->kind, g->rng, 2 + (int)rnd(g, 6), &ret_stack);
	uint32_t at = emit(g, BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, 0);
	g->calls[g->ncalls][0] = at;
	g->calls[g->ncalls++][1] = sub;
	for (int i = 0; i <= 5; i++)
		g->r[i] = (struct reg){.t = T_NONE};
	g->r[0] = ret_stack ? (struct reg){.t = T_STACK, .off = -8} : (struct reg){.t = T_SCALAR};
	if (ret_stack && chance(g, 70)) /* use the callee's dead frame */
		emit(g, BPF_STX | BPF_DW | BPF_MEM, 0, (uint8_t)scalar(g), 0, 0);
}

/* Writes through a caller's pointer argument (r1 in a subprogram). */
static void b_arg_store(struct gen *g)
{
	if (g->r[1].t != T_STACK || !g->r[1].caller)
		return;
	int s = risky(g, 8) ? pick(g, T_NONE) : scalar(g);
	if (s >= 0)
		emit(g, BPF_STX | BPF_DW | BPF_MEM, 1, (uint8_t)s, 0, 0);
}

/* ---- pointers chosen on branches (the differential check's programs only) ----------------------
 * Issue 14, class 7: the PTX generator once stored through a register that held a kernel
 * parameter or stack data when a pointer was chosen on branches or moved in a loop. */

/* d = a stack slot's address or an 8-byte-aligned map value pointer. */
static void choice_target(struct gen *g, int d)
{
	int mv = pick(g, T_MAPVAL);
	if (mv >= 0 && mv != d && g->r[mv].off >= 0 && g->r[mv].off % 8 == 0 &&
	    g->r[mv].off + 8 <= (int32_t)maps[g->r[mv].map].value_size && chance(g, 40)) {
		mov_reg(g, d, mv);
		return;
	}
	uint32_t slot;
	stack_ptr(g, d, slot_off(g, &slot));
}

/* p = c > K ? A : B; *p = s; r = *p. */
static void b_choose(struct gen *g)
{
	int c = scalar(g), d = dest(g);
	if (d == c)
		return;
	choice_target(g, d);
	uint32_t at = emit(g, BPF_JMP | BPF_JGT | BPF_K, (uint8_t)c, 0, 0, (int32_t)rnd(g, 64));
	choice_target(g, d);
	g->code[at].off = (int16_t)(g->n - at - 1);
	int v = scalar(g), l = dest(g);
	if (v != d)
		emit(g, BPF_STX | BPF_DW | BPF_MEM, (uint8_t)d, (uint8_t)v, 0, 0);
	if (v != d && l != d) {
		emit(g, BPF_LDX | BPF_DW | BPF_MEM, (uint8_t)l, (uint8_t)d, 0, 0);
		g->r[l] = (struct reg){.t = T_SCALAR};
	}
	g->r[d] = (struct reg){.t = T_NONE};
}

/* A stack pointer moved through a loop: for (p = fp - 8 * k; n--; p += 8) *p = s; */
static void b_walk(struct gen *g)
{
	if (g->loop)
		return;
	int d = dest(g), v = scalar(g);
	if (d == 9 || v == 9 || v == d)
		return;
	int32_t n = 1 + (int32_t)rnd(g, 4), start = -8 * (n + (int32_t)rnd(g, 4));
	stack_ptr(g, d, start);
	mov_imm(g, 9, n);
	uint32_t top = emit(g, BPF_STX | BPF_DW | BPF_MEM, (uint8_t)d, (uint8_t)v, 0, 0);
	emit(g, BPF_ALU64 | BPF_ADD | BPF_K, (uint8_t)d, 0, 0, 8);
	emit(g, BPF_ALU64 | BPF_SUB | BPF_K, 9, 0, 0, 1);
	uint32_t at = emit(g, BPF_JMP | BPF_JNE | BPF_K, 9, 0, 0, 0);
	g->code[at].off = (int16_t)((int32_t)top - (int32_t)at - 1);
	g->r[d] = (struct reg){.t = T_NONE};
	for (int32_t off = start; off < start + 8 * n; off += 8)
		g->slots |= 1ull << (-off / 8 - 1);
}

/* A loop of up to 300 iterations with a branch in it (issue 27: pruning with slot liveness):
 * on the iterations whose bit of a scalar is set, a map update with a key and value written on
 * that branch only (dead after the join), and sometimes an offset written there and read after
 * the join, as an index into a map value: in bounds, or (risky) past the map, which a sound
 * verifier must see through the join. */
static void b_loop_cond(struct gen *g)
{
	if (g->loop || g->n > 2500 || ptx_scope || chance(g, 50)) /* (half as often: slow) */
		return;
	bool idx = chance(g, 40);
	/* risky: past the whole map (4 x 16 bytes): the checked interpreter sees only what leaves
	 * a map's storage */
	int32_t bad = risky(g, 30) ? 64 + (int32_t)rnd(g, 200) : (int32_t)rnd(g, 16);
	if (g->r[6].t == T_CTX) { /* bits the verifier cannot know: both branches walked */
		uint32_t size, off = ctx_field(g, &size);
		emit(g, BPF_LDX | size_code(size) | BPF_MEM, 8, 6, (int16_t)off, 0);
	} else
		mov_reg(g, 8, scalar(g));
	for (int o = -8; o >= -24; o -= 8) /* scalars in fp-8..fp-24 on every path */
		emit(g, BPF_ST | BPF_MEM | BPF_DW, 10, 0, (int16_t)o, 0);
	g->slots |= 7, g->ptr_slots &= ~7ull;
	for (int r = 3; r <= 5; r++) /* alike on both branches at the join (see below) */
		mov_imm(g, r, 0);
	mov_imm(g, 9, (int32_t)(1 + (chance(g, 15) ? rnd(g, 300) : rnd(g, 24)))); /* (time) */
	uint32_t top = g->n;
	mov_reg(g, 1, 9);
	emit(g, BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, 31);
	mov_reg(g, 2, 8);
	emit(g, BPF_ALU64 | BPF_RSH | BPF_X, 2, 1, 0, 0);
	emit(g, BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 1);
	/* the branch that writes is the jump's target: the verifier walks the fall-through
	 * first, so the state kept at the join is the one without the write */
	emit(g, BPF_JMP | BPF_JNE | BPF_K, 2, 0, 1, 0);
	uint32_t skip = emit(g, BPF_JMP | BPF_JA, 0, 0, 0, 0);
	mov_reg(g, 1, 9);
	emit(g, BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, 3);
	emit(g, BPF_STX | BPF_MEM | BPF_W, 10, 1, -4, 0);
	emit(g, BPF_STX | BPF_MEM | BPF_DW, 10, 9, -16, 0);
	if (idx)
		emit(g, BPF_ST | BPF_MEM | BPF_DW, 10, 0, -24, bad);
	ld_map(g, 1, SOUND_MAP_HASH);
	stack_ptr(g, 2, -4);
	stack_ptr(g, 3, -16);
	mov_imm(g, 4, 0);
	call_helper(g, CUBPF_FN_map_update_elem);
	/* pruning takes a helper to read all of r1-r5: the update leaves r3-r5 unset where the
	 * other branch has them set, and the paths would double at each iteration */
	for (int r = 3; r <= 5; r++)
		mov_imm(g, r, 0);
	g->code[skip].off = (int16_t)(g->n - skip - 1);
	if (idx) { /* after the join: array[0] + fp-24 */
		emit(g, BPF_LDX | BPF_MEM | BPF_DW, 7, 10, -24, 0);
		emit(g, BPF_ST | BPF_MEM | BPF_W, 10, 0, -4, 0);
		ld_map(g, 1, SOUND_MAP_ARRAY);
		stack_ptr(g, 2, -4);
		call_helper(g, CUBPF_FN_map_lookup_elem);
		emit(g, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2, 0);
		emit(g, BPF_ALU64 | BPF_ADD | BPF_X, 0, 7, 0, 0);
		emit(g, BPF_LDX | BPF_MEM | BPF_B, 0, 0, 0, 0);
		g->r[7] = (struct reg){.t = T_SCALAR};
	}
	emit(g, BPF_ALU64 | BPF_SUB | BPF_K, 9, 0, 0, 1);
	uint32_t at = emit(g, BPF_JMP | BPF_JNE | BPF_K, 9, 0, 0, 0);
	g->code[at].off = (int16_t)((int32_t)top - (int32_t)at - 1);
	for (int i = 0; i <= 5; i++) /* a join of both branches: the call's clobbers */
		g->r[i] = (struct reg){.t = T_NONE};
	g->r[8] = g->r[9] = (struct reg){.t = T_SCALAR};
}

static void block(struct gen *g)
{
	static void (*const blocks[])(struct gen *) = {
		b_imm, b_alu, b_alu, b_ctx_load, b_ctx_load, b_stack_store, b_stack_load, b_spill,
		b_lookup, b_lookup, b_mapval_access, b_mapval_access, b_mapval_access, b_ptr_alu,
		b_ptr_alu, b_atomic, b_update, b_printk, b_ringbuf_output, b_reserve, b_probe_read,
		b_gpu_index, b_branch, b_branch, b_loop, b_call, b_arg_store, b_helper_edge,
		b_helper_edge, b_loop_cond,
	};
	g->budget--;
	if (ptx_scope && chance(g, 12)) { /* (the fuzzer's own programs stay as they were) */
		(chance(g, 60) ? b_choose : b_walk)(g);
		return;
	}
	blocks[rnd(g, sizeof(blocks) / sizeof(blocks[0]))](g);
}

/* ---- functions and programs ------------------------------------------------------------------- */

/* The end of a function: "r0 = a scalar (sometimes anything); exit", then the shared
 * "r0 = 0; exit" that failed lookups jump to. */
static void epilogue(struct gen *g, int *ret_stack)
{
	if (g->depth && risky(g, 8)) {
		stack_ptr(g, 0, -8); /* a pointer into the dying frame */
		*ret_stack = 1;
	} else {
		int r = risky(g, 5) ? pick(g, T_NONE) : scalar(g);
		if (r != 0)
			mov_reg(g, 0, r < 0 ? 10 : r);
	}
	emit(g, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	if (!g->nexits)
		return; /* no failed lookup jumps here: the verifier refuses unreachable code */
	uint32_t label = g->n;
	mov_imm(g, 0, 0);
	emit(g, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	for (uint32_t i = 0; i < g->nexits; i++)
		g->code[g->exits[i]].off = (int16_t)(label - g->exits[i] - 1);
}

static void function(struct builder *b, uint32_t index, int depth, enum vm_prog_kind kind,
		     uint64_t *rng, int blocks, int *ret_stack)
{
	struct gen g = {.rng = rng, .kind = kind, .depth = depth, .budget = blocks, .b = b,
			.risk = b->risk};
	g.r[10] = (struct reg){.t = T_STACK};
	if (depth == 0) {
		g.r[1] = (struct reg){.t = T_CTX};
		mov_reg(&g, 6, 1);
	} else {
		g.r[1] = (struct reg){.t = T_STACK, .caller = true};
		g.r[2] = (struct reg){.t = T_SCALAR};
	}
	while (g.budget > 0 && g.n < 3000)
		block(&g);
	epilogue(&g, ret_stack);
	b->f[index].code = g.code;
	b->f[index].n = g.n;
	memcpy(b->f[index].calls, g.calls, sizeof(g.calls));
	b->f[index].ncalls = g.ncalls;
}

uint32_t sound_ctx_size(enum vm_prog_kind kind)
{
	return kind == VM_PROG_MEMPROBE ? sizeof(struct cubpf_mem_ctx)
	       : kind == VM_PROG_UPROBE || kind == VM_PROG_URETPROBE ? sizeof(struct cubpf_api_ctx)
									: sizeof(struct cubpf_kernel_ctx);
}

/* Lays the functions out (main first) and points every call at its callee. */
static bool layout(struct builder *b, struct sound_prog *p)
{
	uint32_t start[SOUND_MAX_SUBS + 1];
	p->n = 0;
	for (uint32_t i = 0; i < b->nf; i++) {
		start[i] = p->n;
		p->subprogs[i] = p->n;
		if (p->n + b->f[i].n > SOUND_MAX_INSNS)
			return false;
		memcpy(p->insns + p->n, b->f[i].code, b->f[i].n * sizeof(struct bpf_insn));
		p->n += b->f[i].n;
	}
	p->nsubprogs = b->nf;
	for (uint32_t i = 0; i < b->nf; i++)
		for (uint32_t c = 0; c < b->f[i].ncalls; c++) {
			uint32_t pc = start[i] + b->f[i].calls[c][0];
			p->insns[pc].imm = (int32_t)start[b->f[i].calls[c][1]] - (int32_t)pc - 1;
		}
	return true;
}

/* ---- printk formats ---------------------------------------------------------------------------
 * Drawn from the grammar of vm/printk.c, piece by piece, counting conversions as they are made
 * (not with the grammar's parser: the count is what the verifier is checked against). */

static const char *const bad_specs[] = {"%a", "%f", "%e", "%G", "%n", "%o", "%*d", "%.*x",
					"%99d", "%.70u", "%lc", "%hs", "%#d", "%+p", "%.2c", "%lld%",
					"%q", "%Lf", "%jd", "%zu", "%"};

static uint64_t fmt_rand(uint64_t *rng, uint64_t n)
{
	return sound_rand(rng) % n;
}

/* One valid conversion spec ("%-08.3hx") into out; returns its length. */
static int good_spec(uint64_t *rng, char *out)
{
	static const char convs[] = "diuxXcsp";
	char conv = convs[fmt_rand(rng, 8)];
	bool integer = conv != 'c' && conv != 's' && conv != 'p';
	int n = 0;
	out[n++] = '%';
	for (int i = 0; i < 5; i++)
		if (fmt_rand(rng, 4) == 0) {
			char f = "#0-+ "[i];
			if ((!integer && f != '-') || (f == '#' && conv != 'x' && conv != 'X'))
				continue;
			out[n++] = f;
		}
	if (fmt_rand(rng, 3) == 0)
		n += sprintf(out + n, "%d", 1 + (int)fmt_rand(rng, VM_PRINTK_MAX_WIDTH));
	if (fmt_rand(rng, 4) == 0 && conv != 'c' && conv != 'p')
		n += fmt_rand(rng, 4) ? sprintf(out + n, ".%d", (int)fmt_rand(rng, 65))
				      : sprintf(out + n, ".");
	if (integer) {
		static const char *const lens[] = {"", "", "h", "h", "l", "ll"}; /* hh: refused */
		n += sprintf(out + n, "%s", lens[fmt_rand(rng, 6)]);
	}
	out[n++] = conv;
	return n;
}

/* A format of at most SOUND_FMT_LEN - 1 bytes; *nconv its conversions, -1 when it holds a
 * piece the grammar refuses (only with `bad`). */
static void gen_format(uint64_t *rng, bool bad, char *out, int *nconv)
{
	int n = 0, conv = 0, want = (int)fmt_rand(rng, 4);
	bool refused = false;
	memset(out, 0, SOUND_FMT_LEN);
	while (n < SOUND_FMT_LEN - 12) {
		char piece[24];
		int len;
		uint64_t k = fmt_rand(rng, 8);
		if (bad && fmt_rand(rng, 6) == 0) {
			len = sprintf(piece, "%s", bad_specs[fmt_rand(rng, sizeof(bad_specs) /
								   sizeof(bad_specs[0]))]);
			refused = true;
		} else if (k < 3 && conv < want) {
			len = good_spec(rng, piece);
			conv++;
		} else if (k == 3)
			len = sprintf(piece, "%%%%");
		else if (k < 7)
			len = sprintf(piece, "%c", " x=:|ab\n"[fmt_rand(rng, 8)]);
		else
			break;
		memcpy(out + n, piece, (size_t)len);
		n += len;
	}
	if (bad && conv == 3 && fmt_rand(rng, 2) == 0 && n < SOUND_FMT_LEN - 3)
		memcpy(out + n, "%d", 2), refused = true; /* a fourth conversion */
	*nconv = refused ? -1 : conv;
}

void sound_rodata_default(struct sound_prog *p)
{
	memset(p->rodata, 0, sizeof(p->rodata));
	strcpy(p->rodata, "%llx %llx %llx\n");
}

static void gen_formats(uint64_t *rng, struct builder *b, struct sound_prog *p)
{
	sound_rodata_default(p);
	b->fmt_args[0] = 3;
	for (int i = 1; i < SOUND_FMT_SLOTS; i++)
		gen_format(rng, b->risk && fmt_rand(rng, 3) == 0, p->rodata + i * SOUND_FMT_LEN,
			   &b->fmt_args[i]);
}

bool sound_generate(uint64_t *rng, struct sound_prog *p)
{
	static const enum vm_prog_kind kinds[] = {VM_PROG_KPROBE, VM_PROG_KRETPROBE,
						  VM_PROG_MEMPROBE, VM_PROG_UPROBE,
						  VM_PROG_URETPROBE};
	static const uint32_t risks[] = {0, 0, 1, 1, 2, 4};
	struct builder b = {.nf = 1, .risk = risks[sound_rand(rng) % 6]};
	int ret_stack = 0;
	p->kind = kinds[sound_rand(rng) % (ptx_scope ? 3 : 5)]; /* (GPU kinds first) */
	gen_formats(rng, &b, p);
	function(&b, 0, 0, p->kind, rng, 4 + (int)(sound_rand(rng) % 28), &ret_stack);
	bool ok = layout(&b, p);
	for (uint32_t i = 0; i < b.nf; i++)
		free(b.f[i].code);
	return ok;
}
