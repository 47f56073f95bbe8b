/* Reads the kernel's parameters and indices (every kernel-context field kind) and prints
 * from one thread: exercises parameter loads, special registers and vprintf. */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	__u64 x, y, z;
	bpf_get_thread_idx(&x, &y, &z);
	if (x == 0 && ctx->ctaid_x == 0) {
		__u32 k = 0;
		__u64 v = ctx->params[2] ^ ctx->kernel_id;
		bpf_map_update_elem(&seen, &k, &v, 0);
		k = 1;
		v = ctx->nparams;
		bpf_map_update_elem(&seen, &k, &v, 0);
		static const char fmt[] = "kernel %u params %d first %lx\n";
		/* the size counts the NUL, as Linux requires (a format without one is refused) */
		bpf_trace_printk(fmt, sizeof(fmt), ctx->kernel_id, ctx->nparams, ctx->params[0]);
	}
	return 0;
}
