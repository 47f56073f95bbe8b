/* san_empty_mem (tests/bench/b_sass.sh): the per-access floor of a memory probe, on every
 * kernel.  A probe that only returned would be folded away (no site patched, no code injected),
 * so this one reads the address and counts accesses to address 1, which no kernel makes: the
 * patch is called at every access and does next to nothing (the study measured ~28x on vec_add
 * for an empty global-access patch on the Sanitizer backend). */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} null_accesses SEC(".maps");

SEC("memprobe/*")
int p(struct cubpf_mem_ctx *ctx)
{
	if (ctx->addr != 1)
		return 0;
	__u32 k = 0;
	__u64 *n = bpf_map_lookup_elem(&null_accesses, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
