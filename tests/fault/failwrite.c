/* A preloaded write failure for the fault suite (LD_PRELOAD=failwrite.so): a disk that fills
 * for a moment, or an I/O error, where no file system of a set size can be mounted.
 *
 * Writes (write, pwrite, pwrite64) to files whose name ends with FAULT_WRITE_SUFFIX pass until
 * FAULT_WRITE_AFTER bytes have gone to such files; then the next FAULT_WRITE_FAILS calls fail:
 * the first writes half of what it was given (a short write, as a filling disk does), the
 * others write nothing and fail with FAULT_WRITE_ERRNO (default ENOSPC).  After that, writes
 * pass again: the disk had room once more. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long long passed;
static int failed;

static long long env_ll(const char *name, long long def)
{
	const char *v = getenv(name);
	return v && *v ? strtoll(v, NULL, 10) : def;
}

/* Whether fd is a file the fault applies to. */
static int targeted(int fd)
{
	const char *suffix = getenv("FAULT_WRITE_SUFFIX");
	char link[64], path[4096];
	if (!suffix || !*suffix)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = 0;
	size_t s = strlen(suffix);
	return (size_t)n >= s && !strcmp(path + n - s, suffix);
}

/* How many of n bytes this call may write: n, a part of it, or -1 (fail with errno set). */
static ssize_t allowed(int fd, size_t n)
{
	if (!targeted(fd))
		return (ssize_t)n;
	long long after = env_ll("FAULT_WRITE_AFTER", -1), fails = env_ll("FAULT_WRITE_FAILS", 1);
	if (after < 0 || passed < after || failed >= fails) {
		passed += (long long)n;
		return (ssize_t)n;
	}
	if (failed++ == 0 && n > 1)
		return (ssize_t)(n / 2);
	errno = (int)env_ll("FAULT_WRITE_ERRNO", ENOSPC);
	return -1;
}

__attribute__((visibility("default"))) ssize_t write(int fd, const void *buf, size_t n)
{
	static ssize_t (*real)(int, const void *, size_t);
	if (!real)
		real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	ssize_t k = allowed(fd, n);
	return k < 0 ? -1 : real(fd, buf, (size_t)k);
}

__attribute__((visibility("default"))) ssize_t pwrite64(int fd, const void *buf, size_t n,
							 off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);
	if (!real)
		real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
	ssize_t k = allowed(fd, n);
	return k < 0 ? -1 : real(fd, buf, (size_t)k, off);
}

__attribute__((visibility("default"))) ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite64(fd, buf, n, off);
}
