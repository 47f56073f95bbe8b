/* kcount: per kernel, how many launches and threads ran, and when the first thread entered and
 * the last one left (%globaltimer, ns).  Indexed by cubpf's kernel id. */
#include "cubpf_helpers.h"

struct kstat {
	__u64 launches;    /* thread (0,0,0) of block (0,0,0) entered */
	__u64 threads;     /* thread entries */
	__u64 first_entry; /* earliest entry seen */
	__u64 last_exit;   /* latest exit seen */
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
	__u32 id = ctx->kernel_id;
	struct kstat *s = bpf_map_lookup_elem(&kstats, &id);
	if (!s)
		return 0;
	__u64 now = bpf_get_globaltimer();
	__sync_fetch_and_add(&s->threads, 1);
	if (cubpf_thread_linear(ctx) == 0 && cubpf_block_linear(ctx) == 0)
		__sync_fetch_and_add(&s->launches, 1);
	/* keep the minimum: a few compare-and-swap rounds are enough under contention */
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
	__u32 id = ctx->kernel_id;
	struct kstat *s = bpf_map_lookup_elem(&kstats, &id);
	if (!s)
		return 0;
	__u64 now = bpf_get_globaltimer();
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
