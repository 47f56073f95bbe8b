/* memdelay: every global load of the probed kernels waits delay_ns more (bpf_gpu_delay_ns, a
 * spin on %globaltimer), to measure how sensitive they are to memory latency (issue 32; the
 * eGPU work's emulation of slower, CXL-attached memory).  `cubpf run -t memdelay -n NS` writes
 * NS into delay_ns (a copy of this object with its .rodata patched) and runs the probes on
 * every other launch of each kernel (--sample 2), so that the report compares the device times
 * of the launches with and without the delay in the same run.  Per kernel id and SM, the loads
 * delayed (the lowest lane of the lanes loading together adds their number).  Stores, shared,
 * local and generic accesses are left alone: their probes fold away. */
#include "cubpf_helpers.h"

#define MD_KERNELS 1024

const volatile __u64 delay_ns = 1000;

struct mdstat {
	__u64 loads;    /* global loads delayed, thread by thread */
	__u64 delay_ns; /* the delay (for the report: -n's value as the probe ran it) */
	__u64 pad[14];  /* 128 bytes: a cache line per SM copy */
};

struct {
	__uint(type, CUBPF_MAP_PERCPU_ARRAY);
	__uint(max_entries, MD_KERNELS);
	__type(key, __u32);
	__type(value, struct mdstat);
} mdstats SEC(".maps");

SEC("memprobe/*")
int memdelay(struct cubpf_mem_ctx *ctx)
{
	if (ctx->op != CUBPF_MEM_LOAD || ctx->space != CUBPF_SPACE_GLOBAL)
		return 0;
	/* delay_ns is a constant of .rodata (-n patched it, within CUBPF_MAX_DELAY_NS): the
	 * verifier proves the bound from it.  No clamp here: a branch on a known constant leaves
	 * code the verifier never walks, which GPU programs may not hold. */
	__u64 ns = delay_ns;
	bpf_gpu_delay_ns(ns);
	__u64 n = bpf_get_active_count();
	if (!bpf_is_warp_leader())
		return 0;
	__u32 id = ctx->kernel_id;
	if (id >= MD_KERNELS)
		return 0;
	struct mdstat *s = bpf_map_lookup_elem(&mdstats, &id);
	if (s) {
		__sync_fetch_and_add(&s->loads, n);
		s->delay_ns = ns;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
