/* vm/: folder-private declarations of the verifier (verifier.c: CFG, exploration, pruning, log;
 * verifier_ops.c: what each instruction does to the abstract state; verifier_range.c: scalars). */
#ifndef CUBPF_VM_VERIFIER_H
#define CUBPF_VM_VERIFIER_H

#include "vm/internal.h"

enum vtype {
	T_NOT_INIT = 0,
	T_SCALAR,
	T_CTX,                 /* the program's context */
	T_STACK,               /* a frame's stack: off from that frame's r10 */
	T_MAP_VALUE,           /* a map value (map, off, variable part in the range) */
	T_MAP_VALUE_OR_NULL,   /* lookup result before its null check */
	T_MAP_PTR,             /* lddw rX, map */
	T_MEM,                 /* a reserved ring buffer record: mem_size bytes, must be released */
	T_MEM_OR_NULL,         /* bpf_ringbuf_reserve's result before its null check */
};

/* A register's abstract value.  Scalars: the ranges and the tnum (value, mask: bits set in the
 * mask are unknown).  Pointers: `off` is the fixed offset, the scalar part the variable one. */
struct vreg {
	uint8_t type;
	uint8_t frameno;       /* T_STACK: whose stack */
	uint32_t map;          /* T_MAP_*: map index */
	uint32_t id;           /* *_OR_NULL: copies share it, the null check converts all */
	uint32_t vid;          /* T_MAP_VALUE*: which value (0: the map's direct value, lddw; else
				* the lookup that returned it): pointers into one value may be
				* subtracted and compared, pointers into two may not */
	uint32_t ref;          /* T_MEM*: the reservation it belongs to */
	uint32_t mem_size;     /* T_MEM*: record size */
	int32_t off;
	int64_t smin, smax;
	uint64_t umin, umax;
	uint64_t tv, tm;
};

/* S_POISON: bytes of a spilled pointer that was partly overwritten, released (a submitted ring
 * buffer record) or whose frame returned: never readable, until written again, since they hold
 * address bits. */
enum slot { S_INVALID = 0, S_MISC, S_SPILL, S_POISON };

struct vframe {
	struct vreg regs[11];
	uint8_t stype[VM_STACK_SIZE];            /* per byte, index = 512 + offset */
	struct vreg spill[VM_STACK_SIZE / 8];    /* per 8-byte slot when all its bytes are S_SPILL */
	uint32_t callsite;                       /* the call instruction (frames > 0) */
	uint32_t depth;                          /* deepest byte touched */
};

#define VM_MAX_REFS 8

struct vstate {
	struct vframe *fr[VM_MAX_CALL_DEPTH];
	uint32_t cur;                            /* current frame */
	uint32_t refs[VM_MAX_REFS];              /* reservations not yet submitted or discarded */
	uint32_t nrefs;
};

/* GPU programs: what a register read at an instruction held, over every path walked.  The PTX
 * code generator joins the paths: a register that is the context pointer (at one offset) on one
 * path and anything else on another, or a map pointer naming two maps, cannot be compiled where
 * it is read. */
struct ctxuse {
	uint8_t seen;         /* CU_* bits */
	uint8_t other;        /* the type (+ 1) of the first non-context value seen */
	uint16_t map;         /* the first map (index + 1) a map pointer named here */
	int32_t off;          /* the first context offset seen */
};

enum { CU_CTX = 1, CU_OFFS = 2, CU_MAPS = 4 }; /* context seen; at two offsets; two maps */

struct verifier {
	const struct vm_object *obj;
	const struct vm_prog *prog;
	const struct vm_ctx_layout *ctx;
	uint32_t next_id;
	char *log;
	size_t log_size, log_len;
	int reject_pc;
	uint32_t max_depth;                      /* deepest combined stack seen */
	uint32_t max_frames;
	uint32_t max_insns;
	int log_level;                           /* 2: trace every instruction walked */
	uint16_t *live;                          /* per instruction: registers read later */
	char reason[512];                        /* why it was rejected */
	struct vstate fail_state;                /* the state at the rejected instruction */
	struct ctxuse (*ctxuse)[10];             /* GPU kinds: per instruction, r0-r9 */
	uint8_t *walked;                         /* GPU kinds: per instruction, 1 once walked */
	uint8_t *dead;                           /* opts.dead: where dropped code is marked */
	uint8_t *edges;                          /* GPU kinds: per conditional jump, the edges
						  * walked (VM_EDGE_FALL, VM_EDGE_TAKEN) */
	void *walking;                           /* verifier.c: the path being walked (liveness) */
};

/* vm_verify_opts.dead: what vm_prog_drop_dead makes of an instruction. */
enum { VM_DEAD_NO = 0, VM_DEAD_INSN = 1, VM_DEAD_TAKEN = 2 /* a jump never taken: falls
	through */, VM_DEAD_FALL = 3 /* a jump always taken */ };
enum { VM_EDGE_FALL = 1, VM_EDGE_TAKEN = 2 };

/* Stack slot liveness (verifier.c).  The instruction being walked reads or writes bytes
 * [lo, hi) (offsets from r10) of frame `frameno`; a call starts frame `frameno` afresh.  States
 * kept for pruning learn which of their stack bytes some later instruction reads before writing
 * them, and compare only those: a key written on one branch and dead after the join no longer
 * tells the paths apart.  Every stack read and write of verifier_ops.c must be reported here. */
void vm_stack_read(struct verifier *v, uint32_t frameno, int64_t lo, int64_t hi);
void vm_stack_written(struct verifier *v, uint32_t frameno, int64_t lo, int64_t hi);
void vm_stack_new_frame(struct verifier *v, uint32_t frameno);

/* The structural pass (verifier_cfg.c): encodings, jumps, functions, reachability.  Marks the
 * instructions where states are kept (jump targets, branch fall-throughs, call returns). */
int vm_cfg_check(struct verifier *v, uint8_t *prune);
/* Register liveness (verifier_cfg.c): bit r of v->live[pc] is set when some path from pc may
 * read r before writing it.  States compared at pc ignore the other registers. */
int vm_liveness(struct verifier *v);
/* The registers an instruction reads (calls: r1-r5, exit: r0). */
uint16_t vm_insn_uses(const struct bpf_insn *in);
/* The instructions that may run after the one at pc (none after exit; a call's is the next,
 * its callee apart; a conditional jump's two, fall-through first).  Returns how many. */
uint32_t vm_insn_successors(const struct bpf_insn *in, uint32_t pc, uint32_t next[2]);
/* The registers whose value the code generator needs at pc (verifier.c): copies, exits and
 * bpf-to-bpf calls pass values on; a helper reads as many as its prototype takes. */
uint16_t vm_value_reads(const struct verifier *v, uint32_t pc);
/* GPU kinds (verifier_gpu.c): no register read where the code generator's analysis, joining
 * every edge, sees the context on one path and another value or offset on another. */
int vm_gpu_joins(struct verifier *v);

/* Result of one instruction. */
enum vstep { STEP_NEXT, STEP_JUMP, STEP_BRANCH, STEP_EXIT, STEP_ERROR };

/* Rejects at `pc` with a reason (printf-style).  Always returns STEP_ERROR. */
int vm_reject(struct verifier *v, uint32_t pc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Logs without rejecting. */
void vm_log(struct verifier *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Scalars (verifier_range.c). */
void vm_range_unknown(struct vreg *r);
void vm_range_const(struct vreg *r, uint64_t v);
void vm_range_set(struct vreg *r, uint64_t umin, uint64_t umax);
bool vm_range_is_const(const struct vreg *r);
void vm_range_sync(struct vreg *r);
/* dst = dst OP src on scalars; is64 false: 32-bit operation, zero-extended result. */
void vm_range_alu(struct vreg *dst, const struct vreg *src, uint8_t op, int16_t off, bool is64);
/* Conditional jump: 1 always taken, 0 never, -1 unknown. */
int vm_range_branch_known(const struct vreg *a, const struct vreg *b, uint8_t op, bool is64);
/* Narrows a (and b) for the branch outcome `taken`. */
void vm_range_refine(struct vreg *a, struct vreg *b, uint8_t op, bool is64, bool taken);
/* Does `old` cover every value of `cur`? */
bool vm_range_covers(const struct vreg *old, const struct vreg *cur);
/* Exact value of an ALU operation on constants (the interpreter's semantics). */
uint64_t vm_range_eval(uint8_t op, int16_t off, bool is64, uint64_t a, uint64_t b);

/* Instruction semantics (verifier_ops.c).  `pc` may be advanced by the step (jumps, calls);
 * STEP_BRANCH fills *other with the state and pc of the not-taken side. */
int vm_verifier_step(struct verifier *v, struct vstate *st, uint32_t *pc, struct vstate *other,
	   uint32_t *other_pc);
const char *vm_type_name(uint8_t type);
void vm_print_reg(struct verifier *v, const struct vreg *r);
void vm_print_state(struct verifier *v, const struct vstate *st);

/* States (verifier.c). */
int vm_state_copy(struct vstate *dst, const struct vstate *src);
void vm_state_free(struct vstate *st);
/* Drops the current (callee) frame on return. */
void vm_state_free_frame(struct vstate *st);
struct vframe *vm_frame_new(void);

#endif
