/* memtrace: per kernel, thread accesses per memory space, operation and access size (bytes
 * follow: PTX access sizes are powers of two), and the 32-byte sectors the warps' global and
 * generic accesses touched (the coalescing figure).  Key: (kernel id % MT_KERNELS) * MT_SPACES
 * + space; cubpf run names the kernels.
 *
 * Cost: the lanes that make an access together (one warp, one instruction) are counted once:
 * their lowest lane adds the number of lanes to its SM's copy of the counters (a per-SM map).
 * For global/generic accesses the lanes also count the distinct 32-byte sectors among their
 * addresses (bpf_warp_count_unique: shuffles and votes when they rise by 0 or 1 from lane to
 * lane, match.any otherwise) and the leader adds the bytes those sectors hold beyond the bytes
 * accessed (`waste`, signed) only when it is not zero.  The host's sectors touched = (bytes +
 * waste) / 32, exactly.  The program never reads `counts` and its keys and offsets are
 * constants of each site, so the code generator defers the adds (ptx-rewriter/accs.c): they
 * go to registers, and reach the map once per thread block at exit.  A key's counters fill one
 * 256-byte value, so each SM's copy has cache lines of its own (the per-SM layout is key-major:
 * smaller values would put several SMs' copies in one line, and the L2 would serialise their
 * updates as if they shared an address).  Space, operation and size are constants of each
 * access site, so the key and the counter's offset fold away. */
#include "cubpf_helpers.h"

#define MT_KERNELS 64
#define MT_SPACES 8
#define MT_OPS 4   /* load, store, atomic, reduce (op - 1) */
#define MT_SIZES 6 /* log2 of the bytes a thread accesses: 1 .. 32 */

struct mt_counts {
	__u64 accesses[MT_OPS][MT_SIZES]; /* thread accesses */
	__u64 waste[MT_OPS];              /* sectors' bytes beyond the bytes accessed (s64) */
	__u64 pad[4];                     /* 256 bytes: two cache lines per SM copy */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, MT_KERNELS * MT_SPACES);
	__type(key, __u32);
	__type(value, struct mt_counts);
} counts SEC(".maps");

SEC("memprobe/*")
int memtrace(struct cubpf_mem_ctx *ctx)
{
	__u32 space = ctx->space & (MT_SPACES - 1), op = (ctx->op - 1) & (MT_OPS - 1);
	/* before the leader test: past it, the leader runs alone and activemask says so */
	__u64 lanes = bpf_get_active_count(), secs = 0;
	if (space == CUBPF_SPACE_GLOBAL || space == CUBPF_SPACE_GENERIC) /* every lane takes part */
		secs = bpf_warp_count_unique(ctx->addr >> 5);
	if (!bpf_is_warp_leader()) /* the other lanes stop here */
		return 0;
	__u64 waste = secs ? secs * 32 - lanes * ctx->size : 0;
	__u32 key = (ctx->kernel_id & (MT_KERNELS - 1)) * MT_SPACES + space;
	struct mt_counts *c = bpf_map_lookup_elem(&counts, &key);
	if (!c)
		return 0;
	__u32 z = cubpf_log2(ctx->size);
	z = z < MT_SIZES ? z : MT_SIZES - 1;
	__sync_fetch_and_add(&c->accesses[op][z], lanes);
	if (waste)
		__sync_fetch_and_add(&c->waste[op], waste);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
