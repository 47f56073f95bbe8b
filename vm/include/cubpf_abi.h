/* cubpf probe ABI: what a probe program sees and may call.
 *
 * Shared by probe programs (clang -target bpf, through tools/include/cubpf_helpers.h) and by
 * cubpf itself: vm/ defines the program model (kinds, contexts, helpers, map types) and its
 * verifier enforces the limits below; every module above vm/ sees it through vm/vm.h.  It holds
 * only numbers and plain structs, so that both sides compile it.  Changing a layout or a number
 * here breaks every probe object already built: add, never renumber.
 *
 * Probe authors include it as "cubpf_abi.h" with -I tools/include (tools/include/cubpf_abi.h
 * includes this file); `make install` and `make dist` install this file itself as
 * include/cubpf/cubpf_abi.h beside cubpf_helpers.h.  The device-memory layouts that generated
 * code and the shim share (ring buffers, enable words, GPU maps) are not probe ABI: they are the
 * code generator's contract, ptx-rewriter/layout.h.
 */
#ifndef CUBPF_ABI_H
#define CUBPF_ABI_H

#include <linux/types.h>

/* ---- program kinds, chosen by ELF section name ------------------------------------------
 *   SEC("kprobe/GLOB")      GPU kernel entry, once per thread          ctx: cubpf_kernel_ctx
 *   SEC("kretprobe/GLOB")   GPU kernel exit, every ret/exit of a thread ctx: cubpf_kernel_ctx
 *   SEC("memprobe/GLOB")    GPU memory access (ld/st/atom/red)          ctx: cubpf_mem_ctx
 *   SEC("uprobe/FUNC")      host driver call entry (FUNC = cuLaunchKernel, ...) ctx: cubpf_api_ctx
 *   SEC("uretprobe/FUNC")   host driver call return                      ctx: cubpf_api_ctx
 *   SEC("blockprobe/GLOB")  thread block begin, once per block          ctx: cubpf_block_ctx
 *   SEC("blockretprobe/GLOB") thread block end, once its last thread left ctx: cubpf_block_ctx
 *   SEC("syncprobe/GLOB")   before and after every barrier and fence    ctx: cubpf_sync_ctx
 *   SEC("fentry/GLOB")      device function (.func) entry, every thread ctx: cubpf_func_ctx
 *   SEC("fexit/GLOB")       device function return, every ret           ctx: cubpf_func_ctx
 *   SEC("bbprobe/GLOB")     entry of every PTX basic block              ctx: cubpf_bb_ctx
 *   SEC("bbretprobe/GLOB")  kernel exit, once per basic block, with the thread's entries of it
 *                                                                       ctx: cubpf_bb_ctx
 * GLOB matches the kernel's mangled or demangled name (fnmatch syntax; "*" = every kernel);
 * for fentry/fexit, the device function's.
 */

#define CUBPF_MAX_KERNEL_PARAMS 32
#define CUBPF_MAX_API_ARGS 16

/* Context of kprobe/kretprobe programs.  Read-only.  Fields are read with loads of their own
 * size at their own offset; the PTX code generator turns each read into the special register
 * or parameter load it names, so an unread field costs nothing. */
struct cubpf_kernel_ctx {
	__u32 tid_x, tid_y, tid_z;          /* %tid: thread index in the block */
	__u32 ntid_x, ntid_y, ntid_z;       /* %ntid: block dimensions */
	__u32 ctaid_x, ctaid_y, ctaid_z;    /* %ctaid: block index in the grid */
	__u32 nctaid_x, nctaid_y, nctaid_z; /* %nctaid: grid dimensions */
	__u32 kernel_id;                    /* cubpf's id of the kernel (see the trace's string table) */
	__u32 nparams;                      /* number of kernel parameters */
	/* Kernel parameters in declaration order: the first 8 bytes of each, zero-extended when
	 * smaller; 0 past nparams. */
	__u64 params[CUBPF_MAX_KERNEL_PARAMS];
	/* Issue 32 (instruction counts): in kretprobe, the PTX instructions this thread issued in
	 * the kernel's body (a predicated-off one counts; cubpf's own and those of the .funcs it
	 * calls do not).  cubpf counts them only for kernels whose kretprobes read the field: at
	 * the entry of each basic block (bbprobe's blocks) one instruction counts the entry (an
	 * add to a register of the block if it is on a loop, an or of its bit otherwise), and the
	 * read sums entries x instructions over the blocks.  0 in kprobe. */
	__u64 insns;
	/* The same counted once per warp-level execution: the instructions of the blocks this
	 * thread entered as the one lane elected among the lanes entering together (elect.sync
	 * on sm_90, the lowest lane before: a few more instructions per block entry when read);
	 * bpf_warp_sum over the lanes leaving together gives their warp-level count.  0 in
	 * kprobe. */
	__u64 warp_insns;
};

/* Memory spaces of a memprobe access. */
enum cubpf_mem_space {
	CUBPF_SPACE_GENERIC = 0,
	CUBPF_SPACE_GLOBAL = 1,
	CUBPF_SPACE_SHARED = 2,
	CUBPF_SPACE_LOCAL = 3,
	CUBPF_SPACE_CONST = 4,
	CUBPF_SPACE_PARAM = 5,
};

/* What the access does. */
enum cubpf_mem_op {
	CUBPF_MEM_LOAD = 1,
	CUBPF_MEM_STORE = 2,
	CUBPF_MEM_ATOMIC = 3, /* atom: read-modify-write returning the old value */
	CUBPF_MEM_REDUCE = 4, /* red: read-modify-write without a result */
};

/* Context of memprobe programs, run just before the access by the thread that makes it. */
struct cubpf_mem_ctx {
	__u64 addr;       /* address as the instruction uses it (space-relative unless generic) */
	__u32 size;       /* bytes this thread accesses (vector forms: all elements) */
	__u32 space;      /* enum cubpf_mem_space */
	__u32 op;         /* enum cubpf_mem_op */
	__u32 insn_index; /* index of the instruction among the kernel's instructions */
	__u32 kernel_id;
	__u32 tid_x, tid_y, tid_z;
	__u32 ctaid_x, ctaid_y, ctaid_z;
	/* Issue 32, the probe's own site (constants): the instruction's line in the module's PTX
	 * (from 1), and the .loc in force there (file number and line, 0 without line info). */
	__u32 ptx_line;
	__u32 src_file;
	__u32 src_line;
};

/* Context of blockprobe/blockretprobe programs: run once per thread block, at its begin by
 * thread (0,0,0) before any thread of the block runs the kernel's code, and at its end by one
 * lane of the last warp to leave, after every other thread of the block has left (early and
 * predicated returns included).  Read-only; `end` and kernel_id are constants where the probe
 * sits, so a program shared by both kinds folds its test of `end` away. */
struct cubpf_block_ctx {
	__u32 ctaid_x, ctaid_y, ctaid_z;    /* %ctaid: this block's index in the grid */
	__u32 nctaid_x, nctaid_y, nctaid_z; /* %nctaid: grid dimensions */
	__u32 ntid_x, ntid_y, ntid_z;       /* %ntid: block dimensions */
	__u32 kernel_id;
	__u32 sm_id;                        /* %smid: the SM the block runs on */
	__u32 end;                          /* 0 in blockprobe, 1 in blockretprobe */
	__u64 time_ns;                      /* %globaltimer at the probe, ns (32 ns ticks on sm_90) */
	__u64 begin_ns;                     /* %globaltimer when the block began (kept by cubpf in
					     * its block table): end - begin is the block's time */
};

/* What a syncprobe sits on. */
enum cubpf_sync_kind {
	CUBPF_SYNC_BAR = 1,        /* bar.sync, bar, barrier.sync[.aligned]: CTA barrier, waits */
	CUBPF_SYNC_BAR_ARRIVE = 2, /* bar.arrive, barrier.arrive: arrives without waiting */
	CUBPF_SYNC_BAR_RED = 3,    /* bar.red, barrier.red: waits and reduces a predicate */
	CUBPF_SYNC_WARP = 4,       /* bar.warp.sync (__syncwarp) */
	CUBPF_SYNC_CLUSTER = 5,    /* barrier.cluster.arrive / barrier.cluster.wait (sm_90) */
	CUBPF_SYNC_MBARRIER = 6,   /* mbarrier.try_wait / mbarrier.test_wait: one attempt each */
	CUBPF_SYNC_FENCE = 7,      /* fence.*, membar.* */
};

/* ctx->id of a barrier whose id the instruction does not name (warp, cluster, mbarrier, fence). */
#define CUBPF_SYNC_ID_NONE 0xffffffffu

/* Context of syncprobe programs: run by each thread that executes the barrier or fence (under
 * the instruction's own predicate), once just before it and once just after it, so that a
 * program can take the time spent waiting.  Read-only; kind, id (when the instruction names it
 * as a literal), after, site and kernel_id are constants where the probe sits. */
struct cubpf_sync_ctx {
	__u32 kind;                         /* enum cubpf_sync_kind */
	__u32 id;                           /* barrier number (bar.sync 1: 1; a register's value at
					     * run time), CUBPF_SYNC_ID_NONE for the others */
	__u32 after;                        /* 0 before the instruction, 1 after it */
	__u32 site;                         /* index of the instruction in its function */
	__u32 kernel_id;                    /* CUBPF_KERNEL_ID_SHARED (0xffffffff) in a .func that
					     * several probed kernels call */
	__u32 tid_x, tid_y, tid_z;
	__u32 ctaid_x, ctaid_y, ctaid_z;
	__u32 sm_id;                        /* %smid */
	__u64 time_ns;                      /* %globaltimer at the probe, ns */
	__u64 before_ns;                    /* after: %globaltimer just before the instruction (kept
					     * in a register by cubpf: time_ns - before_ns is the
					     * time spent in it); before: as time_ns */
	__u32 ptx_line;                     /* the instruction's line in the module's PTX, and */
	__u32 src_file;                     /* the .loc in force there (0, 0 without line info): */
	__u32 src_line;                     /* constants where the probe sits (issue 32) */
	__u32 sync_index;                   /* the site's place among its function's barrier,
					     * fence and mbarrier sites: 0, 1, ... (a constant) */
};

/* Context of fentry/fexit programs: run by each thread that calls a device function (a .func
 * the PTX keeps: __noinline__ functions, not those the compiler inlined), at its entry (fentry)
 * and at each of its returns (fexit).  Read-only.  The first fields are those of
 * cubpf_kernel_ctx, at the same offsets; params are the function's own parameters.  kernel_id,
 * nparams, func_id and exit are constants where the probe sits. */
struct cubpf_func_ctx {
	__u32 tid_x, tid_y, tid_z;          /* %tid */
	__u32 ntid_x, ntid_y, ntid_z;       /* %ntid */
	__u32 ctaid_x, ctaid_y, ctaid_z;    /* %ctaid */
	__u32 nctaid_x, nctaid_y, nctaid_z; /* %nctaid */
	__u32 kernel_id;                    /* the calling kernel's id; CUBPF_KERNEL_ID_SHARED
					     * (0xffffffff) when several probed kernels call it or
					     * none does directly */
	__u32 nparams;                      /* number of the function's parameters */
	__u32 func_id;                      /* the function's id: FNV-1a (32 bits) of its mangled
					     * name, as cubpf's default kernel id */
	__u32 exit;                         /* 0 in fentry, 1 in fexit */
	/* The function's parameters in declaration order: the first 8 bytes of each,
	 * zero-extended when smaller; 0 past nparams.  In fexit, the values they had at entry
	 * unless the function wrote its own parameters (PTX lets it, nvcc does not). */
	__u64 params[CUBPF_MAX_KERNEL_PARAMS];
	/* fexit (issue 32): the value the function returns, the first 8 bytes of its first return
	 * parameter, zero-extended when smaller (0 in fentry, and in a function that returns
	 * nothing); has_retval: whether it returns one (a constant where the probe sits). */
	__u64 retval;
	__u32 has_retval;
	__u32 pad;
};

/* Opcode classes of PTX instructions (cubpf_bb_ctx.op_class): what each basic block holds. */
enum cubpf_op_class {
	CUBPF_OP_OTHER = 0,     /* anything not below (nanosleep, prefetch, ...) */
	CUBPF_OP_INT = 1,       /* integer arithmetic: add, sub, mul, mad, div, rem, min, max, ... */
	CUBPF_OP_FP32 = 2,      /* .f32 arithmetic (fma, add, mul, ...) */
	CUBPF_OP_FP64 = 3,      /* .f64 arithmetic */
	CUBPF_OP_FP16 = 4,      /* .f16, .bf16 and their x2 forms */
	CUBPF_OP_SFU = 5,       /* sin, cos, ex2, lg2, rcp, sqrt, rsqrt, tanh (any type) */
	CUBPF_OP_LOGIC = 6,     /* and, or, xor, not, cnot, shl, shr, lop3, bfe, bfi, prmt, popc, ... */
	CUBPF_OP_CMP = 7,       /* setp, set, selp, slct */
	CUBPF_OP_MOV = 8,       /* mov, cvt, cvta, isspacep */
	CUBPF_OP_LD_GLOBAL = 9, /* ld/ldu of the global or generic space */
	CUBPF_OP_ST_GLOBAL = 10,/* st of the global or generic space */
	CUBPF_OP_SHARED = 11,   /* ld/st .shared */
	CUBPF_OP_LOCAL = 12,    /* ld/st .local */
	CUBPF_OP_PARAM = 13,    /* ld/st .param and .const */
	CUBPF_OP_ATOMIC = 14,   /* atom, red */
	CUBPF_OP_CONTROL = 15,  /* bra, brx, call, ret, exit, trap */
	CUBPF_OP_SYNC = 16,     /* bar, barrier, membar, fence, mbarrier */
	CUBPF_OP_WARP = 17,     /* shfl, vote, match, redux, activemask */
	CUBPF_OP_TENSOR = 18,   /* mma, wmma, wgmma, ldmatrix, stmatrix */
	CUBPF_OP_ASYNC = 19,    /* cp.async, cp.async.bulk, tex, suld, sust, tld4 */
	CUBPF_OP_CLASSES = 20,
};

/* Context of bbprobe and bbretprobe programs.  bbprobe: run by every thread that enters a PTX
 * basic block of a selected kernel or of a .func it calls, at the block's first instruction,
 * before it (unpredicated).
 * Blocks start at the body's first instruction, at labels and after branches, returns and
 * exits; each ends before the next start.  A block's instructions are the PTX instructions in
 * it (labels, directives, declarations and cubpf's own code are not); every thread that
 * enters a block issues all of them (predicated-off ones included).  Read-only; every field up
 * to op_class is a constant where the probe sits, so a counter of ctx->insn_count folds to an
 * add of a constant (warp-aggregated on sm_70+: one atomic per warp).  bbretprobe: run at the
 * kernel's exit (every ret/exit, as kretprobe) by each thread leaving, once for each basic
 * block of the kernel's body (not of the .funcs it calls), in block order, with that block's
 * constants and ctx->entries: per-block counts at the cost of one instruction per block entry
 * and the program's own at exit. */
struct cubpf_bb_ctx {
	__u32 block_id;     /* index of the block in its function, in PTX order; in a .func,
			     * (1 + the .func's index among the module's functions) << 16 | index */
	__u32 insn_count;   /* PTX instructions in the block */
	__u32 kernel_id;    /* CUBPF_KERNEL_ID_SHARED in a .func that several probed kernels call */
	__u32 ptx_line;     /* line of the block's first instruction in the module's PTX (from 1) */
	__u32 src_file;     /* the .loc in force at the block's first instruction: file number */
	__u32 src_line;     /* and line; both 0 when the PTX has no .loc there */
	__u32 op_class[CUBPF_OP_CLASSES]; /* instructions of the block of each enum cubpf_op_class */
	__u32 tid_x, tid_y, tid_z;
	__u32 ctaid_x, ctaid_y, ctaid_z;
	__u32 sm_id;        /* %smid */
	/* How many times this thread entered the block: 1 in bbprobe (this entry); in bbretprobe,
	 * the count cubpf kept (a register per block on a loop, a bit for the others, one add or
	 * or at each entry: nothing touches memory while the kernel runs), so that a program
	 * written for both counts the same. */
	__u32 entries;
};

/* Context of uprobe/uretprobe programs on the host. */
struct cubpf_api_ctx {
	__u64 args[CUBPF_MAX_API_ARGS]; /* the call's arguments, as integers (pointers included) */
	__u64 ret;                      /* CUresult; uretprobe only, 0 in uprobe */
	__u64 ts_ns;                    /* host CLOCK_REALTIME at the probe, nanoseconds */
	__u32 func_id;                  /* cubpf's id of the intercepted function */
	__u32 nargs;
	__u32 tid;                      /* host thread id */
	__u32 pad;
};

/* ---- helpers ------------------------------------------------------------------------------
 * Linux numbers where Linux has the helper; bpftime's GPU numbers (501-511) where it defines
 * them; cubpf's own from 520 on. */
enum cubpf_helper_id {
	CUBPF_FN_map_lookup_elem = 1,
	CUBPF_FN_map_update_elem = 2,
	CUBPF_FN_map_delete_elem = 3,
	CUBPF_FN_probe_read = 4,
	CUBPF_FN_ktime_get_ns = 5,
	CUBPF_FN_trace_printk = 6,
	CUBPF_FN_get_smp_processor_id = 8,
	CUBPF_FN_get_current_pid_tgid = 14,
	CUBPF_FN_probe_read_user = 112,
	CUBPF_FN_ringbuf_output = 130,
	CUBPF_FN_ringbuf_reserve = 131,      /* (ringbuf, size, flags) -> record or NULL; host only */
	CUBPF_FN_ringbuf_submit = 132,       /* (record, flags): publish a reserved record */
	CUBPF_FN_ringbuf_discard = 133,      /* (record, flags): drop a reserved record */

	CUBPF_FN_gpu_puts = 501,             /* (const char *) */
	CUBPF_FN_get_globaltimer = 502,      /* () -> %globaltimer, ns */
	CUBPF_FN_get_block_idx = 503,        /* (u64 *x, u64 *y, u64 *z) */
	CUBPF_FN_get_block_dim = 504,        /* (u64 *x, u64 *y, u64 *z) */
	CUBPF_FN_get_thread_idx = 505,       /* (u64 *x, u64 *y, u64 *z) */
	CUBPF_FN_gpu_membar = 506,           /* () -> membar.gl */
	CUBPF_FN_get_sm_id = 509,            /* () -> %smid */
	CUBPF_FN_get_warp_id = 510,          /* () -> %warpid */
	CUBPF_FN_get_lane_id = 511,          /* () -> %laneid */

	CUBPF_FN_get_grid_dim = 520,         /* (u64 *x, u64 *y, u64 *z) */
	CUBPF_FN_get_active_mask = 521,      /* () -> activemask.b32 */
	CUBPF_FN_get_clock = 522,            /* () -> %clock64 */
	/* Warp-level helpers (issue 6: probes that touch memory once per warp, not per thread).
	 * They look at the lanes that call them together (activemask); the host's interpreter runs
	 * one thread, seen as a warp of one active lane. */
	CUBPF_FN_get_active_count = 523,     /* () -> popc(activemask): lanes calling together */
	CUBPF_FN_is_warp_leader = 524,       /* () -> 1 on the lowest active lane, else 0 */
	CUBPF_FN_warp_count_unique = 525,    /* (u64 v) -> distinct v among the active lanes
					      * (match.any.sync: sm_70 and later) */
	/* (u64 ns) -> 0 after spinning on %globaltimer until ns have passed: a memprobe makes
	 * the access it sits on that much slower (memory-latency sensitivity).  ns must be
	 * proven <= CUBPF_MAX_DELAY_NS by the verifier (a constant, or a bounded register). */
	CUBPF_FN_gpu_delay_ns = 526,
	CUBPF_FN_warp_sum = 527,             /* (u64 v) -> the sum of v over the active lanes
					      * (redux.sync on sm_80 and later, shuffles before) */
};

/* ---- map types ---------------------------------------------------------------------------
 * Linux numbers for the host-side kinds; bpftime's for the GPU kinds it defines. */
enum cubpf_map_type {
	CUBPF_MAP_HASH = 1,            /* BPF_MAP_TYPE_HASH */
	CUBPF_MAP_ARRAY = 2,           /* BPF_MAP_TYPE_ARRAY */
	CUBPF_MAP_PERCPU_ARRAY = 6,    /* BPF_MAP_TYPE_PERCPU_ARRAY: on the GPU, one slot per SM */
	CUBPF_MAP_RINGBUF = 27,        /* BPF_MAP_TYPE_RINGBUF */
	CUBPF_MAP_PERTHREAD_ARRAY = 1502, /* bpftime's PERGPUTD_ARRAY: one value per GPU thread */
	CUBPF_MAP_GPU_ARRAY = 1503,       /* bpftime's GPU_ARRAY_MAP: one copy in device memory */
	CUBPF_MAP_GPU_RINGBUF = 1527,     /* bpftime's GPU_RINGBUF_MAP */
};

/* map_flags of cubpf's own (issue 32), above Linux's BPF_F_* bits.
 * CUBPF_F_DEFER_ADD: on the GPU, an atomic add to one of the map's values whose result the
 * program does not use (__sync_fetch_and_add as a statement) may be kept in a register of the
 * thread and added to memory when the thread moves on to another address or leaves the
 * kernel: a program that adds to the same record at every barrier or access of a kernel then
 * touches memory once per thread, not once per event.  Sums stay exact; they show in the map
 * when the thread leaves through the kernel's own returns (a thread that traps, or ends with
 * `exit` inside a device function, never adds them), and the thread's own reads of the value
 * do not see them: for counters that only the host reads.  Sites of kernels only (device
 * functions add at once); ignored on the host. */
#define CUBPF_F_DEFER_ADD (1u << 28)

/* ---- limits of GPU programs, enforced by the verifier (and again by the code generator) ----- */
#define CUBPF_RB_MAX_RECORD 4096u /* payload bytes of one record (bpf_ringbuf_output size) */
#define CUBPF_HASH_MAX_KEY 64u    /* key bytes of a hash map used by GPU programs */
#define CUBPF_MAX_DELAY_NS 1000000u /* bpf_gpu_delay_ns: at most 1 ms per call */

#endif /* CUBPF_ABI_H */
