/* slots: one counter per thread slot (global linear thread id of a 1-D launch, modulo 2^20),
 * incremented at kernel entry: an atomic to a different address from every lane, so no
 * contention (the cheap way to count per thread; compare count.bpf.c, whose per-kernel counters
 * all land on one address).  Used by tests/bench/b_live.sh. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 1 << 20);
	__type(key, __u32);
	__type(value, __u64);
} slots SEC(".maps");

SEC("kprobe/live_*")
int slot_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 t = (ctx->ctaid_x * ctx->ntid_x + ctx->tid_x) & ((1 << 20) - 1);
	__u64 *n = bpf_map_lookup_elem(&slots, &t);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
