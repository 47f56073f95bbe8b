/* The verifier's structural pass: every instruction is a valid encoding, jumps stay inside their
 * function and never land in the middle of an lddw, calls go to function starts, no function
 * falls off its end, and every instruction is reachable. */
#include <stdlib.h>
#include <string.h>

#include "vm/verifier.h"

#define REJ(...) vm_reject(v, pc, __VA_ARGS__)

static int check_alu_enc(struct verifier *v, uint32_t pc, const struct bpf_insn *in)
{
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64;
	uint8_t op = BPF_OP(in->code);
	bool k = BPF_SRC(in->code) == BPF_K;
	if (op > BPF_END)
		return REJ("invalid ALU opcode 0x%02x", in->code);
	if (op == BPF_END) {
		if (in->imm != 16 && in->imm != 32 && in->imm != 64)
			return REJ("invalid byte swap width %d", in->imm);
		if ((is64 && !k) || in->src_reg || in->off)
			return REJ("invalid byte swap encoding 0x%02x", in->code);
		return 0;
	}
	if (k && in->src_reg)
		return REJ("BPF_ALU uses reserved fields (src_reg %d with an immediate)", in->src_reg);
	if (op == BPF_NEG && (!k || in->imm))
		return REJ("invalid BPF_NEG encoding");
	bool sdiv = (op == BPF_DIV || op == BPF_MOD) && in->off == 1;
	bool movsx = op == BPF_MOV && !k &&
		     (in->off == 8 || in->off == 16 || (in->off == 32 && is64));
	if (in->off && !sdiv && !movsx)
		return REJ("BPF_ALU uses reserved fields (off %d)", in->off);
	if (!k && in->imm)
		return REJ("BPF_ALU uses reserved fields (imm %d with a register)", in->imm);
	if ((op == BPF_DIV || op == BPF_MOD) && k && in->imm == 0)
		return REJ("division by zero");
	if ((op == BPF_LSH || op == BPF_RSH || op == BPF_ARSH) && k &&
	    (in->imm < 0 || in->imm >= (is64 ? 64 : 32)))
		return REJ("invalid shift %d", in->imm);
	return 0;
}

static int check_jmp_enc(struct verifier *v, uint32_t pc, const struct bpf_insn *in)
{
	uint8_t op = BPF_OP(in->code);
	bool j32 = BPF_CLASS(in->code) == BPF_JMP32;
	if (op == BPF_CALL || op == BPF_EXIT) {
		if (j32)
			return REJ("invalid JMP32 opcode 0x%02x", in->code);
		if (op == BPF_EXIT && (in->src_reg || in->dst_reg || in->off || in->imm ||
				       BPF_SRC(in->code) != BPF_K))
			return REJ("BPF_EXIT uses reserved fields");
		if (op == BPF_CALL && BPF_SRC(in->code) == BPF_X)
			return REJ("callx (indirect call through a register) is not supported");
		if (op == BPF_CALL && in->src_reg != 0 && in->src_reg != BPF_PSEUDO_CALL)
			return REJ("unsupported call kind src_reg=%d (kfuncs are not supported)",
				   in->src_reg);
		return 0;
	}
	if (op == BPF_JCOND || op > BPF_JSLE)
		return REJ("invalid jump opcode 0x%02x", in->code);
	if (op == BPF_JA && (in->src_reg || in->dst_reg || BPF_SRC(in->code) != BPF_K ||
			     (!j32 && in->imm) || (j32 && in->off)))
		return REJ("BPF_JA uses reserved fields");
	if (op != BPF_JA && BPF_SRC(in->code) == BPF_K && in->src_reg)
		return REJ("BPF_JMP uses reserved fields (src_reg with an immediate)");
	return 0;
}

static int check_lddw_enc(struct verifier *v, uint32_t pc, const struct bpf_insn *in, uint32_t n)
{
	const struct vm_object *obj = v->obj;
	if (in->code != (BPF_LD | BPF_IMM | BPF_DW))
		return REJ("BPF_LD_[ABS|IND] and other legacy loads are not supported");
	if (pc + 1 >= n || in[1].code || in[1].dst_reg || in[1].src_reg || in[1].off || in->off)
		return REJ("invalid lddw: its second half is missing or malformed");
	if (in->src_reg == 0)
		return 0;
	if (in->src_reg != BPF_PSEUDO_MAP_FD && in->src_reg != BPF_PSEUDO_MAP_VALUE)
		return REJ("unsupported lddw kind src_reg=%d", in->src_reg);
	if ((uint32_t)in->imm >= obj->map_cnt)
		return REJ("lddw refers to map %d but the object has %u maps", in->imm, obj->map_cnt);
	const struct vm_map_def *m = &obj->maps[in->imm];
	bool ring = m->type == CUBPF_MAP_RINGBUF || m->type == CUBPF_MAP_GPU_RINGBUF;
	if (in->src_reg == BPF_PSEUDO_MAP_VALUE && ring)
		return REJ("direct value access to ring buffer '%s' is not allowed", m->name);
	if (in->src_reg == BPF_PSEUDO_MAP_VALUE && (uint32_t)in[1].imm >= m->value_size)
		return REJ("lddw offset %d is past the end of map '%s' (value size %u)", in[1].imm,
			   m->name, m->value_size);
	return 0;
}

static int check_mem_enc(struct verifier *v, uint32_t pc, const struct bpf_insn *in)
{
	uint8_t cls = BPF_CLASS(in->code), mode = BPF_MODE(in->code);
	if (cls == BPF_LDX) {
		if ((mode != BPF_MEM && mode != BPF_MEMSX) || in->imm)
			return REJ("invalid BPF_LDX encoding 0x%02x", in->code);
		if (mode == BPF_MEMSX && BPF_SIZE(in->code) == BPF_DW)
			return REJ("invalid sign-extending load of 8 bytes");
		return 0;
	}
	if (cls == BPF_ST) {
		if (mode != BPF_MEM || in->src_reg)
			return REJ("invalid BPF_ST encoding 0x%02x", in->code);
		return 0;
	}
	if (mode == BPF_ATOMIC) {
		if (BPF_SIZE(in->code) != BPF_W && BPF_SIZE(in->code) != BPF_DW)
			return REJ("invalid atomic operand size");
		return 0;
	}
	if (mode != BPF_MEM || in->imm)
		return REJ("invalid BPF_STX encoding 0x%02x", in->code);
	return 0;
}

static int check_encoding(struct verifier *v, uint32_t pc, uint32_t n)
{
	const struct bpf_insn *in = &v->prog->insns[pc];
	if (in->dst_reg > 10 || in->src_reg > 10)
		return REJ("invalid register R%d", in->dst_reg > 10 ? in->dst_reg : in->src_reg);
	switch (BPF_CLASS(in->code)) {
	case BPF_ALU:
	case BPF_ALU64:
		return check_alu_enc(v, pc, in);
	case BPF_JMP:
	case BPF_JMP32:
		return check_jmp_enc(v, pc, in);
	case BPF_LD:
		return check_lddw_enc(v, pc, in, n);
	default:
		return check_mem_enc(v, pc, in);
	}
}

/* Index of the function containing pc. */
static uint32_t func_of(const struct vm_prog *p, uint32_t pc)
{
	uint32_t f = 0;
	for (uint32_t i = 0; i < p->subprog_cnt; i++)
		if (p->subprogs[i] <= pc)
			f = i;
	return f;
}

static uint32_t func_end(const struct vm_prog *p, uint32_t f)
{
	return f + 1 < p->subprog_cnt ? p->subprogs[f + 1] : p->insn_cnt;
}

static bool is_func_start(const struct vm_prog *p, uint32_t pc)
{
	for (uint32_t i = 0; i < p->subprog_cnt; i++)
		if (p->subprogs[i] == pc)
			return true;
	return false;
}

static int check_subprogs(struct verifier *v)
{
	const struct vm_prog *p = v->prog;
	uint32_t pc = 0;
	if (!p->subprog_cnt || p->subprogs[0] != 0)
		return REJ("the program's function table does not start at instruction 0");
	for (uint32_t i = 1; i < p->subprog_cnt; i++)
		if (p->subprogs[i] <= p->subprogs[i - 1] || p->subprogs[i] >= p->insn_cnt)
			return vm_reject(v, 0, "function table entry %u (%u) is out of order or range", i,
					p->subprogs[i]);
	return 0;
}

/* Jump and call targets; marks where states are kept. */
static int check_targets(struct verifier *v, const uint8_t *half, uint8_t *prune)
{
	const struct vm_prog *p = v->prog;
	for (uint32_t pc = 0; pc < p->insn_cnt; pc++) {
		const struct bpf_insn *in = &p->insns[pc];
		uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
		if (half[pc] || (cls != BPF_JMP && cls != BPF_JMP32) || op == BPF_EXIT)
			continue;
		bool call = op == BPF_CALL;
		if (call && in->src_reg != BPF_PSEUDO_CALL)
			continue;
		int64_t off = call ? in->imm : (cls == BPF_JMP32 && op == BPF_JA) ? in->imm : in->off;
		int64_t t = (int64_t)pc + 1 + off;
		if (t < 0 || t >= p->insn_cnt)
			return REJ("jump out of range from insn %u to %lld", pc, (long long)t);
		if (half[t])
			return REJ("jump into the middle of lddw at insn %lld", (long long)t);
		if (call && !is_func_start(p, (uint32_t)t))
			return REJ("call to insn %lld which is not the start of a function", (long long)t);
		if (!call && func_of(p, (uint32_t)t) != func_of(p, pc))
			return REJ("jump from insn %u to %lld leaves its function", pc, (long long)t);
		prune[t] = 1;
		if (!(op == BPF_JA))
			prune[pc + 1 < p->insn_cnt ? pc + 1 : pc] = 1;
	}
	return 0;
}

static int check_ends(struct verifier *v, const uint8_t *half)
{
	const struct vm_prog *p = v->prog;
	for (uint32_t f = 0; f < p->subprog_cnt; f++) {
		uint32_t pc = func_end(p, f) - 1;
		const struct bpf_insn *in = &p->insns[pc];
		bool ok = !half[pc] && (in->code == (BPF_JMP | BPF_EXIT) ||
					in->code == (BPF_JMP | BPF_JA) || in->code == (BPF_JMP32 | BPF_JA));
		if (!ok)
			return REJ("last insn of function %u is not an exit or jmp: execution would "
				   "fall off its end", f);
	}
	return 0;
}

static int check_reachable(struct verifier *v, const uint8_t *half)
{
	const struct vm_prog *p = v->prog;
	uint32_t n = p->insn_cnt, sp = 0;
	uint8_t *seen = calloc(n, 1);
	uint32_t *stack = malloc(sizeof(uint32_t) * (n * 2 + 1));
	int rc = 0;
	if (!seen || !stack) {
		free(seen);
		free(stack);
		return vm_reject(v, 0, "out of memory"), -1;
	}
	stack[sp++] = 0;
	seen[0] = 1;
	while (sp) {
		uint32_t pc = stack[--sp], next[2], nn = 0;
		const struct bpf_insn *in = &p->insns[pc];
		uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
		if (cls == BPF_LD)
			next[nn++] = pc + 2;
		else if (cls != BPF_JMP && cls != BPF_JMP32)
			next[nn++] = pc + 1;
		else if (op == BPF_EXIT)
			;
		else if (op == BPF_CALL) {
			next[nn++] = pc + 1;
			if (in->src_reg == BPF_PSEUDO_CALL)
				next[nn++] = (uint32_t)((int64_t)pc + 1 + in->imm);
		} else if (op == BPF_JA)
			next[nn++] = (uint32_t)((int64_t)pc + 1 + (cls == BPF_JMP ? in->off : in->imm));
		else {
			next[nn++] = pc + 1;
			next[nn++] = (uint32_t)((int64_t)pc + 1 + in->off);
		}
		for (uint32_t i = 0; i < nn; i++)
			if (next[i] < n && !seen[next[i]]) {
				seen[next[i]] = 1;
				stack[sp++] = next[i];
			}
	}
	for (uint32_t pc = 0; pc < n && rc == 0; pc++)
		if (!seen[pc] && !half[pc])
			rc = REJ("unreachable insn %u", pc);
	free(seen);
	free(stack);
	return rc ? -1 : 0;
}

int vm_cfg_check(struct verifier *v, uint8_t *prune)
{
	const struct vm_prog *p = v->prog;
	uint32_t n = p->insn_cnt, pc = 0;
	if (n == 0)
		return REJ("empty program"), -1;
	if (n > v->max_insns)
		return REJ("program of %u instructions is too large (limit %u)", n, v->max_insns), -1;
	if (check_subprogs(v) < 0)
		return -1;
	uint8_t *half = calloc(n + 1, 1);
	if (!half)
		return REJ("out of memory"), -1;
	int rc = 0;
	for (pc = 0; pc < n && rc == 0; pc++) {
		if (half[pc])
			continue;
		if (check_encoding(v, pc, n) != 0)
			rc = -1;
		else if (BPF_CLASS(p->insns[pc].code) == BPF_LD)
			half[pc + 1] = 1;
	}
	if (rc == 0)
		rc = check_targets(v, half, prune) || check_ends(v, half) || check_reachable(v, half)
			     ? -1 : 0;
	for (uint32_t i = 1; i < p->subprog_cnt; i++)
		prune[p->subprogs[i]] = 1;
	free(half);
	return rc;
}

/* ---- liveness ---------------------------------------------------------------------------------- */

#define R(n) (1u << (n))
#define ARGS (R(1) | R(2) | R(3) | R(4) | R(5))

static void use_def(const struct bpf_insn *in, uint16_t *use, uint16_t *def)
{
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	bool x = BPF_SRC(in->code) == BPF_X;
	*use = *def = 0;
	switch (cls) {
	case BPF_ALU:
	case BPF_ALU64:
		*def = R(in->dst_reg);
		*use = (op == BPF_MOV ? 0 : R(in->dst_reg)) |
		       (x && op != BPF_END && op != BPF_NEG ? R(in->src_reg) : 0);
		break;
	case BPF_LD:
		*def = R(in->dst_reg);
		break;
	case BPF_LDX:
		*use = R(in->src_reg);
		*def = R(in->dst_reg);
		break;
	case BPF_ST:
		*use = R(in->dst_reg);
		break;
	case BPF_STX:
		*use = R(in->dst_reg) | R(in->src_reg);
		if (BPF_MODE(in->code) == BPF_ATOMIC && in->imm == BPF_CMPXCHG)
			*use |= R(0), *def = R(0);
		else if (BPF_MODE(in->code) == BPF_ATOMIC && (in->imm & BPF_FETCH))
			*def = R(in->src_reg);
		break;
	default: /* jumps */
		if (op == BPF_CALL)
			*use = ARGS, *def = R(0) | ARGS;
		else if (op == BPF_EXIT)
			*use = R(0);
		else if (op != BPF_JA)
			*use = R(in->dst_reg) | (x ? R(in->src_reg) : 0);
	}
}

uint16_t vm_insn_uses(const struct bpf_insn *in)
{
	uint16_t use, def;
	use_def(in, &use, &def);
	return use;
}

uint32_t vm_insn_successors(const struct bpf_insn *in, uint32_t pc, uint32_t next[2])
{
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	if (cls == BPF_LD)
		return next[0] = pc + 2, 1;
	if (cls != BPF_JMP && cls != BPF_JMP32)
		return next[0] = pc + 1, 1;
	if (op == BPF_EXIT)
		return 0;
	if (op == BPF_CALL)
		return next[0] = pc + 1, 1;
	if (op == BPF_JA)
		return next[0] = (uint32_t)((int64_t)pc + 1 + (cls == BPF_JMP ? in->off : in->imm)), 1;
	next[0] = pc + 1;
	next[1] = (uint32_t)((int64_t)pc + 1 + in->off);
	return 2;
}

int vm_liveness(struct verifier *v)
{
	const struct vm_prog *p = v->prog;
	uint32_t n = p->insn_cnt;
	v->live = calloc(n + 2, sizeof(uint16_t));
	if (!v->live)
		return -1;
	for (bool changed = true; changed;) {
		changed = false;
		for (uint32_t i = n; i-- > 0;) {
			const struct bpf_insn *in = &p->insns[i];
			if (i > 0 && p->insns[i - 1].code == (BPF_LD | BPF_IMM | BPF_DW) &&
			    (i < 2 || p->insns[i - 2].code != (BPF_LD | BPF_IMM | BPF_DW)))
				continue; /* second half of an lddw */
			uint32_t next[2], nn = vm_insn_successors(in, i, next);
			uint16_t out = 0, use, def;
			for (uint32_t k = 0; k < nn; k++)
				if (next[k] < n)
					out |= v->live[next[k]];
			use_def(in, &use, &def);
			uint16_t live = (uint16_t)(use | (out & ~def) | R(10));
			if (live != v->live[i])
				v->live[i] = live, changed = true;
		}
	}
	return 0;
}
