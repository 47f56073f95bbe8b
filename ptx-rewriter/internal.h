/* ptx-rewriter internals: shared by the files of this folder only. */
#ifndef CUBPF_PTX_INTERNAL_H
#define CUBPF_PTX_INTERNAL_H

#include <stdarg.h>

#include "ptx-rewriter/ptx.h"

/* ---- text buffer ---- */
#define buf_put ptx_buf_append
#define buf_printf ptx_buf_printf
void ptx_buf_puts(struct ptx_buf *b, const char *s);

void ptx_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- where an instruction sits (blocks.c) ---- */
/* A walk over a function's text: the line (from 1) at `off` and the .loc in force there.
 * Zeroed, it starts anywhere; it moves forward cheaply (sites in order) and goes back to the
 * function's start when asked for an earlier place or another function. */
struct ptx_loc_cursor {
	const struct ptx_func *f;
	size_t off, body;
	uint32_t line, file, src, body_line;
};
void ptx_loc_at(const struct ptx_module *m, const struct ptx_func *f, size_t off,
		struct ptx_loc_cursor *c);

/* ---- eBPF analysis: what each register holds at each instruction ---- */
enum av_kind {
	AV_UNKNOWN = 0, /* a runtime value (the generated code always computes it) */
	AV_CTX,         /* context pointer + v: has no runtime value, only loads through it */
	AV_CONFLICT,    /* context on some paths, something else on others */
	AV_MAP,         /* map pointer of map `map` */
	AV_MAPVAL,      /* pointer into map `map`'s first value + v */
	AV_CONST,       /* the constant v */
	AV_STACK,       /* r10 of the current frame + v */
};

struct av {
	uint8_t kind;
	uint8_t al;     /* AV_UNKNOWN: the value is a multiple of al (a power of two; 0 = 1) */
	uint8_t global; /* AV_UNKNOWN: a pointer into a map value (global memory), or NULL */
	uint8_t stk;    /* AV_UNKNOWN: may hold a stack address (provenance kept through joins and
			 * moves: such a value needs the stack addressable at run time) */
	uint8_t defer;  /* AV_UNKNOWN and global: the map's flags have CUBPF_F_DEFER_ADD */
	uint8_t sm;     /* AV_MAPVAL of a per-SM array: + the running SM's copy (its slot times
			 * the value stride: CUBPF_PERCPU_OFFSET) */
	uint32_t map;
	int64_t v;
};

/* Known alignment (bytes, at most 16) of the runtime value of `a` plus `off`: the GPU faults on
 * an access not aligned to its size, so the generator splits accesses it cannot prove aligned.
 * Map values start 8-aligned (device allocations are, and value strides are multiples of 8),
 * stack frames 16-aligned; anything else is only as aligned as what was added to it. */
uint32_t ptx_av_align(const struct av *a, int64_t off);
/* Whether a memory access through `a` goes to global memory: a map value (device memory, or
 * managed memory for maps shared with host programs).  PTX then names the state space, so that
 * ptxas need not test a generic address at run time (a 64-bit atomic on a generic address
 * compiles to a space test, the atomic and a shared-memory CAS loop). */
bool ptx_av_global(const struct av *a);

/* Stack slots holding known constants (tracked while no stack address escapes). */
#define AV_SLOTS 8
struct av_slot {
	int64_t off;
	uint32_t size;
	uint64_t val;
};

struct av_state {
	struct av r[11];
	struct av_slot sl[AV_SLOTS];
	uint8_t nsl;
	bool reached;
};

/* Source of context fields for one probe site. */
struct cg_ctxsrc {
	/* Emits code that loads the field at (off, size) of the context into the 64-bit register
	 * `dst`: only fields `constant` does not give (the generator moves those itself).
	 * Returns 0, or -1 with a message. */
	int (*load)(void *user, struct ptx_buf *out, const char *dst, uint32_t off, uint32_t size,
		    char *err, size_t errlen);
	/* True (and *val) when the field is a constant at this site: lets the generator fold the
	 * program's computations and branches on it. */
	bool (*constant)(void *user, uint32_t off, uint32_t size, uint64_t *val);
	/* Optional: the register slot where the add of instruction pc (to a CUBPF_F_DEFER_ADD
	 * map) keeps its sum at this site (%__cb_da<n> the address, %__cb_dv<n> the sum, which
	 * the caller declares, zeroes where the kernel starts and adds to memory where it
	 * leaves: ptx_cg_emit_defer_flush), or -1 to add at once. */
	int (*defer_slot)(void *user, uint32_t pc);
	void *user;
	struct cg_accs *accs;   /* the kernel's deferred counters (NULL: none here) */
};

/* Deferred counters.  A probe at every memory access or basic block that adds to a counter
 * makes one reduction per warp and site, and the L2 performs reductions to one line one after
 * the other (layout.h, per-SM arrays): on a memory-bound kernel that queue is the cost.  An
 * atomic add without fetch to a fixed place of a map (a constant key and offset) that no
 * program of the module reads, or writes otherwise (struct cg_prog's taint), instead adds to
 * a register of the kernel, %__cb_a<i>, zeroed at its start; each warp's threads leaving
 * together add their registers up and one reduction per counter goes to the map at exit
 * (ptx_cg_accs_flush).  The sums are the same, made at the threads' exits; only a reader
 * during the kernel (none of the module's programs, by the condition) could tell. */
#define CG_MAX_ACCS 8
struct cg_acc {
	uint32_t map;
	uint32_t stride;        /* a per-SM array's value stride (its running SM's copy); 0: one copy */
	uint64_t off;           /* byte offset in the map's storage (per-SM: in slot 0's copy) */
	bool wide;              /* 64-bit add (else 32-bit, of the low half) */
};
struct cg_accs {
	uint64_t maps;          /* maps whose adds may be deferred (bit i: map i) */
	struct cg_acc a[CG_MAX_ACCS];
	uint32_t n;
	bool block;             /* summed per thread block first (the kernel can take the shared
				 * memory: ptx_cg_accs_flush) */
};
/* Declares and zeroes the registers of the counters (none when t->n is 0); with t->block, also
 * the block's sums in shared memory, zeroed by thread (0,0,0) before a barrier of all. */
void ptx_cg_accs_decls(const struct cg_accs *t, struct ptx_buf *out);
/* At a thread's exit: each counter summed over the lanes leaving together, added to its map by
 * the lowest of them when not zero (with t->block: to the block's sums, which the last lanes of
 * the block to leave add to the maps).  redux: redux.sync is there (sm_80, PTX 7.0). */
void ptx_cg_accs_flush(const struct cg_accs *t, bool redux, struct ptx_buf *out);

/* The result of compiling one program at one site. */
struct cg_result {
	uint32_t stack_bytes;   /* bytes of __cubpf_stack it needs (0: none) */
	bool needs_r10;         /* reads r10 as a value (generic stack pointer) */
	bool vprintf;           /* calls vprintf (needs the .extern declaration and __cubpf_pbuf) */
	uint64_t maps_used;     /* bit i: map i (maps >= 64 are refused) */
};

/* A program prepared for code generation: analysed once, emitted at any number of sites. */
struct cg_prog;
struct cg_prog *ptx_cg_prepare(const struct ptx_prog *prog, const struct vm_map_def *maps,
			   uint32_t map_cnt, char *err, size_t errlen);
void ptx_cg_prog_free(struct cg_prog *p);
/* Emits the program's code; r1.. are set up by the caller, except r10 which the code sets.
 * `lbl` is a unique label prefix for this site ("$__cb7_").  The code ends at label
 * `<lbl>end`; r0 holds the result there. */
int ptx_cg_emit(struct cg_prog *p, const struct cg_ctxsrc *ctx, const char *lbl, struct ptx_buf *out,
	    struct cg_result *res, char *err, size_t errlen);
/* The declarations for code from ptx_cg_emit (registers, stack, print buffer). */
void ptx_cg_emit_decls(const struct cg_result *res, struct ptx_buf *out);
/* Whether the program may keep adds in registers (cg_ctxsrc.defer_slot): it updates a map
 * whose flags have CUBPF_F_DEFER_ADD. */
bool ptx_cg_may_defer(const struct cg_prog *p);
/* Declarations, zeroing (where the kernel starts) and flush (where it leaves) of defer slots
 * 0 .. n - 1. */
void ptx_cg_emit_defer_decls(uint32_t n, struct ptx_buf *decl, struct ptx_buf *zero);
void ptx_cg_emit_defer_flush(uint32_t n, struct ptx_buf *out);

#define CG_REG "%%__cb_r"
#endif
