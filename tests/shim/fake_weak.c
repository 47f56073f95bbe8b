/* The generated half of the fake driver: one weak function per exported name (see
 * fake_driver.c), the name table and the call counters. */
#include <stdint.h>
#include <string.h>

#include "tests/shim/fake.h"

unsigned fake_hit_counts[FAKE_N];
__thread unsigned fake_thread_hit_counts[FAKE_N];

#define SHIM_EXPORT(i, name, intercepted)                                                         \
	__attribute__((weak)) FAKE_EXPORT int name(void)                                          \
	{                                                                                         \
		fake_thread_hit_counts[i]++;                                                      \
		__atomic_fetch_add(&fake_hit_counts[i], 1, __ATOMIC_RELAXED);                     \
		return FAKE_BASE + i;                                                             \
	}
#include "exports.def"
#undef SHIM_EXPORT

const struct fake_fn fake_table[] = {
#define SHIM_EXPORT(i, name, intercepted) { #name, (void *)&name },
#include "exports.def"
#undef SHIM_EXPORT
};

int fake_index_of(const char *name)
{
	for (int i = 0; i < FAKE_N; i++)
		if (!strcmp(fake_table[i].name, name))
			return i;
	return -1;
}

void fake_hit(const char *name)
{
	int i = fake_index_of(name);
	if (i >= 0) {
		fake_thread_hit_counts[i]++;
		__atomic_fetch_add(&fake_hit_counts[i], 1, __ATOMIC_RELAXED);
	}
}

/* ---- test interface ------------------------------------------------------------------------ */

FAKE_EXPORT unsigned fake_hits(const char *name)
{
	int i = fake_index_of(name);
	return i < 0 ? 0 : __atomic_load_n(&fake_hit_counts[i], __ATOMIC_RELAXED);
}

/* The calling thread's calls of every function together, so that a test can hold cubpf to a
 * budget of driver calls per application call (its own threads' calls left out). */
FAKE_EXPORT unsigned fake_thread_total(void)
{
	unsigned n = 0;
	for (int i = 0; i < FAKE_N; i++)
		n += fake_thread_hit_counts[i];
	return n;
}

FAKE_EXPORT unsigned fake_thread_hits(const char *name)
{
	int i = fake_index_of(name);
	return i < 0 ? 0 : fake_thread_hit_counts[i];
}

FAKE_EXPORT void *fake_function(const char *name)
{
	int i = fake_index_of(name);
	return i < 0 ? NULL : fake_table[i].fn;
}
