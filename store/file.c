/* store/file.c: opening a file store/ is given by path, the same way for every caller.
 *
 * A path is the user's to type, and not everything at a path is a file: a FIFO blocks open(2)
 * until a writer comes (forever, for `cubpf trace info FIFO`), a device may block reads or
 * never end.  So the file is opened without blocking, looked at through the descriptor (no
 * window between the look and the open) and taken only when it is a regular file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/internal.h"

static const char *kind_name(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISDIR(m))
		return "a folder";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

int store_file_open(const char *path, unsigned flags, struct stat *st, char *err, size_t errlen)
{
	int nofollow = flags & STORE_FILE_NOFOLLOW ? O_NOFOLLOW : 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | nofollow);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP && nofollow)
			snprintf(err, errlen, "%s is a symbolic link: cubpf does not follow one here; "
				 "name the file itself", path);
		else if (e != ENOENT)
			snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, st)) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		close(fd);
		errno = EIO;
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s is %s, not a regular file", path, kind_name(st->st_mode));
		close(fd);
		errno = EINVAL;
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}
