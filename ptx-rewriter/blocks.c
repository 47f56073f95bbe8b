/* Basic blocks of a PTX function (bbprobe sites) and the opcode class of an instruction.
 *
 * A block starts at the function's first instruction, at every instruction that a label
 * precedes and after every branch, return and exit; it ends where the next one starts.  The
 * split only needs to be fine enough for counting: every thread that enters a block issues
 * every instruction of it, so a label nothing jumps to (or a call prototype's name) costing
 * one more block is harmless, while a missed label would count instructions that a jump
 * skips.  So any ':' between two instructions outside comments and strings counts as a
 * label.  The .loc in force at a block's first instruction names its source line. */
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/internal.h"

static bool root_is(const char *op, const char *root)
{
	size_t n = strlen(root);
	return !strncmp(op, root, n) && (op[n] == 0 || op[n] == '.');
}

static bool root_in(const char *op, const char *const *roots)
{
	for (; *roots; roots++)
		if (root_is(op, *roots))
			return true;
	return false;
}

static bool ends_block(const struct ptx_insn *in)
{
	static const char *const roots[] = {"bra", "brx", "ret", "exit", "trap", NULL};
	return root_in(in->opcode, roots);
}

/* The class of an arithmetic instruction by its type suffix. */
static uint32_t arith_class(const char *op)
{
	if (strstr(op, ".f64"))
		return CUBPF_OP_FP64;
	if (strstr(op, ".f16") || strstr(op, ".bf16"))
		return CUBPF_OP_FP16;
	if (strstr(op, ".f32") || strstr(op, ".ftz") || strstr(op, ".approx"))
		return CUBPF_OP_FP32;
	return CUBPF_OP_INT;
}

static uint32_t mem_class(const struct ptx_insn *in)
{
	struct ptx_mem_access a;
	if (!ptx_insn_mem_access(in, &a))
		return CUBPF_OP_OTHER;
	if (a.op == CUBPF_MEM_ATOMIC || a.op == CUBPF_MEM_REDUCE)
		return CUBPF_OP_ATOMIC;
	switch (a.space) {
	case PTX_SPACE_SHARED: return CUBPF_OP_SHARED;
	case PTX_SPACE_LOCAL: return CUBPF_OP_LOCAL;
	case PTX_SPACE_CONST:
	case PTX_SPACE_PARAM: return CUBPF_OP_PARAM;
	case PTX_SPACE_OTHER: return CUBPF_OP_ASYNC;
	default: return a.op == CUBPF_MEM_STORE ? CUBPF_OP_ST_GLOBAL : CUBPF_OP_LD_GLOBAL;
	}
}

uint32_t ptx_insn_class(const struct ptx_insn *in)
{
	static const char *const control[] = {"bra", "brx", "call", "ret", "exit", "trap", NULL};
	static const char *const sync[] = {"bar", "barrier", "membar", "fence", "mbarrier", NULL};
	static const char *const warp[] = {"shfl", "vote", "match", "redux", "activemask", NULL};
	static const char *const tensor[] = {"mma", "wmma", "wgmma", "ldmatrix", "stmatrix", NULL};
	static const char *const async[] = {"cp", "tex", "tld4", "suld", "sust", "sured", "txq",
					    "suq", NULL};
	static const char *const sfu[] = {"sin", "cos", "ex2", "lg2", "rcp", "sqrt", "rsqrt", "tanh",
					  NULL};
	static const char *const logic[] = {"and", "or", "xor", "not", "cnot", "shl", "shr", "shf",
					    "lop3", "bfe", "bfi", "bfind", "brev", "prmt", "popc",
					    "clz", "fns", NULL};
	static const char *const cmp[] = {"setp", "set", "selp", "slct", NULL};
	static const char *const mov[] = {"mov", "cvt", "cvta", "isspacep", NULL};
	static const char *const arith[] = {"add", "sub", "mul", "mad", "fma", "div", "rem", "abs",
					    "neg", "min", "max", "sad", "mul24", "mad24", "addc",
					    "subc", "madc", "copysign", "testp", "dp4a", "dp2a", NULL};
	const char *op = in->opcode;
	if (root_in(op, control))
		return CUBPF_OP_CONTROL;
	if (root_in(op, sync))
		return CUBPF_OP_SYNC;
	if (root_in(op, warp))
		return CUBPF_OP_WARP;
	if (root_in(op, tensor))
		return CUBPF_OP_TENSOR;
	if (root_in(op, async))
		return CUBPF_OP_ASYNC;
	if (root_in(op, sfu))
		return CUBPF_OP_SFU;
	if (root_in(op, logic))
		return CUBPF_OP_LOGIC;
	if (root_in(op, cmp))
		return CUBPF_OP_CMP;
	if (root_in(op, mov))
		return CUBPF_OP_MOV;
	if (root_in(op, arith))
		return arith_class(op);
	return mem_class(in);
}

/* Reads the text between two instructions: whether a label is there, and the last .loc. */
static bool gap_scan(const char *s, size_t b, size_t e, uint32_t *file, uint32_t *line)
{
	bool label = false;
	for (size_t i = b; i < e; i++) {
		if (s[i] == '/' && i + 1 < e && s[i + 1] == '/') {
			while (i < e && s[i] != '\n')
				i++;
		} else if (s[i] == '/' && i + 1 < e && s[i + 1] == '*') {
			for (i += 2; i + 1 < e && !(s[i] == '*' && s[i + 1] == '/'); i++)
				;
			i++;
		} else if (s[i] == '"') {
			for (i++; i < e && s[i] != '"'; i++)
				;
		} else if (s[i] == ':') {
			label = true;
		} else if (s[i] == '.' && e - i > 5 && !strncmp(s + i, ".loc", 4) &&
			   (s[i + 4] == ' ' || s[i + 4] == '\t')) {
			char *end;
			unsigned long f = strtoul(s + i + 5, &end, 10);
			unsigned long l = strtoul(end, &end, 10);
			*file = (uint32_t)f, *line = (uint32_t)l;
			i = (size_t)(end - s) - 1;
		}
	}
	return label;
}

static uint32_t count_lines(const char *s, size_t from, size_t to)
{
	uint32_t n = 0;
	for (size_t i = from; i < to; i++)
		n += s[i] == '\n';
	return n;
}

int ptx_basic_blocks(const struct ptx_module *m, const struct ptx_func *f,
		     struct ptx_bblock **out, uint32_t *count)
{
	*out = NULL, *count = 0;
	struct ptx_bblock *v = calloc(f->insn_cnt + 1, sizeof(*v));
	if (!v)
		return -1;
	uint32_t n = 0, file = 0, line = 0;
	uint32_t pline = 1 + count_lines(m->text, 0, f->body_open);
	size_t prev = f->body_open + 1, lpos = f->body_open;
	/* .loc before the body (rare) still names its first block */
	gap_scan(m->text, f->start, f->body_open, &file, &line);
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		bool label = gap_scan(m->text, prev, in->off, &file, &line);
		if (i == 0 || label || ends_block(&f->insns[i - 1])) {
			pline += count_lines(m->text, lpos, in->off);
			lpos = in->off;
			v[n++] = (struct ptx_bblock){.first = i, .line = pline, .src_file = file,
						     .src_line = line};
		}
		v[n - 1].count++;
		v[n - 1].classes[ptx_insn_class(in)]++;
		prev = in->off + in->len;
	}
	*out = v, *count = n;
	return 0;
}
