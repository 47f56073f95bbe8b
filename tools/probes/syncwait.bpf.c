/* syncwait: time threads spend at barriers, per kernel and per barrier site (issue 32).  After
 * each barrier, fence and mbarrier wait attempt (syncprobe), the time spent in it is
 * time_ns - before_ns (cubpf keeps before_ns in a register: the before side is one
 * %globaltimer read into it, no memory).  Lanes leave a barrier together, so the lowest lane of
 * the lanes leaving together adds their number and its own wait times that number: one update
 * per warp and site, to its SM's copy (a per-SM map, each copy a 128-byte line of its own) of
 * the site's record.  Sites are the barrier's place among its function's sync sites
 * (ctx->sync_index: sites from SW_SITES - 1 on share the last record), which records the
 * instruction index for the report; kernel ids from 64 on are not counted.  Device memory:
 * 64 kernels x 16 sites x 256 SM slots x 128 bytes = 32 MiB.
 *
 * Cost per warp and site after the barrier (issue 32): activemask, popc, the leader test, the
 * record's address (ALU and one constant load), one %globaltimer read, and the two adds kept
 * in registers (the map is CUBPF_F_DEFER_ADD: ~7 instructions each, no memory while the
 * thread's sites keep to one record; when it moves to another record, one red.global.add
 * each, which the warp does not wait for; the rest at kernel exit, two per warp and record it
 * used, spread over the SMs' own lines).  Before 2026-11-28 the leader made two
 * red.global.add, loaded max_ns to compare (an L2 round trip that every warp of the block then
 * waited for at its next barrier) and stored `what`: four or five memory operations per warp
 * and barrier on a line that 4 SMs' warps shared (27.6x on a reduction with a barrier every
 * few instructions).  Now max_ns, `what` and the instruction index are written only by the
 * warps of thread block (0,0,0) and by about one warp in 16 elsewhere (%clock): `what` is a
 * constant of the site (or the barrier register's value), and max_ns is the longest wait of
 * the warps that looked, a near maximum (it lost races before too).  Sums reach the map when
 * the threads leave the kernel. */
#include "cubpf_helpers.h"

#define SW_KERNELS 64
#define SW_SITES 16

struct swstat {
	__u64 threads;  /* threads that passed the site */
	__u64 wait_ns;  /* their time in it, summed */
	__u64 max_ns;   /* the longest one warp waited, of the warps that looked (see above) */
	__u64 what;     /* kind << 32 | barrier id (CUBPF_SYNC_ID_NONE when it names none); 0:
			 * not written on this SM copy */
	__u64 insn;     /* the site's instruction index in its function + 1 (0: not written) */
	__u64 pad[11];  /* 128 bytes: a line per SM copy */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(map_flags, CUBPF_F_DEFER_ADD);
	__uint(max_entries, SW_KERNELS * SW_SITES);
	__type(key, __u32);
	__type(value, struct swstat);
} swsites SEC(".maps");

SEC("syncprobe/*")
int syncwait(struct cubpf_sync_ctx *ctx)
{
	if (!ctx->after) /* folds away: nothing runs before the barrier */
		return 0;
	__u64 n = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 id = ctx->kernel_id, site = ctx->sync_index;
	if (id >= SW_KERNELS)
		return 0;
	if (site >= SW_SITES)
		site = SW_SITES - 1;
	__u32 k = id * SW_SITES + site;
	struct swstat *s = bpf_map_lookup_elem(&swsites, &k);
	if (!s)
		return 0;
	__u64 w = ctx->time_ns - ctx->before_ns;
	__sync_fetch_and_add(&s->threads, n);
	__sync_fetch_and_add(&s->wait_ns, w * n);
	if ((ctx->ctaid_x | ctx->ctaid_y | ctx->ctaid_z) && (bpf_get_clock() & 15))
		return 0; /* the common case: no load, no store */
	if (w > s->max_ns)
		s->max_ns = w; /* a plain store: a lost race loses a near maximum */
	s->what = (__u64)ctx->kind << 32 | ctx->id;
	s->insn = ctx->site + 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
