/* san_mixed (tests/live/test_san.c): a kprobe the Sanitizer backend patches, and a memprobe it
 * refuses (ctx->insn_index numbers PTX instructions: no meaning in a SASS-only kernel). */
#include "cubpf_helpers.h"
struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

SEC("kprobe/*")
int san_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 id = ctx->kernel_id;
	__u64 *v = bpf_map_lookup_elem(&seen, &id);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

SEC("memprobe/*")
int san_by_insn(struct cubpf_mem_ctx *ctx)
{
	__u32 k = ctx->insn_index & 4095;
	__u64 *v = bpf_map_lookup_elem(&seen, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
