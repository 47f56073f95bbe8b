/* Helper prototypes (what the verifier checks and code generators read), the host
 * implementations the interpreter calls, and the context layouts of each program kind. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "vm/internal.h"

#define A(...) {__VA_ARGS__}
static const struct vm_helper_proto protos[] = {
	{CUBPF_FN_map_lookup_elem, "bpf_map_lookup_elem", VM_RET_MAP_VALUE_OR_NULL,
	 A(VM_ARG_CONST_MAP_PTR, VM_ARG_PTR_TO_MAP_KEY), VM_KINDS_ALL},
	{CUBPF_FN_map_update_elem, "bpf_map_update_elem", VM_RET_INTEGER,
	 A(VM_ARG_CONST_MAP_PTR, VM_ARG_PTR_TO_MAP_KEY, VM_ARG_PTR_TO_MAP_VALUE, VM_ARG_ANYTHING),
	 VM_KINDS_ALL},
	{CUBPF_FN_map_delete_elem, "bpf_map_delete_elem", VM_RET_INTEGER,
	 A(VM_ARG_CONST_MAP_PTR, VM_ARG_PTR_TO_MAP_KEY), VM_KINDS_ALL},
	{CUBPF_FN_probe_read, "bpf_probe_read", VM_RET_INTEGER,
	 A(VM_ARG_PTR_TO_UNINIT_MEM, VM_ARG_CONST_SIZE_OR_ZERO, VM_ARG_PTR_TO_READ_SRC),
	 VM_KINDS_ALL},
	{CUBPF_FN_probe_read_user, "bpf_probe_read_user", VM_RET_INTEGER,
	 A(VM_ARG_PTR_TO_UNINIT_MEM, VM_ARG_CONST_SIZE_OR_ZERO, VM_ARG_PTR_TO_READ_SRC),
	 VM_KINDS_ALL},
	{CUBPF_FN_ktime_get_ns, "bpf_ktime_get_ns", VM_RET_INTEGER, A(0),
	 VM_KINDS_HOST | VM_KIND_BIT(VM_PROG_RAW)},
	{CUBPF_FN_trace_printk, "bpf_trace_printk", VM_RET_INTEGER,
	 A(VM_ARG_PTR_TO_MEM, VM_ARG_CONST_SIZE), /* r3-r5: the format's arguments, if any */
	 VM_KINDS_ALL},
	{CUBPF_FN_get_smp_processor_id, "bpf_get_smp_processor_id", VM_RET_INTEGER, A(0),
	 VM_KINDS_HOST | VM_KIND_BIT(VM_PROG_RAW)},
	{CUBPF_FN_get_current_pid_tgid, "bpf_get_current_pid_tgid", VM_RET_INTEGER, A(0),
	 VM_KINDS_HOST | VM_KIND_BIT(VM_PROG_RAW)},
	{CUBPF_FN_ringbuf_output, "bpf_ringbuf_output", VM_RET_INTEGER,
	 A(VM_ARG_CONST_MAP_PTR, VM_ARG_PTR_TO_MEM, VM_ARG_CONST_SIZE, VM_ARG_ANYTHING),
	 VM_KINDS_ALL},
	{CUBPF_FN_ringbuf_reserve, "bpf_ringbuf_reserve", VM_RET_ALLOC_MEM_OR_NULL,
	 A(VM_ARG_CONST_MAP_PTR, VM_ARG_CONST_ALLOC_SIZE, VM_ARG_ANYTHING),
	 VM_KINDS_HOST | VM_KIND_BIT(VM_PROG_RAW)},
	{CUBPF_FN_ringbuf_submit, "bpf_ringbuf_submit", VM_RET_VOID,
	 A(VM_ARG_PTR_TO_ALLOC_MEM, VM_ARG_ANYTHING), VM_KINDS_HOST | VM_KIND_BIT(VM_PROG_RAW)},
	{CUBPF_FN_ringbuf_discard, "bpf_ringbuf_discard", VM_RET_VOID,
	 A(VM_ARG_PTR_TO_ALLOC_MEM, VM_ARG_ANYTHING), VM_KINDS_HOST | VM_KIND_BIT(VM_PROG_RAW)},
	{CUBPF_FN_gpu_puts, "bpf_gpu_puts", VM_RET_INTEGER, A(VM_ARG_CONST_STR), VM_KINDS_GPU},
	{CUBPF_FN_get_globaltimer, "bpf_get_globaltimer", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_get_block_idx, "bpf_get_block_idx", VM_RET_INTEGER,
	 A(VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT), VM_KINDS_GPU},
	{CUBPF_FN_get_block_dim, "bpf_get_block_dim", VM_RET_INTEGER,
	 A(VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT), VM_KINDS_GPU},
	{CUBPF_FN_get_thread_idx, "bpf_get_thread_idx", VM_RET_INTEGER,
	 A(VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT), VM_KINDS_GPU},
	{CUBPF_FN_gpu_membar, "bpf_gpu_membar", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_get_sm_id, "bpf_get_sm_id", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_get_warp_id, "bpf_get_warp_id", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_get_lane_id, "bpf_get_lane_id", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_get_grid_dim, "bpf_get_grid_dim", VM_RET_INTEGER,
	 A(VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT, VM_ARG_PTR_TO_U64_OUT), VM_KINDS_GPU},
	{CUBPF_FN_get_active_mask, "bpf_get_active_mask", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_get_clock, "bpf_get_clock", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_get_active_count, "bpf_get_active_count", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_is_warp_leader, "bpf_is_warp_leader", VM_RET_INTEGER, A(0), VM_KINDS_GPU},
	{CUBPF_FN_gpu_delay_ns, "bpf_gpu_delay_ns", VM_RET_INTEGER, A(VM_ARG_DELAY_NS), VM_KINDS_GPU},
	{CUBPF_FN_warp_count_unique, "bpf_warp_count_unique", VM_RET_INTEGER, A(VM_ARG_ANYTHING),
	 VM_KINDS_GPU},
	{CUBPF_FN_warp_sum, "bpf_warp_sum", VM_RET_INTEGER, A(VM_ARG_ANYTHING), VM_KINDS_GPU},
};
#undef A

const struct vm_helper_proto *vm_helper_proto(uint32_t id)
{
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++)
		if (protos[i].id == id)
			return &protos[i];
	return NULL;
}

const struct vm_helper_proto *vm_helper_protos(size_t *count)
{
	*count = sizeof(protos) / sizeof(protos[0]);
	return protos;
}

/* ---- context layouts -------------------------------------------------------------------------- */

/* A run of `count` fields of `size` bytes from `start`. */
struct field_run {
	uint32_t start, count, size;
};

static bool fields_ok(const struct field_run *runs, size_t n, uint32_t off, uint32_t size)
{
	for (size_t i = 0; i < n; i++) {
		const struct field_run *f = &runs[i];
		if (off >= f->start && off < f->start + f->count * f->size)
			return size == f->size && (off - f->start) % f->size == 0;
	}
	return false;
}

static bool kernel_field_ok(uint32_t off, uint32_t size)
{
	static const struct field_run runs[] = {
		{0, offsetof(struct cubpf_kernel_ctx, params) / 4, 4},
		{offsetof(struct cubpf_kernel_ctx, params), CUBPF_MAX_KERNEL_PARAMS, 8},
		{offsetof(struct cubpf_kernel_ctx, insns), 2, 8},
	};
	return fields_ok(runs, 3, off, size);
}

static bool mem_field_ok(uint32_t off, uint32_t size)
{
	static const struct field_run runs[] = {
		{0, 1, 8},
		{8, (offsetof(struct cubpf_mem_ctx, src_line) + 4 - 8) / 4, 4}, /* not the tail padding */
	};
	return fields_ok(runs, 2, off, size);
}

static bool block_field_ok(uint32_t off, uint32_t size)
{
	static const struct field_run runs[] = {
		{0, offsetof(struct cubpf_block_ctx, time_ns) / 4, 4},
		{offsetof(struct cubpf_block_ctx, time_ns), 2, 8},
	};
	return fields_ok(runs, 2, off, size);
}

static bool func_field_ok(uint32_t off, uint32_t size)
{
	static const struct field_run runs[] = {
		{0, offsetof(struct cubpf_func_ctx, params) / 4, 4},
		{offsetof(struct cubpf_func_ctx, params), CUBPF_MAX_KERNEL_PARAMS, 8},
		{offsetof(struct cubpf_func_ctx, retval), 1, 8},
		{offsetof(struct cubpf_func_ctx, has_retval), 1, 4},
	};
	return fields_ok(runs, 4, off, size);
}

static bool sync_field_ok(uint32_t off, uint32_t size)
{
	static const struct field_run runs[] = {
		{0, offsetof(struct cubpf_sync_ctx, time_ns) / 4, 4},
		{offsetof(struct cubpf_sync_ctx, time_ns), 2, 8},
		{offsetof(struct cubpf_sync_ctx, ptx_line), 4, 4},
	};
	return fields_ok(runs, 3, off, size);
}

static bool bb_field_ok(uint32_t off, uint32_t size)
{
	static const struct field_run runs[] = {
		{0, sizeof(struct cubpf_bb_ctx) / 4, 4},
	};
	return fields_ok(runs, 1, off, size);
}

static bool api_field_ok(uint32_t off, uint32_t size)
{
	static const struct field_run runs[] = {
		{0, CUBPF_MAX_API_ARGS + 2, 8},
		{offsetof(struct cubpf_api_ctx, func_id), 4, 4},
	};
	return fields_ok(runs, 2, off, size);
}

const struct vm_ctx_layout *vm_ctx_layout(enum vm_prog_kind kind)
{
	static const struct vm_ctx_layout kernel = {sizeof(struct cubpf_kernel_ctx), kernel_field_ok};
	static const struct vm_ctx_layout mem = {sizeof(struct cubpf_mem_ctx), mem_field_ok};
	static const struct vm_ctx_layout api = {sizeof(struct cubpf_api_ctx), api_field_ok};
	static const struct vm_ctx_layout block = {sizeof(struct cubpf_block_ctx), block_field_ok};
	static const struct vm_ctx_layout sync = {sizeof(struct cubpf_sync_ctx), sync_field_ok};
	static const struct vm_ctx_layout func = {sizeof(struct cubpf_func_ctx), func_field_ok};
	static const struct vm_ctx_layout bb = {sizeof(struct cubpf_bb_ctx), bb_field_ok};
	switch (kind) {
	case VM_PROG_KPROBE:
	case VM_PROG_KRETPROBE:
		return &kernel;
	case VM_PROG_MEMPROBE:
		return &mem;
	case VM_PROG_BLOCKPROBE:
	case VM_PROG_BLOCKRETPROBE:
		return &block;
	case VM_PROG_SYNCPROBE:
		return &sync;
	case VM_PROG_FENTRY:
	case VM_PROG_FEXIT:
		return &func;
	case VM_PROG_BBPROBE:
	case VM_PROG_BBRETPROBE:
		return &bb;
	case VM_PROG_UPROBE:
	case VM_PROG_URETPROBE:
		return &api;
	default:
		return NULL;
	}
}

/* ---- host implementations ---------------------------------------------------------------------- */

#define HELPER(name) \
	static uint64_t name(void *envp, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4, uint64_t r5)
#define UNUSED_ARGS (void)envp, (void)r1, (void)r2, (void)r3, (void)r4, (void)r5

static struct vm_map *map_of(uint64_t r)
{
	return (struct vm_map *)(uintptr_t)r;
}

HELPER(h_lookup)
{
	UNUSED_ARGS;
	return (uintptr_t)vm_map_prog_lookup(map_of(r1), (const void *)(uintptr_t)r2);
}

HELPER(h_update)
{
	UNUSED_ARGS;
	return (uint64_t)(int64_t)vm_map_prog_update(map_of(r1), (const void *)(uintptr_t)r2,
						     (const void *)(uintptr_t)r3, r4);
}

HELPER(h_delete)
{
	UNUSED_ARGS;
	return (uint64_t)(int64_t)vm_map_prog_delete(map_of(r1), (const void *)(uintptr_t)r2);
}

/* Reads memory that may be unmapped without faulting: process_vm_readv on ourselves. */
HELPER(h_probe_read)
{
	UNUSED_ARGS;
	if (r2 == 0)
		return 0;
	struct iovec local = {(void *)(uintptr_t)r1, r2}, remote = {(void *)(uintptr_t)r3, r2};
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)r2)
		return 0;
	memset((void *)(uintptr_t)r1, 0, r2);
	return (uint64_t)-EFAULT;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

HELPER(h_ktime)
{
	UNUSED_ARGS;
	return clock_ns(CLOCK_MONOTONIC);
}

HELPER(h_globaltimer)
{
	UNUSED_ARGS;
	return clock_ns(CLOCK_REALTIME); /* %globaltimer reads epoch nanoseconds */
}

/* The GPU's spin, on the host's clock (the interpreter runs GPU programs in tests and replays):
 * the verifier bounds ns to CUBPF_MAX_DELAY_NS. */
HELPER(h_delay)
{
	UNUSED_ARGS;
	uint64_t end = clock_ns(CLOCK_MONOTONIC) + (r1 < CUBPF_MAX_DELAY_NS ? r1 : CUBPF_MAX_DELAY_NS);
	while (clock_ns(CLOCK_MONOTONIC) < end)
		;
	return 0;
}

HELPER(h_cpu)
{
	UNUSED_ARGS;
	int c = sched_getcpu();
	return c < 0 ? 0 : (uint64_t)c;
}

HELPER(h_pid_tgid)
{
	UNUSED_ARGS;
	return ((uint64_t)getpid() << 32) | (uint32_t)syscall(SYS_gettid);
}

HELPER(h_ringbuf_output)
{
	UNUSED_ARGS;
	return (uint64_t)(int64_t)vm_ringbuf_output(map_of(r1), (const void *)(uintptr_t)r2, r3);
}

HELPER(h_ringbuf_reserve)
{
	UNUSED_ARGS;
	return (uintptr_t)vm_ringbuf_reserve(map_of(r1), r2);
}

HELPER(h_ringbuf_submit)
{
	UNUSED_ARGS;
	vm_ringbuf_commit((void *)(uintptr_t)r1, false);
	return 0;
}

HELPER(h_ringbuf_discard)
{
	UNUSED_ARGS;
	vm_ringbuf_commit((void *)(uintptr_t)r1, true);
	return 0;
}

HELPER(h_printk)
{
	struct vm_env *env = envp;
	char line[512];
	uint64_t args[3] = {r3, r4, r5};
	size_t n = vm_printk_format(line, sizeof(line), (const char *)(uintptr_t)r1, r2, args);
	if (n && line[n - 1] == '\n')
		line[n - 1] = 0;
	if (env->rt && env->rt->out.printk)
		env->rt->out.printk(env->rt->out.user, line);
	else
		fprintf(stderr, "bpf_trace_printk: %s\n", line);
	return n;
}

/* GPU helpers emulated on the host, so GPU-kind programs can be unit-tested on the
 * interpreter: indices come from the context when it is a cubpf_kernel_ctx. */
static const struct cubpf_kernel_ctx *kernel_ctx(void *envp)
{
	struct vm_env *env = envp;
	return env->ctx_size == sizeof(struct cubpf_kernel_ctx) ? env->ctx : NULL;
}

static uint64_t put3(uint64_t px, uint64_t py, uint64_t pz, const uint32_t *v)
{
	uint64_t x = v ? v[0] : 0, y = v ? v[1] : 0, z = v ? v[2] : 0;
	memcpy((void *)(uintptr_t)px, &x, 8);
	memcpy((void *)(uintptr_t)py, &y, 8);
	memcpy((void *)(uintptr_t)pz, &z, 8);
	return 0;
}

HELPER(h_block_idx)
{
	UNUSED_ARGS;
	const struct cubpf_kernel_ctx *k = kernel_ctx(envp);
	return put3(r1, r2, r3, k ? &k->ctaid_x : NULL);
}

HELPER(h_block_dim)
{
	UNUSED_ARGS;
	const struct cubpf_kernel_ctx *k = kernel_ctx(envp);
	return put3(r1, r2, r3, k ? &k->ntid_x : NULL);
}

HELPER(h_thread_idx)
{
	UNUSED_ARGS;
	const struct cubpf_kernel_ctx *k = kernel_ctx(envp);
	return put3(r1, r2, r3, k ? &k->tid_x : NULL);
}

HELPER(h_grid_dim)
{
	UNUSED_ARGS;
	const struct cubpf_kernel_ctx *k = kernel_ctx(envp);
	return put3(r1, r2, r3, k ? &k->nctaid_x : NULL);
}

HELPER(h_zero)
{
	UNUSED_ARGS;
	return 0;
}

HELPER(h_clock)
{
	UNUSED_ARGS;
	return clock_ns(CLOCK_MONOTONIC);
}

HELPER(h_active_mask)
{
	UNUSED_ARGS;
	return 1; /* one host thread: lane 0 only */
}

HELPER(h_warp_sum)
{
	UNUSED_ARGS;
	return r1; /* a warp of one lane: its own value */
}

HELPER(h_puts)
{
	UNUSED_ARGS;
	struct vm_env *env = envp;
	const char *s = (const char *)(uintptr_t)r1;
	if (env->rt && env->rt->out.printk)
		env->rt->out.printk(env->rt->out.user, s);
	else
		fprintf(stderr, "bpf_gpu_puts: %s\n", s);
	return 0;
}

vm_helper_fn vm_host_helper(uint32_t id)
{
	switch (id) {
	case CUBPF_FN_map_lookup_elem: return h_lookup;
	case CUBPF_FN_map_update_elem: return h_update;
	case CUBPF_FN_map_delete_elem: return h_delete;
	case CUBPF_FN_probe_read:
	case CUBPF_FN_probe_read_user: return h_probe_read;
	case CUBPF_FN_ktime_get_ns: return h_ktime;
	case CUBPF_FN_trace_printk: return h_printk;
	case CUBPF_FN_get_smp_processor_id: return h_cpu;
	case CUBPF_FN_get_current_pid_tgid: return h_pid_tgid;
	case CUBPF_FN_ringbuf_output: return h_ringbuf_output;
	case CUBPF_FN_ringbuf_reserve: return h_ringbuf_reserve;
	case CUBPF_FN_ringbuf_submit: return h_ringbuf_submit;
	case CUBPF_FN_ringbuf_discard: return h_ringbuf_discard;
	case CUBPF_FN_gpu_puts: return h_puts;
	case CUBPF_FN_get_globaltimer: return h_globaltimer;
	case CUBPF_FN_get_block_idx: return h_block_idx;
	case CUBPF_FN_get_block_dim: return h_block_dim;
	case CUBPF_FN_get_thread_idx: return h_thread_idx;
	case CUBPF_FN_get_grid_dim: return h_grid_dim;
	case CUBPF_FN_gpu_membar:
	case CUBPF_FN_get_sm_id:
	case CUBPF_FN_get_warp_id:
	case CUBPF_FN_get_lane_id: return h_zero;
	case CUBPF_FN_get_active_mask: /* one host thread: a warp of one lane, its leader */
	case CUBPF_FN_get_active_count:
	case CUBPF_FN_is_warp_leader:
	case CUBPF_FN_warp_count_unique: return h_active_mask;
	case CUBPF_FN_warp_sum: return h_warp_sum;
	case CUBPF_FN_get_clock: return h_clock;
	case CUBPF_FN_gpu_delay_ns: return h_delay;
	default: return NULL;
	}
}
