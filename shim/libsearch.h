/* shim/libsearch.h: helpers for finding a real library (the driver, libnvrtc, libnvJitLink)
 * behind one of cubpf's: see libsearch.c. */
#ifndef CUBPF_SHIM_LIBSEARCH_H
#define CUBPF_SHIM_LIBSEARCH_H

/* 1 when the file is one of cubpf's libraries (its ELF carries a .note.cubpf section). */
int shim_is_cubpf_file(const char *path);

/* Calls fn(ctx, path) for every entry of ldconfig's cache file (normally /etc/ld.so.cache)
 * named soname, in the cache's order, until fn returns 1; returns 1 then, 0 otherwise (also
 * when the cache cannot be read). */
int shim_ldcache_each(const char *cache, const char *soname,
		      int (*fn)(void *ctx, const char *path), void *ctx);

#endif
