/* kernelretsnoop: one ring-buffer record per thread exit, with its position and the time.
 * Needs the device side of ring buffers (bpf_ringbuf_output in PTX, ptx-rewriter). */
#include "cubpf_helpers.h"

struct exit_event {
	__u64 ts;          /* %globaltimer at the exit, ns */
	__u32 kernel_id;
	__u32 tid_x, tid_y, tid_z;
	__u32 ctaid_x, ctaid_y, ctaid_z;
	__u32 ntid_x, ntid_y;  /* to find the warp: (tid_x + ntid_x * (tid_y + ntid_y * tid_z)) / 32 */
	__u32 pad;
};

struct {
	__uint(type, CUBPF_MAP_GPU_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

SEC("kretprobe/*")
int kernelretsnoop(struct cubpf_kernel_ctx *ctx)
{
	struct exit_event e = {
		.ts = bpf_get_globaltimer(),
		.kernel_id = ctx->kernel_id,
		.tid_x = ctx->tid_x, .tid_y = ctx->tid_y, .tid_z = ctx->tid_z,
		.ctaid_x = ctx->ctaid_x, .ctaid_y = ctx->ctaid_y, .ctaid_z = ctx->ctaid_z,
		.ntid_x = ctx->ntid_x, .ntid_y = ctx->ntid_y,
	};
	bpf_ringbuf_output(&events, &e, sizeof(e), 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
