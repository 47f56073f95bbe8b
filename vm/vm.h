/* vm: eBPF objects, the verifier, the host interpreter, host maps and helpers, the disassembler.
 *
 * Instruction format: `struct bpf_insn` and the opcode macros of <linux/bpf.h> (RFC 9669).
 * A loaded object (struct vm_object) is what every engine consumes: the verifier, the host
 * interpreter, and the PTX code generator (ptx-rewriter/).  After loading, each program is
 * self-contained:
 *   - bpf-to-bpf calls: the .text subprograms a program calls are appended after its own code
 *     and every `call` with src_reg == BPF_PSEUDO_CALL has imm = (target - (pc + 1)), as the
 *     kernel expects; prog->subprogs lists the start of each function (subprogs[0] == 0).
 *   - maps: `lddw rX, map` has src_reg == BPF_PSEUDO_MAP_FD and imm == index in obj->maps;
 *     `lddw rX, &global + off` (.rodata/.data/.bss and their .NAME variants) has
 *     src_reg == BPF_PSEUDO_MAP_VALUE, insn[0].imm == map index, insn[1].imm == byte offset.
 * Nothing here calls CUDA.  Every failing call returns an error with a message.
 */
#ifndef CUBPF_VM_H
#define CUBPF_VM_H

#include <linux/bpf.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vm/include/cubpf_abi.h"

/* Opcode bits newer than some <linux/bpf.h> copies (RFC 9669). */
#ifndef BPF_MEMSX
#define BPF_MEMSX 0x80 /* sign-extending load: BPF_LDX | BPF_MEMSX | size */
#endif
#ifndef BPF_JCOND
#define BPF_JCOND 0xe0
#endif

#define VM_ERRLEN 256
#define VM_NAME_MAX 64
#define VM_MAX_INSNS 1000000     /* hard cap on a program's size (verifier: see vm_verify_opts) */
#define VM_STACK_SIZE 512        /* bytes of stack per frame */
#define VM_MAX_CALL_DEPTH 8      /* frames, the main function included */

/* ---- loaded objects ------------------------------------------------------------------------ */

enum vm_prog_kind {
	VM_PROG_KPROBE = 0,    /* SEC("kprobe/GLOB"):    GPU kernel entry, ctx cubpf_kernel_ctx */
	VM_PROG_KRETPROBE,     /* SEC("kretprobe/GLOB"): GPU kernel exit,  ctx cubpf_kernel_ctx */
	VM_PROG_MEMPROBE,      /* SEC("memprobe/GLOB"):  GPU memory access, ctx cubpf_mem_ctx */
	VM_PROG_UPROBE,        /* SEC("uprobe/FUNC"):    host driver call,  ctx cubpf_api_ctx */
	VM_PROG_URETPROBE,     /* SEC("uretprobe/FUNC"): host driver return, ctx cubpf_api_ctx */
	VM_PROG_RAW,           /* raw programs (conformance vectors): r1 = memory, r2 = its length */
	/* issue 32 (added after RAW: vm_prog_kind is internal, but its order is kept) */
	VM_PROG_BLOCKPROBE,    /* SEC("blockprobe/GLOB"):    thread block begin, ctx cubpf_block_ctx */
	VM_PROG_BLOCKRETPROBE, /* SEC("blockretprobe/GLOB"): thread block end, ctx cubpf_block_ctx */
	VM_PROG_SYNCPROBE,     /* SEC("syncprobe/GLOB"): before/after barriers, ctx cubpf_sync_ctx */
	VM_PROG_FENTRY,        /* SEC("fentry/GLOB"): device function entry, ctx cubpf_func_ctx */
	VM_PROG_FEXIT,         /* SEC("fexit/GLOB"):  device function return, ctx cubpf_func_ctx */
	VM_PROG_BBPROBE,       /* SEC("bbprobe/GLOB"): basic block entry, ctx cubpf_bb_ctx */
	VM_PROG_BBRETPROBE,    /* SEC("bbretprobe/GLOB"): per block at kernel exit, cubpf_bb_ctx */
	VM_PROG_KIND_COUNT
};

/* Bit of a kind in a mask (helper availability). */
#define VM_KIND_BIT(k) (1u << (k))
#define VM_KINDS_GPU (VM_KIND_BIT(VM_PROG_KPROBE) | VM_KIND_BIT(VM_PROG_KRETPROBE) | \
		      VM_KIND_BIT(VM_PROG_MEMPROBE) | VM_KIND_BIT(VM_PROG_BLOCKPROBE) | \
		      VM_KIND_BIT(VM_PROG_BLOCKRETPROBE) | VM_KIND_BIT(VM_PROG_SYNCPROBE) | \
		      VM_KIND_BIT(VM_PROG_FENTRY) | VM_KIND_BIT(VM_PROG_FEXIT) | \
		      VM_KIND_BIT(VM_PROG_BBPROBE) | VM_KIND_BIT(VM_PROG_BBRETPROBE))
#define VM_KINDS_HOST (VM_KIND_BIT(VM_PROG_UPROBE) | VM_KIND_BIT(VM_PROG_URETPROBE))
#define VM_KINDS_ALL ((1u << VM_PROG_KIND_COUNT) - 1)

static inline bool vm_kind_is_gpu(enum vm_prog_kind k)
{
	return (VM_KINDS_GPU >> k) & 1;
}

/* Whether a conditional jump `op` (BPF_JEQ ... BPF_JSLE, BPF_JSET) is taken for operands a and b,
 * compared as 64-bit values (JMP) or as their low 32 bits (JMP32), as RFC 9669 defines: the one
 * definition the verifier's constant folding and the PTX generator's share (inline: the PTX
 * library links without vm's). */
static inline bool vm_jmp_taken(uint8_t op, uint64_t a, uint64_t b, bool is64)
{
	int64_t sa = is64 ? (int64_t)a : (int32_t)a, sb = is64 ? (int64_t)b : (int32_t)b;
	if (!is64)
		a = (uint32_t)a, b = (uint32_t)b;
	switch (op) {
	case BPF_JEQ: return a == b;
	case BPF_JNE: return a != b;
	case BPF_JGT: return a > b;
	case BPF_JGE: return a >= b;
	case BPF_JLT: return a < b;
	case BPF_JLE: return a <= b;
	case BPF_JSGT: return sa > sb;
	case BPF_JSGE: return sa >= sb;
	case BPF_JSLT: return sa < sb;
	case BPF_JSLE: return sa <= sb;
	case BPF_JSET: return (a & b) != 0;
	}
	return false;
}

/* Where a map comes from. */
enum vm_map_origin {
	VM_MAP_USER = 0,   /* a map definition in .maps (BTF) or maps (legacy) */
	VM_MAP_RODATA,     /* .rodata*: global constants; read-only for programs */
	VM_MAP_DATA,       /* .data*:   initialised globals */
	VM_MAP_BSS,        /* .bss*:    zero-initialised globals */
};

struct vm_map_def {
	char name[VM_NAME_MAX];   /* symbol name, or the section name for globals (".rodata") */
	uint32_t type;            /* enum cubpf_map_type (Linux numbers) */
	uint32_t key_size;
	uint32_t value_size;
	uint32_t max_entries;
	uint32_t flags;           /* map_flags: BPF_F_RDONLY_PROG, ... */
	enum vm_map_origin origin;
	/* Globals: the initial contents of the single value (key 0), value_size bytes; NULL for
	 * .bss and user maps (zeroes). */
	uint8_t *init;
};

/* Programs may write the map's values (false for .rodata and BPF_F_RDONLY_PROG). */
static inline bool vm_map_prog_writable(const struct vm_map_def *m)
{
	return m->origin != VM_MAP_RODATA && !(m->flags & BPF_F_RDONLY_PROG);
}

struct vm_prog {
	char name[VM_NAME_MAX];   /* the function's symbol name */
	char section[128];        /* the ELF section name, e.g. "kprobe/vec_add*" */
	enum vm_prog_kind kind;
	char attach[128];         /* the part after the prefix: kernel glob or driver function */
	struct bpf_insn *insns;   /* relocated code, subprograms appended (see top of file) */
	uint32_t insn_cnt;        /* in 8-byte slots (lddw counts 2) */
	uint32_t *subprogs;       /* start index of each function; subprogs[0] == 0 */
	uint32_t subprog_cnt;
};

struct vm_object {
	char name[VM_NAME_MAX];   /* file name without directories, or "memory" */
	struct vm_prog *progs;
	uint32_t prog_cnt;
	struct vm_map_def *maps;
	uint32_t map_cnt;
	char license[64];
};

/* Loads an eBPF ELF object (clang -O2 -g -target bpf) from memory (copied; `data` may be freed
 * afterwards) or from a file.  Returns 0 and *out, or -1 with a message in err. */
int vm_object_load(const void *data, size_t size, const char *name, struct vm_object **out,
		   char *err, size_t errlen);
int vm_object_load_file(const char *path, struct vm_object **out, char *err, size_t errlen);
/* Reads a whole file (at most 1 GiB) into a malloc'ed buffer; NULL with "PATH: reason" in err. */
uint8_t *vm_read_file(const char *path, size_t *size, char *err, size_t errlen);
void vm_object_free(struct vm_object *obj);

/* A one-program object around raw instructions (no maps): conformance vectors, tests. */
struct vm_object *vm_object_from_insns(const struct bpf_insn *insns, uint32_t cnt,
				       enum vm_prog_kind kind, char *err, size_t errlen);

/* Program kind from a section name ("kprobe/...", ...); -1 when the name is not a program. */
int vm_prog_kind_from_section(const char *section, const char **attach);
const char *vm_prog_kind_name(enum vm_prog_kind kind);

/* ---- helpers ---------------------------------------------------------------------------------- */

enum vm_arg_type {
	VM_ARG_NONE = 0,          /* no more arguments */
	VM_ARG_ANYTHING,          /* any initialised value */
	VM_ARG_CONST_MAP_PTR,     /* lddw rX, map */
	VM_ARG_PTR_TO_MAP_KEY,    /* readable key_size bytes of the map in the previous argument */
	VM_ARG_PTR_TO_MAP_VALUE,  /* readable value_size bytes of that map */
	VM_ARG_PTR_TO_MEM,        /* readable memory whose size is the next argument */
	VM_ARG_PTR_TO_UNINIT_MEM, /* writable memory (need not be initialised), size next */
	VM_ARG_CONST_SIZE,        /* a bounded size > 0 for the previous pointer argument */
	VM_ARG_CONST_SIZE_OR_ZERO,/* same, 0 allowed */
	VM_ARG_PTR_TO_CTX,        /* the program's context */
	VM_ARG_PTR_TO_U64_OUT,    /* writable 8 bytes (GPU index helpers' x/y/z outputs) */
	VM_ARG_CONST_STR,         /* NUL-terminated string in a read-only map (.rodata) */
	VM_ARG_CONST_ALLOC_SIZE,  /* a known constant > 0: the size of a ring buffer record */
	VM_ARG_PTR_TO_ALLOC_MEM,  /* the start of a reserved record; the call releases it */
	VM_ARG_PTR_TO_READ_SRC,   /* copied from for the size argument before it: a scalar is
				   * any address (read without faulting), a pointer is checked
				   * as a read of that size from its object */
	VM_ARG_DELAY_NS,          /* a scalar proven <= CUBPF_MAX_DELAY_NS (bpf_gpu_delay_ns) */
};

enum vm_ret_type {
	VM_RET_INTEGER = 0,       /* r0 is a scalar */
	VM_RET_VOID,              /* r0 is not to be read */
	VM_RET_MAP_VALUE_OR_NULL, /* pointer into the map of argument 1, or NULL: check it */
	VM_RET_ALLOC_MEM_OR_NULL, /* a reserved record of argument 2's size, or NULL; must be
				   * released (submit/discard) on every path */
};

struct vm_helper_proto {
	uint32_t id;              /* enum cubpf_helper_id */
	const char *name;         /* "bpf_map_lookup_elem" */
	enum vm_ret_type ret;
	enum vm_arg_type args[5];
	uint32_t kinds;           /* VM_KIND_BIT mask of the program kinds allowed to call it */
};

/* The prototype of helper `id`, or NULL when there is no such helper. */
const struct vm_helper_proto *vm_helper_proto(uint32_t id);
/* All prototypes (for listings and code generators); *count receives their number. */
const struct vm_helper_proto *vm_helper_protos(size_t *count);

/* ---- verifier --------------------------------------------------------------------------------- */

struct vm_verify_opts {
	uint32_t max_insns;        /* program size limit; 0 = 1,000,000 (Linux's) */
	uint32_t max_processed;    /* instructions the verifier may walk; 0 = 1,000,000 */
	int log_level;             /* 0: only the rejection, 1: + summary, 2: + every state */
	uint8_t *dead;             /* GPU kinds, optional: insn_cnt bytes, set to 1 at each
				    * instruction no feasible path reaches (code behind a branch
				    * the walk proved never taken), for vm_prog_drop_dead.  Without
				    * it such code is rejected, since the code generator would
				    * compile instructions none of the walk's checks covered */
};

struct vm_verify_info {
	uint32_t insns_processed;  /* instructions walked over all paths */
	uint32_t states;           /* states kept for pruning */
	uint32_t max_stack;        /* deepest stack use of the main function, bytes */
	uint32_t max_call_depth;   /* frames */
	int reject_insn;           /* index of the rejected instruction, or -1 */
	char reason[256];          /* one line: "insn N: why" ("" when verified), for warnings */
};

/* Verifies program `prog` of `obj`.  Returns 0 when it is safe, -1 when rejected.  The log (if
 * log != NULL) receives the reason: "N: (op) disassembly\n...reason"; it is always
 * NUL-terminated and truncated to log_size.  opts and info may be NULL. */
int vm_verify(const struct vm_object *obj, uint32_t prog, const struct vm_verify_opts *opts,
	      struct vm_verify_info *info, char *log, size_t log_size);

/* Replaces every instruction `dead` marks (vm_verify_opts.dead of this program) with `exit`,
 * as Linux sanitizes dead code: what no feasible path reaches is never compiled as it was, and
 * a path into it (a branch the walk proved never taken) leads nowhere.  Lets GPU programs keep
 * code that `const volatile` settings switch off.  Returns the instructions replaced. */
uint32_t vm_prog_drop_dead(struct vm_prog *p, const uint8_t *dead);

/* vm_verify, then vm_prog_drop_dead for GPU kinds: for callers that compile the program.
 * Same returns as vm_verify. */
int vm_verify_sanitize(struct vm_object *obj, uint32_t prog, const struct vm_verify_opts *opts,
		       struct vm_verify_info *info, char *log, size_t log_size);

/* ---- disassembler ----------------------------------------------------------------------------- */

/* One instruction (two slots for lddw: `insns` must hold `avail` >= 2 then) in llvm-objdump-like
 * syntax, e.g. "r0 = *(u32 *)(r1 + 48)".  `obj` (may be NULL) names maps.  Returns the number of
 * slots consumed (1 or 2). */
int vm_disasm_insn(const struct bpf_insn *insns, size_t avail, const struct vm_object *obj,
		   char *buf, size_t len);
/* Same, for the instruction at index `pc` of its program: jump and call targets are shown as
 * absolute indices too ("goto +3 <12>"). */
int vm_disasm_insn_at(const struct bpf_insn *insns, size_t avail, size_t pc,
		      const struct vm_object *obj, char *buf, size_t len);

/* ---- host maps and the interpreter ----------------------------------------------------------- */

struct vm_runtime;  /* the maps of one loaded object, shared by its programs; thread-safe */
struct vm_exec;     /* one program prepared for the interpreter (pre-decoded) */

/* Output hooks: trace_printk lines and ring-buffer records.  Called from the probing thread. */
struct vm_output {
	void (*printk)(void *user, const char *line);          /* NULL: stderr */
	void *user;
};

struct vm_runtime *vm_runtime_new(const struct vm_object *obj, char *err, size_t errlen);
void vm_runtime_free(struct vm_runtime *rt);
void vm_runtime_set_output(struct vm_runtime *rt, const struct vm_output *out);

/* Map access from the host (tools, the shim).  Key and value sizes are those of the map's
 * definition.  Return 0, or -1 (absent key, full map, bad index). */
int vm_map_lookup(struct vm_runtime *rt, uint32_t map, const void *key, void *value);
int vm_map_update(struct vm_runtime *rt, uint32_t map, const void *key, const void *value,
		  uint64_t flags);
int vm_map_delete(struct vm_runtime *rt, uint32_t map, const void *key);
/* Iteration: key == NULL gives the first key.  Returns 0 and next, or -1 at the end. */
int vm_map_next_key(struct vm_runtime *rt, uint32_t map, const void *key, void *next);
/* Ring buffer maps: takes the oldest record (up to cap bytes) into buf.  Returns its length,
 * 0 when empty. */
size_t vm_ringbuf_consume(struct vm_runtime *rt, uint32_t map, void *buf, size_t cap);
/* Per-CPU arrays: the host keeps vm_percpu_slots() copies of each value; lookups from the
 * host return slot 0, vm_map_lookup_percpu gives all of them back to back. */
uint32_t vm_percpu_slots(void);
int vm_map_lookup_percpu(struct vm_runtime *rt, uint32_t map, const void *key, void *values);

/* Array maps whose values live in the caller's memory (the shim shares a map with the GPU
 * programs through memory both sides reach): `storage` (8-byte aligned, at least max_entries x
 * the value size rounded up to 8 bytes, the GPU layout) receives the map's current values and
 * serves every later access; the caller keeps it alive for the runtime's life (or until it
 * shares another storage: the map can move again).  Returns 0, or -1 with err (not an array
 * map, storage too small). */
int vm_runtime_share_array(struct vm_runtime *rt, uint32_t map, void *storage, size_t bytes,
			   char *err, size_t errlen);
/* Bytes an array map needs for vm_runtime_share_array (0 for other kinds). */
size_t vm_map_array_bytes(const struct vm_map_def *def);

/* A key or value as cubpf prints a map entry (the shim's report of host maps, and the tools'
 * from the trace's HOST_MAP records): 4 and 8 bytes as an unsigned decimal, other sizes as hex
 * bytes separated by spaces, as many as `len` holds.  Always NUL-terminated. */
void vm_map_format_bytes(const void *bytes, uint32_t size, char *out, size_t len);

/* ---- maps as Prometheus metrics (vm/metrics.c): the one formatter of the generic series of
 * both endpoints, the shim's (CUBPF_METRICS) and cubpf run's (--metrics).  `labels` is what
 * every series of the caller carries first (`pid="42"`, or NULL/"" for none), already escaped. */
#define VM_METRICS_KEYS 200        /* keys of a map with series of their own; the rest "_other" */
#define VM_METRICS_WORDS 16        /* u64 words of a value shown (a 128-byte struct) */
/* One map's entries: count pairs of key_size bytes of key, then copies values of value_size
 * bytes (per-SM maps: one copy per SM slot, summed), as MAP records lay them out. */
struct vm_metrics_map {
	const char *name;
	int device;                 /* the GPU's ordinal, -1: not said (no device label) */
	uint32_t key_size, value_size, copies;
	const uint8_t *kv;
	size_t count;
};
/* A label value, escaped as the format asks (backslash, quote, newline); bytes that are not
 * UTF-8 or are controls as \xHH text. */
void vm_metrics_label(FILE *f, const char *s);
void vm_metrics_family(FILE *f, const char *name, const char *type, const char *help);
/* kernel="vecadd",name="_Z6vecaddPfS_i": the readable part of a mangled name, and the name. */
void vm_metrics_kernel_labels(FILE *f, const char *mangled);
/* cubpf_kernel_info{LABELS,id="3",kernel="..",name=".."} 1 (the caller writes the family). */
void vm_metrics_kernel_info(FILE *f, const char *labels, uint32_t id, const char *mangled);
/* cubpf_map_value{LABELS,map="..",device="..",key="..",word="W"} V: per key (as
 * vm_map_format_bytes prints it) and word of the value (u64 words, a 4-byte value as one u32),
 * summed over the copies; non-zero words only; the first VM_METRICS_KEYS keys in the order
 * given, the rest summed as key="_other".  Values of other sizes are not numbers: none. */
void vm_metrics_map_values(FILE *f, const char *labels, const struct vm_metrics_map *m);

/* The endpoint (vm/metrics_http.c): a socket listening on "[ADDR:]PORT" (127.0.0.1 unless an
 * address is given; [v6]:PORT for IPv6), its "HOST:PORT" in address; -1 with err.  Then
 * vm_metrics_serve on a thread of the caller's answers GET /metrics (and GET /) with what body
 * writes, one client at a time, while *running is non-zero (looked at every 100 ms); the caller
 * closes fd after it returns. */
typedef void (*vm_metrics_body_fn)(void *ctx, FILE *f);
int vm_metrics_listen(const char *spec, char *address, size_t alen, char *err, size_t errlen);
void vm_metrics_serve(int fd, vm_metrics_body_fn body, void *ctx, const atomic_int *running);
/* ---- bpf_trace_printk's format grammar (printk.c) ---------------------------------------------
 * One description for the verifier (which counts and types the arguments), the host formatter
 * and the PTX code generator (whose vprintf gets the format text as it is):
 *
 *   %%                       a percent sign, no argument
 *   %[flags][width][.prec][length]conv
 *     flags   any of # 0 - + space   (c, s, p take only -; # only x X)
 *     width   1 to 64, digits only   (no '*': an argument vprintf would read)
 *     prec    0 to 64, digits only   (d i u x X s; not c or p)
 *     length  h l ll                 (d i u x X only; hh is refused: CUDA's printf misreads it)
 *     conv    d i u x X (integers: 4 bytes as vprintf reads them, 8 with l/ll), c (4),
 *             s (a string the helper reads itself, 8), p (8)
 *
 * At most VM_PRINTK_MAX_ARGS conversions.  Anything else (floating conversions, %n, %o, '*',
 * wide characters, a % at the end) is refused with its offset in the format. */
#define VM_PRINTK_MAX_ARGS 3
#define VM_PRINTK_MAX_WIDTH 64

enum { VM_PF_ALT = 1, VM_PF_ZERO = 2, VM_PF_LEFT = 4, VM_PF_PLUS = 8, VM_PF_SPACE = 16 };
enum vm_printk_len { VM_PL_NONE, VM_PL_HH, VM_PL_H, VM_PL_L, VM_PL_LL };

struct vm_printk_conv {
	uint32_t pos, len;     /* the spec: fmt[pos] is its '%', fmt[pos + len - 1] its conversion */
	char conv;             /* d i u x X c s p */
	uint8_t flags;         /* VM_PF_* */
	uint8_t length;        /* enum vm_printk_len */
	uint8_t size;          /* bytes vprintf reads for it: 4 or 8 */
	int width, prec;       /* -1: none */
};

struct vm_printk_fmt {
	uint32_t len;          /* bytes of format before its NUL (or the bound) */
	uint32_t nconv;
	struct vm_printk_conv conv[VM_PRINTK_MAX_ARGS];
};

/* Parses fmt up to its first NUL or `bound` bytes.  Returns 0, or -1 with *errpos (offset in
 * the format) and a reason in err ("'%f' is not a printk conversion"). */
int vm_printk_parse(const char *fmt, size_t bound, struct vm_printk_fmt *out, uint32_t *errpos,
		    char *err, size_t errlen);
/* Formats like the host's bpf_trace_printk: args[i] for conversion i, %s as "(str)" (the host
 * does not read strings), %p as 0x and hex.  A format the grammar refuses is copied verbatim,
 * converting nothing.  Always NUL-terminated; returns the length written. */
size_t vm_printk_format(char *out, size_t cap, const char *fmt, size_t bound,
			const uint64_t args[VM_PRINTK_MAX_ARGS]);

/* Host-side helper implementation, for engines that bring their own (conformance plugin). */
typedef uint64_t (*vm_helper_fn)(void *env, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
				 uint64_t r5);

/* Prepares program `prog` (which should have passed vm_verify) for the interpreter. */
struct vm_exec *vm_exec_new(struct vm_runtime *rt, uint32_t prog, char *err, size_t errlen);
void vm_exec_free(struct vm_exec *ex);
/* Replaces helper `id` for this program (conformance: the suite's "unwind" helper 5).  A helper
 * that sets *stop (through vm_exec_stop from inside the call) ends the program with r0 = 0. */
int vm_exec_set_helper(struct vm_exec *ex, uint32_t id, vm_helper_fn fn);
void vm_exec_stop(void *env);
/* Checked mode: every load and store is bounds-checked against the stack, the context/input
 * memory and the maps, and runtime faults end the run with an error instead of crashing.
 * For programs that did not go through the verifier (the conformance plugin). */
void vm_exec_set_checked(struct vm_exec *ex, bool checked);

/* Runs the program: r1 = ctx, r2 = ctx_size (raw programs read their memory this way).
 * Returns 0 and *ret = r0, or -1 with a message (checked mode faults, call depth). */
int vm_exec_run(struct vm_exec *ex, void *ctx, size_t ctx_size, uint64_t *ret, char *err,
		size_t errlen);

/* Runs raw program bytes (8 per slot) the way the conformance suite expects: checked mode, no
 * verifier, r1 = mem, r2 = mem_len, helper 5 is the suite's "unwind" helper (returns its
 * argument; 0 ends the program with r0 = 0).  Returns 0 and *r0, or -1 with a message. */
int vm_run_raw(const void *code, size_t code_len, void *mem, size_t mem_len, uint64_t *r0,
	       char *err, size_t errlen);

#endif /* CUBPF_VM_H */
