/* Minimal helper declarations for the ptx tests' probe programs (clang -target bpf). */
#ifndef CUBPF_TESTS_PTX_PROBE_H
#define CUBPF_TESTS_PTX_PROBE_H
#include <linux/bpf.h>
#include "cubpf_abi.h"

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)CUBPF_FN_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   __u64 flags) = (void *)CUBPF_FN_map_update_elem;
static __u64 (*bpf_get_globaltimer)(void) = (void *)CUBPF_FN_get_globaltimer;
static long (*bpf_get_thread_idx)(__u64 *x, __u64 *y, __u64 *z) = (void *)CUBPF_FN_get_thread_idx;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)CUBPF_FN_map_delete_elem;
static long (*bpf_ringbuf_output)(void *rb, void *data, __u64 size, __u64 flags) =
	(void *)CUBPF_FN_ringbuf_output;
static long (*bpf_trace_printk)(const char *fmt, __u32 size, ...) = (void *)CUBPF_FN_trace_printk;

char LICENSE[] SEC("license") = "GPL";
#endif
