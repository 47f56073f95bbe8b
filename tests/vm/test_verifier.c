/* The verifier corpus: small programs (instruction arrays) that must be rejected, each with the
 * reason the log must give, and programs that must pass (several are then run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/vm/tests.h"

struct vcase {
	const char *name;
	enum vm_prog_kind kind;
	const char *expect;            /* substring of the log; NULL: must verify */
	const struct bpf_insn *insns;
	uint32_t n;
	const uint32_t *subprogs;
	uint32_t nsub;
	uint32_t max_insns, max_processed;
	int run;                       /* pass cases: run and compare r0 with `result` */
	uint64_t result;
};

#define INSNS(...) (const struct bpf_insn[]){__VA_ARGS__}, \
	sizeof((const struct bpf_insn[]){__VA_ARGS__}) / sizeof(struct bpf_insn)
#define SUBS(...) (const uint32_t[]){__VA_ARGS__}, \
	sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)
#define REJECT(nm, k, why, ...) {nm, k, why, INSNS(__VA_ARGS__), NULL, 0, 0, 0, 0, 0}
#define PASS(nm, k, ...) {nm, k, NULL, INSNS(__VA_ARGS__), NULL, 0, 0, 0, 0, 0}
#define PASS_RUN(nm, k, res, ...) {nm, k, NULL, INSNS(__VA_ARGS__), NULL, 0, 0, 0, 1, res}

#define KP VM_PROG_KPROBE
#define UP VM_PROG_UPROBE
#define MP VM_PROG_MEMPROBE
#define BP VM_PROG_BLOCKPROBE
#define BRP VM_PROG_BLOCKRETPROBE
#define SP VM_PROG_SYNCPROBE
#define FE VM_PROG_FENTRY
#define FX VM_PROG_FEXIT
#define BBP VM_PROG_BBPROBE

/* r2 = &key (4 zero bytes at fp-4), r1 = map, call lookup: 6 slots */
#define LOOKUP(m) ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), LD_MAP(1, m), \
		  CALL(CUBPF_FN_map_lookup_elem)
#define RET0 MOV64_IMM(0, 0), EXIT()
/* r0 = bpf_ringbuf_reserve(&rb, 16, 0): 5 slots */
#define RESERVE LD_MAP(1, M_RING), MOV64_IMM(2, 16), MOV64_IMM(3, 0), CALL(CUBPF_FN_ringbuf_reserve)

static const struct vcase cases[] = {
	/* ---- structure ---- */
	REJECT("no_exit", KP, "fall off", MOV64_IMM(0, 0)),
	REJECT("jump_out_of_range", KP, "jump out of range", JMP_IMM(BPF_JEQ, 1, 0, 5), RET0),
	REJECT("jump_into_lddw", KP, "middle of lddw", JA(1), LD_IMM64(0, 1), EXIT()),
	REJECT("unreachable", KP, "unreachable insn 2", RET0, RET0),
	REJECT("bad_alu_opcode", KP, "invalid ALU opcode", I(BPF_ALU64 | 0xf0 | BPF_K, 0, 0, 0, 0), EXIT()),
	REJECT("bad_register", KP, "invalid register", MOV64_IMM(11, 0), RET0),
	REJECT("exit_reserved", KP, "BPF_EXIT uses reserved fields", MOV64_IMM(0, 0),
	       I(BPF_JMP | BPF_EXIT, 1, 0, 0, 0)),
	REJECT("ld_abs", KP, "legacy loads", I(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0, 0), EXIT()),
	REJECT("ldsx_dw", KP, "sign-extending load of 8 bytes",
	       I(BPF_LDX | BPF_DW | BPF_MEMSX, 0, 10, -8, 0), EXIT()),
	REJECT("div_by_zero_imm", KP, "division by zero", MOV64_IMM(0, 1), ALU64_IMM(BPF_DIV, 0, 0), EXIT()),
	REJECT("mod_by_zero_imm32", KP, "division by zero", MOV64_IMM(0, 1), ALU32_IMM(BPF_MOD, 0, 0), EXIT()),
	REJECT("shift_too_far", KP, "invalid shift", MOV64_IMM(0, 1), ALU64_IMM(BPF_LSH, 0, 64), EXIT()),
	REJECT("shift32_too_far", KP, "invalid shift", MOV64_IMM(0, 1), ALU32_IMM(BPF_RSH, 0, 32), EXIT()),
	REJECT("lddw_bad_map", KP, "refers to map 99", LD_MAP(1, 99), RET0),
	REJECT("lddw_value_past_end", KP, "past the end", LD_MAP_VALUE(1, M_RODATA, 16), RET0),
	REJECT("lddw_ring_value", KP, "ring buffer", LD_MAP_VALUE(1, M_RING, 0), RET0),
	REJECT("callx", KP, "callx", I(BPF_JMP | BPF_CALL | BPF_X, 1, 0, 0, 0), EXIT()),
	REJECT("kfunc_call", KP, "kfuncs are not supported", I(BPF_JMP | BPF_CALL, 0, 2, 0, 7), EXIT()),
	/* ---- registers ---- */
	REJECT("r0_unset_at_exit", KP, "R0 !read_ok", EXIT()),
	REJECT("read_uninit_reg", KP, "R2 !read_ok", MOV64_REG(0, 2), EXIT()),
	REJECT("add_uninit_reg", KP, "R3 !read_ok", MOV64_IMM(0, 1), ALU64_REG(BPF_ADD, 0, 3), EXIT()),
	REJECT("write_r10", KP, "frame pointer is read only", MOV64_IMM(10, 0), RET0),
	REJECT("args_clobbered_by_call", KP, "R1 !read_ok", CALL(CUBPF_FN_get_globaltimer),
	       MOV64_REG(0, 1), EXIT()),
	REJECT("return_pointer", KP, "leaks an address", MOV64_REG(0, 10), EXIT()),
	/* ---- stack ---- */
	REJECT("stack_below_512", KP, "invalid stack access", ST(BPF_DW, 10, -520, 0), RET0),
	REJECT("stack_above_fp", KP, "invalid stack access", ST(BPF_DW, 10, 0, 0), RET0),
	REJECT("stack_straddles_fp", KP, "invalid stack access", ST(BPF_DW, 10, -4, 0), RET0),
	REJECT("stack_uninit_read", KP, "is not initialised", LDX(BPF_DW, 0, 10, -8), EXIT()),
	REJECT("stack_partly_init_read", KP, "is not initialised", ST(BPF_W, 10, -8, 1),
	       LDX(BPF_DW, 0, 10, -8), EXIT()),
	REJECT("stack_variable_offset", KP, "variable stack access", LDX(BPF_W, 2, 1, 0),
	       ALU64_IMM(BPF_AND, 2, 7), MOV64_REG(3, 10), ALU64_IMM(BPF_ADD, 3, -16),
	       ALU64_REG(BPF_ADD, 3, 2), ST(BPF_B, 3, 0, 0), RET0),
	REJECT("spill_partial_read", UP, "corrupted spill", STX(BPF_DW, 10, 1, -8),
	       LDX(BPF_W, 0, 10, -8), EXIT()),
	REJECT("spill_narrow_pointer", KP, "invalid size of register spill", STX(BPF_W, 10, 1, -8), RET0),
	/* ---- pointers ---- */
	REJECT("ptr_mul", KP, "pointer arithmetic with this operator", MOV64_REG(1, 10),
	       ALU64_IMM(BPF_MUL, 1, 2), RET0),
	REJECT("ptr_and", KP, "pointer arithmetic with this operator", MOV64_REG(1, 10),
	       ALU64_IMM(BPF_AND, 1, -8), RET0),
	REJECT("ptr_arith_32", KP, "32-bit pointer arithmetic", MOV64_REG(1, 10),
	       ALU32_IMM(BPF_ADD, 1, -8), RET0),
	REJECT("ptr_mov32", KP, "partial copy of pointer", MOV32_REG(1, 10), RET0),
	REJECT("ptr_sub_unrelated", KP, "unrelated pointers", MOV64_REG(2, 10), ALU64_REG(BPF_SUB, 2, 1), RET0),
	REJECT("scalar_minus_ptr", KP, "pointer arithmetic with this operator", MOV64_IMM(2, 8),
	       ALU64_REG(BPF_SUB, 2, 10), RET0),
	REJECT("ptr_bswap", KP, "byte swap of a pointer", MOV64_REG(2, 10),
	       I(BPF_ALU | BPF_END | BPF_TO_BE, 2, 0, 0, 32), RET0),
	REJECT("deref_scalar", KP, "invalid mem access 'scalar'", MOV64_IMM(1, 4096),
	       LDX(BPF_DW, 0, 1, 0), EXIT()),
	REJECT("deref_map_ptr", KP, "invalid mem access 'map_ptr'", LD_MAP(1, M_HASH),
	       LDX(BPF_DW, 0, 1, 0), EXIT()),
	/* ---- context ---- */
	REJECT("ctx_write", KP, "cannot write into ctx", ST(BPF_W, 1, 0, 0), RET0),
	REJECT("ctx_wrong_size", KP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 0), EXIT()),
	REJECT("ctx_misaligned", KP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 2), EXIT()),
	REJECT("ctx_past_end", KP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 400), EXIT()),
	REJECT("ctx_param_narrow", KP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 56), EXIT()),
	/* instruction counts: two u64 after the parameters (312, 320), read-only */
	REJECT("ctx_insns_narrow", VM_PROG_KRETPROBE, "invalid bpf_context access",
	       LDX(BPF_W, 0, 1, 312), EXIT()),
	REJECT("ctx_insns_write", VM_PROG_KRETPROBE, "cannot write into ctx", ST(BPF_DW, 1, 312, 0),
	       RET0),
	REJECT("ctx_insns_past_end", VM_PROG_KRETPROBE, "invalid bpf_context access",
	       LDX(BPF_DW, 0, 1, 328), EXIT()),
	REJECT("warp_sum_on_host", UP, "not available in uprobe programs", MOV64_IMM(1, 1),
	       CALL(CUBPF_FN_warp_sum), EXIT()),
	REJECT("ctx_api_wrong_size", UP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 8), EXIT()),
	REJECT("ctx_mem_wrong_size", MP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 0), EXIT()),
	REJECT("ctx_variable_offset", KP, "variable ctx access", LDX(BPF_W, 2, 1, 0),
	       ALU64_REG(BPF_ADD, 1, 2), LDX(BPF_W, 0, 1, 0), EXIT()),
	REJECT("ctx_atomic", KP, "atomic operation on ctx", MOV64_IMM(2, 1),
	       ATOMIC(BPF_W, BPF_ADD, 1, 2, 0), RET0),
	/* thread block probes (issue 32): twelve u32 fields, then time_ns and begin_ns (u64s at 48
	 * and 56) */
	REJECT("ctx_block_write", BP, "cannot write into ctx", ST(BPF_W, 1, 44, 1), RET0),
	REJECT("ctx_block_write_time", BRP, "cannot write into ctx", ST(BPF_DW, 1, 48, 0), RET0),
	REJECT("ctx_block_time_narrow", BP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 48),
	       EXIT()),
	REJECT("ctx_block_u32_wide", BRP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 40),
	       EXIT()),
	REJECT("ctx_block_past_end", BP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 56), EXIT()),
	REJECT("ctx_block_no_params", BRP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 64),
	       EXIT()),
	REJECT("ctx_block_host_helper", BP, "not available in blockprobe programs",
	       CALL(CUBPF_FN_get_current_pid_tgid), EXIT()),
	/* bpf_gpu_delay_ns: at most CUBPF_MAX_DELAY_NS (1 ms) per call, proven */
	REJECT("delay_over_limit", MP, "delay may exceed 1000000 ns", MOV64_IMM(1, 1000001),
	       CALL(CUBPF_FN_gpu_delay_ns), EXIT()),
	REJECT("delay_unbounded", MP, "delay may exceed 1000000 ns", LDX(BPF_DW, 1, 1, 0),
	       CALL(CUBPF_FN_gpu_delay_ns), EXIT()),
	REJECT("delay_bound_too_high", KP, "delay may exceed", LDX(BPF_W, 1, 1, 0),
	       JMP_IMM(BPF_JGT, 1, 2000000, 1), CALL(CUBPF_FN_gpu_delay_ns), RET0),
	REJECT("delay_pointer", MP, "expected=scalar", MOV64_REG(1, 10), CALL(CUBPF_FN_gpu_delay_ns),
	       EXIT()),
	REJECT("delay_on_host", UP, "not available in uprobe programs", MOV64_IMM(1, 10),
	       CALL(CUBPF_FN_gpu_delay_ns), EXIT()),
	/* barrier probes: twelve u32 fields, then time_ns and before_ns (u64s at 48 and 56) */
	REJECT("ctx_sync_write", SP, "cannot write into ctx", ST(BPF_W, 1, 8, 1), RET0),
	REJECT("ctx_sync_time_narrow", SP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 52),
	       EXIT()),
	REJECT("ctx_sync_kind_wide", SP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 0), EXIT()),
	REJECT("ctx_sync_past_end", SP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 64), EXIT()),
	REJECT("ctx_sync_before_narrow", SP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 56),
	       EXIT()),
	REJECT("ctx_sync_byte", SP, "invalid bpf_context access", LDX(BPF_B, 0, 1, 1), EXIT()),
	/* device function probes: sixteen u32 fields, then params (u64s from 64 to 320) */
	REJECT("ctx_func_write", FE, "cannot write into ctx", ST(BPF_W, 1, 48, 1), RET0),
	REJECT("ctx_func_param_write", FX, "cannot write into ctx", STX(BPF_DW, 1, 1, 64), RET0),
	REJECT("ctx_func_param_narrow", FE, "invalid bpf_context access", LDX(BPF_W, 0, 1, 64),
	       EXIT()),
	REJECT("ctx_func_id_wide", FX, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 56), EXIT()),
	/* params end at 320; then retval (u64) and has_retval (u32), then padding */
	REJECT("ctx_func_past_end", FE, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 336),
	       EXIT()),
	REJECT("ctx_func_retval_narrow", FX, "invalid bpf_context access", LDX(BPF_W, 0, 1, 320),
	       EXIT()),
	REJECT("ctx_func_has_retval_wide", FX, "invalid bpf_context access",
	       LDX(BPF_DW, 0, 1, 328), EXIT()),
	REJECT("ctx_func_pad", FX, "invalid bpf_context access", LDX(BPF_W, 0, 1, 332), EXIT()),
	REJECT("ctx_func_half", FX, "invalid bpf_context access", LDX(BPF_H, 0, 1, 48), EXIT()),
	REJECT("ctx_func_host_helper", FE, "not available in fentry programs",
	       CALL(CUBPF_FN_get_current_pid_tgid), EXIT()),
	REJECT("ctx_func_to_helper", FX, "cannot be passed to helpers", MOV64_REG(2, 1),
	       LD_MAP(1, M_ARRAY), CALL(CUBPF_FN_map_lookup_elem), RET0),
	/* basic block probes: 34 u32 fields (entries last, at 132), all read-only */
	REJECT("ctx_bb_write", BBP, "cannot write into ctx", ST(BPF_W, 1, 4, 1), RET0),
	REJECT("ctx_bb_store_reg", BBP, "cannot write into ctx", STX(BPF_W, 1, 1, 0), RET0),
	REJECT("ctx_bb_wide", BBP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 0), EXIT()),
	REJECT("ctx_bb_past_end", BBP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 136),
	       EXIT()),
	REJECT("ctx_bb_half", BBP, "invalid bpf_context access", LDX(BPF_H, 0, 1, 4), EXIT()),
	REJECT("ctx_bb_unaligned", BBP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 2),
	       EXIT()),
	/* the probe's own site: three u32 at the end of the memory (52) and sync (64) contexts,
	 * then the sync context's sync_index (76) */
	REJECT("ctx_mem_site_past_end", MP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 64),
	       EXIT()),
	REJECT("ctx_mem_site_wide", MP, "invalid bpf_context access", LDX(BPF_DW, 0, 1, 56),
	       EXIT()),
	REJECT("ctx_sync_site_past_end", SP, "invalid bpf_context access", LDX(BPF_W, 0, 1, 80),
	       EXIT()),
	REJECT("ctx_sync_site_write", SP, "cannot write into ctx", ST(BPF_W, 1, 64, 0), RET0),
	REJECT("ctx_bbret_write", VM_PROG_BBRETPROBE, "cannot write into ctx",
	       ST(BPF_W, 1, 132, 0), RET0),
	REJECT("ctx_bbret_past_end", VM_PROG_BBRETPROBE, "invalid bpf_context access",
	       LDX(BPF_W, 0, 1, 136), EXIT()),
	REJECT("ctx_bbret_entries_wide", VM_PROG_BBRETPROBE, "invalid bpf_context access",
	       LDX(BPF_DW, 0, 1, 128), EXIT()),
	REJECT("ctx_bb_host_helper", BBP, "not available in bbprobe programs",
	       CALL(CUBPF_FN_get_current_pid_tgid), EXIT()),
	REJECT("ctx_block_to_helper", BRP, "cannot be passed to helpers", MOV64_REG(2, 1),
	       LD_MAP(1, M_ARRAY), CALL(CUBPF_FN_map_lookup_elem), RET0),
	/* ---- maps ---- */
	REJECT("lookup_unchecked", KP, "invalid mem access 'map_value_or_null'", LOOKUP(M_HASH),
	       LDX(BPF_DW, 0, 0, 0), EXIT()),
	REJECT("lookup_arith_before_check", KP, "map_value_or_null prohibited", LOOKUP(M_HASH),
	       ALU64_IMM(BPF_ADD, 0, 8), RET0),
	REJECT("lookup_compare_nonzero", KP, "comparison of map_value_or_null", LOOKUP(M_HASH),
	       JMP_IMM(BPF_JEQ, 0, 5, 0), RET0),
	REJECT("map_value_past_end", KP, "invalid access to map value", LOOKUP(M_HASH),
	       JMP_IMM(BPF_JEQ, 0, 0, 1), LDX(BPF_DW, 1, 0, 8), RET0),
	REJECT("map_value_negative_off", KP, "invalid access to map value", LOOKUP(M_HASH),
	       JMP_IMM(BPF_JEQ, 0, 0, 1), LDX(BPF_DW, 1, 0, -8), RET0),
	REJECT("map_value_signed_index", UP, "min value is negative", MOV64_REG(6, 1),
	       LOOKUP(M_ARRAY), JMP_IMM(BPF_JEQ, 0, 0, 3), LDX(BPF_DW, 2, 6, 0),
	       ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_B, 1, 0, 0), RET0),
	REJECT("map_value_unbounded_index", KP, "unbounded memory access", MOV64_REG(6, 1),
	       LOOKUP(M_ARRAY), JMP_IMM(BPF_JEQ, 0, 0, 3), LDX(BPF_W, 2, 6, 0),
	       ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_B, 1, 0, 0), RET0),
	REJECT("map_value_index_off_by_one", KP, "invalid access to map value", MOV64_REG(6, 1),
	       LOOKUP(M_ARRAY), JMP_IMM(BPF_JEQ, 0, 0, 4), LDX(BPF_W, 2, 6, 0),
	       JMP_IMM(BPF_JGT, 2, 16, 2), ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_B, 1, 0, 0), RET0),
	REJECT("pointer_into_map", KP, "leaks addr into map", LOOKUP(M_HASH),
	       JMP_IMM(BPF_JEQ, 0, 0, 1), STX(BPF_DW, 0, 10, 0), RET0),
	REJECT("write_rodata", KP, "read-only (.rodata)", LD_MAP_VALUE(1, M_RODATA, 0),
	       ST(BPF_W, 1, 0, 1), RET0),
	REJECT("write_rdonly_prog_map", KP, "read-only (BPF_F_RDONLY_PROG)", LOOKUP(M_RDONLY),
	       JMP_IMM(BPF_JEQ, 0, 0, 1), ST(BPF_DW, 0, 0, 1), RET0),
	REJECT("atomic_on_rodata", KP, "read-only", LD_MAP_VALUE(1, M_RODATA, 0), MOV64_IMM(2, 1),
	       ATOMIC(BPF_W, BPF_ADD, 1, 2, 0), RET0),
	REJECT("update_rodata_map", KP, "is read-only", ST(BPF_W, 10, -4, 0), ST(BPF_DW, 10, -16, 0),
	       ST(BPF_DW, 10, -24, 0), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), MOV64_REG(3, 10),
	       ALU64_IMM(BPF_ADD, 3, -24), LD_MAP(1, M_RODATA), MOV64_IMM(4, 0),
	       CALL(CUBPF_FN_map_update_elem), RET0),
	REJECT("delete_rodata_map", KP, "is read-only", ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10),
	       ALU64_IMM(BPF_ADD, 2, -4), LD_MAP(1, M_RODATA), CALL(CUBPF_FN_map_delete_elem), RET0),
	REJECT("atomic_leaks_pointer", KP, "leaks addr into memory", ST(BPF_DW, 10, -8, 0),
	       MOV64_REG(2, 10), ATOMIC(BPF_DW, BPF_ADD, 10, 2, -8), RET0),
	REJECT("atomic_misaligned", KP, "misaligned atomic", LOOKUP(M_ARRAY),
	       JMP_IMM(BPF_JEQ, 0, 0, 2), MOV64_IMM(1, 1), ATOMIC(BPF_DW, BPF_ADD, 0, 1, 4), RET0),
	/* ---- helpers ---- */
	REJECT("unknown_helper", KP, "invalid func unknown#9999", CALL(9999), EXIT()),
	REJECT("gpu_helper_in_uprobe", UP, "GPU-only", CALL(CUBPF_FN_get_globaltimer), EXIT()),
	REJECT("gpu_index_helper_in_uprobe", UP, "GPU-only", CALL(CUBPF_FN_get_sm_id), EXIT()),
	REJECT("host_helper_in_kprobe", KP, "host-only", CALL(CUBPF_FN_ktime_get_ns), EXIT()),
	REJECT("host_pid_in_memprobe", MP, "host-only", CALL(CUBPF_FN_get_current_pid_tgid), EXIT()),
	REJECT("lookup_not_a_map", KP, "expected=map_ptr", ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10),
	       ALU64_IMM(BPF_ADD, 2, -4), MOV64_IMM(1, 0), CALL(CUBPF_FN_map_lookup_elem), RET0),
	REJECT("lookup_key_uninit", KP, "is not initialised", MOV64_REG(2, 10),
	       ALU64_IMM(BPF_ADD, 2, -4), LD_MAP(1, M_HASH), CALL(CUBPF_FN_map_lookup_elem), RET0),
	REJECT("lookup_key_scalar", KP, "expected=fp or map_value", MOV64_IMM(2, 0),
	       LD_MAP(1, M_HASH), CALL(CUBPF_FN_map_lookup_elem), RET0),
	REJECT("lookup_key_leaks_pointer", UP, "leaks a pointer", STX(BPF_DW, 10, 1, -8),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8), LD_MAP(1, M_HASH),
	       CALL(CUBPF_FN_map_lookup_elem), RET0),
	REJECT("update_value_past_stack", KP, "invalid stack access", ST(BPF_W, 10, -4, 0),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), MOV64_REG(3, 10),
	       ALU64_IMM(BPF_ADD, 3, -4), LD_MAP(1, M_HASH), MOV64_IMM(4, 0),
	       CALL(CUBPF_FN_map_update_elem), RET0),
	REJECT("update_value_leaks_pointer", KP, "leaks a pointer", ST(BPF_W, 10, -4, 0),
	       STX(BPF_DW, 10, 10, -16), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4),
	       MOV64_REG(3, 10), ALU64_IMM(BPF_ADD, 3, -16), LD_MAP(1, M_HASH), MOV64_IMM(4, 0),
	       CALL(CUBPF_FN_map_update_elem), RET0),
	REJECT("update_flags_uninit", KP, "R4 !read_ok", ST(BPF_W, 10, -4, 0), ST(BPF_DW, 10, -16, 0),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), MOV64_REG(3, 10),
	       ALU64_IMM(BPF_ADD, 3, -16), LD_MAP(1, M_HASH), CALL(CUBPF_FN_map_update_elem), RET0),
	REJECT("ringbuf_output_on_hash", KP, "not a ring buffer", ST(BPF_DW, 10, -8, 0),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8), MOV64_IMM(3, 8), LD_MAP(1, M_HASH),
	       MOV64_IMM(4, 0), CALL(CUBPF_FN_ringbuf_output), RET0),
	REJECT("lookup_on_ringbuf", KP, "cannot use ring buffer", LOOKUP(M_RING), RET0),
	REJECT("ringbuf_unbounded_size", KP, "unbounded memory access", MOV64_REG(6, 1),
	       ST(BPF_DW, 10, -8, 0), LDX(BPF_W, 3, 6, 0), MOV64_REG(2, 10),
	       ALU64_IMM(BPF_ADD, 2, -8), LD_MAP(1, M_RING), MOV64_IMM(4, 0),
	       CALL(CUBPF_FN_ringbuf_output), RET0),
	REJECT("ringbuf_leaks_pointer", UP, "leaks a pointer", STX(BPF_DW, 10, 1, -8),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8), MOV64_IMM(3, 8), LD_MAP(1, M_RING),
	       MOV64_IMM(4, 0), CALL(CUBPF_FN_ringbuf_output), RET0),
	REJECT("ringbuf_size_exceeds_stack", KP, "invalid stack access", ST(BPF_DW, 10, -8, 0),
	       MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8), MOV64_IMM(3, 16), LD_MAP(1, M_RING),
	       MOV64_IMM(4, 0), CALL(CUBPF_FN_ringbuf_output), RET0),
	REJECT("probe_read_size_uninit", UP, "R2 !read_ok", MOV64_REG(1, 10),
	       ALU64_IMM(BPF_ADD, 1, -8), MOV64_IMM(3, 0), CALL(CUBPF_FN_probe_read), RET0),
	REJECT("probe_read_into_ctx", UP, "cannot write into ctx", MOV64_IMM(2, 8),
	       MOV64_IMM(3, 0), CALL(CUBPF_FN_probe_read), RET0),
	REJECT("printk_zero_size", KP, "zero-sized", LD_MAP_VALUE(1, M_RODATA, 0), MOV64_IMM(2, 0),
	       CALL(CUBPF_FN_trace_printk), RET0),
	REJECT("puts_not_const", KP, "constant string", ST(BPF_DW, 10, -8, 0), MOV64_REG(1, 10),
	       ALU64_IMM(BPF_ADD, 1, -8), CALL(CUBPF_FN_gpu_puts), RET0),
	REJECT("index_helper_ro_output", KP, "read-only", LD_MAP_VALUE(1, M_RODATA, 0),
	       LD_MAP_VALUE(2, M_RODATA, 0), LD_MAP_VALUE(3, M_RODATA, 8),
	       CALL(CUBPF_FN_get_block_idx), RET0),
	/* ---- loops ---- */
	REJECT("infinite_loop", KP, "infinite loop detected", MOV64_IMM(0, 0),
	       JMP_IMM(BPF_JEQ, 0, 0, -1), EXIT()),
	REJECT("back_jump_forever", KP, "infinite loop detected", MOV64_IMM(0, 0), MOV64_IMM(1, 0),
	       JMP_IMM(BPF_JEQ, 1, 0, -2), EXIT()),
	/* the jlt at 3 goes back to 2 while r0 < ctx->tid_x: no bound */
	{"unbounded_loop", KP, "unbounded loop", INSNS(LDX(BPF_W, 1, 1, 0), MOV64_IMM(0, 0),
	 ALU64_IMM(BPF_ADD, 0, 1), JMP_REG(BPF_JLT, 0, 1, -2), EXIT()), NULL, 0, 0, 20000, 0, 0},
	/* ---- sizes, calls ---- */
	{"too_large", KP, "too large", INSNS(MOV64_IMM(0, 0), MOV64_IMM(0, 0), MOV64_IMM(0, 0),
	 MOV64_IMM(0, 0), MOV64_IMM(0, 0), MOV64_IMM(0, 0), MOV64_IMM(0, 0), MOV64_IMM(0, 0),
	 MOV64_IMM(0, 0), EXIT()), NULL, 0, 8, 0, 0, 0},
	{"call_not_function_start", KP, "not the start of a function",
	 INSNS(CALL_LOCAL(1), MOV64_IMM(0, 0), EXIT(), MOV64_IMM(0, 0), EXIT()), SUBS(0, 3), 0, 0, 0, 0},
	{"recursion_too_deep", KP, "too deep",
	 INSNS(CALL_LOCAL(2), MOV64_IMM(0, 0), EXIT(), CALL_LOCAL(-1), EXIT()), SUBS(0, 3), 0, 0, 0, 0},
	{"return_callee_stack", KP, "callee's stack",
	 INSNS(CALL_LOCAL(2), MOV64_IMM(0, 0), EXIT(), MOV64_REG(0, 10), EXIT()), SUBS(0, 3), 0, 0, 0, 0},
	{"combined_stack_too_large", KP, "combined stack size",
	 INSNS(ST(BPF_DW, 10, -400, 0), CALL_LOCAL(2), MOV64_IMM(0, 0), EXIT(),
	       ST(BPF_DW, 10, -200, 0), MOV64_IMM(0, 0), EXIT()), SUBS(0, 4), 0, 0, 0, 0},
	{"jump_leaves_function", KP, "leaves its function",
	 INSNS(JMP_IMM(BPF_JEQ, 1, 0, 3), MOV64_IMM(0, 0), EXIT(), MOV64_IMM(0, 0), EXIT()),
	 SUBS(0, 3), 0, 0, 0, 0},
	{"callee_reads_caller_r6", KP, "R6 !read_ok",
	 INSNS(MOV64_IMM(6, 1), CALL_LOCAL(2), MOV64_IMM(0, 0), EXIT(), MOV64_REG(0, 6), EXIT()),
	 SUBS(0, 4), 0, 0, 0, 0},

	/* ---- ring buffer reservations (references) ---- */
	REJECT("ringbuf_reserve_leak", UP, "unreleased reference", RESERVE, JMP_IMM(BPF_JEQ, 0, 0, 1),
	       ST(BPF_DW, 0, 0, 1), RET0),
	REJECT("ringbuf_submit_unchecked", UP, "may be NULL", RESERVE, MOV64_REG(1, 0),
	       MOV64_IMM(2, 0), CALL(CUBPF_FN_ringbuf_submit), RET0),
	REJECT("ringbuf_record_overflow", UP, "invalid access to ring buffer record", RESERVE,
	       JMP_IMM(BPF_JEQ, 0, 0, 4), ST(BPF_DW, 0, 16, 1), MOV64_REG(1, 0), MOV64_IMM(2, 0),
	       CALL(CUBPF_FN_ringbuf_submit), RET0),
	REJECT("ringbuf_use_after_submit", UP, "R6 !read_ok", RESERVE, JMP_IMM(BPF_JEQ, 0, 0, 5),
	       MOV64_REG(6, 0), MOV64_REG(1, 0), MOV64_IMM(2, 0), CALL(CUBPF_FN_ringbuf_submit),
	       ST(BPF_DW, 6, 0, 1), RET0),
	REJECT("ringbuf_variable_size", UP, "constant record size", MOV64_REG(6, 1), LD_MAP(1, M_RING),
	       LDX(BPF_DW, 2, 6, 0), MOV64_IMM(3, 0), CALL(CUBPF_FN_ringbuf_reserve), RET0),
	REJECT("ringbuf_reserve_on_gpu", KP, "host-only", RESERVE, RET0),
	REJECT("ringbuf_submit_interior", UP, "start of the reserved record", RESERVE,
	       JMP_IMM(BPF_JEQ, 0, 0, 4), MOV64_REG(1, 0), ALU64_IMM(BPF_ADD, 1, 8), MOV64_IMM(2, 0),
	       CALL(CUBPF_FN_ringbuf_submit), RET0),
	REJECT("ringbuf_pointer_into_record", UP, "leaks addr into a ring buffer record", RESERVE,
	       JMP_IMM(BPF_JEQ, 0, 0, 4), STX(BPF_DW, 0, 10, 0), MOV64_REG(1, 0), MOV64_IMM(2, 0),
	       CALL(CUBPF_FN_ringbuf_discard), RET0),
	REJECT("ringbuf_submit_stack", UP, "expected=ringbuf_mem", MOV64_REG(1, 10),
	       ALU64_IMM(BPF_ADD, 1, -8), MOV64_IMM(2, 0), CALL(CUBPF_FN_ringbuf_submit), RET0),
	REJECT("ringbuf_reserve_hash_map", UP, "not a ring buffer", LD_MAP(1, M_HASH), MOV64_IMM(2, 8),
	       MOV64_IMM(3, 0), CALL(CUBPF_FN_ringbuf_reserve), RET0),
	PASS("ringbuf_reserve_submit", UP, RESERVE, JMP_IMM(BPF_JEQ, 0, 0, 5), ST(BPF_DW, 0, 0, 1),
	     ST(BPF_DW, 0, 8, 2), MOV64_REG(1, 0), MOV64_IMM(2, 0), CALL(CUBPF_FN_ringbuf_submit), RET0),
	PASS("ringbuf_reserve_spill_discard", UP, RESERVE, JMP_IMM(BPF_JNE, 0, 0, 1), EXIT(),
	     STX(BPF_DW, 10, 0, -8), CALL(CUBPF_FN_get_current_pid_tgid), LDX(BPF_DW, 1, 10, -8),
	     STX(BPF_W, 1, 0, 4), MOV64_IMM(2, 0), CALL(CUBPF_FN_ringbuf_discard), RET0),

	/* ---- must pass ---- */
	/* every field of the thread block context, GPU helpers allowed */
	PASS("ctx_block_fields", BP, LDX(BPF_W, 0, 1, 0), LDX(BPF_W, 2, 1, 16), LDX(BPF_W, 3, 1, 32),
	     LDX(BPF_W, 4, 1, 36), LDX(BPF_W, 5, 1, 44), ALU64_REG(BPF_ADD, 0, 2),
	     ALU64_REG(BPF_ADD, 0, 3), ALU64_REG(BPF_ADD, 0, 4), ALU64_REG(BPF_ADD, 0, 5),
	     LDX(BPF_DW, 2, 1, 48), ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_DW, 2, 1, 56),
	     ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_W, 2, 1, 40),
	     ALU64_REG(BPF_ADD, 0, 2), EXIT()),
	PASS("delay_const", MP, MOV64_IMM(1, 1000000), CALL(CUBPF_FN_gpu_delay_ns), EXIT()),
	PASS("delay_bounded_reg", MP, LDX(BPF_W, 1, 1, 8), JMP_IMM(BPF_JLE, 1, 1000000, 1),
	     MOV64_IMM(1, 1000000), CALL(CUBPF_FN_gpu_delay_ns), EXIT()),
	PASS("delay_masked", BRP, LDX(BPF_DW, 1, 1, 48), ALU64_IMM(BPF_AND, 1, 0xffff),
	     CALL(CUBPF_FN_gpu_delay_ns), EXIT()),
	PASS("ctx_sync_fields", SP, LDX(BPF_W, 0, 1, 0), LDX(BPF_W, 2, 1, 4), LDX(BPF_W, 3, 1, 8),
	     LDX(BPF_W, 4, 1, 44), LDX(BPF_DW, 5, 1, 48), ALU64_REG(BPF_ADD, 0, 2),
	     ALU64_REG(BPF_ADD, 0, 3), ALU64_REG(BPF_ADD, 0, 4), ALU64_REG(BPF_ADD, 0, 5),
	     LDX(BPF_DW, 5, 1, 56), ALU64_REG(BPF_ADD, 0, 5), EXIT()),
	PASS("ctx_func_fields", FE, LDX(BPF_W, 0, 1, 0), LDX(BPF_W, 2, 1, 48), LDX(BPF_W, 3, 1, 52),
	     LDX(BPF_W, 4, 1, 56), LDX(BPF_W, 5, 1, 60), ALU64_REG(BPF_ADD, 0, 2),
	     ALU64_REG(BPF_ADD, 0, 3), ALU64_REG(BPF_ADD, 0, 4), ALU64_REG(BPF_ADD, 0, 5),
	     LDX(BPF_DW, 2, 1, 64), ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_DW, 2, 1, 312),
	     ALU64_REG(BPF_ADD, 0, 2), EXIT()),
	PASS("ctx_func_exit_gpu_helper", FX, LDX(BPF_W, 6, 1, 60), CALL(CUBPF_FN_get_sm_id),
	     ALU64_REG(BPF_ADD, 0, 6), EXIT()),
	PASS("ctx_insns_warp_sum", VM_PROG_KRETPROBE, LDX(BPF_DW, 1, 1, 312), CALL(CUBPF_FN_warp_sum),
	     EXIT()),
	PASS("ctx_warp_insns", KP, LDX(BPF_DW, 0, 1, 320), EXIT()),
	PASS("ctx_mem_site", MP, LDX(BPF_W, 0, 1, 52), LDX(BPF_W, 2, 1, 60), ALU64_REG(BPF_ADD, 0, 2),
	     EXIT()),
	PASS("ctx_func_retval", FX, LDX(BPF_DW, 0, 1, 320), LDX(BPF_W, 2, 1, 328),
	     ALU64_REG(BPF_ADD, 0, 2), EXIT()),
	PASS("ctx_sync_site", SP, LDX(BPF_W, 0, 1, 64), LDX(BPF_W, 2, 1, 72),
	     ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_W, 2, 1, 76), ALU64_REG(BPF_ADD, 0, 2), EXIT()),
	PASS("ctx_bbret_entries", VM_PROG_BBRETPROBE, LDX(BPF_W, 1, 1, 132),
	     CALL(CUBPF_FN_warp_sum), EXIT()),
	PASS("ctx_bb_fields", BBP, LDX(BPF_W, 0, 1, 0), LDX(BPF_W, 2, 1, 4), LDX(BPF_W, 3, 1, 24),
	     LDX(BPF_W, 4, 1, 100), LDX(BPF_W, 5, 1, 128), ALU64_REG(BPF_ADD, 0, 2),
	     ALU64_REG(BPF_ADD, 0, 3), ALU64_REG(BPF_ADD, 0, 4), ALU64_REG(BPF_ADD, 0, 5), EXIT()),
	PASS("ctx_block_end_gpu_helper", BRP, LDX(BPF_W, 6, 1, 44), CALL(CUBPF_FN_get_sm_id),
	     ALU64_REG(BPF_ADD, 0, 6), EXIT()),
	PASS("lookup_checked_increment", KP, LOOKUP(M_HASH), JMP_IMM(BPF_JEQ, 0, 0, 3),
	     LDX(BPF_DW, 1, 0, 0), ALU64_IMM(BPF_ADD, 1, 1), STX(BPF_DW, 0, 1, 0), RET0),
	PASS("null_check_through_copy", KP, LOOKUP(M_HASH), MOV64_REG(6, 0),
	     JMP_IMM(BPF_JEQ, 0, 0, 1), LDX(BPF_DW, 1, 6, 0), RET0),
	PASS("null_check_jne", KP, LOOKUP(M_HASH), JMP_IMM(BPF_JNE, 0, 0, 2), MOV64_IMM(0, 1),
	     EXIT(), LDX(BPF_DW, 0, 0, 0), EXIT()),
	PASS("bounded_index", KP, MOV64_REG(6, 1), LOOKUP(M_ARRAY), JMP_IMM(BPF_JEQ, 0, 0, 5),
	     LDX(BPF_W, 2, 6, 0), JMP_IMM(BPF_JGE, 2, 4, 3), ALU64_IMM(BPF_LSH, 2, 2),
	     ALU64_REG(BPF_ADD, 0, 2), LDX(BPF_W, 1, 0, 0), RET0),
	PASS("masked_index", KP, MOV64_REG(6, 1), LOOKUP(M_ARRAY), JMP_IMM(BPF_JEQ, 0, 0, 4),
	     LDX(BPF_W, 2, 6, 0), ALU64_IMM(BPF_AND, 2, 15), ALU64_REG(BPF_ADD, 0, 2),
	     ST(BPF_B, 0, 0, 1), RET0),
	PASS("spill_fill_across_call", KP, LOOKUP(M_HASH), JMP_IMM(BPF_JEQ, 0, 0, 4),
	     STX(BPF_DW, 10, 0, -16), CALL(CUBPF_FN_get_globaltimer), LDX(BPF_DW, 1, 10, -16),
	     ST(BPF_DW, 1, 0, 3), RET0),
	PASS("atomics_map_and_stack", KP, LOOKUP(M_HASH), JMP_IMM(BPF_JEQ, 0, 0, 3),
	     MOV64_IMM(1, 1), ATOMIC(BPF_DW, BPF_ADD | BPF_FETCH, 0, 1, 0),
	     ATOMIC(BPF_W, BPF_XCHG, 0, 1, 4), ST(BPF_DW, 10, -16, 0), MOV64_IMM(0, 0),
	     MOV64_IMM(2, 9), ATOMIC(BPF_DW, BPF_CMPXCHG, 10, 2, -16), RET0),
	PASS("probe_read_uprobe", UP, LDX(BPF_DW, 3, 1, 0), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -16),
	     MOV64_IMM(2, 16), CALL(CUBPF_FN_probe_read), LDX(BPF_DW, 0, 10, -16), EXIT()),
	PASS("ringbuf_output", KP, ST(BPF_DW, 10, -8, 7), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8),
	     MOV64_IMM(3, 8), LD_MAP(1, M_RING), MOV64_IMM(4, 0), CALL(CUBPF_FN_ringbuf_output), RET0),
	PASS("printk_rodata_fmt", KP, LD_MAP_VALUE(1, M_RODATA, 0), MOV64_IMM(2, 6), MOV64_IMM(3, 1),
	     MOV64_IMM(4, 2), MOV64_IMM(5, 3), CALL(CUBPF_FN_trace_printk), RET0),
	PASS("puts_rodata_string", KP, LD_MAP_VALUE(1, M_RODATA, 0), CALL(CUBPF_FN_gpu_puts), RET0),
	PASS("block_idx_outputs", KP, MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8), MOV64_REG(2, 10),
	     ALU64_IMM(BPF_ADD, 2, -16), MOV64_REG(3, 10), ALU64_IMM(BPF_ADD, 3, -24),
	     CALL(CUBPF_FN_get_block_idx), LDX(BPF_DW, 0, 10, -16), EXIT()),
	PASS("uprobe_ctx_fields", UP, LDX(BPF_DW, 0, 1, 128), LDX(BPF_DW, 2, 1, 136),
	     LDX(BPF_W, 3, 1, 144), LDX(BPF_W, 4, 1, 152), LDX(BPF_DW, 5, 1, 120), EXIT()),
	PASS("memprobe_ctx_fields", MP, LDX(BPF_DW, 0, 1, 0), LDX(BPF_W, 2, 1, 8),
	     LDX(BPF_W, 3, 1, 44), EXIT()),
	PASS("kprobe_params", KP, LDX(BPF_W, 2, 1, 52), LDX(BPF_DW, 0, 1, 56 + 31 * 8), EXIT()),
	PASS("alu_zoo", KP, MOV64_IMM(0, -7), I(BPF_ALU64 | BPF_DIV | BPF_K, 0, 0, 1, 2),
	     I(BPF_ALU64 | BPF_MOD | BPF_K, 0, 0, 1, 3), I(BPF_ALU64 | BPF_MOV | BPF_X, 1, 0, 8, 0),
	     I(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 16), I(BPF_ALU64 | BPF_END, 1, 0, 0, 64),
	     ALU32_REG(BPF_ARSH, 0, 1), ALU64_IMM(BPF_NEG, 0, 0), EXIT()),
	PASS("many_diamonds_pruned", KP, MOV64_REG(6, 1), MOV64_IMM(7, 0),
	     LDX(BPF_W, 2, 6, 0), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 4), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 8), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 12), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 16), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 20), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 24), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 28), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 32), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 36), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 40), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     LDX(BPF_W, 2, 6, 44), JMP_IMM(BPF_JSET, 2, 1, 1), ALU64_IMM(BPF_ADD, 7, 1),
	     RET0),
	PASS_RUN("bounded_loop_sum", KP, 4950, MOV64_IMM(0, 0), MOV64_IMM(1, 0),
		 ALU64_REG(BPF_ADD, 0, 1), ALU64_IMM(BPF_ADD, 1, 1), JMP_IMM(BPF_JLT, 1, 100, -3),
		 EXIT()),
	PASS_RUN("rodata_loop_bound", KP, 10, LD_MAP_VALUE(1, M_RODATA, 8), LDX(BPF_W, 2, 1, 0),
		 MOV64_IMM(0, 0), ALU64_IMM(BPF_ADD, 0, 1), JMP_REG(BPF_JLT, 0, 2, -2), EXIT()),
	PASS_RUN("bss_roundtrip", KP, 5, LD_MAP_VALUE(1, M_BSS, 8), ST(BPF_DW, 1, 0, 5),
		 LDX(BPF_DW, 0, 1, 0), EXIT()),
	{"callee_writes_caller_stack", KP, NULL,
	 INSNS(ST(BPF_DW, 10, -8, 0), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -8), CALL_LOCAL(2),
	       LDX(BPF_DW, 0, 10, -8), EXIT(), ST(BPF_DW, 1, 0, 42), MOV64_IMM(0, 0), EXIT()),
	 SUBS(0, 6), 0, 0, 1, 42},
	{"nested_calls_preserve_r6", KP, NULL,
	 INSNS(MOV64_IMM(6, 7), CALL_LOCAL(2), ALU64_REG(BPF_ADD, 0, 6), EXIT(),
	       MOV64_IMM(6, 100), CALL_LOCAL(2), ALU64_REG(BPF_ADD, 0, 6), EXIT(),
	       MOV64_IMM(0, 1000), EXIT()),
	 SUBS(0, 4, 8), 0, 0, 1, 1107},
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void run_case(void **state)
{
	const struct vcase *c = *state;
	struct vm_object *obj = test_object(c->insns, c->n, c->kind, c->subprogs, c->nsub);
	struct vm_verify_opts opts = {.max_insns = c->max_insns, .max_processed = c->max_processed};
	struct vm_verify_info info;
	char log[8192];
	int rc = vm_verify(obj, 0, &opts, &info, log, sizeof(log));
	if (c->expect) {
		if (rc == 0)
			fail_msg("%s: accepted, expected rejection with '%s'", c->name, c->expect);
		if (!strstr(log, c->expect))
			fail_msg("%s: rejected, but the log lacks '%s':\n%s", c->name, c->expect, log);
		/* the log names the instruction and shows code around it */
		if (!strstr(log, "rejected at instruction"))
			fail_msg("%s: log has no instruction index:\n%s", c->name, log);
	} else if (rc != 0)
		fail_msg("%s: rejected:\n%s", c->name, log);
	if (!c->expect && !strcmp(c->name, "many_diamonds_pruned") && info.insns_processed > 2000)
		fail_msg("%s: %u instructions processed: pruning does not work", c->name,
			 info.insns_processed);
	if (c->run) {
		char err[VM_ERRLEN];
		uint64_t r0 = 0;
		struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
		assert_non_null(rt);
		struct vm_exec *ex = vm_exec_new(rt, 0, err, sizeof(err));
		assert_non_null(ex);
		struct cubpf_kernel_ctx ctx = {0};
		assert_int_equal(vm_exec_run(ex, &ctx, sizeof(ctx), &r0, err, sizeof(err)), 0);
		assert_int_equal(r0, c->result);
		vm_exec_free(ex);
		vm_runtime_free(rt);
	}
	vm_object_free(obj);
}

static void test_empty_program(void **state)
{
	(void)state;
	char log[1024];
	struct vm_object *obj = test_object(NULL, 0, KP, NULL, 0);
	assert_int_equal(vm_verify(obj, 0, NULL, NULL, log, sizeof(log)), -1);
	assert_non_null(strstr(log, "empty program"));
	vm_object_free(obj);
}

static void test_corpus_size(void **state)
{
	(void)state;
	size_t rejects = 1; /* empty program */
	for (size_t i = 0; i < NCASES; i++)
		rejects += cases[i].expect != NULL;
	if (rejects < 60)
		fail_msg("only %zu must-reject programs", rejects);
}

/* The log shows the disassembly around the rejected instruction and the register state. */
static void test_log_format(void **state)
{
	(void)state;
	const struct bpf_insn insns[] = {LOOKUP(M_HASH), LDX(BPF_DW, 0, 0, 0), EXIT()};
	struct vm_object *obj = test_object(insns, 8, KP, NULL, 0);
	char log[4096];
	struct vm_verify_info info;
	assert_int_equal(vm_verify(obj, 0, NULL, &info, log, sizeof(log)), -1);
	assert_int_equal(info.reject_insn, 6);
	assert_string_equal(info.reason, "insn 6: R0 invalid mem access 'map_value_or_null'");
	assert_non_null(strstr(log, "rejected at instruction 6"));
	assert_non_null(strstr(log, "->     6: r0 = *(u64 *)(r0 + 0)"));
	assert_non_null(strstr(log, "call bpf_map_lookup_elem#1"));
	assert_non_null(strstr(log, "R0=map_value_or_null(map=h"));
	/* a tiny log buffer is truncated, not overrun */
	char small[16];
	memset(small, 'x', sizeof(small));
	assert_int_equal(vm_verify(obj, 0, NULL, NULL, small, 8), -1);
	assert_int_equal(strlen(small), 7);
	vm_object_free(obj);
}

/* A 4096-instruction straight-line program verifies, quickly enough to time in benchmarks. */
static void test_large_program(void **state)
{
	(void)state;
	uint32_t n = 4096;
	struct bpf_insn *p = calloc(n, sizeof(*p));
	assert_non_null(p);
	p[0] = (struct bpf_insn)MOV64_IMM(0, 0);
	for (uint32_t i = 1; i < n - 1; i++)
		p[i] = i % 3 ? (struct bpf_insn)ALU64_IMM(BPF_ADD, 0, (int32_t)i)
			     : (struct bpf_insn)JMP_IMM(BPF_JGT, 0, 5, 1);
	p[n - 2] = (struct bpf_insn)MOV64_IMM(0, 0);
	p[n - 1] = (struct bpf_insn)EXIT();
	struct vm_object *obj = test_object(p, n, KP, NULL, 0);
	char log[4096];
	struct vm_verify_info info;
	int rc = vm_verify(obj, 0, NULL, &info, log, sizeof(log));
	if (rc)
		fail_msg("%s", log);
	assert_true(info.insns_processed >= n / 2); /* known branches skip one add each */
	vm_object_free(obj);
	free(p);
}

size_t verifier_tests(struct CMUnitTest *out, size_t cap)
{
	static char names[NCASES][96];
	size_t n = 0;
	out[n++] = (struct CMUnitTest){"verifier/corpus_size", test_corpus_size, NULL, NULL, NULL};
	out[n++] = (struct CMUnitTest){"verifier/reject/empty_program", test_empty_program, NULL,
				       NULL, NULL};
	out[n++] = (struct CMUnitTest){"verifier/log_format", test_log_format, NULL, NULL, NULL};
	out[n++] = (struct CMUnitTest){"verifier/large_program", test_large_program, NULL, NULL, NULL};
	for (size_t i = 0; i < NCASES && n < cap; i++) {
		snprintf(names[i], sizeof(names[i]), "verifier/%s/%s",
			 cases[i].expect ? "reject" : "pass", cases[i].name);
		out[n++] = (struct CMUnitTest){names[i], run_case, NULL, NULL, (void *)&cases[i]};
	}
	return n;
}
