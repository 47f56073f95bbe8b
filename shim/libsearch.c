/* shim/libsearch.c: what finding a real library needs, shared by the shim's driver search
 * (find.c) and the drop-in libraries' (shim/dropin/): ldconfig's cache, read without running
 * ldconfig, and the test for a cubpf library (one that must never be taken for the real one).
 * Depends on cubin's ELF reader and glibc only; never prints.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin/cubin.h"
#include "shim/libsearch.h"

int shim_is_cubpf_file(const char *path)
{
	char err[CUBIN_ERRLEN + 4096];
	size_t size = 0;
	int fd = cubin_file_open(path, &size, err, sizeof(err)); /* a FIFO: not waited on */
	if (fd < 0)
		return 0;
	int found = 0;
	if (size > 64) {
		void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map != MAP_FAILED) {
			struct cubin_elf elf;
			struct cubin_elf_section sec;
			found = cubin_elf_open(&elf, map, size) == 0 &&
				cubin_elf_section_by_name(&elf, ".note.cubpf", &sec) == 0;
			munmap(map, size);
		}
	}
	close(fd);
	return found;
}

/* New format ("glibc-ld.so.cache1.1", possibly after an old-format part): a 48-byte header,
 * then entries {i32 flags; u32 key; u32 value; u32 osversion; u64 hwcap} whose string offsets
 * count from the start of that header. */
static int ldcache_image(const uint8_t *data, size_t size, const char *soname,
			 int (*fn)(void *ctx, const char *path), void *ctx)
{
	static const char magic[] = "glibc-ld.so.cache1.1";
	const uint8_t *hdr = memmem(data, size, magic, sizeof(magic) - 1);
	if (!hdr || (size_t)(data + size - hdr) < 48)
		return 0;
	size_t avail = (size_t)(data + size - hdr);
	uint32_t nlibs;
	memcpy(&nlibs, hdr + 20, 4);
	if (nlibs > (avail - 48) / 24)
		return 0;
	for (uint32_t i = 0; i < nlibs; i++) {
		uint32_t key, value;
		memcpy(&key, hdr + 48 + 24 * i + 4, 4);
		memcpy(&value, hdr + 48 + 24 * i + 8, 4);
		if (key >= avail || value >= avail || !memchr(hdr + key, 0, avail - key) ||
		    !memchr(hdr + value, 0, avail - value))
			continue;
		if (!strcmp((const char *)hdr + key, soname) && fn(ctx, (const char *)hdr + value))
			return 1;
	}
	return 0;
}

int shim_ldcache_each(const char *cache, const char *soname,
		      int (*fn)(void *ctx, const char *path), void *ctx)
{
	int fd = open(cache, O_RDONLY | O_CLOEXEC);
	struct stat st;
	int done = 0;
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (64 << 20)) {
		void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map != MAP_FAILED) {
			done = ldcache_image(map, (size_t)st.st_size, soname, fn, ctx);
			munmap(map, (size_t)st.st_size);
		}
	}
	close(fd);
	return done;
}
