/* blocklat: how long thread blocks take, per kernel and per SM (issue 32).  At each block's end
 * (blockretprobe: the last group of its threads to leave), duration = time_ns - begin_ns (cubpf
 * keeps the begin in 16 bytes of the block's shared memory, or in its block table in device
 * memory in modules with dynamic shared memory: ptx-rewriter/layout.h).  Per kernel id and per SM (a per-SM map, each
 * copy a 128-byte line of its own, as kcount's): blocks, the sum, least and largest duration,
 * the SM's first begin and last end, and its slowest block; per kernel a log2 histogram of the
 * durations.  One probe run per block: nothing runs per thread but cubpf's count of the
 * threads still running (one atomic per group of lanes leaving).  Kernel ids from 1024
 * on are not counted.
 *
 * Cost per thread block (issue 32; L2 round trips, RT, the block waits for; vec_add's blocks
 * of 256 threads live a few microseconds, an RT under load is ~0.5 us).  With the block's
 * state in shared memory: no RT of cubpf's, at begin (thread (0,0,0) stores the begin time
 * and the thread count, then the entry barrier) nor at the end (one shared-memory atomic per
 * group of lanes leaving); this program's RT below remain.  With the block table:
 *   begin, thread (0,0,0), every thread waiting at the entry barrier: before 2026-11-28 a load
 *     of the table slot's key then a CAS (2 RT); now a CAS from EMPTY (1 RT), and the barrier
 *     (bar.red.or) tells every thread whether the block has its start slot;
 *   end, the lowest lane of each group of lanes leaving together: before, a load of the
 *     slot's key then an atomic add to the count of threads running (2 RT per warp); now the
 *     add alone, at the start slot (1 RT; the scan remains for the ~15% of blocks elsewhere);
 *   the last group, this program: before, the loads of max, min and first begin one after
 *     the other, each behind the last one's branch (3 RT, plus the release of the slot); now
 *     the three loads together (1 RT, plus the release).  The rest is fire-and-forget:
 *     two red.add and the histogram's, a plain store of last_end; CAS only when the
 *     largest, least or first changes.
 * Nothing runs per thread; no shared memory of this program's own. */
#include "cubpf_helpers.h"

#define BL_KERNELS 1024
#define BL_SLOTS 32 /* log2 slots of the histogram: 1 ns .. 2^31 ns (2 s) and above */

struct blstat {
	__u64 blocks;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 min_ns;      /* 0: none yet */
	__u64 first_begin; /* earliest block begin on this SM */
	__u64 last_end;    /* latest block end on this SM (last store wins: blocks of an SM end
			    * one after the other) */
	__u64 slowest;     /* linear index + 1 of the block that set max_ns */
	__u64 pad[9];      /* 128 bytes: a cache line per SM copy */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, BL_KERNELS);
	__type(key, __u32);
	__type(value, struct blstat);
} blstats SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, BL_KERNELS * BL_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} blhist SEC(".maps");

/* The stats' fields that need a compare first are read together, before any branch (volatile:
 * the compiler keeps them there): the loads go out back to back and the warp waits one L2
 * round trip for the three, not one each; each compare-and-swap round goes on from the value
 * the last one returned, not from a fresh load.  The block's thread slot on its SM stays taken
 * until this warp leaves, so its round trips are the block's. */
SEC("blockretprobe/*")
int blocklat_end(struct cubpf_block_ctx *ctx)
{
	__u32 id = ctx->kernel_id;
	if (id >= BL_KERNELS)
		return 0;
	struct blstat *s = bpf_map_lookup_elem(&blstats, &id);
	if (!s)
		return 0;
	__u64 end = ctx->time_ns, begin = ctx->begin_ns;
	__u64 mx = *(volatile __u64 *)&s->max_ns, mn = *(volatile __u64 *)&s->min_ns;
	__u64 fb = *(volatile __u64 *)&s->first_begin;
	__u64 d = end > begin ? end - begin : 0;
	__sync_fetch_and_add(&s->blocks, 1);
	__sync_fetch_and_add(&s->sum_ns, d);
	/* the largest and least: a few compare-and-swap rounds (one block at a time per SM) */
	for (int i = 0; i < 4 && mx < d; i++) {
		__u64 old = __sync_val_compare_and_swap(&s->max_ns, mx, d);
		if (old == mx) {
			s->slowest = ctx->ctaid_x +
				     ctx->nctaid_x * (ctx->ctaid_y + ctx->nctaid_y * (__u64)ctx->ctaid_z) + 1;
			break;
		}
		mx = old;
	}
	for (int i = 0; i < 4 && (mn == 0 || mn > d + 1); i++) {
		__u64 old = __sync_val_compare_and_swap(&s->min_ns, mn, d + 1);
		if (old == mn)
			break;
		mn = old;
	}
	for (int i = 0; i < 4 && (fb == 0 || fb > begin); i++) {
		__u64 old = __sync_val_compare_and_swap(&s->first_begin, fb, begin);
		if (old == fb)
			break;
		fb = old;
	}
	s->last_end = end;
	__u32 k = id * BL_SLOTS + (d ? cubpf_log2(d) : 0);
	if (k >= BL_KERNELS * BL_SLOTS)
		return 0;
	__u64 *h = bpf_map_lookup_elem(&blhist, &k);
	if (h)
		__sync_fetch_and_add(h, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
