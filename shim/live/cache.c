/* shim/live/cache.c: the module cache (store/ part 1) as the shim uses it.
 *
 * The instrumented cubin of a module is kept in a sqlite database shared by every process of
 * the user, under a key over everything that decides it (store_key_input): the image's bytes,
 * the probe objects' bytes in CUBPF_PROGRAMS order, the rewriter (this shim's build id), the
 * SM, the driver version, the JIT options, CUBPF_KERNELS and the next kernel id.  Kernel ids are
 * baked into the instrumented code, so an entry carries a manifest of the ids it was made with
 * (shim_live_kernel_ids_claim checks them on a hit).
 *
 * The cache only saves time: any failure (no folder, a damaged or read-only database) is one
 * warning, then the process runs on without it.  The database is opened at the first lookup.
 * CUBPF_CACHE=off (or 0, none) turns it off.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "shim/live/internal.h"

enum { CACHE_UNOPENED, CACHE_OPEN, CACHE_OFF };

static pthread_rwlock_t cache_rw = PTHREAD_RWLOCK_INITIALIZER; /* write: open, close, fork */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int state;
static struct store_cache *cache;
/* A fork()ed child's copy of its parent's connection: kept reachable (not a leak, just not its
 * own; volatile, so that the store is not optimised away). */
static struct store_cache *volatile parents_cache;
static struct store_blob *objs;    /* the probe objects' bytes, in CUBPF_PROGRAMS order */
static char rewriter[128];         /* "cubpf ptx-rewriter, build <build id>" */
static uint32_t driver_version;

/* The JIT options of module.c's jit() (an error-log buffer only) and the rewriter options
 * that are not in other key fields (the enable-word check is compiled in or not: sampling and
 * CUBPF_CONTROL need it; deferred counters' sums and blockretprobes' block state in shared
 * memory or not).  Change them when either changes. */
static const char *jit_options(void)
{
	static const char *const v[4] = {
		"cuLinkAddData PTX; no JIT options; enable_words=0; shared_sums=0",
		"cuLinkAddData PTX; no JIT options; enable_words=1; shared_sums=0",
		"cuLinkAddData PTX; no JIT options; enable_words=0",
		"cuLinkAddData PTX; no JIT options; enable_words=1",
	};
	return v[shim_live_session.enable_words + 2 * shim_live_session.shared_sums];
}

bool shim_live_cache_off(void)
{
	return atomic_load_explicit(&state, memory_order_relaxed) == CACHE_OFF;
}

static void store_log(void *ctx, const char *msg)
{
	(void)ctx;
	shim_log(SHIM_LOG_WARN, "live: %s", msg);
}

/* Turns the cache off for the rest of the process, with one warning. */
static void give_up(const char *what, const char *why)
{
	if (atomic_exchange(&state, CACHE_OFF) != CACHE_OFF)
		shim_log(SHIM_LOG_WARN, "live: module cache%s%s: %s; running without the cache",
			 *what ? " " : "", what, why);
}

/* ---- the rewriter's identity: this shim's GNU build id ---------------------------------- */

static int build_id_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	const void *self = data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (uintptr_t)self >= info->dlpi_addr + ph->p_vaddr &&
		    (uintptr_t)self < info->dlpi_addr + ph->p_vaddr + ph->p_memsz)
			goto mine;
	}
	return 0;
mine:
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const uint8_t *desc = p + sizeof(*n) + ((n->n_namesz + 3) & ~3u);
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(p + sizeof(*n), "GNU", 4) && desc + n->n_descsz <= end) {
				size_t o = strlen(rewriter);
				for (uint32_t j = 0; j < n->n_descsz && o + 3 < sizeof(rewriter); j++, o += 2)
					snprintf(rewriter + o, 3, "%02x", desc[j]);
				return 1;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

/* Any change to the rewriter, the code generator or the verifier changes the shim's build id:
 * a rebuilt shim never takes another build's cubins.  Without a build id, the build time. */
static void rewriter_identity(void)
{
	snprintf(rewriter, sizeof(rewriter), "cubpf ptx-rewriter, build ");
	size_t before = strlen(rewriter);
	dl_iterate_phdr(build_id_cb, (void *)&rewriter_identity);
	if (strlen(rewriter) == before)
		snprintf(rewriter + before, sizeof(rewriter) - before, "%s %s", __DATE__, __TIME__);
}

/* ---- opening ---------------------------------------------------------------------------------- */

static int read_file(const char *path, struct store_blob *b)
{
	char err[CUBIN_ERRLEN + 4096];
	size_t n = 0;
	uint8_t *buf = cubin_file_read(path, (size_t)1 << 30, &n, err, sizeof(err));
	if (!buf)
		return -1;
	b->data = buf;
	b->size = n;
	return 0;
}

static bool env_off(const char *v)
{
	return v && (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "none") ||
		     !strcmp(v, "OFF"));
}

/* Lock held (open_lock). */
static void open_cache(void)
{
	char path[4096], err[STORE_ERRLEN];
	if (env_off(getenv("CUBPF_CACHE"))) {
		atomic_store(&state, CACHE_OFF);
		shim_log(SHIM_LOG_INFO, "live: module cache off (CUBPF_CACHE=%s)", getenv("CUBPF_CACHE"));
		return;
	}
	if (store_cache_default_path(path, sizeof(path), err, sizeof(err)) != 0) {
		give_up("", err);
		return;
	}
	if (!objs) /* a fork()ed child opening again has them */
		objs = calloc(shim_live_session.nobjs + 1, sizeof(*objs));
	for (uint32_t i = 0; objs && i < shim_live_session.nobjs && !objs[i].data; i++)
		if (read_file(shim_live_session.paths[i], &objs[i]) != 0) {
			snprintf(err, sizeof(err), "cannot read the probe object %s", shim_live_session.paths[i]);
			give_up(path, err);
			return;
		}
	if (!objs) {
		give_up(path, "out of memory");
		return;
	}
	int v = 0;
	CUresult (*get_version)(int *) = (CUresult(*)(int *))shim_real("cuDriverGetVersion");
	if (!get_version || get_version(&v) != CUDA_SUCCESS) {
		give_up(path, "the driver's version is unknown");
		return;
	}
	driver_version = (uint32_t)v;
	rewriter_identity();
	/* a module load waits this long at most for another process's write (compile workers and
	 * the main process store at once); past it the module is not stored this time */
	struct store_cache_options o = {
		.log = store_log, .write_wait_ms = (int)shim_setting_env(SHIM_SET_CACHE_WAIT_MS, 5) };
	if (store_cache_env_options(&o, err, sizeof(err))) {
		give_up(path, err);
		return;
	}
	/* NULL, not path: the default's folders (never a missing HOME) are made by the store */
	struct store_cache *c = store_cache_open(getenv("CUBPF_CACHE") ? path : NULL, &o, err,
						 sizeof(err));
	if (!c) {
		give_up(path, err);
		return;
	}
	pthread_rwlock_wrlock(&cache_rw);
	cache = c;
	atomic_store(&state, CACHE_OPEN);
	pthread_rwlock_unlock(&cache_rw);
	shim_log(SHIM_LOG_DEBUG, "live: module cache %s (%s)", path, rewriter);
}

/* Opens the database at the first use; false when the cache is off. */
static bool ready(void)
{
	int s = atomic_load(&state);
	if (s == CACHE_UNOPENED) {
		pthread_mutex_lock(&open_lock);
		if (atomic_load(&state) == CACHE_UNOPENED)
			open_cache();
		pthread_mutex_unlock(&open_lock);
		s = atomic_load(&state);
	}
	return s == CACHE_OPEN;
}

/* ---- key, lookup, put ------------------------------------------------------------------------- */

bool shim_live_cache_key(const void *image, size_t size, uint32_t sm, const char *origin,
		    store_key *key, store_key *alt)
{
	if (!ready())
		return false;
	struct store_key_input in = {
		.image = { image, size }, .programs = objs, .nprograms = shim_live_session.nobjs,
		.rewriter_version = rewriter, .sm = sm, .driver_version = driver_version,
		.jit_options = jit_options(), .kernel_glob = shim_live_session.kernel_glob,
		.kernel_id_base = shim_live_kernel_next_id(), .origin = origin,
	};
	store_key_compute(&in, key);
	in.kernel_id_base = 0; /* (ids start at 1: no load's key) */
	store_key_compute(&in, alt);
	return true;
}

/* ---- the same module under another id base, in this process ------------------------------
 * A module loaded again (in another context: an application that makes contexts in a loop, a
 * process with several GPUs) comes with another kernel id base, so another key: it was rewritten
 * and JIT-compiled again.  Its kernels have their ids by then, so the entry made or found for it
 * earlier in this process fits (its manifest says so: a hit claims the ids): the key without the
 * base (alt) remembers the key of that entry.  The most recent ALIASES modules. */
#define ALIASES 256
static struct {
	store_key alt, key;
	bool used;
} aliases[ALIASES];
static unsigned alias_next;
static pthread_mutex_t alias_lock = PTHREAD_MUTEX_INITIALIZER;

void shim_live_cache_alias_note(const store_key *alt, const store_key *key)
{
	pthread_mutex_lock(&alias_lock);
	unsigned i = 0;
	while (i < ALIASES && !(aliases[i].used && !memcmp(&aliases[i].alt, alt, sizeof(*alt))))
		i++;
	if (i == ALIASES)
		i = alias_next++ % ALIASES;
	aliases[i].alt = *alt;
	aliases[i].key = *key;
	aliases[i].used = true;
	pthread_mutex_unlock(&alias_lock);
}

bool shim_live_cache_alias_find(const store_key *alt, store_key *key)
{
	bool found = false;
	pthread_mutex_lock(&alias_lock);
	for (unsigned i = 0; i < ALIASES && !found; i++)
		if (aliases[i].used && !memcmp(&aliases[i].alt, alt, sizeof(*alt))) {
			*key = aliases[i].key;
			found = true;
		}
	pthread_mutex_unlock(&alias_lock);
	return found;
}

int shim_live_cache_get(const store_key *key, struct store_cache_entry *e)
{
	int rc = -1;
	memset(e, 0, sizeof(*e));
	pthread_rwlock_rdlock(&cache_rw);
	if (cache && !shim_live_cache_off())
		rc = store_cache_lookup(cache, key, e, STORE_CACHE_NO_PTX);
	if (rc < 0 && cache && !shim_live_cache_off())
		give_up(store_cache_path(cache), store_cache_error(cache));
	pthread_rwlock_unlock(&cache_rw);
	return rc;
}

void shim_live_cache_put(const store_key *key, const struct store_cache_entry *e)
{
	pthread_rwlock_rdlock(&cache_rw);
	if (cache && !shim_live_cache_off()) {
		int rc = store_cache_put(cache, key, e);
		if (rc == 0)
			atomic_fetch_add(&shim_live_session.n.cache_puts, 1);
		else if (rc > 0) /* another process was writing: the next load stores it */
			shim_log(SHIM_LOG_DEBUG, "live: %s not cached: %s", e->name,
				 store_cache_error(cache));
		else if (strstr(store_cache_error(cache), "larger than the cache limit"))
			shim_log(SHIM_LOG_INFO, "live: %s not cached: %s", e->name,
				 store_cache_error(cache)); /* this one only: the cache works */
		else
			give_up(store_cache_path(cache), store_cache_error(cache));
	}
	pthread_rwlock_unlock(&cache_rw);
}

void shim_live_cache_drop(const store_key *key)
{
	pthread_rwlock_rdlock(&cache_rw);
	if (cache && !shim_live_cache_off() && store_cache_delete(cache, key) < 0)
		give_up(store_cache_path(cache), store_cache_error(cache));
	pthread_rwlock_unlock(&cache_rw);
}

/* ---- the manifest: the kernel ids an entry was made with ---------------------------------------
 * Text, "cubpf-kernels 1 N\n" then N lines "ID NAME\n" in the order the rewriter asked for them
 * (new names get consecutive ids in that order). */

int shim_live_manifest_add(struct live_manifest *m, const char *name, uint32_t id)
{
	if (m->failed)
		return -1;
	if (id >= (1u << 20)) { /* a hashed id (shim_live_kernel_id out of memory): not replayable */
		m->failed = true;
		return -1;
	}
	if (id >= m->seen_cap) {
		size_t cap = m->seen_cap ? m->seen_cap : 256;
		while (cap <= id)
			cap *= 2;
		uint8_t *s = realloc(m->seen, cap);
		if (!s) {
			m->failed = true;
			return -1;
		}
		memset(s + m->seen_cap, 0, cap - m->seen_cap);
		m->seen = s, m->seen_cap = cap;
	}
	if (m->seen[id])
		return 0;
	m->seen[id] = 1;
	size_t need = m->len + strlen(name) + 16;
	if (need > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 4096;
		while (cap < need)
			cap *= 2;
		char *t = realloc(m->text, cap);
		if (!t) {
			m->failed = true;
			return -1;
		}
		m->text = t, m->cap = cap;
	}
	m->len += (size_t)sprintf(m->text + m->len, "%u %s\n", id, name);
	m->count++;
	return 0;
}

char *shim_live_manifest_finish(struct live_manifest *m, size_t *size)
{
	char head[48];
	int h = snprintf(head, sizeof(head), "cubpf-kernels 1 %u\n", m->count);
	char *out = m->failed ? NULL : malloc((size_t)h + m->len + 1);
	if (out) {
		memcpy(out, head, (size_t)h);
		if (m->len)
			memcpy(out + h, m->text, m->len);
		out[h + m->len] = 0;
		*size = (size_t)h + m->len;
	}
	shim_live_manifest_reset(m);
	return out;
}

void shim_live_manifest_reset(struct live_manifest *m)
{
	free(m->text);
	free(m->seen);
	memset(m, 0, sizeof(*m));
}

int shim_live_manifest_claim(const void *data, size_t size, uint32_t *count, char *label, size_t n)
{
	const char *p = data, *end = p + size;
	unsigned cnt = 0;
	int off = 0;
	if (!size || p[size - 1] != '\n' || sscanf(p, "cubpf-kernels 1 %u\n%n", &cnt, &off) != 1 ||
	    off <= 0 || cnt > size)
		return -1;
	const char **names = calloc(cnt + 1, sizeof(*names));
	uint32_t *ids = calloc(cnt + 1, sizeof(*ids));
	char *copy = malloc(size - (size_t)off + 1);
	int rc = -1;
	uint32_t i = 0;
	if (!names || !ids || !copy)
		goto out;
	memcpy(copy, p + off, size - (size_t)off);
	copy[size - (size_t)off] = 0;
	for (char *q = copy; i < cnt && q < copy + (end - (p + off)); i++) {
		char *sp = strchr(q, ' '), *nl = sp ? strchr(sp, '\n') : NULL, *e;
		if (!sp || !nl)
			goto out;
		unsigned long id = strtoul(q, &e, 10);
		if (e != sp || sp == q || id == 0 || id > UINT32_MAX)
			goto out;
		*nl = 0;
		ids[i] = (uint32_t)id;
		names[i] = sp + 1;
		q = nl + 1;
	}
	if (i != cnt)
		goto out;
	if (label && n)
		snprintf(label, n, "%s%s", cnt ? names[0] : "module", cnt > 1 ? ", ..." : "");
	rc = shim_live_kernel_ids_claim(names, ids, cnt) == 1 ? 0 : 1;
	*count = cnt;
out:
	free(names);
	free(ids);
	free(copy);
	return rc;
}

/* ---- exit and fork -------------------------------------------------------------------------- */

void shim_live_cache_close(void)
{
	pthread_rwlock_wrlock(&cache_rw);
	struct store_cache *c = cache;
	cache = NULL;
	if (atomic_load(&state) == CACHE_OPEN)
		atomic_store(&state, CACHE_OFF);
	pthread_rwlock_unlock(&cache_rw);
	store_cache_close(c); /* writes the use counts */
}

void shim_live_cache_fork_prepare(void)
{
	pthread_mutex_lock(&open_lock);
	pthread_rwlock_wrlock(&cache_rw);
}

void shim_live_cache_fork_parent(void)
{
	pthread_rwlock_unlock(&cache_rw);
	pthread_mutex_unlock(&open_lock);
}

/* sqlite connections must not cross fork(): the child leaves its copy of the parent's alone
 * (never closed: closing would touch the parent's locks through shared descriptors) and opens
 * its own at its first lookup. */
void shim_live_cache_fork_child(void)
{
	if (atomic_load(&state) == CACHE_OPEN) {
		parents_cache = cache;
		cache = NULL;
		atomic_store(&state, CACHE_UNOPENED);
	}
	/* Made afresh, not unlocked: glibc's rwlock remembers its writer's thread id, which is
	 * the parent's here, so an unlock in the child leaves it held (the child's first module
	 * load then waited forever). */
	pthread_rwlock_init(&cache_rw, NULL);
	pthread_mutex_unlock(&open_lock);
	pthread_mutex_init(&alias_lock, NULL);
}
