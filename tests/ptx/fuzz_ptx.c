/* libFuzzer target for ptx-rewriter: the input is (1) the body of a kernel inside a valid
 * module, or the whole module, instrumented with entry, exit and memory probes; and (2) an
 * unverified eBPF program compiled to PTX.  Everything must end in a result or a message. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/ptx.h"

#define I(c, d, s, o, i) {.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)}

/* counts[op] += size; as clang emits it for a memprobe */
static const struct bpf_insn mem_prog[] = {
	I(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 16, 0),
	I(BPF_STX | BPF_MEM | BPF_W, 10, 2, -4, 0),
	I(BPF_LDX | BPF_MEM | BPF_W, 6, 1, 8, 0),
	I(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0),
	I(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -4),
	I(BPF_LD | BPF_IMM | BPF_DW, 1, BPF_PSEUDO_MAP_FD, 0, 0),
	I(0, 0, 0, 0, 0),
	I(BPF_JMP | BPF_CALL, 0, 0, 0, CUBPF_FN_map_lookup_elem),
	I(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1, 0),
	I(BPF_STX | BPF_ATOMIC | BPF_DW, 0, 6, 0, BPF_ADD),
	I(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0),
	I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
};
static const struct bpf_insn entry_prog[] = {
	I(BPF_LDX | BPF_MEM | BPF_W, 0, 1, 0, 0),
	I(BPF_LDX | BPF_MEM | BPF_DW, 3, 1, 56, 0),
	I(BPF_ALU64 | BPF_ADD | BPF_X, 0, 3, 0, 0),
	I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
};

/* the entry tools' shape: a test first, most threads leave (their entry probes go after the
 * kernel's pure prefix: ptx-rewriter/inject.c, entry_point) */
static const struct bpf_insn tested_prog[] = {
	I(BPF_LDX | BPF_MEM | BPF_W, 0, 1, 0, 0),
	I(BPF_JMP | BPF_JNE | BPF_K, 0, 0, 2, 0),
	I(BPF_LDX | BPF_MEM | BPF_DW, 3, 1, 56, 0),
	I(BPF_ALU64 | BPF_ADD | BPF_X, 0, 3, 0, 0),
	I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
};

/* blockprobe/blockretprobe and syncprobe (issue 32): a u32 field and the u64 at 56 (begin_ns,
 * before_ns: the values cubpf keeps for the end and after sides) */
static const struct bpf_insn block_sync_prog[] = {
	I(BPF_LDX | BPF_MEM | BPF_W, 0, 1, 8, 0),
	I(BPF_LDX | BPF_MEM | BPF_DW, 3, 1, 56, 0),
	I(BPF_ALU64 | BPF_ADD | BPF_X, 0, 3, 0, 0),
	I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
};

/* fentry/fexit (issue 32): kernel_id (u32 at 48) and params[0] (u64 at 64) of the .func */
static const struct bpf_insn func_prog[] = {
	I(BPF_LDX | BPF_MEM | BPF_W, 0, 1, 48, 0),
	I(BPF_LDX | BPF_MEM | BPF_DW, 3, 1, 64, 0),
	I(BPF_ALU64 | BPF_ADD | BPF_X, 0, 3, 0, 0),
	I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
};

static const char head[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
			   ".visible .entry k(.param .u64 p0, .param .u32 p1)\n{\n"
			   "\t.reg .b64 %rd<8>;\n\t.reg .b32 %r<8>;\n\t.reg .pred %p<4>;\n";

static void instrument(const char *text, size_t len)
{
	static const struct vm_map_def maps[] = {{.name = "m", .type = CUBPF_MAP_ARRAY,
						  .key_size = 4, .value_size = 8, .max_entries = 8}};
	bool tested = len / 4 % 2; /* half the inputs: the entry probe after the pure prefix */
	const struct ptx_prog progs[] = {
		{"e", VM_PROG_KPROBE, "*", tested ? tested_prog : entry_prog,
		 tested ? sizeof(tested_prog) / sizeof(tested_prog[0])
			: sizeof(entry_prog) / sizeof(entry_prog[0])},
		{"x", VM_PROG_KRETPROBE, "k*", entry_prog, sizeof(entry_prog) / sizeof(entry_prog[0])},
		{"m", VM_PROG_MEMPROBE, "*", mem_prog, sizeof(mem_prog) / sizeof(mem_prog[0])},
		{"b", VM_PROG_BLOCKPROBE, "*", block_sync_prog, 4},
		{"be", VM_PROG_BLOCKRETPROBE, "k*", block_sync_prog, 4},
		{"s", VM_PROG_SYNCPROBE, "*", block_sync_prog, 4},
		{"fe", VM_PROG_FENTRY, "*", func_prog, 4},
		{"fx", VM_PROG_FEXIT, "f*", func_prog, 4},
		/* bbprobe: the memory program's u32 at 8 is the block context's kernel_id */
		{"bb", VM_PROG_BBPROBE, "*", mem_prog, sizeof(mem_prog) / sizeof(mem_prog[0])},
		{"bx", VM_PROG_BBRETPROBE, "k*", mem_prog, sizeof(mem_prog) / sizeof(mem_prog[0])},
	};
	/* no_shared: block ends in the block table, else in shared memory where there is room */
	struct ptx_inject_opts o = {.progs = progs, .prog_cnt = 8, .maps = maps, .map_cnt = 1,
				    .enable_words = len % 2, .no_shared = len / 2 % 2};
	char *out = NULL, err[PTX_ERRLEN];
	size_t olen;
	if (ptx_instrument(text, len, &o, &out, &olen, NULL, err, sizeof(err)) == 0)
		free(out);
	else if (!err[0])
		abort(); /* failures must say why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] & 1) { /* a kernel body */
		size_t hl = sizeof(head) - 1;
		char *t = malloc(hl + size + 4);
		memcpy(t, head, hl);
		memcpy(t + hl, data + 1, size - 1);
		memcpy(t + hl + size - 1, "\n}\n", 4);
		instrument(t, hl + size + 2);
		free(t);
	} else {
		instrument((const char *)data + 1, size - 1);
	}
	/* the same bytes as eBPF */
	if (size >= 9) {
		struct ptx_prog p = {"f", (data[0] >> 1) % 2 ? VM_PROG_KPROBE : VM_PROG_RAW, "*",
				     (const struct bpf_insn *)(data + 1), (uint32_t)((size - 1) / 8)};
		struct bpf_insn *copy = malloc((size - 1) / 8 * sizeof(*copy));
		memcpy(copy, data + 1, (size - 1) / 8 * sizeof(*copy));
		p.insns = copy;
		/* map references (lddw src 1, imm = index) reach every GPU map kind */
		static const struct vm_map_def fmaps[] = {
			{.name = "a", .type = CUBPF_MAP_ARRAY, .key_size = 4, .value_size = 8,
			 .max_entries = 8},
			{.name = "c", .type = CUBPF_MAP_PERCPU_ARRAY, .key_size = 4, .value_size = 12,
			 .max_entries = 4},
			{.name = "t", .type = CUBPF_MAP_PERTHREAD_ARRAY, .key_size = 4,
			 .value_size = 8, .max_entries = 2},
			{.name = "h", .type = CUBPF_MAP_HASH, .key_size = 12, .value_size = 16,
			 .max_entries = 100},
			{.name = "r", .type = CUBPF_MAP_RINGBUF, .max_entries = 1 << 16},
		};
		struct ptx_buf b = {0};
		char err[PTX_ERRLEN] = "";
		if (ptx_gen_raw_func_opt(&p, fmaps, 5, "f", (data[0] >> 2) & 1, &b, err, sizeof(err)) &&
		    !err[0])
			abort();
		ptx_buf_free(&b);
		free(copy);
	}
	return 0;
}
