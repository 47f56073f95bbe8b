/* hotblocks: the basic blocks where each kernel's threads spend their instructions (issue 32).
 * A bbretprobe: at kernel exit, once per basic block of the kernel, ctx->entries is how many
 * times the thread entered the block, which cubpf counts in a register (a counter for a block on
 * a loop, a bit for the others: one instruction per block entry, no memory).  The lanes leaving
 * together sum their entries (bpf_warp_sum) and their lowest lane adds the sum to the block's
 * record, with the block's static facts (instruction count, PTX line, .loc file and line:
 * constants there) written by the leaders of thread block (0,0,0) and about one leader in 256
 * elsewhere (by %clock), so that the common exit stores nothing more.  The report multiplies
 * entries by instruction counts.
 *
 * Records: per kernel, HB_SHARDS copies of each of its first HB_BLOCKS blocks (a shard per SM
 * pair: %smid % HB_SHARDS), each a 128-byte line of its own: a block's updates spread over
 * HB_SHARDS lines (the L2 serialises updates to one line, ~2 ns each on an H100).  Blocks from
 * HB_BLOCKS - 1 on share the last record; kernel ids from HB_KERNELS on are not counted.
 * 16 x 64 x 256 x 128 B = 32 MiB.
 *
 * Cost (issue 32): 1 instruction per basic block entry, no memory; at exit, per warp and
 * block entered, a warp sum (one redux.sync since 2026-11-28 when the lanes' counts are below
 * 2^27, three before), the leader test and one red.global.add to the block's line of the SM
 * pair's shard (vec_add: 3 blocks, 3 reds per warp over 64 x 3 lines: the L2's queue on those
 * lines is what costs, 1.66x; more lines need more memory or fewer blocks per kernel). */
#include "cubpf_helpers.h"

#define HB_KERNELS 16
#define HB_SHARDS 64
#define HB_BLOCKS 256

struct hbstat {
	__u64 threads;   /* entries by threads */
	__u64 site;      /* instructions << 32 | PTX line (0: not written yet) */
	__u64 src;       /* .loc file << 32 | line */
	__u64 pad[13];   /* 128 bytes */
};

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, HB_KERNELS * HB_SHARDS * HB_BLOCKS);
	__type(key, __u32);
	__type(value, struct hbstat);
} hbstats SEC(".maps");

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
	__u32 k = (id * HB_SHARDS + (__u32)(bpf_get_sm_id() & (HB_SHARDS - 1))) * HB_BLOCKS + b;
	struct hbstat *s = bpf_map_lookup_elem(&hbstats, &k);
	if (!s)
		return 0;
	__sync_fetch_and_add(&s->threads, n);
	if (ctx->block_id < HB_BLOCKS - 1 &&
	    (!(ctx->ctaid_x | ctx->ctaid_y | ctx->ctaid_z) || !(bpf_get_clock() & 255))) {
		s->site = (__u64)ctx->insn_count << 32 | ctx->ptx_line;
		s->src = (__u64)ctx->src_file << 32 | ctx->src_line;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
