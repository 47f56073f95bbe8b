/* cubpf_helpers.h: what a cubpf probe program includes.
 *
 *   clang -O2 -g -target bpf -I /usr/local/share/cubpf/include \
 *         -I /usr/include/$(uname -m)-linux-gnu -c probe.bpf.c -o probe.bpf.o
 *
 * libbpf-style: SEC("kprobe/GLOB") etc. name the program kind (see cubpf_abi.h), maps are
 * BTF-defined structs in SEC(".maps") built with __uint/__type, globals live in .rodata/.data/
 * .bss.  Helpers are called through the usual `static ret (*name)(args) = (void *)ID` pointers.
 * GPU helpers may only be called from GPU programs (kprobe, kretprobe, memprobe, blockprobe,
 * blockretprobe, syncprobe, fentry, fexit), host helpers (ktime, pid/tgid, cpu) only from
 * uprobe/uretprobe programs: the verifier checks it.
 */
#ifndef CUBPF_HELPERS_H
#define CUBPF_HELPERS_H

#include "cubpf_abi.h"

/* ---- sections and map definitions --------------------------------------------------------- */
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name
#define __array(name, val) __typeof__(val) *name[]

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define __noinline __attribute__((noinline))

/* Map update flags. */
#ifndef BPF_ANY
#define BPF_ANY 0     /* create or update */
#define BPF_NOEXIST 1 /* create only */
#define BPF_EXIST 2   /* update only */
#endif
#define CUBPF_F_RDONLY_PROG (1U << 7) /* programs may only read the map */

/* ---- helpers available everywhere ----------------------------------------------------------- */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)CUBPF_FN_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   __u64 flags) = (void *)CUBPF_FN_map_update_elem;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)CUBPF_FN_map_delete_elem;
static long (*bpf_probe_read)(void *dst, __u32 size, const void *src) = (void *)CUBPF_FN_probe_read;
static long (*bpf_probe_read_user)(void *dst, __u32 size,
				   const void *src) = (void *)CUBPF_FN_probe_read_user;
static long (*bpf_trace_printk)(const char *fmt, __u32 fmt_size,
				...) = (void *)CUBPF_FN_trace_printk;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size,
				  __u64 flags) = (void *)CUBPF_FN_ringbuf_output;

/* bpf_printk("x=%d\n", x): up to three integer arguments. */
#define bpf_printk(fmt, ...)                                                        \
	({                                                                          \
		static const char ____fmt[] = fmt;                                  \
		bpf_trace_printk(____fmt, sizeof(____fmt), ##__VA_ARGS__);          \
	})

/* ---- host helpers (uprobe / uretprobe) ----------------------------------------------------- */
/* Ring buffer records written in place: reserve a constant size, check for NULL, fill, then
 * submit or discard on every path (the verifier tracks the reservation). */
static void *(*bpf_ringbuf_reserve)(void *ringbuf, __u64 size,
				    __u64 flags) = (void *)CUBPF_FN_ringbuf_reserve;
static void (*bpf_ringbuf_submit)(void *data, __u64 flags) = (void *)CUBPF_FN_ringbuf_submit;
static void (*bpf_ringbuf_discard)(void *data, __u64 flags) = (void *)CUBPF_FN_ringbuf_discard;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)CUBPF_FN_ktime_get_ns;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)CUBPF_FN_get_smp_processor_id;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)CUBPF_FN_get_current_pid_tgid;

/* ---- GPU helpers (every GPU kind: kprobe ... syncprobe, fentry, fexit) ---------------------- */
static long (*bpf_gpu_puts)(const char *str) = (void *)CUBPF_FN_gpu_puts;
static __u64 (*bpf_get_globaltimer)(void) = (void *)CUBPF_FN_get_globaltimer;
static long (*bpf_get_block_idx)(__u64 *x, __u64 *y, __u64 *z) = (void *)CUBPF_FN_get_block_idx;
static long (*bpf_get_block_dim)(__u64 *x, __u64 *y, __u64 *z) = (void *)CUBPF_FN_get_block_dim;
static long (*bpf_get_thread_idx)(__u64 *x, __u64 *y, __u64 *z) = (void *)CUBPF_FN_get_thread_idx;
static long (*bpf_get_grid_dim)(__u64 *x, __u64 *y, __u64 *z) = (void *)CUBPF_FN_get_grid_dim;
static long (*bpf_gpu_membar)(void) = (void *)CUBPF_FN_gpu_membar;
static __u64 (*bpf_get_sm_id)(void) = (void *)CUBPF_FN_get_sm_id;
static __u64 (*bpf_get_warp_id)(void) = (void *)CUBPF_FN_get_warp_id;
static __u64 (*bpf_get_lane_id)(void) = (void *)CUBPF_FN_get_lane_id;
static __u64 (*bpf_get_active_mask)(void) = (void *)CUBPF_FN_get_active_mask;
static __u64 (*bpf_get_clock)(void) = (void *)CUBPF_FN_get_clock;
/* Warp level: the lanes that run the probe together (one warp's active lanes).  A probe that
 * updates a shared counter from the leader only, adding bpf_get_active_count(), makes one
 * memory update per warp instead of 32.  They see the lanes active at the call: take the count
 * (and call bpf_warp_count_unique, which every lane must reach) before branching on
 * bpf_is_warp_leader(), past which the leader runs alone. */
static __u64 (*bpf_get_active_count)(void) = (void *)CUBPF_FN_get_active_count;
static __u64 (*bpf_is_warp_leader)(void) = (void *)CUBPF_FN_is_warp_leader;
static __u64 (*bpf_warp_count_unique)(__u64 v) = (void *)CUBPF_FN_warp_count_unique;
/* The sum of v over the lanes calling together (a warp of one lane on the host). */
static __u64 (*bpf_warp_sum)(__u64 v) = (void *)CUBPF_FN_warp_sum;
/* Spins ns nanoseconds on %globaltimer (32 ns ticks on sm_90) and returns 0.  The verifier
 * wants ns proven <= CUBPF_MAX_DELAY_NS (1 ms): a constant, or `if (ns > CONST) ns = CONST;`. */
static long (*bpf_gpu_delay_ns)(__u64 ns) = (void *)CUBPF_FN_gpu_delay_ns;

/* ---- small utilities ----------------------------------------------------------------------- */
/* floor(log2(v)) for v > 0, 0 for v == 0, without loops (the verifier likes that). */
static __always_inline __u32 cubpf_log2(__u64 v)
{
	__u32 r = 0, s;
	s = (v > 0xFFFFFFFFull) << 5; v >>= s; r |= s;
	s = (v > 0xFFFF) << 4; v >>= s; r |= s;
	s = (v > 0xFF) << 3; v >>= s; r |= s;
	s = (v > 0xF) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	r |= (__u32)(v >> 1);
	return r;
}

/* Linear thread index within the block, and block index within the grid. */
static __always_inline __u32 cubpf_thread_linear(const struct cubpf_kernel_ctx *c)
{
	return c->tid_x + c->ntid_x * (c->tid_y + c->ntid_y * c->tid_z);
}

static __always_inline __u32 cubpf_block_linear(const struct cubpf_kernel_ctx *c)
{
	return c->ctaid_x + c->nctaid_x * (c->ctaid_y + c->nctaid_y * c->ctaid_z);
}

#endif /* CUBPF_HELPERS_H */
