/* kcount: per kernel, when the first launch's first thread entered and the last block left
 * (%globaltimer, ns), and how many launches the GPU ran.  Indexed by cubpf's kernel id.
 * Launch and thread counts also come from the trace's KERNEL records (host side, exact); the
 * device side only keeps what the host cannot see.
 *
 * Cost: only thread (0,0,0) of each block touches the map, and the map is per SM (one copy of
 * each kernel's record per SM slot, ptx-rewriter/layout.h), each copy padded to a 128-byte cache
 * line of its own: the blocks of different SMs never update the same line (measured on an H100: the
 * L2 serialises updates to one line at ~2 ns each, so 4 SMs' 32-byte copies sharing a line
 * cost a memory-bound kernel 2.5% for the reduction and 18% for the store; with a line per
 * SM both are a few thousand updates per SM and launch, spread over the kernel).  An exit
 * makes no round trip to memory (a reduction and a store, both fire-and-forget).  The reader
 * sums launches and threads over the SM copies and takes the least first entry and the
 * largest last exit.  Kernel ids from 1024 on are not counted (1024 x 256 SM slots x 128 B =
 * 32 MiB of device memory). */
#include "cubpf_helpers.h"

struct kstat {
	__u64 launches;    /* thread (0,0,0) of block (0,0,0) entered (on this SM) */
	__u64 threads;     /* threads of the blocks that left this SM (added by thread 0's exit) */
	__u64 first_entry; /* earliest launch start seen on this SM */
	__u64 last_exit;   /* this SM's latest block exit (the last store wins, see below) */
	__u64 pad[12];     /* 128 bytes: a cache line per SM copy */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct kstat);
} kstats SEC(".maps");

SEC("kprobe/*")
int kcount_entry(struct cubpf_kernel_ctx *ctx)
{
	/* one OR and one branch for almost every thread: no multiplication, no size read */
	if (ctx->tid_x | ctx->ctaid_x) /* what the kernel reads anyway: most threads stop here */
		return 0;
	if (ctx->tid_y | ctx->tid_z | ctx->ctaid_y | ctx->ctaid_z)
		return 0;
	__u32 id = ctx->kernel_id;
	struct kstat *s = bpf_map_lookup_elem(&kstats, &id);
	if (!s)
		return 0;
	__u64 now = bpf_get_globaltimer();
	__sync_fetch_and_add(&s->launches, 1);
	/* keep the minimum: a few compare-and-swap rounds are enough (one thread per launch) */
	for (int i = 0; i < 4; i++) {
		__u64 old = s->first_entry;
		if (old != 0 && old <= now)
			break;
		if (__sync_val_compare_and_swap(&s->first_entry, old, now) == old)
			break;
	}
	return 0;
}

SEC("kretprobe/*")
int kcount_exit(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x)
		return 0;
	if (ctx->tid_y | ctx->tid_z)
		return 0;
	__u32 id = ctx->kernel_id;
	struct kstat *s = bpf_map_lookup_elem(&kstats, &id);
	if (!s)
		return 0;
	__sync_fetch_and_add(&s->threads, ctx->ntid_x * ctx->ntid_y * ctx->ntid_z);
	/* A plain store rather than a compare-and-swap loop: the blocks of one SM leave one after
	 * the other, so the last store is that SM's latest exit (to within the few ns by which
	 * two blocks' stores may cross), and the block does not wait for memory to leave. */
	s->last_exit = bpf_get_globaltimer();
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
