/* shim/registry.c: which kernel a CUfunction or CUkernel handle is.
 *
 * Launches look handles up, so look-ups take no lock and allocate nothing: an open-addressing
 * table of (handle, kernel) pairs where a writer publishes the kernel before the key, and a
 * reader that sees the key sees the kernel.  Registrations (cuModuleGetFunction and friends,
 * never in a launch loop) take a mutex.  Handles are never removed: when the driver reuses a
 * handle after an unload, registering it again points it at the new kernel.  Kernel records
 * live for the whole process so that pointers handed to hooks stay valid.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/internal.h"

#define TABLE_BITS 16
#define TABLE_SIZE (1u << TABLE_BITS)

struct entry {
	_Atomic(const void *) key;
	_Atomic(struct shim_kernel_info *) kernel;
};

struct kernel_rec {
	struct shim_kernel_info info;  /* first: the public view */
	struct kernel_rec *next;       /* every record, for the exit summary */
};

static struct entry *table;        /* calloc'd on first registration: untouched pages cost no RSS */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct kernel_rec *all_kernels;
static uint32_t next_id = 1;
static unsigned used;
static atomic_uint_fast64_t unknown_launches;
/* Handles the driver could not name: they map here, so that they are asked about once. */
static struct shim_kernel_info unknown_kernel = { .name = "(unregistered)" };

static size_t slot_of(const void *handle)
{
	return (size_t)(((uintptr_t)handle * 0x9E3779B97F4A7C15ull) >> (64 - TABLE_BITS));
}

static int put_locked(const void *handle, struct shim_kernel_info *k);

struct shim_kernel_info *shim_kernel_find(const void *handle)
{
	struct entry *t = atomic_load_explicit((_Atomic(struct entry *) *)&table, memory_order_acquire);
	if (!t || !handle)
		return NULL;
	for (size_t i = slot_of(handle), n = 0; n < TABLE_SIZE; i = (i + 1) & (TABLE_SIZE - 1), n++) {
		const void *k = atomic_load_explicit(&t[i].key, memory_order_acquire);
		if (k == handle)
			return atomic_load_explicit(&t[i].kernel, memory_order_acquire);
		if (!k)
			return NULL;
	}
	return NULL;
}

const struct shim_kernel_info *shim_kernel_lookup(const void *handle)
{
	const struct shim_kernel_info *k = shim_kernel_find(handle);
	return k == &unknown_kernel ? NULL : k;
}

int shim_kernel_is_unknown(const struct shim_kernel_info *k)
{
	return k == &unknown_kernel;
}

struct shim_kernel_info *shim_kernel_mark_unknown(const void *handle)
{
	pthread_mutex_lock(&lock);
	int rc = put_locked(handle, &unknown_kernel);
	pthread_mutex_unlock(&lock);
	return rc == 0 ? &unknown_kernel : NULL;
}

/* Points `handle` at `k` (lock held).  Returns 0, or -1 when the table is full. */
static int put_locked(const void *handle, struct shim_kernel_info *k)
{
	if (!table) {
		struct entry *t = calloc(TABLE_SIZE, sizeof(*t));
		if (!t)
			return -1;
		atomic_store_explicit((_Atomic(struct entry *) *)&table, t, memory_order_release);
	}
	for (size_t i = slot_of(handle), n = 0; n < TABLE_SIZE; i = (i + 1) & (TABLE_SIZE - 1), n++) {
		const void *key = atomic_load_explicit(&table[i].key, memory_order_relaxed);
		if (key == handle) {
			atomic_store_explicit(&table[i].kernel, k, memory_order_release);
			return 0;
		}
		if (!key) {
			/* Keep a quarter free so that misses stay short. */
			if (used >= TABLE_SIZE - TABLE_SIZE / 4)
				return -1;
			atomic_store_explicit(&table[i].kernel, k, memory_order_relaxed);
			atomic_store_explicit(&table[i].key, handle, memory_order_release);
			used++;
			return 0;
		}
	}
	return -1;
}

static void table_full(void)
{
	static int warned;
	if (!warned++)
		shim_log(SHIM_LOG_WARN, "more than %u kernel handles: later ones are not tracked",
			 TABLE_SIZE - TABLE_SIZE / 4);
}

struct shim_kernel_info *shim_kernel_register(const void *handle, shim_module_t module,
					      shim_library_t library, const char *name)
{
	if (!handle || !name)
		return NULL;
	/* Applications that look a kernel up before every launch must not grow the registry. */
	struct shim_kernel_info *old = shim_kernel_find(handle);
	if (old && old->module == module && old->library == library && !strcmp(old->name, name))
		return old;
	struct kernel_rec *r = calloc(1, sizeof(*r));
	char *copy = strdup(name);
	if (!r || !copy) {
		free(r);
		free(copy);
		return NULL;
	}
	r->info.handle = handle;
	r->info.module = module;
	r->info.library = library;
	r->info.name = copy;
	pthread_mutex_lock(&lock);
	r->info.kernel_id = next_id++;
	int rc = put_locked(handle, &r->info);
	if (rc == 0) {
		r->next = all_kernels;
		all_kernels = r;
	}
	pthread_mutex_unlock(&lock);
	if (rc != 0) {
		table_full();
		free(copy);
		free(r);
		return NULL;
	}
	return &r->info;
}

void shim_kernel_alias(const void *func, const void *kern, shim_module_t module)
{
	struct shim_kernel_info *k = shim_kernel_find(kern);
	if (!k || !func)
		return;
	pthread_mutex_lock(&lock);
	if (module && !k->module)
		k->module = module;
	int rc = put_locked(func, k);
	pthread_mutex_unlock(&lock);
	if (rc != 0)
		table_full();
}

void shim_count_unknown_launch(void)
{
	atomic_fetch_add_explicit(&unknown_launches, 1, memory_order_relaxed);
}

uint64_t shim_unknown_launches(void)
{
	return atomic_load(&unknown_launches) +
	       __atomic_load_n(&unknown_kernel.launches, __ATOMIC_RELAXED);
}

void shim_kernel_each(void (*fn)(const struct shim_kernel_info *k, void *arg), void *arg)
{
	pthread_mutex_lock(&lock);
	struct kernel_rec *r = all_kernels;
	pthread_mutex_unlock(&lock);
	for (; r; r = r->next)
		fn(&r->info, arg);
}

/* fork(): the table's lock is held across it, so that a child never inherits it locked by a
 * thread it does not have (its exit summary walks the table). */
void shim_kernel_fork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

void shim_kernel_fork_done(void)
{
	pthread_mutex_unlock(&lock);
}
