/* cubin/file.c: opening a file named by a path, for every module above store/.
 *
 * Paths come from users (CUBPF_PROGRAMS, CUBPF_REAL_LIBCUDA, `cubpf inspect FILE`), and not
 * everything at a path is a file: open(2) of a FIFO blocks until a writer comes (forever, for a
 * probe object read at the application's start), and a device may never end.  So a file is
 * opened without blocking, looked at through its descriptor (nothing can be swapped in between)
 * and taken only when it is a regular file.  store/ has the same for its own paths
 * (store/file.c): it may include nothing of ours. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin/cubin.h"

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

int cubin_file_open(const char *path, size_t *size, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st)) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is %s, not a regular file", path, kind_name(st.st_mode));
		close(fd);
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (size)
		*size = (size_t)st.st_size;
	return fd;
}

uint8_t *cubin_file_read(const char *path, size_t max, size_t *size, char *err, size_t errlen)
{
	size_t want = 0, n = 0;
	int fd = cubin_file_open(path, &want, err, errlen);
	if (fd < 0)
		return NULL;
	if (want > max) {
		snprintf(err, errlen, "%s: %zu bytes, more than the %zu allowed", path, want, max);
		close(fd);
		return NULL;
	}
	uint8_t *buf = malloc(want ? want : 1);
	while (buf && n < want) { /* a file that shrinks meanwhile is read as it is now */
		ssize_t got = read(fd, buf + n, want - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
			free(buf);
			close(fd);
			return NULL;
		}
		if (!got)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (!buf)
		snprintf(err, errlen, "%s: out of memory for %zu bytes", path, want);
	*size = n;
	return buf;
}
