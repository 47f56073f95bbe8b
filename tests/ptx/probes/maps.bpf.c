/* The map kinds of issue 6 on the GPU (tests/gpu/t_ptx_maps.sh), one entry probe on vec_add:
 *   per_sm (per-SM array):      key 0 += 1 per thread (the copies sum to the thread count);
 *   per_thread (per-thread):    key 0 = the thread's global id + 1 (each thread its own value);
 *   blocks (hash, u64 keys):    key 1000 + block index += 1 (one key per block, its size);
 *   events (ring buffer):       one 16-byte record per thread {global id, block, magic};
 *   misc (array): 0 per-thread lookups that found no copy (threads past the capacity),
 *                 1 ring buffer records refused (full lanes), 2 hash lookups that failed. */
#include "probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} per_sm SEC(".maps");

struct {
	__uint(type, CUBPF_MAP_PERTHREAD_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} per_thread SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} blocks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} misc SEC(".maps");

struct event {
	__u32 gtid;
	__u32 block;
	__u64 magic;
};

static __attribute__((always_inline)) void bump(__u32 k)
{
	__u64 *p = bpf_map_lookup_elem(&misc, &k);
	if (p)
		__sync_fetch_and_add(p, 1);
}

SEC("kprobe/*vec_add*")
int on_entry(struct cubpf_kernel_ctx *ctx)
{
	__u32 k0 = 0;
	__u64 *c = bpf_map_lookup_elem(&per_sm, &k0);
	if (c)
		__sync_fetch_and_add(c, 1);

	__u32 gtid = ctx->ctaid_x * ctx->ntid_x + ctx->tid_x;
	__u64 *t = bpf_map_lookup_elem(&per_thread, &k0);
	if (t)
		*t = (__u64)gtid + 1;
	else
		bump(0);

	__u64 key = 1000 + (__u64)ctx->ctaid_x;
	__u64 *v = bpf_map_lookup_elem(&blocks, &key);
	if (!v) {
		__u64 zero = 0;
		bpf_map_update_elem(&blocks, &key, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&blocks, &key);
	}
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bump(2);

	struct event e = {.gtid = gtid, .block = ctx->ctaid_x, .magic = 0xc0ffee0011223344ull};
	if (bpf_ringbuf_output(&events, &e, sizeof(e), 0))
		bump(1);
	return 0;
}
