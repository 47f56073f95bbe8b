/* vm/: folder-private declarations shared by the loader, verifier, interpreter, maps, helpers. */
#ifndef CUBPF_VM_INTERNAL_H
#define CUBPF_VM_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "vm/vm.h"

#define VM_MAX_HELPER_ID 1024

/* printf into a caller's error buffer (never overflows, always terminated). */
void vm_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- host maps (maps.c) ------------------------------------------------------------------------
 * Every map keeps its values in one contiguous block (`data`, `data_size` bytes): array-like maps
 * index it, the hash map allocates its values from it.  Checked runs use that to bound pointers. */
struct vm_hash;      /* maps.c */
struct vm_ringbuf;   /* maps.c */

struct vm_map {
	struct vm_map_def def;
	uint8_t *data;             /* values (array, per-CPU array: slots x entries, hash pool) */
	size_t data_size;
	uint32_t slots;            /* per-CPU copies (1 for others) */
	size_t stride;             /* value_size rounded up to 8 */
	struct vm_hash *hash;      /* BPF_MAP_TYPE_HASH only */
	struct vm_ringbuf *ring;   /* ring buffers only */
	bool external;             /* data is the caller's (vm_runtime_share_array): not freed */
	uint8_t *retired;          /* own storage replaced by the caller's, freed with the map */
};

struct vm_runtime {
	const struct vm_object *obj;
	struct vm_map *maps;
	uint32_t map_cnt;
	struct vm_output out;
};

/* What the interpreter hands to a helper as `env`. */
struct vm_env {
	struct vm_runtime *rt;
	void *ctx;
	size_t ctx_size;
	int stop;                  /* set by vm_exec_stop: end the run with r0 = 0 */
};

int vm_maps_create(struct vm_runtime *rt, char *err, size_t errlen);
void vm_maps_destroy(struct vm_runtime *rt);
/* Program-side operations (pointers into map storage; keys/values are program memory). */
void *vm_map_prog_lookup(struct vm_map *m, const void *key);
int vm_map_prog_update(struct vm_map *m, const void *key, const void *value, uint64_t flags);
int vm_map_prog_delete(struct vm_map *m, const void *key);
int vm_ringbuf_output(struct vm_map *m, const void *data, uint64_t size);
/* Reserves a contiguous record of `size` bytes (NULL when full); commit publishes it or, with
 * discard, drops it.  The consumer stops at the oldest record not committed yet. */
void *vm_ringbuf_reserve(struct vm_map *m, uint64_t size);
void vm_ringbuf_commit(void *record, bool discard);
/* Does [addr, addr+size) lie inside one map's storage? */
bool vm_maps_contain(const struct vm_runtime *rt, uintptr_t addr, size_t size);

/* ---- helpers (helpers.c) -------------------------------------------------------------------- */
/* The host implementation of helper `id`, or NULL. */
vm_helper_fn vm_host_helper(uint32_t id);

/* ---- context layouts (helpers.c): which loads a program kind may make from its context ------- */
struct vm_ctx_layout {
	uint32_t size;             /* sizeof the context struct (0: raw, no context rules) */
	/* Returns true when a load of `size` bytes at `off` reads exactly one field. */
	bool (*field_ok)(uint32_t off, uint32_t size);
};
const struct vm_ctx_layout *vm_ctx_layout(enum vm_prog_kind kind);

#endif
