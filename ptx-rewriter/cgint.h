/* Code generator internals shared by analyze.c, codegen.c and helpers.c. */
#ifndef CUBPF_PTX_CGINT_H
#define CUBPF_PTX_CGINT_H

#include "ptx-rewriter/internal.h"

#define CG_FRAMES_MAX VM_MAX_CALL_DEPTH

#define CG_MAX_SLOTS 32
#define CG_MAX_TEXT (64u << 20) /* bytes of PTX one program may expand to */

struct cg_slot {
	int64_t off;            /* frame-relative (r10 + off) */
	uint32_t size;
};

struct cg_prog {
	struct ptx_prog prog;
	const struct vm_map_def *maps;
	uint32_t map_cnt;
	struct av_state *st;    /* per instruction slot: state before it */
	bool *target;           /* jump target (needs a label) */
	uint32_t *func_end;     /* for a function start: one past its last slot; else 0 */
	uint32_t frame;         /* bytes per stack frame (multiple of 16, <= 512) */
	uint32_t depth;         /* frames the program uses, main included */
	bool escape;            /* a stack address is used as a runtime value */
	bool has_calls;         /* bpf-to-bpf calls */
	bool warp_aggregate;    /* counters may use match.any.sync (probes on sm_70 and later) */
	bool l2_keep;           /* atomics ask the L2 to keep map lines (sm_80, PTX 7.4 and later) */
	bool redux;             /* redux.sync is there (sm_80, PTX 7.0 and later) */
	bool fold;              /* fold constants, branches and lookups (probes; not raw programs) */
	bool track_slots;       /* (during analysis) follow constants through stack slots */
	const struct cg_ctxsrc *ctx; /* (during analysis) constant context fields */
	struct cg_slot acc[CG_MAX_SLOTS * 4]; /* static stack accesses seen */
	uint32_t nacc;
	bool promoted;          /* stack slots live in registers %__cb_k<i> */
	struct cg_slot slots[CG_MAX_SLOTS];
	uint32_t nslots;
	bool patch;             /* a patch function (patch.c): map pointers come from the launch's
				 * record (%__cb_rec), not from the module's __cubpf_map_<i> */
	uint64_t taint;         /* maps the program may read, or write other than by atomic adds
				 * (bit i: map i; all bits for a pointer of unknown origin) */
};

/* A static stack location: a promoted register or a .local address. */
struct sloc {
	bool reg;
	uint32_t size;
	long off;               /* .local: byte offset in __cubpf_stack (16-aligned) */
	char ref[48];
};

/* Per emission. */
struct cg {
	struct cg_prog *p;
	const struct cg_ctxsrc *ctx;
	const char *lbl;
	struct ptx_buf *out;
	struct cg_result *res;
	uint32_t next_inst;
	char *err;
	size_t errlen;
};

int ptx_cg_analyze(struct cg_prog *p, char *err, size_t errlen);
/* The program's taint (above), from its analysis without site constants (every path). */
uint64_t ptx_cg_map_taint(const struct cg_prog *p);
/* dst (a .b64 register) = the device address of map `map`'s storage: the module's
 * __cubpf_map_<map>, or in a patch function the launch record's maps[map]. */
void ptx_cg_map_ptr(struct cg *g, const char *dst, uint32_t map);
/* Constant evaluation with the interpreter's semantics (analysis and emission agree). */
bool ptx_cg_alu_eval(const struct bpf_insn *in, uint64_t d, uint64_t s, uint64_t *out);
bool ptx_cg_jmp_eval(const struct bpf_insn *in, uint64_t a, uint64_t b);
/* The known value of a constant-key array lookup at pc: map index and byte offset (for a per-SM
 * array, *sm: plus the running SM's copy, ptx_cg_sm_copy). */
bool ptx_cg_lookup_fold(const struct cg_prog *p, uint32_t pc, uint32_t *map, uint64_t *off,
			bool *sm);
/* dst (.b64) += the offset of the running SM's copy in a per-SM array of values `stride` bytes
 * apart (CUBPF_VALUE_STRIDE).  Clobbers %__cb_w0. */
void ptx_cg_sm_copy(struct ptx_buf *out, const char *dst, uint32_t stride);
/* %__cb_r0 = the 64-bit sum of %__cb_r1 over the active lanes (bpf_warp_sum); clobbers
 * %__cb_w0..5, %__cb_t1, %__cb_p1; `loop` labels the loop of the form without redux.sync. */
void ptx_cg_warp_sum(struct ptx_buf *out, bool redux, const char *loop);
int ptx_cg_cond_known(const struct cg_prog *p, uint32_t pc);
bool ptx_cg_alu_known(const struct cg_prog *p, uint32_t pc, uint64_t *v);
bool ptx_cg_is_gpu_kind(enum vm_prog_kind k);
/* The slot count of the instruction at pc (2 for lddw). */
static inline uint32_t cg_slots(const struct bpf_insn *in)
{
	return in->code == (BPF_LD | BPF_IMM | BPF_DW) ? 2 : 1;
}
/* Static byte offset in __cubpf_stack of r10 + v in frame `depth`, or -1 when out of range. */
long ptx_cg_stack_off(const struct cg *g, uint32_t depth, int64_t v, uint32_t size);
uint32_t ptx_cg_value_chunk(uint32_t value_size, int64_t v);
/* The bytes a helper reads at stack offset o of the record [v, end): the size of the program's
 * own access at o when it has one (so that stack slots stay registers), else the widest piece
 * aligned there; never across an 8-byte word of the record. */
uint32_t ptx_cg_chunk_at(const struct cg_prog *p, int64_t v, int64_t o, int64_t end);
/* The location of r10 + v (size bytes) in frame `depth`; -1 when outside the frame. */
int ptx_cg_sloc(struct cg *g, uint32_t depth, int64_t v, uint32_t size, struct sloc *l);
/* T (a register of `bits` = 32 or 64) = the location, sign-extended when sx. */
void ptx_cg_sload(struct cg *g, const struct sloc *l, const char *T, int bits, bool sx);
/* location = S (a register of `bits`, or an already truncated literal when bits == 0),
 * under the guard prefix ("" or "@%__cb_p0 "). */
void ptx_cg_sstore(struct cg *g, const struct sloc *l, const char *S, int bits, const char *guard);
/* T (a register of `bits` = 32 or 64) = the `size` bytes at [B+off] of state space sp ("" for
 * generic, ".local", ".global"), sign-extended when sx.  `align` is what is proven about the
 * address (ptx_av_align): below size, the access is split into naturally aligned pieces assembled
 * little-endian with shifts, since the GPU faults where eBPF allows any alignment. */
void ptx_cg_ld(struct cg *g, const char *sp, const char *T, int bits, const char *B, int64_t off,
	   uint32_t size, uint32_t align, bool sx);
/* [B+off] = S (a register of `bits`, or a literal when bits == 0), split as ptx_cg_ld; each store
 * under the guard prefix ("" or "@%__cb_p0 "). */
void ptx_cg_st(struct cg *g, const char *sp, const char *B, int64_t off, const char *S, int bits,
	   uint32_t size, uint32_t align, const char *guard);
/* T (.b64) = the `size` bytes at argument register r + off: a static stack location when r is
 * r10 + constant, else through the pointer (split when its alignment is not proven). */
int ptx_cg_arg_load(struct cg *g, uint32_t pc, uint32_t depth, int r, int64_t off, uint32_t size,
		const char *T);
/* Copies the map's value_size bytes from [r3] to [dst + 0 ...] (dst 8-aligned global). */
int ptx_cg_copy_value(struct cg *g, uint32_t pc, uint32_t depth, const struct vm_map_def *d,
		  const char *dst);
/* maps.c: map kinds beyond plain arrays, and ring buffer output. */
bool ptx_cg_map_kind_supported(uint32_t type);
int ptx_cg_map_op(struct cg *g, uint32_t pc, uint32_t id, uint32_t depth, const char *ip,
	      uint32_t idx, const struct vm_map_def *d);
int ptx_cg_ringbuf_output(struct cg *g, uint32_t pc, uint32_t depth, const char *ip);
int ptx_cg_helper(struct cg *g, uint32_t pc, uint32_t id, uint32_t depth, const char *ip);

#endif
