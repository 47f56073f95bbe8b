/* Host maps: array, per-CPU array, hash, ring buffer (and the GPU kinds' host stand-ins).
 * Every map's values live in one block allocated up front (the hash map preallocates its
 * elements, as Linux does by default), so a pointer handed to a program stays valid until
 * the element is deleted, and checked runs can bound pointers by map storage. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "vm/internal.h"

#define VM_MAX_PERCPU 256

struct vm_hash {
	pthread_mutex_t lock;
	uint32_t nbuckets;         /* power of two */
	int32_t *buckets;          /* first element of each chain, -1 empty */
	int32_t *next;             /* chain links; also the free list */
	uint8_t *keys;             /* max_entries x key_size */
	int32_t free_head;
	uint32_t count;
};

struct vm_ringbuf {
	pthread_mutex_t lock;
	uint8_t *buf;              /* max_entries bytes, a power of two */
	uint64_t mask;
	uint64_t head, tail;       /* consumer at head, producer at tail (byte counters) */
	uint64_t dropped;
};

uint32_t vm_percpu_slots(void)
{
	static uint32_t slots;
	if (!slots) {
		long n = sysconf(_SC_NPROCESSORS_CONF);
		slots = n < 1 ? 1 : n > VM_MAX_PERCPU ? VM_MAX_PERCPU : (uint32_t)n;
	}
	return slots;
}

static bool is_ring(uint32_t type)
{
	return type == CUBPF_MAP_RINGBUF || type == CUBPF_MAP_GPU_RINGBUF;
}

static int ring_create(struct vm_map *m, char *err, size_t errlen)
{
	uint32_t n = m->def.max_entries;
	if (n < 4096 || (n & (n - 1))) {
		vm_errf(err, errlen, "ring buffer map '%s': max_entries %u must be a power of two >= 4096",
			m->def.name, n);
		return -1;
	}
	m->ring = calloc(1, sizeof(*m->ring));
	if (!m->ring || !(m->ring->buf = calloc(1, n)))
		return -1;
	pthread_mutex_init(&m->ring->lock, NULL);
	m->ring->mask = n - 1;
	m->data = m->ring->buf; /* records handed to programs lie here (checked runs bound them) */
	m->data_size = n;
	return 0;
}

static int hash_create(struct vm_map *m)
{
	struct vm_hash *h = calloc(1, sizeof(*h));
	uint32_t n = m->def.max_entries, nb = 1;
	while (nb < n && nb < (1u << 30))
		nb <<= 1;
	m->hash = h;
	if (!h)
		return -1;
	h->nbuckets = nb;
	h->buckets = malloc(sizeof(int32_t) * nb);
	h->next = malloc(sizeof(int32_t) * n);
	h->keys = calloc(n, m->def.key_size);
	if (!h->buckets || !h->next || !h->keys)
		return -1;
	memset(h->buckets, 0xff, sizeof(int32_t) * nb);
	for (uint32_t i = 0; i < n; i++)
		h->next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
	h->free_head = 0;
	pthread_mutex_init(&h->lock, NULL);
	return 0;
}

static int map_create(struct vm_map *m, char *err, size_t errlen)
{
	const struct vm_map_def *d = &m->def;
	m->slots = d->type == CUBPF_MAP_PERCPU_ARRAY ? vm_percpu_slots() : 1;
	m->stride = ((size_t)d->value_size + 7) & ~(size_t)7;
	if (is_ring(d->type))
		return ring_create(m, err, errlen);
	if (d->max_entries == 0 || d->value_size == 0 || d->key_size == 0) {
		vm_errf(err, errlen, "map '%s': key, value sizes and max_entries must be > 0", d->name);
		return -1;
	}
	if ((uint64_t)m->stride * d->max_entries * m->slots > (1ull << 32)) {
		vm_errf(err, errlen, "map '%s' is too large (%u entries of %u bytes)", d->name,
			d->max_entries, d->value_size);
		return -1;
	}
	m->data_size = m->stride * d->max_entries * m->slots;
	m->data = aligned_alloc(64, (m->data_size + 63) & ~(size_t)63);
	if (!m->data) {
		vm_errf(err, errlen, "map '%s': out of memory", d->name);
		return -1;
	}
	memset(m->data, 0, m->data_size);
	if (d->init)
		memcpy(m->data, d->init, d->value_size);
	if (d->type == CUBPF_MAP_HASH && hash_create(m) < 0) {
		vm_errf(err, errlen, "map '%s': out of memory", d->name);
		return -1;
	}
	return 0;
}

static bool type_supported(uint32_t t)
{
	return t == CUBPF_MAP_HASH || t == CUBPF_MAP_ARRAY || t == CUBPF_MAP_PERCPU_ARRAY ||
	       t == CUBPF_MAP_RINGBUF || t == CUBPF_MAP_PERTHREAD_ARRAY ||
	       t == CUBPF_MAP_GPU_ARRAY || t == CUBPF_MAP_GPU_RINGBUF;
}

int vm_maps_create(struct vm_runtime *rt, char *err, size_t errlen)
{
	const struct vm_object *obj = rt->obj;
	rt->map_cnt = obj->map_cnt;
	rt->maps = calloc(obj->map_cnt ? obj->map_cnt : 1, sizeof(*rt->maps));
	if (!rt->maps) {
		vm_errf(err, errlen, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < obj->map_cnt; i++) {
		rt->maps[i].def = obj->maps[i];
		if (!type_supported(obj->maps[i].type)) {
			vm_errf(err, errlen, "map '%s': type %u is not supported", obj->maps[i].name,
				obj->maps[i].type);
			return -1;
		}
		if (map_create(&rt->maps[i], err, errlen) < 0) {
			if (!err[0])
				vm_errf(err, errlen, "map '%s': out of memory", obj->maps[i].name);
			return -1;
		}
	}
	return 0;
}

void vm_maps_destroy(struct vm_runtime *rt)
{
	for (uint32_t i = 0; rt->maps && i < rt->map_cnt; i++) {
		struct vm_map *m = &rt->maps[i];
		if (!m->ring && !m->external)
			free(m->data); /* a ring's data is its buffer, freed below */
		free(m->retired);
		if (m->hash) {
			free(m->hash->buckets);
			free(m->hash->next);
			free(m->hash->keys);
			free(m->hash);
		}
		if (m->ring) {
			free(m->ring->buf);
			free(m->ring);
		}
	}
	free(rt->maps);
}

static bool is_array(uint32_t type)
{
	return type == CUBPF_MAP_ARRAY || type == CUBPF_MAP_GPU_ARRAY;
}

size_t vm_map_array_bytes(const struct vm_map_def *def)
{
	return is_array(def->type) ? (((size_t)def->value_size + 7) & ~(size_t)7) * def->max_entries
				   : 0;
}

int vm_runtime_share_array(struct vm_runtime *rt, uint32_t map, void *storage, size_t bytes,
			   char *err, size_t errlen)
{
	if (map >= rt->map_cnt || !is_array(rt->maps[map].def.type)) {
		vm_errf(err, errlen, "map %u is not an array map", map);
		return -1;
	}
	struct vm_map *m = &rt->maps[map];
	if (!storage || (uintptr_t)storage % 8 || bytes < m->data_size) {
		vm_errf(err, errlen, "map '%s' needs %zu bytes of 8-byte aligned storage",
			m->def.name, m->data_size);
		return -1;
	}
	memcpy(storage, m->data, m->data_size);
	/* A program running on another thread may still hold a pointer into the old storage:
	 * our own is kept until the runtime goes, the caller's stays the caller's. */
	if (!m->external)
		m->retired = m->data;
	__atomic_store_n(&m->data, (uint8_t *)storage, __ATOMIC_RELEASE);
	m->external = true;
	return 0;
}

bool vm_maps_contain(const struct vm_runtime *rt, uintptr_t addr, size_t size)
{
	for (uint32_t i = 0; i < rt->map_cnt; i++) {
		uintptr_t d = (uintptr_t)rt->maps[i].data;
		if (d && addr >= d && addr + size <= d + rt->maps[i].data_size && addr + size > addr)
			return true;
	}
	return false;
}

/* ---- program-side operations ---------------------------------------------------------------- */

static uint32_t cpu_slot(const struct vm_map *m)
{
	if (m->slots == 1)
		return 0;
	int c = sched_getcpu();
	return c < 0 ? 0 : (uint32_t)c % m->slots;
}

static int32_t hash_find(struct vm_map *m, const void *key, uint32_t *bucket)
{
	struct vm_hash *h = m->hash;
	uint32_t b = (uint32_t)XXH3_64bits(key, m->def.key_size) & (h->nbuckets - 1);
	*bucket = b;
	for (int32_t e = h->buckets[b]; e >= 0; e = h->next[e])
		if (!memcmp(h->keys + (size_t)e * m->def.key_size, key, m->def.key_size))
			return e;
	return -1;
}

void *vm_map_prog_lookup(struct vm_map *m, const void *key)
{
	if (m->hash) {
		uint32_t b;
		pthread_mutex_lock(&m->hash->lock);
		int32_t e = hash_find(m, key, &b);
		pthread_mutex_unlock(&m->hash->lock);
		return e < 0 ? NULL : m->data + (size_t)e * m->stride;
	}
	if (!m->data)
		return NULL;
	uint32_t idx;
	memcpy(&idx, key, sizeof(idx));
	if (idx >= m->def.max_entries)
		return NULL;
	return m->data + ((size_t)cpu_slot(m) * m->def.max_entries + idx) * m->stride;
}

static int hash_update(struct vm_map *m, const void *key, const void *value, uint64_t flags)
{
	struct vm_hash *h = m->hash;
	uint32_t b;
	int rc = 0;
	pthread_mutex_lock(&h->lock);
	int32_t e = hash_find(m, key, &b);
	if (e >= 0 && flags == BPF_NOEXIST)
		rc = -EEXIST;
	else if (e < 0 && flags == BPF_EXIST)
		rc = -ENOENT;
	else if (e < 0 && h->free_head < 0)
		rc = -E2BIG;
	else if (e < 0) {
		e = h->free_head;
		h->free_head = h->next[e];
		memcpy(h->keys + (size_t)e * m->def.key_size, key, m->def.key_size);
		h->next[e] = h->buckets[b];
		h->buckets[b] = e;
		h->count++;
	}
	if (rc == 0)
		memcpy(m->data + (size_t)e * m->stride, value, m->def.value_size);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int vm_map_prog_update(struct vm_map *m, const void *key, const void *value, uint64_t flags)
{
	if (flags > BPF_EXIST)
		return -EINVAL;
	if (m->hash)
		return hash_update(m, key, value, flags);
	if (flags == BPF_NOEXIST)
		return -EEXIST; /* array elements always exist */
	void *slot = vm_map_prog_lookup(m, key);
	if (!slot)
		return -E2BIG;
	memcpy(slot, value, m->def.value_size);
	return 0;
}

int vm_map_prog_delete(struct vm_map *m, const void *key)
{
	if (!m->hash)
		return -EINVAL;
	struct vm_hash *h = m->hash;
	uint32_t b;
	int rc = -ENOENT;
	pthread_mutex_lock(&h->lock);
	int32_t e = hash_find(m, key, &b);
	if (e >= 0) {
		int32_t *link = &h->buckets[b];
		while (*link != e)
			link = &h->next[*link];
		*link = h->next[e];
		h->next[e] = h->free_head;
		h->free_head = e;
		h->count--;
		rc = 0;
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

/* Records are [u32 length][u32 flags][data, padded to 8], contiguous in the buffer: a record
 * that would wrap is preceded by a padding record up to the end.  A full buffer drops the
 * record and counts it.  Reserved records are BUSY until committed; the consumer stops there. */
#define REC_BUSY 1u
#define REC_DISCARD 2u
#define REC_PAD 4u

struct rec_hdr {
	uint32_t len, flags;
};

void *vm_ringbuf_reserve(struct vm_map *m, uint64_t size)
{
	struct vm_ringbuf *r = m->ring;
	uint64_t cap = r ? r->mask + 1 : 0;
	if (!r || size == 0 || size > cap / 2)
		return NULL;
	uint64_t need = (sizeof(struct rec_hdr) + size + 7) & ~7ull;
	void *rec = NULL;
	pthread_mutex_lock(&r->lock);
	uint64_t pos = r->tail & r->mask, to_end = cap - pos;
	uint64_t pad = to_end < need ? to_end : 0;
	if (pad + need > cap - (r->tail - r->head)) {
		r->dropped++;
	} else {
		if (pad) {
			struct rec_hdr h = {(uint32_t)(pad - sizeof(h)), REC_PAD};
			memcpy(r->buf + pos, &h, sizeof(h));
			r->tail += pad;
			pos = 0;
		}
		struct rec_hdr h = {(uint32_t)size, REC_BUSY};
		memcpy(r->buf + pos, &h, sizeof(h));
		r->tail += need;
		rec = r->buf + pos + sizeof(h);
	}
	pthread_mutex_unlock(&r->lock);
	return rec;
}

void vm_ringbuf_commit(void *record, bool discard)
{
	struct rec_hdr *h = (struct rec_hdr *)((uint8_t *)record - sizeof(*h));
	__atomic_store_n(&h->flags, discard ? REC_DISCARD : 0, __ATOMIC_RELEASE);
}

int vm_ringbuf_output(struct vm_map *m, const void *data, uint64_t size)
{
	if (!m->ring)
		return -EINVAL;
	void *rec = vm_ringbuf_reserve(m, size);
	if (!rec)
		return -ENOSPC;
	memcpy(rec, data, size);
	vm_ringbuf_commit(rec, false);
	return 0;
}

/* ---- host-side API ---------------------------------------------------------------------------- */

static struct vm_map *get_map(struct vm_runtime *rt, uint32_t map)
{
	return rt && map < rt->map_cnt ? &rt->maps[map] : NULL;
}

int vm_map_lookup(struct vm_runtime *rt, uint32_t map, const void *key, void *value)
{
	struct vm_map *m = get_map(rt, map);
	if (!m || m->ring)
		return -1;
	if (m->slots > 1) {
		uint32_t idx;
		memcpy(&idx, key, 4);
		if (idx >= m->def.max_entries)
			return -1;
		memcpy(value, m->data + (size_t)idx * m->stride, m->def.value_size);
		return 0;
	}
	if (m->hash) { /* copy under the lock: a delete may recycle the element right after */
		uint32_t b;
		pthread_mutex_lock(&m->hash->lock);
		int32_t e = hash_find(m, key, &b);
		if (e >= 0)
			memcpy(value, m->data + (size_t)e * m->stride, m->def.value_size);
		pthread_mutex_unlock(&m->hash->lock);
		return e >= 0 ? 0 : -1;
	}
	void *v = vm_map_prog_lookup(m, key);
	if (v)
		memcpy(value, v, m->def.value_size);
	return v ? 0 : -1;
}

int vm_map_lookup_percpu(struct vm_runtime *rt, uint32_t map, const void *key, void *values)
{
	struct vm_map *m = get_map(rt, map);
	uint32_t idx;
	if (!m || m->hash || m->ring)
		return -1;
	memcpy(&idx, key, 4);
	if (idx >= m->def.max_entries)
		return -1;
	for (uint32_t s = 0; s < m->slots; s++)
		memcpy((uint8_t *)values + (size_t)s * m->def.value_size,
		       m->data + ((size_t)s * m->def.max_entries + idx) * m->stride, m->def.value_size);
	return 0;
}

int vm_map_update(struct vm_runtime *rt, uint32_t map, const void *key, const void *value,
		  uint64_t flags)
{
	struct vm_map *m = get_map(rt, map);
	if (!m || m->ring)
		return -1;
	return vm_map_prog_update(m, key, value, flags) == 0 ? 0 : -1;
}

int vm_map_delete(struct vm_runtime *rt, uint32_t map, const void *key)
{
	struct vm_map *m = get_map(rt, map);
	return m && vm_map_prog_delete(m, key) == 0 ? 0 : -1;
}

static int hash_next_key(struct vm_map *m, const void *key, void *next)
{
	struct vm_hash *h = m->hash;
	uint32_t b = 0;
	int32_t e = -1;
	pthread_mutex_lock(&h->lock);
	if (key && (e = hash_find(m, key, &b)) >= 0) {
		e = h->next[e];
		if (e < 0)
			b++; /* the rest of this chain is done: go on with the next bucket */
	} else
		b = 0; /* no key or an absent one: start over, as Linux does */
	for (; e < 0 && b < h->nbuckets; b++)
		if (h->buckets[b] >= 0) {
			e = h->buckets[b];
			break;
		}
	if (e >= 0)
		memcpy(next, h->keys + (size_t)e * m->def.key_size, m->def.key_size);
	pthread_mutex_unlock(&h->lock);
	return e >= 0 ? 0 : -1;
}

int vm_map_next_key(struct vm_runtime *rt, uint32_t map, const void *key, void *next)
{
	struct vm_map *m = get_map(rt, map);
	if (!m || m->ring)
		return -1;
	if (m->hash)
		return hash_next_key(m, key, next);
	uint32_t idx = 0;
	if (key) {
		memcpy(&idx, key, 4);
		idx = idx >= m->def.max_entries ? 0 : idx + 1;
	}
	if (idx >= m->def.max_entries)
		return -1;
	memcpy(next, &idx, 4);
	return 0;
}

size_t vm_ringbuf_consume(struct vm_runtime *rt, uint32_t map, void *buf, size_t cap)
{
	struct vm_map *m = get_map(rt, map);
	if (!m || !m->ring)
		return 0;
	struct vm_ringbuf *r = m->ring;
	size_t n = 0;
	pthread_mutex_lock(&r->lock);
	while (r->head != r->tail) {
		struct rec_hdr *h = (struct rec_hdr *)(r->buf + (r->head & r->mask));
		uint32_t flags = __atomic_load_n(&h->flags, __ATOMIC_ACQUIRE);
		if (flags & REC_BUSY)
			break; /* reserved, not committed yet: records stay in order */
		uint64_t len = h->len;
		r->head += (sizeof(*h) + len + 7) & ~7ull;
		if (flags & (REC_PAD | REC_DISCARD))
			continue;
		n = len < cap ? len : cap;
		memcpy(buf, h + 1, n);
		break;
	}
	pthread_mutex_unlock(&r->lock);
	return n;
}

void vm_map_format_bytes(const void *bytes, uint32_t size, char *out, size_t len)
{
	const uint8_t *v = bytes;
	if (!len)
		return;
	out[0] = '\0';
	if (size == 4 || size == 8) {
		uint64_t x = 0;
		memcpy(&x, v, size);
		snprintf(out, len, "%" PRIu64, x);
		return;
	}
	size_t o = 0;
	for (uint32_t i = 0; i < size && o + 4 < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%02x", i ? " " : "", v[i]);
}
