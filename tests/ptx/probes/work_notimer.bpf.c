/* Diagnostic variant of work.bpf.c (tests/bench/b_ptx.sh): the same arithmetic on the thread
 * and block index, without %globaltimer; with work_timer.bpf.c it splits the work probe's cost
 * between the timer read and the rest. */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink SEC(".maps");

static __attribute__((always_inline)) int work(struct cubpf_kernel_ctx *ctx)
{
	__u64 x, y, z;
	bpf_get_thread_idx(&x, &y, &z);
	__u64 h = x * 2654435761u + y * 40503u + z + ctx->ctaid_x * 97u;
	if (h == 0x123456789abcdefull) {
		__u32 k = 0;
		__u64 *p = bpf_map_lookup_elem(&sink, &k);
		if (p)
			*p = h;
	}
	return 0;
}

SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	return work(ctx);
}

SEC("kretprobe/*")
int on_exit(struct cubpf_kernel_ctx *ctx)
{
	return work(ctx);
}
