/* Entry and exit probes that work a little: read the thread index (through the stack: the
 * helper writes x, y, z there) and %globaltimer, mix them, and keep the result only when it is
 * impossible, so that nothing is written yet the JIT cannot drop the work (it depends on the
 * timer, which it cannot predict). */
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
	__u64 t = bpf_get_globaltimer();
	__u64 h = x * 2654435761u + y * 40503u + z + ctx->ctaid_x * 97u + (t >> 5);
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
