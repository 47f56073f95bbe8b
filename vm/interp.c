/* The host interpreter: programs are pre-decoded once (vm_exec_new) into a compact form whose
 * operation byte indexes a computed-goto table, so the inner loop does one indirect jump per
 * instruction and no decoding.  The same body is compiled twice: a fast one for verified
 * programs and a checked one (every memory access bounded, an instruction budget) for programs
 * that did not go through the verifier, such as the conformance vectors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vm/internal.h"

/* Internal operations: one per (class, op, source, size) combination that the ISA defines. */
#define VM_ALU_OPS(X)                                                                         \
	X(ADD) X(SUB) X(MUL) X(DIV) X(SDIV) X(MOD) X(SMOD) X(OR) X(AND) X(LSH) X(RSH) X(ARSH)   \
	X(XOR) X(MOV) X(MOVSX8) X(MOVSX16) X(MOVSX32)
#define VM_JMP_OPS(X) X(JEQ) X(JNE) X(JGT) X(JGE) X(JLT) X(JLE) X(JSET) X(JSGT) X(JSGE) X(JSLT) X(JSLE)

enum vm_op {
#define E4(n) OP_##n##64K, OP_##n##64X, OP_##n##32K, OP_##n##32X,
	VM_ALU_OPS(E4)
	VM_JMP_OPS(E4)
#undef E4
	OP_NEG64, OP_NEG32,
	OP_LE16, OP_LE32, OP_LE64, OP_BE16, OP_BE32, OP_BE64, OP_BSWAP16, OP_BSWAP32, OP_BSWAP64,
	OP_JA, OP_CALL, OP_CALL_LOCAL, OP_CALLX, OP_EXIT, OP_LDDW,
	OP_LDXB, OP_LDXH, OP_LDXW, OP_LDXDW, OP_LDXSB, OP_LDXSH, OP_LDXSW,
	OP_STB, OP_STH, OP_STW, OP_STDW, OP_STXB, OP_STXH, OP_STXW, OP_STXDW,
	OP_AADD32, OP_AOR32, OP_AAND32, OP_AXOR32, OP_AFADD32, OP_AFOR32, OP_AFAND32, OP_AFXOR32,
	OP_AXCHG32, OP_ACMPXCHG32,
	OP_AADD64, OP_AOR64, OP_AAND64, OP_AXOR64, OP_AFADD64, OP_AFOR64, OP_AFAND64, OP_AFXOR64,
	OP_AXCHG64, OP_ACMPXCHG64,
	OP_INVALID,
	OP_COUNT
};

struct vm_dinsn {
	uint8_t op;       /* enum vm_op */
	uint8_t dst, src;
	uint8_t pad;
	int32_t off;      /* memory offset; jumps: absolute target index */
	uint64_t k;       /* immediate (sign-extended / 64-bit for lddw) or helper pointer */
};

struct vm_exec {
	struct vm_runtime *rt;
	const struct vm_prog *prog;
	struct vm_dinsn *code;
	uint32_t cnt;
	bool checked;
	vm_helper_fn helpers[VM_MAX_HELPER_ID];
};

/* ---- decoding ------------------------------------------------------------------------------ */

static int alu_index(uint8_t code, int16_t off)
{
	switch (BPF_OP(code)) {
	case BPF_ADD: return 0;
	case BPF_SUB: return 1;
	case BPF_MUL: return 2;
	case BPF_DIV: return off == 1 ? 4 : off == 0 ? 3 : -1;
	case BPF_MOD: return off == 1 ? 6 : off == 0 ? 5 : -1;
	case BPF_OR: return 7;
	case BPF_AND: return 8;
	case BPF_LSH: return 9;
	case BPF_RSH: return 10;
	case BPF_ARSH: return 11;
	case BPF_XOR: return 12;
	case BPF_MOV:
		switch (off) {
		case 0: return 13;
		case 8: return BPF_SRC(code) == BPF_X ? 14 : -1;
		case 16: return BPF_SRC(code) == BPF_X ? 15 : -1;
		case 32: return BPF_SRC(code) == BPF_X && BPF_CLASS(code) == BPF_ALU64 ? 16 : -1;
		}
		return -1;
	}
	return -1;
}

static int jmp_index(uint8_t op)
{
	static const uint8_t ops[] = {BPF_JEQ, BPF_JNE, BPF_JGT, BPF_JGE, BPF_JLT, BPF_JLE,
				      BPF_JSET, BPF_JSGT, BPF_JSGE, BPF_JSLT, BPF_JSLE};
	for (int i = 0; i < (int)sizeof(ops); i++)
		if (ops[i] == op)
			return i;
	return -1;
}

static int decode_alu(const struct bpf_insn *in, struct vm_dinsn *d)
{
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64;
	uint8_t op = BPF_OP(in->code);
	if (op == BPF_NEG) {
		d->op = is64 ? OP_NEG64 : OP_NEG32;
		return 0;
	}
	if (op == BPF_END) {
		static const uint8_t le[] = {OP_LE16, OP_LE32, OP_LE64};
		static const uint8_t be[] = {OP_BE16, OP_BE32, OP_BE64};
		static const uint8_t sw[] = {OP_BSWAP16, OP_BSWAP32, OP_BSWAP64};
		int w = in->imm == 16 ? 0 : in->imm == 32 ? 1 : in->imm == 64 ? 2 : -1;
		if (w < 0)
			return -1;
		d->op = is64 ? sw[w] : BPF_SRC(in->code) == BPF_X ? be[w] : le[w];
		return 0;
	}
	int i = alu_index(in->code, in->off);
	if (i < 0)
		return -1;
	d->op = (uint8_t)(i * 4 + (is64 ? 0 : 2) + (BPF_SRC(in->code) == BPF_X ? 1 : 0));
	d->k = is64 ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm;
	return 0;
}

static int decode_jmp(const struct bpf_insn *in, uint32_t pc, uint32_t cnt, struct vm_dinsn *d)
{
	bool is64 = BPF_CLASS(in->code) == BPF_JMP;
	uint8_t op = BPF_OP(in->code);
	int64_t target = (int64_t)pc + 1 + in->off;
	if (op == BPF_JA) {
		if (!is64)
			target = (int64_t)pc + 1 + in->imm;
		d->op = OP_JA;
	} else if (op == BPF_EXIT) {
		d->op = OP_EXIT;
		return 0;
	} else if (op == BPF_CALL) {
		if (BPF_SRC(in->code) == BPF_X) {
			d->op = OP_CALLX;
			return 0;
		}
		if (in->src_reg == BPF_PSEUDO_CALL) {
			d->op = OP_CALL_LOCAL;
			target = (int64_t)pc + 1 + in->imm;
		} else {
			d->op = OP_CALL;
			d->k = (uint32_t)in->imm;
			return in->src_reg == 0 ? 0 : -1;
		}
	} else {
		int i = jmp_index(op);
		if (i < 0)
			return -1;
		d->op = (uint8_t)(OP_JEQ64K + i * 4 + (is64 ? 0 : 2) + (BPF_SRC(in->code) == BPF_X));
		d->k = is64 ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm;
	}
	if (target < 0 || target >= cnt)
		return -1;
	d->off = (int32_t)target;
	return 0;
}

static int decode_mem(const struct bpf_insn *in, struct vm_dinsn *d)
{
	static const uint8_t ldx[4] = {OP_LDXW, OP_LDXH, OP_LDXB, OP_LDXDW};
	static const uint8_t ldxs[4] = {OP_LDXSW, OP_LDXSH, OP_LDXSB, OP_INVALID};
	static const uint8_t st[4] = {OP_STW, OP_STH, OP_STB, OP_STDW};
	static const uint8_t stx[4] = {OP_STXW, OP_STXH, OP_STXB, OP_STXDW};
	int sz = BPF_SIZE(in->code) >> 3; /* W=0, H=1, B=2, DW=3 */
	uint8_t cls = BPF_CLASS(in->code), mode = BPF_MODE(in->code);
	d->off = in->off;
	d->k = (uint64_t)(int64_t)in->imm;
	if (cls == BPF_LDX && mode == BPF_MEM)
		d->op = ldx[sz];
	else if (cls == BPF_LDX && mode == BPF_MEMSX)
		d->op = ldxs[sz];
	else if (cls == BPF_ST && mode == BPF_MEM)
		d->op = st[sz];
	else if (cls == BPF_STX && mode == BPF_MEM)
		d->op = stx[sz];
	else if (cls == BPF_STX && mode == BPF_ATOMIC && (sz == 0 || sz == 3)) {
		static const int32_t aops[] = {BPF_ADD, BPF_OR, BPF_AND, BPF_XOR,
					       BPF_ADD | BPF_FETCH, BPF_OR | BPF_FETCH,
					       BPF_AND | BPF_FETCH, BPF_XOR | BPF_FETCH,
					       BPF_XCHG, BPF_CMPXCHG};
		int i;
		for (i = 0; i < 10 && aops[i] != in->imm; i++)
			;
		if (i == 10)
			return -1;
		d->op = (uint8_t)((sz == 3 ? OP_AADD64 : OP_AADD32) + i);
	} else
		return -1;
	return d->op == OP_INVALID ? -1 : 0;
}

static int decode_one(const struct bpf_insn *in, uint32_t pc, uint32_t cnt, struct vm_exec *ex,
		      struct vm_dinsn *d)
{
	d->dst = in->dst_reg;
	d->src = in->src_reg;
	if (in->dst_reg > 10 || in->src_reg > 10)
		return -1;
	switch (BPF_CLASS(in->code)) {
	case BPF_ALU:
	case BPF_ALU64:
		return decode_alu(in, d);
	case BPF_JMP:
	case BPF_JMP32:
		return decode_jmp(in, pc, cnt, d);
	case BPF_LD:
		if (in->code != (BPF_LD | BPF_IMM | BPF_DW) || pc + 1 >= cnt)
			return -1;
		d->op = OP_LDDW;
		if (in->src_reg == BPF_PSEUDO_MAP_FD || in->src_reg == BPF_PSEUDO_MAP_VALUE) {
			if (!ex->rt || (uint32_t)in->imm >= ex->rt->map_cnt)
				return -1;
			struct vm_map *m = &ex->rt->maps[in->imm];
			d->k = in->src_reg == BPF_PSEUDO_MAP_FD
				       ? (uint64_t)(uintptr_t)m
				       : (uint64_t)(uintptr_t)(m->data + (uint32_t)in[1].imm);
			d->src = 0;
		} else if (in->src_reg == 0) {
			d->k = (uint32_t)in->imm | ((uint64_t)(uint32_t)in[1].imm << 32);
		} else
			return -1;
		return 0;
	default:
		return decode_mem(in, d);
	}
}

struct vm_exec *vm_exec_new(struct vm_runtime *rt, uint32_t prog, char *err, size_t errlen)
{
	if (!rt || prog >= rt->obj->prog_cnt) {
		vm_errf(err, errlen, "no program %u in this object", prog);
		return NULL;
	}
	const struct vm_prog *p = &rt->obj->progs[prog];
	struct vm_exec *ex = calloc(1, sizeof(*ex));
	if (!ex || !(ex->code = calloc(p->insn_cnt + 1, sizeof(*ex->code)))) {
		free(ex);
		vm_errf(err, errlen, "out of memory");
		return NULL;
	}
	ex->rt = rt;
	ex->prog = p;
	ex->cnt = p->insn_cnt;
	for (uint32_t i = 0; i < VM_MAX_HELPER_ID; i++)
		ex->helpers[i] = vm_host_helper(i);
	for (uint32_t pc = 0; pc < p->insn_cnt; pc++) {
		if (decode_one(&p->insns[pc], pc, p->insn_cnt, ex, &ex->code[pc]) < 0) {
			vm_errf(err, errlen, "instruction %u (opcode 0x%02x) is not valid", pc,
				p->insns[pc].code);
			vm_exec_free(ex);
			return NULL;
		}
		if (ex->code[pc].op == OP_LDDW)
			ex->code[++pc].op = OP_INVALID;
	}
	ex->code[p->insn_cnt].op = OP_INVALID; /* falling off the end */
	return ex;
}

void vm_exec_free(struct vm_exec *ex)
{
	if (!ex)
		return;
	free(ex->code);
	free(ex);
}

int vm_exec_set_helper(struct vm_exec *ex, uint32_t id, vm_helper_fn fn)
{
	if (!ex || id >= VM_MAX_HELPER_ID)
		return -1;
	ex->helpers[id] = fn;
	return 0;
}

void vm_exec_set_checked(struct vm_exec *ex, bool checked)
{
	ex->checked = checked;
}

void vm_exec_stop(void *env)
{
	((struct vm_env *)env)->stop = 1;
}

/* ---- running -------------------------------------------------------------------------------- */

struct vm_frame {
	uint32_t ret_pc;
	uint64_t saved[4]; /* r6..r9 */
	uint64_t fp;       /* r10 */
};

struct vm_run {
	struct vm_exec *ex;
	struct vm_env env;
	uint8_t *stack;          /* VM_MAX_CALL_DEPTH frames */
	struct vm_frame frames[VM_MAX_CALL_DEPTH];
	char *err;
	size_t errlen;
};

/* Checked mode: is [addr, addr+size) inside memory the program may touch? */
static bool region_ok(const struct vm_run *r, uint64_t addr, size_t size)
{
	uintptr_t a = (uintptr_t)addr, st = (uintptr_t)r->stack;
	if (a >= st && a + size <= st + VM_STACK_SIZE * VM_MAX_CALL_DEPTH && a + size >= a)
		return true;
	uintptr_t c = (uintptr_t)r->env.ctx;
	if (c && a >= c && a + size <= c + r->env.ctx_size && a + size >= a)
		return true;
	return r->env.rt && vm_maps_contain(r->env.rt, a, size);
}

/* Is [addr, addr+size) within a page of memory the program was given (and so, when not inside
 * it, one of its objects read past its bounds rather than an address it was told)? */
static bool region_near(const struct vm_run *r, uint64_t addr, size_t size)
{
	const uint64_t guard = 4096;
	uint64_t lo[2] = {(uintptr_t)r->stack, (uintptr_t)r->env.ctx};
	uint64_t hi[2] = {lo[0] + VM_STACK_SIZE * VM_MAX_CALL_DEPTH, lo[1] + r->env.ctx_size};
	for (int i = 0; i < 2; i++)
		if (lo[i] && addr + size + guard > lo[i] && addr < hi[i] + guard)
			return true;
	for (uint32_t i = 0; r->env.rt && i < r->env.rt->map_cnt; i++) {
		uint64_t d = (uintptr_t)r->env.rt->maps[i].data;
		if (d && addr + size + guard > d && addr < d + r->env.rt->maps[i].data_size + guard)
			return true;
	}
	return false;
}

/* The map a helper's r1 names, or NULL when it is none of the runtime's. */
static const struct vm_map *map_arg(const struct vm_run *r, uint64_t r1)
{
	for (uint32_t i = 0; r->env.rt && i < r->env.rt->map_cnt; i++)
		if ((uintptr_t)&r->env.rt->maps[i] == r1)
			return &r->env.rt->maps[i];
	return NULL;
}

/* Bytes helper argument i (0-based) of prototype h reads or writes through, or 0 (none). */
static uint64_t arg_bytes(const struct vm_run *r, const struct vm_helper_proto *h, int i,
			  const uint64_t *reg)
{
	const struct vm_map *m;
	switch (h->args[i]) {
	case VM_ARG_PTR_TO_MEM:
	case VM_ARG_PTR_TO_UNINIT_MEM:
		return reg[i + 2];
	case VM_ARG_PTR_TO_U64_OUT:
		return 8;
	case VM_ARG_PTR_TO_MAP_KEY:
	case VM_ARG_PTR_TO_MAP_VALUE:
		m = map_arg(r, reg[1]);
		return !m ? 0 : h->args[i] == VM_ARG_PTR_TO_MAP_KEY ? m->def.key_size : m->def.value_size;
	case VM_ARG_PTR_TO_READ_SRC:
		for (int j = i - 1; j >= 0; j--)
			if (h->args[j] == VM_ARG_CONST_SIZE || h->args[j] == VM_ARG_CONST_SIZE_OR_ZERO)
				return reg[j + 1];
		return 0;
	default:
		return 0;
	}
}

/* Checked mode: the memory a helper reads or writes through its arguments (its prototype says
 * which, and how many bytes) is memory the program may touch, as a load or store would be.  A
 * copy source may be any address; next to the program's memory it is taken as a pointer read
 * past its object.  Returns the bad argument (1-5), or 0. */
static int helper_args_ok(const struct vm_run *r, uint64_t id, const uint64_t *reg)
{
	const struct vm_helper_proto *h = vm_helper_proto((uint32_t)id);
	for (int i = 0; h && i < 5 && h->args[i] != VM_ARG_NONE; i++) {
		uint64_t n = arg_bytes(r, h, i, reg), p = reg[i + 1];
		if (!n)
			continue;
		if (h->args[i] == VM_ARG_PTR_TO_READ_SRC && !region_near(r, p, (size_t)n))
			continue;
		if (n > (1u << 30) || !region_ok(r, p, (size_t)n))
			return i + 1;
	}
	return 0;
}

static int fault(struct vm_run *r, uint32_t pc, const char *what, uint64_t addr)
{
	vm_errf(r->err, r->errlen, "instruction %u: %s (address 0x%llx)", pc, what,
		(unsigned long long)addr);
	return -1;
}

#define VM_BODY_NAME run_fast
#define VM_CHECKED 0
#include "vm/interp_body.h"
#undef VM_BODY_NAME
#undef VM_CHECKED
#define VM_BODY_NAME run_checked
#define VM_CHECKED 1
#include "vm/interp_body.h"

int vm_exec_run(struct vm_exec *ex, void *ctx, size_t ctx_size, uint64_t *ret, char *err,
		size_t errlen)
{
	uint8_t stack[VM_STACK_SIZE * VM_MAX_CALL_DEPTH] __attribute__((aligned(16)));
	struct vm_run r = {.ex = ex, .stack = stack, .err = err, .errlen = errlen};
	r.env.rt = ex->rt;
	r.env.ctx = ctx;
	r.env.ctx_size = ctx_size;
	if (ex->checked)
		memset(stack, 0, sizeof(stack));
	return ex->checked ? run_checked(&r, ret) : run_fast(&r, ret);
}
