/* Class 4: frame lifetimes.  A pointer into a function's stack dies when it returns. */
#include "common.h"

static __noinline int leak_frame(__u64 **out)
{
	__u64 x = 42;
	OPAQUE(x);
	*out = &x;
	OPAQUE(out);
	return 0;
}

/* The callee stores its own frame's address in the caller's stack; the caller reads it. */
SEC("kprobe/*")
int rej_stale_frame(struct cubpf_kernel_ctx *ctx)
{
	__u64 *p = 0;
	(void)ctx;
	leak_frame(&p);
	OPAQUE(p);
	return (int)*p;
}

static __noinline int fill(__u64 *slot, __u64 v)
{
	*slot = v * 2;
	return 0;
}

/* A pointer to the caller's stack passed down: the callee writes through it. */
SEC("kprobe/*")
int ok_callee_writes_caller(struct cubpf_kernel_ctx *ctx)
{
	__u64 slot = 0;
	(void)ctx;
	fill(&slot, 21);
	return (int)slot;
}

char LICENSE[] SEC("license") = "GPL";
