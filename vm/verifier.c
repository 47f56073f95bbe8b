/* The verifier: a structural pass (encoding, jumps, functions, reachability) and then a walk of
 * every path with abstract register and stack states, as the Linux verifier does.  Loops are
 * unrolled by the walk; a state that repeats exactly on its own path is an infinite loop, and a
 * bound on instructions walked rejects loops that never settle.  States kept at jump targets
 * prune paths already proven safe by a more general, fully explored state. */
#include <stdlib.h>
#include <string.h>

#include "vm/verifier.h"

#define MAX_STATES_PER_INSN 512 /* a loop keeps one state per iteration at its head */
#define MAX_STATES_TOTAL 20000 /* about 100 MB of states at most */

/* ---- log ---------------------------------------------------------------------------------------- */

static void log_vappend(struct verifier *v, const char *fmt, va_list ap)
{
	if (!v->log || v->log_len + 1 >= v->log_size)
		return;
	int n = vsnprintf(v->log + v->log_len, v->log_size - v->log_len, fmt, ap);
	if (n > 0)
		v->log_len += (size_t)n < v->log_size - v->log_len ? (size_t)n : v->log_size - v->log_len - 1;
}

void vm_log(struct verifier *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vappend(v, fmt, ap);
	va_end(ap);
}

/* The first reason is kept aside so that the log can show the code before it. */
int vm_reject(struct verifier *v, uint32_t pc, const char *fmt, ...)
{
	if (v->reject_pc < 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
		va_end(ap);
		v->reject_pc = (int)pc;
	}
	return STEP_ERROR;
}

static void log_window(struct verifier *v, int at)
{
	const struct vm_prog *p = v->prog;
	int from = at - 4 < 0 ? 0 : at - 4;
	for (uint32_t pc = 0; pc < p->insn_cnt && (int)pc <= at + 2;) {
		char text[160];
		int n = vm_disasm_insn_at(&p->insns[pc], p->insn_cnt - pc, pc, v->obj, text, sizeof(text));
		if ((int)pc >= from)
			vm_log(v, "%s%5u: %s\n", (int)pc == at ? "  -> " : "     ", pc, text);
		pc += (uint32_t)n;
	}
}

/* ---- states ------------------------------------------------------------------------------------- */

struct vframe *vm_frame_new(void)
{
	return calloc(1, sizeof(struct vframe));
}

int vm_state_copy(struct vstate *dst, const struct vstate *src)
{
	memset(dst, 0, sizeof(*dst));
	for (uint32_t i = 0; i <= src->cur; i++) {
		dst->fr[i] = malloc(sizeof(struct vframe));
		if (!dst->fr[i]) {
			vm_state_free(dst);
			return -1;
		}
		memcpy(dst->fr[i], src->fr[i], sizeof(struct vframe));
	}
	dst->cur = src->cur;
	dst->nrefs = src->nrefs;
	memcpy(dst->refs, src->refs, sizeof(dst->refs));
	return 0;
}

void vm_state_free(struct vstate *st)
{
	for (uint32_t i = 0; i < VM_MAX_CALL_DEPTH; i++) {
		free(st->fr[i]);
		st->fr[i] = NULL;
	}
	st->cur = 0;
}

void vm_state_free_frame(struct vstate *st)
{
	free(st->fr[st->cur]);
	st->fr[st->cur] = NULL;
	st->cur--;
}

/* Map-value-or-null ids of an old state and a new one must correspond one to one. */
struct idmap {
	uint32_t old[64], cur[64];
	int n;
};

static bool id_match(struct idmap *m, uint32_t o, uint32_t c)
{
	for (int i = 0; i < m->n; i++)
		if (m->old[i] == o || m->cur[i] == c)
			return m->old[i] == o && m->cur[i] == c;
	if (m->n == 64)
		return false;
	m->old[m->n] = o;
	m->cur[m->n++] = c;
	return true;
}

static bool reg_covers(const struct vreg *o, const struct vreg *c, struct idmap *ids)
{
	if (o->type == T_NOT_INIT)
		return true; /* the old path never read it, or it would have been rejected */
	if (o->type != c->type)
		return false;
	if (o->type == T_SCALAR)
		return vm_range_covers(o, c);
	if (o->map != c->map || o->frameno != c->frameno || o->off != c->off)
		return false;
	if ((o->type == T_MAP_VALUE_OR_NULL || o->type == T_MEM_OR_NULL) &&
	    !id_match(ids, o->id, c->id))
		return false;
	/* which value a pointer points into decides what it may be subtracted from */
	if ((o->vid || c->vid) && (!o->vid || !c->vid || !id_match(ids, o->vid, c->vid)))
		return false;
	if ((o->type == T_MEM || o->type == T_MEM_OR_NULL) &&
	    (o->mem_size != c->mem_size || !id_match(ids, o->ref, c->ref)))
		return false;
	return vm_range_covers(o, c);
}

/* One bit per stack byte of a frame (index = 512 + offset from r10, as in stype). */
#define SB_WORDS (VM_STACK_SIZE / 64)
typedef uint64_t stackbits[SB_WORDS];

static bool sb_test(const uint64_t *b, int i)
{
	return (b[i / 64] >> (i % 64)) & 1;
}

/* Byte i of the old state covers byte i of the current one. */
static bool byte_covers(const struct vframe *o, const struct vframe *c, int i, struct idmap *ids,
			bool *spill_done)
{
	uint8_t ot = o->stype[i], ct = c->stype[i];
	if (ot == S_INVALID || ot == S_POISON) /* the old path could not read these bytes */
		return true;
	if (ct == S_INVALID || ct == S_POISON)
		return false;
	if (ot == S_MISC && ct == S_SPILL && c->spill[i / 8].type != T_SCALAR)
		return false;
	if (ot != S_SPILL)
		return true;
	if (ct != S_SPILL)
		return false;
	if (*spill_done) /* the slot's spilled register, once per slot */
		return true;
	*spill_done = true;
	return reg_covers(&o->spill[i / 8], &c->spill[i / 8], ids);
}

/* `live`: registers that matter (all of them in caller frames); `read`: the stack bytes some
 * path from the old state reads before writing them (NULL: all of them, for a state whose
 * paths are not all explored yet). */
static bool frame_covers(const struct vframe *o, const struct vframe *c, struct idmap *ids,
			 uint16_t live, const uint64_t *read)
{
	if (o->callsite != c->callsite || c->depth > o->depth)
		return false;
	for (int r = 0; r < 11; r++)
		if (((live >> r) & 1) && !reg_covers(&o->regs[r], &c->regs[r], ids))
			return false;
	for (int s = 0; s < VM_STACK_SIZE; s += 8) {
		bool spill_done = false;
		if (read && !((read[s / 64] >> (s % 64)) & 0xff))
			continue; /* no byte of this slot is read later */
		for (int i = s; i < s + 8; i++)
			if ((!read || sb_test(read, i)) && !byte_covers(o, c, i, ids, &spill_done))
				return false;
	}
	return true;
}

static bool state_covers_live(const struct vstate *o, const struct vstate *c, uint16_t live,
			      const stackbits *read)
{
	struct idmap ids;
	ids.n = 0; /* not the arrays: states are compared often (at every kept state of a pc) */
	if (o->cur != c->cur || o->nrefs != c->nrefs)
		return false;
	for (uint32_t i = 0; i < o->nrefs; i++)
		if (!id_match(&ids, o->refs[i], c->refs[i]))
			return false;
	for (uint32_t i = 0; i <= o->cur; i++)
		if (!frame_covers(o->fr[i], c->fr[i], &ids, i == o->cur ? live : 0xffff,
				  read ? read[i] : NULL))
			return false;
	return true;
}

static bool state_covers(const struct vstate *o, const struct vstate *c, uint16_t live)
{
	return state_covers_live(o, c, live, NULL);
}

/* ---- exploration ------------------------------------------------------------------------------ */

struct ckpt {
	struct vstate st;
	struct ckpt *parent;      /* the checkpoint this one's path came through */
	struct ckpt *next;        /* others at the same instruction */
	uint32_t branches;        /* live paths and unfinished checkpoints below it */
	uint32_t hits, misses;    /* as a complete state: paths it pruned, paths it did not */
	/* per frame: bytes read by some path from here before it wrote them (complete once
	 * branches is 0), and bytes written between the parent and here (they screen the
	 * parent from reads below) */
	stackbits read[VM_MAX_CALL_DEPTH], wr[VM_MAX_CALL_DEPTH];
};

struct path {
	struct vstate st;
	uint32_t pc;
	struct ckpt *parent;
	stackbits wr[VM_MAX_CALL_DEPTH]; /* bytes written since `parent` */
};

struct explorer {
	struct verifier *v;
	uint8_t *prune;           /* per instruction: keep states here */
	struct ckpt **at;         /* per instruction: list of checkpoints */
	uint16_t *nat;
	struct ckpt **all;
	uint32_t nall, capall;
	struct path *stack;
	uint32_t sp, cap;
	uint32_t processed, max_processed;
};

static void path_done(struct ckpt *c)
{
	for (; c; c = c->parent)
		if (--c->branches > 0)
			break;
}

static bool is_ancestor(const struct ckpt *c, const struct ckpt *of)
{
	for (; of; of = of->parent)
		if (of == c)
			return true;
	return false;
}

/* ---- stack liveness ----------------------------------------------------------------------------
 * As Linux's read marks: a read of a byte not written since the path's last checkpoint marks
 * that checkpoint, and up its parents until one whose segment wrote the byte.  A path pruned by
 * a complete checkpoint will do what that checkpoint's paths did: their reads are marked on the
 * pruned path as its own. */

static void mark_read(struct path *p, uint32_t f, int i)
{
	uint64_t bit = 1ull << (i % 64);
	int w = i / 64;
	if (p->wr[f][w] & bit)
		return;
	for (struct ckpt *c = p->parent; c; c = c->parent) {
		if (c->read[f][w] & bit)
			return; /* marked before, and its parents with it */
		c->read[f][w] |= bit;
		if (c->wr[f][w] & bit)
			return;
	}
}

static bool stack_range(uint32_t frameno, int64_t lo, int64_t hi)
{
	return frameno < VM_MAX_CALL_DEPTH && lo >= -VM_STACK_SIZE && hi <= 0 && lo < hi;
}

void vm_stack_read(struct verifier *v, uint32_t frameno, int64_t lo, int64_t hi)
{
	struct path *p = v->walking;
	if (!p || !stack_range(frameno, lo, hi))
		return; /* out of range: the access is rejected */
	for (int64_t o = lo; o < hi; o++)
		mark_read(p, frameno, (int)(VM_STACK_SIZE + o));
}

void vm_stack_written(struct verifier *v, uint32_t frameno, int64_t lo, int64_t hi)
{
	struct path *p = v->walking;
	if (!p || !stack_range(frameno, lo, hi))
		return;
	for (int64_t o = lo; o < hi; o++) {
		int i = (int)(VM_STACK_SIZE + o);
		p->wr[frameno][i / 64] |= 1ull << (i % 64);
	}
}

/* A new frame starts with nothing readable: nothing below its call reaches the frame of that
 * number in the states above (another call's, or none). */
void vm_stack_new_frame(struct verifier *v, uint32_t frameno)
{
	struct path *p = v->walking;
	if (p && frameno < VM_MAX_CALL_DEPTH)
		memset(p->wr[frameno], 0xff, sizeof(p->wr[frameno]));
}

static void inherit_reads(struct path *p, const struct ckpt *c)
{
	for (uint32_t f = 0; f <= c->st.cur; f++)
		for (int w = 0; w < SB_WORDS; w++)
			for (uint64_t m = c->read[f][w] & ~p->wr[f][w]; m; m &= m - 1)
				mark_read(p, f, w * 64 + __builtin_ctzll(m));
}

enum { VISIT_GO, VISIT_PRUNED, VISIT_ERROR };

static int visit(struct explorer *e, struct path *p)
{
	uint16_t live = e->v->live[p->pc];
	for (struct ckpt **pc = &e->at[p->pc], *c; (c = *pc);) {
		if (c->branches == 0) {
			if (state_covers_live(&c->st, &p->st, live, c->read)) {
				c->hits++;
				inherit_reads(p, c);
				return VISIT_PRUNED;
			}
			/* as Linux: a state that keeps missing leaves the list (it stays in e->all
			 * until the end), so that a loop's head, one state per iteration, is not
			 * compared with every earlier iteration at every visit */
			if (++c->misses > c->hits * 3 + 3) {
				*pc = c->next;
				e->nat[p->pc]--;
				continue;
			}
		} else if (state_covers(&c->st, &p->st, live) && state_covers(&p->st, &c->st, live) &&
			   is_ancestor(c, p->parent)) { /* the walk up the path last: it is long */
			vm_reject(e->v, p->pc, "infinite loop detected: the state at instruction %u "
				 "repeats on its own path", p->pc);
			return VISIT_ERROR;
		}
		pc = &c->next;
	}
	if (e->nat[p->pc] >= MAX_STATES_PER_INSN || e->nall >= MAX_STATES_TOTAL)
		return VISIT_GO;
	if (e->nall == e->capall) {
		uint32_t cap = e->capall ? e->capall * 2 : 256;
		struct ckpt **a = realloc(e->all, cap * sizeof(*a));
		if (!a)
			return VISIT_GO;
		e->all = a, e->capall = cap;
	}
	struct ckpt *c = calloc(1, sizeof(*c));
	if (!c || vm_state_copy(&c->st, &p->st) < 0) {
		free(c);
		return VISIT_GO;
	}
	c->parent = p->parent;
	c->branches = 1;
	memcpy(c->wr, p->wr, sizeof(c->wr));
	memset(p->wr, 0, sizeof(p->wr));
	c->next = e->at[p->pc];
	e->at[p->pc] = c;
	e->nat[p->pc]++;
	e->all[e->nall++] = c;
	p->parent = c;
	return VISIT_GO;
}

static int push(struct explorer *e, struct vstate *st, uint32_t pc, struct ckpt *parent,
		const stackbits *wr)
{
	if (e->sp == e->cap) {
		uint32_t cap = e->cap ? e->cap * 2 : 64;
		struct path *s = realloc(e->stack, cap * sizeof(*s));
		if (!s)
			return -1;
		e->stack = s, e->cap = cap;
	}
	struct path *p = &e->stack[e->sp++];
	p->st = *st, p->pc = pc, p->parent = parent;
	if (wr)
		memcpy(p->wr, wr, sizeof(p->wr));
	else
		memset(p->wr, 0, sizeof(p->wr));
	if (parent)
		parent->branches++;
	return 0;
}

/* Log level 2: each instruction walked, with the registers it starts from. */
static void trace_insn(struct verifier *v, const struct path *p)
{
	char text[160];
	const struct vm_prog *pr = v->prog;
	vm_disasm_insn_at(&pr->insns[p->pc], pr->insn_cnt - p->pc, p->pc, v->obj, text, sizeof(text));
	vm_log(v, "%u: %s\n", p->pc, text);
	if (v->log_len + 512 < v->log_size)
		vm_print_state(v, &p->st);
}

/* ---- GPU programs: the context pointer per register read ------------------------------------ */

/* Registers whose value the code generator needs at pc: copies (64-bit moves), bpf-to-bpf calls
 * (inlined) and exits only pass values on; a helper reads its arguments. */
uint16_t vm_value_reads(const struct verifier *v, uint32_t pc)
{
	const struct bpf_insn *in = &v->prog->insns[pc];
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	if (cls == BPF_ALU64 && op == BPF_MOV && BPF_SRC(in->code) == BPF_X && in->off == 0)
		return 0;
	if (cls == BPF_JMP && (op == BPF_EXIT || (op == BPF_CALL && in->src_reg == BPF_PSEUDO_CALL)))
		return 0;
	if (cls == BPF_JMP && op == BPF_CALL) {
		const struct vm_helper_proto *h = vm_helper_proto((uint32_t)in->imm);
		uint16_t m = 0;
		for (int i = 0; h && i < 5 && h->args[i] != VM_ARG_NONE; i++)
			m |= (uint16_t)(1u << (i + 1));
		return m;
	}
	return vm_insn_uses(in) & (uint16_t)~(1u << 10);
}

static void record_ctx_uses(struct verifier *v, const struct path *p)
{
	uint16_t m = vm_value_reads(v, p->pc);
	const struct vframe *f = p->st.fr[p->st.cur];
	v->walked[p->pc] = 1;
	for (int r = 0; r < 10; r++) {
		const struct vreg *x = &f->regs[r];
		struct ctxuse *u = &v->ctxuse[p->pc][r];
		if (!((m >> r) & 1) || x->type == T_NOT_INIT)
			continue;
		if (x->type == T_MAP_PTR) {
			if (!u->map)
				u->map = (uint16_t)(x->map + 1);
			else if (u->map != (uint16_t)(x->map + 1))
				u->seen |= CU_MAPS;
		}
		if (x->type != T_CTX) {
			if (!u->other)
				u->other = (uint8_t)(x->type + 1);
		} else if (!(u->seen & CU_CTX)) {
			u->seen |= CU_CTX;
			u->off = x->off;
		} else if (u->off != x->off)
			u->seen |= CU_OFFS;
	}
}

static int check_ctx_uses(struct verifier *v)
{
	for (uint32_t pc = 0; pc < v->prog->insn_cnt; pc++)
		for (int r = 0; r < 10; r++) {
			const struct ctxuse *u = &v->ctxuse[pc][r];
			if (u->seen & CU_MAPS) {
				vm_reject(v, pc, "R%d is map '%s' on one path and another map on another "
					 "here: %s programs must name one map per call (the code generator "
					 "needs it at compile time)", r, v->obj->maps[u->map - 1].name,
					 vm_prog_kind_name(v->prog->kind));
				return -1;
			}
			if (!(u->seen & CU_CTX) || (!u->other && !(u->seen & CU_OFFS)))
				continue;
			if (u->other)
				vm_reject(v, pc, "R%d is the context pointer on one path and a %s on another "
					 "here: %s programs may not mix them in one register (the code "
					 "generator joins the paths)", r, vm_type_name(u->other - 1),
					 vm_prog_kind_name(v->prog->kind));
			else
				vm_reject(v, pc, "R%d is the context pointer at two offsets on two paths "
					 "here: %s programs may not mix them in one register (the code "
					 "generator joins the paths)", r, vm_prog_kind_name(v->prog->kind));
			return -1;
		}
	return 0;
}

/* GPU kinds: which way a conditional jump at `at` went on the walk (to `a`, and to `b` when
 * both), so that an edge no path takes can be hard-wired away (vm_prog_drop_dead). */
static void note_edges(struct verifier *v, uint32_t at, uint32_t a, uint32_t b)
{
	const struct bpf_insn *in = &v->prog->insns[at];
	uint8_t cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
	if ((cls != BPF_JMP && cls != BPF_JMP32) || op == BPF_JA || op == BPF_CALL ||
	    op == BPF_EXIT)
		return;
	v->edges[at] |= (a == at + 1 ? VM_EDGE_FALL : VM_EDGE_TAKEN) |
			(b == at + 1 ? VM_EDGE_FALL : VM_EDGE_TAKEN);
	if (in->off == 0) /* both edges are the next instruction */
		v->edges[at] |= VM_EDGE_FALL | VM_EDGE_TAKEN;
}

/* Walks one path to its end.  Returns 0 when it ended safely, -1 when rejected. */
static int walk(struct explorer *e, struct path *p)
{
	struct verifier *v = e->v;
	for (;;) {
		if (++e->processed > e->max_processed) {
			vm_reject(v, p->pc, "program is too complex or has an unbounded loop: more than "
				 "%u instructions processed", e->max_processed);
			return -1;
		}
		if (e->prune[p->pc]) {
			int r = visit(e, p);
			if (r == VISIT_ERROR)
				return -1;
			if (r == VISIT_PRUNED) {
				if (v->log_level >= 2)
					vm_log(v, "%u: safe (a verified state covers this one)\n", p->pc);
				path_done(p->parent);
				return 0;
			}
		}
		if (v->log_level >= 2)
			trace_insn(v, p);
		if (v->ctxuse)
			record_ctx_uses(v, p);
		struct vstate other;
		uint32_t other_pc = 0, at = p->pc;
		int rc = vm_verifier_step(v, &p->st, &p->pc, &other, &other_pc);
		if (v->edges && rc != STEP_ERROR && rc != STEP_EXIT)
			note_edges(v, at, p->pc, rc == STEP_BRANCH ? other_pc : p->pc);
		if (rc == STEP_BRANCH && v->log_level >= 2)
			vm_log(v, "  branch: insn %u queued\n", other_pc);
		if (rc == STEP_ERROR) {
			v->fail_state = p->st;
			memset(&p->st, 0, sizeof(p->st));
			return -1;
		}
		if (rc == STEP_EXIT) {
			path_done(p->parent);
			return 0;
		}
		if (rc == STEP_BRANCH && push(e, &other, other_pc, p->parent,
					       (const stackbits *)p->wr) < 0) {
			vm_state_free(&other);
			vm_reject(v, p->pc, "out of memory");
			return -1;
		}
	}
}

static int explore(struct explorer *e, struct vstate *init)
{
	int rc = 0;
	if (push(e, init, 0, NULL, NULL) < 0)
		return vm_reject(e->v, 0, "out of memory"), -1;
	while (e->sp > 0) {
		struct path p = e->stack[--e->sp];
		e->v->walking = &p;
		rc = walk(e, &p);
		e->v->walking = NULL;
		vm_state_free(&p.st);
		if (rc < 0)
			break;
	}
	while (e->sp > 0)
		vm_state_free(&e->stack[--e->sp].st);
	return rc;
}

static void explorer_free(struct explorer *e)
{
	for (uint32_t i = 0; i < e->nall; i++) {
		vm_state_free(&e->all[i]->st);
		free(e->all[i]);
	}
	free(e->all);
	free(e->stack);
	free(e->prune);
	free(e->at);
	free(e->nat);
}

/* ---- the entry point --------------------------------------------------------------------------- */

static int initial_state(struct verifier *v, struct vstate *st)
{
	(void)v; /* every kind starts alike: r1 = its context, r10 = the frame pointer */
	memset(st, 0, sizeof(*st));
	if (!(st->fr[0] = vm_frame_new()))
		return -1;
	st->fr[0]->regs[1].type = T_CTX;
	st->fr[0]->regs[10].type = T_STACK;
	return 0;
}

static void log_result(struct verifier *v, int rc, const struct vm_verify_opts *o,
		       const struct explorer *e)
{
	const struct vm_prog *p = v->prog;
	if (rc < 0) {
		vm_log(v, "program '%s' (%s): rejected at instruction %d\n", p->name, p->section,
		      v->reject_pc);
		if (v->reject_pc >= 0 && (uint32_t)v->reject_pc < p->insn_cnt)
			log_window(v, v->reject_pc);
		vm_log(v, "%d: %s\n", v->reject_pc, v->reason);
		if (v->fail_state.fr[0])
			vm_print_state(v, &v->fail_state);
	} else if (o->log_level >= 1)
		vm_log(v, "program '%s' (%s): verified, %u instructions\n", p->name, p->section,
		      p->insn_cnt);
	if (o->log_level >= 1 || rc < 0)
		vm_log(v, "processed %u instructions, %u states kept, stack %u bytes, %u frame%s\n",
		      e->processed, e->nall, v->max_depth, v->max_frames,
		      v->max_frames == 1 ? "" : "s");
}

uint32_t vm_prog_drop_dead(struct vm_prog *p, const uint8_t *dead)
{
	uint32_t n = 0;
	for (uint32_t pc = 0; dead && pc < p->insn_cnt; pc++) {
		struct bpf_insn *in = &p->insns[pc];
		if (dead[pc] == VM_DEAD_INSN)
			*in = (struct bpf_insn){.code = BPF_JMP | BPF_EXIT};
		else if (dead[pc] == VM_DEAD_TAKEN)
			*in = (struct bpf_insn){.code = BPF_JMP | BPF_JA};
		else if (dead[pc] == VM_DEAD_FALL)
			*in = (struct bpf_insn){.code = BPF_JMP | BPF_JA, .off = in->off};
		n += dead[pc] != VM_DEAD_NO;
	}
	return n;
}

int vm_verify_sanitize(struct vm_object *obj, uint32_t prog, const struct vm_verify_opts *opts,
		       struct vm_verify_info *info, char *log, size_t log_size)
{
	struct vm_verify_opts o = opts ? *opts : (struct vm_verify_opts){0};
	struct vm_prog *p = obj && prog < obj->prog_cnt ? &obj->progs[prog] : NULL;
	uint8_t *dead = p && vm_kind_is_gpu(p->kind) && !o.dead ? calloc(p->insn_cnt + 1, 1) : NULL;
	if (dead)
		o.dead = dead;
	int rc = vm_verify(obj, prog, &o, info, log, log_size);
	if (rc == 0 && p && o.dead)
		vm_prog_drop_dead(p, o.dead);
	free(dead);
	return rc;
}

int vm_verify(const struct vm_object *obj, uint32_t prog, const struct vm_verify_opts *opts,
	      struct vm_verify_info *info, char *log, size_t log_size)
{
	struct vm_verify_opts o = opts ? *opts : (struct vm_verify_opts){0};
	struct verifier v = {.obj = obj, .log = log, .log_size = log_size, .reject_pc = -1,
			     .max_frames = 1};
	struct explorer e = {.v = &v};
	if (log && log_size)
		log[0] = 0;
	if (!obj || prog >= obj->prog_cnt) {
		vm_log(&v, "no program %u in this object\n", prog);
		return -1;
	}
	v.prog = &obj->progs[prog];
	if (v.dead) /* (set where the walk leaves code behind, for GPU kinds) */
		memset(v.dead, 0, v.prog->insn_cnt);
	v.ctx = vm_ctx_layout(v.prog->kind);
	v.max_insns = o.max_insns ? o.max_insns : VM_MAX_INSNS;
	v.log_level = o.log_level;
	v.dead = o.dead;
	e.max_processed = o.max_processed ? o.max_processed : 1000000;
	uint32_t n = v.prog->insn_cnt;
	e.prune = calloc(n + 1, 1);
	e.at = calloc(n + 1, sizeof(*e.at));
	e.nat = calloc(n + 1, sizeof(*e.nat));
	int rc = -1;
	struct vstate init;
	if (!e.prune || !e.at || !e.nat || initial_state(&v, &init) < 0)
		vm_reject(&v, 0, "out of memory");
	else if (vm_kind_is_gpu(v.prog->kind) && (!(v.ctxuse = calloc(n + 1, sizeof(*v.ctxuse))) ||
						  !(v.walked = calloc(n + 1, 1)) ||
						  !(v.edges = calloc(n + 1, 1)))) {
		vm_reject(&v, 0, "out of memory");
		vm_state_free(&init);
	} else if (vm_cfg_check(&v, e.prune) == 0 && vm_liveness(&v) == 0) {
		rc = explore(&e, &init);
		if (rc == 0 && v.ctxuse)
			rc = check_ctx_uses(&v);
		if (rc == 0 && v.ctxuse)
			rc = vm_gpu_joins(&v);
	} else
		vm_state_free(&init);
	log_result(&v, rc, &o, &e);
	if (info) {
		info->insns_processed = e.processed;
		info->states = e.nall;
		info->max_stack = v.max_depth;
		info->max_call_depth = v.max_frames;
		info->reject_insn = rc < 0 ? v.reject_pc : -1;
		info->reason[0] = 0;
		if (rc < 0)
			snprintf(info->reason, sizeof(info->reason), "insn %d: %.230s", v.reject_pc,
				 v.reason);
	}
	vm_state_free(&v.fail_state);
	free(v.ctxuse);
	free(v.walked);
	free(v.edges);
	free(v.live);
	explorer_free(&e);
	return rc;
}
