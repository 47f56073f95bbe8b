/* hotblocks: the basic blocks where each kernel's threads spend their instructions (issue 32).
 * A bbretprobe: at kernel exit, once per basic block of the kernel, ctx->entries is how many
 * times the thread entered the block, which cubpf counts in a register (a counter for a block on
 * a loop, a bit for the others: one instruction per block entry, no memory).  The lanes leaving
 * together sum their entries (bpf_warp_sum) and their lowest lane adds the sum to the block's
 * record on its SM.  The block's static facts (instruction count, PTX line, .loc file and line:
 * constants there) go to a map of their own, written by the leaders of thread block (0,0,0) and
 * about one leader in 256 elsewhere (by %clock), so that the common exit stores nothing more;
 * kept apart, the entries' map is only ever added to, which lets cubpf sum its adds per thread
 * block (below).  The report multiplies entries by instruction counts.
 *
 * Records: per kernel, one per each of its first HB_BLOCKS blocks, per SM (a per-SM map; 32-byte
 * values, so that the copies of 4 SMs share a line), and one facts record per block.  Blocks
 * from HB_BLOCKS - 1 on share the last record; kernel ids from HB_KERNELS on are not counted.
 * 16 x 256 x 256 SM slots x 32 B = 32 MiB, and 64 KiB of facts.
 *
 * Cost (issue 32): 1 instruction per basic block entry, no memory; at exit, per warp and
 * block entered, a warp sum (one redux.sync since 2026-11-28 when the lanes' counts are below
 * 2^27, three before), the leader test and one shared-memory add; per thread block, a barrier
 * where it starts and one red.global.add per block its threads entered, by its last warp
 * (ptx-rewriter/accs.c: the record's place is the same for every thread of a thread block).
 * Before (2026-11-28) every warp's leader made the reductions, spread over 64 shards of an SM
 * pair each: vec_add's 3 blocks, 3 reds per warp over 64 x 3 lines, 1.60x on b_instr.sh.  A
 * kernel with dynamic shared memory (or CUBPF_SHARED_SUMS=0) still reduces per warp, now to
 * its SM's copy (4 SMs a line). */
#include "cubpf_helpers.h"

#define HB_KERNELS 16
#define HB_BLOCKS 256

struct hbstat {
	__u64 threads;   /* entries by threads */
	__u64 pad[3];    /* 32 bytes: 4 SMs' copies a line */
};

struct hbsite {
	__u64 site;      /* instructions << 32 | PTX line (0: not written yet) */
	__u64 src;       /* .loc file << 32 | line */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, HB_KERNELS * HB_BLOCKS);
	__type(key, __u32);
	__type(value, struct hbstat);
} hbstats SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, HB_KERNELS * HB_BLOCKS);
	__type(key, __u32);
	__type(value, struct hbsite);
} hbsites SEC(".maps");

SEC("bbretprobe/*")
int hotblocks(struct cubpf_bb_ctx *ctx)
{
	__u64 n = bpf_warp_sum(ctx->entries);
	if (!n || !bpf_is_warp_leader()) /* n: the same in every lane */
		return 0;
	__u32 id = ctx->kernel_id, b = ctx->block_id;
	if (id >= HB_KERNELS)
		return 0;
	if (b >= HB_BLOCKS)
		b = HB_BLOCKS - 1;
	__u32 k = id * HB_BLOCKS + b;
	struct hbstat *s = bpf_map_lookup_elem(&hbstats, &k);
	if (s)
		__sync_fetch_and_add(&s->threads, n);
	if (ctx->block_id >= HB_BLOCKS - 1 ||
	    ((ctx->ctaid_x | ctx->ctaid_y | ctx->ctaid_z) && (bpf_get_clock() & 255)))
		return 0;
	struct hbsite *f = bpf_map_lookup_elem(&hbsites, &k);
	if (f) {
		f->site = (__u64)ctx->insn_count << 32 | ctx->ptx_line;
		f->src = (__u64)ctx->src_file << 32 | ctx->src_line;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
