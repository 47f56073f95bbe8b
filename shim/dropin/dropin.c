/* shim/dropin/dropin.c: finding the real libnvrtc/libnvJitLink behind a drop-in and filling its
 * trampolines' slots.
 *
 * Search order: the library's CUBPF_REAL_* variable (only it, when set), then the folders of
 * LD_LIBRARY_PATH (what the dynamic linker would have found had cubpf's folder not been first),
 * then the folders of the objects already loaded in the process (a Python process that loaded
 * the CUDA wheels' libcublas from site-packages/nvidia/cu13/lib finds the wheels' libnvrtc
 * beside it), then ldconfig's cache, then $CUDA_HOME/lib64, $CUDA_PATH/lib64 and
 * /usr/local/cuda/lib64.  A candidate that is this file (same device and inode) or another of
 * cubpf's libraries (.note.cubpf) is skipped.  dlopen with RTLD_NOW | RTLD_LOCAL, as the shim
 * loads the driver (find.c says why).
 *
 * Log lines (one when the real library is missing; more with CUBPF_LOG=info or debug) go where
 * the shim's go: CUBPF_LOG_FD when set, else stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/dropin/dropin.h"
#include "shim/libsearch.h"

/* Marks the file as one of cubpf's libraries: neither this search, the shim's nor the export
 * generators take an installed copy for the real library. */
__attribute__((section(".note.cubpf"), used, aligned(4)))
static const struct { unsigned namesz, descsz, type; char name[8]; } dropin_note = {
	6, 0, 1, "cubpf",
};

struct search {
	struct dropin_lib *lib;
	dev_t self_dev;
	ino_t self_ino;
	char tried[1024];
};

int shim_dropin_disabled(void)
{
	const char *d = getenv("CUBPF_DISABLE");
	return d && *d && strcmp(d, "0") != 0;
}

static int try_path(struct search *s, const char *path)
{
	struct stat st;
	if (s->lib->handle || stat(path, &st) != 0)
		return s->lib->handle != NULL;
	if (!S_ISREG(st.st_mode)) { /* dlopen would block on a FIFO, as the driver search did */
		size_t used = strlen(s->tried);
		snprintf(s->tried + used, sizeof(s->tried) - used, "%s%s is not a regular file",
			 used ? "; " : "", path);
		return 0;
	}
	if ((st.st_dev == s->self_dev && st.st_ino == s->self_ino) || shim_is_cubpf_file(path))
		return 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		size_t used = strlen(s->tried);
		snprintf(s->tried + used, sizeof(s->tried) - used, "%s%s", used ? "; " : "",
			 e ? e : path);
		return 0;
	}
	s->lib->handle = h;
	snprintf(s->lib->path, sizeof(s->lib->path), "%s", path);
	return 1;
}

static int try_dir(struct search *s, const char *dir, size_t len)
{
	char path[4096];
	if (len == 0 || snprintf(path, sizeof(path), "%.*s/%s", (int)len, dir, s->lib->soname) >=
	    (int)sizeof(path))
		return 0;
	return try_path(s, path);
}

static void try_path_list(struct search *s, const char *list)
{
	while (list && *list && !s->lib->handle) {
		const char *end = strchrnul(list, ':');
		try_dir(s, list, (size_t)(end - list));
		list = *end ? end + 1 : end;
	}
}

/* dl_iterate_phdr holds the loader's lock, under which dlopen would deadlock: the folders are
 * collected first (a ':'-separated list, duplicates kept: they are cheap to retry) and tried
 * after. */
struct folders {
	char list[16384];
	size_t used;
};

static int collect_loaded(struct dl_phdr_info *info, size_t size, void *ctx)
{
	(void)size;
	struct folders *f = ctx;
	const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	size_t len = slash ? (size_t)(slash - info->dlpi_name) : 0;
	if (len && f->used + len + 2 < sizeof(f->list)) {
		memcpy(f->list + f->used, info->dlpi_name, len);
		f->used += len;
		f->list[f->used++] = ':';
		f->list[f->used] = 0;
	}
	return 0;
}

static void try_loaded(struct search *s)
{
	struct folders *f = calloc(1, sizeof(*f));
	if (!f)
		return;
	dl_iterate_phdr(collect_loaded, f);
	try_path_list(s, f->list);
	free(f);
}

static int try_cached(void *ctx, const char *path)
{
	return try_path(ctx, path);
}

static void try_toolkits(struct search *s)
{
	const char *homes[] = { getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda" };
	for (size_t i = 0; i < sizeof(homes) / sizeof(homes[0]) && !s->lib->handle; i++) {
		char dir[4096];
		if (homes[i] && *homes[i] &&
		    snprintf(dir, sizeof(dir), "%s/lib64", homes[i]) < (int)sizeof(dir))
			try_dir(s, dir, strlen(dir));
	}
}

static void find_real(struct search *s)
{
	const char *env = getenv(s->lib->env);
	if (env && *env) {
		try_path(s, env);
		return;
	}
	try_path_list(s, getenv("LD_LIBRARY_PATH"));
	if (!s->lib->handle)
		try_loaded(s);
	if (!s->lib->handle)
		shim_ldcache_each("/etc/ld.so.cache", s->lib->soname, try_cached, s);
	if (!s->lib->handle)
		try_toolkits(s);
}

static int log_level(void)
{
	const char *v = getenv("CUBPF_LOG");
	if (!v)
		return 1;
	return !strcmp(v, "debug") ? 3 : !strcmp(v, "info") ? 2 : !strcmp(v, "off") ? 0 : 1;
}

/* One log line (level 1: warning, 2: info, 3: debug), through CUBPF_LOG_FD like the shim's. */
void shim_dropin_log(int level, const char *fmt, ...)
{
	if (level > log_level())
		return;
	char line[1536];
	int n = snprintf(line, sizeof(line), "cubpf: ");
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	const char *fdv = getenv("CUBPF_LOG_FD");
	int fd = fdv && *fdv ? atoi(fdv) : 2;
	if (write(fd, line, (size_t)n) < 0 && fd != 2 && write(2, line, (size_t)n) < 0)
		return;
}

int shim_dropin_load(struct dropin_lib *lib)
{
	struct search s = { .lib = lib };
	Dl_info self;
	struct stat st;
	if (dladdr((void *)shim_dropin_load, &self) && self.dli_fname && stat(self.dli_fname, &st) == 0) {
		s.self_dev = st.st_dev;
		s.self_ino = st.st_ino;
	}
	find_real(&s);
	unsigned missing = 0;
	for (size_t i = 0; i < lib->count; i++) {
		void *p = lib->handle ? dlsym(lib->handle, lib->names[i]) : NULL;
		if (!p) {
			missing++;
			p = strstr(lib->names[i], "ErrorString") ? lib->missing_string : lib->missing;
		}
		__atomic_store_n(&lib->slots[i], p, __ATOMIC_RELEASE);
	}
	if (!lib->handle) {
		shim_dropin_log(1, "no real %s found (%s%s); its functions fail (set %s to its path)",
			   lib->soname, s.tried[0] ? s.tried : "searched LD_LIBRARY_PATH, the folders "
			   "of loaded libraries, /etc/ld.so.cache, CUDA_HOME, /usr/local/cuda",
			   "", lib->env);
		snprintf(lib->path, sizeof(lib->path), "%s", s.tried);
		return -1;
	}
	shim_dropin_log(3, "real %s: %s (%u of %zu names missing)%s", lib->soname, lib->path, missing,
		   lib->count, shim_dropin_disabled() ? " (CUBPF_DISABLE: pass-through)" : "");
	return 0;
}

void *shim_dropin_slot(struct dropin_lib *lib, unsigned index)
{
	return index < lib->count ? __atomic_load_n(&lib->slots[index], __ATOMIC_ACQUIRE) : NULL;
}

/* Each drop-in is its own shared object with one library: pthread_once's routine takes no
 * argument, so the library it loads is kept here. */
static struct dropin_lib *the_lib;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load_once(void)
{
	shim_dropin_load(the_lib);
}

void *shim_dropin_lazy_slot(struct dropin_lib *lib, unsigned index)
{
	the_lib = lib;
	pthread_once(&once, load_once);
	return shim_dropin_slot(lib, index);
}

void *shim_dropin_real(struct dropin_lib *lib, const char *name)
{
	for (size_t i = 0; i < lib->count; i++)
		if (!strcmp(lib->names[i], name))
			return shim_dropin_slot(lib, (unsigned)i);
	return NULL;
}

int shim_dropin_has_option(int n, const char *const *opts, const char *const *names)
{
	for (int i = 0; i < n && opts; i++)
		for (size_t j = 0; opts[i] && names[j]; j++)
			if (!strcmp(opts[i], names[j]))
				return 1;
	return 0;
}

const char **shim_dropin_add_option(int n, const char *const *opts, const char *extra)
{
	const char **out = malloc(sizeof(*out) * (size_t)(n + 1));
	if (!out)
		return NULL;
	for (int i = 0; i < n; i++)
		out[i] = opts[i];
	out[n] = extra;
	return out;
}
