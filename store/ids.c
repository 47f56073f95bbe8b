/* store_ids: sparse u32 ids to dense numbers, in memory that follows how many ids there are.
 *
 * Ids in a trace (string ids, and any u32 a record carries) come from the file: an array
 * indexed by them is as large as the largest one a damaged file declares.  So the reader's
 * string table and the commands' per-id tables number the ids they meet 0, 1, 2, ... and keep
 * their data in dense arrays by that number; this open-addressing table, at most half full,
 * maps an id to its number. */
#include <stdlib.h>

#include "store/store.h"

struct store_ids_slot {
	uint32_t id;
	uint32_t num1; /* the id's number + 1; 0 = a free slot */
};

static size_t slot_of(const struct store_ids_slot *s, size_t nslots, uint32_t id)
{
	size_t j = (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (nslots - 1);
	while (s[j].num1 && s[j].id != id)
		j = (j + 1) & (nslots - 1);
	return j;
}

static int grow(struct store_ids *t)
{
	size_t n = t->nslots ? t->nslots * 2 : 64;
	struct store_ids_slot *s = calloc(n, sizeof(*s));
	if (!s)
		return -1;
	for (size_t i = 0; i < t->nslots; i++)
		if (t->slots[i].num1)
			s[slot_of(s, n, t->slots[i].id)] = t->slots[i];
	free(t->slots);
	t->slots = s;
	t->nslots = n;
	return 0;
}

long store_ids_find(const struct store_ids *t, uint32_t id)
{
	if (!t->nslots)
		return -1;
	const struct store_ids_slot *s = &t->slots[slot_of(t->slots, t->nslots, id)];
	return s->num1 ? (long)s->num1 - 1 : -1;
}

long store_ids_add(struct store_ids *t, uint32_t id)
{
	long n = store_ids_find(t, id);
	if (n >= 0)
		return n;
	if (t->count >= UINT32_MAX - 1 || ((t->count + 1) * 2 > t->nslots && grow(t)))
		return -1;
	struct store_ids_slot *s = &t->slots[slot_of(t->slots, t->nslots, id)];
	s->id = id;
	s->num1 = (uint32_t)++t->count;
	return (long)t->count - 1;
}

void store_ids_free(struct store_ids *t)
{
	free(t->slots);
	t->slots = NULL;
	t->nslots = t->count = 0;
}
