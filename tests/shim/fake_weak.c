/* The generated half of the fake driver: one weak function per exported name (see
 * fake_driver.c), the name table and the call counters. */
#include <stdint.h>
#include <string.h>

#include "tests/shim/fake.h"

unsigned fake_hit_counts[FAKE_N];

#define SHIM_EXPORT(i, name, intercepted)                                                         \
	__attribute__((weak)) FAKE_EXPORT int name(void)                                          \
	{                                                                                         \
		__atomic_fetch_add(&fake_hit_counts[i], 1, __ATOMIC_RELAXED);                                \
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
	if (i >= 0)
		__atomic_fetch_add(&fake_hit_counts[i], 1, __ATOMIC_RELAXED);
}

/* ---- test interface ------------------------------------------------------------------------ */

FAKE_EXPORT unsigned fake_hits(const char *name)
{
	int i = fake_index_of(name);
	return i < 0 ? 0 : __atomic_load_n(&fake_hit_counts[i], __ATOMIC_RELAXED);
}

FAKE_EXPORT void *fake_function(const char *name)
{
	int i = fake_index_of(name);
	return i < 0 ? NULL : fake_table[i].fn;
}
