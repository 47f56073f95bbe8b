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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin/cubin.h"
#include "shim/internal.h"

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

/* True when the file is a cubpf shim (ours or another copy): its ELF has .note.cubpf. */
static int is_cubpf_shim(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	int found = 0;
	if (fstat(fd, &st) == 0 && st.st_size > 64) {
		void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map != MAP_FAILED) {
			struct cubin_elf elf;
			struct cubin_elf_section sec;
			found = cubin_elf_open(&elf, map, (size_t)st.st_size) == 0 &&
				cubin_elf_section_by_name(&elf, ".note.cubpf", &sec) == 0;
			munmap(map, (size_t)st.st_size);
		}
	}
	close(fd);
	return found;
}

/* Tries one candidate path; returns 1 when it is now the real driver. */
static int try_path(struct search *s, const char *path)
{
	struct stat st;
	if (s->handle || stat(path, &st) != 0)
		return s->handle != NULL;
	if (st.st_dev == s->self_dev && st.st_ino == s->self_ino) {
		shim_log(SHIM_LOG_DEBUG, "%s is this shim, skipped", path);
		return 0;
	}
	if (is_cubpf_shim(path)) {
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

/* ldconfig's cache, new format ("glibc-ld.so.cache1.1", possibly after an old-format part):
 * a 48-byte header, then entries {i32 flags; u32 key; u32 value; u32 osversion; u64 hwcap}
 * whose string offsets count from the start of that header. */
static void try_ldcache_image(struct search *s, const uint8_t *data, size_t size)
{
	static const char magic[] = "glibc-ld.so.cache1.1";
	const uint8_t *hdr = memmem(data, size, magic, sizeof(magic) - 1);
	if (!hdr || (size_t)(data + size - hdr) < 48)
		return;
	size_t avail = (size_t)(data + size - hdr);
	uint32_t nlibs;
	memcpy(&nlibs, hdr + 20, 4);
	if (nlibs > (avail - 48) / 24)
		return;
	for (uint32_t i = 0; i < nlibs && !s->handle; i++) {
		uint32_t key, value;
		memcpy(&key, hdr + 48 + 24 * i + 4, 4);
		memcpy(&value, hdr + 48 + 24 * i + 8, 4);
		if (key >= avail || value >= avail || !memchr(hdr + key, 0, avail - key) ||
		    !memchr(hdr + value, 0, avail - value))
			continue;
		if (!strcmp((const char *)hdr + key, "libcuda.so.1"))
			try_path(s, (const char *)hdr + value);
	}
}

static void try_ldcache(struct search *s)
{
	int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (64 << 20)) {
		void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map != MAP_FAILED) {
			try_ldcache_image(s, map, (size_t)st.st_size);
			munmap(map, (size_t)st.st_size);
		}
	}
	close(fd);
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
		try_ldcache(&s);
	try_path_list(&s, "/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/local/nvidia/lib64:"
			  "/usr/lib/wsl/lib:/usr/lib");
	if (!s.handle)
		note(&s, "searched %s", "LD_LIBRARY_PATH, /etc/ld.so.cache, /usr/lib/x86_64-linux-gnu, "
		     "/usr/lib64, /usr/local/nvidia/lib64, /usr/lib/wsl/lib");
	return s.handle;
}
