/* The disassembler: llvm-objdump's eBPF syntax ("r0 = *(u32 *)(r1 + 48)"), with helper and map
 * names where the object provides them.  Used by `cubpf disasm` and by the verifier's log. */
#include <string.h>

#include "vm/internal.h"

/* llvm-objdump writes offsets as "r1 + 8" / "r10 - 8". */
#define SIGN(o) ((o) < 0 ? '-' : '+')
#define MAG(o) ((o) < 0 ? -(int)(o) : (int)(o))

static const char *alu_sym(uint8_t op, int16_t off)
{
	switch (op) {
	case BPF_ADD: return "+=";
	case BPF_SUB: return "-=";
	case BPF_MUL: return "*=";
	case BPF_DIV: return off ? "s/=" : "/=";
	case BPF_OR: return "|=";
	case BPF_AND: return "&=";
	case BPF_LSH: return "<<=";
	case BPF_RSH: return ">>=";
	case BPF_MOD: return off ? "s%=" : "%=";
	case BPF_XOR: return "^=";
	case BPF_MOV: return "=";
	case BPF_ARSH: return "s>>=";
	}
	return NULL;
}

static const char *jmp_sym(uint8_t op)
{
	switch (op) {
	case BPF_JEQ: return "==";
	case BPF_JGT: return ">";
	case BPF_JGE: return ">=";
	case BPF_JSET: return "&";
	case BPF_JNE: return "!=";
	case BPF_JSGT: return "s>";
	case BPF_JSGE: return "s>=";
	case BPF_JLT: return "<";
	case BPF_JLE: return "<=";
	case BPF_JSLT: return "s<";
	case BPF_JSLE: return "s<=";
	}
	return NULL;
}

static const char *size_name(uint8_t code, bool sx)
{
	static const char *const u[] = {"u32", "u16", "u8", "u64"};
	static const char *const s[] = {"s32", "s16", "s8", "s64"};
	return (sx ? s : u)[BPF_SIZE(code) >> 3];
}

static void fmt_alu(const struct bpf_insn *in, char *buf, size_t len)
{
	char r = BPF_CLASS(in->code) == BPF_ALU64 ? 'r' : 'w';
	uint8_t op = BPF_OP(in->code);
	if (op == BPF_NEG) {
		snprintf(buf, len, "%c%d = -%c%d", r, in->dst_reg, r, in->dst_reg);
		return;
	}
	if (op == BPF_END) {
		const char *kind = r == 'r' ? "bswap" : BPF_SRC(in->code) == BPF_X ? "be" : "le";
		snprintf(buf, len, "r%d = %s%d r%d", in->dst_reg, kind, in->imm, in->dst_reg);
		return;
	}
	const char *sym = alu_sym(op, in->off);
	if (!sym) {
		snprintf(buf, len, "invalid alu opcode 0x%02x", in->code);
		return;
	}
	if (op == BPF_MOV && in->off && BPF_SRC(in->code) == BPF_X)
		snprintf(buf, len, "%c%d = (s%d)%c%d", r, in->dst_reg, in->off, r, in->src_reg);
	else if (BPF_SRC(in->code) == BPF_X)
		snprintf(buf, len, "%c%d %s %c%d", r, in->dst_reg, sym, r, in->src_reg);
	else
		snprintf(buf, len, "%c%d %s %d", r, in->dst_reg, sym, in->imm);
}

static void fmt_call(const struct bpf_insn *in, size_t pc, char *buf, size_t len)
{
	if (BPF_SRC(in->code) == BPF_X)
		snprintf(buf, len, "callx r%d", in->dst_reg);
	else if (in->src_reg == BPF_PSEUDO_CALL)
		snprintf(buf, len, "call pc%+d <%zd>", in->imm, (ssize_t)pc + 1 + in->imm);
	else {
		const struct vm_helper_proto *p = vm_helper_proto((uint32_t)in->imm);
		if (p)
			snprintf(buf, len, "call %s#%d", p->name, in->imm);
		else
			snprintf(buf, len, "call %d", in->imm);
	}
}

static void fmt_jmp(const struct bpf_insn *in, size_t pc, char *buf, size_t len)
{
	char r = BPF_CLASS(in->code) == BPF_JMP ? 'r' : 'w';
	uint8_t op = BPF_OP(in->code);
	if (op == BPF_EXIT) {
		snprintf(buf, len, "exit");
		return;
	}
	if (op == BPF_CALL) {
		fmt_call(in, pc, buf, len);
		return;
	}
	if (op == BPF_JA) {
		int32_t off = r == 'r' ? in->off : in->imm;
		snprintf(buf, len, "goto %+d <%zd>", off, (ssize_t)pc + 1 + off);
		return;
	}
	const char *sym = jmp_sym(op);
	if (!sym)
		snprintf(buf, len, "invalid jump opcode 0x%02x", in->code);
	else if (BPF_SRC(in->code) == BPF_X)
		snprintf(buf, len, "if %c%d %s %c%d goto %+d <%zd>", r, in->dst_reg, sym, r,
			 in->src_reg, in->off, (ssize_t)pc + 1 + in->off);
	else
		snprintf(buf, len, "if %c%d %s %d goto %+d <%zd>", r, in->dst_reg, sym, in->imm,
			 in->off, (ssize_t)pc + 1 + in->off);
}

static const char *atomic_name(int32_t imm)
{
	switch (imm & ~BPF_FETCH) {
	case BPF_ADD: return "add";
	case BPF_OR: return "or";
	case BPF_AND: return "and";
	case BPF_XOR: return "xor";
	}
	return NULL;
}

static void fmt_atomic(const struct bpf_insn *in, char *buf, size_t len)
{
	const char *sz = size_name(in->code, false);
	int bits = BPF_SIZE(in->code) == BPF_DW ? 64 : 32;
	char r = bits == 64 ? 'r' : 'w';
	const char *name = atomic_name(in->imm);
	if (in->imm == BPF_XCHG)
		snprintf(buf, len, "%c%d = xchg_%d(r%d %c %d, %c%d)", r, in->src_reg, bits, in->dst_reg,
			 SIGN(in->off), MAG(in->off), r, in->src_reg);
	else if (in->imm == BPF_CMPXCHG)
		snprintf(buf, len, "%c0 = cmpxchg_%d(r%d %c %d, %c0, %c%d)", r, bits, in->dst_reg,
			 SIGN(in->off), MAG(in->off), r, r, in->src_reg);
	else if (name && (in->imm & BPF_FETCH))
		snprintf(buf, len, "%c%d = atomic_fetch_%s((%s *)(r%d %c %d), %c%d)", r, in->src_reg,
			 name, sz, in->dst_reg, SIGN(in->off), MAG(in->off), r, in->src_reg);
	else if (name)
		snprintf(buf, len, "lock *(%s *)(r%d %c %d) %s= %c%d", sz, in->dst_reg, SIGN(in->off), MAG(in->off),
			 !strcmp(name, "add") ? "+" : !strcmp(name, "or") ? "|" :
			 !strcmp(name, "and") ? "&" : "^", r, in->src_reg);
	else
		snprintf(buf, len, "invalid atomic operation 0x%x", in->imm);
}

static void fmt_mem(const struct bpf_insn *in, char *buf, size_t len)
{
	uint8_t cls = BPF_CLASS(in->code), mode = BPF_MODE(in->code);
	if (cls == BPF_LDX && (mode == BPF_MEM || mode == BPF_MEMSX))
		snprintf(buf, len, "r%d = *(%s *)(r%d %c %d)", in->dst_reg,
			 size_name(in->code, mode == BPF_MEMSX), in->src_reg, SIGN(in->off), MAG(in->off));
	else if (cls == BPF_ST && mode == BPF_MEM)
		snprintf(buf, len, "*(%s *)(r%d %c %d) = %d", size_name(in->code, false), in->dst_reg,
			 SIGN(in->off), MAG(in->off), in->imm);
	else if (cls == BPF_STX && mode == BPF_MEM)
		snprintf(buf, len, "*(%s *)(r%d %c %d) = r%d", size_name(in->code, false), in->dst_reg,
			 SIGN(in->off), MAG(in->off), in->src_reg);
	else if (cls == BPF_STX && mode == BPF_ATOMIC)
		fmt_atomic(in, buf, len);
	else
		snprintf(buf, len, "invalid memory opcode 0x%02x", in->code);
}

static int fmt_lddw(const struct bpf_insn *in, size_t avail, const struct vm_object *obj,
		    char *buf, size_t len)
{
	if (avail < 2) {
		snprintf(buf, len, "lddw r%d (truncated)", in->dst_reg);
		return 1;
	}
	const char *map = obj && (uint32_t)in->imm < obj->map_cnt ? obj->maps[in->imm].name : NULL;
	if (in->src_reg == BPF_PSEUDO_MAP_FD) {
		if (map)
			snprintf(buf, len, "r%d = map[%s] ll", in->dst_reg, map);
		else
			snprintf(buf, len, "r%d = map[#%d] ll", in->dst_reg, in->imm);
	} else if (in->src_reg == BPF_PSEUDO_MAP_VALUE) {
		if (map)
			snprintf(buf, len, "r%d = map_value[%s]+%d ll", in->dst_reg, map, in[1].imm);
		else
			snprintf(buf, len, "r%d = map_value[#%d]+%d ll", in->dst_reg, in->imm, in[1].imm);
	} else {
		uint64_t v = (uint32_t)in->imm | ((uint64_t)(uint32_t)in[1].imm << 32);
		snprintf(buf, len, "r%d = 0x%llx ll", in->dst_reg, (unsigned long long)v);
	}
	return 2;
}

int vm_disasm_insn(const struct bpf_insn *insns, size_t avail, const struct vm_object *obj,
		   char *buf, size_t len)
{
	return vm_disasm_insn_at(insns, avail, 0, obj, buf, len);
}

int vm_disasm_insn_at(const struct bpf_insn *insns, size_t avail, size_t pc,
		      const struct vm_object *obj, char *buf, size_t len)
{
	const struct bpf_insn *in = insns;
	if (!avail) {
		snprintf(buf, len, "(none)");
		return 1;
	}
	switch (BPF_CLASS(in->code)) {
	case BPF_ALU:
	case BPF_ALU64:
		fmt_alu(in, buf, len);
		return 1;
	case BPF_JMP:
	case BPF_JMP32:
		fmt_jmp(in, pc, buf, len);
		return 1;
	case BPF_LD:
		if (in->code == (BPF_LD | BPF_IMM | BPF_DW))
			return fmt_lddw(in, avail, obj, buf, len);
		snprintf(buf, len, "invalid ld opcode 0x%02x", in->code);
		return 1;
	default:
		fmt_mem(in, buf, len);
		return 1;
	}
}
