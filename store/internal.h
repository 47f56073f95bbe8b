/* store/internal.h: what the files of store/ share and nobody else sees.
 *
 * store_file_open: the one way store/ opens a file it is given by path (a trace to read, the
 * cache database): never blocks on a FIFO or a device (O_NONBLOCK, then fstat), never follows a
 * symbolic link where asked not to, and refuses anything but a regular file with a message.
 *
 * store_cache_trust: whether a cache database may be used, given who can write it and the
 * folders above it (store/cache_trust.c). */
#ifndef CUBPF_STORE_INTERNAL_H
#define CUBPF_STORE_INTERNAL_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define STORE_FILE_NOFOLLOW 0x1u /* a symbolic link at path is refused, not followed */

/* Opens path read-only (O_CLOEXEC; O_NONBLOCK cleared once it is known to be a regular file)
 * and fills *st.  Returns the descriptor, -1 with errno ENOENT and no message when nothing is
 * there, or -1 with a message in err: "cannot open PATH: ...", "PATH is a FIFO, not a regular
 * file", "PATH is a symbolic link ...". */
int store_file_open(const char *path, unsigned flags, struct stat *st, char *err, size_t errlen);

/* Who the cache trusts besides the process's effective user and root. */
struct store_trust {
	int group_trusted;   /* members of gid may write the cache (an explicit setting) */
	gid_t gid;
	int read_only;       /* the database is only read: its owner is trusted too */
};

/* Checks the database at path (which may not exist yet), its -wal and -shm, the folder that
 * holds them and every folder above: none may be writable by, or owned by, a user other than
 * this process's effective user and root, unless trusted as above.  Folders above the
 * database's own may be writable by all when sticky (/tmp): nobody can then move or replace
 * what another user put there.  A symbolic link for the database itself is refused; one among
 * the folders counts as its owner's.  0 with the database's path through no link in resolved
 * (for sqlite's SQLITE_OPEN_NOFOLLOW, which refuses a link anywhere in the path), or -1 with
 * the reason and what to do in err. */
int store_cache_trust(const char *path, const struct store_trust *t, char *resolved,
		      size_t rlen, char *err, size_t errlen);

#endif
