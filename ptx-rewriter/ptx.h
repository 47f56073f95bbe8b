/* ptx-rewriter: reading and editing PTX, compiling eBPF to PTX, injecting probes.
 *
 * A pure library: no CUDA calls, no LLVM.  The driver shim uses it at module load; a ptxas or
 * NVRTC interceptor can use it the same way.
 *
 * Guarantees
 *  - Instrumentation never changes what a kernel computes: probe code only reads the kernel's
 *    registers, uses registers and a .local stack of its own (names starting with "%__cb_" and
 *    "__cubpf_") and device memory the host gives it, never shared memory (a kernel's static
 *    shared size stays what it was), and every kernel that is not selected comes out byte for
 *    byte as it came in.
 *  - Everything not edited is copied byte for byte (comments, .loc lines, inline asm).
 *
 * Device-side maps (the contract with whoever loads the instrumented module, i.e. the shim):
 *  - An instrumented module that uses map i declares, in constant memory,
 *        .visible .const .align 8 .u64 __cubpf_map_<i>;
 *    (PTX_MAP_SYMBOL_FMT).  After loading the module the host must store there the device
 *    address of the map's storage (cuModuleGetGlobal + cuMemcpyHtoD), before the first launch.
 *    Every module may point at the same allocation, so all kernels and the host share the map.
 *    Constant memory because the kernel never writes it: the JIT keeps the pointer in the
 *    constant bank (an operand of the instruction that uses it) and needs no register or load.
 *  - Array maps (CUBPF_MAP_ARRAY, CUBPF_MAP_GPU_ARRAY) and globals (.bss/.data/.rodata, one
 *    entry): max_entries values, value k at byte k * ptx_map_value_stride(def).  The host copies
 *    vm_map_def.init there for .data/.rodata before launching.
 *  - Per-SM arrays (CUBPF_MAP_PERCPU_ARRAY), per-thread arrays (CUBPF_MAP_PERTHREAD_ARRAY),
 *    hash maps (CUBPF_MAP_HASH) and ring buffers (CUBPF_MAP_RINGBUF, CUBPF_MAP_GPU_RINGBUF):
 *    the layouts of ptx-rewriter/layout.h ("GPU map layouts", "GPU ring buffers"), zeroed
 *    by the host, which also fills the per-thread header and the ring buffer headers.  A ring
 *    buffer's __cubpf_map_<i> is its producers' part in device memory (heads, cached tails),
 *    whose header holds the addresses of the ring in pinned host memory.
 *  - Lookups and updates are plain device-memory code: never a round trip to the host.  Ring
 *    buffer output writes one batch per warp and call site to pinned host memory (contiguous
 *    field-major stores, one fence, one commit word); it reads the host's tail over PCIe only
 *    when the cached copy says the lane is full.
 *  - Enable words (ptx_inject_opts.enable_words): the module also declares
 *    `.visible .const .align 8 .u64 __cubpf_enable;` (layout.h, "enable words").
 *  - Blockretprobes: the module declares `.visible .const .align 8 .u64 __cubpf_blocks;`; the
 *    host stores there the address of its context's block table (layout.h, "thread block
 *    table"; one per context, zeroed).
 *
 * Probe placement:
 *  - kprobe: after the kernel's declarations, before its first instruction;
 *  - kretprobe: every `ret`/`exit` of a selected .entry (predicated ones included) becomes a
 *    branch to one exit block that runs the probes then returns;
 *  - blockprobe: at the kernel's entry, run by thread (0,0,0) only; blockretprobe: in the exit
 *    block, run by one lane of the last group of threads of the block to leave: thread (0,0,0)
 *    enters the block (key: %gridid and the linear %ctaid) in the context's block table, a
 *    count of its threads still running and its begin time, before a `bar.sync 0` at entry;
 *    the count is decremented once per group of lanes leaving together (layout.h, "thread
 *    block table": device memory, declared `__cubpf_blocks` and filled by the host as a map
 *    pointer is; never shared memory, which belongs to the application);
 *  - syncprobe: just before and just after every barrier (bar/barrier .sync/.arrive/.red,
 *    bar.warp.sync, barrier.cluster.*, mbarrier.try_wait/test_wait) and fence (fence.*,
 *    membar.*), under the instruction's own predicate, in the kernels and the .funcs they call;
 *  - bbprobe: at the first instruction of every basic block (ptx_basic_blocks), before it and
 *    unpredicated, in the kernels and the .funcs they call;
 *  - bbretprobe: in the exit block (as kretprobe), once per basic block of the kernel's body;
 *    each block's entries (ctx->entries), and for cubpf_kernel_ctx.insns / warp_insns read by
 *    a kretprobe also those of the elected lane (elect.sync on sm_90, the lowest active lane
 *    before), are counted at the block's first instruction in registers set to 0 where the
 *    body starts: a 32-bit counter per block on a loop (ptx_bblock.in_loop), a bit of a mask
 *    for the others (entered at most once); the kernel's own body only;
 *  - memprobe: just before every ld/st/atom/red (and ldu) of the global, shared, local and generic
 *    spaces, scalar and vector, under the access's own predicate: in the selected kernels' bodies
 *    and in the .funcs they call directly or transitively (direct calls; an indirect call's
 *    target is not known).  In a .func, ctx->kernel_id is the calling kernel's id when one
 *    selected kernel calls it, CUBPF_KERNEL_ID_SHARED when several do;
 *  - fentry/fexit: in each .func whose name the program's glob matches (mangled, demangled, or
 *    demangled before '('), among those the selected kernels call (directly or transitively)
 *    and, without a kernel filter, those no kernel calls directly: fentry before its first
 *    instruction, fexit just before each ret (under a predicated ret's own predicate).
 *    ctx->params are the .func's own parameters (.param ones loaded as a kernel's, .reg ones
 *    read from the register), kernel_id as for memprobes in .funcs (CUBPF_KERNEL_ID_SHARED for
 *    a function no kernel calls directly), func_id = ptx_kernel_id(the .func's name).
 */

/* Code generation (see codegen.c and helpers.c):
 *  - every RFC 9669 instruction, with the interpreter's semantics; bpf-to-bpf calls are inlined
 *    at each call site; the 512-byte stack is a .local array, and when every stack access is at
 *    a constant offset (the usual case) its slots become registers: no local memory at all;
 *  - context fields compile to what they name: %tid/%ntid/%ctaid/%nctaid, the kernel's .param
 *    (first 8 bytes, zero-extended), or a constant (kernel_id, nparams, and for memprobes size,
 *    space, op, insn_index, and the site's PTX line and .loc); ctx->addr is the access's own
 *    address expression;
 *  - memory accesses whose alignment is not proven (pointer provenance and constant offsets:
 *    map values are 8-aligned, the stack 16-aligned, other pointers unknown) are split into
 *    naturally aligned pieces, since the GPU faults where eBPF allows any alignment; atomics
 *    are never split and must be naturally aligned (as in Linux);
 *  - helpers: map_lookup/update/delete_elem on array, per-SM, per-thread and hash maps and
 *    globals (device memory, through __cubpf_map_<i>), ringbuf_output (constant sizes up to
 *    CUBPF_RB_MAX_RECORD = 4096 bytes; a warp's callers write one batch), ktime_get_ns and get_globaltimer (%globaltimer), get_clock (%clock64),
 *    get_smp_processor_id and get_sm_id (%smid), get_warp_id, get_lane_id, get_block_idx,
 *    get_block_dim, get_thread_idx, get_grid_dim, gpu_membar (membar.gl), get_active_mask,
 *    get_active_count (popc of activemask), is_warp_leader (lowest active lane),
 *    warp_count_unique (match.any.sync + vote.ballot: sm_70 and later), warp_sum
 *    (redux.sync on sm_80 and later, shuffles on sm_70),
 *    probe_read(_user) (byte copy), trace_printk and gpu_puts (vprintf; with a constant format
 *    the arguments are packed as C varargs, else 8 bytes each);
 *  - counters (atomic add of a constant without fetch) are warp-aggregated on sm_70+.
 * Not (yet) supported, each refused with a message: ringbuf_reserve/submit/discard (host
 * kinds only), ringbuf_output of a runtime size, hash keys over 64 bytes, kfuncs, legacy packet
 * loads, context reads at a runtime offset
 * (ctx->params[i] with i not constant), the context pointer passed to helpers or stored.
 * Not probed: accesses through cp.async/ldmatrix/tex/suld, .param and .const spaces, exits
 * inside .funcs. */

/* ctx->kernel_id of memory probes in a device function called by several kernels. */
#define CUBPF_KERNEL_ID_SHARED 0xffffffffu
#ifndef CUBPF_PTX_H
#define CUBPF_PTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptx-rewriter/layout.h"
#include "vm/vm.h"

#define PTX_ERRLEN 256
#define PTX_MAP_SYMBOL_FMT "__cubpf_map_%u"

/* ---- reader ------------------------------------------------------------------------------- */

enum ptx_space {
	PTX_SPACE_GENERIC = 0, /* values equal enum cubpf_mem_space */
	PTX_SPACE_GLOBAL = 1,
	PTX_SPACE_SHARED = 2,
	PTX_SPACE_LOCAL = 3,
	PTX_SPACE_CONST = 4,
	PTX_SPACE_PARAM = 5,
	PTX_SPACE_OTHER = 6,   /* .tex, .surf, ... */
};

/* A kernel or device-function parameter: `.param .align 8 .b8 name[16]`, `.param .u64 name`. */
struct ptx_param {
	char *name;
	char type[16];         /* "u64", "b8", ... (without the dot) */
	uint32_t size;         /* total bytes (element size times array count) */
	uint32_t align;
	bool is_ptr_attr;      /* had a .ptr attribute */
	bool is_reg;           /* declared .reg (a .func without the ABI): a register, not .param */
};

/* One instruction (a statement ending in ';' that is not a declaration or directive). */
struct ptx_insn {
	size_t off, len;       /* its bytes in the module text, predicate guard included */
	size_t line_off;       /* start of its line (probes go there) */
	char *pred;            /* guard register ("%p1"), NULL when none */
	bool pred_neg;         /* @!%p */
	char *opcode;          /* "ld.global.nc.v4.f32" */
	char **ops;            /* operands as written, trimmed: "%r1", "[%rd2+8]", "{%f1,%f2}" */
	uint32_t op_cnt;
	uint32_t depth;        /* block nesting depth inside the body (0 = the body itself) */
};

/* A register declaration `.reg .b64 %rd<12>;` or `.reg .pred %p;`. */
struct ptx_regdecl {
	char *name;            /* "%rd" for the parametrized form, the full name otherwise */
	char type[12];         /* "b64", "pred", ... */
	uint32_t count;        /* N of <N>, 0 for a single register */
};

struct ptx_func {
	char *name;
	bool is_entry;         /* .entry (kernel) rather than .func */
	bool has_body;         /* false for prototypes and .extern declarations */
	size_t start;          /* first byte of the declaration (linkage directives included) */
	size_t body_open;      /* the body's '{' */
	size_t body_close;     /* the body's closing '}' */
	size_t first_insn_line;/* where instructions start (after leading declarations) */
	struct ptx_param *params;
	uint32_t param_cnt;
	struct ptx_param *rets;  /* a .func's return parameters: "(.param .b32 r)" */
	uint32_t ret_cnt;
	struct ptx_insn *insns;
	uint32_t insn_cnt;
	struct ptx_regdecl *regs;
	uint32_t reg_cnt;
};

struct ptx_module {
	char *text;            /* a NUL-terminated copy of the input */
	size_t len;
	char version[16];      /* ".version 8.0" -> "8.0" */
	char target[64];       /* ".target sm_90a" -> "sm_90a" */
	uint32_t address_size; /* 64 (default) or 32 */
	size_t header_end;     /* just after the last of .version/.target/.address_size */
	struct ptx_func *funcs;
	uint32_t func_cnt;
};

/* Parses PTX text (need not be NUL-terminated).  Returns 0 and *out, or -1 and a message
 * ("line N: ...") in err.  Never reads past len. */
int ptx_parse(const char *text, size_t len, struct ptx_module **out, char *err, size_t errlen);
void ptx_module_free(struct ptx_module *m);
/* How many times ptx_parse() ran in this process (relaxed counter, never reset): the tests
 * measure the module-load path with it. */
unsigned long ptx_parses(void);
const struct ptx_func *ptx_find_func(const struct ptx_module *m, const char *name);

/* Memory access of an instruction, or false when it is not ld/ldu/st/atom/red. */
struct ptx_mem_access {
	enum ptx_space space;
	uint32_t op;           /* enum cubpf_mem_op */
	uint32_t size;         /* bytes, vector elements included */
	const char *addr;      /* the address operand, without brackets, inside insn->ops */
	size_t addr_len;
};
bool ptx_insn_mem_access(const struct ptx_insn *insn, struct ptx_mem_access *acc);

/* Barrier or fence of an instruction (syncprobe sites), or false when it is neither. */
struct ptx_sync {
	uint32_t kind;         /* enum cubpf_sync_kind */
	uint32_t id;           /* literal barrier number, or CUBPF_SYNC_ID_NONE */
	const char *id_reg;    /* the barrier number's register (inside insn->ops), or NULL */
};
bool ptx_insn_sync(const struct ptx_insn *insn, struct ptx_sync *sync);

/* A basic block of a function (bbprobe sites, ptx-rewriter/blocks.c): it starts at the body's
 * first instruction, at an instruction a label precedes, or after a branch, return or exit. */
struct ptx_bblock {
	uint32_t first;        /* index of its first instruction in the function's insns */
	uint32_t count;        /* its instructions */
	uint32_t line;         /* line of its first instruction in the module text (from 1) */
	uint32_t src_file;     /* the .loc in force at its first instruction (0, 0: none) */
	uint32_t src_line;
	uint32_t classes[CUBPF_OP_CLASSES]; /* its instructions of each enum cubpf_op_class */
	bool in_loop;          /* on a cycle of the flow graph: a thread may enter it again */
	bool self_loop;        /* a loop of this block alone that a thread enters at most once,
				* only by falling into it: its last instruction branches back to
				* its start, nothing else branches there, it is on no other cycle
				* and calls nothing */
	size_t enter_off;      /* self_loop: where code runs once per entry (the start of the line
				* after the previous block's last instruction, before the label) */
	bool uniform;          /* self_loop whose branch back is the same in every lane entering
				* it together (ptx_mark_uniform_loops) */
	uint32_t succ[2];      /* the blocks control may go to next (nsucc of them), unless */
	uint8_t nsucc;
	bool succ_any;         /* it may go to any labelled block (brx, a label name reused) */
};
/* The blocks of f in PTX order (their index is ctx->block_id): 0 and a malloc'ed array, or -1
 * when out of memory. */
int ptx_basic_blocks(const struct ptx_module *m, const struct ptx_func *f,
		     struct ptx_bblock **out, uint32_t *count);
/* Marks the self_loop blocks of f whose branch back depends only on values that are the same
 * in every lane that enters them together (uniform): the lanes then run every iteration
 * together, and a warp's executions of the block are those of any one of its lanes. */
void ptx_mark_uniform_loops(const struct ptx_func *f, struct ptx_bblock *v, uint32_t n);
/* enum cubpf_op_class of an instruction. */
uint32_t ptx_insn_class(const struct ptx_insn *insn);

/* Demangles an Itanium C++ name as nvcc emits kernel names ("_Z6vecaddPfS_S_i" ->
 * "vecadd(float*, float*, float*, int)"): nested names, namespaces, templates with type and
 * integer arguments, builtin, pointer, reference, const/volatile and substitutions.  Not
 * covered: function types as parameters, lambdas' closure types, expressions in templates;
 * these return -1 and callers use the mangled name.  Plain C names are copied. */
int ptx_demangle(const char *mangled, char *out, size_t outlen);
/* Glob (fnmatch) against the mangled name, the demangled one, or its part before '('. */
bool ptx_kernel_matches(const char *glob, const char *mangled);

/* ---- eBPF -> PTX ----------------------------------------------------------------------------- */

/* One eBPF program to compile.  Layout as in vm/vm.h: subprograms appended, pseudo calls
 * relative, map references as map indexes. */
struct ptx_prog {
	const char *name;
	enum vm_prog_kind kind;
	const char *attach;            /* kernel glob for GPU kinds ("*" when NULL) */
	const struct bpf_insn *insns;
	uint32_t insn_cnt;
};

/* The GPU programs (kprobe, kretprobe, memprobe) of a loaded object, as ptx_progs pointing into
 * it; returns how many were written (at most max).  Verify them (vm_verify) before compiling. */
static inline uint32_t ptx_progs_from_object(const struct vm_object *obj, struct ptx_prog *out,
					     uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < obj->prog_cnt && n < max; i++) {
		const struct vm_prog *p = &obj->progs[i];
		if (vm_kind_is_gpu(p->kind))
			out[n++] = (struct ptx_prog){p->name, p->kind, p->attach, p->insns, p->insn_cnt};
	}
	return n;
}

uint32_t ptx_map_value_stride(const struct vm_map_def *def);

/* A growing text buffer, used for all generated code. */
struct ptx_buf {
	char *data;
	size_t len, cap;
	bool oom;
};
void ptx_buf_append(struct ptx_buf *b, const char *s, size_t n);
void ptx_buf_printf(struct ptx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ptx_buf_free(struct ptx_buf *b);

/* Compiles a VM_PROG_RAW program into a device function
 *     .func (.param .b64 ret) NAME(.param .b64 mem, .param .b64 len)
 * (r1 = mem, r2 = len, the result is r0), appended to out.  Map symbols are declared by the
 * caller (ptx_gen_map_decls).  Returns 0, or -1 with a message. */
int ptx_gen_raw_func(const struct ptx_prog *prog, const struct vm_map_def *maps,
		     uint32_t map_cnt, const char *fname, struct ptx_buf *out, char *err,
		     size_t errlen);
/* The same; with fold, constants, branches and constant-key lookups are evaluated at compile
 * time (what instrumentation does for probes).  Tests compile the conformance vectors both
 * ways. */
int ptx_gen_raw_func_opt(const struct ptx_prog *prog, const struct vm_map_def *maps,
			 uint32_t map_cnt, const char *fname, bool fold, struct ptx_buf *out,
			 char *err, size_t errlen);
/* Declarations every generated function may need: map pointers and vprintf. */
void ptx_gen_module_decls(uint32_t map_cnt, bool vprintf, struct ptx_buf *out);

/* ---- instrumentation ------------------------------------------------------------------------- */

struct ptx_inject_opts {
	const struct ptx_prog *progs;  /* GPU programs (other kinds are skipped) */
	uint32_t prog_cnt;
	const struct vm_map_def *maps;
	uint32_t map_cnt;
	const char *kernel_glob;       /* extra filter on kernels (cubpf -k); NULL: none */
	/* ctx->kernel_id of a kernel; NULL: ptx_kernel_id (a hash of the mangled name). */
	uint32_t (*kernel_id)(void *user, const char *mangled);
	void *user;
	/* Honour the enable words (layout.h): declare __cubpf_enable and, at each probe site,
	 * load the kernel's word once and skip program p (its index in progs) when its bit is 0.
	 * The host must then store the words' address in __cubpf_enable before any launch. */
	bool enable_words;
	/* Add no shared memory to kernels (CUBPF_SHARED_SUMS=0): deferred counters
	 * (ptx-rewriter/accs.c) then reduce to the maps once per warp instead of once per thread
	 * block, and blockretprobes keep their blocks' state in the context's block table
	 * (layout.h) instead of shared memory. */
	bool no_shared;
};

struct ptx_inject_report {
	uint32_t kernels;              /* .entry functions in the module */
	uint32_t instrumented;         /* kernels that received at least one probe */
	uint32_t funcs;                /* .funcs that received probes (memory, sync, fentry/fexit) */
	uint32_t entry_sites, exit_sites, mem_sites;
	uint32_t block_sites;          /* thread block begins and ends that run probes */
	uint32_t sync_sites;           /* barriers and fences probed (before and after: one site) */
	uint32_t fentry_sites, fexit_sites; /* device function entries and returns probed */
	char label[96];                /* the first .entry's name, with ", ..." when there are
					* more ("" when none): what logs call the module, read
					* from the parse the rewrite used */
	uint32_t bb_sites;             /* basic blocks that run bbprobes */
};

/* FNV-1a of the mangled name: the default kernel id. */
uint32_t ptx_kernel_id(const char *mangled);

/* Instruments a module.  On success returns 0 and a malloc'ed NUL-terminated text in *out
 * (identical to the input when nothing matched).  On failure -1 and a message. */
int ptx_instrument(const char *text, size_t len, const struct ptx_inject_opts *opts,
		   char **out, size_t *out_len, struct ptx_inject_report *rep, char *err,
		   size_t errlen);

/* The largest block (threads) a kernel using `regs` registers per thread can launch on sm_70 to
 * sm_90 (65536 registers per block, allocated per warp in units of 256); 1024 when regs <= 0. */
uint32_t ptx_max_block(int32_t regs);
/* The .maxnreg that lets an instrumented kernel using `instrumented` registers launch the largest
 * block its original (`original` registers; <= 0: unknown, any block) could, or 0 when it
 * already can. */
uint32_t ptx_register_limit(int32_t instrumented, int32_t original);

/* Adds `.maxnreg maxnreg[i]` to the declaration of each .entry named kernels[i] that declares no
 * launch bounds of its own (.maxnreg, .maxntid, .reqntid, .minnctapersm, .maxclusterrank), so
 * that ptxas keeps it within that many registers per thread.  Returns the number of kernels
 * changed with the new text in *out (NUL-terminated, malloc'ed; NULL when 0), or -1 with err. */
int ptx_limit_registers(const char *text, size_t len, const char *const *kernels,
			const uint32_t *maxnreg, size_t n, char **out, size_t *out_len, char *err,
			size_t errlen);

/* What ptxas -fmad=false does, in the PTX: every floating-point add, sub and mul without a
 * rounding modifier gets .rn, so that no JIT fuses them into an FMA (the driver's JIT has no
 * -fmad option for PTX).  Returns how many instructions changed, with the new text in *out
 * (NUL-terminated, malloc'ed, always set), or -1 when out of memory. */
int ptx_no_contraction(const char *text, size_t len, char **out, size_t *out_len);

/* How many float adds and subs without a rounding modifier take, as an operand, a value that may
 * be the product of a float mul without one (directly, or through copies, conversions, selects,
 * negations, shuffles and memory): the pairs ptxas -fmad=true may fuse into an FMA and -fmad=false
 * keeps apart.  0 means the option cannot change what the code computes.  -1 when out of
 * memory.  Conservative: a register written by several instructions counts as any of them. */
int ptx_fusable_adds(const char *text, size_t len);

/* Whether the PTX a cubin keeps (e, from cubin_embedded_ptx on the same bytes) can stand in for
 * its machine code, as far as the files tell: it is there, it is the cubin's code (same kernels
 * and parameters), and ptxas's options are recorded or cannot have changed what it computes
 * (no .note.nv.tkinfo and no multiply-add pair, ptx_fusable_adds).  Compiling it with those
 * options is the caller's part (the shim: with a current context).  The one decision of the shim
 * and of `cubpf inspect`.  Returns 1, 0 with why, -1 when out of memory, or
 * PTX_EMBEDDED_FMAD_UNKNOWN with why: usable once -fmad is known (the shim reproduces the
 * cubin's machine code with each value). */
#define PTX_EMBEDDED_FMAD_UNKNOWN 2
struct cubin_embedded_ptx;
int ptx_embedded_verdict(const void *cubin, size_t size, const struct cubin_embedded_ptx *e,
			 char *why, size_t n);

/* ---- patch functions (the Sanitizer backend, patch.c) -----------------------------------------
 * Kernels shipped as SASS only cannot be rewritten; NVIDIA's Compute Sanitizer patching API can
 * call a device function at chosen instructions of them.  These functions compile GPU programs
 * into such functions: PTX to be assembled in tools-patch mode
 * (`ptxas --compile-as-tools-patch -arch=sm_XX`), one per site kind, named
 * ptx_patch_func_name(site).  What a program sees there:
 *  - kprobe at block entry and kretprobe at block exit, run by every thread (as on the PTX
 *    path): %tid/%ntid/%ctaid/%nctaid, kernel_id, nparams and params[] from the launch record;
 *  - memprobe at global, shared and local accesses and at cp.async (the global source):
 *    addr (the address the Sanitizer reports), size, space (constant per site), op (from the
 *    access's flags; LOAD for cp.async), kernel_id, tid and ctaid; ctx->insn_index is refused
 *    (it numbers PTX instructions);
 *  - blockprobe, blockretprobe and syncprobe are not patched (yet): their programs are left out;
 *  - maps are the same device allocations as on the PTX path, reached through the record.
 * The launch record's layout is layout.h's ("Patch functions' launch record"). */
enum ptx_patch_site {             /* values: the Sanitizer's instruction ids */
	PTX_PATCH_BLOCK_ENTER = 1,
	PTX_PATCH_BLOCK_EXIT = 2,
	PTX_PATCH_GLOBAL_ACCESS = 3,
	PTX_PATCH_SHARED_ACCESS = 4,
	PTX_PATCH_LOCAL_ACCESS = 5,
	PTX_PATCH_MEMCPY_ASYNC = 14,
};
#define PTX_PATCH_MAX_SITES 6
const char *ptx_patch_site_name(enum ptx_patch_site site);
/* The sites a program of `kind` is patched at (at most max written); 0: not patchable. */
uint32_t ptx_patch_sites(enum vm_prog_kind kind, enum ptx_patch_site *out, uint32_t max);
void ptx_patch_func_name(enum ptx_patch_site site, char *out, size_t n);
/* Appends the patch function for `site` running every program of progs[] of the site's kind
 * (program p under bit p of the record's `progs`) to out, named fname; *vprintf |= whether it
 * calls vprintf (the module then declares it).  sm: the target's SM number (70 and later use
 * warp aggregation).  0, or -1 with a message (a refused context field, a program the code
 * generator refuses). */
int ptx_gen_patch_func(const struct ptx_prog *progs, uint32_t prog_cnt,
		       const struct vm_map_def *maps, uint32_t map_cnt, enum ptx_patch_site site,
		       int sm, const char *fname, struct ptx_buf *out, bool *vprintf, char *err,
		       size_t errlen);
/* A whole patch module for target sm_<sm>: a function per site that some program needs. */
struct ptx_patch_module {
	struct ptx_buf ptx;                       /* the PTX text (free with ptx_buf_free) */
	enum ptx_patch_site sites[PTX_PATCH_MAX_SITES];
	uint32_t site_cnt;
};
int ptx_gen_patch_module(const struct ptx_prog *progs, uint32_t prog_cnt,
			 const struct vm_map_def *maps, uint32_t map_cnt, int sm,
			 struct ptx_patch_module *pm, char *err, size_t errlen);

#endif /* CUBPF_PTX_H */
