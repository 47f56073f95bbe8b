/* ring: a ring buffer map beside a counting kprobe.  The device code for bpf_ringbuf_output is
 * not there yet, so the CPU test (tests/live) plays the GPU producer (shim/live/rb.c's model)
 * on the lanes the shim allocated, and checks what the drain takes. */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_RINGBUF);
	__uint(max_entries, 1 << 16);
} events SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

SEC("kprobe/live_*")
int ring_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 id = ctx->kernel_id;
	__u64 *n = bpf_map_lookup_elem(&hits, &id);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
