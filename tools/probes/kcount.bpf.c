/* kcount: per kernel, when the first launch's first thread entered and the last block left
 * (%globaltimer, ns), and how many launches the GPU ran.  Indexed by cubpf's kernel id.
 * Launch and thread counts also come from the trace's KERNEL records (host side, exact); the
 * device side only keeps what the host cannot see.  Only thread 0 of each block touches the
 * map, so the kernel pays one atomic per block, not per thread. */
#include "cubpf_helpers.h"

struct kstat {
	__u64 launches;    /* thread (0,0,0) of block (0,0,0) entered */
	__u64 threads;     /* threads of the blocks that left (added by thread 0's exit) */
	__u64 first_entry; /* earliest launch start seen */
	__u64 last_exit;   /* latest block exit seen */
};

struct {
	__uint(type, CUBPF_MAP_GPU_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct kstat);
} kstats SEC(".maps");

SEC("kprobe/*")
int kcount_entry(struct cubpf_kernel_ctx *ctx)
{
	if (cubpf_thread_linear(ctx) != 0 || cubpf_block_linear(ctx) != 0)
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
	if (cubpf_thread_linear(ctx) != 0)
		return 0;
	__u32 id = ctx->kernel_id;
	struct kstat *s = bpf_map_lookup_elem(&kstats, &id);
	if (!s)
		return 0;
	__u64 now = bpf_get_globaltimer();
	__sync_fetch_and_add(&s->threads, ctx->ntid_x * ctx->ntid_y * ctx->ntid_z);
	for (int i = 0; i < 4; i++) {
		__u64 old = s->last_exit;
		if (old >= now)
			break;
		if (__sync_val_compare_and_swap(&s->last_exit, old, now) == old)
			break;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
