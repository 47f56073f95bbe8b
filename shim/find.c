/* shim/find.c: finding and loading the real driver.
 *
 * Order: CUBPF_REAL_LIBCUDA (only it, when set: an explicit choice that fails loudly), then the
 * folders of LD_LIBRARY_PATH (what the dynamic linker would have found had we not been first),
 * then ldconfig's cache, then the usual driver folders.  A candidate that is this very file
 * (same device and inode) or another copy of the shim (it carries a .note.cubpf section) is
 * skipped: loading it would forward calls back into a shim.
 *
 * dlopen flags: RTLD_NOW | RTLD_LOCAL.  RTLD_LOCAL keeps the real driver's cu* names out of the
 * global scope, so that later lookups by the application keep finding ours.  We do not use
 * RTLD_DEEPBIND: it would make the driver's own libc references bypass an allocator the
 * application preloads (jemalloc, tcmalloc), and sanitizer runtimes refuse it.  The driver binds
 * its internal calls to itself, and if it ever called an exported name through the global scope
 * the call would reach one of our trampolines and come straight back, which is still correct.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/internal.h"
#include "shim/libsearch.h"

struct search {
	char *path;          /* out: chosen path */
	size_t pathlen;
	char *why;           /* what was tried, for the message when nothing loads */
	size_t whylen;
	dev_t self_dev;
	ino_t self_ino;
	void *handle;
};

static void note(struct search *s, const char *fmt, const char *arg)
{
	size_t used = strlen(s->why);
	if (used + 2 >= s->whylen)
		return;
	snprintf(s->why + used, s->whylen - used, used ? "; " : "");
	used = strlen(s->why);
	snprintf(s->why + used, s->whylen - used, fmt, arg);
}

/* Tries one candidate path; returns 1 when it is now the real driver. */
static int try_path(struct search *s, const char *path)
{
	struct stat st;
	if (s->handle || stat(path, &st) != 0)
		return s->handle != NULL;
	/* dlopen opens and reads without looking first: a FIFO there (CUBPF_REAL_LIBCUDA=FIFO)
	 * blocked the application forever */
	if (!S_ISREG(st.st_mode)) {
		note(s, "%s is not a regular file", path);
		return 0;
	}
	if (st.st_dev == s->self_dev && st.st_ino == s->self_ino) {
		shim_log(SHIM_LOG_DEBUG, "%s is this shim, skipped", path);
		return 0;
	}
	if (shim_is_cubpf_file(path)) {
		note(s, "%s is a cubpf shim, skipped", path);
		shim_log(SHIM_LOG_DEBUG, "%s is a cubpf shim, skipped", path);
		return 0;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		note(s, "%s", e ? e : path);
		return 0;
	}
	s->handle = h;
	snprintf(s->path, s->pathlen, "%s", path);
	return 1;
}

/* Only libcuda.so.1, the name the dynamic linker looks for: a folder holding just libcuda.so
 * is the toolkit's link-time stub folder, which the application would not have loaded. */
static void try_dir(struct search *s, const char *dir, size_t len)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%.*s/libcuda.so.1", (int)len, dir) < (int)sizeof(path))
		try_path(s, path);
}

static void try_path_list(struct search *s, const char *list)
{
	while (list && *list && !s->handle) {
		const char *end = strchrnul(list, ':');
		if (end > list)
			try_dir(s, list, (size_t)(end - list));
		list = *end ? end + 1 : end;
	}
}

static int try_cached(void *ctx, const char *path)
{
	return try_path(ctx, path);
}

void *shim_find_driver(char *path, size_t pathlen, char *why, size_t whylen)
{
	struct search s = { .path = path, .pathlen = pathlen, .why = why, .whylen = whylen };
	Dl_info self;
	struct stat st;
	why[0] = 0;
	if (dladdr((void *)shim_find_driver, &self) && self.dli_fname && stat(self.dli_fname, &st) == 0) {
		s.self_dev = st.st_dev;
		s.self_ino = st.st_ino;
	}
	const char *env = getenv("CUBPF_REAL_LIBCUDA");
	if (env && *env) {
		if (!try_path(&s, env) && !why[0])
			note(&s, "CUBPF_REAL_LIBCUDA=%s is not a loadable driver", env);
		return s.handle;
	}
	try_path_list(&s, getenv("LD_LIBRARY_PATH"));
	if (!s.handle)
		shim_ldcache_each("/etc/ld.so.cache", "libcuda.so.1", try_cached, &s);
	try_path_list(&s, "/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/local/nvidia/lib64:"
			  "/usr/lib/wsl/lib:/usr/lib");
	if (!s.handle)
		note(&s, "searched %s", "LD_LIBRARY_PATH, /etc/ld.so.cache, /usr/lib/x86_64-linux-gnu, "
		     "/usr/lib64, /usr/local/nvidia/lib64, /usr/lib/wsl/lib");
	return s.handle;
}
