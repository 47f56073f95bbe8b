/* GPU programs: the context pointer as the PTX code generator's analysis sees it.  The code
 * generator keeps no register for the context: it follows `ctx + constant` through moves and
 * additions, joining every path of the control flow graph, including branches the verifier
 * proved never taken (its analysis knows constants, not ranges).  A register that is the context
 * on one incoming edge and anything else (or another offset) on another is, after the join,
 * neither, and the generator refuses to read it.  The verifier's walk sees only feasible paths
 * (verifier.c's check_ctx_uses); this pass follows every edge, as the generator does, so that a
 * program `cubpf verify` accepts is one `cubpf ptx` compiles.  Code on no walked path (behind a
 * branch the walk proved never taken) had none of the walk's rules (stack bounds, record
 * sizes, the context's uses) applied to it: it is marked for vm_prog_drop_dead, which makes
 * each such instruction an `exit`, so this pass takes it as leading nowhere; a caller that
 * cannot drop it (no opts.dead) gets it refused. */
#include <stdlib.h>
#include <string.h>

#include "vm/verifier.h"

/* unreached, anything, ctx + off, the context mixed with another value, a known constant */
enum { G_NONE = 0, G_OTHER, G_CTX, G_MIXED, G_CONST };

struct greg {
	uint8_t tag;
	int64_t off;  /* G_CTX: the offset; G_CONST: the value */
};

struct gstate {
	bool reached;
	struct greg r[11];
};

static struct greg g_join(struct greg a, struct greg b)
{
	if (a.tag == G_NONE)
		return b;
	if (b.tag == G_NONE || (a.tag == b.tag && (a.tag == G_OTHER || a.off == b.off)))
		return a;
	if (a.tag != G_CTX && a.tag != G_MIXED && b.tag != G_CTX && b.tag != G_MIXED)
		return (struct greg){G_OTHER, 0}; /* two constants, or a constant and anything */
	return (struct greg){G_MIXED, 0};
}

/* Merges `in` into st[pc]; true when it changed. */
static bool g_merge(struct gstate *st, uint32_t pc, const struct gstate *in)
{
	bool changed = !st[pc].reached;
	st[pc].reached = true;
	for (int r = 0; r < 11; r++) {
		struct greg j = g_join(st[pc].r[r], in->r[r]);
		changed |= j.tag != st[pc].r[r].tag || j.off != st[pc].r[r].off;
		st[pc].r[r] = j;
	}
	return changed;
}

/* The constant an ALU instruction computes from known inputs (the generator folds them too:
 * ptx_cg_alu_known); false when an input is unknown or the operation is not folded here. */
static bool g_const(const struct bpf_insn *in, const struct gstate *s, uint64_t *v)
{
	uint8_t op = BPF_OP(in->code);
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64, k = BPF_SRC(in->code) == BPF_K;
	const struct greg *d = &s->r[in->dst_reg], *src = &s->r[in->src_reg];
	if (op == BPF_END || op == BPF_NEG || (op == BPF_MOV && in->off))
		return false;
	if ((op != BPF_MOV && d->tag != G_CONST) || (!k && src->tag != G_CONST))
		return false;
	uint64_t b = k ? (is64 ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm) : (uint64_t)src->off;
	*v = vm_range_eval(op, in->off, is64, (uint64_t)d->off, b);
	return true;
}

/* The effect of the instruction at pc on the registers (the generator's alu_effect, step). */
static void g_step(const struct bpf_insn *in, struct gstate *s)
{
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	struct greg *d = &s->r[in->dst_reg], other = {G_OTHER, 0};
	uint64_t c;
	if ((cls == BPF_ALU || cls == BPF_ALU64) && g_const(in, s, &c))
		*d = (struct greg){G_CONST, (int64_t)c};
	else if (cls == BPF_LD && in->src_reg == 0)
		*d = (struct greg){G_CONST, (int64_t)((uint32_t)in[0].imm |
						      ((uint64_t)(uint32_t)in[1].imm << 32))};
	else if (cls == BPF_ALU64 && op == BPF_MOV && BPF_SRC(in->code) == BPF_X && in->off == 0)
		*d = s->r[in->src_reg];
	else if (cls == BPF_ALU64 && (op == BPF_ADD || op == BPF_SUB) && BPF_SRC(in->code) == BPF_K &&
		 d->tag == G_CTX)
		d->off += op == BPF_ADD ? in->imm : -(int64_t)in->imm;
	else if (cls == BPF_ALU || cls == BPF_ALU64)
		*d = op != BPF_MOV && (d->tag == G_CTX || d->tag == G_MIXED) ? (struct greg){G_MIXED, 0}
									 : other;
	else if (cls == BPF_LDX || cls == BPF_LD)
		*d = other;
	else if (cls == BPF_STX && BPF_MODE(in->code) == BPF_ATOMIC && in->imm == BPF_CMPXCHG)
		s->r[0] = other;
	else if (cls == BPF_STX && BPF_MODE(in->code) == BPF_ATOMIC && (in->imm & BPF_FETCH))
		s->r[in->src_reg] = other;
	else if (cls == BPF_JMP && op == BPF_CALL)
		for (int r = 0; r <= 5; r++)
			s->r[r] = other;
}

/* The state a bpf-to-bpf callee starts with: its arguments, a new frame. */
static void g_callee(const struct gstate *caller, struct gstate *c)
{
	*c = *caller;
	c->r[0] = (struct greg){G_OTHER, 0};
	for (int r = 6; r <= 10; r++)
		c->r[r] = (struct greg){G_OTHER, 0};
}

static int g_check_reads(struct verifier *v, uint32_t pc, const struct gstate *s)
{
	uint16_t m = vm_value_reads(v, pc) | vm_insn_uses(&v->prog->insns[pc]);
	const struct bpf_insn *in = &v->prog->insns[pc];
	if (BPF_CLASS(in->code) == BPF_ALU64 && BPF_OP(in->code) == BPF_MOV &&
	    BPF_SRC(in->code) == BPF_X && in->off == 0)
		return 0; /* a copy: the generator passes the joined value on */
	if (BPF_CLASS(in->code) == BPF_JMP && (BPF_OP(in->code) == BPF_EXIT ||
					       BPF_OP(in->code) == BPF_CALL))
		m = vm_value_reads(v, pc);
	for (int r = 0; r < 10; r++)
		if ((m >> r & 1) && s->r[r].tag == G_MIXED) {
			vm_reject(v, pc, "R%d is the context pointer on a path the code generator "
				  "joins here with another value or offset (a branch this verifier "
				  "proved never taken counts for it): %s programs must keep the "
				  "context in a register of its own", r,
				  vm_prog_kind_name(v->prog->kind));
			return -1;
		}
	return 0;
}

/* Successors of pc; a conditional jump on constants goes one way (the generator folds it:
 * ptx_cg_cond_known). */
/* A bpf_ringbuf_output record's size: a constant to the generator, not just to the walk's
 * ranges (r3 = x & 15 after x was narrowed to one value). */
static int g_check_call(struct verifier *v, uint32_t pc, const struct gstate *s)
{
	const struct bpf_insn *in = &v->prog->insns[pc];
	const struct greg *r3 = &s->r[3];
	if (in->code != (BPF_JMP | BPF_CALL) || in->src_reg != 0 ||
	    in->imm != CUBPF_FN_ringbuf_output)
		return 0;
	if (r3->tag == G_CONST && r3->off >= 1 && r3->off <= CUBPF_RB_MAX_RECORD)
		return 0;
	vm_reject(v, pc, "R3 the record size of bpf_ringbuf_output must be a constant the code "
		  "generator sees (an immediate, or computed from immediates) in %s programs",
		  vm_prog_kind_name(v->prog->kind));
	return -1;
}

static uint32_t g_succ(const struct bpf_insn *in, const struct gstate *s, uint32_t pc,
		       uint32_t next[2])
{
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	const struct greg *a = &s->r[in->dst_reg], *b = &s->r[in->src_reg];
	bool k = BPF_SRC(in->code) == BPF_K;
	uint32_t n = vm_insn_successors(in, pc, next);
	if (n != 2)
		return n;
	/* a conditional jump: the generator folds one whose operands it knows */
	if (op > BPF_JSLE || a->tag != G_CONST || (!k && b->tag != G_CONST))
		return 2;
	uint64_t y = k ? (cls == BPF_JMP ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm)
		       : (uint64_t)b->off;
	if (vm_jmp_taken(op, (uint64_t)a->off, y, cls == BPF_JMP))
		next[0] = next[1];
	return 1;
}

/* Every instruction no walked path reaches, both slots of a 64-bit immediate load (the second
 * slot of a walked one is not an instruction of its own), and every conditional jump the walk
 * saw go one way only. */
static void g_mark_dead(struct verifier *v)
{
	const struct bpf_insn *in = v->prog->insns;
	uint32_t n = v->prog->insn_cnt;
	memset(v->dead, 0, n);
	for (uint32_t pc = 0; pc < n; pc++) {
		bool wide = in[pc].code == (BPF_LD | BPF_IMM | BPF_DW) && pc + 1 < n;
		if (!v->walked[pc])
			v->dead[pc] = VM_DEAD_INSN, v->dead[pc + wide] = VM_DEAD_INSN;
		else if (v->edges[pc] == VM_EDGE_FALL)
			v->dead[pc] = VM_DEAD_TAKEN;
		else if (v->edges[pc] == VM_EDGE_TAKEN)
			v->dead[pc] = VM_DEAD_FALL;
		pc += wide;
	}
}

/* Walks every edge to a fixed point, then checks every reached read.  Call after the walk
 * accepted the program (the structure is sound: jumps and calls land inside it). */
int vm_gpu_joins(struct verifier *v)
{
	uint32_t n = v->prog->insn_cnt, top = 0;
	struct gstate *st = calloc(n + 1, sizeof(*st));
	uint32_t *work = malloc((n + 1) * sizeof(*work));
	bool *queued = calloc(n + 1, sizeof(*queued));
	int rc = 0;
	if (!st || !work || !queued) {
		free(st), free(work), free(queued);
		return vm_reject(v, 0, "out of memory"), -1;
	}
	struct gstate init = {.reached = true};
	for (int r = 0; r < 11; r++)
		init.r[r] = (struct greg){G_OTHER, 0};
	init.r[1] = (struct greg){G_CTX, 0};
	g_merge(st, 0, &init);
	work[top++] = 0, queued[0] = true;
	while (top) {
		uint32_t pc = work[--top], next[3];
		queued[pc] = false;
		if (!v->walked[pc] && v->dead)
			continue; /* dropped: an exit */
		const struct bpf_insn *in = &v->prog->insns[pc];
		struct gstate out = st[pc], callee;
		uint32_t k = g_succ(in, &out, pc, next);
		if (BPF_CLASS(in->code) == BPF_JMP && BPF_OP(in->code) == BPF_CALL &&
		    in->src_reg == BPF_PSEUDO_CALL) {
			g_callee(&out, &callee);
			uint32_t t = (uint32_t)((int64_t)pc + 1 + in->imm);
			if (t < n && g_merge(st, t, &callee) && !queued[t])
				work[top++] = t, queued[t] = true;
		}
		g_step(in, &out);
		if (v->dead && k == 2 && v->edges[pc] == VM_EDGE_FALL) /* hard-wired: one way */
			k = 1;
		else if (v->dead && k == 2 && v->edges[pc] == VM_EDGE_TAKEN)
			next[0] = next[1], k = 1;
		for (uint32_t i = 0; i < k; i++)
			if (next[i] < n && g_merge(st, next[i], &out) && !queued[next[i]])
				work[top++] = next[i], queued[next[i]] = true;
	}
	if (v->dead)
		g_mark_dead(v);
	for (uint32_t pc = 0; pc < n && !rc; pc++)
		if (st[pc].reached && !v->walked[pc] && v->dead)
			continue;
		else if (st[pc].reached && !v->walked[pc]) {
			vm_reject(v, pc, "no path the verifier walks reaches this instruction (a branch "
				  "it proved never taken leads here), but the code generator compiles "
				  "it: %s programs may hold no such dead code",
				  vm_prog_kind_name(v->prog->kind));
			rc = -1;
		} else if (st[pc].reached)
			rc = g_check_reads(v, pc, &st[pc]) ? -1 : g_check_call(v, pc, &st[pc]);
	free(st), free(work), free(queued);
	return rc;
}
