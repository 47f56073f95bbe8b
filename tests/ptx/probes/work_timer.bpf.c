/* Diagnostic variant of work.bpf.c (tests/bench/b_ptx.sh): only the %globaltimer read, kept
 * alive by an impossible comparison. */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink SEC(".maps");

static __attribute__((always_inline)) int work(void)
{
	__u64 t = bpf_get_globaltimer();
	if (t == 0x123456789abcdefull) {
		__u32 k = 0;
		__u64 *p = bpf_map_lookup_elem(&sink, &k);
		if (p)
			*p = t;
	}
	return 0;
}

SEC("kprobe/*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	(void)ctx;
	return work();
}

SEC("kretprobe/*")
int on_exit(struct cubpf_kernel_ctx *ctx)
{
	(void)ctx;
	return work();
}
