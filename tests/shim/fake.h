/* Shared by the two halves of the fake driver. */
#ifndef CUBPF_TESTS_SHIM_FAKE_H
#define CUBPF_TESTS_SHIM_FAKE_H

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_BASE 10000

enum {
#define SHIM_EXPORT(i, name, intercepted) FAKE_IDX_##name = i,
#include "exports.def"
#undef SHIM_EXPORT
	FAKE_N
};

struct fake_fn {
	const char *name;
	void *fn;
};
extern const struct fake_fn fake_table[FAKE_N];
extern unsigned fake_hit_counts[FAKE_N];
/* The same, of the calling thread only (what cubpf's threads call is not counted there). */
extern __thread unsigned fake_thread_hit_counts[FAKE_N];
int fake_index_of(const char *name);
void fake_hit(const char *name);
/* Counts a call of `name` (an exported name, checked at compile time) without a look-up. */
#define FAKE_HIT(name)                                                                            \
	(fake_thread_hit_counts[FAKE_IDX_##name]++,                                               \
	 __atomic_fetch_add(&fake_hit_counts[FAKE_IDX_##name], 1, __ATOMIC_RELAXED))

#endif
