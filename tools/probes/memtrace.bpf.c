/* memtrace: per kernel, thread accesses per memory space, operation and access size (bytes
 * follow: PTX access sizes are powers of two), and the 32-byte sectors the warps' global and
 * generic accesses touched (the coalescing figure).  Keys: (kernel id % MT_KERNELS); cubpf run
 * names the kernels.
 *
 * Cost: the lanes that make an access together (one warp, one instruction) are counted once:
 * their lowest lane adds the number of lanes (and, for global/generic accesses, the number of
 * distinct sectors among their addresses, from match.any) to its SM's copy of the counters
 * (per-SM maps): at most two reductions per warp and access, never to an address another SM
 * updates.  Space, operation and size are constants of each access site, so the keys fold. */
#include "cubpf_helpers.h"

#define MT_KERNELS 64
#define MT_SPACES 8
#define MT_OPS 4   /* load, store, atomic, reduce (op - 1) */
#define MT_SIZES 8 /* log2 of the bytes a thread accesses: 1 .. 128 */

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, MT_KERNELS * MT_SPACES * MT_OPS * MT_SIZES);
	__type(key, __u32);
	__type(value, __u64);
} accesses SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, MT_KERNELS * MT_SPACES * MT_OPS);
	__type(key, __u32);
	__type(value, __u64);
} sectors SEC(".maps");

SEC("memprobe/*")
int memtrace(struct cubpf_mem_ctx *ctx)
{
	__u32 space = ctx->space & (MT_SPACES - 1), op = (ctx->op - 1) & (MT_OPS - 1);
	__u32 k = ctx->kernel_id & (MT_KERNELS - 1);
	__u64 lanes = bpf_get_active_count(), secs = 0;
	if (space == CUBPF_SPACE_GLOBAL || space == CUBPF_SPACE_GENERIC)
		secs = bpf_warp_count_unique(ctx->addr >> 5); /* every lane takes part */
	if (!bpf_is_warp_leader())
		return 0;
	__u32 key = ((k * MT_SPACES + space) * MT_OPS + op) * MT_SIZES +
		    (cubpf_log2(ctx->size) & (MT_SIZES - 1));
	__u64 *a = bpf_map_lookup_elem(&accesses, &key);
	if (a)
		__sync_fetch_and_add(a, lanes);
	__u32 skey = (k * MT_SPACES + space) * MT_OPS + op;
	__u64 *s = secs ? bpf_map_lookup_elem(&sectors, &skey) : 0;
	if (s)
		__sync_fetch_and_add(s, secs);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
