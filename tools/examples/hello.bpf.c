/* The probe of `make demo` and of the README: counts the threads entering every vec_* kernel
 * and the bytes they store to global memory.  Build: clang -O2 -g -target bpf -I tools/include
 * -I /usr/include/$(uname -m)-linux-gnu -c hello.bpf.c -o hello.bpf.o */
#include "cubpf_helpers.h"

struct {
	__uint(type, CUBPF_MAP_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

SEC("kprobe/vec_*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&stats, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

SEC("memprobe/vec_*")
int on_store(struct cubpf_mem_ctx *ctx)
{
	if (ctx->op != CUBPF_MEM_STORE || ctx->space != CUBPF_SPACE_GLOBAL)
		return 0;
	__u32 k = 1;
	__u64 *v = bpf_map_lookup_elem(&stats, &k);
	if (v)
		__sync_fetch_and_add(v, ctx->size);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
